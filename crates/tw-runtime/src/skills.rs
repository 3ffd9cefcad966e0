//! Loading a skills directory: every folder's SKILL.md parsed (one broken skill never stops the
//! others), each diagnostic located as `path:line`, and the skill-tool map of the skills that
//! loaded; and watching it, so that an edit applies within a second while an edit that does not
//! parse keeps the skill's last good manifest (and shows why).

use std::path::{Path, PathBuf};

use tw_core::skill::{Diagnostic, SkillManifest, SkillMap, check_name, parse_skill};

/// Where the skills are: the config's `skills_dir`, else the first workspace root's `skills`.
pub fn skills_dir(config: &crate::Config, workspace: &[PathBuf]) -> PathBuf {
    match &config.skills_dir {
        Some(d) => d.clone(),
        None => workspace
            .first()
            .map_or_else(|| PathBuf::from("skills"), |w| w.join("skills")),
    }
}

/// One skill folder as loaded.
#[derive(Debug, Clone)]
pub struct LoadedSkill {
    /// The folder's name.
    pub folder: String,
    /// Its SKILL.md.
    pub path: PathBuf,
    /// The manifest, unless an error made it unusable.
    pub manifest: Option<SkillManifest>,
    /// Its problems, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

/// A skills directory as loaded.
#[derive(Debug, Clone, Default)]
pub struct Skills {
    /// Every folder, by name.
    pub skills: Vec<LoadedSkill>,
    /// The usable skills' tools, both ways.
    pub map: SkillMap,
}

impl Skills {
    /// Loads every folder of `dir` that holds a SKILL.md (folders without one are skipped; a
    /// missing directory has no skills). Reading errors are diagnostics of the skill.
    pub fn load(dir: &Path) -> std::io::Result<Skills> {
        let mut folders: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("SKILL.md").is_file())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        folders.sort();
        let skills: Vec<LoadedSkill> = folders
            .into_iter()
            .map(|folder| {
                let name = folder
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let path = folder.join("SKILL.md");
                let parsed = match std::fs::read(&path) {
                    Ok(bytes) => parse_skill(&String::from_utf8_lossy(&bytes), Some(&name)),
                    Err(e) => tw_core::skill::SkillParse {
                        manifest: None,
                        diagnostics: vec![Diagnostic {
                            severity: tw_core::skill::Severity::Error,
                            line: 1,
                            field: None,
                            message: format!("cannot read the file: {e}"),
                        }],
                    },
                };
                LoadedSkill {
                    folder: name,
                    path,
                    manifest: parsed.manifest,
                    diagnostics: parsed.diagnostics,
                }
            })
            .collect();
        let usable: Vec<SkillManifest> = skills.iter().filter_map(|s| s.manifest.clone()).collect();
        Ok(Skills {
            map: SkillMap::new(&usable),
            skills,
        })
    }

    /// Reloads `dir` after a change: a skill whose SKILL.md no longer parses keeps its manifest
    /// from `previous` (with the new diagnostics, plus a warning saying so); one that was removed
    /// is gone.
    pub fn reload(dir: &Path, previous: &Skills) -> std::io::Result<Skills> {
        let mut next = Skills::load(dir)?;
        let mut kept = false;
        for s in &mut next.skills {
            if s.manifest.is_none()
                && let Some(old) = previous.get(&s.folder).and_then(|o| o.manifest.clone())
            {
                s.manifest = Some(old);
                s.diagnostics.push(Diagnostic {
                    severity: tw_core::skill::Severity::Warning,
                    line: 1,
                    field: None,
                    message: "this edit does not load; the last good version stays in force"
                        .to_owned(),
                });
                kept = true;
            }
        }
        if kept {
            let usable: Vec<SkillManifest> = next
                .skills
                .iter()
                .filter_map(|s| s.manifest.clone())
                .collect();
            next.map = SkillMap::new(&usable);
        }
        Ok(next)
    }

    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&LoadedSkill> {
        self.skills.iter().find(|s| s.folder == name)
    }
}

