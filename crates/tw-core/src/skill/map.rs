//! The skill-tool mapper: which tools each skill may use (its own list plus what it inherits,
//! with where each came from), which skills may use each tool, and whether one call fits a
//! skill's envelope. Built once from parsed manifests; lookups are in-memory.
//!
//! A skill's tool list restricts: a call made under a skill may use only the tools the skill
//! names (directly or through `inherit_tools_from`), at or below the access level it declares.
//! Policy still applies on top, so a skill can narrow what policy allows and never widen it.
//! Inheritance cycles are reported, and a skill in a cycle keeps only its own tools.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::{SkillManifest, SkillRate, SkillTool};
use crate::policy::access::AccessLevel;
use crate::target::DomainList;

/// Where a skill's tool came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "from")]
pub enum Provenance {
    /// The skill's own `tools`.
    Manifest,
    /// Inherited from this skill.
    Inherited(String),
    /// The tool's classified capability matches this entry of the skill's `permissions`.
    Capability(String),
    /// An administrator's override (by this actor) added it.
    Override(String),
}

impl std::fmt::Display for Provenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Provenance::Manifest => f.write_str("manifest"),
            Provenance::Inherited(s) => write!(f, "inherited from {s}"),
            Provenance::Capability(c) => write!(f, "capability {c}"),
            Provenance::Override(by) => write!(f, "override by {by}"),
        }
    }
}

/// A tool entry's domain rules, compiled once when the map is built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainRules {
    /// Hosts it may reach (empty: no narrowing).
    pub allowed: DomainList,
    /// Hosts it may not reach.
    pub blocked: DomainList,
    /// A pattern that did not compile: the entry then reaches no host at all (fail closed).
    pub broken: Option<String>,
}

/// One tool a skill may use, resolved.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResolvedTool {
    /// The tool's name, or `group:NAME`.
    pub name: String,
    /// The highest access level the skill may use it at.
    pub access_level: AccessLevel,
    /// Its rate limit under the skill.
    pub rate_limit: Option<SkillRate>,
    /// Hosts it may reach (empty: no narrowing).
    pub allowed_domains: Vec<String>,
    /// Hosts it may not reach.
    pub blocked_domains: Vec<String>,
    /// Where it came from.
    pub provenance: Provenance,
    /// `allowed_domains` and `blocked_domains` compiled; `None` when both are empty.
    #[serde(skip)]
    pub domains: Option<Arc<DomainRules>>,
}

/// A problem found while resolving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapProblem {
    /// The skill it is about.
    pub skill: String,
    /// What is wrong.
    pub message: String,
}

/// Why a call does not fit a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No such skill is loaded.
    UnknownSkill(String),
    /// The skill's folder is there, but its SKILL.md has errors or cannot be read.
    DoesNotLoad {
        /// The skill.
        skill: String,
        /// Why, naming the file (and line).
        reason: String,
    },
    /// The skills directory cannot be read, so no skill can be known to allow anything.
    DirectoryUnreadable {
        /// The skill the call was made under.
        skill: String,
        /// Why, naming the directory.
        reason: String,
    },
    /// The skill does not name the tool.
    NotInSkill {
        /// The skill.
        skill: String,
        /// The tool.
        tool: String,
    },
    /// The skill names the tool at a lower access level.
    AboveLevel {
        /// The skill.
        skill: String,
        /// The tool.
        tool: String,
        /// What the skill allows.
        allowed: AccessLevel,
        /// What the call needs.
        needed: AccessLevel,
    },
    /// An administrator removed the tool from the skill.
    RemovedByOverride {
        /// The skill.
        skill: String,
        /// The tool.
        tool: String,
        /// Who removed it.
        by: String,
    },
    /// The call names a host the skill's entry for the tool does not let it reach.
    Domain {
        /// The skill.
        skill: String,
        /// The tool.
        tool: String,
        /// Why, naming the host and the argument.
        reason: String,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::UnknownSkill(s) => {
                write!(f, "no skill named {s:?} is loaded, so it reaches no tool")
            }
            Refusal::DoesNotLoad { skill, reason } => {
                write!(
                    f,
                    "skill {skill} does not load ({reason}), so it reaches no tool"
                )
            }
            Refusal::DirectoryUnreadable { skill, reason } => write!(
                f,
                "skill {skill} cannot be checked: the skills directory cannot be read ({reason}); \
                 no call under a skill is allowed until it can"
            ),
            Refusal::NotInSkill { skill, tool } => {
                write!(f, "skill {skill} does not include tool {tool}")
            }
            Refusal::AboveLevel {
                skill,
                tool,
                allowed,
                needed,
            } => write!(
                f,
                "skill {skill} allows tool {tool} at {allowed} access, and the call needs {needed}"
            ),
            Refusal::RemovedByOverride { skill, tool, by } => write!(
                f,
                "tool {tool} was removed from skill {skill} by an override ({by})"
            ),
            Refusal::Domain {
                skill,
                tool,
                reason,
            } => write!(f, "under skill {skill}, tool {tool} {reason}"),
        }
    }
}

