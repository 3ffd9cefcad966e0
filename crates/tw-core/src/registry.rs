//! The tool registry: every callable tool by name, with discovery by category, group, tier, mode and
//! text.
//!
//! Lookups are the hot path (one per call) and registrations are rare, so the map sits behind an
//! `RwLock` and entries are `Arc`s: a reader holds the lock only long enough to clone a pointer, and a
//! call keeps using the entry it looked up even if the tool is replaced meanwhile. The registry is
//! generic over `X`, the runtime's "how to run it" payload, so this crate stays free of executors.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use crate::definition::{LicenseTier, OperationalMode, ToolCategory, ToolDefinition};
use crate::error::CoreError;
use crate::name::{ToolGroup, ToolName};

/// A registered tool: its definition and how it runs.
#[derive(Debug)]
pub struct RegisteredTool<X> {
    /// The contract.
    pub definition: ToolDefinition,
    /// The runtime's execution payload.
    pub kind: X,
    search_text: String,
    /// The definition with its side effects the other way round, made the first time a call
    /// is judged that way (an `http_fetch` GET only reads), then kept for every later one.
    flipped: OnceLock<ToolDefinition>,
}

impl<X> RegisteredTool<X> {
    fn new(definition: ToolDefinition, kind: X) -> Self {
        let search_text = format!("{}\n{}", definition.name, definition.description).to_lowercase();
        Self {
            definition,
            kind,
            search_text,
            flipped: OnceLock::new(),
        }
    }

    /// The contract as a call with these side effects is judged: the definition itself, or the
    /// same contract with that one constraint changed.
    pub fn with_side_effects(&self, side_effects: bool) -> &ToolDefinition {
        if side_effects == self.definition.constraints.side_effects {
            return &self.definition;
        }
        self.flipped.get_or_init(|| {
            let mut d = self.definition.clone();
            d.constraints.side_effects = side_effects;
            d
        })
    }

    /// The tool's name.
    pub fn name(&self) -> &ToolName {
        &self.definition.name
    }
}

/// Discovery criteria; every set field must match.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    /// Only tools of this category.
    pub category: Option<ToolCategory>,
    /// Only tools of this group.
    pub group: Option<ToolGroup>,
    /// Only tools available at this license tier.
    pub tier: Option<LicenseTier>,
    /// Only tools allowed in this operational mode.
    pub mode: Option<OperationalMode>,
    /// Only tools whose name or description contains every word of this text (case-insensitive).
    pub text: Option<String>,
}

impl ToolFilter {
    fn matches(&self, words: &[String], def: &ToolDefinition, search_text: &str) -> bool {
        self.category.is_none_or(|c| def.category == c)
            && self.group.as_ref().is_none_or(|g| &def.group == g)
            && self.tier.is_none_or(|t| def.license_tier <= t)
            && self.mode.is_none_or(|m| def.allowed_modes.contains(&m))
            && words.iter().all(|w| search_text.contains(w.as_str()))
    }
}

type Map<X> = HashMap<ToolName, Arc<RegisteredTool<X>>>;

/// All registered tools.
pub struct ToolRegistry<X> {
    tools: RwLock<Map<X>>,
}

impl<X> Default for ToolRegistry<X> {
    fn default() -> Self {
        Self {
            tools: RwLock::new(HashMap::new()),
        }
    }
}

