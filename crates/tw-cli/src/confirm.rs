//! `toolwarden confirm`, `toolwarden grants` and `toolwarden mode`: the person in the loop. Answers
//! given here release (or refuse) calls waiting in any process on the same data directory.

use std::time::Duration;

use anyhow::{anyhow, bail};
use serde_json::Value;
use tw_core::OperationalMode;
use tw_runtime::{Answer, GrantSpec, Remember, Runtime, Who};
use tw_store::{ConfirmationQuery, ResolveOutcome};

use crate::audit::{now_us, time};
use crate::cli::{AnswerArgs, ConfirmCommand, GrantsCommand, ModeCommand};
use crate::out::{errln, out, outln};
use crate::setup::Context;
use crate::table::Table;

/// Who is answering: the person at the terminal.
pub(crate) fn actor(ctx: &Context) -> String {
    ctx.caller
        .user
        .clone()
        .unwrap_or_else(|| ctx.caller.agent_id.clone())
}

fn duration(s: Option<&str>) -> anyhow::Result<Option<Duration>> {
    s.map(|d| {
        humantime::parse_duration(d)
            .map_err(|e| anyhow!("{d:?} is not a duration (30m, 8h, 7d): {e}"))
    })
    .transpose()
}

fn remember(scope: &str) -> anyhow::Result<Remember> {
    Ok(match scope {
        "exact" => Remember::Exact,
        "tool" => Remember::Tool,
        pattern => match serde_json::from_str::<Value>(pattern) {
            Ok(Value::Object(map)) => Remember::Pattern(map),
            _ => bail!(
                "--remember takes `exact`, `tool` or a JSON object of argument patterns such as '{{\"path\": \"src/**\"}}'"
            ),
        },
    })
}

pub(crate) async fn confirm(
    rt: &Runtime,
    ctx: &Context,
    cmd: ConfirmCommand,
) -> anyhow::Result<u8> {
    match cmd {
        ConfirmCommand::List { all, json } => {
            let rows = if all {
                rt.confirmations()
                    .confirmations(&ConfirmationQuery {
                        state: None,
                        limit: tw_store::MAX_PAGE,
                    })
                    .await?
            } else {
                rt.confirmations().pending_confirmations().await?
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&rows)?)?;
                return Ok(0);
            }
            if rows.is_empty() {
                outln!("no calls are waiting for approval")?;
                return Ok(0);
            }
            let now = now_us();
            let mut table = Table::new(&[
                "ID",
                "STATE",
                "TOOL",
                "CALLER",
                "ARGUMENTS",
                "WHY",
                "EXPIRES",
            ]);
            for r in rows {
                let expires = if r.state == tw_store::ConfirmationState::Pending {
                    format!("in {} s", (r.expires_at - now).max(0) / 1_000_000)
                } else {
                    time(r.resolved_at.unwrap_or(r.expires_at))
                };
                table.row(vec![
                    r.id,
                    r.state.as_str().to_owned(),
                    r.tool,
                    r.agent_id,
                    r.arguments.to_string(),
                    r.reason,
                    expires,
                ]);
            }
            out!("{}", table.render())?;
            Ok(0)
        }
        ConfirmCommand::Approve(a) => answer(rt, ctx, a, true).await,
        ConfirmCommand::Deny(a) => answer(rt, ctx, a, false).await,
    }
}