/// Watches a skills directory (recursively: editors replace files inside skill folders) and
/// calls `reload` once a burst of changes has settled.
pub(crate) struct SkillsWatcher {
    _watcher: notify::RecommendedWatcher,
    _task: tokio::task::JoinHandle<()>,
}

impl SkillsWatcher {
    pub(crate) fn start(
        dir: &Path,
        reload: impl Fn() -> bool + Send + 'static,
    ) -> notify::Result<Self> {
        use notify::Watcher as _;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.is_ok_and(|e| !e.kind.is_access()) {
                    let _ = tx.send(());
                }
            })?;
        watcher.watch(dir, notify::RecursiveMode::Recursive)?;
        let task = tokio::spawn(async move {
            while rx.recv().await.is_some() {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                while rx.try_recv().is_ok() {}
                if !reload() {
                    break;
                }
            }
        });
        Ok(Self {
            _watcher: watcher,
            _task: task,
        })
    }
}

/// What saving a SKILL.md did.
#[derive(Debug, Clone)]
pub struct SavedSkill {
    /// Where it was written.
    pub path: PathBuf,
    /// Whether the skill is new.
    pub created: bool,
    /// Its warnings (a save with errors is refused).
    pub warnings: Vec<Diagnostic>,
}

/// Writes `text` to `path` so that a reader sees the old file or the new one, never part of
/// either: a temporary file in the same folder, flushed to disk, renamed over the old one, and
/// the folder flushed so the rename survives a crash.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".SKILL.md.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

impl crate::Runtime {
    /// The SKILL.md text of a skill folder.
    pub fn skill_text(&self, name: &str) -> crate::Result<String> {
        check_name(name)
            .map_err(|e| crate::RuntimeError::Capabilities(format!("skill name {name:?} {e}")))?;
        let path = self.skills_dir().join(name).join("SKILL.md");
        std::fs::read_to_string(&path).map_err(|e| {
            crate::RuntimeError::Capabilities(format!("{}: cannot be read: {e}", path.display()))
        })
    }

    /// Saves a skill's SKILL.md (creating the folder for a new skill): parsed first, and refused
    /// with every diagnostic if it has an error, so an invalid save never replaces a working
    /// skill; written atomically; put in force at once; recorded in the admin log as `actor`.
    pub async fn save_skill(
        &self,
        name: &str,
        text: &str,
        actor: &str,
    ) -> crate::Result<SavedSkill> {
        check_name(name)
            .map_err(|e| crate::RuntimeError::Capabilities(format!("skill name {name:?} {e}")))?;
        let parsed = parse_skill(text, Some(name));
        if parsed.has_errors() {
            return Err(crate::RuntimeError::SkillInvalid {
                skill: name.to_owned(),
                diagnostics: parsed.diagnostics,
            });
        }
        let folder = self.skills_dir().join(name);
        let path = folder.join("SKILL.md");
        let created = !path.exists();
        let io = |e: std::io::Error| {
            crate::RuntimeError::Capabilities(format!("{}: cannot be written: {e}", path.display()))
        };
        std::fs::create_dir_all(&folder).map_err(io)?;
        write_atomically(&path, text).map_err(io)?;
        // The first skill may have just created the directory: watch it from now on.
        self.watch_skills();
        self.reload_skills();
        self.admin(
            actor,
            "skill_saved",
            format!("{} skill {name}", if created { "created" } else { "saved" }),
            serde_json::json!({
                "skill": name,
                "path": path,
                "bytes": text.len(),
                "warnings": parsed.diagnostics.iter().map(ToString::to_string).collect::<Vec<_>>(),
            }),
        )
        .await;
        Ok(SavedSkill {
            path,
            created,
            warnings: parsed.diagnostics,
        })
    }
}
