//! The tools service: the administrators' side of the registry. Custom tools are added,
//! replaced (renamed too) and removed here, with every rule checked before anything is written:
//! a custom tool needs a command, cannot take a built-in's name, and counts against the license
//! tier's allowance. Tools are switched on and off per tier here too.
//!
//! Custom tools and switches are rows in the store, shared by every process on the data
//! directory: this process applies its own change before returning, and picks up another
//! process's within a second through the change counters (`crate::changes`). Every change is
//! an admin-log entry with who made it; the service stamps it with the runtime's own clock.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::{Value, json};
use tw_core::policy::{self, TierSwitch};
use tw_core::{LicenseTier, ToolRegistry, ToolSpec};
use tw_store::{AdminEvent, SwitchChange};

use crate::error::{Result, RuntimeError};
use crate::kind::ToolKind;
use crate::settings::SettingsService;
use crate::shared::Shared;
use crate::skills::SkillService;
use crate::switches::{Switches, ToolSwitchOutcome};

/// Owns custom tools and the per-tier tool switches.
pub struct ToolService {
    shared: Arc<Shared>,
    settings: Arc<SettingsService>,
    skills: Arc<SkillService>,
    /// Position of each custom tool among the custom tools, by first save.
    custom_ranks: RwLock<HashMap<String, usize>>,
    switches: RwLock<Arc<Switches>>,
    /// Orders re-reads of the switches against this process's own switching.
    switches_sync: tokio::sync::Mutex<()>,
    /// Orders re-reads of the custom tools against this process's own edits of them: held from
    /// an edit's checks to its registry write, and from a refresh's read of the store to its
    /// last registry write, so a refresh that read the store before an edit cannot put the old
    /// tool back after it.
    custom_sync: tokio::sync::Mutex<()>,
}

impl ToolService {
    /// Registers the stored custom tools; one that no longer loads is a warning, not a failure.
    pub(crate) async fn open(
        shared: Arc<Shared>,
        settings: Arc<SettingsService>,
        skills: Arc<SkillService>,
        warnings: &mut Vec<String>,
    ) -> Result<Self> {
        let switches = Switches::from_rows(shared.store.tool_switches().await?);
        for stored in shared.store.custom_tools().await? {
            match stored.spec {
                Ok(spec) => {
                    if let Err(e) = register(&shared.registry, spec) {
                        warnings.push(format!("custom tool {}: {e}", stored.name));
                    }
                }
                Err(e) => warnings.push(e),
            }
        }
        for w in warnings.iter() {
            tracing::warn!(warning = %w, "a stored custom tool was not loaded");
        }
        let service = Self {
            shared,
            settings,
            skills,
            custom_ranks: RwLock::default(),
            switches: RwLock::new(Arc::new(switches)),
            switches_sync: tokio::sync::Mutex::new(()),
            custom_sync: tokio::sync::Mutex::new(()),
        };
        service.refresh_ranks().await?;
        Ok(service)
    }

    /// Position of a custom tool among the custom tools (`None`: not a custom tool). After a
    /// tier downgrade the newest custom tools stop first.
    pub fn custom_rank(&self, name: &str) -> Option<usize> {
        self.ranks().get(name).copied()
    }

