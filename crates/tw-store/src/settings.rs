//! Settings that must be the same for every process using one data directory (the operational
//! mode, the license tier): the CLI and the desktop app read them from the file, not from their
//! own memory, so a switch made in one is obeyed by the other.

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// A setting and who last changed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    /// The setting's name.
    pub key: String,
    /// Its value, as text.
    pub value: String,
    /// When it was last set (µs since the epoch).
    pub updated_at: i64,
    /// Who last set it.
    pub updated_by: String,
}

dual! {
    fn decode(row: &DbRow) -> Result<Setting> {
        Ok(Setting {
            key: row.try_get("key")?,
            value: row.try_get("value")?,
            updated_at: row.try_get("updated_at")?,
            updated_by: row.try_get("updated_by")?,
        })
    }

    pub(crate) async fn get(pool: &Pool, key: &str) -> Result<Option<Setting>> {
        let row = sqlx::query("SELECT key, value, updated_at, updated_by FROM settings WHERE key = $1")
            .bind(key.to_owned())
            .fetch_optional(pool)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    pub(crate) async fn list(pool: &Pool) -> Result<Vec<Setting>> {
        let rows = sqlx::query("SELECT key, value, updated_at, updated_by FROM settings ORDER BY key")
            .fetch_all(pool)
            .await?;
        rows.iter().map(decode).collect()
    }

    pub(crate) async fn set(conn: &mut Conn, setting: &Setting) -> Result<()> {
        sqlx::query(
            "INSERT INTO settings (key, value, updated_at, updated_by) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, \
             updated_at = excluded.updated_at, updated_by = excluded.updated_by",
        )
        .bind(setting.key.clone())
        .bind(setting.value.clone())
        .bind(setting.updated_at)
        .bind(setting.updated_by.clone())
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}
