//! `toolwarden mcp`: serves the governed tools to one MCP client over stdin/stdout (tw-mcp), the
//! command an agent's `mcpServers` entry starts, with the configured upstream servers' tools
//! imported. Stdout carries only the protocol; warnings and logs go to stderr. Also `mcp review`
//! (quarantined upstream tools and their changes) and `mcp servers` (a connection check).
//!
//! SIGINT or SIGTERM, or the client no longer reading stdout, ends the session like the client
//! closing it: calls in flight are cancelled and still get their audit records before the runtime
//! closes.

use anyhow::bail;
use tokio_util::sync::CancellationToken;
use tw_mcp::Identity;
use tw_runtime::Runtime;
use tw_store::PinRow;

use crate::audit::time;
use crate::call::cancel_on_signal;
use crate::cli::McpCommand;
use crate::confirm::actor;
use crate::out::{errln, out, outln};
use crate::setup::Context;
use crate::table::Table;

/// Starts the configured upstream servers (returns once each connected or failed once).
pub(crate) async fn start_upstreams(
    rt: &Runtime,
    ctx: &Context,
    shutdown: &CancellationToken,
) -> tw_mcp::upstream::Supervisors {
    let servers: Vec<_> = ctx.places.config.upstream.values().cloned().collect();
    tw_mcp::upstream::start(rt, servers, shutdown.clone()).await
}

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
    let shutdown = cancel_on_signal();
    // A client that stops reading our stdout has left, whether or not it closed our stdin.
    let closed = crate::out::cancel_when_closed(&shutdown);
    let upstreams = start_upstreams(rt, ctx, &shutdown).await;
    let served = tw_mcp::serve_stdio(rt.clone(), identity, shutdown.clone()).await;
    // The upstream servers stop with the session.
    shutdown.cancel();
    upstreams.stopped().await;
    // The client stopped reading: the session ended for it (a reply that could not be written
    // may have ended it before the watch saw the pipe close).
    if closed.is_cancelled() || (served.is_err() && crate::out::reader_gone_now()) {
        return Err(crate::out::Closed.into());
    }
    served?;
    Ok(0)
}

pub(crate) async fn admin(rt: &Runtime, ctx: &Context, cmd: McpCommand) -> anyhow::Result<u8> {
    match cmd {
        McpCommand::Review { tool, accept, json } => review(rt, ctx, tool, accept, json).await,
        McpCommand::Servers { json } => servers(rt, ctx, json).await,
    }
}

/// The quarantined upstream tools (or the one named) with what changed, or with `accept` the
/// named tool's new definition pinned.
async fn review(
    rt: &Runtime,
    ctx: &Context,
    tool: Option<String>,
    accept: bool,
    as_json: bool,
) -> anyhow::Result<u8> {
    let pins = rt.store().upstream_pins().await?;
    let waiting: Vec<_> = pins
        .iter()
        .filter(|p| p.quarantined())
        .filter(|p| tool.as_deref().is_none_or(|t| named(p) == t))
        .collect();
    if let Some(t) = &tool
        && waiting.is_empty()
    {
        return not_quarantined(&pins, t);
    }
    if accept {
        accept_change(rt, ctx, waiting[0]).await
    } else if as_json {
        let rows: Vec<_> = waiting
            .iter()
            .map(|p| tw_mcp::upstream::review_entry(p))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        Ok(0)
    } else {
        print_changes(&waiting)
    }
}

/// The name an upstream tool is registered (and called) as: SERVER__TOOL.
fn named(p: &PinRow) -> String {
    tw_mcp::upstream::registered_name(&p.server, &p.tool)
}

/// Why `mcp review TOOL` has nothing to show: the tool is pinned and callable (exit 1), or no
/// server ever offered it (an error).
fn not_quarantined(pins: &[PinRow], t: &str) -> anyhow::Result<u8> {
    if pins.iter().any(|p| named(p) == t) {
        errln!("{t} is not quarantined: its server describes it as pinned");
        return Ok(1);
    }
    bail!("no upstream tool {t} has been pinned (is its server configured and was it started?)");
}

async fn accept_change(rt: &Runtime, ctx: &Context, p: &PinRow) -> anyhow::Result<u8> {
    match rt
        .upstreams()
        .accept_upstream_change(&p.server, &p.tool, &actor(ctx))
        .await?
    {
        Some(_) => {
            outln!(
                "accepted the new definition of {}: it is pinned and callable again",
                named(p)
            )?;
            Ok(0)
        }
        None => {
            errln!("{} was accepted meanwhile", named(p));
            Ok(1)
        }
    }
}

/// Each quarantined tool with a unified diff from its pinned definition to the one its server
/// describes now, and the command that accepts it.
fn print_changes(waiting: &[&PinRow]) -> anyhow::Result<u8> {
    if waiting.is_empty() {
        outln!("no upstream tool is quarantined")?;
        return Ok(0);
    }
    for p in waiting {
        outln!(
            "{} (server {}, tool {}): changed since {}; pinned {} by {}",
            named(p),
            p.server,
            p.tool,
            p.pending_since.map(time).unwrap_or_default(),
            time(p.pinned_at),
            p.pinned_by
        )?;
        let before = serde_json::to_string_pretty(&p.definition)?;
        let after = serde_json::to_string_pretty(&p.pending_definition)?;
        out!(
            "{}",
            similar::TextDiff::from_lines(&before, &after)
                .unified_diff()
                .header("pinned", "now")
        )?;
        outln!("accept: toolwarden mcp review {} --accept\n", named(p))?;
    }
    Ok(0)
}

async fn servers(rt: &Runtime, ctx: &Context, as_json: bool) -> anyhow::Result<u8> {
    let shutdown = CancellationToken::new();
    let upstreams = start_upstreams(rt, ctx, &shutdown).await;
    let status = rt.upstreams().upstream_status();
    shutdown.cancel();
    upstreams.stopped().await;
    let down = status.iter().any(|s| !s.connected);
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&status)?)?;
    } else {
        let mut t = Table::new(&["SERVER", "CONNECTED", "TOOLS", "QUARANTINED", "ERROR"]);
        for s in &status {
            t.row(vec![
                s.server.clone(),
                if s.connected { "yes" } else { "no" }.to_owned(),
                s.tools.join(", "),
                s.quarantined.join(", "),
                s.error.clone().unwrap_or_default(),
            ]);
        }
        out!("{}", t.render())?;
    }
    Ok(u8::from(down))
}