    fn ranks(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, usize>> {
        self.custom_ranks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Checks that `spec` may be saved as a custom tool: it has a command, and its name is not a
    /// built-in's.
    fn check(&self, spec: &ToolSpec) -> Result<()> {
        let name = spec.definition.name.as_str();
        if spec.command.is_none() {
            return Err(RuntimeError::NotCustom(name.to_owned()));
        }
        if let Some(existing) = self.shared.registry.get(name)
            && existing.kind.is_builtin()
        {
            return Err(RuntimeError::BuiltinName(name.to_owned()));
        }
        Ok(())
    }

    /// Checks that `new` more custom tools fit the tier's allowance.
    fn check_allowance(&self, new: usize) -> Result<()> {
        let tier = self.settings.tier();
        if let Some(limit) = policy::custom_tool_limit(tier)
            && new > 0
            && self.ranks().len() + new > limit
        {
            return Err(RuntimeError::TierLimit { tier, limit });
        }
        Ok(())
    }

    /// Creates a custom tool under a name no tool has yet.
    pub async fn create_custom_tool(&self, spec: ToolSpec, actor: &str) -> Result<()> {
        let name = spec.definition.name.as_str();
        if self.shared.registry.get(name).is_some() {
            self.check(&spec)?;
            return Err(RuntimeError::ToolExists(name.to_owned()));
        }
        self.add_custom_tool(spec, actor).await.map(|_| ())
    }

    /// Adds (or updates) one custom tool. Returns whether it is new.
    pub async fn add_custom_tool(&self, spec: ToolSpec, actor: &str) -> Result<bool> {
        let mut added = self.add_custom_tools(vec![spec], actor).await?;
        Ok(added.pop().unwrap_or(false))
    }

    /// Adds (or updates) custom tools, each persisted and recorded in the admin log. Every spec
    /// is checked before any is saved, so a set with one bad spec changes nothing. Returns, per
    /// spec, whether it is new.
    pub async fn add_custom_tools(&self, specs: Vec<ToolSpec>, actor: &str) -> Result<Vec<bool>> {
        let _sync = self.custom_sync.lock().await;
        let mut names = HashSet::new();
        for spec in &specs {
            self.check(spec)?;
            names.insert(spec.definition.name.to_string());
        }
        let new = names
            .iter()
            .filter(|n| self.custom_rank(n).is_none())
            .count();
        self.check_allowance(new)?;
        let mut added = Vec::with_capacity(specs.len());
        for spec in specs {
            let name = spec.definition.name.to_string();
            let is_new = self.shared.registry.get(&name).is_none();
            self.shared
                .store
                .save_custom_tool(&spec, self.shared.now_us())
                .await?;
            let details = serde_json::to_value(&spec).unwrap_or(Value::Null);
            let def = spec.definition.clone();
            register(&self.shared.registry, spec)?;
            self.refresh_ranks().await?;
            self.skills.classify_registered(&def).await;
            let (kind, verb) = if is_new {
                ("custom_tool_added", "added")
            } else {
                ("custom_tool_updated", "updated")
            };
            self.shared
                .admin(actor, kind, format!("{verb} custom tool {name}"), details)
                .await;
            added.push(is_new);
        }
        self.shared.tools_changed();
        Ok(added)
    }

    /// Replaces custom tool `old` with `spec`, renaming it if `spec` has another name, in one
    /// step: the store swaps the rows in one transaction and the registry in one write, so no
    /// reader ever sees both or neither. The new name must not be a built-in's or another custom
    /// tool's (a conflict, as creating a tool under it would be).
    pub async fn replace_custom_tool(&self, old: &str, spec: ToolSpec, actor: &str) -> Result<()> {
        self.check(&spec)?;
        let _sync = self.custom_sync.lock().await;
        let Some(command) = spec.command.clone() else {
            return Err(RuntimeError::NotCustom(spec.definition.name.to_string()));
        };
        if self
            .shared
            .registry
            .get(old)
            .is_none_or(|e| e.kind.is_builtin())
        {
            return Err(RuntimeError::unknown_tool(format!(
                "no custom tool named {old:?} to replace"
            )));
        }
        let name = spec.definition.name.to_string();
        if name != old && self.shared.registry.get(&name).is_some() {
            return Err(RuntimeError::ToolExists(name));
        }
        self.shared
            .store
            .replace_custom_tool(old, &spec, self.shared.now_us())
            .await?;
        let details = serde_json::to_value(&spec).unwrap_or(Value::Null);
        let def = spec.definition.clone();
        self.shared
            .registry
            .replace(old, spec.definition.clone(), ToolKind::Custom(command))?;
        if name != old {
            self.skills.forget_classification(old).await;
        }
        self.refresh_ranks().await?;
        self.skills.classify_registered(&def).await;
        let summary = if name == old {
            format!("updated custom tool {name}")
        } else {
            format!("replaced custom tool {old} with {name}")
        };
        self.shared
            .admin(actor, "custom_tool_updated", summary, details)
            .await;
        self.shared.tools_changed();
        Ok(())
    }

    /// Removes a custom tool from the registry and the store.
    pub async fn remove_custom_tool(&self, name: &str, actor: &str) -> Result<()> {
        let _sync = self.custom_sync.lock().await;
        match self.shared.registry.get(name) {
            Some(e) if e.kind.is_builtin() => {
                return Err(RuntimeError::BuiltinRemoval(name.to_owned()));
            }
            None => return Err(tw_core::CoreError::UnknownTool(name.to_owned()).into()),
            Some(_) => {}
        }
        self.shared.store.delete_custom_tool(name).await?;
        self.shared.registry.unregister(name)?;
        self.skills.forget_classification(name).await;
        self.refresh_ranks().await?;
        self.shared
            .admin(
                actor,
                "custom_tool_removed",
                format!("removed custom tool {name}"),
                json!({ "tool": name }),
            )
            .await;
        self.shared.tools_changed();
        Ok(())
    }

    /// Brings the registry's custom tools in line with the store after another process added,
    /// replaced or removed one, so a long-running `serve` or the desktop app lists and runs a
    /// tool added with the CLI, and stops running one removed there.
    pub(crate) async fn refresh_custom_tools(&self) -> Result<()> {
        let _sync = self.custom_sync.lock().await;
        let stored = self.shared.store.custom_tools().await?;
        let registry = &self.shared.registry;
        let mut keep = HashSet::new();
        for t in stored {
            keep.insert(t.name.clone());
            let Ok(spec) = t.spec else { continue };
            let same = match registry.get(&t.name) {
                Some(e) => match &e.kind {
                    ToolKind::Custom(c) => {
                        e.definition == spec.definition && Some(c) == spec.command.as_ref()
                    }
                    // A built-in or imported tool keeps its name.
                    _ => true,
                },
                None => false,
            };
            if !same {
                let def = spec.definition.clone();
                match register(registry, spec) {
                    Ok(_) => self.skills.classify_registered(&def).await,
                    Err(e) => {
                        tracing::warn!(tool = %t.name, error = %e, "a custom tool saved elsewhere was not loaded")
                    }
                }
            }
        }
        let gone: Vec<String> = registry
            .list()
            .into_iter()
            .filter(|e| matches!(e.kind, ToolKind::Custom(_)))
            .map(|e| e.definition.name.to_string())
            .filter(|n| !keep.contains(n))
            .collect();
        for name in gone {
            let _ = registry.unregister(&name);
            self.skills.forget_classification(&name).await;
        }
        self.refresh_ranks().await?;
        self.shared.tools_changed();
        tracing::info!("custom tools changed by another process; reloaded");
        Ok(())
    }

    async fn refresh_ranks(&self) -> Result<()> {
        let mut stored = self.shared.store.custom_tools().await?;
        stored.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
        let ranks = stored
            .into_iter()
            .enumerate()
            .map(|(i, t)| (t.name, i))
            .collect();
        *self
            .custom_ranks
            .write()
            .unwrap_or_else(PoisonError::into_inner) = ranks;
        Ok(())
    }

    /// The tools switched off, per tier, as this process holds them.
    pub(crate) fn switches(&self) -> Arc<Switches> {
        Arc::clone(&self.switches.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn set_switches(&self, next: Switches) {
        *self
            .switches
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
    }

    /// Switches `tool` on or off for `tier`, for every process on this data directory, and
    /// records who did it in the admin log (`tool_disabled`, `tool_enabled`). This runtime
    /// honours the change before returning; others within about a second. Switching a tool to
    /// the state it is already in changes and records nothing, and says so. A tool that is not
    /// registered is refused. Without a tier, the tier in force is switched.
    pub async fn set_tool_enabled(
        &self,
        tool: &str,
        tier: Option<LicenseTier>,
        enabled: bool,
        actor: &str,
    ) -> Result<ToolSwitchOutcome> {
        self.shared.registered(tool)?;
        let tier = tier.unwrap_or_else(|| self.settings.tier());
        let now = self.shared.now_us();
        let (kind, state) = if enabled {
            ("tool_enabled", "on")
        } else {
            ("tool_disabled", "off")
        };
        let event = AdminEvent {
            at: now,
            actor: actor.to_owned(),
            kind: kind.to_owned(),
            summary: format!("tool {tool} switched {state} for the {tier} tier"),
            details: json!({"tool": tool, "tier": tier.as_str(), "enabled": enabled}),
        };
        let change = SwitchChange {
            tool: tool.to_owned(),
            tier,
            enabled,
            by: actor.to_owned(),
            at: now,
        };
        // Held across the write so a refresh that read the table before it cannot put the old
        // switches back after it.
        let _sync = self.switches_sync.lock().await;
        let outcome = self.shared.store.switch_tool(&change, &event).await?;
        let off = outcome.off.map(|row| TierSwitch {
            tier: row.tier,
            by: row.disabled_by,
            at: row.disabled_at,
        });
        let in_force = if enabled { None } else { off.clone() };
        self.set_switches(self.switches().with(tool, tier, in_force));
        if outcome.changed {
            tracing::info!(tool, %tier, enabled, by = actor, "tool switched");
        }
        Ok(ToolSwitchOutcome {
            tool: tool.to_owned(),
            tier,
            enabled,
            changed: outcome.changed,
            off,
        })
    }

    /// The tiers `tool` is switched off for, in tier order (core first).
    pub fn disabled_tiers(&self, tool: &str) -> Vec<LicenseTier> {
        self.tier_switches(tool).iter().map(|s| s.tier).collect()
    }

    /// The switches that turned `tool` off, with who and when, in tier order.
    pub fn tier_switches(&self, tool: &str) -> Vec<TierSwitch> {
        self.switches().of(tool)
    }

    /// Re-reads the switches (another process may have changed them) and applies them if they
    /// differ from the ones in force.
    pub(crate) async fn refresh_switches(&self) -> Result<()> {
        let _sync = self.switches_sync.lock().await;
        let read = Switches::from_rows(self.shared.store.tool_switches().await?);
        if *self.switches() != read {
            tracing::info!("tool switches changed by another process");
            self.set_switches(read);
        }
        Ok(())
    }
}

/// Registers a custom tool, or updates the one registered under its name. Returns whether it
/// is new.
fn register(registry: &ToolRegistry<ToolKind>, spec: ToolSpec) -> Result<bool> {
    let Some(command) = spec.command else {
        return Err(RuntimeError::NotCustom(spec.definition.name.to_string()));
    };
    let kind = ToolKind::Custom(command);
    if registry.get(spec.definition.name.as_str()).is_some() {
        registry.update(spec.definition, kind)?;
        return Ok(false);
    }
    match registry.register(spec.definition.clone(), kind.clone()) {
        Ok(_) => Ok(true),
        // The change feed registered it from the store in between.
        Err(tw_core::CoreError::DuplicateTool(_)) => {
            registry.update(spec.definition, kind)?;
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}
