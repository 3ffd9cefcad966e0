//! `toolwarden sandbox doctor`: what isolation this host can give and why not, and the escape
//! self-test's cases, so an operator can see at a glance whether strict tools will run here.

use tw_runtime::Runtime;
use tw_runtime::SandboxDoctor as Doctor;

use crate::cli::SandboxCommand;
use crate::out::{out, outln};
use crate::table::Table;

pub(crate) async fn run(rt: &Runtime, cmd: SandboxCommand) -> anyhow::Result<u8> {
    match cmd {
        SandboxCommand::Doctor { json } => doctor(rt, json).await,
    }
}

/// Exits 1 if any self-test case escaped.
async fn doctor(rt: &Runtime, as_json: bool) -> anyhow::Result<u8> {
    let report = rt.sandbox_doctor().await;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out!("{}", render(&report))?;
    }
    Ok(u8::from(report.self_test.iter().any(|c| !c.contained)))
}

/// The report as four blocks: the host's facts, what strict needs and whether it is held, each
/// isolation level, and the self-test's cases.
fn render(d: &Doctor) -> String {
    let mut out = facts_table(d).render_rows();
    out.push('\n');
    out.push_str(&protections_table(d).render());
    out.push('\n');
    out.push_str(&levels_table(d).render());
    out.push('\n');
    out.push_str(&self_test(d));
    out
}

/// The helper, the kernel and its features, and who runs the tools, as label and value.
fn facts_table(d: &Doctor) -> Table {
    let mut facts = Table::new(&["", ""]).max_width(100);
    facts.row(vec![
        "helper".into(),
        match &d.helper {
            Ok(p) => p.display().to_string(),
            Err(e) => format!("MISSING: {e}"),
        },
    ]);
    facts.row(vec!["kernel".into(), d.kernel.clone()]);
    facts.row(vec![
        "running as".into(),
        if d.running_as_root {
            format!(
                "root (strict tools run as uid {} gid {})",
                d.sandbox_ids.0, d.sandbox_ids.1
            )
        } else {
            "an unprivileged user (strict tools use a user namespace)".into()
        },
    ]);
    facts.row(vec![
        "landlock".into(),
        d.landlock_abi
            .map_or("not available".into(), |v| format!("ABI {v}")),
    ]);
    facts.row(vec!["user namespaces".into(), d.user_namespaces.clone()]);
    facts.row(vec![
        "tree limits".into(),
        match &d.tree_limits {
            Ok(s) | Err(s) => s.clone(),
        },
    ]);
    facts.row(vec![
        "built ahead".into(),
        match d.built_ahead {
            (0, _) => "off: every sandbox is built on the spot ([sandbox] pool = 0)".into(),
            (n, ready) => format!(
                "up to {n} sandboxes kept ready for each of the last few kinds of run seen \
                 twice ({ready} ready in this process)"
            ),
        },
    ]);
    facts.row(vec![
        "bubblewrap".into(),
        d.bubblewrap.as_ref().map_or("not installed".into(), |p| {
            format!("{} (not used; for comparison)", p.display())
        }),
    ]);
    facts
}

fn protections_table(d: &Doctor) -> Table {
    let mut held = Table::new(&["STRICT NEEDS", "HERE", "DETAIL"]).max_width(110);
    for p in &d.protections {
        held.row(vec![
            p.name.clone(),
            if p.held { "held" } else { "MISSING" }.into(),
            p.detail.clone(),
        ]);
    }
    held
}

fn levels_table(d: &Doctor) -> Table {
    let mut levels = Table::new(&["LEVEL", "AVAILABLE", "DETAIL"]).max_width(110);
    for l in &d.levels {
        levels.row(vec![
            l.level.to_string(),
            if l.available { "yes" } else { "no" }.into(),
            l.detail.clone(),
        ]);
    }
    levels
}

/// The self-test's cases as a table, or why it did not run.
fn self_test(d: &Doctor) -> String {
    if d.self_test.is_empty() {
        return "self-test: not run (strict could not be built)\n".to_owned();
    }
    let mut cases = Table::new(&["SELF-TEST (STRICT)", "RESULT", "DETAIL"]).max_width(70);
    for c in &d.self_test {
        cases.row(vec![
            c.case.clone(),
            if c.contained { "contained" } else { "ESCAPED" }.into(),
            c.detail.clone(),
        ]);
    }
    cases.render()
}
