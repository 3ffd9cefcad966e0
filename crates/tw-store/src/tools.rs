//! Persisted custom tools: each spec stored as the JSON a definition file would hold, and loaded
//! back through the same checked loader, so a stored tool is held to the rules of a fresh one.

use serde::Serialize;
use tw_core::{DefinitionFormat, ToolSpec, load_tool_specs};

use crate::error::{Result, StoreError};

/// A custom tool as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredTool {
    /// The tool's name.
    pub name: String,
    /// The spec, or why it no longer loads (say, a rule this build added).
    pub spec: std::result::Result<ToolSpec, String>,
    /// When it was first saved (µs since the epoch).
    pub created_at: i64,
    /// When it was last saved (µs since the epoch).
    pub updated_at: i64,
}

/// A spec checked and encoded for [`save`], before the write connection is taken.
pub(crate) struct EncodedTool {
    name: String,
    text: String,
}

pub(crate) fn encode(spec: &ToolSpec) -> Result<EncodedTool> {
    let name = spec.definition.name.to_string();
    let text = serde_json::to_string(spec).map_err(|e| StoreError::Encode {
        what: format!("custom tool {name}"),
        message: e.to_string(),
    })?;
    // Refuse to store what could not be loaded back.
    load_tool_specs(
        &text,
        &format!("custom tool {name}"),
        DefinitionFormat::Json,
    )
    .map_err(|e| StoreError::Encode {
        what: format!("custom tool {name}"),
        message: e.to_string(),
    })?;
    Ok(EncodedTool { name, text })
}

dual! {
    pub(crate) async fn save(conn: &mut Conn, tool: &EncodedTool, now_us: i64) -> Result<()> {
        upsert(conn, tool, now_us, now_us).await
    }

    /// Inserts `tool`, or replaces the stored one's spec (keeping when it was created).
    async fn upsert(
        conn: &mut Conn,
        tool: &EncodedTool,
        created_at: i64,
        now_us: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO custom_tools (name, spec, created_at, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at",
        )
        .bind(tool.name.clone())
        .bind(tool.text.clone())
        .bind(created_at)
        .bind(now_us)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// [`crate::Store::replace_custom_tool`]'s work, inside its transaction.
    pub(crate) async fn replace(
        conn: &mut Conn,
        old: &str,
        tool: &EncodedTool,
        now_us: i64,
    ) -> Result<()> {
        let created: Option<i64> =
            sqlx::query_scalar("SELECT created_at FROM custom_tools WHERE name = $1")
                .bind(old.to_owned())
                .fetch_optional(&mut *conn)
                .await?;
        let Some(created) = created else {
            return Err(StoreError::Invalid {
                what: format!("custom tool {old:?}"),
                message: "it is not stored".to_owned(),
            });
        };
        if tool.name != old {
            let taken: Option<i64> = sqlx::query_scalar("SELECT created_at FROM custom_tools WHERE name = $1")
                .bind(tool.name.clone())
                .fetch_optional(&mut *conn)
                .await?;
            if taken.is_some() {
                return Err(StoreError::Invalid {
                    what: format!("custom tool {:?}", tool.name),
                    message: "another stored custom tool has this name".to_owned(),
                });
            }
            delete(conn, old).await?;
        }
        // A rename keeps the tool's place among the custom tools (its tier rank).
        upsert(conn, tool, created, now_us).await
    }

    pub(crate) async fn delete(conn: &mut Conn, name: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM custom_tools WHERE name = $1")
            .bind(name.to_owned())
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    pub(crate) async fn list(pool: &Pool) -> Result<Vec<StoredTool>> {
        let rows =
            sqlx::query("SELECT name, spec, created_at, updated_at FROM custom_tools ORDER BY name")
                .fetch_all(pool)
                .await?;
        rows.iter()
            .map(|row| {
                let name: String = row.try_get("name")?;
                let text: String = row.try_get("spec")?;
                let file = format!("stored custom tool {name}");
                let spec = match load_tool_specs(&text, &file, DefinitionFormat::Json) {
                    Ok(mut specs) if specs.len() == 1 => specs.pop().ok_or_else(|| file.clone()),
                    Ok(specs) => Err(format!("{file}: holds {} specs, expected one", specs.len())),
                    Err(e) => Err(e.to_string()),
                };
                Ok(StoredTool {
                    name,
                    spec,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                })
            })
            .collect()
    }
}
