//! `toolwarden tools ...`: discovery, inspection with the policy explanation, export for agents,
//! managing custom tools, and switching tools off and on per license tier.

use std::sync::Arc;

use anyhow::{Context as _, anyhow};
use serde_json::json;
use tw_core::export::{ExportFormat, export_tools};
use tw_core::policy::PolicyDecision;
use tw_core::{
    Caller, CoreError, Decision, DefinitionFormat, LicenseTier, ToolDefinition, ToolFilter,
    load_tool_specs,
};
use tw_runtime::{Entry, Runtime, RuntimeError, ToolKind};

use crate::cli::{Format, ListArgs, SwitchArgs, ToolsCommand};
use crate::exit::unknown_tool;
use crate::out::{errln, out, outln};
use crate::setup::Context;
use crate::table::Table;

pub(crate) async fn run(rt: &Runtime, ctx: &Context, cmd: ToolsCommand) -> anyhow::Result<u8> {
    let caller = &ctx.caller;
    match cmd {
        ToolsCommand::List(args) => list(rt, caller, args),
        ToolsCommand::Show { name, json } => show(rt, caller, &name, json),
        ToolsCommand::Export { format, all } => export(rt, caller, format, all),
        ToolsCommand::Add { file } => add(rt, ctx, &file).await,
        ToolsCommand::Remove { name } => remove(rt, ctx, &name).await,
        ToolsCommand::Disable(args) => switch(rt, ctx, args, false).await,
        ToolsCommand::Enable(args) => switch(rt, ctx, args, true).await,
    }
}

/// `tools disable|enable`: one line per tier saying what changed (or that nothing did). Tiers
/// were checked by clap, and an unknown tool is refused before any tier is switched.
async fn switch(rt: &Runtime, ctx: &Context, a: SwitchArgs, enabled: bool) -> anyhow::Result<u8> {
    let mut tiers: Vec<Option<LicenseTier>> = a.tiers.into_iter().map(Some).collect();
    tiers.sort();
    tiers.dedup();
    if tiers.is_empty() {
        // The runtime switches the tier in force.
        tiers.push(None);
    }
    let actor = crate::confirm::actor(ctx);
    for tier in tiers {
        match rt
            .tools()
            .set_tool_enabled(&a.name, tier, enabled, &actor)
            .await
        {
            Ok(outcome) => outln!("{outcome}")?,
            Err(RuntimeError::Core(e @ CoreError::UnknownTool(_))) => {
                // A usage error (exit 2), like an unknown tier.
                errln!("error: {e} (see `toolwarden tools list`)");
                return Ok(2);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(0)
}

/// The tiers a tool is switched off for, as `tools list` shows them (`-`: none).
fn off_for(rt: &Runtime, tool: &str) -> String {
    let tiers = rt.tools().disabled_tiers(tool);
    if tiers.is_empty() {
        return "-".to_owned();
    }
    tiers
        .iter()
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn parse<T: std::str::FromStr<Err = String>>(v: Option<String>) -> anyhow::Result<Option<T>> {
    v.map(|s| s.parse::<T>().map_err(|e| anyhow!(e)))
        .transpose()
}

fn list(rt: &Runtime, caller: &Caller, a: ListArgs) -> anyhow::Result<u8> {
    let filter = ToolFilter {
        category: parse(a.category)?,
        group: a.group.map(|g| tw_core::ToolGroup::new(&g)).transpose()?,
        tier: parse(a.tier)?,
        mode: parse(a.mode)?,
        text: a.search,
    };
    let tools = rt.registry().find(&filter);
    if a.json {
        let list: Vec<_> = tools
            .iter()
            .map(|t| tw_server::tool_summary(rt, t, caller))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&list)?)?;
        return Ok(0);
    }
    out!("{}", list_table(rt, caller, &tools).render())?;
    Ok(0)
}

/// The tools with what policy decides for `caller` and the tiers each is off for.
fn list_table(rt: &Runtime, caller: &Caller, tools: &[Arc<Entry>]) -> Table {
    let mut table = Table::new(&[
        "NAME",
        "KIND",
        "GROUP",
        "CATEGORY",
        "RISK",
        "TIER",
        "POLICY",
        "OFF FOR",
        "DESCRIPTION",
    ]);
    for t in tools {
        let d = &t.definition;
        let policy = rt
            .tool_decision(d.name.as_str(), caller)
            .map_or("?".to_owned(), |p| p.decision.to_string());
        table.row(vec![
            d.name.to_string(),
            t.kind.label().to_owned(),
            d.group.to_string(),
            d.category.to_string(),
            d.risk_level.to_string(),
            d.license_tier.to_string(),
            policy,
            off_for(rt, d.name.as_str()),
            d.description.clone(),
        ]);
    }
    table
}

fn show(rt: &Runtime, caller: &Caller, name: &str, as_json: bool) -> anyhow::Result<u8> {
    let Some(tool) = rt.registry().get(name) else {
        return Err(unknown_tool(name));
    };
    let explanation = rt.tool_decision(name, caller);
    if as_json {
        return show_json(rt, name, &tool, explanation);
    }
    print_contract(&tool)?;
    print_switches(rt, name)?;
    if let Some(p) = explanation {
        outln!(
            "policy for {} (before arguments are known):",
            caller.agent_id
        )?;
        out!("{}", crate::policy::render(&p))?;
    }
    print_schemas(&tool.definition)?;
    Ok(0)
}

/// `tools show --json`: the definition, a custom tool's command or an upstream tool's origin,
/// the policy explanation and the tier switches, as one object.
fn show_json(
    rt: &Runtime,
    name: &str,
    tool: &Entry,
    explanation: Option<PolicyDecision>,
) -> anyhow::Result<u8> {
    let d = &tool.definition;
    outln!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "kind": tool.kind.label(),
            "definition": d,
            "command": match &tool.kind {
                ToolKind::Custom(c) => serde_json::to_value(c)?,
                ToolKind::Upstream(u) => json!({
                    "upstream_server": u.server(),
                    "upstream_tool": u.upstream_name(),
                }),
                ToolKind::Chain(c) => json!({"chain": c.chain.to_value(), "origin": c.origin}),
                ToolKind::Builtin(_) | ToolKind::Process(_) => serde_json::Value::Null,
            },
            "policy": explanation,
            "switched_off": rt.tools().tier_switches(name),
        }))?
    )?;
    Ok(0)
}

