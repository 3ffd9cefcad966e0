//! The chains page's logic, kept off the DOM so it is tested on the host: the list (chains in
//! force and those that only have problems), a chain's graph laid out in layers, a run's
//! timeline as bars on a shared time axis, the live `chain_step` events folded into the run's
//! step states, and the input a run form starts from.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};
use tw_protocol::{
    ChainDiagnostic, ChainList, ChainProblem, ChainRunStep, ChainStepInfo, LiveEvent,
};

/// How long the editor waits after the last keystroke before it checks the text.
pub(crate) const CHECK_AFTER_MS: u64 = 400;

/// The text a new chain starts from: a valid chain of one step.
pub(crate) const TEMPLATE: &str = "name: my_chain
description: What the chain does, in one sentence.
input:
  - {name: path, type: string, required: true}
steps:
  - id: read
    tool: read_file
    arguments: {path: $input.path}
";

/// A chain as the list shows it: one in force, or one that only problems name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListEntry {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) skill: Option<String>,
    pub(crate) origin: String,
    /// How many steps, for a chain in force.
    pub(crate) steps: Option<usize>,
    pub(crate) loaded: bool,
    /// Its problems, as [`problem_text`] writes them (warnings too, for a chain in force).
    pub(crate) problems: Vec<String>,
}

/// A load problem as the list writes it: `origin:line: severity: message` (no line when 0).
pub(crate) fn problem_text(p: &ChainProblem) -> String {
    if p.line > 0 {
        format!("{}:{}: {}: {}", p.origin, p.line, p.severity, p.message)
    } else {
        format!("{}: {}: {}", p.origin, p.severity, p.message)
    }
}

/// A diagnostic of the editor's text: `line N: severity: field: message`.
pub(crate) fn diagnostic_text(d: &ChainDiagnostic) -> String {
    match &d.field {
        Some(field) => format!("line {}: {}: {field}: {}", d.line, d.severity, d.message),
        None => format!("line {}: {}: {}", d.line, d.severity, d.message),
    }
}

/// The list: every chain in force, then every chain named only by an error (it did not load),
/// each by name, with the problems that name it.
pub(crate) fn entries(list: &ChainList) -> Vec<ListEntry> {
    let mut out: BTreeMap<String, ListEntry> = list
        .chains
        .iter()
        .map(|c| {
            let entry = ListEntry {
                name: c.name.clone(),
                description: c.description.clone(),
                skill: c.skill.clone(),
                origin: c.origin.clone(),
                steps: Some(c.steps),
                loaded: true,
                problems: Vec::new(),
            };
            (c.name.clone(), entry)
        })
        .collect();
    for p in &list.problems {
        let Some(name) = &p.chain else { continue };
        let entry = out.entry(name.clone()).or_insert_with(|| ListEntry {
            name: name.clone(),
            description: String::new(),
            skill: None,
            origin: p.origin.clone(),
            steps: None,
            loaded: false,
            problems: Vec::new(),
        });
        entry.problems.push(problem_text(p));
    }
    let (mut loaded, failed): (Vec<ListEntry>, Vec<ListEntry>) =
        out.into_values().partition(|e| e.loaded);
    loaded.extend(failed);
    loaded
}

/// Box and gap sizes of the graph, in SVG units.
pub(crate) const NODE_W: f64 = 168.0;
pub(crate) const NODE_H: f64 = 48.0;
const GAP_X: f64 = 56.0;
const GAP_Y: f64 = 20.0;
const PAD: f64 = 8.0;

/// A step's box.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) id: String,
    pub(crate) tool: String,
    /// 0 for a step that needs nothing; else 1 + the highest layer of what it needs.
    pub(crate) layer: usize,
    /// Its place in its layer, in the order the steps are written.
    pub(crate) row: usize,
    /// The box's top-left corner.
    pub(crate) x: f64,
    pub(crate) y: f64,
}

/// Why one step waits for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EdgeKind {
    DependsOn,
    Reference,
}