/// One skill's tools by name, and whether any entry names a group.
#[derive(Debug, Clone, Default)]
struct SkillIndex {
    names: HashMap<String, usize>,
    has_groups: bool,
}

/// Skills and their resolved tools, both ways.
#[derive(Debug, Clone, Default)]
pub struct SkillMap {
    by_skill: BTreeMap<String, Vec<ResolvedTool>>,
    /// Per skill: tool name (or `group:NAME`) -> its index in `by_skill`, so a call's check is
    /// two hash lookups whatever the skill's size.
    index: HashMap<String, SkillIndex>,
    by_tool: BTreeMap<String, BTreeSet<String>>,
    /// Per skill: its `permissions` and those it inherits, in order, without repeats.
    permissions: HashMap<String, Vec<String>>,
    problems: Vec<MapProblem>,
    /// Skills whose folder is there but that do not load, with why.
    unusable: BTreeMap<String, String>,
    /// Why the skills directory could not be read, when it could not.
    unreadable: Option<String>,
}

fn compile_domains(t: &SkillTool) -> Option<Arc<DomainRules>> {
    if t.allowed_domains.is_empty() && t.blocked_domains.is_empty() {
        return None;
    }
    let mut rules = DomainRules::default();
    match DomainList::parse(&t.allowed_domains) {
        Ok(l) => rules.allowed = l,
        Err(e) => rules.broken = Some(format!("allowed_domains: {e}")),
    }
    match DomainList::parse(&t.blocked_domains) {
        Ok(l) => rules.blocked = l,
        Err(e) => rules.broken = Some(format!("blocked_domains: {e}")),
    }
    Some(Arc::new(rules))
}

fn resolved(t: &SkillTool, provenance: Provenance) -> ResolvedTool {
    ResolvedTool {
        domains: compile_domains(t),
        name: t.name.clone(),
        access_level: t.access_level.unwrap_or_default(),
        rate_limit: t.rate_limit,
        allowed_domains: t.allowed_domains.clone(),
        blocked_domains: t.blocked_domains.clone(),
        provenance,
    }
}

