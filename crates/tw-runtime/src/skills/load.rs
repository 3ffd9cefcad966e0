//! Loading a skills directory: every folder's SKILL.md parsed (one broken skill never stops the
//! others), each diagnostic located as `path:line`, and the skill-tool map of the skills that
//! loaded; and writing a SKILL.md so that a reader never sees half of it.
//!
//! What a call under a skill meets follows from what is on disk now, the same at start-up and
//! on every reload: a missing directory has no skills, so every skill a call names is unknown; a
//! skill whose SKILL.md has errors or cannot be read does not load; a directory that cannot be
//! read (not a directory, permission denied, an I/O error) is an error, and while it lasts every
//! call under a skill is refused with it. Each of these is refused (`skill_denied`) by the skill
//! layer with the reason. No last good version is kept: a skill in force is always one the
//! directory holds, so an edit meant to narrow a skill can never leave the wider one running.

use std::path::{Path, PathBuf};

use tw_core::skill::{Diagnostic, SkillManifest, SkillMap, parse_skill};

/// Where the skills are: the config's `skills_dir`, else the first workspace root's `skills`.
pub fn skills_dir(config: &crate::config::Config, workspace: &[PathBuf]) -> PathBuf {
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

impl LoadedSkill {
    /// Why the skill does not load, as `FILE:LINE: error: ...` (its first error).
    fn unusable_reason(&self) -> String {
        let first = self
            .diagnostics
            .iter()
            .find(|d| d.severity == tw_core::skill::Severity::Error);
        match first {
            Some(d) => format!(
                "{}:{}",
                self.path.display(),
                d.to_string().trim_start_matches("line ")
            ),
            None => format!("{}: it has errors", self.path.display()),
        }
    }
}

/// A skills directory as loaded.
#[derive(Debug, Clone, Default)]
pub struct Skills {
    /// Every folder, by name.
    pub skills: Vec<LoadedSkill>,
    /// The usable skills' tools, both ways; it also refuses the skills that do not load, and
    /// every skill while the directory cannot be read.
    pub map: SkillMap,
}

/// A folder that holds a SKILL.md entry of any kind (a file, or a directory or dangling link
/// that will fail to read) is a skill; `Err` is why the folder itself cannot be looked into.
/// Files and dangling links beside the folders (an editor's lock file) are not skills.
fn is_skill_folder(folder: &Path) -> Result<bool, std::io::Error> {
    match std::fs::metadata(folder) {
        Ok(m) if !m.is_dir() => return Ok(false),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    match std::fs::symlink_metadata(folder.join("SKILL.md")) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn unreadable_file(message: String) -> tw_core::skill::SkillParse {
    tw_core::skill::SkillParse {
        manifest: None,
        diagnostics: vec![Diagnostic {
            severity: tw_core::skill::Severity::Error,
            line: 1,
            field: None,
            message,
        }],
    }
}

impl Skills {
    /// Loads every skill folder of `dir`. A missing directory has no skills; one that cannot be
    /// read, or whose listing fails part-way, gives no skill and a map that refuses every call
    /// under one, naming the directory and the error ([`Skills::error`]). A skill folder or
    /// SKILL.md that cannot be read is that skill's error, and the others still load.
    pub fn load(dir: &Path) -> Skills {
        let listed: std::io::Result<Vec<PathBuf>> = match std::fs::read_dir(dir) {
            Ok(entries) => entries.map(|e| e.map(|e| e.path())).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        };
        let mut entries = match listed {
            Ok(entries) => entries,
            Err(e) => {
                return Skills {
                    skills: Vec::new(),
                    map: SkillMap::unreadable(format!("{}: {e}", dir.display())),
                };
            }
        };
        entries.sort();
        let skills: Vec<LoadedSkill> = entries
            .into_iter()
            .filter_map(|folder| {
                let is_skill = is_skill_folder(&folder);
                if matches!(is_skill, Ok(false)) {
                    return None;
                }
                let name = folder
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let path = folder.join("SKILL.md");
                let parsed = match is_skill {
                    Err(e) => unreadable_file(format!("cannot look into the folder: {e}")),
                    Ok(_) => match std::fs::read(&path) {
                        Ok(bytes) => parse_skill(&String::from_utf8_lossy(&bytes), Some(&name)),
                        Err(e) => unreadable_file(format!("cannot read the file: {e}")),
                    },
                };
                Some(LoadedSkill {
                    folder: name,
                    path,
                    manifest: parsed.manifest,
                    diagnostics: parsed.diagnostics,
                })
            })
            .collect();
        let usable: Vec<SkillManifest> = skills.iter().filter_map(|s| s.manifest.clone()).collect();
        let mut map = SkillMap::new(&usable);
        for s in skills.iter().filter(|s| s.manifest.is_none()) {
            map.mark_unusable(&s.folder, s.unusable_reason());
        }
        Skills { skills, map }
    }

    /// Why the skills directory could not be read, when it could not.
    pub fn error(&self) -> Option<&str> {
        self.map.unreadable_reason()
    }

    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&LoadedSkill> {
        self.skills.iter().find(|s| s.folder == name)
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
pub(crate) fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
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