/// An arrow from a step to one that needs it: from the middle of the first box's right side to
/// the middle of the second's left side.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Edge {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) kind: EdgeKind,
    pub(crate) x1: f64,
    pub(crate) y1: f64,
    pub(crate) x2: f64,
    pub(crate) y2: f64,
}

/// A chain's graph, left to right.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Graph {
    pub(crate) nodes: Vec<Node>,
    pub(crate) edges: Vec<Edge>,
    pub(crate) width: f64,
    pub(crate) height: f64,
}

/// Lays a chain's steps out in layers: a step's layer is 1 + the highest layer of the steps it
/// needs (`depends_on` and references), so every arrow points right. Total: a need naming no
/// step is ignored, and a cycle (which a loaded chain cannot have) is cut where it closes.
pub(crate) fn layout(steps: &[ChainStepInfo]) -> Graph {
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let needs: Vec<Vec<(usize, EdgeKind)>> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut out: Vec<(usize, EdgeKind)> = Vec::new();
            let named = s
                .depends_on
                .iter()
                .map(|d| (d, EdgeKind::DependsOn))
                .chain(s.references.iter().map(|r| (r, EdgeKind::Reference)));
            for (name, kind) in named {
                if let Some(&j) = index.get(name.as_str())
                    && j != i
                    && !out.iter().any(|(k, _)| *k == j)
                {
                    out.push((j, kind));
                }
            }
            out
        })
        .collect();
    let mut layers: Vec<Option<usize>> = vec![None; steps.len()];
    for i in 0..steps.len() {
        let mut visiting = vec![false; steps.len()];
        layer_of(i, &needs, &mut layers, &mut visiting);
    }
    let layers: Vec<usize> = layers.into_iter().map(Option::unwrap_or_default).collect();
    let mut rows_used: BTreeMap<usize, usize> = BTreeMap::new();
    let nodes: Vec<Node> = steps
        .iter()
        .zip(&layers)
        .map(|(s, &layer)| {
            let row = rows_used.entry(layer).or_insert(0);
            let node = Node {
                id: s.id.clone(),
                tool: s.tool.clone(),
                layer,
                row: *row,
                x: PAD + layer as f64 * (NODE_W + GAP_X),
                y: PAD + *row as f64 * (NODE_H + GAP_Y),
            };
            *row += 1;
            node
        })
        .collect();
    let mut edges = Vec::new();
    for (i, list) in needs.iter().enumerate() {
        for &(j, kind) in list {
            let (from, to) = (&nodes[j], &nodes[i]);
            // A cut cycle's back edge would point left; it is not drawn.
            if from.layer >= to.layer {
                continue;
            }
            edges.push(Edge {
                from: from.id.clone(),
                to: to.id.clone(),
                kind,
                x1: from.x + NODE_W,
                y1: from.y + NODE_H / 2.0,
                x2: to.x,
                y2: to.y + NODE_H / 2.0,
            });
        }
    }
    let layer_count = layers.iter().max().map_or(0, |m| m + 1);
    let row_count = rows_used.values().max().copied().unwrap_or(0);
    let span = |n: usize, size: f64, gap: f64| {
        if n == 0 {
            0.0
        } else {
            2.0 * PAD + n as f64 * size + (n - 1) as f64 * gap
        }
    };
    Graph {
        nodes,
        edges,
        width: span(layer_count, NODE_W, GAP_X),
        height: span(row_count, NODE_H, GAP_Y),
    }
}

fn layer_of(
    i: usize,
    needs: &[Vec<(usize, EdgeKind)>],
    layers: &mut [Option<usize>],
    visiting: &mut [bool],
) -> usize {
    if let Some(l) = layers[i] {
        return l;
    }
    if visiting[i] {
        return 0;
    }
    visiting[i] = true;
    let layer = needs[i]
        .iter()
        .map(|&(j, _)| layer_of(j, needs, layers, visiting) + 1)
        .max()
        .unwrap_or(0);
    visiting[i] = false;
    layers[i] = Some(layer);
    layer
}

