//! `toolwarden policy ...`: where the policy comes from, why a call would be allowed or denied,
//! what is wrong with a policy, and what a proposed policy would change for the calls already
//! recorded. Nothing here runs a tool.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Value, json};
use tw_core::policy::lint::lint;
use tw_core::policy::{Policy, PolicyDecision, PolicyDoc, PolicySource};
use tw_core::{Caller, ToolDefinition};
use tw_runtime::Runtime;
use tw_store::{AuditQuery, AuditRow};

use crate::audit::{parse_time, time};
use crate::cli::PolicyCommand;
use crate::exit::unknown_tool;
use crate::out::{errln, out, outln};
use crate::setup::Context;
use crate::table::Table;

/// A decision and its trace, one layer per line.
pub(crate) fn render(d: &PolicyDecision) -> String {
    let mut out = format!("decision: {}\n", d.decision);
    for v in &d.trace {
        let rule = v
            .rule
            .as_ref()
            .map_or(String::new(), |r| format!("  [{} @ {}]", r.rule, r.source));
        out.push_str(&format!(
            "  {:<13} {:<5} {}{}\n",
            v.layer.as_str(),
            v.decision,
            v.reason,
            rule
        ));
    }
    out
}

pub(crate) async fn run(rt: &Runtime, ctx: &Context, cmd: PolicyCommand) -> anyhow::Result<u8> {
    match cmd {
        PolicyCommand::Show => show(rt),
        PolicyCommand::Explain {
            tool,
            args,
            caller,
            json,
        } => explain(rt, ctx, &tool, &args, caller.as_deref(), json),
        PolicyCommand::Check { files } => check(rt, &files),
        PolicyCommand::Simulate { files, since, json } => simulate(rt, &files, &since, json).await,
    }
}

fn show(rt: &Runtime) -> anyhow::Result<u8> {
    let p = rt.settings().policy();
    outln!("policy from:   {}", tw_runtime::policy::describe(&p))?;
    outln!("mode:          {}", rt.settings().mode())?;
    outln!("license tier:  {}", rt.settings().tier())?;
    outln!(
        "confirmations: wait {} s ({})",
        p.confirmation_timeout.0,
        p.confirmation_timeout.1
    )?;
    outln!("rules:")?;
    for line in &p.summary {
        outln!("  {line}")?;
    }
    Ok(0)
}

fn explain(
    rt: &Runtime,
    ctx: &Context,
    tool: &str,
    args: &str,
    caller: Option<&str>,
    as_json: bool,
) -> anyhow::Result<u8> {
    let arguments: Value =
        serde_json::from_str(args).map_err(|e| anyhow!("--args is not valid JSON: {e}"))?;
    let mut who = ctx.caller.clone();
    if let Some(c) = caller {
        who.agent_id = Caller::agent(c).agent_id;
    }
    let Some(decision) = rt.explain(tool, &arguments, &who) else {
        return Err(unknown_tool(tool));
    };
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&decision)?)?;
    } else {
        outln!(
            "{tool} for {}{} in {} mode",
            who.agent_id,
            who.skill
                .as_deref()
                .map_or(String::new(), |s| format!(" (skill {s})")),
            rt.settings().mode()
        )?;
        out!("{}", render(&decision))?;
    }
    Ok(0)
}

fn definitions(rt: &Runtime) -> Vec<ToolDefinition> {
    rt.registry()
        .list()
        .iter()
        .map(|t| t.definition.clone())
        .collect()
}

