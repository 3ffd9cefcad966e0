//! The skills service: the skills directory as it is on disk now, every registered tool's
//! capabilities, the administrators' per-skill overrides, and the skill layer's verdict on a
//! call made under a skill. It owns the rules for all of them: what a SKILL.md may be before it
//! is saved, what an override may say, and who classifies a tool.
//!
//! What a call under a skill meets follows from what is on disk now, the same at start-up and
//! on every reload: a missing directory has no skills, so every skill a call names is unknown; a
//! skill whose SKILL.md has errors or cannot be read does not load; a directory that cannot be
//! read is an error, and while it lasts every call under a skill is refused with it. No last
//! good version is kept: a skill in force is always one the directory holds, so an edit meant to
//! narrow a skill can never leave the wider one running.
//!
//! The directory is watched through the runtime's shared file watcher; while it cannot be read,
//! or before it exists, the change feed looks again every second (`crate::changes`).

mod classify;
mod load;
mod overrides;
mod resolve;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use tw_core::skill::{Diagnostic, check_name, parse_skill};
use tw_core::{ToolDefinition, policy};

pub use self::load::{LoadedSkill, SavedSkill, Skills, skills_dir};
pub use self::overrides::{MAX_REASON, OverrideChange};
use crate::capabilities::{CapabilityState, OverrideState, SkillCounters};
use crate::classifier::LlmClassifier;
use crate::config::Config;
use crate::error::{Result, RuntimeError};
use crate::shared::Shared;
use crate::watch::{FileWatcher, Subscription};

/// The longest SKILL.md that may be checked or saved: a manifest is a page of YAML and some
/// Markdown, so anything near this is a mistake (a pasted file of something else).
pub const MAX_SKILL_TEXT: usize = 256 * 1024;

/// Owns the skills, the capabilities of every tool and the overrides.
pub struct SkillService {
    shared: Arc<Shared>,
    this: Weak<SkillService>,
    dir: PathBuf,
    loaded: RwLock<Arc<Skills>>,
    watcher: FileWatcher,
    watching: Mutex<Option<Subscription>>,
    /// Every registered tool's capabilities, swapped whole on a change.
    capabilities: RwLock<Arc<CapabilityState>>,
    /// The administrators' per-skill overrides, swapped whole on a change.
    overrides: RwLock<Arc<OverrideState>>,
    /// The language model that classifies new tools, when one is configured.
    classifier: Option<LlmClassifier>,
    counters: SkillCounters,
    /// Run after every reload.
    on_reload: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

/// Every problem of the skills directory, in the order a person reads them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillCheck {
    /// One line per problem: each SKILL.md diagnostic as `FILE:LINE: severity: ...`, then the
    /// skill map's problems (an unknown parent, a cycle), then permissions no capability of the
    /// catalog matches, each as `skill NAME: ...`.
    pub findings: Vec<String>,
    /// Diagnostics that are errors (a skill with one does not load).
    pub errors: usize,
    /// Skills that load.
    pub loaded: usize,
    /// Skill folders.
    pub total: usize,
}

/// What the skill layer made of a call.
pub(crate) struct SkillJudgement {
    /// The layer's verdict, for the decision's trace.
    pub(crate) verdict: policy::LayerVerdict,
    /// The skill's own rate limit the call counts against, if it has one.
    pub(crate) rate: Option<policy::rate::RateCheck>,
}

impl SkillService {
    /// Loads the skills directory, the capability catalog, the classifier's settings and the
    /// overrides. Tools are classified once they are all registered ([`Self::classify_at_start`]).
    pub(crate) async fn open(
        shared: Arc<Shared>,
        config: &Config,
        dir: PathBuf,
        watcher: FileWatcher,
    ) -> Result<Arc<Self>> {
        let skills = Skills::load(&dir);
        let catalog = Arc::new(crate::capabilities::load_catalog(
            config.capabilities_file.as_deref(),
        )?);
        let classifier = LlmClassifier::from_settings(&config.classifier)
            .map_err(|e| RuntimeError::invalid("classifier", e))?;
        let overrides = OverrideState::new(shared.store.skill_overrides().await?);
        let capabilities = CapabilityState::new(
            catalog,
            Default::default(),
            config.classifier.min_confidence,
        );
        Ok(Arc::new_cyclic(|this| Self {
            shared,
            this: this.clone(),
            dir,
            loaded: RwLock::new(Arc::new(skills)),
            watcher,
            watching: Mutex::new(None),
            capabilities: RwLock::new(Arc::new(capabilities)),
            overrides: RwLock::new(Arc::new(overrides)),
            classifier,
            counters: SkillCounters::default(),
            on_reload: Mutex::new(Vec::new()),
        }))
    }

