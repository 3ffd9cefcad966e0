//! `toolwarden serve`: the HTTP endpoint (tw-server) in the foreground, and the tokens that open
//! it. The first line on stdout is the MCP URL, so scripts and tests can wait for it; logs go to
//! stderr.

use std::net::SocketAddr;

use tw_runtime::Runtime;

use crate::audit::time;
use crate::call::cancel_on_signal;
use crate::cli::ServeCommand;
use crate::confirm::actor;
use crate::out::{errln, out, outln};
use crate::setup::Context;
use crate::table::Table;

pub(crate) async fn run(
    rt: &Runtime,
    ctx: &Context,
    listen: Option<SocketAddr>,
    cmd: Option<ServeCommand>,
) -> anyhow::Result<u8> {
    match cmd {
        None => serve(rt, ctx, listen).await,
        Some(ServeCommand::Token) => admin_token(rt),
        Some(ServeCommand::Issue { agent, label }) => issue(rt, ctx, &agent, label).await,
        Some(ServeCommand::Revoke { agent }) => revoke(rt, ctx, &agent).await,
        Some(ServeCommand::Tokens { all, json }) => tokens(rt, all, json).await,
    }
}

/// The administrator's token on stdout, and on stderr the file it is kept in.
fn admin_token(rt: &Runtime) -> anyhow::Result<u8> {
    let (token, path) = rt.tokens().admin_token()?;
    outln!("{token}")?;
    errln!("(from {})", path.display());
    Ok(0)
}

async fn issue(
    rt: &Runtime,
    ctx: &Context,
    agent: &str,
    label: Option<String>,
) -> anyhow::Result<u8> {
    let (token, row) = rt
        .tokens()
        .issue_api_token(agent, label, &actor(ctx))
        .await?;
    outln!("{token}")?;
    errln!(
        "token {} for agent {}: it reaches /mcp only; this is the only time it is shown",
        row.fingerprint,
        row.agent_id
    );
    Ok(0)
}

/// Revokes every live token of `agent`; exits 1 if it had none.
async fn revoke(rt: &Runtime, ctx: &Context, agent: &str) -> anyhow::Result<u8> {
    let revoked = rt.tokens().revoke_api_tokens(agent, &actor(ctx)).await?;
    if revoked.is_empty() {
        errln!("agent {agent} has no live token");
        return Ok(1);
    }
    outln!("revoked {} token(s) of agent {agent}", revoked.len())?;
    Ok(0)
}

/// Agents' tokens by fingerprint, the live ones or with `all` the revoked too.
async fn tokens(rt: &Runtime, all: bool, as_json: bool) -> anyhow::Result<u8> {
    let rows = rt.store().api_tokens(all).await?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(0);
    }
    let mut t = Table::new(&["AGENT", "TOKEN", "ISSUED", "BY", "REVOKED", "LABEL"]);
    for r in rows {
        t.row(vec![
            r.agent_id,
            format!("{}…", r.fingerprint),
            time(r.created_at),
            r.created_by,
            r.revoked_at.map(time).unwrap_or_default(),
            r.label.unwrap_or_default(),
        ]);
    }
    out!("{}", t.render())?;
    Ok(0)
}

async fn serve(rt: &Runtime, ctx: &Context, listen: Option<SocketAddr>) -> anyhow::Result<u8> {
    // A long-running host: test the sandbox now, not on the first strict call.
    rt.start_sandbox_self_test();
    let mut settings = ctx.places.config.serve.clone();
    if let Some(l) = listen {
        settings.listen = l;
    }
    let shutdown = cancel_on_signal();
    let upstreams = crate::mcp::start_upstreams(rt, ctx, &shutdown).await;
    let endpoint = tw_server::start(rt.clone(), &settings, shutdown.clone()).await?;
    // Whoever started us waits for this line; if they are gone (stdout closed), so are we: the
    // endpoint shuts down as on SIGTERM and the command ends quietly.
    let announced = outln!("{}", endpoint.mcp_url());
    if announced.is_ok() {
        errln!(
            "toolwarden: serving MCP at {} and the admin API at http://{}/api/v1; the \
             administrator's token is in {}",
            endpoint.mcp_url(),
            endpoint.addr,
            endpoint.token_file.display()
        );
    } else {
        shutdown.cancel();
    }
    endpoint.wait().await?;
    // Calls cut off by the shutdown still write their audit records before the runtime closes.
    tw_mcp::drain(rt).await;
    upstreams.stopped().await;
    announced?;
    Ok(0)
}
