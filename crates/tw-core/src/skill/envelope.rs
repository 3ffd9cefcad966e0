//! A skill's envelope, whole: what a call made under a skill may reach once everything that
//! decides it is combined. Three inputs, each rebuilt on its own when it changes:
//!
//! - the [`SkillMap`]: the skill's own tools and those it inherits (from the SKILL.md files);
//! - the [`CapabilityIndex`]: every registered tool's classified capabilities, so a skill whose
//!   `permissions` name `web_read` reaches every tool classified `web_read`, including tools
//!   registered after the skill was written;
//! - the [`Overrides`]: an administrator's additions and removals, which take precedence over
//!   both (a removal beats the manifest; an addition sets the tool's level).
//!
//! Everything here is an in-memory lookup: resolving a skill walks prepared lists with a bit set
//! to skip repeats, and checking one call is a handful of hash lookups. No classifier runs and no
//! I/O happens on either path. The envelope only narrows: its verdict is one more policy layer.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::map::{DomainRules, Provenance, Refusal, ResolvedTool, SkillMap};
use crate::definition::ToolDefinition;
use crate::policy::access::AccessLevel;
use crate::policy::rate::{HOUR_US, MINUTE_US, RateCheck, RateWindow};
use crate::policy::{Decision, Layer, LayerVerdict, RuleRef, Severity};
use crate::target::{DomainList, EgressLayer, Host, parse_host, parse_url};

/// The error code of a call refused by its skill's envelope.
pub const SKILL_DENIED: &str = "skill_denied";

/// Every registered tool's capabilities, both ways, with tools numbered densely so a skill's
/// resolution can mark the tools it has seen in a bit set.
#[derive(Debug, Clone, Default)]
pub struct CapabilityIndex {
    names: Vec<String>,
    ids: HashMap<String, u32>,
    capabilities: Vec<Vec<String>>,
    by_capability: HashMap<String, Vec<u32>>,
    /// Per capability, its tools as a bit set over the tool ids.
    bits: HashMap<String, Vec<u64>>,
}

impl CapabilityIndex {
    /// Indexes `(tool, capabilities)` pairs; tools are kept in name order, so every listing is
    /// stable. A tool given twice keeps its last capabilities.
    pub fn new(tools: impl IntoIterator<Item = (String, Vec<String>)>) -> Self {
        let mut sorted: Vec<(String, Vec<String>)> = tools.into_iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        sorted.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(&mut earlier.1, &mut later.1);
            }
            same
        });
        let mut index = CapabilityIndex::default();
        for (id, (name, caps)) in (0u32..).zip(sorted) {
            for c in &caps {
                let list = index.by_capability.entry(c.clone()).or_default();
                if list.last() != Some(&id) {
                    list.push(id);
                }
            }
            index.ids.insert(name.clone(), id);
            index.names.push(name);
            index.capabilities.push(caps);
        }
        let words = index.names.len().div_ceil(64);
        for (cap, ids) in &index.by_capability {
            let mut bits = vec![0u64; words];
            for &id in ids {
                if let Some(w) = bits.get_mut(id as usize / 64) {
                    *w |= 1u64 << (id % 64);
                }
            }
            index.bits.insert(cap.clone(), bits);
        }
        index
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// A tool's capabilities (empty for an unknown or unclassified tool).
    pub fn capabilities_of(&self, tool: &str) -> &[String] {
        self.ids
            .get(tool)
            .and_then(|&id| self.capabilities.get(id as usize))
            .map_or(&[], Vec::as_slice)
    }

    /// The tools with a capability, in name order.
    pub fn tools_with<'a>(&'a self, capability: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.by_capability
            .get(capability)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(|&id| self.names.get(id as usize).map(String::as_str))
    }

    /// Whether `tool` has `capability`.
    pub fn has(&self, tool: &str, capability: &str) -> bool {
        self.capabilities_of(tool).iter().any(|c| c == capability)
    }
}

