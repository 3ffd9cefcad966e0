//! The knowledge tools of seed 002 (group `knowledge`, teams tier): `create_entity` writes an
//! entity of the team's knowledge store (a name of a kind, a description, properties) with its
//! relations to others, merging into one that exists; `search_knowledge` finds entities by words
//! and kind, each with its relations both ways. The store is shared by every agent of the team,
//! unlike memory: each entity says which agent created it and which changed it last (the caller
//! the pipeline checked).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tw_core::{ErrorCode, LicenseTier, RiskLevel, ToolCategory, ToolDefinition, ToolStatus};
use tw_store::{EntityOutcome, EntityRef, KnowledgeSearch, NewEntity};

use super::memory::{store_failure, time};
use super::{BuiltinTool, StoreAccess, ToolContext, ToolFailure, ToolFuture, args, lit, output};

/// The most relations one write adds.
const MAX_RELATIONS: usize = 50;
/// The most results one search returns.
const MAX_RESULTS: u64 = 50;
/// The most bytes of one entity's properties, as JSON.
const MAX_PROPERTIES_BYTES: usize = 64 << 10;
/// The code of a relation to an entity that does not exist.
const UNKNOWN_ENTITY: &str = "unknown_entity";

fn word_schema(description: &str) -> Value {
    json!({"type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$", "description": description})
}

fn name_schema() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 256, "pattern": "^[^\\u0000]+$"})
}

fn definition(
    name: &str,
    description: &str,
    params: Value,
    output: Value,
    writes: bool,
) -> Result<ToolDefinition, tw_core::CoreError> {
    let mut d = lit::in_runtime(
        name,
        description,
        ToolCategory::Knowledge,
        "knowledge",
        params,
        output,
        writes,
    )?;
    d.constraints.max_execution_time_ms = 10_000;
    d.risk_level = RiskLevel::Low;
    d.license_tier = LicenseTier::Teams;
    Ok(d)
}

/// The knowledge tools, over `access` (none: each call says so).
pub(super) fn tools(access: Option<StoreAccess>) -> Vec<Arc<dyn BuiltinTool>> {
    let access = Arc::new(access);
    vec![
        Arc::new(CreateEntity(Arc::clone(&access))),
        Arc::new(SearchKnowledge(access)),
    ]
}

struct CreateEntity(Arc<Option<StoreAccess>>);

#[derive(Deserialize)]
struct Target {
    kind: String,
    name: String,
}

#[derive(Deserialize)]
struct Relation {
    relation: String,
    to: Target,
}

#[derive(Deserialize)]
struct CreateArgs {
    kind: String,
    name: String,
    description: Option<String>,
    #[serde(default)]
    properties: Map<String, Value>,
    #[serde(default)]
    relations: Vec<Relation>,
}