async fn answer(rt: &Runtime, ctx: &Context, a: AnswerArgs, approve: bool) -> anyhow::Result<u8> {
    if !approve && (a.remember.is_some() || a.caller_only || a.any_caller || a.duration.is_some()) {
        bail!("--remember, --any-caller, --caller-only and --for only go with approve");
    }
    if a.remember.is_none() && (a.caller_only || a.any_caller || a.duration.is_some()) {
        bail!("--any-caller, --caller-only and --for describe a grant: give --remember too");
    }
    let grant = match &a.remember {
        Some(scope) => Some(GrantSpec {
            remember: remember(scope)?,
            // Unless told, whose calls it covers is the confirmation service's default.
            who: if a.any_caller {
                Some(Who::Anyone)
            } else if a.caller_only {
                Some(Who::SameCaller)
            } else {
                None
            },
            duration: duration(a.duration.as_deref())?,
        }),
        None => None,
    };
    let verdict = if approve {
        Answer::Approve { grant }
    } else {
        Answer::Deny
    };
    let ids = if a.all_pending {
        rt.confirmations()
            .pending_confirmations()
            .await?
            .into_iter()
            .map(|r| r.id)
            .collect()
    } else {
        a.ids
    };
    let mut failed = 0;
    for id in ids {
        let outcome = rt
            .confirmations()
            .answer(&id, verdict.clone(), &actor(ctx), a.note.as_deref())
            .await?;
        match outcome {
            ResolveOutcome::Resolved {
                confirmation,
                grant,
            } => {
                outln!(
                    "{} {} ({} for {})",
                    if approve { "approved" } else { "denied" },
                    confirmation.id,
                    confirmation.tool,
                    confirmation.agent_id
                )?;
                if let Some(g) = grant {
                    outln!("  remembered as grant {} ({})", g.id, g.scope.kind())?;
                }
            }
            ResolveOutcome::NotFound => {
                failed += 1;
                errln!("no confirmation with id {id}");
            }
            ResolveOutcome::AlreadyResolved { state, by, at } => {
                failed += 1;
                errln!(
                    "{id} was already {} {}at {}; nothing changed",
                    state.as_str(),
                    by.map_or(String::new(), |b| format!("by {b} ")),
                    time(at)
                );
            }
        }
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

pub(crate) async fn grants(rt: &Runtime, ctx: &Context, cmd: GrantsCommand) -> anyhow::Result<u8> {
    match cmd {
        GrantsCommand::List { all, json } => {
            let rows = rt.confirmations().grants(all).await?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&rows)?)?;
                return Ok(0);
            }
            if rows.is_empty() {
                outln!("no grants")?;
                return Ok(0);
            }
            let mut table = Table::new(&[
                "ID",
                "TOOL",
                "SCOPE",
                "ARGUMENTS",
                "CALLER",
                "BY",
                "EXPIRES",
                "REVOKED",
            ]);
            for g in rows {
                let args = match &g.scope {
                    tw_store::GrantScope::Exact(v) => v.to_string(),
                    tw_store::GrantScope::Pattern(m) => Value::Object(m.clone()).to_string(),
                    tw_store::GrantScope::Tool => String::new(),
                };
                table.row(vec![
                    g.id,
                    g.tool,
                    g.scope.kind().to_owned(),
                    args,
                    g.agent_id.unwrap_or_else(|| "any".to_owned()),
                    g.created_by,
                    g.expires_at.map_or("never".to_owned(), time),
                    g.revoked_at.map_or(String::new(), time),
                ]);
            }
            out!("{}", table.render())?;
            Ok(0)
        }
        GrantsCommand::Add {
            tool,
            pattern,
            agent,
            duration: d,
        } => {
            let spec = GrantSpec {
                remember: match pattern {
                    Some(p) => remember(&p)?,
                    None => Remember::Tool,
                },
                who: agent.map(Who::Agent),
                duration: duration(d.as_deref())?,
            };
            let g = rt.confirmations().grant(&tool, &spec, &actor(ctx)).await?;
            outln!("granted {} ({} for {})", g.id, g.scope.kind(), g.tool)?;
            Ok(0)
        }
        GrantsCommand::Revoke { id } => {
            if rt.confirmations().revoke_grant(&id, &actor(ctx)).await? {
                outln!("revoked {id}")?;
                Ok(0)
            } else {
                errln!("no active grant with id {id}");
                Ok(1)
            }
        }
    }
}

pub(crate) async fn mode(
    rt: &Runtime,
    ctx: &Context,
    cmd: Option<ModeCommand>,
) -> anyhow::Result<u8> {
    match cmd {
        None | Some(ModeCommand::Show) => outln!("{}", rt.settings().mode())?,
        Some(ModeCommand::Set { mode: m }) => {
            let mode: OperationalMode = match m.parse() {
                Ok(mode) => mode,
                Err(e) => {
                    // A usage error (exit 2), like any other bad argument.
                    errln!("error: {e}");
                    return Ok(2);
                }
            };
            let before = rt.settings().set_mode(mode, &actor(ctx)).await?;
            outln!("operational mode {before} -> {mode}")?;
        }
    }
    Ok(0)
}
