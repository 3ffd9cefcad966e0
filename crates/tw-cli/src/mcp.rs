//! `toolwarden mcp`: serves the governed tools to one MCP client over stdin/stdout (tw-mcp), the
//! command an agent's `mcpServers` entry starts. Stdout carries only the protocol; warnings and
//! logs go to stderr.
//!
//! SIGINT or SIGTERM ends the session like the client closing it: calls in flight are cancelled
//! and still get their audit records before the runtime closes.

use tw_mcp::Identity;
use tw_runtime::Runtime;

use crate::call::cancel_on_signal;
use crate::setup::Context;

/// Runs the session until the client disconnects or a signal ends it. `agent` is the agent id
/// given with `--agent` (or `TOOLWARDEN_AGENT`), which then replaces `mcp:<client name>`.
pub(crate) async fn serve(
    rt: &Runtime,
    ctx: &Context,
    agent: Option<String>,
) -> anyhow::Result<u8> {
    // A long-running host: test the sandbox now, not on the first strict call.
    rt.start_sandbox_self_test();
    let identity = Identity {
        agent,
        skill: ctx.caller.skill.clone(),
        user: ctx.caller.user.clone(),
    };
    tw_mcp::serve_stdio(rt.clone(), identity, cancel_on_signal()).await?;
    Ok(0)
}
