//! Calls per tool over time, for the desktop app's usage charts: the audit log's rows in a time
//! window counted per tool and per fixed-width bucket, with the denials among them. One grouped
//! scan over the `started_at` range (an index range, not the whole log), so a week's report
//! costs what a week of traffic costs, however long the log is.

use serde::{Deserialize, Serialize};
use tw_core::ToolStatus;

use crate::error::{Result, StoreError};

/// Most buckets a timeline may have.
pub const MAX_BUCKETS: i64 = 1000;
const HOUR_US: i64 = 3_600_000_000;
const DAY_US: i64 = 24 * HOUR_US;
/// The window a timeline covers when its start is not given: the week before its end.
pub const DEFAULT_SPAN_US: i64 = 7 * DAY_US;
/// Buckets a timeline aims for: hourly up to three days, then daily, then wider.
const TARGET_BUCKETS: i64 = 72;

/// The window a usage timeline covers, checked: it ends at `until` (now unless given), starts
/// at `since` ([`DEFAULT_SPAN_US`] before its end unless given) and is cut into whole-hour or
/// whole-day buckets, about 72 of them. Every front end asks for its timeline through this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineWindow {
    /// Start, µs since the epoch (inclusive).
    pub since: i64,
    /// End, µs since the epoch (exclusive).
    pub until: i64,
    /// Width of a bucket, µs.
    pub bucket_us: i64,
}

impl TimelineWindow {
    /// The window for a request, refused (at its `until` field) when it ends before it starts.
    pub fn new(since: Option<i64>, until: Option<i64>, now: i64) -> Result<Self> {
        let until = until.unwrap_or(now);
        let since = since.unwrap_or(until.saturating_sub(DEFAULT_SPAN_US));
        if until <= since {
            return Err(StoreError::InvalidQuery {
                field: "until",
                message: "the end of the range must be after its start".to_owned(),
            });
        }
        Ok(Self {
            since,
            until,
            bucket_us: bucket_for(until.saturating_sub(since)),
        })
    }

    /// How many buckets the window holds (the last may be cut short by its end).
    pub fn buckets(&self) -> usize {
        let span = self.until.saturating_sub(self.since);
        usize::try_from(span / self.bucket_us + i64::from(span % self.bucket_us != 0)).unwrap_or(0)
    }

    /// Where each bucket starts.
    pub fn starts(&self) -> Vec<i64> {
        (0..self.buckets() as i64)
            .map(|i| self.since + i * self.bucket_us)
            .collect()
    }
}

/// A bucket width giving about [`TARGET_BUCKETS`] buckets: whole hours or whole days.
fn bucket_for(span_us: i64) -> i64 {
    let ceil_to = |v: i64, unit: i64| (v / unit + i64::from(v % unit != 0)) * unit;
    let want = (span_us / TARGET_BUCKETS).max(1);
    if want <= DAY_US {
        ceil_to(want, HOUR_US)
    } else {
        ceil_to(want, DAY_US)
    }
}

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

/// Refuses a window that is empty, has no width, or would need more than [`MAX_BUCKETS`].
fn check(since: i64, until: i64, bucket_us: i64) -> Result<()> {
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
    Ok(())
}

dual! {
    pub(crate) async fn timeline(
        pool: &Pool,
        since: i64,
        until: i64,
        bucket_us: i64,
    ) -> Result<Vec<TimelineCell>> {
        check(since, until, bucket_us)?;
        let rows = sqlx::query(
            "SELECT tool, (started_at - $1) / $3 AS bucket, COUNT(*) AS calls, \
             COUNT(*) FILTER (WHERE status = $4) AS denied \
             FROM audit_log WHERE started_at >= $1 AND started_at < $2 \
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
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use tw_core::ToolStatus;

    #[test]
    fn buckets_are_whole_hours_or_days_and_about_seventy_two_of_them() {
        use super::{DAY_US, HOUR_US, bucket_for};
        assert_eq!(bucket_for(HOUR_US), HOUR_US);
        assert_eq!(bucket_for(3 * DAY_US), HOUR_US);
        assert_eq!(bucket_for(7 * DAY_US), 3 * HOUR_US);
        assert_eq!(bucket_for(30 * DAY_US), 10 * HOUR_US);
        assert_eq!(bucket_for(365 * DAY_US), 6 * DAY_US);
    }

    #[test]
    fn a_window_is_the_last_week_unless_given_and_must_end_after_it_starts() {
        use super::{DAY_US, HOUR_US, TimelineWindow};
        let now = 100 * DAY_US;
        let week = TimelineWindow::new(None, None, now).unwrap();
        assert_eq!(
            (week.since, week.until, week.bucket_us, week.buckets()),
            (93 * DAY_US, now, 3 * HOUR_US, 56)
        );
        let day = TimelineWindow::new(Some(now - DAY_US), None, now).unwrap();
        assert_eq!((day.bucket_us, day.buckets()), (HOUR_US, 24));
        assert_eq!(
            day.starts()[..2].to_vec(),
            vec![now - DAY_US, now - DAY_US + HOUR_US]
        );
        // An end given alone keeps a week before it.
        let before = TimelineWindow::new(None, Some(now - DAY_US), now).unwrap();
        assert_eq!(before.since, 92 * DAY_US);
        for (since, until) in [(Some(now), Some(now)), (Some(now + 1), None)] {
            let err = TimelineWindow::new(since, until, now).unwrap_err();
            assert!(
                matches!(err, crate::StoreError::InvalidQuery { field: "until", .. }),
                "{err}"
            );
        }
    }

    use super::*;
    use crate::backends_tests::{Place, on_both};
    use crate::tests::record;

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

    /// A window as given, unchecked: the store's own checks are what is tested.
    fn window(since: i64, until: i64, bucket_us: i64) -> super::TimelineWindow {
        super::TimelineWindow {
            since,
            until,
            bucket_us,
        }
    }

    on_both! {
    #[tokio::test]
    async fn calls_are_counted_per_tool_and_bucket_inside_the_window_only(backend: Backend) {
        let store = Place::new(backend).await.open().await;
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
        let got = store
            .timeline(&window(T0 + S, T0 + 20 * S, 10 * S))
            .await
            .unwrap();
        assert_eq!(
            got,
            vec![
                cell("echo", 0, 3, 2),
                cell("exec", 0, 1, 0),
                cell("exec", 1, 1, 0),
            ]
        );
        assert!(store.timeline(&window(T0, T0, S)).await.is_err());
        assert!(store.timeline(&window(T0, T0 + S, 0)).await.is_err());
        let too_many = store
            .timeline(&window(T0, T0 + (MAX_BUCKETS + 1) * S, S))
            .await;
        assert!(too_many.unwrap_err().to_string().contains("at most"));
        assert_eq!(
            store
                .timeline(&window(T0, T0 + MAX_BUCKETS * S, S))
                .await
                .unwrap()
                .len(),
            7
        );
        store.close().await;
    }
    }
}
