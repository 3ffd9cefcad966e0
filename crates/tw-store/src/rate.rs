//! Rate limits that hold exactly: under concurrency, across processes sharing the data directory,
//! and across restarts. Each admitted call leaves one row per limit key; a check counts the key's
//! rows inside each sliding window and admits the call only if every count is under its limit.
//! Counting and recording happen in one `BEGIN IMMEDIATE` transaction on the store's write
//! connection, so no two checks can both see the last free slot.

use crate::codec;
use crate::error::{Result, StoreError};

/// The counters and their outcome are the policy engine's own types: it says which counters a
/// call must pass, the store counts them.
pub use tw_core::policy::rate::{RateCheck, RateOutcome, RateWindow};

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

dual! {
    /// Runs inside the caller's transaction (`BEGIN IMMEDIATE` on SQLite).
    pub(crate) async fn acquire(
        conn: &mut Conn,
        checks: &[RateCheck],
        now_us: i64,
    ) -> Result<RateOutcome> {
        // On PostgreSQL other replicas count at the same time: each key is counted and charged
        // under its lock, taken in one order so two calls sharing keys cannot deadlock.
        let mut keys: Vec<&str> = checks.iter().map(|c| c.key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            conn.lock_key(&format!("toolwarden rate {key}")).await?;
        }
        // Drop what no window can see any more first; it changes no count and keeps the index small.
        for c in checks {
            if let Some(largest) = c.windows.iter().map(|w| w.window_us).max() {
                sqlx::query("DELETE FROM rate_events WHERE key = $1 AND at <= $2")
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
                    sqlx::query_scalar("SELECT COUNT(*) FROM rate_events WHERE key = $1 AND at > $2")
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
            sqlx::query("INSERT INTO rate_events (key, at) VALUES ($1, $2)")
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
        conn: &mut Conn,
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
            "SELECT at FROM rate_events WHERE key = $1 AND at > $2 ORDER BY at LIMIT 1 OFFSET $3",
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
}
