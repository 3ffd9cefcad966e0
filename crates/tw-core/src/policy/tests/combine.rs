//! "The strictest setting wins", as a property: for generated pairs of policy documents that
//! grant the same things (`allow`, `[[exec.allow]]`, callers' and skills' levels) but set every
//! switch, deny list, mode and rule independently, no call is judged more permissively by the
//! two together than by either alone.

use proptest::prelude::*;

use super::*;

const SELECTORS: &[&str] = &["risk:high", "side_effects", "group:fs", "*", "delete_*"];
const LEVELS: &[&str] = &["standard", "elevated", "admin"];

/// One document's switches and restrictions, rendered as TOML by [`Doc::render`].
#[derive(Debug, Clone)]
struct Doc {
    default: Option<&'static str>,
    deny: Vec<&'static str>,
    exec_tools: Option<Vec<&'static str>>,
    security: Option<&'static str>,
    ask: Option<&'static str>,
    modes: Vec<(&'static str, Vec<&'static str>, Vec<&'static str>)>,
    access_default: Option<&'static str>,
    needs: Vec<(&'static str, &'static str)>,
    rules: Vec<(&'static str, &'static str)>,
}

/// What both documents grant.
#[derive(Debug, Clone)]
struct Grants {
    allow: Vec<&'static str>,
    entries: Vec<&'static str>,
    bot: Option<&'static str>,
}

fn pick<T: Clone + std::fmt::Debug + 'static>(
    items: &'static [T],
) -> impl Strategy<Value = Vec<T>> {
    proptest::sample::subsequence(items, 0..=items.len())
}

fn one<T: Clone + std::fmt::Debug + 'static>(items: &'static [T]) -> impl Strategy<Value = T> {
    proptest::sample::select(items)
}

fn doc() -> impl Strategy<Value = Doc> {
    let modes = proptest::collection::vec(
        (
            one(&["alert", "degraded", "lockdown", "recovery", "normal"]),
            pick(SELECTORS),
            pick(SELECTORS),
        ),
        0..3,
    );
    let rules = proptest::collection::vec(
        (
            one(&[
                "forbid_paths = [\"/etc/**\"]",
                "block_patterns = ['rm\\s']",
                "tools = [\"run\"]\nforbid_paths = [\"/w/secret/**\"]",
                "tools = [\"read_file\", \"run\"]\nblock_patterns = ['passwd']",
            ]),
            one(&["deny", "ask"]),
        ),
        0..3,
    );
    (
        (
            proptest::option::of(one(&["allow", "deny"])),
            pick(&["delete_*", "group:net", "risk:high"]),
            proptest::option::of(pick(&["run", "category:code_execution", "group:fs"])),
            proptest::option::of(one(&["deny", "allowlist", "full"])),
            proptest::option::of(one(&["off", "on-miss", "always"])),
        ),
        modes,
        (
            proptest::option::of(one(LEVELS)),
            pick(&[
                ("delete_file", "admin"),
                ("group:fs", "elevated"),
                ("run", "standard"),
                ("*", "elevated"),
            ]),
        ),
        rules,
    )
        .prop_map(
            |(
                (default, deny, exec_tools, security, ask),
                modes,
                (access_default, needs),
                rules,
            )| {
                Doc {
                    default,
                    deny,
                    exec_tools,
                    security,
                    ask,
                    modes,
                    access_default,
                    needs,
                    rules,
                }
            },
        )
}

fn grants() -> impl Strategy<Value = Grants> {
    (
        pick(&["group:fs", "echo", "run", "http_fetch", "*"]),
        pick(&["ls **", "git status **", "echo **", "cat *"]),
        proptest::option::of(one(LEVELS)),
    )
        .prop_map(|(allow, entries, bot)| Grants {
            allow,
            entries,
            bot,
        })
}

fn list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

