//! Rate limits that hold exactly: under concurrency, across processes sharing the data directory,
//! and across restarts. Each admitted call leaves one row per limit key; a check counts the key's
//! rows inside each sliding window and admits the call only if every count is under its limit.
//! Counting and recording happen in one `BEGIN IMMEDIATE` transaction on the store's write
//! connection, so no two checks can both see the last free slot.

use serde::{Deserialize, Serialize};
use sqlx::Row as _;
use sqlx::sqlite::SqliteConnection;

use crate::codec;
use crate::error::{Result, StoreError};

/// At most `limit` calls in any `window_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateWindow {
    /// The window's length in µs (positive).
    pub window_us: i64,
    /// Calls admitted within it. With 0 nothing is ever admitted.
    pub limit: u32,
}

/// The limits one key is held to. A key should always be checked with the same windows: events
/// older than the largest window checked are deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateCheck {
    /// What is being limited (`tool:write_file`, `agent:claude`, ...).
    pub key: String,
    /// Every window the key must be under.
    pub windows: Vec<RateWindow>,
}

/// Whether a call got through its rate limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RateOutcome {
    /// Under every limit; the call was counted against each key.
    Admitted,
    /// Over a limit (the first one found, in the order given); nothing was counted.
    Limited {
        /// The key over its limit.
        key: String,
        /// The window it is over.
        window_us: i64,
        /// The window's limit.
        limit: u32,
        /// Calls already counted in the window.
        count: u64,
        /// How long until enough of those calls leave the window for one more to fit.
        retry_after_us: i64,
    },
}

/// Refuses windows that could never be counted, before the write connection is taken.
pub(crate) fn check(checks: &[RateCheck]) -> Result<()> {
    for c in checks {
        if let Some(w) = c.windows.iter().find(|w| w.window_us <= 0) {
            return Err(StoreError::Invalid {
                what: format!("rate limit window for key {:?}", c.key),
                message: format!("{} µs: a window must be positive", w.window_us),
            });
        }
    }
    Ok(())
}

/// Runs inside the caller's `BEGIN IMMEDIATE` transaction.
pub(crate) async fn acquire(
    conn: &mut SqliteConnection,
    checks: &[RateCheck],
    now_us: i64,
) -> Result<RateOutcome> {
    // Drop what no window can see any more first; it changes no count and keeps the index small.
    for c in checks {
        if let Some(largest) = c.windows.iter().map(|w| w.window_us).max() {
            sqlx::query("DELETE FROM rate_events WHERE key = ? AND at <= ?")
                .bind(c.key.clone())
                .bind(now_us.saturating_sub(largest))
                .execute(&mut *conn)
                .await?;
        }
    }
    for c in checks {
        for w in &c.windows {
            let since = now_us.saturating_sub(w.window_us);
            let count: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM rate_events WHERE key = ? AND at > ?")
                    .bind(c.key.clone())
                    .bind(since)
                    .fetch_one(&mut *conn)
                    .await?;
            let count = codec::count(count);
            if count < u64::from(w.limit) {
                continue;
            }
            return Ok(RateOutcome::Limited {
                key: c.key.clone(),
                window_us: w.window_us,
                limit: w.limit,
                count,
                retry_after_us: retry_after(conn, &c.key, *w, count, now_us).await?,
            });
        }
    }
    for c in checks {
        sqlx::query("INSERT INTO rate_events (key, at) VALUES (?, ?)")
            .bind(c.key.clone())
            .bind(now_us)
            .execute(&mut *conn)
            .await?;
    }
    Ok(RateOutcome::Admitted)
}

/// When one more call fits: once the event that brings the count below the limit leaves the
/// window. That is the oldest event in the window, unless the limit was lowered and more events
/// than it are inside.
async fn retry_after(
    conn: &mut SqliteConnection,
    key: &str,
    w: RateWindow,
    count: u64,
    now_us: i64,
) -> Result<i64> {
    if w.limit == 0 {
        return Ok(w.window_us);
    }
    let skip = i64::try_from(count.saturating_sub(u64::from(w.limit))).unwrap_or(i64::MAX);
    let at: Option<i64> = sqlx::query(
        "SELECT at FROM rate_events WHERE key = ? AND at > ? ORDER BY at LIMIT 1 OFFSET ?",
    )
    .bind(key.to_owned())
    .bind(now_us.saturating_sub(w.window_us))
    .bind(skip)
    .fetch_optional(&mut *conn)
    .await?
    .map(|r| r.try_get(0))
    .transpose()?;
    // An event leaves the window once `now - window >= at`.
    Ok(at.map_or(w.window_us, |at| {
        at.saturating_add(w.window_us).saturating_sub(now_us).max(0)
    }))
}