/// The head of `tools show`: what the tool is, its risk, limits and (custom) command.
fn print_contract(tool: &Entry) -> anyhow::Result<()> {
    let d = &tool.definition;
    let c = &d.constraints;
    outln!(
        "{} ({}, group {}, category {})",
        d.name,
        tool.kind.label(),
        d.group,
        d.category
    )?;
    outln!("  {}", d.description)?;
    outln!(
        "  risk: {}   tier: {}   side effects: {}   confirmation: {}   isolation: {}",
        d.risk_level,
        d.license_tier,
        if c.side_effects { "yes" } else { "no" },
        if d.requires_confirmation {
            "required"
        } else {
            "no"
        },
        c.isolation
    )?;
    outln!(
        "  limits: {} ms, {} bytes of output   version: {}",
        c.max_execution_time_ms,
        c.max_output_bytes,
        d.version
    )?;
    if let ToolKind::Custom(cmd) = &tool.kind {
        outln!("  command: {}", cmd.argv().collect::<Vec<_>>().join(" "))?;
    }
    Ok(())
}

/// The tiers a tool is switched off for, with who did it and when (nothing when none).
fn print_switches(rt: &Runtime, name: &str) -> anyhow::Result<()> {
    let switches = rt.tools().tier_switches(name);
    if !switches.is_empty() {
        let shown: Vec<String> = switches
            .iter()
            .map(|s| format!("{} (by {} at {})", s.tier, s.by, s.at_rfc3339()))
            .collect();
        outln!("  switched off for: {}", shown.join(", "))?;
    }
    Ok(())
}

/// The parameter schema and, when the tool declares one, its output schema.
fn print_schemas(d: &ToolDefinition) -> anyhow::Result<()> {
    outln!("parameters:")?;
    outln!("{}", serde_json::to_string_pretty(&d.parameters)?)?;
    if let Some(out) = &d.output_schema {
        outln!("output schema:")?;
        outln!("{}", serde_json::to_string_pretty(out)?)?;
    }
    Ok(())
}

fn export(rt: &Runtime, caller: &Caller, format: Format, all: bool) -> anyhow::Result<u8> {
    let tools = rt.registry().list();
    let defs = tools.iter().filter_map(|t| {
        let callable = all
            || rt
                .tool_decision(t.definition.name.as_str(), caller)
                .is_some_and(|p| p.decision != Decision::Deny);
        callable.then_some(&t.definition)
    });
    let format = match format {
        Format::Openai => ExportFormat::OpenAi,
        Format::Anthropic => ExportFormat::Anthropic,
        Format::Mcp => ExportFormat::Mcp,
    };
    outln!(
        "{}",
        serde_json::to_string_pretty(&export_tools(defs, format))?
    )?;
    Ok(0)
}

async fn add(rt: &Runtime, ctx: &Context, file: &std::path::Path) -> anyhow::Result<u8> {
    let shown = file.display().to_string();
    let format = DefinitionFormat::from_path(&shown)
        .ok_or_else(|| anyhow!("{shown}: unknown file type; use .json, .toml, .yaml or .yml"))?;
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {shown}"))?;
    // The runtime checks every spec before it adds any, so a bad file changes nothing.
    let specs = load_tool_specs(&text, &shown, format)?;
    let names: Vec<String> = specs
        .iter()
        .map(|s| s.definition.name.to_string())
        .collect();
    let added = rt
        .tools()
        .add_custom_tools(specs, &crate::confirm::actor(ctx))
        .await
        .with_context(|| shown.clone())?;
    for (name, added) in names.iter().zip(added) {
        outln!(
            "{} custom tool {name}",
            if added { "added" } else { "updated" }
        )?;
    }
    Ok(0)
}

async fn remove(rt: &Runtime, ctx: &Context, name: &str) -> anyhow::Result<u8> {
    rt.tools()
        .remove_custom_tool(name, &crate::confirm::actor(ctx))
        .await?;
    outln!("removed custom tool {name}")?;
    Ok(0)
}
