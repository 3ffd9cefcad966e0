//! Capability auto-resolve: every registered tool is classified once into the catalog's
//! capabilities (`config/tool_capabilities.yaml`), so a skill's `permissions: [web_read]` reaches
//! the tools that read the web, including ones registered after the skill was written.
//!
//! Who classifies, in order: an administrator's setting (kept until cleared), the catalog's
//! static map, a cached classification of the same definition (SQLite, `tool_classifications`),
//! else a classifier runs: the configured language model (`crate::classifier`), falling back to
//! the deterministic heuristic when there is none or it fails. Registration never waits on more
//! than the classifier's time limit and never fails because of it.
//!
//! The results and the administrators' per-skill overrides (`skill_overrides`) are held in memory
//! as snapshots swapped whole, so judging a call under a skill reads three `Arc`s and does hash
//! lookups. Other processes' changes are re-read with the settings, every second.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::json;
use tw_core::ToolDefinition;
use tw_core::capability::{
    Assigned, Catalog, Classification, Source, classify_heuristic, classify_static,
    definition_hash, parse_catalog,
};
use tw_core::policy::access::AccessLevel;
use tw_core::skill::{
    CapabilityIndex, OverrideAction, Overrides, Provenance, ResolvedTool, SkillOverride, Via,
};
use tw_store::{
    CapabilityScore, ClassificationRow, ClassificationSource, OverrideAction as StoredAction,
    SkillOverrideRow,
};

use crate::classifier::LlmClassifier;
use crate::error::{Result, RuntimeError};

/// The catalog shipped with Toolwarden, used unless the config names another.
pub const BUILTIN_CATALOG: &str = include_str!("../../../config/tool_capabilities.yaml");

/// Who the runtime's own classifications are recorded as.
pub(crate) const CLASSIFIER_ACTOR: &str = "classifier";

/// Reads the catalog the config names, else the built-in one. A catalog that does not parse
/// refuses to start, with every problem as `file:line: message`.
pub(crate) fn load_catalog(file: Option<&std::path::Path>) -> Result<Catalog> {
    let (text, name) = match file {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|e| {
                RuntimeError::invalid(
                    "capabilities_file",
                    format!("{}: cannot be read: {e}", path.display()),
                )
            })?,
            path.display().to_string(),
        ),
        None => (
            BUILTIN_CATALOG.to_owned(),
            "built-in tool_capabilities.yaml".to_owned(),
        ),
    };
    parse_catalog(&text).map_err(|errors| {
        RuntimeError::invalid(
            "capabilities_file",
            errors
                .iter()
                .map(|e| format!("{name}:{e}"))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    })
}

/// One tool's classification as the runtime holds it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCapabilities {
    /// The tool.
    pub tool: String,
    /// Who classified it, what they gave and why.
    pub classification: Classification,
    /// The fingerprint of the definition it was made for.
    pub definition_hash: String,
    /// When (µs since the epoch; 0 for the static map, which is read at start).
    pub classified_at: i64,
    /// `classifier` or the administrator.
    pub classified_by: String,
}

impl ToolCapabilities {
    /// The capabilities used to resolve skills: all of an administrator's or the static map's,
    /// and a classifier's at or above `min_confidence`.
    pub fn effective(&self, min_confidence: f32) -> Vec<String> {
        let trusted = matches!(self.classification.source, Source::Static | Source::Admin);
        self.classification
            .capabilities
            .iter()
            .filter(|a| trusted || a.confidence >= min_confidence)
            .map(|a| a.capability.clone())
            .collect()
    }
}

/// Every registered tool's classification and the index built from them.
#[derive(Debug, Clone)]
pub struct CapabilityState {
    /// The catalog in force.
    pub catalog: Arc<Catalog>,
    /// By tool.
    pub tools: BTreeMap<String, ToolCapabilities>,
    /// Tool <-> capability, for resolution.
    pub index: CapabilityIndex,
    /// The threshold a classifier's capability must reach to count.
    pub min_confidence: f32,
}

impl CapabilityState {
    pub(crate) fn new(
        catalog: Arc<Catalog>,
        tools: BTreeMap<String, ToolCapabilities>,
        min_confidence: f32,
    ) -> Self {
        let index = CapabilityIndex::new(
            tools
                .values()
                .map(|t| (t.tool.clone(), t.effective(min_confidence))),
        );
        Self {
            catalog,
            tools,
            index,
            min_confidence,
        }
    }

    pub(crate) fn with(&self, tool: &str, entry: Option<ToolCapabilities>) -> Self {
        let mut tools = self.tools.clone();
        match entry {
            Some(e) => tools.insert(tool.to_owned(), e),
            None => tools.remove(tool),
        };
        Self::new(Arc::clone(&self.catalog), tools, self.min_confidence)
    }

