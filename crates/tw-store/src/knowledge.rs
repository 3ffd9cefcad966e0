//! The team's knowledge store (migrations 0017 and PostgreSQL's 0005): entities (a name of a
//! kind, a description, properties) and named relations between them, with full-text search
//! (FTS5 on SQLite, a `tsvector` on PostgreSQL). Shared by every agent, unlike memory; each
//! entity says which agent created it and which changed it last.
//!
//! Writing an entity that exists merges into it (see [`NewEntity`]); a relation to an entity that
//! does not exist refuses the whole write, so the graph never points nowhere.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sqlx::QueryBuilder;

use crate::codec;
use crate::error::{Result, StoreError};
use crate::memory::{any_of, body, terms};

/// The most relations of each entity a search returns.
pub const MAX_RELATIONS_SHOWN: usize = 50;

/// An entity, by its kind and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityRef {
    /// Its kind (`service`, `person`).
    pub kind: String,
    /// Its name, unique within its kind.
    pub name: String,
}

/// An entity to write. An existing one (same kind and name) keeps what this leaves out: its
/// description when this has none, the properties this does not name (a `null` removes one),
/// and its relations (these are added).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEntity {
    /// Which entity.
    pub entity: EntityRef,
    /// Its description.
    pub description: Option<String>,
    /// Properties to set.
    pub properties: Map<String, Value>,
    /// Relations from it to other entities: (relation, target).
    pub relations: Vec<(String, EntityRef)>,
}

/// What writing an entity did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum EntityOutcome {
    /// Written.
    Stored {
        /// Whether it was new.
        created: bool,
        /// Relations that were not there before.
        relations_added: u64,
    },
    /// Not written: relation `index` points to an entity that does not exist.
    MissingTarget {
        /// The relation's place in [`NewEntity::relations`].
        index: usize,
        /// The entity it names.
        target: EntityRef,
    },
}

/// A relation as a search shows it, from the entity's side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelationRow {
    /// The relation's name.
    pub relation: String,
    /// `out`: from this entity to the other; `in`: from the other to this one.
    pub direction: String,
    /// The other entity.
    pub other: EntityRef,
}

/// An entity as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityRow {
    /// Which entity.
    #[serde(flatten)]
    pub entity: EntityRef,
    /// Its description.
    pub description: String,
    /// Its properties.
    pub properties: Value,
    /// Its relations, at most [`MAX_RELATIONS_SHOWN`].
    pub relations: Vec<RelationRow>,
    /// When it was created (µs since the epoch) and by which agent.
    pub created_at: i64,
    /// The agent that created it.
    pub created_by: String,
    /// When it last changed.
    pub updated_at: i64,
    /// The agent that changed it last.
    pub updated_by: String,
    /// How well it matched (higher is better; within one search only).
    pub score: Option<f64>,
}

/// A search of the knowledge store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnowledgeSearch {
    /// Words (any of them; entities with more rank higher); none: the most recently changed.
    pub query: Option<String>,
    /// Only entities of this kind.
    pub kind: Option<String>,
    /// At most this many.
    pub limit: u32,
}

