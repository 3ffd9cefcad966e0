//! Calls per tool over time, for the desktop app's usage charts: the audit log's rows in a time
//! window counted per tool and per fixed-width bucket, with the denials among them. One grouped
//! scan over the `started_at` range (an index range, not the whole log), so a week's report
//! costs what a week of traffic costs, however long the log is.

use serde::{Deserialize, Serialize};
use sqlx::{Row as _, SqlitePool};
use tw_core::ToolStatus;

use crate::error::{Result, StoreError};

/// Most buckets a timeline may have.
pub const MAX_BUCKETS: i64 = 1000;

/// Counts for one tool in one bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineCell {
    /// The tool.
    pub tool: String,
    /// Which bucket: 0 is the one starting at the window's start.
    pub bucket: usize,
    /// Calls.
    pub calls: u64,
    /// Of which refused by policy, tier, mode or a person (`permission_denied`).
    pub denied: u64,
}

pub(crate) async fn timeline(
    pool: &SqlitePool,
    since: i64,
    until: i64,
    bucket_us: i64,
) -> Result<Vec<TimelineCell>> {
    if bucket_us <= 0 || until <= since {
        return Err(StoreError::Invalid {
            what: "timeline".to_owned(),
            message: "the window must end after it starts, and buckets must be wider than 0"
                .to_owned(),
        });
    }
    let span = until.saturating_sub(since);
    if span / bucket_us + i64::from(span % bucket_us != 0) > MAX_BUCKETS {
        return Err(StoreError::Invalid {
            what: "timeline".to_owned(),
            message: format!("a timeline has at most {MAX_BUCKETS} buckets; use wider ones"),
        });
    }
    let rows = sqlx::query(
        "SELECT tool, (started_at - ?1) / ?3 AS bucket, COUNT(*) AS calls, \
         SUM(status = ?4) AS denied \
         FROM audit_log WHERE started_at >= ?1 AND started_at < ?2 \
         GROUP BY tool, bucket ORDER BY bucket, tool",
    )
    .bind(since)
    .bind(until)
    .bind(bucket_us)
    .bind(ToolStatus::PermissionDenied.as_str())
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            let count = |c: &str| {
                r.try_get::<i64, _>(c)
                    .map(|n| u64::try_from(n).unwrap_or(0))
            };
            Ok(TimelineCell {
                tool: r.try_get("tool")?,
                bucket: usize::try_from(r.try_get::<i64, _>("bucket")?).unwrap_or(0),
                calls: count("calls")?,
                denied: count("denied")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use tw_core::ToolStatus;

    use super::*;
    use crate::tests::{open, record};

    const T0: i64 = 1_700_000_000_000_000;
    const S: i64 = 1_000_000;

    fn cell(tool: &str, bucket: usize, calls: u64, denied: u64) -> TimelineCell {
        TimelineCell {
            tool: tool.to_owned(),
            bucket,
            calls,
            denied,
        }
    }

    #[tokio::test]
    async fn calls_are_counted_per_tool_and_bucket_inside_the_window_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        // Record i starts at T0 + i seconds.
        let rows = [
            (0, "echo", ToolStatus::Success),
            (1, "echo", ToolStatus::PermissionDenied),
            (2, "exec", ToolStatus::Success),
            (9, "echo", ToolStatus::Success),
            (10, "echo", ToolStatus::PermissionDenied),
            (19, "exec", ToolStatus::Failed),
            (20, "echo", ToolStatus::Success),
        ];
        for (i, tool, status) in rows {
            store.append(record(i, tool, status)).await.unwrap();
        }
        // [T0 + 1 s, T0 + 20 s) in 10-second buckets, [1 s, 11 s) and [11 s, 20 s): rows 0
        // and 20 fall outside.
        let got = store.timeline(T0 + S, T0 + 20 * S, 10 * S).await.unwrap();
        assert_eq!(
            got,
            vec![
                cell("echo", 0, 3, 2),
                cell("exec", 0, 1, 0),
                cell("exec", 1, 1, 0),
            ]
        );
        assert!(store.timeline(T0, T0, S).await.is_err());
        assert!(store.timeline(T0, T0 + S, 0).await.is_err());
        let too_many = store.timeline(T0, T0 + (MAX_BUCKETS + 1) * S, S).await;
        assert!(too_many.unwrap_err().to_string().contains("at most"));
        assert_eq!(
            store
                .timeline(T0, T0 + MAX_BUCKETS * S, S)
                .await
                .unwrap()
                .len(),
            7
        );
    }
}