    /// How many tools each source classified.
    pub fn sources(&self) -> BTreeMap<Source, usize> {
        let mut out = BTreeMap::new();
        for t in self.tools.values() {
            *out.entry(t.classification.source).or_default() += 1;
        }
        out
    }
}

/// The administrators' overrides as stored (who, when, why) and indexed.
#[derive(Debug, Clone, Default)]
pub struct OverrideState {
    /// As stored, by skill and tool.
    pub rows: Vec<SkillOverrideRow>,
    /// Indexed for resolution.
    pub overrides: Overrides,
}

impl OverrideState {
    pub(crate) fn new(rows: Vec<SkillOverrideRow>) -> Self {
        let overrides = Overrides::new(rows.iter().map(|r| SkillOverride {
            skill: r.skill.clone(),
            tool: r.tool.clone(),
            action: match r.action {
                StoredAction::Add => OverrideAction::Add {
                    access_level: r.access_level.unwrap_or_default(),
                },
                StoredAction::Remove => OverrideAction::Remove,
            },
            by: r.created_by.clone(),
        }));
        Self { rows, overrides }
    }
}

/// Counters of this process's skill activity, for `toolwarden skills metrics` and the app.
#[derive(Debug, Default)]
pub(crate) struct SkillCounters {
    pub(crate) activations: Mutex<HashMap<String, u64>>,
    /// Calls let through by: manifest, inherited, capability, override; and refused.
    pub(crate) checks: [AtomicU64; 5],
}

impl SkillCounters {
    pub(crate) fn count_check(&self, via: Option<Via<'_>>) {
        let slot = match via {
            Some(Via::Manifest) => 0,
            Some(Via::Inherited(_)) => 1,
            Some(Via::Capability(_)) => 2,
            Some(Via::Override(_)) => 3,
            None => 4,
        };
        if let Some(c) = self.checks.get(slot) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A skill's envelope, resolved: every tool it may use with where it came from, plus, for the
/// tools reached through a capability, how that capability was given.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedSkill {
    /// The skill.
    pub skill: String,
    /// Its capability names (own and inherited).
    pub permissions: Vec<String>,
    /// Its tools: overrides' additions, the manifest's and inherited entries, then the tools
    /// reached through a capability, in name order.
    pub tools: Vec<ResolvedEntry>,
    /// Permissions the catalog does not know (they reach nothing).
    pub unknown_permissions: Vec<String>,
    /// Overrides that name a tool that is not registered.
    pub dangling_overrides: Vec<String>,
}

/// One tool of a resolved skill.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedEntry {
    /// The entry.
    #[serde(flatten)]
    pub tool: ResolvedTool,
    /// Whether a tool of this name is registered now (a manifest may name one that is not).
    pub registered: bool,
    /// For a capability match: who classified the tool and how sure they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classification: Option<ClassificationNote>,
}

/// How a capability match was classified.
#[derive(Debug, Clone, Serialize)]
pub struct ClassificationNote {
    /// Static, llm, heuristic or admin.
    pub source: Source,
    /// The confidence in the matching capability.
    pub confidence: f32,
}

/// Lifecycle figures per skill and for the classifier.
#[derive(Debug, Clone, Serialize)]
pub struct SkillMetrics {
    /// Per skill, by name.
    pub skills: Vec<SkillFigures>,
    /// How many registered tools each source classified.
    pub classification_sources: BTreeMap<Source, usize>,
    /// This process's envelope checks, by what let the call through (`denied`: refused).
    pub checks: BTreeMap<&'static str, u64>,
}

/// One skill's figures.
#[derive(Debug, Clone, Serialize)]
pub struct SkillFigures {
    /// The skill.
    pub skill: String,
    /// Whether it loads (a skill with errors does not, and reaches nothing).
    pub loaded: bool,
    /// Resolutions of its envelope in this process.
    pub activations: u64,
    /// Resolved tools by provenance: manifest, inherited, capability, override.
    pub resolved: BTreeMap<&'static str, usize>,
    /// Overrides for it (additions and removals).
    pub overrides: usize,
    /// Calls made under it, from the audit log.
    pub calls: u64,
    /// Of those, refused by its envelope.
    pub skill_denied: u64,
    /// The latest call's start (µs since the epoch).
    pub last_call_at: Option<i64>,
}

pub(crate) fn core_source(s: ClassificationSource) -> Source {
    match s {
        ClassificationSource::Static => Source::Static,
        ClassificationSource::Llm => Source::Llm,
        ClassificationSource::Heuristic => Source::Heuristic,
        ClassificationSource::Admin => Source::Admin,
    }
}

