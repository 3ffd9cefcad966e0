//! `toolwarden confirm`, `toolwarden grants` and `toolwarden mode`: the person in the loop. Answers
//! given here release (or refuse) calls waiting in any process on the same data directory.

use std::time::Duration;

use anyhow::{anyhow, bail};
use serde_json::Value;
use tw_core::OperationalMode;
use tw_runtime::{Answer, Answered, ErrorKind, GrantSpec, Remember, Runtime, Who};
use tw_store::{ConfirmationQuery, ConfirmationRow, GrantRow};

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
        ConfirmCommand::List { all, json } => list_confirmations(rt, all, json).await,
        ConfirmCommand::Approve(a) => answer(rt, ctx, a, true).await,
        ConfirmCommand::Deny(a) => answer(rt, ctx, a, false).await,
    }
}

pub(crate) async fn grants(rt: &Runtime, ctx: &Context, cmd: GrantsCommand) -> anyhow::Result<u8> {
    match cmd {
        GrantsCommand::List { all, json } => list_grants(rt, all, json).await,
        GrantsCommand::Add {
            tool,
            pattern,
            agent,
            duration,
        } => {
            add_grant(
                rt,
                ctx,
                &tool,
                pattern.as_deref(),
                agent,
                duration.as_deref(),
            )
            .await
        }
        GrantsCommand::Revoke { id } => revoke_grant(rt, ctx, &id).await,
    }
}

pub(crate) async fn mode(
    rt: &Runtime,
    ctx: &Context,
    cmd: Option<ModeCommand>,
) -> anyhow::Result<u8> {
    match cmd {
        None | Some(ModeCommand::Show) => show_mode(rt),
        Some(ModeCommand::Set { mode }) => set_mode(rt, ctx, &mode).await,
    }
}

/// The calls waiting for a person, or with `all` the answered and expired requests too.
async fn list_confirmations(rt: &Runtime, all: bool, as_json: bool) -> anyhow::Result<u8> {
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
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("no calls are waiting for approval")?;
        return Ok(0);
    }
    out!("{}", confirmations_table(rows).render())?;
    Ok(0)
}

/// One row per request; a pending one says how long it still waits, an answered or expired
/// one when that happened.
fn confirmations_table(rows: Vec<ConfirmationRow>) -> Table {
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
            match &r.context {
                Some(c) => format!("{} (on {})", r.reason, touches(c)),
                None => r.reason,
            },
            expires,
        ]);
    }
    table
}

/// What a held call would touch, as its tool saw it: the page and the elements.
fn touches(context: &serde_json::Value) -> String {
    let page = context["page"].as_str().unwrap_or("?");
    let elements: Vec<&str> = context["elements"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e.as_str()).collect())
        .unwrap_or_default();
    if elements.is_empty() {
        page.to_owned()
    } else {
        format!("{page}: {}", elements.join(", "))
    }
}

/// Approves or denies the requests named (or every pending one). Each id that could not be
/// answered is said on stderr and the others are still answered; the exit code is then the
/// first failure's kind: 9 for an unknown id, 11 for a request already settled.
async fn answer(rt: &Runtime, ctx: &Context, a: AnswerArgs, approve: bool) -> anyhow::Result<u8> {
    let verdict = if approve {
        Answer::Approve {
            grant: grant_to_remember(&a)?,
        }
    } else {
        refuse_grant_flags(&a)?;
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
    let mut code = 0;
    for id in ids {
        let answered = rt
            .confirmations()
            .answer(&id, verdict.clone(), &actor(ctx), a.note.as_deref())
            .await;
        let failed = match answered {
            Ok(outcome) => print_outcome(&id, outcome, approve)?,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                errln!("{e}");
                Some(ErrorKind::NotFound)
            }
            Err(e) => return Err(e.into()),
        };
        if code == 0 {
            code = failed.map_or(0, crate::exit::for_kind);
        }
    }
    Ok(code)
}

/// The grant flags say how to remember an approval: with a deny they are a mistake.
fn refuse_grant_flags(a: &AnswerArgs) -> anyhow::Result<()> {
    if a.remember.is_some() || a.caller_only || a.any_caller || a.duration.is_some() {
        bail!("--remember, --any-caller, --caller-only and --for only go with approve");
    }
    Ok(())
}

/// The grant an approval is remembered as, if `--remember` asks for one.
fn grant_to_remember(a: &AnswerArgs) -> anyhow::Result<Option<GrantSpec>> {
    if a.remember.is_none() && (a.caller_only || a.any_caller || a.duration.is_some()) {
        bail!("--any-caller, --caller-only and --for describe a grant: give --remember too");
    }
    let Some(scope) = &a.remember else {
        return Ok(None);
    };
    Ok(Some(GrantSpec {
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
    }))
}

/// Says what answering request `id` did: on stdout when it was answered, on stderr (returning
/// the failure's kind) when it was already settled.
fn print_outcome(id: &str, outcome: Answered, approve: bool) -> anyhow::Result<Option<ErrorKind>> {
    match outcome {
        Answered::Resolved {
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
            Ok(None)
        }
        Answered::AlreadyResolved { state, by, at } => {
            errln!(
                "{id} was already {} {}at {}; nothing changed",
                state.as_str(),
                by.map_or(String::new(), |b| format!("by {b} ")),
                time(at)
            );
            Ok(Some(ErrorKind::Conflict))
        }
    }
}

/// The grants in force, or with `all` revoked and expired ones too.
async fn list_grants(rt: &Runtime, all: bool, as_json: bool) -> anyhow::Result<u8> {
    let rows = rt.confirmations().grants(all).await?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("no grants")?;
        return Ok(0);
    }
    out!("{}", grants_table(rows).render())?;
    Ok(0)
}

fn grants_table(rows: Vec<GrantRow>) -> Table {
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
    table
}

/// `grants add`: every call of `tool` unless a pattern narrows it, for any caller unless an
/// agent is named, until revoked unless a duration is given.
async fn add_grant(
    rt: &Runtime,
    ctx: &Context,
    tool: &str,
    pattern: Option<&str>,
    agent: Option<String>,
    how_long: Option<&str>,
) -> anyhow::Result<u8> {
    let spec = GrantSpec {
        remember: match pattern {
            Some(p) => remember(p)?,
            None => Remember::default(),
        },
        who: agent.map(Who::Agent),
        duration: duration(how_long)?,
    };
    let g = rt.confirmations().grant(tool, &spec, &actor(ctx)).await?;
    outln!("granted {} ({} for {})", g.id, g.scope.kind(), g.tool)?;
    Ok(0)
}

async fn revoke_grant(rt: &Runtime, ctx: &Context, id: &str) -> anyhow::Result<u8> {
    rt.confirmations().revoke_grant(id, &actor(ctx)).await?;
    outln!("revoked {id}")?;
    Ok(0)
}

fn show_mode(rt: &Runtime) -> anyhow::Result<u8> {
    outln!("{}", rt.settings().mode())?;
    Ok(0)
}

async fn set_mode(rt: &Runtime, ctx: &Context, mode: &str) -> anyhow::Result<u8> {
    let mode: OperationalMode = match mode.parse() {
        Ok(mode) => mode,
        Err(e) => {
            // A usage error (exit 2), like any other bad argument.
            errln!("error: {e}");
            return Ok(2);
        }
    };
    let before = rt.settings().set_mode(mode, &actor(ctx)).await?;
    outln!("operational mode {before} -> {mode}")?;
    Ok(0)
}