/// A step's bar on a run's timeline, in percent of the run's span (0-100).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bar {
    pub(crate) id: String,
    pub(crate) status: String,
    /// Where it starts; `None` for a step that never started (drawn as a mark at its end, or
    /// not at all).
    pub(crate) left: f64,
    pub(crate) width: f64,
    /// How long it ran (or has been running), µs; 0 when it never started.
    pub(crate) took_us: i64,
    pub(crate) started: bool,
}

/// Bars for a run's steps, against the run's time axis: from `run_start` to its end (or `now`
/// while it runs; a running step's bar reaches `now`). A bar is at least 0.5% wide so a quick
/// step is still seen.
pub(crate) fn timeline(
    steps: &[ChainRunStep],
    run_start: i64,
    run_end: Option<i64>,
    now: i64,
) -> Vec<Bar> {
    let end_of = |s: &ChainRunStep| match (s.started_at, s.completed_at) {
        (_, Some(c)) => Some(c),
        (Some(_), None) => Some(now),
        (None, None) => None,
    };
    let last = steps
        .iter()
        .filter_map(end_of)
        .chain(run_end)
        .max()
        .unwrap_or(now)
        .max(run_start + 1);
    let span = (last - run_start) as f64;
    let pct = |t: i64| ((t - run_start) as f64 / span * 100.0).clamp(0.0, 100.0);
    steps
        .iter()
        .map(|s| {
            let (left, width, took_us, started) = match (s.started_at, end_of(s)) {
                (Some(a), Some(b)) => {
                    let left = pct(a).min(99.5);
                    let width = (pct(b) - left).max(0.5);
                    (left, width, (b - a).max(0), true)
                }
                (None, Some(b)) => (pct(b).min(99.5), 0.5, 0, false),
                _ => (0.0, 0.0, 0, false),
            };
            Bar {
                id: s.id.clone(),
                status: s.status.clone(),
                left,
                width,
                took_us,
                started,
            }
        })
        .collect()
}

/// A run's steps before anything is known of it: every step of the chain, pending.
pub(crate) fn pending_steps(steps: &[ChainStepInfo]) -> Vec<ChainRunStep> {
    steps
        .iter()
        .map(|s| ChainRunStep {
            id: s.id.clone(),
            status: "pending".to_owned(),
            started_at: None,
            completed_at: None,
            attempts: 0,
            execution_ids: Vec::new(),
            error: None,
        })
        .collect()
}

/// Folds one live event into a run's steps: a `chain_step` event of `run_id` sets its step's
/// status, attempts, calls and error; a step's first `running` is when it started, a final
/// status is when it ended. Other events are ignored. Answers whether anything changed.
pub(crate) fn fold(steps: &mut Vec<ChainRunStep>, run_id: &str, event: &LiveEvent) -> bool {
    let Some(update) = event.chain_step.as_ref() else {
        return false;
    };
    if event.execution_id != run_id {
        return false;
    }
    let pos = match steps.iter().position(|s| s.id == update.step) {
        Some(p) => p,
        None => {
            // A step the page did not know of (the chain changed since): shown at the end.
            steps.push(ChainRunStep {
                id: update.step.clone(),
                status: "pending".to_owned(),
                started_at: None,
                completed_at: None,
                attempts: 0,
                execution_ids: Vec::new(),
                error: None,
            });
            steps.len() - 1
        }
    };
    let s = &mut steps[pos];
    let running = update.status == "running";
    if running {
        s.started_at.get_or_insert(event.at);
        s.completed_at = None;
    } else if update.status != "pending" {
        s.completed_at = Some(event.at);
    }
    s.status.clone_from(&update.status);
    s.attempts = update.attempts;
    if !update.execution_ids.is_empty() {
        s.execution_ids.clone_from(&update.execution_ids);
    }
    s.error.clone_from(&update.error);
    true
}