fn stored_source(s: Source) -> ClassificationSource {
    match s {
        Source::Static => ClassificationSource::Static,
        Source::Llm => ClassificationSource::Llm,
        Source::Heuristic => ClassificationSource::Heuristic,
        Source::Admin => ClassificationSource::Admin,
    }
}

pub(crate) fn from_row(row: &ClassificationRow) -> ToolCapabilities {
    ToolCapabilities {
        tool: row.tool.clone(),
        classification: Classification {
            source: core_source(row.source),
            capabilities: row
                .capabilities
                .iter()
                .map(|c| Assigned {
                    capability: c.capability.clone(),
                    confidence: c.confidence,
                })
                .collect(),
            detail: row.detail.clone(),
        },
        definition_hash: row.definition_hash.clone(),
        classified_at: row.classified_at,
        classified_by: row.classified_by.clone(),
    }
}

pub(crate) fn to_row(t: &ToolCapabilities) -> ClassificationRow {
    ClassificationRow {
        tool: t.tool.clone(),
        definition_hash: t.definition_hash.clone(),
        source: stored_source(t.classification.source),
        capabilities: t
            .classification
            .capabilities
            .iter()
            .map(|a| CapabilityScore {
                capability: a.capability.clone(),
                confidence: a.confidence,
            })
            .collect(),
        detail: t.classification.detail.clone(),
        classified_at: t.classified_at,
        classified_by: t.classified_by.clone(),
    }
}

/// The classification that stands for `def` without running a classifier: an administrator's,
/// the static map's, or a cached one made for this very definition. `None`: classify it.
pub(crate) fn settled(
    def: &ToolDefinition,
    catalog: &Catalog,
    cached: Option<&ClassificationRow>,
) -> Option<ToolCapabilities> {
    let hash = definition_hash(def);
    if let Some(row) = cached.filter(|r| r.source == ClassificationSource::Admin) {
        return Some(from_row(row));
    }
    if let Some(c) = classify_static(def.name.as_str(), catalog) {
        return Some(ToolCapabilities {
            tool: def.name.to_string(),
            classification: c,
            definition_hash: hash,
            classified_at: 0,
            classified_by: "catalog".to_owned(),
        });
    }
    cached.filter(|r| r.definition_hash == hash).map(from_row)
}

/// Runs a classifier on `def`: the model when one is configured, else (or when it fails) the
/// heuristic, whose detail then says why the model was not used.
pub(crate) async fn classify(
    def: &ToolDefinition,
    catalog: &Catalog,
    llm: Option<&LlmClassifier>,
    now_us: i64,
) -> ToolCapabilities {
    let classification = match llm {
        Some(llm) => match llm.classify(def, catalog).await {
            Ok(capabilities) => Classification {
                source: Source::Llm,
                capabilities,
                detail: Some(format!("model {}", llm.model())),
            },
            Err(e) => {
                tracing::warn!(tool = %def.name, error = %e, "the capability model failed; the heuristic classified the tool");
                let mut c = classify_heuristic(def, catalog);
                c.detail = Some(match c.detail {
                    Some(d) => format!("model {} failed ({e}); {d}", llm.model()),
                    None => format!("model {} failed ({e})", llm.model()),
                });
                c
            }
        },
        None => classify_heuristic(def, catalog),
    };
    ToolCapabilities {
        tool: def.name.to_string(),
        classification,
        definition_hash: definition_hash(def),
        classified_at: now_us,
        classified_by: CLASSIFIER_ACTOR.to_owned(),
    }
}

/// What an override row says, in words (`toolwarden skills overrides`).
pub fn describe_override(row: &SkillOverrideRow) -> String {
    let what = match row.action {
        StoredAction::Add => format!(
            "add {} (up to {})",
            row.tool,
            row.access_level.unwrap_or_default()
        ),
        StoredAction::Remove => format!("remove {}", row.tool),
    };
    let why = row
        .reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    format!("{} {what}, by {}{why}", row.skill, row.created_by)
}

/// The provenance of a resolved tool in words, with its classification when it has one.
pub fn describe_provenance(entry: &ResolvedEntry) -> String {
    match (&entry.tool.provenance, &entry.classification) {
        (Provenance::Capability(c), Some(n)) => {
            format!("capability {c} ({} {:.2})", n.source, n.confidence)
        }
        (p, _) => p.to_string(),
    }
}

/// The admin-log details of an override, for the desktop and the CLI's JSON.
pub fn override_json(row: &SkillOverrideRow) -> serde_json::Value {
    json!({
        "skill": row.skill,
        "tool": row.tool,
        "action": row.action.as_str(),
        "access_level": row.access_level.map(AccessLevel::as_str),
        "reason": row.reason,
        "created_at": row.created_at,
        "created_by": row.created_by,
    })
}
