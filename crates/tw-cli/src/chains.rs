//! `toolwarden chains ...`: the chains loaded (and what is wrong with those that did not load,
//! as FILE:LINE), one chain in YAML, running one (a call of its tool `chain__NAME`, through
//! `call` so it behaves like any other call), and runs with each step's status, timing and
//! the audit rows of its calls. The chain service owns every rule; this only prints.

use serde_json::{Value, json};
use tw_runtime::Runtime;
use tw_runtime::chains::chain_tool;
use tw_store::ChainRunQuery;

use crate::cli::{CallArgs, ChainsCommand};
use crate::out::{errln, out, outln};
use crate::setup::Context;
use crate::table::Table;

pub(crate) async fn run(rt: &Runtime, ctx: &Context, cmd: ChainsCommand) -> anyhow::Result<u8> {
    match cmd {
        ChainsCommand::List { json } => list(rt, json),
        ChainsCommand::Show { name, json } => show(rt, &name, json),
        ChainsCommand::Check { file, skill } => check(rt, file.as_deref(), skill.as_deref()),
        ChainsCommand::Plan {
            goal,
            skill,
            accept,
        } => plan(rt, ctx, &goal, skill.as_deref(), accept).await,
        ChainsCommand::Save {
            file,
            skill,
            replace,
        } => {
            let text = crate::call::read_input(&file)?;
            let saved = rt
                .chains()
                .save(
                    &text,
                    skill.as_deref(),
                    &crate::confirm::actor(ctx),
                    replace,
                )
                .await?;
            outln!("saved and loaded: {}", saved.join(", "))?;
            Ok(0)
        }
        ChainsCommand::Run {
            name,
            input,
            timeout,
            no_wait,
        } => {
            let args = CallArgs {
                tool: chain_tool(&name),
                args: input,
                args_file: None,
                timeout,
                trace_id: None,
                no_wait,
            };
            rt.chains().require(&name)?;
            crate::call::call(rt, ctx, args).await
        }
        ChainsCommand::Runs {
            id: Some(id), json, ..
        } => one_run(rt, &id, json).await,
        ChainsCommand::Runs {
            id: None,
            chain,
            limit,
            json,
        } => runs(rt, chain, limit, json).await,
    }
}

fn list(rt: &Runtime, as_json: bool) -> anyhow::Result<u8> {
    let chains = rt.chains().summaries();
    let problems = rt.chains().problems();
    if as_json {
        let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"chains": chains, "problems": problems}))?
        )?;
        return Ok(0);
    }
    if chains.is_empty() {
        outln!("No chains are loaded.")?;
    } else {
        let mut t = Table::new(&["NAME", "TOOL", "STEPS", "FROM", "DESCRIPTION"]);
        for c in chains {
            t.row(vec![
                c.name,
                c.tool,
                c.steps.to_string(),
                c.origin,
                c.description,
            ]);
        }
        out!("{}", t.render())?;
    }
    for p in &problems {
        errln!("{p}");
    }
    Ok(0)
}

fn check(rt: &Runtime, file: Option<&std::path::Path>, skill: Option<&str>) -> anyhow::Result<u8> {
    let Some(file) = file else {
        let problems = rt.chains().problems();
        for p in &problems {
            outln!("{p}")?;
        }
        let errors = problems.iter().filter(|p| p.is_error()).count();
        outln!(
            "{} chains loaded, {errors} errors",
            rt.chains().list().len()
        )?;
        return Ok(u8::from(errors > 0));
    };
    let text = crate::call::read_input(file)?;
    let (chains, found) = rt.chains().check_text(&text, skill);
    let mut errors = 0;
    for (_, d) in &found {
        if d.severity == tw_core::skill::Severity::Error {
            errors += 1;
        }
        outln!(
            "{}:{}",
            file.display(),
            d.to_string().trim_start_matches("line ")
        )?;
    }
    let names: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
    outln!(
        "{} valid: {}; {errors} errors",
        chains.len(),
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    )?;
    Ok(u8::from(errors > 0))
}

