//! Who classifies each registered tool into the catalog's capabilities, in order: an
//! administrator's setting (kept until cleared), the catalog's static map, a cached
//! classification of the same definition, else a classifier: the configured language model,
//! falling back to the deterministic heuristic. Registration never waits on more than the
//! classifier's time limit and never fails because of it; a start never waits on the network.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use tw_core::ToolDefinition;
use tw_core::capability::{Assigned, Classification, Source, definition_hash};
use tw_store::ClassificationSource;

use super::SkillService;
use crate::capabilities::{
    CapabilityState, ToolCapabilities, classify, core_source, from_row, settled, to_row,
};
use crate::error::{Result, RuntimeError};

impl SkillService {
    /// Every registered tool's capabilities, and the catalog.
    pub fn capabilities(&self) -> Arc<CapabilityState> {
        Arc::clone(
            &self
                .capabilities
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    fn swap_capabilities(&self, f: impl FnOnce(&CapabilityState) -> CapabilityState) {
        let mut guard = self
            .capabilities
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let next = f(&guard);
        *guard = Arc::new(next);
    }

    /// Classifies every registered tool once they are all registered: the ones an
    /// administrator, the static map or the cache settles, and the rest with the heuristic (the
    /// model is asked when a tool is next registered or by `toolwarden skills classify TOOL
    /// --again`), so a start never waits on the network.
    pub(crate) async fn classify_at_start(&self) -> Result<()> {
        let cached: HashMap<String, tw_store::ClassificationRow> = self
            .shared
            .store
            .classifications()
            .await?
            .into_iter()
            .map(|r| (r.tool.clone(), r))
            .collect();
        let state = self.capabilities();
        let mut classified = std::collections::BTreeMap::new();
        let mut unsettled = Vec::new();
        for entry in self.shared.registry.list() {
            let def = &entry.definition;
            match settled(def, &state.catalog, cached.get(def.name.as_str())) {
                Some(c) => {
                    classified.insert(c.tool.clone(), c);
                }
                None => unsettled.push(entry),
            }
        }
        // One index for them all: building it per tool would be quadratic.
        self.swap_capabilities(|s| {
            CapabilityState::new(Arc::clone(&s.catalog), classified, s.min_confidence)
        });
        let catalog = Arc::clone(&state.catalog);
        for entry in unsettled {
            let c = classify(&entry.definition, &catalog, None, self.shared.now_us()).await;
            self.remember_classification(c).await;
        }
        Ok(())
    }

    /// Classifies a tool that was just registered or changed (kept as it is when an
    /// administrator set its capabilities, the static map names it, or the definition is the
    /// one already classified), records it and puts it in force.
    pub(crate) async fn classify_registered(&self, def: &ToolDefinition) {
        let state = self.capabilities();
        let cached = self
            .shared.store
            .classification(def.name.as_str())
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(tool = %def.name, error = %e, "the cached classification cannot be read");
                None
            });
        let entry = match settled(def, &state.catalog, cached.as_ref()) {
            Some(e) => e,
            None => {
                let e = classify(
                    def,
                    &state.catalog,
                    self.classifier.as_ref(),
                    self.shared.now_us(),
                )
                .await;
                self.remember(&e).await;
                e
            }
        };
        let name = def.name.to_string();
        self.swap_capabilities(|s| s.with(&name, Some(entry)));
    }

    /// Caches a classification and puts it in force.
    pub(crate) async fn remember_classification(&self, entry: ToolCapabilities) {
        self.remember(&entry).await;
        let name = entry.tool.clone();
        self.swap_capabilities(|s| s.with(&name, Some(entry)));
    }

    async fn remember(&self, entry: &ToolCapabilities) {
        if let Err(e) = self.shared.store.put_classification(&to_row(entry)).await {
            tracing::warn!(tool = %entry.tool, error = %e, "the classification could not be cached; it holds until restart");
        }
    }

    /// Forgets a removed tool's classification (an administrator's stays for a tool of the same
    /// name registered later).
    pub(crate) async fn forget_classification(&self, tool: &str) {
        let admin = self
            .capabilities()
            .tools
            .get(tool)
            .is_some_and(|t| t.classification.source == Source::Admin);
        if !admin
            && let Err(e) = self
                .shared
                .store
                .delete_classification(tool, None, self.shared.now_us())
                .await
        {
            tracing::warn!(tool, error = %e, "the classification could not be removed");
        }
        self.swap_capabilities(|s| s.with(tool, None));
    }

