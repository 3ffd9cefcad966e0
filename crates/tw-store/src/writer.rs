//! Group commit: one task owns the write connection, drains whatever appends are queued (up to a
//! batch), writes them as one multi-row INSERT and only then answers each caller. Under load many
//! calls share one commit; alone, a call pays for one small commit.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sqlx::sqlite::SqliteConnection;
use sqlx::{Connection as _, QueryBuilder, Row as _, Sqlite};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Result, StoreError};
use crate::record::Encoded;

/// Work for the writer.
pub(crate) enum Job {
    /// Append a record; answer with its id once it is committed.
    Append(Box<Encoded>, oneshot::Sender<Result<i64>>),
    /// Stop taking work, finish what is queued, close the connection.
    Close,
}

/// State the writer shares with [`crate::Store`].
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// False after a write failed for a reason other than the record itself, until one succeeds.
    pub(crate) healthy: AtomicBool,
    /// False once the writer has exited.
    pub(crate) running: AtomicBool,
    /// Commits made so far.
    pub(crate) batches: AtomicU64,
}

/// The writer task's body.
pub(crate) async fn run(
    mut conn: SqliteConnection,
    mut rx: mpsc::Receiver<Job>,
    max_batch: usize,
    shared: Arc<Shared>,
) {
    let mut jobs = Vec::with_capacity(max_batch);
    loop {
        if rx.recv_many(&mut jobs, max_batch).await == 0 {
            break;
        }
        let mut batch = Vec::with_capacity(jobs.len());
        for job in jobs.drain(..) {
            match job {
                Job::Append(record, reply) => batch.push((record, reply)),
                // Refuse new work; what is already queued is still written below.
                Job::Close => rx.close(),
            }
        }
        if !batch.is_empty() {
            commit(&mut conn, batch, &shared).await;
        }
    }
    shared.running.store(false, Ordering::Release);
    shared.healthy.store(false, Ordering::Release);
    if let Err(e) = conn.close().await {
        tracing::warn!(error = %e, "closing the audit writer's connection failed");
    }
}

type Pending = (Box<Encoded>, oneshot::Sender<Result<i64>>);

async fn commit(conn: &mut SqliteConnection, batch: Vec<Pending>, shared: &Shared) {
    let records: Vec<&Encoded> = batch.iter().map(|(r, _)| r.as_ref()).collect();
    match insert(conn, &records).await {
        Ok(ids) => {
            shared.healthy.store(true, Ordering::Release);
            shared.batches.fetch_add(1, Ordering::Relaxed);
            for ((record, reply), id) in batch.into_iter().zip(ids) {
                let answer = id.ok_or_else(|| StoreError::Corrupt {
                    what: format!("audit record {}", record.record.execution_id),
                    message: "the database did not return its id".to_owned(),
                });
                let _ = reply.send(answer);
            }
        }
        Err(e) if batch.len() > 1 && is_record_fault(&e) => {
            // One bad record (say, a repeated execution id) must not sink the others: write them
            // one at a time so each caller hears about its own record only.
            for (record, reply) in batch {
                let answer = match insert(conn, &[record.as_ref()]).await {
                    Ok(ids) => {
                        shared.healthy.store(true, Ordering::Release);
                        shared.batches.fetch_add(1, Ordering::Relaxed);
                        ids.into_iter()
                            .next()
                            .flatten()
                            .ok_or(StoreError::WriterClosed)
                    }
                    Err(e) => Err(e),
                };
                let _ = reply.send(answer);
            }
        }
        Err(e) => {
            if !is_record_fault(&e) {
                shared.healthy.store(false, Ordering::Release);
            }
            tracing::error!(error = %e, records = batch.len(), "audit records could not be written");
            let message = e.to_string();
            for (_, reply) in batch {
                let _ = reply.send(Err(StoreError::WriteFailed(message.clone())));
            }
        }
    }
}

/// Whether an error is caused by the record rather than by the database being unusable.
fn is_record_fault(e: &StoreError) -> bool {
    match e {
        StoreError::Sqlx(sqlx::Error::Database(db)) => {
            !matches!(db.kind(), sqlx::error::ErrorKind::Other)
        }
        StoreError::Encode { .. } => true,
        _ => false,
    }
}

fn int(what: &str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| StoreError::Encode {
        what: what.to_owned(),
        message: format!("{v} does not fit in a signed 64-bit integer"),
    })
}

/// Inserts `records` in one statement; returns each record's id, in order.
async fn insert(conn: &mut SqliteConnection, records: &[&Encoded]) -> Result<Vec<Option<i64>>> {
    let mut sizes = Vec::with_capacity(records.len());
    for r in records {
        sizes.push(int("output_bytes", r.record.output_bytes)?);
    }
    let mut qb = QueryBuilder::<Sqlite>::new(
        "INSERT INTO audit_log (execution_id, trace_id, tool, agent_id, skill, user_id, arguments, \
         decision, explanation, status, error_code, error_message, output, output_sha256, \
         output_bytes, truncated, started_at, completed_at, duration_us, metadata) ",
    );
    qb.push_values(records.iter().zip(&sizes), |mut b, (e, size)| {
        let r = &e.record;
        b.push_bind(r.execution_id.clone())
            .push_bind(r.trace_id.clone())
            .push_bind(r.tool.clone())
            .push_bind(r.agent_id.clone())
            .push_bind(r.skill.clone())
            .push_bind(r.user_id.clone())
            .push_bind(e.arguments.clone())
            .push_bind(r.decision.clone())
            .push_bind(e.explanation.clone())
            .push_bind(r.status.as_str())
            .push_bind(r.error_code.clone())
            .push_bind(r.error_message.clone())
            .push_bind(e.output.clone())
            .push_bind(e.output_sha256.clone())
            .push_bind(*size)
            .push_bind(r.truncated)
            .push_bind(r.started_at)
            .push_bind(r.completed_at)
            .push_bind(r.duration_us)
            .push_bind(e.metadata.clone());
    });
    qb.push(" RETURNING id, execution_id");
    let rows = qb.build().fetch_all(&mut *conn).await?;
    // SQLite does not promise RETURNING rows in VALUES order, so match them by execution id.
    let mut ids = HashMap::with_capacity(rows.len());
    for row in &rows {
        let id: i64 = row.try_get(0)?;
        let execution_id: String = row.try_get(1)?;
        ids.insert(execution_id, id);
    }
    Ok(records
        .iter()
        .map(|r| ids.get(&r.record.execution_id).copied())
        .collect())
}