/// The JSON a run's input box starts with: each property of the input schema with its
/// default, else its enum's first value, else an empty value of its type.
pub(crate) fn input_template(schema: &Value) -> String {
    let mut out = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let value = if let Some(d) = prop.get("default") {
                d.clone()
            } else if let Some(first) = prop
                .get("enum")
                .and_then(Value::as_array)
                .and_then(|e| e.first())
            {
                first.clone()
            } else {
                match prop.get("type").and_then(Value::as_str) {
                    Some("integer" | "number") => Value::from(0),
                    Some("boolean") => Value::Bool(false),
                    Some("array") => Value::Array(Vec::new()),
                    Some("object") => Value::Object(Map::new()),
                    Some("null") => Value::Null,
                    _ => Value::String(String::new()),
                }
            };
            out.insert(name.clone(), value);
        }
    }
    serde_json::to_string_pretty(&Value::Object(out)).unwrap_or_else(|_| "{}".to_owned())
}

/// The input typed into the run form, or why it is not a JSON object.
pub(crate) fn parse_input(text: &str) -> Result<Value, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("the input is a JSON object ({...})".to_owned()),
        Err(e) => Err(format!(
            "the input is not JSON: line {}, column {}: {e}",
            e.line(),
            e.column()
        )),
    }
}

