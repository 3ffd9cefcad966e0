//! A skill's envelope resolved for people (each tool it may use, with where it came from and
//! who classified it) and the skills' lifecycle figures.

use std::collections::BTreeMap;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use tw_core::skill::{Envelopes, Via};

use super::SkillService;
use crate::capabilities::{
    ClassificationNote, ResolvedEntry, ResolvedSkill, SkillFigures, SkillMetrics,
};
use crate::error::Result;

impl SkillService {
    /// The tools a skill may use now, with where each came from: its manifest, a skill it
    /// inherits from, a capability of its `permissions` (with who classified the tool), or an
    /// override. Counted as an activation. `None` for a skill that is not loaded.
    pub fn resolve(&self, skill: &str) -> Option<ResolvedSkill> {
        let skills = self.loaded();
        let caps = self.capabilities();
        let ov = self.overrides();
        let env = Envelopes {
            skills: &skills.map,
            capabilities: &caps.index,
            overrides: &ov.overrides,
        };
        let reached = env.resolve(skill)?;
        {
            let mut a = self
                .counters
                .activations
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *a.entry(skill.to_owned()).or_default() += 1;
        }
        let registry = &self.shared.registry;
        let tools: Vec<ResolvedEntry> = reached
            .iter()
            .map(|r| ResolvedEntry {
                tool: r.to_resolved(),
                registered: r.name.starts_with("group:") || registry.get(r.name).is_some(),
                classification: match r.via {
                    Via::Capability(cap) => caps.tools.get(r.name).map(|t| ClassificationNote {
                        source: t.classification.source,
                        confidence: t
                            .classification
                            .capabilities
                            .iter()
                            .find(|a| a.capability == cap)
                            .map_or(0.0, |a| a.confidence),
                    }),
                    _ => None,
                },
            })
            .collect();

        let permissions = skills.map.permissions_of(skill).to_vec();
        Some(ResolvedSkill {
            skill: skill.to_owned(),
            unknown_permissions: permissions
                .iter()
                .filter(|p| !caps.catalog.contains(p))
                .cloned()
                .collect(),
            permissions,
            dangling_overrides: ov
                .overrides
                .of(skill)
                .iter()
                .filter(|o| registry.get(&o.tool).is_none())
                .map(|o| o.tool.clone())
                .collect(),
            tools,
        })
    }

    /// Lifecycle figures: per skill (activations, resolved tools by provenance, overrides, calls
    /// and refusals from the audit log) and the classification sources.
    pub async fn metrics(&self) -> Result<SkillMetrics> {
        let usage = self.shared.store.skill_usage().await?;
        let skills = self.loaded();
        let ov = self.overrides();
        let activations = self
            .counters
            .activations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let caps = self.capabilities();
        let env = Envelopes {
            skills: &skills.map,
            capabilities: &caps.index,
            overrides: &ov.overrides,
        };
        let mut names: Vec<String> = skills.skills.iter().map(|s| s.folder.clone()).collect();
        names.extend(usage.iter().map(|u| u.skill.clone()));
        names.sort();
        names.dedup();
        let figures = names
            .into_iter()
            .map(|skill| {
                let mut resolved = BTreeMap::new();
                for r in env.resolve(&skill).iter().flat_map(|res| res.iter()) {
                    let key = match r.via {
                        Via::Manifest => "manifest",
                        Via::Inherited(_) => "inherited",
                        Via::Capability(_) => "capability",
                        Via::Override(_) => "override",
                    };
                    *resolved.entry(key).or_default() += 1;
                }
                let used = usage.iter().find(|u| u.skill == skill);
                SkillFigures {
                    loaded: skills.get(&skill).is_some_and(|s| s.manifest.is_some()),
                    activations: activations.get(&skill).copied().unwrap_or(0),
                    resolved,
                    overrides: ov.overrides.of(&skill).len(),
                    calls: used.map_or(0, |u| u.calls),
                    skill_denied: used.map_or(0, |u| u.skill_denied),
                    last_call_at: used.and_then(|u| u.last_call_at),
                    skill,
                }
            })
            .collect();
        let counters = &self.counters.checks;
        let checks = ["manifest", "inherited", "capability", "override", "denied"]
            .into_iter()
            .zip(counters.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        Ok(SkillMetrics {
            skills: figures,
            classification_sources: caps.sources(),
            checks,
        })
    }
}
