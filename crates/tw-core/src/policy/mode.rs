//! The operational-mode layer: what each mode (`alert`, `degraded`, `lockdown`, `recovery`) asks
//! about or forbids, gathered from every document's `[modes.NAME]` tables, and the built-in
//! meaning a mode keeps when a document leaves it out. One document defining lockdown does not
//! replace it for the others: their built-in lockdown still applies on top.

use std::collections::{BTreeMap, BTreeSet};

use toml::Spanned;

use super::doc::{ModeDoc, PolicyDoc};
use super::source::{PolicyError, PolicySource, Reading, build_set};
use super::{Decision, Layer, LayerVerdict, PolicyRule, RuleRef, SelectorSet, Severity};
use crate::definition::{OperationalMode, ToolDefinition};

/// Where mode defaults are quoted from.
pub const MODE_DEFAULTS_FILE: &str = "built-in mode defaults";

/// What each operational mode means when no policy document mentions it.
pub const MODE_DEFAULTS: &str = r#"[modes.alert]
ask = ["risk:high"]

[modes.degraded]
forbid = ["risk:high"]
ask = ["risk:medium"]

[modes.lockdown]
forbid = ["side_effects", "risk:medium", "risk:high"]

[modes.recovery]
ask = ["side_effects"]
"#;

/// Per-mode selectors.
#[derive(Debug, Clone, Default)]
pub struct ModeRules {
    /// Need approval in the mode.
    pub ask: SelectorSet,
    /// Refused in the mode.
    pub forbid: SelectorSet,
}

/// Every document's `[modes.NAME]` tables, gathered: each mode's (ask, forbid) selectors.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    modes: BTreeMap<OperationalMode, (Vec<PolicyRule>, Vec<PolicyRule>)>,
    /// Modes some document leaves out, which therefore keep their built-in meaning.
    silent: BTreeSet<OperationalMode>,
}

/// Reads one document's `[modes.NAME]` tables.
pub(super) fn gather(
    r: &mut Reading<'_>,
    section: &BTreeMap<Spanned<String>, ModeDoc>,
    out: &mut Gathered,
) {
    for m in OperationalMode::ALL {
        if !section
            .keys()
            .any(|k| k.get_ref().parse::<OperationalMode>().ok() == Some(*m))
        {
            out.silent.insert(*m);
        }
    }
    for (name, mode) in section {
        let Ok(m) = name.get_ref().parse::<OperationalMode>() else {
            r.fail(
                name.span(),
                format!(
                    "modes: unknown operational mode {:?}: expected normal, alert, degraded, \
                     lockdown or recovery",
                    name.get_ref()
                ),
            );
            continue;
        };
        let ask = r.selectors(&mode.ask, &format!("modes.{m}.ask"));
        let forbid = r.selectors(&mode.forbid, &format!("modes.{m}.forbid"));
        for rule in &ask {
            r.note(format!("mode {m} ask {}", rule.pattern));
        }
        for rule in &forbid {
            r.note(format!("mode {m} forbid {}", rule.pattern));
        }
        let entry = out.modes.entry(m).or_default();
        entry.0.extend(ask);
        entry.1.extend(forbid);
    }
}

impl Gathered {
    /// Adds the built-in meaning ([`MODE_DEFAULTS`]) of every mode some document leaves out, or
    /// of every mode when there are no documents, on top of what the documents say.
    pub(super) fn keep_builtin(
        &mut self,
        no_documents: bool,
        errors: &mut Vec<PolicyError>,
    ) -> Result<(), PolicyError> {
        let doc = PolicyDoc::parse(MODE_DEFAULTS, MODE_DEFAULTS_FILE)?;
        let src = PolicySource {
            file: MODE_DEFAULTS_FILE,
            text: MODE_DEFAULTS,
            doc: &doc,
        };
        let mut builtin = Gathered::default();
        let mut summary = BTreeSet::new();
        gather(
            &mut Reading::new(&src, errors, &mut summary),
            &doc.modes,
            &mut builtin,
        );
        for (mode, (ask, forbid)) in builtin.modes {
            if no_documents || self.silent.contains(&mode) {
                let entry = self.modes.entry(mode).or_default();
                entry.0.extend(ask);
                entry.1.extend(forbid);
            }
        }
        Ok(())
    }

    /// Each mode's rules, compiled.
    pub(super) fn build(
        self,
        errors: &mut Vec<PolicyError>,
    ) -> BTreeMap<OperationalMode, ModeRules> {
        self.modes
            .into_iter()
            .map(|(m, (ask, forbid))| {
                (
                    m,
                    ModeRules {
                        ask: build_set(ask, errors),
                        forbid: build_set(forbid, errors),
                    },
                )
            })
            .collect()
    }
}

/// The mode layer: a tool may only run in the modes its definition allows, and then the mode's
/// `forbid` rules refuse it and its `ask` rules hold it for a person.
pub(super) fn evaluate(
    modes: &BTreeMap<OperationalMode, ModeRules>,
    def: &ToolDefinition,
    mode: OperationalMode,
) -> LayerVerdict {
    if !def.allowed_modes.contains(&mode) {
        return LayerVerdict::stop(
            Layer::Mode,
            Decision::Deny,
            "mode_forbidden",
            Severity::Warning,
            format!(
                "tool {} may not run in {mode} mode (it allows: {})",
                def.name,
                def.allowed_modes
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .by(RuleRef::new("allowed_modes", format!("tool {}", def.name)));
    }
    if let Some(rules) = modes.get(&mode) {
        if let Some(r) = rules.forbid.first_match(def) {
            return LayerVerdict::stop(
                Layer::Mode,
                Decision::Deny,
                "mode_forbidden",
                Severity::Warning,
                format!("{mode} mode forbids {} (rule {:?})", def.name, r.pattern),
            )
            .by(RuleRef::new(
                format!("modes.{mode}.forbid {}", r.pattern),
                &r.source,
            ));
        }
        if let Some(r) = rules.ask.first_match(def) {
            return LayerVerdict::stop(
                Layer::Mode,
                Decision::Ask,
                "mode_ask",
                Severity::Warning,
                format!(
                    "in {mode} mode {} needs a person's approval (rule {:?})",
                    def.name, r.pattern
                ),
            )
            .by(RuleRef::new(
                format!("modes.{mode}.ask {}", r.pattern),
                &r.source,
            ));
        }
    }
    LayerVerdict::allow(
        Layer::Mode,
        format!("tool {} may run in {mode} mode", def.name),
    )
}
