//! The team's live channel: how replicas on one team store show each other the calls they run
//! (`/api/v1/events` and the desktop's live view on any replica). The store carries the
//! messages; what they say is the runtime's (`tw_runtime::team`).
//!
//! Messages travel by NOTIFY on `toolwarden_events`, so nothing is written for them, they arrive
//! in the order they were sent, and each costs one statement per batch. Which replicas have
//! someone watching is a row each in `live_watchers`, renewed while they watch and expiring by
//! itself when a replica dies, so a replica that opens knows at once whether to send anything:
//! a team nobody watches sends nothing.

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::error::{Result, StoreError};
use crate::pg::PgStore;

/// The longest message: PostgreSQL refuses NOTIFY payloads of 8,000 bytes or more.
pub const MAX_MESSAGE: usize = 7900;

/// The channel the messages travel on.
pub(crate) const CHANNEL: &str = "toolwarden_events";

/// One replica's end of the team's live channel.
#[derive(Debug, Clone)]
pub struct TeamChannel {
    pub(crate) store: Arc<PgStore>,
}

impl TeamChannel {
    /// This replica's name on the team: its host and process id.
    pub fn replica(&self) -> &str {
        &self.store.replica
    }

    /// Every message sent on the channel from now on, this replica's own included, in the order
    /// they were sent. A receiver that falls behind is told how many it missed.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<str>> {
        self.store.live.subscribe()
    }

    /// Sends `messages`, in order, in one statement. Each must be at most [`MAX_MESSAGE`] bytes.
    pub async fn send(&self, messages: &[String]) -> Result<()> {
        if let Some(long) = messages.iter().find(|m| m.len() > MAX_MESSAGE) {
            return Err(StoreError::Invalid {
                what: "live message".to_owned(),
                message: format!(
                    "{} bytes; PostgreSQL carries at most {MAX_MESSAGE}",
                    long.len()
                ),
            });
        }
        if messages.is_empty() {
            return Ok(());
        }
        self.store
            .read(async |pool| {
                sqlx::query(
                    "SELECT pg_notify($1, m) FROM unnest($2::text[]) WITH ORDINALITY AS t(m, n) \
                     ORDER BY n",
                )
                .bind(CHANNEL)
                .bind(messages)
                .execute(pool)
                .await?;
                Ok(())
            })
            .await
    }

    /// Says that someone on this replica watches every call until `until` (µs since the epoch),
    /// or, with `None`, that nobody does any more.
    pub async fn set_watching(&self, until: Option<i64>) -> Result<()> {
        let replica = &self.store.replica;
        self.store
            .read(async |pool| {
                match until {
                    Some(until) => {
                        sqlx::query(
                            "INSERT INTO live_watchers (replica, until) VALUES ($1, $2) \
                             ON CONFLICT (replica) DO UPDATE SET until = excluded.until",
                        )
                        .bind(replica)
                        .bind(until)
                        .execute(pool)
                        .await?
                    }
                    None => {
                        sqlx::query("DELETE FROM live_watchers WHERE replica = $1")
                            .bind(replica)
                            .execute(pool)
                            .await?
                    }
                };
                Ok(())
            })
            .await
    }

    /// The other replicas someone watches at `now` (µs since the epoch), and until when.
    pub async fn watchers(&self, now: i64) -> Result<Vec<(String, i64)>> {
        let replica = &self.store.replica;
        self.store
            .read(async |pool| {
                let rows: Vec<(String, i64)> = sqlx::query_as(
                    "SELECT replica, until FROM live_watchers \
                     WHERE until > $1 AND replica <> $2 ORDER BY replica",
                )
                .bind(now)
                .bind(replica)
                .fetch_all(pool)
                .await?;
                Ok(rows)
            })
            .await
    }
}