    /// Why the skills directory cannot be read, as a start-up warning, when it cannot.
    pub(crate) fn warning(&self) -> Option<String> {
        self.loaded().error().map(|e| {
            format!(
                "the skills directory cannot be read ({e}); every call under a skill is refused \
                 until it can"
            )
        })
    }

    /// The skills as loaded now.
    pub fn loaded(&self) -> Arc<Skills> {
        Arc::clone(&self.loaded.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The skills to list: an error, not an empty list, while the directory cannot be read.
    pub fn listing(&self) -> Result<Arc<Skills>> {
        let loaded = self.loaded();
        match loaded.error() {
            Some(reason) => Err(RuntimeError::Unavailable(format!(
                "the skills directory cannot be read: {reason}"
            ))),
            None => Ok(loaded),
        }
    }

    /// Checks every skill of the directory (what `skills check` prints and the API returns).
    pub fn check_all(&self) -> Result<SkillCheck> {
        let skills = self.listing()?;
        let mut findings = Vec::new();
        let mut errors = 0;
        for s in &skills.skills {
            for d in &s.diagnostics {
                if d.severity == tw_core::skill::Severity::Error {
                    errors += 1;
                }
                findings.push(format!(
                    "{}:{}",
                    s.path.display(),
                    d.to_string().trim_start_matches("line ")
                ));
            }
        }
        for p in skills.map.problems() {
            findings.push(format!("skill {}: {}", p.skill, p.message));
        }
        let catalog = Arc::clone(&self.capabilities().catalog);
        for s in skills.skills.iter().filter_map(|s| s.manifest.as_ref()) {
            for p in s.permissions.iter().filter(|p| !catalog.contains(p)) {
                findings.push(format!(
                    "skill {}: permission {p:?} is not a capability in the catalog; it reaches \
                     no tool",
                    s.name
                ));
            }
        }
        Ok(SkillCheck {
            findings,
            errors,
            loaded: skills
                .skills
                .iter()
                .filter(|s| s.manifest.is_some())
                .count(),
            total: skills.skills.len(),
        })
    }

    /// Checks a skill name's shape (field `name`).
    pub fn check_name(&self, name: &str) -> Result<()> {
        check_skill_name("name", name)
    }

    /// Where the skills are read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Re-reads the skills directory (the watcher does this on every change, and the change
    /// feed every second while the directory cannot be read). What is on disk now is in force.
    pub fn reload(&self) {
        let next = Skills::load(&self.dir);
        for s in &next.skills {
            for d in &s.diagnostics {
                tracing::warn!(file = %s.path.display(), "{d}");
            }
        }
        let before = self.loaded();
        match (before.error(), next.error()) {
            (was, Some(e)) if was != Some(e) => {
                tracing::warn!(error = %e, "the skills directory cannot be read; every call under a skill is refused until it can");
            }
            (Some(_), None) => tracing::info!("the skills directory can be read again"),
            _ => {}
        }
        *self.loaded.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        for hook in self
            .on_reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            hook();
        }
    }

    /// Runs `hook` after every reload (the chain service reads the skills' `chains:`).
    pub(crate) fn on_reload(&self, hook: Box<dyn Fn() + Send + Sync>) {
        self.on_reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(hook);
    }

    /// Starts watching the skills directory, unless it already is watched (it must exist).
    pub(crate) fn watch(&self) {
        self.watcher.keep(
            &self.watching,
            &self.dir,
            true,
            self.this.clone(),
            Self::reload,
            "skills",
        );
    }

    /// Looks again at a directory that could not be read, or that appeared after the start and
    /// is not watched yet, so its skills apply (and the refusals for an unreadable one end)
    /// within a second of it being fixed. Called once a second by the change feed.
    pub(crate) fn recheck(&self) {
        let watched = self
            .watching
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if self.loaded().error().is_some() || (!watched && self.dir.is_dir()) {
            self.reload();
            if self.loaded().error().is_none() {
                // An earlier watch ends with the directory it was on (one replaced by a file
                // and back, say): watch afresh.
                *self.watching.lock().unwrap_or_else(PoisonError::into_inner) = None;
                self.watch();
                // An edit between the read above and the new watch raised no event the watch
                // saw: read once more, now that every later edit does.
                self.reload();
            }
        }
    }

    /// Checks a skill's name and SKILL.md as given: the name's shape (field `name`) and the
    /// text's size (field `text`), then parses it. Nothing is read or written.
    pub fn check_text(&self, name: &str, text: &str) -> Result<Vec<Diagnostic>> {
        check_skill_name("name", name)?;
        if text.len() > MAX_SKILL_TEXT {
            return Err(RuntimeError::invalid(
                "text",
                format!(
                    "a SKILL.md is at most {} KiB; this one is {} KiB",
                    MAX_SKILL_TEXT / 1024,
                    text.len().div_ceil(1024)
                ),
            ));
        }
        Ok(parse_skill(text, Some(name)).diagnostics)
    }

    /// The SKILL.md text of a skill folder.
    pub fn text(&self, name: &str) -> Result<String> {
        check_skill_name("name", name)?;
        let path = self.dir.join(name).join("SKILL.md");
        std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                RuntimeError::unknown_skill(name, &self.dir)
            } else {
                RuntimeError::Unavailable(format!("{}: cannot be read: {e}", path.display()))
            }
        })
    }

    /// Saves a skill's SKILL.md (creating the folder for a new skill): checked first
    /// ([`Self::check_text`]) and refused with every diagnostic if it has an error, so an
    /// invalid save never replaces a working skill; written atomically; put in force at once;
    /// recorded in the admin log as `actor`.
    pub async fn save(&self, name: &str, text: &str, actor: &str) -> Result<SavedSkill> {
        let diagnostics = self.check_text(name, text)?;
        if diagnostics
            .iter()
            .any(|d| d.severity == tw_core::skill::Severity::Error)
        {
            return Err(RuntimeError::SkillInvalid {
                skill: name.to_owned(),
                diagnostics,
            });
        }
        let folder = self.dir.join(name);
        let path = folder.join("SKILL.md");
        let created = !path.exists();
        let io = |e: std::io::Error| {
            RuntimeError::Unavailable(format!("{}: cannot be written: {e}", path.display()))
        };
        std::fs::create_dir_all(&folder).map_err(io)?;
        load::write_atomically(&path, text).map_err(io)?;
        // The first skill may have just created the directory: watch it from now on.
        self.watch();
        self.reload();
        self.shared
            .admin(
                actor,
                "skill_saved",
                format!("{} skill {name}", if created { "created" } else { "saved" }),
                serde_json::json!({
                    "skill": name,
                    "path": path,
                    "bytes": text.len(),
                    "warnings": diagnostics.iter().map(ToString::to_string).collect::<Vec<_>>(),
                }),
            )
            .await;
        Ok(SavedSkill {
            path,
            created,
            warnings: diagnostics,
        })
    }

    /// The skill layer's verdict on a call to `def` made under `skill`: the tool must be in
    /// the skill's envelope at or below the level the skill declares. A skill that is unknown,
    /// does not load, or cannot be read because the directory cannot reaches nothing. `count`:
    /// the call is real (not an explanation), so it counts in the lifecycle figures.
    pub(crate) fn judge(
        &self,
        skill: &str,
        def: &ToolDefinition,
        needed: policy::access::AccessLevel,
        arguments: &serde_json::Value,
        argv: Option<&[String]>,
        count: bool,
    ) -> SkillJudgement {
        let skills = self.loaded();
        let caps = self.capabilities();
        let ov = self.overrides();
        let envelopes = tw_core::skill::Envelopes {
            skills: &skills.map,
            capabilities: &caps.index,
            overrides: &ov.overrides,
        };
        let judged = envelopes.judge(skill, def, needed, arguments, argv);
        if count {
            self.counters.count_check(judged.via);
        }
        SkillJudgement {
            verdict: judged.verdict,
            rate: judged.rate,
        }
    }

    /// What `skill`'s entry for `def` asks of the tool's connections (see
    /// [`tw_core::skill::Envelopes::egress_layer`]).
    pub(crate) fn egress_layer(
        &self,
        skill: &str,
        def: &ToolDefinition,
        needed: policy::access::AccessLevel,
    ) -> Option<tw_core::target::EgressLayer> {
        let skills = self.loaded();
        let caps = self.capabilities();
        let ov = self.overrides();
        tw_core::skill::Envelopes {
            skills: &skills.map,
            capabilities: &caps.index,
            overrides: &ov.overrides,
        }
        .egress_layer(skill, def, needed)
    }

    /// The loaded skill named `skill`, or why there is none to change.
    pub(crate) fn existing(&self, field: &'static str, skill: &str) -> Result<()> {
        check_skill_name(field, skill)?;
        let loaded = self.loaded();
        if let Some(e) = loaded.error() {
            return Err(RuntimeError::Unavailable(format!(
                "the skills directory cannot be read: {e}"
            )));
        }
        if loaded.get(skill).is_none() {
            return Err(RuntimeError::unknown_skill(skill, &self.dir));
        }
        Ok(())
    }
}

/// A skill name's shape, as `field`.
fn check_skill_name(field: &'static str, name: &str) -> Result<()> {
    check_name(name).map_err(|e| RuntimeError::invalid(field, format!("skill name {name:?} {e}")))
}

#[cfg(test)]
mod tests;