/// What an override does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum OverrideAction {
    /// The skill may use the tool, up to this level, whatever its manifest and capabilities say.
    Add {
        /// The highest level the skill may use it at.
        access_level: AccessLevel,
    },
    /// The skill may not use the tool, whatever its manifest and capabilities say.
    Remove,
}

/// An administrator's override of one tool for one skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillOverride {
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// Add or remove.
    #[serde(flatten)]
    pub action: OverrideAction,
    /// Who made it.
    pub by: String,
}

/// Every override, by skill and tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    by_skill: HashMap<String, HashMap<String, SkillOverride>>,
}

impl Overrides {
    /// Indexes overrides; of two for the same skill and tool, the last wins.
    pub fn new(list: impl IntoIterator<Item = SkillOverride>) -> Self {
        let mut by_skill: HashMap<String, HashMap<String, SkillOverride>> = HashMap::new();
        for o in list {
            by_skill
                .entry(o.skill.clone())
                .or_default()
                .insert(o.tool.clone(), o);
        }
        Self { by_skill }
    }

    /// The override of `tool` for `skill`.
    pub fn get(&self, skill: &str, tool: &str) -> Option<&SkillOverride> {
        self.by_skill.get(skill)?.get(tool)
    }

    /// A skill's overrides, in tool order.
    pub fn of(&self, skill: &str) -> Vec<&SkillOverride> {
        let mut list: Vec<&SkillOverride> = self
            .by_skill
            .get(skill)
            .map(|m| m.values().collect())
            .unwrap_or_default();
        list.sort_by(|a, b| a.tool.cmp(&b.tool));
        list
    }

    /// How many overrides there are.
    pub fn len(&self) -> usize {
        self.by_skill.values().map(HashMap::len).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_skill.is_empty()
    }
}

/// Where a resolved tool came from, borrowed (resolving a large skill allocates nothing per tool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via<'a> {
    /// The skill's own `tools`.
    Manifest,
    /// Inherited from this skill.
    Inherited(&'a str),
    /// Matched through this capability of the skill's `permissions`.
    Capability(&'a str),
    /// Added by this administrator.
    Override(&'a str),
}

impl Via<'_> {
    /// The owned form.
    pub fn to_provenance(self) -> Provenance {
        match self {
            Via::Manifest => Provenance::Manifest,
            Via::Inherited(s) => Provenance::Inherited(s.to_owned()),
            Via::Capability(c) => Provenance::Capability(c.to_owned()),
            Via::Override(by) => Provenance::Override(by.to_owned()),
        }
    }
}

/// One tool in a skill's envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach<'a> {
    /// The tool's name, or `group:NAME` for a manifest entry naming a group.
    pub name: &'a str,
    /// The highest level the skill may use it at.
    pub access_level: AccessLevel,
    /// Where it came from.
    pub via: Via<'a>,
    /// The manifest entry (rate limit, domain rules), when it came from one.
    pub entry: Option<&'a ResolvedTool>,
}

impl Reach<'_> {
    /// The owned form, as listings show it.
    pub fn to_resolved(&self) -> ResolvedTool {
        match self.entry {
            Some(e) => e.clone(),
            None => ResolvedTool {
                name: self.name.to_owned(),
                access_level: self.access_level,
                rate_limit: None,
                allowed_domains: Vec::new(),
                blocked_domains: Vec::new(),
                provenance: self.via.to_provenance(),
                domains: None,
            },
        }
    }
}

/// A skill's envelope, resolved: its explicit entries and the set of tools its capabilities
/// reach beyond them.
#[derive(Debug, Clone)]
pub struct Resolution<'a> {
    explicit: Vec<Reach<'a>>,
    reached: Vec<u64>,
    /// The skill's capabilities that reach any tool, each with its bit set, in its order.
    through: Vec<(&'a str, &'a [u64])>,
    capabilities: &'a CapabilityIndex,
}

impl<'a> Resolution<'a> {
    /// How many tools (and `group:` entries) the skill may use.
    pub fn len(&self) -> usize {
        self.explicit.len()
            + self
                .reached
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum::<usize>()
    }