impl<X> ToolRegistry<X> {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    // A panic while holding the lock cannot leave the map half-updated (every write is a single
    // insert or remove, or a remove and an insert with nothing that can fail between them), so a
    // poisoned lock is still consistent and is used as is.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Map<X>> {
        self.tools.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Map<X>> {
        self.tools.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a tool; refuses a name that is already taken.
    pub fn register(
        &self,
        definition: ToolDefinition,
        kind: X,
    ) -> Result<Arc<RegisteredTool<X>>, CoreError> {
        let entry = Arc::new(RegisteredTool::new(definition, kind));
        let mut tools = self.write();
        if tools.contains_key(entry.name()) {
            return Err(CoreError::DuplicateTool(entry.name().to_string()));
        }
        tools.insert(entry.name().clone(), Arc::clone(&entry));
        Ok(entry)
    }

    /// Replaces an existing tool's definition and payload; refuses an unknown name.
    pub fn update(
        &self,
        definition: ToolDefinition,
        kind: X,
    ) -> Result<Arc<RegisteredTool<X>>, CoreError> {
        let entry = Arc::new(RegisteredTool::new(definition, kind));
        let mut tools = self.write();
        match tools.get_mut(entry.name()) {
            Some(slot) => {
                *slot = Arc::clone(&entry);
                Ok(entry)
            }
            None => Err(CoreError::UnknownTool(entry.name().to_string())),
        }
    }

    /// Puts `definition` in place of tool `old` in one step, under its own name (which may be
    /// `old` or a name no tool has): a reader sees the old tool or the new one, never neither
    /// nor both. Refuses an unknown `old` and a name that is taken.
    pub fn replace(
        &self,
        old: &str,
        definition: ToolDefinition,
        kind: X,
    ) -> Result<Arc<RegisteredTool<X>>, CoreError> {
        let entry = Arc::new(RegisteredTool::new(definition, kind));
        let mut tools = self.write();
        if !tools.contains_key(old) {
            return Err(CoreError::UnknownTool(old.to_owned()));
        }
        if entry.name().as_str() != old && tools.contains_key(entry.name()) {
            return Err(CoreError::DuplicateTool(entry.name().to_string()));
        }
        tools.remove(old);
        tools.insert(entry.name().clone(), Arc::clone(&entry));
        Ok(entry)
    }

    /// Removes a tool, returning it.
    pub fn unregister(&self, name: &str) -> Result<Arc<RegisteredTool<X>>, CoreError> {
        self.write()
            .remove(name)
            .ok_or_else(|| CoreError::UnknownTool(name.to_owned()))
    }

    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<Arc<RegisteredTool<X>>> {
        self.read().get(name).cloned()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Every tool, sorted by name.
    pub fn list(&self) -> Vec<Arc<RegisteredTool<X>>> {
        self.find(&ToolFilter::default())
    }

    /// The tools matching `filter`, sorted by name.
    pub fn find(&self, filter: &ToolFilter) -> Vec<Arc<RegisteredTool<X>>> {
        let words: Vec<String> = filter
            .text
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_lowercase)
            .collect();
        let mut found: Vec<_> = self
            .read()
            .values()
            .filter(|t| filter.matches(&words, &t.definition, &t.search_text))
            .cloned()
            .collect();
        found.sort_by(|a, b| a.name().cmp(b.name()));
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ParameterSchema;
    use pretty_assertions::assert_eq;

    fn def(name: &str, group: &str, category: ToolCategory, description: &str) -> ToolDefinition {
        ToolDefinition::new(
            ToolName::new(name).unwrap(),
            description,
            category,
            ToolGroup::new(group).unwrap(),
            ParameterSchema::no_parameters(),
        )
    }

    #[test]
    fn a_call_judged_the_other_way_gets_the_same_contract_with_only_side_effects_changed() {
        let mut d = def("http_fetch", "net", ToolCategory::Network, "Fetch");
        d.constraints.side_effects = true;
        let entry = RegisteredTool::new(d.clone(), ());
        assert!(std::ptr::eq(
            entry.with_side_effects(true),
            &entry.definition
        ));
        let read_only = entry.with_side_effects(false);
        assert!(!read_only.constraints.side_effects);
        let mut expected = d;
        expected.constraints.side_effects = false;
        assert_eq!(read_only, &expected);
        // Made once, then the same for every later call.
        assert!(std::ptr::eq(read_only, entry.with_side_effects(false)));
    }

    fn registry() -> ToolRegistry<()> {
        let r = ToolRegistry::new();
        r.register(
            def("read_file", "fs", ToolCategory::FileSystem, "Read a file"),
            (),
        )
        .unwrap();
        r.register(
            def("fetch", "net", ToolCategory::Network, "Fetch a web page"),
            (),
        )
        .unwrap();
        let mut pro = def(
            "query_db",
            "data",
            ToolCategory::Database,
            "Run a read-only SQL query",
        );
        pro.license_tier = LicenseTier::Pro;
        pro.allowed_modes = vec![OperationalMode::Normal];
        r.register(pro, ()).unwrap();
        r
    }

    fn names(found: Vec<Arc<RegisteredTool<()>>>) -> Vec<String> {
        found.iter().map(|t| t.name().to_string()).collect()
    }

    #[test]
    fn register_update_unregister() {
        let r = registry();
        assert!(matches!(
            r.register(def("fetch", "net", ToolCategory::Network, "again"), ()),
            Err(CoreError::DuplicateTool(_))
        ));
        r.update(def("fetch", "net", ToolCategory::Network, "Fetch v2"), ())
            .unwrap();
        assert_eq!(r.get("fetch").unwrap().definition.description, "Fetch v2");
        assert!(
            r.update(def("nope", "x", ToolCategory::System, "d"), ())
                .is_err()
        );
        r.unregister("fetch").unwrap();
        assert!(r.get("fetch").is_none());
        assert!(matches!(
            r.unregister("fetch"),
            Err(CoreError::UnknownTool(_))
        ));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn discovery() {
        let r = registry();
        let by = |f: ToolFilter| names(r.find(&f));
        assert_eq!(names(r.list()), ["fetch", "query_db", "read_file"]);
        assert_eq!(
            by(ToolFilter {
                category: Some(ToolCategory::Network),
                ..Default::default()
            }),
            ["fetch"]
        );
        assert_eq!(
            by(ToolFilter {
                group: Some(ToolGroup::new("fs").unwrap()),
                ..Default::default()
            }),
            ["read_file"]
        );
        assert_eq!(
            by(ToolFilter {
                tier: Some(LicenseTier::Core),
                ..Default::default()
            }),
            ["fetch", "read_file"]
        );
        assert_eq!(
            by(ToolFilter {
                mode: Some(OperationalMode::Lockdown),
                ..Default::default()
            }),
            ["fetch", "read_file"]
        );
        assert_eq!(
            by(ToolFilter {
                text: Some("READ query".into()),
                ..Default::default()
            }),
            ["query_db"]
        );
        assert_eq!(
            by(ToolFilter {
                text: Some("file".into()),
                ..Default::default()
            }),
            ["read_file"]
        );
    }
}