/// Whether a run's status means it is over.
pub(crate) fn run_over(status: &str) -> bool {
    status != "running"
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use tw_protocol::{ChainStepUpdate, ChainSummary};

    use super::*;

    fn step(id: &str, depends_on: &[&str], references: &[&str]) -> ChainStepInfo {
        ChainStepInfo {
            id: id.to_owned(),
            tool: format!("tool_{id}"),
            depends_on: depends_on.iter().map(|s| (*s).to_owned()).collect(),
            references: references.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// (id, layer, row) per node, and (from, to, kind) per edge.
    fn check(
        steps: &[ChainStepInfo],
        nodes: &[(&str, usize, usize)],
        edges: &[(&str, &str, EdgeKind)],
    ) -> Graph {
        let g = layout(steps);
        let got_nodes: Vec<(&str, usize, usize)> = g
            .nodes
            .iter()
            .map(|n| (n.id.as_str(), n.layer, n.row))
            .collect();
        let got_edges: Vec<(&str, &str, EdgeKind)> = g
            .edges
            .iter()
            .map(|e| (e.from.as_str(), e.to.as_str(), e.kind))
            .collect();
        assert_eq!((got_nodes, got_edges), (nodes.to_vec(), edges.to_vec()));
        g
    }

    #[test]
    fn a_steps_layer_is_one_more_than_the_highest_of_what_it_needs() {
        use EdgeKind::{DependsOn, Reference};
        // a -> b -> d, a -> c, c and b -> d; e alone; d named twice counts once.
        let g = check(
            &[
                step("a", &[], &[]),
                step("b", &[], &["a"]),
                step("c", &["a"], &[]),
                step("d", &["c"], &["b", "c"]),
                step("e", &[], &[]),
            ],
            &[
                ("a", 0, 0),
                ("b", 1, 0),
                ("c", 1, 1),
                ("d", 2, 0),
                ("e", 0, 1),
            ],
            &[
                ("a", "b", Reference),
                ("a", "c", DependsOn),
                ("c", "d", DependsOn),
                ("b", "d", Reference),
            ],
        );
        // Three layers of boxes, two rows.
        assert_eq!(
            (g.width, g.height),
            (
                2.0 * PAD + 3.0 * NODE_W + 2.0 * GAP_X,
                2.0 * PAD + 2.0 * NODE_H + GAP_Y
            )
        );
        // An arrow leaves its box's right side and enters the next one's left side.
        let c = &g.nodes[2];
        let cd = &g.edges[2];
        assert_eq!(
            (cd.x1, cd.y1, cd.x2, cd.y2),
            (
                c.x + NODE_W,
                c.y + NODE_H / 2.0,
                g.nodes[3].x,
                g.nodes[3].y + NODE_H / 2.0
            )
        );
    }

    #[test]
    fn the_layout_is_total_on_unknown_steps_self_references_and_cycles() {
        check(&[], &[], &[]);
        check(&[step("a", &["nope", "a"], &[])], &[("a", 0, 0)], &[]);
        // a needs b needs a: the cycle is cut where it closes, and its back edge not drawn.
        check(
            &[step("a", &["b"], &[]), step("b", &["a"], &[])],
            &[("a", 2, 0), ("b", 1, 0)],
            &[("b", "a", EdgeKind::DependsOn)],
        );
    }

    fn run_step(id: &str, status: &str, started: Option<i64>, done: Option<i64>) -> ChainRunStep {
        ChainRunStep {
            id: id.to_owned(),
            status: status.to_owned(),
            started_at: started,
            completed_at: done,
            attempts: u32::from(started.is_some()),
            execution_ids: Vec::new(),
            error: None,
        }
    }

    /// (id, left, width, took, started) per bar.
    fn bars(
        steps: &[ChainRunStep],
        end: Option<i64>,
        now: i64,
    ) -> Vec<(String, f64, f64, i64, bool)> {
        timeline(steps, 1_000, end, now)
            .into_iter()
            .map(|b| (b.id, b.left, b.width, b.took_us, b.started))
            .collect()
    }

    #[test]
    fn timeline_bars_sit_on_the_runs_time_axis() {
        let row = |id: &str, l: f64, w: f64, t: i64, s: bool| (id.to_owned(), l, w, t, s);
        // A finished run of 1000 µs: a step over its first quarter, one over its last half, a
        // skipped step marked where it was skipped, and a quick one kept visible.
        let done = [
            run_step("a", "completed", Some(1_000), Some(1_250)),
            run_step("b", "completed", Some(1_500), Some(2_000)),
            run_step("c", "skipped", None, Some(1_500)),
            run_step("d", "completed", Some(1_500), Some(1_500)),
            run_step("e", "pending", None, None),
        ];
        assert_eq!(
            bars(&done, Some(2_000), 9_999),
            vec![
                row("a", 0.0, 25.0, 250, true),
                row("b", 50.0, 50.0, 500, true),
                row("c", 50.0, 0.5, 0, false),
                row("d", 50.0, 0.5, 0, true),
                row("e", 0.0, 0.0, 0, false),
            ]
        );
        // While it runs, the axis ends now and a running step's bar reaches it.
        let running = [
            run_step("a", "completed", Some(1_000), Some(1_500)),
            run_step("b", "running", Some(1_500), None),
        ];
        assert_eq!(
            bars(&running, None, 3_000),
            vec![
                row("a", 0.0, 25.0, 500, true),
                row("b", 25.0, 75.0, 1_500, true)
            ]
        );
        // Nothing started yet: no division by zero.
        assert_eq!(
            bars(&[run_step("a", "pending", None, None)], None, 1_000),
            vec![row("a", 0.0, 0.0, 0, false)]
        );
    }

    fn ev(run: &str, at: i64, step: &str, status: &str, attempts: u32) -> LiveEvent {
        LiveEvent {
            execution_id: run.to_owned(),
            tool: "chain__notes".to_owned(),
            kind: "chain_step".to_owned(),
            status: None,
            at,
            detail: None,
            chain_step: Some(ChainStepUpdate {
                step: step.to_owned(),
                status: status.to_owned(),
                attempts,
                execution_ids: if status == "running" {
                    Vec::new()
                } else {
                    vec![format!("{step}-call")]
                },
                error: (status == "failed").then(|| "boom".to_owned()),
            }),
        }
    }

    #[test]
    fn live_step_events_fold_into_the_runs_step_states() {
        let chain = [
            step("save", &[], &[]),
            step("read", &["save"], &[]),
            step("tail", &["read"], &[]),
        ];
        let mut steps = pending_steps(&chain);
        let other_run = ev("run-2", 5, "save", "running", 0);
        let not_a_step = LiveEvent {
            chain_step: None,
            kind: "started".to_owned(),
            ..ev("run-1", 5, "save", "running", 0)
        };
        let events = [
            not_a_step,
            other_run,
            ev("run-1", 10, "save", "running", 0),
            ev("run-1", 20, "save", "completed", 1),
            ev("run-1", 21, "read", "running", 0),
            ev("run-1", 40, "read", "failed", 2),
            ev("run-1", 41, "tail", "skipped", 0),
            ev("run-1", 42, "extra", "cancelled", 0),
        ];
        let changed: Vec<bool> = events
            .iter()
            .map(|e| fold(&mut steps, "run-1", e))
            .collect();
        assert_eq!(changed, [false, false, true, true, true, true, true, true]);
        let mut expected = vec![
            run_step("save", "completed", Some(10), Some(20)),
            run_step("read", "failed", Some(21), Some(40)),
            run_step("tail", "skipped", None, Some(41)),
            run_step("extra", "cancelled", None, Some(42)),
        ];
        expected[0].execution_ids = vec!["save-call".into()];
        expected[1].attempts = 2;
        expected[1].execution_ids = vec!["read-call".into()];
        expected[1].error = Some("boom".into());
        expected[2].execution_ids = vec!["tail-call".into()];
        expected[3].execution_ids = vec!["extra-call".into()];
        assert_eq!(steps, expected);
    }

    #[test]
    fn the_list_has_the_chains_in_force_then_those_only_problems_name() {
        let list = ChainList {
            chains: vec![ChainSummary {
                name: "notes".into(),
                tool: "chain__notes".into(),
                description: "Notes.".into(),
                steps: 2,
                origin: "/ws/chains/notes.yaml".into(),
                skill: None,
            }],
            problems: vec![
                ChainProblem {
                    origin: "/ws/chains/bad.yaml".into(),
                    line: 4,
                    chain: Some("bad".into()),
                    severity: "error".into(),
                    message: "steps[0].tool: no tool named \"nope\"".into(),
                },
                ChainProblem {
                    origin: "/ws/chains/notes.yaml".into(),
                    line: 0,
                    chain: Some("notes".into()),
                    severity: "warning".into(),
                    message: "unused input".into(),
                },
                ChainProblem {
                    origin: "/ws/chains/broken.yaml".into(),
                    line: 1,
                    chain: None,
                    severity: "error".into(),
                    message: "not YAML".into(),
                },
            ],
        };
        let got: Vec<(String, bool, Option<usize>, Vec<String>)> = entries(&list)
            .into_iter()
            .map(|e| (e.name, e.loaded, e.steps, e.problems))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "notes".into(),
                    true,
                    Some(2),
                    vec!["/ws/chains/notes.yaml: warning: unused input".into()]
                ),
                (
                    "bad".into(),
                    false,
                    None,
                    vec![
                        "/ws/chains/bad.yaml:4: error: steps[0].tool: no tool named \"nope\""
                            .into()
                    ]
                ),
            ]
        );
        let d = ChainDiagnostic {
            chain: Some("bad".into()),
            severity: "error".into(),
            line: 4,
            field: Some("steps[0].tool".into()),
            message: "no tool named \"nope\"".into(),
        };
        assert_eq!(
            diagnostic_text(&d),
            "line 4: error: steps[0].tool: no tool named \"nope\""
        );
    }

    #[test]
    fn the_run_form_starts_from_the_input_schema_and_reads_an_object() {
        let schema = json!({
            "type": "object",
            "properties": {
                "topic": {"type": "string"},
                "count": {"type": "integer", "default": 3},
                "mode": {"enum": ["fast", "slow"]},
                "tags": {"type": "array"},
                "deep": {"type": "boolean"}
            }
        });
        let text = input_template(&schema);
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"topic": "", "count": 3, "mode": "fast", "tags": [], "deep": false})
        );
        assert_eq!(input_template(&json!({"type": "object"})), "{}");
        assert_eq!(parse_input(" "), Ok(json!({})));
        assert_eq!(parse_input(r#"{"a": 1}"#), Ok(json!({"a": 1})));
        assert_eq!(
            parse_input("[1]"),
            Err("the input is a JSON object ({...})".to_owned())
        );
        let bad = parse_input("{\n\"a\": }").unwrap_err();
        assert!(
            bad.starts_with("the input is not JSON: line 2, column 6"),
            "{bad}"
        );
    }
}