    /// Whether it may use none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every tool: the explicit entries first (overrides' additions, then the manifest's and
    /// inherited ones), then the tools reached through a capability, in name order, each with
    /// the first of the skill's capabilities that reaches it.
    pub fn iter(&self) -> impl Iterator<Item = Reach<'a>> + '_ {
        let caps = self.capabilities;
        let through = self.reached.iter().enumerate().flat_map(move |(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                Some(w * 64 + bit as usize)
            })
            .filter_map(move |id| {
                let name = caps.names.get(id)?;
                let (cap, _) = self.through.iter().find(|(_, bits)| {
                    bits.get(id / 64)
                        .is_some_and(|w| w & (1u64 << (id % 64)) != 0)
                })?;
                Some(Reach {
                    name,
                    access_level: AccessLevel::Standard,
                    via: Via::Capability(cap),
                    entry: None,
                })
            })
        });
        self.explicit.iter().copied().chain(through)
    }
}

/// The skill layer's verdict on one call, and the per-skill rate limit it must also pass.
#[derive(Debug, Clone)]
pub struct SkillJudgement<'a> {
    /// The verdict.
    pub verdict: LayerVerdict,
    /// What let the call through (`None`: refused).
    pub via: Option<Via<'a>>,
    /// The skill's rate limit on the tool, counted like policy's.
    pub rate: Option<RateCheck>,
}

/// The three inputs of a skill's envelope, borrowed together.
#[derive(Debug, Clone, Copy)]
pub struct Envelopes<'a> {
    /// The skills' own and inherited tools.
    pub skills: &'a SkillMap,
    /// The registered tools' capabilities.
    pub capabilities: &'a CapabilityIndex,
    /// The administrators' overrides.
    pub overrides: &'a Overrides,
}