    /// Runs the classifier on a registered tool again (`toolwarden skills classify TOOL
    /// --again`), replacing a cached machine classification; an administrator's stays.
    pub async fn reclassify_tool(&self, tool: &str) -> Result<ToolCapabilities> {
        let entry = self.shared.registered(tool)?;
        let def = &entry.definition;
        let state = self.capabilities();
        if let Some(current) = state.tools.get(tool)
            && matches!(
                current.classification.source,
                Source::Admin | Source::Static
            )
        {
            return Ok(current.clone());
        }
        let e = classify(
            def,
            &state.catalog,
            self.classifier.as_ref(),
            self.shared.now_us(),
        )
        .await;
        self.remember(&e).await;
        self.swap_capabilities(|s| s.with(tool, Some(e.clone())));
        Ok(e)
    }

    /// An administrator sets a tool's capabilities; they hold over every classifier until
    /// cleared. Each must be in the catalog.
    pub async fn set_tool_capabilities(
        &self,
        tool: &str,
        capabilities: &[String],
        note: Option<&str>,
        actor: &str,
    ) -> Result<ToolCapabilities> {
        let entry = self.shared.registered(tool)?;
        let state = self.capabilities();
        if let Some(unknown) = capabilities.iter().find(|c| !state.catalog.contains(c)) {
            return Err(RuntimeError::invalid(
                "capabilities",
                format!(
                    "{unknown:?} is not a capability in the catalog; known: {}",
                    state.catalog.names().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let mut unique: Vec<String> = Vec::new();
        for c in capabilities {
            if !unique.contains(c) {
                unique.push(c.clone());
            }
        }
        let e = ToolCapabilities {
            tool: tool.to_owned(),
            classification: Classification {
                source: Source::Admin,
                capabilities: unique
                    .into_iter()
                    .map(|capability| Assigned {
                        capability,
                        confidence: 1.0,
                    })
                    .collect(),
                detail: note.map(str::to_owned),
            },
            definition_hash: definition_hash(&entry.definition),
            classified_at: self.shared.now_us(),
            classified_by: actor.to_owned(),
        };
        self.shared.store.put_classification(&to_row(&e)).await?;
        self.swap_capabilities(|s| s.with(tool, Some(e.clone())));
        Ok(e)
    }

    /// Clears an administrator's capabilities for a tool; a classifier then decides again.
    pub async fn clear_tool_capabilities(&self, tool: &str, actor: &str) -> Result<bool> {
        let entry = self.shared.registered(tool)?;
        let admin = self
            .capabilities()
            .tools
            .get(tool)
            .is_some_and(|t| t.classification.source == Source::Admin);
        if !admin {
            return Ok(false);
        }
        self.shared
            .store
            .delete_classification(tool, Some(actor), self.shared.now_us())
            .await?;
        self.swap_capabilities(|s| s.with(tool, None));
        self.classify_registered(&entry.definition).await;
        Ok(true)
    }

    /// Picks up administrators' capability settings made by other processes.
    pub(crate) async fn refresh_classifications(&self) -> Result<()> {
        let rows = self.shared.store.classifications().await?;
        let state = self.capabilities();
        let mut changed = Vec::new();
        for row in &rows {
            let held = state.tools.get(&row.tool);
            let differs = held.is_none_or(|h| {
                h.classification.source != core_source(row.source)
                    || h.classified_at != row.classified_at
            });
            if differs
                && (row.source == ClassificationSource::Admin
                    || held.is_some_and(|h| h.classification.source == Source::Admin))
                && self.shared.registry.get(&row.tool).is_some()
            {
                changed.push(from_row(row));
            }
        }
        // An administrator's setting cleared elsewhere: classify again here.
        let cleared: Vec<String> = state
            .tools
            .values()
            .filter(|t| {
                t.classification.source == Source::Admin && !rows.iter().any(|r| r.tool == t.tool)
            })
            .map(|t| t.tool.clone())
            .collect();
        if !changed.is_empty() {
            self.swap_capabilities(|s| {
                let mut tools = s.tools.clone();
                for c in changed {
                    tools.insert(c.tool.clone(), c);
                }
                CapabilityState::new(Arc::clone(&s.catalog), tools, s.min_confidence)
            });
        }
        for tool in cleared {
            if let Some(entry) = self.shared.registry.get(&tool) {
                self.swap_capabilities(|s| s.with(&tool, None));
                self.classify_registered(&entry.definition).await;
            }
        }
        Ok(())
    }
}