impl Doc {
    fn render(&self, g: &Grants) -> String {
        let mut t = String::new();
        if let Some(d) = self.default {
            t += &format!("default = {d:?}\n");
        }
        t += &format!("allow = {}\ndeny = {}\n", list(&g.allow), list(&self.deny));
        t += "[exec]\n";
        if let Some(tools) = &self.exec_tools {
            t += &format!("tools = {}\n", list(tools));
        }
        if let Some(s) = self.security {
            t += &format!("security = {s:?}\n");
        }
        if let Some(a) = self.ask {
            t += &format!("ask = {a:?}\n");
        }
        for e in &g.entries {
            t += &format!("[[exec.allow]]\ncommand = {e:?}\n");
        }
        let mut seen = Vec::new();
        for (mode, ask, forbid) in &self.modes {
            if seen.contains(mode) {
                continue;
            }
            seen.push(mode);
            t += &format!(
                "[modes.{mode}]\nask = {}\nforbid = {}\n",
                list(ask),
                list(forbid)
            );
        }
        t += "[access]\n";
        if let Some(d) = self.access_default {
            t += &format!("default = {d:?}\n");
        }
        let needs: Vec<String> = self
            .needs
            .iter()
            .map(|(s, l)| format!("{s:?} = {l:?}"))
            .collect();
        t += &format!("tools = {{ {} }}\n", needs.join(", "));
        if let Some(l) = g.bot {
            t += &format!("callers = {{ bot = {l:?} }}\n");
        }
        for (body, decision) in &self.rules {
            t += &format!("[[rules]]\n{body}\ndecision = {decision:?}\n");
        }
        t
    }
}

fn compile_all(texts: &[(&str, &str)]) -> Policy {
    let docs: Vec<PolicyDoc> = texts
        .iter()
        .map(|(file, text)| PolicyDoc::parse(text, file).unwrap())
        .collect();
    let sources: Vec<PolicySource<'_>> = texts
        .iter()
        .zip(&docs)
        .map(|((file, text), doc)| PolicySource { file, text, doc })
        .collect();
    Policy::compile(&sources, env()).unwrap_or_else(|e| panic!("{e:?}\n{texts:?}"))
}

/// Every call the property is checked on: each tool with arguments that hit and miss the rules
/// and the allowlist, from an ordinary agent and from `bot`, in every mode.
fn calls() -> Vec<Call<'static>> {
    let args: &[(&str, Value)] = &[
        ("read_file", json!({"path": "notes.txt"})),
        ("read_file", json!({"path": "/etc/passwd"})),
        ("write_file", json!({"path": "out.txt"})),
        ("delete_file", json!({"path": "out.txt"})),
        ("echo", json!({})),
        ("http_fetch", json!({"url": "https://example.com"})),
        ("run", json!({"command": "ls -la"})),
        ("run", json!({"command": "git status"})),
        ("run", json!({"command": "rm -rf /"})),
        ("run", json!({"command": "cat /etc/passwd"})),
        ("run", json!({"command": "echo hi > /w/secret/x"})),
        ("run", json!({"command": "$X"})),
    ];
    let mut out = Vec::new();
    for (tool, a) in args {
        for agent in ["agent", "bot"] {
            for mode in [
                OperationalMode::Normal,
                OperationalMode::Alert,
                OperationalMode::Lockdown,
            ] {
                out.push(Call {
                    caller: Caller::agent(agent),
                    mode,
                    ..call(tool, a.clone())
                });
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn adding_a_document_never_loosens_a_decision(g in grants(), a in doc(), b in doc()) {
        let (ta, tb) = (a.render(&g), b.render(&g));
        let pa = compile_all(&[("a.toml", &ta)]);
        let pb = compile_all(&[("b.toml", &tb)]);
        let both = compile_all(&[("a.toml", &ta), ("b.toml", &tb)]);
        for c in calls() {
            let alone = judge_call(&pa, &c).decision.max(judge_call(&pb, &c).decision);
            let together = judge_call(&both, &c);
            prop_assert!(
                together.decision >= alone,
                "{} {} by {} in {} mode: a.toml alone and b.toml alone give at most {alone}, \
                 together {}\n--- a.toml\n{ta}--- b.toml\n{tb}--- trace\n{:#?}",
                c.tool, c.args, c.caller.agent_id, c.mode, together.decision, together.trace
            );
        }
    }
}