impl BuiltinTool for CreateEntity {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = definition(
            "create_entity",
            "Add an entity to the team's knowledge store (a name of a kind, such as service \
             `billing` or person `Ada`, with a description and properties) and its relations to \
             entities already there. Writing one that exists merges: a missing description \
             keeps the old one, a property set to null is removed, relations are added.",
            json!({
                "type": "object",
                "properties": {
                    "kind": word_schema("What sort of thing it is: a lowercase word such as service, person, runbook."),
                    "name": name_schema(),
                    "description": {"type": "string", "maxLength": 10_000},
                    "properties": {"type": "object", "description": "Facts about it, as JSON (at most 64 KiB)."},
                    "relations": {
                        "type": "array", "maxItems": MAX_RELATIONS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "relation": word_schema("The relation's name, such as owns or depends_on."),
                                "to": {
                                    "type": "object",
                                    "properties": {"kind": word_schema("The other entity's kind."), "name": name_schema()},
                                    "required": ["kind", "name"],
                                    "additionalProperties": false
                                }
                            },
                            "required": ["relation", "to"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["kind", "name"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "kind": {"type": "string"},
                    "name": {"type": "string"},
                    "created": {"type": "boolean"},
                    "relations_added": {"type": "integer"}
                },
                "required": ["kind", "name", "created", "relations_added"]
            }),
            true,
        )?;
        d.constraints.max_output_bytes = 4 << 10;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: CreateArgs = args(raw)?;
            let size = Value::Object(a.properties.clone()).to_string().len();
            if size > MAX_PROPERTIES_BYTES {
                return Err(ToolFailure {
                    status: ToolStatus::ValidationError,
                    code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
                    message: format!(
                        "/properties: {size} bytes of JSON, over the {MAX_PROPERTIES_BYTES} an entity may have"
                    ),
                });
            }
            let (store, now) = StoreAccess::of(self.0.as_ref().as_ref(), "the knowledge store")?;
            let entity = NewEntity {
                entity: EntityRef {
                    kind: a.kind,
                    name: a.name,
                },
                description: a.description,
                properties: a.properties,
                relations: a
                    .relations
                    .into_iter()
                    .map(|r| {
                        let to = EntityRef {
                            kind: r.to.kind,
                            name: r.to.name,
                        };
                        (r.relation, to)
                    })
                    .collect(),
            };
            match store
                .knowledge_put(&entity, &ctx.caller.agent_id, now)
                .await
                .map_err(store_failure)?
            {
                EntityOutcome::Stored {
                    created,
                    relations_added,
                } => output(&json!({
                    "kind": entity.entity.kind,
                    "name": entity.entity.name,
                    "created": created,
                    "relations_added": relations_added,
                })),
                EntityOutcome::MissingTarget { index, target } => Err(ToolFailure {
                    status: ToolStatus::Failed,
                    code: UNKNOWN_ENTITY.to_owned(),
                    message: format!(
                        "/relations/{index}/to: there is no {} named {:?}; create it first \
                         (nothing was written)",
                        target.kind, target.name
                    ),
                }),
            }
        })
    }
}

struct SearchKnowledge(Arc<Option<StoreAccess>>);

#[derive(Deserialize)]
struct SearchArgs {
    query: Option<String>,
    kind: Option<String>,
    #[serde(default = "default_limit")]
    limit: u64,
}

fn default_limit() -> u64 {
    10
}

impl BuiltinTool for SearchKnowledge {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = definition(
            "search_knowledge",
            "Search the team's knowledge store by words (in names, kinds, descriptions and \
             properties; entities with more of them first) and kind. Each result has its \
             properties and its relations both ways. Without a query, the most recently changed \
             entities.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "maxLength": 1000},
                    "kind": word_schema("Only entities of this kind."),
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "At most this many (default 10)."}
                },
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "results": {"type": "array", "items": {"type": "object"}},
                    "count": {"type": "integer"}
                },
                "required": ["results", "count"]
            }),
            false,
        )?;
        d.constraints.max_output_bytes = 1 << 20;
        Ok(d)
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, raw: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: SearchArgs = args(raw)?;
            let (store, _) = StoreAccess::of(self.0.as_ref().as_ref(), "the knowledge store")?;
            let q = KnowledgeSearch {
                query: a.query,
                kind: a.kind,
                limit: u32::try_from(a.limit.min(MAX_RESULTS)).unwrap_or(1),
            };
            let found = store.knowledge_search(&q).await.map_err(store_failure)?;
            let results: Vec<Value> = found
                .iter()
                .map(|e| {
                    json!({
                        "kind": e.entity.kind,
                        "name": e.entity.name,
                        "description": e.description,
                        "properties": e.properties,
                        "relations": e.relations.iter().map(|r| json!({
                            "relation": r.relation,
                            "direction": r.direction,
                            "kind": r.other.kind,
                            "name": r.other.name,
                        })).collect::<Vec<_>>(),
                        "created_by": e.created_by,
                        "updated_by": e.updated_by,
                        "updated_at": time(e.updated_at),
                        "score": e.score,
                    })
                })
                .collect();
            Ok(json!({"count": results.len(), "results": results}))
        })
    }
}
