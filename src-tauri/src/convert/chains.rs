//! The chain service's and the store's chain types as the chains page's wire types: what a
//! chain's graph needs of its steps (each step's `depends_on` apart from the steps its
//! references read), diagnostics with their lines, and a run's recorded steps.

use serde_json::Value;
use tw_core::chain::{Chain, StepTarget};
use tw_core::skill::{Diagnostic, Severity};
use tw_protocol::{
    ChainCheck, ChainDetail, ChainDiagnostic, ChainProblem, ChainRun, ChainRunStep, ChainStepInfo,
    ChainSummary,
};
use tw_runtime::chains::{self, ChainEntry};
use tw_store::ChainRunRow;

fn severity(s: Severity) -> String {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
    .to_owned()
}

pub(crate) fn summary(s: &chains::ChainSummary) -> ChainSummary {
    ChainSummary {
        name: s.name.clone(),
        tool: s.tool.clone(),
        description: s.description.clone(),
        steps: s.steps,
        origin: s.origin.clone(),
        skill: s.skill.clone(),
    }
}

pub(crate) fn problem(p: &chains::ChainProblem) -> ChainProblem {
    ChainProblem {
        origin: p.origin.clone(),
        line: p.line,
        chain: p.chain.clone(),
        severity: severity(p.severity),
        message: p.message.clone(),
    }
}

/// A chain's steps for its graph: the tool each calls, and the steps it waits for, split into
/// those `depends_on` names and those only its references read.
pub(crate) fn steps(chain: &Chain) -> Vec<ChainStepInfo> {
    chain
        .steps
        .iter()
        .map(|s| ChainStepInfo {
            id: s.id.clone(),
            tool: match &s.target {
                StepTarget::Tool(t) => t.clone(),
                StepTarget::Chain(_) => s.target.tool_name(),
            },
            depends_on: s.depends_on.clone(),
            references: s
                .needs()
                .into_iter()
                .filter(|n| !s.depends_on.iter().any(|d| d == n))
                .map(str::to_owned)
                .collect(),
        })
        .collect()
}

pub(crate) fn detail(e: &ChainEntry) -> ChainDetail {
    let c = &e.chain;
    ChainDetail {
        summary: ChainSummary {
            name: c.name.clone(),
            tool: chains::chain_tool(&c.name),
            description: c.description.clone(),
            steps: c.steps.len(),
            origin: e.origin.clone(),
            skill: e.skill.clone(),
        },
        input: c.input.clone(),
        steps: steps(c),
        yaml: c.to_yaml(),
    }
}

/// What `check_text` found.
pub(crate) fn check(chains: &[Chain], found: &[(Option<String>, Diagnostic)]) -> ChainCheck {
    ChainCheck {
        valid: chains.iter().map(|c| c.name.clone()).collect(),
        diagnostics: found
            .iter()
            .map(|(chain, d)| ChainDiagnostic {
                chain: chain.clone(),
                severity: severity(d.severity),
                line: d.line,
                field: d.field.clone(),
                message: d.message.clone(),
            })
            .collect(),
    }
}

/// One recorded step (`{id, status, started_at, completed_at, attempts, execution_ids,
/// error}`); what is missing reads as nothing.
fn run_step(v: &Value) -> ChainRunStep {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    ChainRunStep {
        id: text("id").unwrap_or_default(),
        status: text("status").unwrap_or_else(|| "pending".to_owned()),
        started_at: v.get("started_at").and_then(Value::as_i64),
        completed_at: v.get("completed_at").and_then(Value::as_i64),
        attempts: v
            .get("attempts")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        execution_ids: v
            .get("execution_ids")
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        error: text("error"),
    }
}

pub(crate) fn run(r: &ChainRunRow) -> ChainRun {
    ChainRun {
        id: r.id.clone(),
        chain: r.chain.clone(),
        status: r.status.clone(),
        caller: r.agent_id.clone(),
        skill: r.skill.clone(),
        input: r.input.clone(),
        output: r.output.clone(),
        error: r.error.clone(),
        steps: r
            .steps
            .as_array()
            .map(|s| s.iter().map(run_step).collect())
            .unwrap_or_default(),
        started_at: r.started_at,
        completed_at: r.completed_at,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use tw_core::chain::{Chain, StepBuilder};

    use super::*;

    #[test]
    fn a_steps_edges_are_its_depends_on_and_the_steps_its_references_read() {
        let chain = Chain::builder("notes")
            .step(StepBuilder::new("save", "write_file").arg("path", "a.md"))
            .step(StepBuilder::new("size", "file_info").arg("path", "$save.path"))
            .step(
                StepBuilder::new("read", "read_file")
                    .arg("path", "$save.path")
                    .depends_on("size"),
            )
            .step(StepBuilder::chain("more", "other").depends_on("read"))
            .build()
            .unwrap();
        let got: Vec<(String, String, Vec<String>, Vec<String>)> = steps(&chain)
            .into_iter()
            .map(|s| (s.id, s.tool, s.depends_on, s.references))
            .collect();
        let row = |id: &str, tool: &str, deps: &[&str], refs: &[&str]| {
            (
                id.to_owned(),
                tool.to_owned(),
                deps.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>(),
                refs.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            got,
            vec![
                row("save", "write_file", &[], &[]),
                row("size", "file_info", &[], &["save"]),
                row("read", "read_file", &["size"], &["save"]),
                row("more", "chain__other", &["read"], &[]),
            ]
        );
    }

    #[test]
    fn a_recorded_run_reads_step_by_step_and_what_is_missing_is_nothing() {
        let row = ChainRunRow {
            id: "run-1".into(),
            chain: "notes".into(),
            trace_id: "t".into(),
            agent_id: "desktop".into(),
            skill: None,
            user_id: None,
            status: "completed".into(),
            input: json!({"topic": "x"}),
            output: Some(json!({"text": "x"})),
            error: None,
            steps: json!([
                {"id": "save", "status": "completed", "started_at": 10, "completed_at": 20,
                 "attempts": 1, "execution_ids": ["e1"], "error": null},
                {"id": "read"}
            ]),
            started_at: 5,
            completed_at: Some(25),
        };
        let run = run(&row);
        assert_eq!(
            run.steps,
            vec![
                ChainRunStep {
                    id: "save".into(),
                    status: "completed".into(),
                    started_at: Some(10),
                    completed_at: Some(20),
                    attempts: 1,
                    execution_ids: vec!["e1".into()],
                    error: None,
                },
                ChainRunStep {
                    id: "read".into(),
                    status: "pending".into(),
                    started_at: None,
                    completed_at: None,
                    attempts: 0,
                    execution_ids: Vec::new(),
                    error: None,
                },
            ]
        );
        assert_eq!(
            (run.caller.as_str(), run.completed_at),
            ("desktop", Some(25))
        );
    }
}