async fn plan(
    rt: &Runtime,
    ctx: &Context,
    goal: &str,
    skill: Option<&str>,
    accept: bool,
) -> anyhow::Result<u8> {
    let plan = rt.chains().plan(goal, skill).await?;
    outln!("# planned by {}", plan.model)?;
    out!("{}", plan.text)?;
    if !plan.text.ends_with('\n') {
        outln!()?;
    }
    for d in &plan.diagnostics {
        errln!("plan:{d}");
    }
    let errors = plan
        .diagnostics
        .iter()
        .filter(|d| d.severity == tw_core::skill::Severity::Error)
        .count();
    if errors > 0 || plan.valid.is_empty() {
        errln!("the plan has {errors} errors: not saved");
        return Ok(1);
    }
    if accept {
        let saved = rt
            .chains()
            .save(&plan.text, skill, &crate::confirm::actor(ctx), false)
            .await?;
        errln!("saved and loaded: {}", saved.join(", "));
    } else {
        errln!("not saved: run again with --accept, or edit it and `toolwarden chains save FILE`");
    }
    Ok(0)
}

fn show(rt: &Runtime, name: &str, as_json: bool) -> anyhow::Result<u8> {
    let e = rt.chains().require(name)?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&e.chain.to_value())?)?;
    } else {
        outln!("# {} (the tool {})", e.origin, chain_tool(name))?;
        out!("{}", e.chain.to_yaml())?;
    }
    Ok(0)
}

async fn runs(
    rt: &Runtime,
    chain: Option<String>,
    limit: u32,
    as_json: bool,
) -> anyhow::Result<u8> {
    let rows = rt
        .chains()
        .runs(&ChainRunQuery {
            chain,
            status: None,
            limit: Some(limit),
        })
        .await?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("No chain runs yet.")?;
        return Ok(0);
    }
    let mut t = Table::new(&["RUN", "CHAIN", "STATUS", "STARTED", "MS", "AGENT"]);
    for r in rows {
        t.row(vec![
            r.id,
            r.chain,
            r.status,
            crate::audit::time(r.started_at),
            r.completed_at
                .map_or_else(String::new, |c| ((c - r.started_at) / 1000).to_string()),
            r.agent_id,
        ]);
    }
    out!("{}", t.render())?;
    Ok(0)
}

async fn one_run(rt: &Runtime, id: &str, as_json: bool) -> anyhow::Result<u8> {
    let (run, calls) = rt.chains().run(id).await?;
    if as_json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"run": run, "calls": calls}))?
        )?;
        return Ok(0);
    }
    outln!("run      {}", run.id)?;
    outln!("chain    {}", run.chain)?;
    outln!("status   {}", run.status)?;
    outln!("agent    {}", run.agent_id)?;
    if let Some(skill) = &run.skill {
        outln!("skill    {skill}")?;
    }
    outln!("trace    {}", run.trace_id)?;
    outln!("started  {}", crate::audit::time(run.started_at))?;
    if let Some(e) = &run.error {
        outln!("error    {e}")?;
    }
    let mut t =
        Table::new(&["STEP", "STATUS", "TRIES", "START MS", "MS", "CALLS", "NOTE"]).max_width(80);
    for s in run.steps.as_array().into_iter().flatten() {
        let at = |k: &str| s[k].as_i64();
        let from = at("started_at").map(|t| (t - run.started_at) / 1000);
        let took = at("started_at")
            .zip(at("completed_at"))
            .map(|(a, b)| (b - a) / 1000);
        t.row(vec![
            s["id"].as_str().unwrap_or_default().to_owned(),
            s["status"].as_str().unwrap_or_default().to_owned(),
            s["attempts"].to_string(),
            from.map_or_else(String::new, |v| v.to_string()),
            took.map_or_else(String::new, |v| v.to_string()),
            s["execution_ids"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
            s["error"].as_str().unwrap_or_default().to_owned(),
        ]);
    }
    out!("{}", t.render())?;
    outln!(
        "{} audit records: `toolwarden audit show EXECUTION_ID`",
        calls.len()
    )?;
    Ok(0)
}