/// Compiles policy files as a whole policy, in the runtime's environment.
fn compile_files(rt: &Runtime, files: &[PathBuf]) -> anyhow::Result<Result<Policy, Vec<String>>> {
    let mut texts = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        texts.push((f.display().to_string(), text));
    }
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    for (file, text) in &texts {
        match PolicyDoc::parse(text, file) {
            Ok(d) => docs.push((file, text, d)),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if !errors.is_empty() {
        return Ok(Err(errors));
    }
    let sources: Vec<PolicySource<'_>> = docs
        .iter()
        .map(|(file, text, doc)| PolicySource { file, text, doc })
        .collect();
    Ok(
        Policy::compile(&sources, rt.settings().policy().env.clone())
            .map_err(|e| e.iter().map(ToString::to_string).collect()),
    )
}

fn check(rt: &Runtime, files: &[PathBuf]) -> anyhow::Result<u8> {
    let policy = if files.is_empty() {
        // The configured policy already compiled when the runtime opened (or it would not have).
        rt.settings().policy()
    } else {
        match compile_files(rt, files)? {
            Ok(p) => Arc::new(p),
            Err(errors) => {
                for e in &errors {
                    outln!("error: {e}")?;
                }
                outln!("{} error(s): the policy would be refused", errors.len())?;
                return Ok(1);
            }
        }
    };
    let findings = lint(&policy, &definitions(rt));
    for f in &findings {
        outln!("warning: {f}")?;
    }
    outln!(
        "{}: loads, every example holds; {} warning(s)",
        tw_runtime::policy::describe(&policy),
        findings.len()
    )?;
    Ok(if findings.is_empty() { 0 } else { 1 })
}

async fn simulate(
    rt: &Runtime,
    files: &[PathBuf],
    since: &str,
    as_json: bool,
) -> anyhow::Result<u8> {
    let proposed = match compile_files(rt, files)? {
        Ok(p) => Arc::new(p),
        Err(errors) => {
            for e in &errors {
                errln!("error: {e}");
            }
            bail!("the proposed policy does not load");
        }
    };
    let replay = replay(rt, &proposed, parse_time(since)?).await?;
    if as_json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "replayed": replay.replayed,
                "skipped": replay.skipped,
                "changed": replay.changed,
            }))?
        )?;
        return Ok(0);
    }
    if !replay.changed.is_empty() {
        out!("{}", changed_table(&replay.changed).render())?;
    }
    outln!(
        "{} of {} recorded call(s) would be decided differently ({} skipped: their tool is no longer registered). \
         Arguments are replayed as recorded, secrets redacted; rate limits and grants are not replayed.",
        replay.changed.len(),
        replay.replayed,
        replay.skipped
    )?;
    Ok(0)
}

/// What `policy simulate` found in the recorded calls.
#[derive(Default)]
struct Replay {
    replayed: u64,
    /// Calls whose tool is no longer registered, so neither policy can judge them.
    skipped: u64,
    /// One object per call the proposed policy decides differently, newest first.
    changed: Vec<Value>,
}

/// Judges every call recorded since `since` (µs) under the current and the proposed policy.
async fn replay(rt: &Runtime, proposed: &Arc<Policy>, since: i64) -> anyhow::Result<Replay> {
    let mut q = AuditQuery {
        since: Some(since),
        limit: tw_store::MAX_PAGE,
        ..AuditQuery::default()
    };
    let mut replay = Replay::default();
    loop {
        let page = rt.store().query(&q).await?;
        for row in &page.rows {
            replay.judge(rt, proposed, row);
        }
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => return Ok(replay),
        }
    }
}

impl Replay {
    fn judge(&mut self, rt: &Runtime, proposed: &Arc<Policy>, row: &AuditRow) {
        let mut caller = Caller::agent(&row.agent_id);
        caller.skill = row.skill.clone();
        caller.user = row.user_id.clone();
        let (Some(now), Some(then)) = (
            rt.explain(&row.tool, &row.arguments, &caller),
            rt.explain_with(Some(proposed), &row.tool, &row.arguments, &caller),
        ) else {
            self.skipped += 1;
            return;
        };
        self.replayed += 1;
        if now.decision != then.decision {
            let why = then.deciding().map_or_else(String::new, |v| {
                format!("{}: {}", v.layer.as_str(), v.reason)
            });
            self.changed.push(json!({
                "execution_id": row.execution_id,
                "started_at": time(row.started_at),
                "tool": row.tool,
                "caller": row.agent_id,
                "recorded_status": row.status,
                "current": now.decision,
                "proposed": then.decision,
                "because": why,
            }));
        }
    }
}

/// The changed calls, a column per key of their objects.
fn changed_table(changed: &[Value]) -> Table {
    let mut table = Table::new(&[
        "STARTED",
        "TOOL",
        "CALLER",
        "RECORDED",
        "NOW",
        "PROPOSED",
        "BECAUSE",
        "EXECUTION",
    ]);
    for c in changed {
        let cell = |k: &str| {
            c[k].as_str()
                .map_or_else(|| c[k].to_string(), str::to_owned)
        };
        table.row(
            [
                "started_at",
                "tool",
                "caller",
                "recorded_status",
                "current",
                "proposed",
                "because",
                "execution_id",
            ]
            .iter()
            .map(|k| cell(k))
            .collect(),
        );
    }
    table
}