impl<'a> Envelopes<'a> {
    /// Every tool `skill` may use, with where each came from; `None` for a skill no call may be
    /// made under ([`SkillMap::refusal`]: unknown, not loading, or an unreadable directory). The
    /// explicit entries (overrides' additions, then the manifest's and inherited ones) are
    /// listed; the tools reached only through the skill's capabilities are a bit set over the
    /// registered tools, the union of each capability's set less the explicit and removed
    /// tools, so resolving costs the same whether the capabilities reach ten tools or ten
    /// thousand. [`Resolution::iter`] lists them all.
    pub fn resolve(&self, skill: &str) -> Option<Resolution<'a>> {
        let Envelopes {
            skills,
            capabilities,
            overrides,
        } = *self;
        if skills.refusal(skill).is_some() {
            return None;
        }
        let entries = skills.tools_of(skill)?;
        let permissions = skills.permissions_of(skill);
        let words = capabilities.len().div_ceil(64);
        let mut reached = vec![0u64; words];
        let mut through = Vec::with_capacity(permissions.len());
        for cap in permissions {
            if let Some(bits) = capabilities.bits.get(cap) {
                for (w, b) in reached.iter_mut().zip(bits) {
                    *w |= b;
                }
                through.push((cap.as_str(), bits.as_slice()));
            }
        }
        let mut unmark = |name: &str| {
            if let Some(&id) = capabilities.ids.get(name)
                && let Some(w) = reached.get_mut(id as usize / 64)
            {
                *w &= !(1u64 << (id % 64));
            }
        };
        let ov = overrides.by_skill.get(skill);
        let mut explicit = Vec::with_capacity(entries.len() + ov.map_or(0, HashMap::len));
        if let Some(ov) = ov {
            let mut list: Vec<&SkillOverride> = ov.values().collect();
            list.sort_by(|a, b| a.tool.cmp(&b.tool));
            for o in list {
                unmark(&o.tool);
                if let OverrideAction::Add { access_level } = o.action {
                    explicit.push(Reach {
                        name: &o.tool,
                        access_level,
                        via: Via::Override(&o.by),
                        entry: None,
                    });
                }
            }
        }
        for e in entries {
            if ov.is_some_and(|m| m.contains_key(&e.name)) {
                continue;
            }
            unmark(&e.name);
            explicit.push(Reach {
                name: &e.name,
                access_level: e.access_level,
                via: match &e.provenance {
                    Provenance::Inherited(p) => Via::Inherited(p),
                    _ => Via::Manifest,
                },
                entry: Some(e),
            });
        }
        Some(Resolution {
            explicit,
            reached,
            through,
            capabilities,
        })
    }

    /// Whether a call of `tool` (in `group`) needing `level` fits `skill`'s envelope, and how:
    /// an override first (a removal refuses, an addition sets the level), then the manifest's
    /// and inherited entries (by name, then `group:GROUP`), then the skill's capabilities.
    pub fn validate_access(
        &self,
        skill: &str,
        tool: &'a str,
        group: &str,
        level: AccessLevel,
    ) -> Result<Reach<'a>, Refusal> {
        let Envelopes {
            skills,
            capabilities,
            overrides,
        } = *self;
        if let Some(refusal) = skills.refusal(skill) {
            return Err(refusal);
        }
        let reach = if let Some(o) = overrides.get(skill, tool) {
            match o.action {
                OverrideAction::Remove => {
                    return Err(Refusal::RemovedByOverride {
                        skill: skill.to_owned(),
                        tool: tool.to_owned(),
                        by: o.by.clone(),
                    });
                }
                OverrideAction::Add { access_level } => Reach {
                    name: &o.tool,
                    access_level,
                    via: Via::Override(&o.by),
                    entry: None,
                },
            }
        } else if let Some(e) = skills.entry(skill, tool, group) {
            Reach {
                name: &e.name,
                access_level: e.access_level,
                via: match &e.provenance {
                    Provenance::Inherited(p) => Via::Inherited(p),
                    _ => Via::Manifest,
                },
                entry: Some(e),
            }
        } else if let Some(cap) = skills
            .permissions_of(skill)
            .iter()
            .find(|c| capabilities.has(tool, c))
        {
            Reach {
                name: tool,
                access_level: AccessLevel::Standard,
                via: Via::Capability(cap),
                entry: None,
            }
        } else {
            return Err(Refusal::NotInSkill {
                skill: skill.to_owned(),
                tool: tool.to_owned(),
            });
        };
        if level > reach.access_level {
            return Err(Refusal::AboveLevel {
                skill: skill.to_owned(),
                tool: tool.to_owned(),
                allowed: reach.access_level,
                needed: level,
            });
        }
        Ok(reach)
    }

    /// The skill layer's verdict on a call of `def` needing `level`, made under `skill` with
    /// `arguments` (and, for a custom tool, its rendered `argv`): allowed inside the envelope
    /// (quoting the entry and where it came from), denied outside it or when an argument names
    /// a host the entry's domain rules do not let it reach; plus the entry's rate limit.
    pub fn judge(
        &self,
        skill: &str,
        def: &'a ToolDefinition,
        level: AccessLevel,
        arguments: &Value,
        argv: Option<&[String]>,
    ) -> SkillJudgement<'a> {
        let deny = |refusal: Refusal| SkillJudgement {
            verdict: LayerVerdict::stop(
                Layer::Skill,
                Decision::Deny,
                SKILL_DENIED,
                Severity::Error,
                refusal.to_string(),
            ),
            via: None,
            rate: None,
        };
        let reach = match self.validate_access(skill, def.name.as_str(), def.group.as_str(), level)
        {
            Ok(r) => r,
            Err(refusal) => return deny(refusal),
        };
        let rule = RuleRef::new(
            match reach.via {
                Via::Capability(c) => format!("permissions: {c}"),
                Via::Override(_) => format!("override: add {}", reach.name),
                Via::Manifest | Via::Inherited(_) => format!("tools: {}", reach.name),
            },
            match reach.via {
                Via::Manifest | Via::Capability(_) => format!("skill {skill}"),
                Via::Inherited(parent) => format!("skill {parent}, inherited by {skill}"),
                Via::Override(by) => format!("override of skill {skill} by {by}"),
            },
        );
        if let Some(rules) = reach.entry.and_then(|e| e.domains.as_deref())
            && let Some(reason) = domain_refusal(rules, def, arguments, argv)
        {
            return deny(Refusal::Domain {
                skill: skill.to_owned(),
                tool: def.name.as_str().to_owned(),
                reason,
            });
        }
        let how = match reach.via {
            Via::Capability(c) => format!("has capability {c}, which skill {skill} is permitted"),
            Via::Override(by) => format!("was added to skill {skill} by {by}"),
            Via::Manifest | Via::Inherited(_) => format!("is in skill {skill}'s tools"),
        };
        let verdict = LayerVerdict::allow(
            Layer::Skill,
            format!(
                "tool {} {how}, up to {} access",
                def.name, reach.access_level
            ),
        )
        .by(rule.clone());
        let rate = reach.entry.and_then(|e| e.rate_limit).map(|limit| {
            let windows = [(limit.per_minute, MINUTE_US), (limit.per_hour, HOUR_US)]
                .into_iter()
                .filter_map(|(n, window_us)| n.map(|limit| RateWindow { window_us, limit }))
                .collect();
            RateCheck {
                key: format!("skill:{skill}:tool:{}", def.name),
                windows,
                rule: RuleRef::new(format!("{} rate_limit", rule.rule), rule.source),
            }
        });
        SkillJudgement {
            verdict,
            via: Some(reach.via),
            rate,
        }
    }
}