/// Whether `s` is a kind or relation name: 1 to 64 lowercase ASCII letters, digits and `_`,
/// starting with a letter.
pub fn valid_word(s: &str) -> bool {
    s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Refuses what the schema would, before the write connection is taken.
pub(crate) fn check(e: &NewEntity) -> Result<()> {
    let invalid = |what: &str, message: String| {
        Err(StoreError::Invalid {
            what: what.to_owned(),
            message,
        })
    };
    let refs = std::iter::once(&e.entity).chain(e.relations.iter().map(|(_, t)| t));
    for r in refs {
        if !valid_word(&r.kind) {
            return invalid(
                "entity kind",
                format!("{:?}: 1 to 64 of a-z, 0-9 and _", r.kind),
            );
        }
        let n = r.name.chars().count();
        if n == 0 || n > 256 || r.name.contains('\0') {
            return invalid(
                "entity name",
                format!("{:?}: 1 to 256 characters, no NUL", r.name),
            );
        }
    }
    if let Some((rel, _)) = e.relations.iter().find(|(rel, _)| !valid_word(rel)) {
        return invalid("relation", format!("{rel:?}: 1 to 64 of a-z, 0-9 and _"));
    }
    Ok(())
}

dual! {
    /// Writes an entity and its relations, or nothing. Runs in the caller's transaction.
    pub(crate) async fn put(
        conn: &mut Conn,
        e: &NewEntity,
        agent: &str,
        now_us: i64,
    ) -> Result<EntityOutcome> {
        let mut targets = Vec::with_capacity(e.relations.len());
        for (index, (_, target)) in e.relations.iter().enumerate() {
            if target == &e.entity {
                targets.push(None);
                continue;
            }
            let id: Option<i64> =
                sqlx::query_scalar("SELECT id FROM knowledge_entities WHERE kind = $1 AND name = $2")
                    .bind(target.kind.clone())
                    .bind(target.name.clone())
                    .fetch_optional(&mut *conn)
                    .await?;
            match id {
                Some(id) => targets.push(Some(id)),
                None => {
                    return Ok(EntityOutcome::MissingTarget { index, target: target.clone() });
                }
            }
        }
        let old: Option<(i64, String)> = sqlx::query_as(
            "SELECT id, properties FROM knowledge_entities WHERE kind = $1 AND name = $2",
        )
        .bind(e.entity.kind.clone())
        .bind(e.entity.name.clone())
        .fetch_optional(&mut *conn)
        .await?;
        let mut properties = match &old {
            Some((id, text)) => match codec::json(|| format!("knowledge entity {id}, column properties"), text)? {
                Value::Object(map) => map,
                _ => Map::new(),
            },
            None => Map::new(),
        };
        for (k, v) in &e.properties {
            if v.is_null() {
                properties.remove(k);
            } else {
                properties.insert(k.clone(), v.clone());
            }
        }
        let properties = Value::Object(properties);
        let id: i64 = match &old {
            Some((id, _)) => {
                sqlx::query(
                    "UPDATE knowledge_entities SET description = COALESCE($1, description), \
                     properties = $2, body = $3, updated_at = $4, updated_by = $5 WHERE id = $6",
                )
                .bind(e.description.clone())
                .bind(properties.to_string())
                .bind(body(&properties))
                .bind(now_us)
                .bind(agent.to_owned())
                .bind(*id)
                .execute(&mut *conn)
                .await?;
                *id
            }
            None => {
                sqlx::query_scalar(
                    "INSERT INTO knowledge_entities (kind, name, description, properties, body, \
                     created_at, created_by, updated_at, updated_by) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $6, $7) RETURNING id",
                )
                .bind(e.entity.kind.clone())
                .bind(e.entity.name.clone())
                .bind(e.description.clone().unwrap_or_default())
                .bind(properties.to_string())
                .bind(body(&properties))
                .bind(now_us)
                .bind(agent.to_owned())
                .fetch_one(&mut *conn)
                .await?
            }
        };
        let mut added = 0;
        for ((relation, _), target) in e.relations.iter().zip(targets) {
            let done = sqlx::query(
                "INSERT INTO knowledge_relations (source, relation, target, created_at, created_by) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            )
            .bind(id)
            .bind(relation.clone())
            .bind(target.unwrap_or(id))
            .bind(now_us)
            .bind(agent.to_owned())
            .execute(&mut *conn)
            .await?;
            added += done.rows_affected();
        }
        Ok(EntityOutcome::Stored { created: old.is_none(), relations_added: added })
    }

    /// The entities matching `q`, each with its relations.
    pub(crate) async fn search(pool: &Pool, q: &KnowledgeSearch) -> Result<Vec<EntityRow>> {
        const COLUMNS: &str = "e.id, e.kind, e.name, e.description, e.properties, e.created_at, \
                               e.created_by, e.updated_at, e.updated_by";
        let words = q.query.as_deref().map(terms).unwrap_or_default();
        let mut qb = if words.is_empty() {
            QueryBuilder::<Db>::new(format!(
                "SELECT {COLUMNS}, CAST(NULL AS DOUBLE PRECISION) AS score \
                 FROM knowledge_entities e WHERE 1 = 1"
            ))
        } else if PG {
            let mut qb = QueryBuilder::<Db>::new(format!(
                "SELECT {COLUMNS}, CAST(ts_rank(e.search, q) AS DOUBLE PRECISION) AS score \
                 FROM knowledge_entities e, websearch_to_tsquery('simple', "
            ));
            qb.push_bind(any_of(&words, PG)).push(") AS q WHERE e.search @@ q");
            qb
        } else {
            let mut qb = QueryBuilder::<Db>::new(format!(
                "SELECT {COLUMNS}, -bm25(knowledge_text) AS score FROM knowledge_text \
                 JOIN knowledge_entities e ON e.id = knowledge_text.rowid \
                 WHERE knowledge_text MATCH "
            ));
            qb.push_bind(any_of(&words, PG));
            qb
        };
        if let Some(kind) = &q.kind {
            qb.push(" AND e.kind = ").push_bind(kind.clone());
        }
        qb.push(if words.is_empty() {
            " ORDER BY e.updated_at DESC, e.id DESC LIMIT "
        } else {
            " ORDER BY score DESC, e.updated_at DESC, e.id DESC LIMIT "
        });
        qb.push_bind(i64::from(q.limit));
        let rows = qb.build().fetch_all(pool).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: i64 = row.try_get("id")?;
            let properties: String = row.try_get("properties")?;
            out.push(EntityRow {
                entity: EntityRef { kind: row.try_get("kind")?, name: row.try_get("name")? },
                description: row.try_get("description")?,
                properties: codec::json(|| format!("knowledge entity {id}, column properties"), &properties)?,
                relations: relations(pool, id).await?,
                created_at: row.try_get("created_at")?,
                created_by: row.try_get("created_by")?,
                updated_at: row.try_get("updated_at")?,
                updated_by: row.try_get("updated_by")?,
                score: row
                    .try_get::<Option<f64>, _>("score")?
                    .map(|s| (s * 1e4).round() / 1e4),
            });
        }
        Ok(out)
    }

    /// An entity's relations both ways, outgoing first, at most [`MAX_RELATIONS_SHOWN`].
    async fn relations(pool: &Pool, id: i64) -> Result<Vec<RelationRow>> {
        let rows: Vec<(String, String, String, String)> = sqlx::query_as(
            "SELECT * FROM (\
             SELECT 'out' AS direction, r.relation, o.kind, o.name FROM knowledge_relations r \
             JOIN knowledge_entities o ON o.id = r.target WHERE r.source = $1 \
             UNION ALL \
             SELECT 'in', r.relation, o.kind, o.name FROM knowledge_relations r \
             JOIN knowledge_entities o ON o.id = r.source WHERE r.target = $1 AND r.source <> $1\
             ) AS x ORDER BY direction DESC, relation, kind, name LIMIT $2",
        )
        .bind(id)
        .bind(MAX_RELATIONS_SHOWN as i64)
        .fetch_all(pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(direction, relation, kind, name)| RelationRow {
                relation,
                direction,
                other: EntityRef { kind, name },
            })
            .collect())
    }
}