impl SkillMap {
    /// Resolves every skill's tools, following `inherit_tools_from` transitively. A tool the skill
    /// names itself wins over an inherited one; of two inherited ones, the nearer parent's wins.
    pub fn new(skills: &[SkillManifest]) -> Self {
        let by_name: BTreeMap<&str, &SkillManifest> =
            skills.iter().map(|s| (s.name.as_str(), s)).collect();
        let mut map = SkillMap::default();
        for skill in skills {
            let mut tools: Vec<ResolvedTool> = Vec::new();
            let mut names: HashMap<String, usize> = HashMap::new();
            for t in &skill.tools {
                if !names.contains_key(&t.name) {
                    names.insert(t.name.clone(), tools.len());
                    tools.push(resolved(t, Provenance::Manifest));
                }
            }
            // Breadth-first over the parents, so nearer parents are seen first.
            let mut queue: Vec<(String, Vec<String>)> = skill
                .inherit_tools_from
                .iter()
                .map(|p| (p.clone(), vec![skill.name.clone()]))
                .collect();
            let mut visited = BTreeSet::new();
            let mut permissions: Vec<String> = Vec::new();
            let mut inherited_permissions: Vec<String> = Vec::new();
            for p in &skill.permissions {
                if !permissions.contains(p) {
                    permissions.push(p.clone());
                }
            }
            let mut cyclic = false;
            while !queue.is_empty() {
                let mut next = Vec::new();
                for (parent, path) in queue {
                    if parent == skill.name || path[1..].contains(&parent) {
                        let mut cycle = path.clone();
                        cycle.push(parent.clone());
                        map.problems.push(MapProblem {
                            skill: skill.name.clone(),
                            message: format!(
                                "inheritance cycle {}; its inherited tools are ignored",
                                cycle.join(" -> ")
                            ),
                        });
                        cyclic = true;
                        continue;
                    }
                    if !visited.insert(parent.clone()) {
                        continue;
                    }
                    let Some(p) = by_name.get(parent.as_str()) else {
                        map.problems.push(MapProblem {
                            skill: skill.name.clone(),
                            message: format!("inherits from {parent:?}, which is not loaded"),
                        });
                        continue;
                    };
                    inherited_permissions.extend(p.permissions.iter().cloned());
                    for t in &p.tools {
                        if !names.contains_key(&t.name) {
                            names.insert(t.name.clone(), tools.len());
                            tools.push(resolved(t, Provenance::Inherited(parent.clone())));
                        }
                    }
                    let mut here = path.clone();
                    here.push(parent.clone());
                    next.extend(
                        p.inherit_tools_from
                            .iter()
                            .map(|g| (g.clone(), here.clone())),
                    );
                }
                queue = next;
            }
            if !cyclic {
                for p in inherited_permissions {
                    if !permissions.contains(&p) {
                        permissions.push(p);
                    }
                }
            }
            map.permissions.insert(skill.name.clone(), permissions);
            if cyclic {
                tools.retain(|t| t.provenance == Provenance::Manifest);
                names = tools
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (t.name.clone(), i))
                    .collect();
            }
            let has_groups = tools.iter().any(|t| t.name.starts_with("group:"));
            map.index
                .insert(skill.name.clone(), SkillIndex { names, has_groups });
            for t in &tools {
                map.by_tool
                    .entry(t.name.clone())
                    .or_default()
                    .insert(skill.name.clone());
            }
            map.by_skill.insert(skill.name.clone(), tools);
        }
        map
    }

    /// The tools a skill may use, with where each came from; `None` for an unknown skill.
    pub fn tools_of(&self, skill: &str) -> Option<&[ResolvedTool]> {
        self.by_skill.get(skill).map(Vec::as_slice)
    }

    /// The skills that may use a tool (named directly, not through its group).
    pub fn skills_of(&self, tool: &str) -> Vec<&str> {
        self.by_tool
            .get(tool)
            .map(|s| s.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The capability names a skill's tools are also resolved from: its own `permissions`, then
    /// its parents' (none for an unknown skill, or inherited ones for a skill in a cycle).
    pub fn permissions_of(&self, skill: &str) -> &[String] {
        self.permissions.get(skill).map_or(&[], Vec::as_slice)
    }

    /// The position of `tool` (or `group:GROUP`) among `skill`'s resolved tools.
    pub(super) fn entry(&self, skill: &str, tool: &str, group: &str) -> Option<&ResolvedTool> {
        let (tools, index) = (self.by_skill.get(skill)?, self.index.get(skill)?);
        let at = index.names.get(tool).or_else(|| {
            // Only skills that name groups pay for building the group's key.
            index
                .has_groups
                .then(|| index.names.get(&format!("group:{group}")))
                .flatten()
        })?;
        tools.get(*at)
    }

    /// Whether a skill of this name is loaded.
    pub fn contains(&self, skill: &str) -> bool {
        self.by_skill.contains_key(skill)
    }

    /// Cycles and missing parents found while resolving.
    pub fn problems(&self) -> &[MapProblem] {
        &self.problems
    }

    /// Whether any skill is loaded.
    pub fn is_empty(&self) -> bool {
        self.by_skill.is_empty()
    }

    /// The map of a skills directory that could not be read (`reason` names it and the error):
    /// it holds no skill, and every call under a skill is refused with `reason`. A directory
    /// that cannot be read is not an empty one: it may hold the very skill a call names.
    pub fn unreadable(reason: impl Into<String>) -> Self {
        SkillMap {
            unreadable: Some(reason.into()),
            ..SkillMap::default()
        }
    }

    /// Why the skills directory could not be read, when it could not.
    pub fn unreadable_reason(&self) -> Option<&str> {
        self.unreadable.as_deref()
    }

    /// Records that `skill`'s folder is there but the skill does not load (`reason`: its first
    /// error, with file and line), so a call under it is refused saying why rather than as
    /// unknown. A skill marked so is refused even if a manifest of that name was given.
    pub fn mark_unusable(&mut self, skill: &str, reason: impl Into<String>) {
        self.unusable.insert(skill.to_owned(), reason.into());
    }

    /// Why no call may be made under `skill` at all, if none may: the skills directory could not
    /// be read, the skill does not load, or no skill of that name is loaded. The one rule every
    /// door shares: a skill name is never a label, it is an envelope or a refusal.
    pub fn refusal(&self, skill: &str) -> Option<Refusal> {
        if let Some(reason) = &self.unreadable {
            return Some(Refusal::DirectoryUnreadable {
                skill: skill.to_owned(),
                reason: reason.clone(),
            });
        }
        if let Some(reason) = self.unusable.get(skill) {
            return Some(Refusal::DoesNotLoad {
                skill: skill.to_owned(),
                reason: reason.clone(),
            });
        }
        (!self.contains(skill)).then(|| Refusal::UnknownSkill(skill.to_owned()))
    }

    /// Whether a call of `tool` (in `group`) needing `level` fits `skill`'s envelope; the
    /// matching entry (by name first, then `group:GROUP`) when it does.
    pub fn validate_access(
        &self,
        skill: &str,
        tool: &str,
        group: &str,
        level: AccessLevel,
    ) -> Result<&ResolvedTool, Refusal> {
        if let Some(refusal) = self.refusal(skill) {
            return Err(refusal);
        }
        let entry = self
            .entry(skill, tool, group)
            .ok_or_else(|| Refusal::NotInSkill {
                skill: skill.to_owned(),
                tool: tool.to_owned(),
            })?;
        if level > entry.access_level {
            return Err(Refusal::AboveLevel {
                skill: skill.to_owned(),
                tool: tool.to_owned(),
                allowed: entry.access_level,
                needed: level,
            });
        }
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::skill::parse_skill;

    fn skill(name: &str, tools: &str, parents: &str) -> SkillManifest {
        let text = format!(
            "---\nname: {name}\ndescription: d\ntools: {tools}\ninherit_tools_from: {parents}\n---\n"
        );
        let p = parse_skill(&text, Some(name));
        p.manifest.unwrap_or_else(|| panic!("{:?}", p.diagnostics))
    }

    fn names(map: &SkillMap, s: &str) -> Vec<(String, Provenance)> {
        map.tools_of(s)
            .unwrap()
            .iter()
            .map(|t| (t.name.clone(), t.provenance.clone()))
            .collect()
    }

    #[test]
    fn tools_are_inherited_transitively_and_the_skills_own_entry_wins() {
        let map = SkillMap::new(&[
            skill(
                "base",
                "[read_file, {name: exec, access_level: admin}]",
                "[]",
            ),
            skill("mid", "[list_directory]", "[base]"),
            skill("top", "[{name: exec, access_level: standard}]", "[mid]"),
        ]);
        assert_eq!(
            names(&map, "top"),
            vec![
                ("exec".into(), Provenance::Manifest),
                ("list_directory".into(), Provenance::Inherited("mid".into())),
                ("read_file".into(), Provenance::Inherited("base".into())),
            ]
        );
        assert_eq!(map.skills_of("read_file"), ["base", "mid", "top"]);
        assert_eq!(map.skills_of("exec"), ["base", "mid", "top"]);
        assert_eq!(map.problems(), []);
        // top's own entry caps exec at standard, although base allows admin.
        let e = map
            .validate_access("top", "exec", "exec", AccessLevel::Elevated)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "skill top allows tool exec at standard access, and the call needs elevated"
        );
        assert!(
            map.validate_access("base", "exec", "exec", AccessLevel::Admin)
                .is_ok()
        );
    }

    #[test]
    fn a_skill_cannot_reach_a_tool_it_does_not_name() {
        let map = SkillMap::new(&[skill("retrieval", "[read_file, \"group:web\"]", "[]")]);
        assert_eq!(
            map.validate_access("retrieval", "write_file", "fs", AccessLevel::Standard),
            Err(Refusal::NotInSkill {
                skill: "retrieval".into(),
                tool: "write_file".into()
            })
        );
        // Named through its group.
        assert!(
            map.validate_access("retrieval", "http_fetch", "web", AccessLevel::Standard)
                .is_ok()
        );
        assert_eq!(
            map.validate_access("nope", "read_file", "fs", AccessLevel::Standard),
            Err(Refusal::UnknownSkill("nope".into()))
        );
    }

    #[test]
    fn cycles_and_missing_parents_are_reported() {
        let map = SkillMap::new(&[
            skill("a", "[read_file]", "[b]"),
            skill("b", "[write_file]", "[a]"),
            skill("c", "[exec]", "[ghost]"),
            skill("d", "[echo]", "[d]"),
        ]);
        let problems: Vec<(String, String)> = map
            .problems()
            .iter()
            .map(|p| (p.skill.clone(), p.message.clone()))
            .collect();
        assert_eq!(
            problems,
            vec![
                (
                    "a".into(),
                    "inheritance cycle a -> b -> a; its inherited tools are ignored".into()
                ),
                (
                    "b".into(),
                    "inheritance cycle b -> a -> b; its inherited tools are ignored".into()
                ),
                (
                    "c".into(),
                    "inherits from \"ghost\", which is not loaded".into()
                ),
                (
                    "d".into(),
                    "inheritance cycle d -> d; its inherited tools are ignored".into()
                ),
            ]
        );
        assert_eq!(
            names(&map, "a"),
            vec![("read_file".into(), Provenance::Manifest)]
        );
        assert_eq!(
            names(&map, "c"),
            vec![("exec".into(), Provenance::Manifest)]
        );
    }
}