impl Envelopes<'_> {
    /// What `skill`'s entry for `def` asks of the tool's connections, as one layer of the
    /// egress gatekeeper: its `allowed_domains` and `blocked_domains`, or no host at all when
    /// they do not compile; `None` when the entry sets no domain rules (or the skill does not
    /// reach the tool, which the skill layer has refused already).
    pub fn egress_layer(
        &self,
        skill: &str,
        def: &ToolDefinition,
        level: AccessLevel,
    ) -> Option<EgressLayer> {
        let reach = self
            .validate_access(skill, def.name.as_str(), def.group.as_str(), level)
            .ok()?;
        let rules = reach.entry?.domains.as_deref()?;
        let source = format!("skill {skill}");
        Some(match &rules.broken {
            // Fail closed, as the skill layer does for arguments (`*` always compiles).
            Some(_) => EgressLayer {
                source,
                block: DomainList::parse(["*"]).unwrap_or_default(),
                ..EgressLayer::default()
            },
            None => EgressLayer {
                source,
                allow: rules.allowed.clone(),
                block: rules.blocked.clone(),
                ports: Vec::new(),
            },
        })
    }
}

/// Why a call's hosts break an entry's domain rules, if they do. Every URL and host argument is
/// checked; one that cannot be read is refused, since the rule cannot be shown to hold.
fn domain_refusal(
    rules: &DomainRules,
    def: &ToolDefinition,
    arguments: &Value,
    argv: Option<&[String]>,
) -> Option<String> {
    if let Some(broken) = &rules.broken {
        return Some(format!(
            "has domain rules that do not compile ({broken}), so it reaches no host"
        ));
    }
    let targets = crate::policy::args::targets(Some(def), arguments, argv);
    let urls = targets.urls.iter().map(|(at, u)| {
        (
            at,
            u,
            parse_url(u).map(|t| t.host).map_err(|e| e.to_string()),
        )
    });
    let hosts = targets
        .hosts
        .iter()
        .map(|(at, h)| (at, h, parse_host(h).map_err(|e| e.to_string())));
    for (at, written, host) in urls.chain(hosts) {
        let host: Host = match host {
            Ok(h) => h,
            Err(e) => {
                return Some(format!(
                    "cannot tell which host {written:?} at {at} names: {e}"
                ));
            }
        };
        if let Some(p) = rules.blocked.first_match(&host) {
            return Some(format!(
                "may not reach {written:?} at {at}: blocked_domains has {:?}",
                p.as_str()
            ));
        }
        if !rules.allowed.patterns().is_empty() && rules.allowed.first_match(&host).is_none() {
            return Some(format!(
                "may not reach {written:?} at {at}: it is not in allowed_domains"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests;
