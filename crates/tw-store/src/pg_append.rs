//! The team store's audit append, with group commit: a record that arrives while another
//! commit is under way waits in a queue, and whoever takes the chain next writes everything
//! queued as one multi-row INSERT, one commit (with `fsync` on, the commit is the cost). The
//! links are computed in queue order from the chain's head, so the batch is a run of the chain.
//!
//! If the batch is refused as a whole (one record's execution id is taken, say), its records go
//! in one at a time, so each caller gets its own answer and no record fails for another's fault.

use std::sync::Arc;

use sqlx::QueryBuilder;
use tokio::sync::oneshot;

use crate::chain;
use crate::error::{Result, StoreError};
use crate::pg::PgStore;
use crate::pg_chain::Held;
use crate::record::Encoded;

/// Most records one statement writes (PostgreSQL takes at most 65,535 parameters; a record
/// binds 26).
const MAX_BATCH: usize = 1000;

/// A record waiting for its commit, and where its answer goes.
pub(crate) struct Pending {
    e: Encoded,
    size: i64,
    answer: oneshot::Sender<Result<i64>>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("execution_id", &self.e.record.execution_id)
            .finish_non_exhaustive()
    }
}

/// Queues `e` and commits whatever is queued once the chain is free; returns `e`'s id. The
/// commit runs on a task of its own: a caller that goes away midway (its call cancelled) cannot
/// cut a commit short and leave the chain's head behind what was written.
pub(crate) async fn append(store: &Arc<PgStore>, e: Encoded, size: i64) -> Result<i64> {
    let (answer, answered) = oneshot::channel();
    lock(store).push(Pending { e, size, answer });
    let store = Arc::clone(store);
    tokio::spawn(async move {
        let mut guard = store.head.lock().await;
        loop {
            let batch: Vec<Pending> = {
                let mut queue = lock(&store);
                let n = queue.len().min(MAX_BATCH);
                queue.drain(..n).collect()
            };
            if batch.is_empty() {
                break;
            }
            commit(&store, &mut guard, batch).await;
        }
    });
    answered.await.map_err(|_| StoreError::WriterClosed)?
}

fn lock(store: &PgStore) -> std::sync::MutexGuard<'_, Vec<Pending>> {
    store
        .queue
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether an insert was refused because another writer took this one's next place in its
/// chain (it lost the chain's lock).
pub(crate) fn lost_chain(e: &StoreError) -> bool {
    matches!(e, StoreError::Sqlx(sqlx::Error::Database(d))
        if d.constraint() == Some("audit_log_chain_seq_key"))
}

async fn commit(store: &PgStore, guard: &mut Option<Held>, batch: Vec<Pending>) {
    if batch.len() > 1 {
        match insert_batch(store, guard, &batch).await {
            Ok(ids) => {
                for (p, id) in batch.into_iter().zip(ids) {
                    let _ = p.answer.send(Ok(id));
                }
                return;
            }
            // The database is out of reach: every record in the batch is refused as such.
            Err(e @ StoreError::Unreachable { .. }) => {
                for p in batch {
                    let _ = p.answer.send(Err(copy(&e)));
                }
                return;
            }
            Err(e) if lost_chain(&e) => {
                if let Err(e) = store.reclaim(guard).await {
                    for p in batch {
                        let _ = p.answer.send(Err(copy(&e)));
                    }
                    return;
                }
            }
            // Refused as a whole: one at a time below.
            Err(_) => {}
        }
    }
    for p in batch {
        let done = store.append_one(guard, &p.e, p.size).await;
        let _ = p.answer.send(done);
    }
}

/// Writes the batch as one statement, linked from the chain's head; the ids in batch order.
async fn insert_batch(
    store: &PgStore,
    guard: &mut Option<Held>,
    batch: &[Pending],
) -> Result<Vec<i64>> {
    let held = guard.as_mut().ok_or(StoreError::WriterClosed)?;
    let (mut seq, mut prev) = (held.seq, held.hash);
    let mut links = Vec::with_capacity(batch.len());
    for p in batch {
        let hash = chain::audit_link(&prev, &p.e, p.size);
        seq += 1;
        links.push((seq, prev, hash));
        prev = hash;
    }
    let mut qb = QueryBuilder::new(
        "INSERT INTO audit_log (chain, seq, execution_id, trace_id, tool, agent_id, skill, \
         user_id, arguments, decision, explanation, status, error_code, error_message, output, \
         output_sha256, output_bytes, truncated, started_at, completed_at, duration_us, metadata, \
         violation_type, violation_severity, prev, hash) ",
    );
    qb.push_values(batch.iter().zip(&links), |mut b, (p, (seq, prev, hash))| {
        let (e, r) = (&p.e, &p.e.record);
        b.push_bind(held.name.clone())
            .push_bind(*seq)
            .push_bind(r.execution_id.clone())
            .push_bind(r.trace_id.clone())
            .push_bind(r.tool.clone())
            .push_bind(r.agent_id.clone())
            .push_bind(r.skill.clone())
            .push_bind(r.user_id.clone())
            .push_bind(e.arguments.clone())
            .push_bind(r.decision.clone())
            .push_bind(e.explanation().map(str::to_owned))
            .push_bind(r.status.as_str())
            .push_bind(r.error_code.clone())
            .push_bind(r.error_message.clone())
            .push_bind(e.output.clone())
            .push_bind(e.output_sha256.clone())
            .push_bind(p.size)
            .push_bind(i64::from(r.truncated))
            .push_bind(r.started_at)
            .push_bind(r.completed_at)
            .push_bind(r.duration_us)
            .push_bind(e.metadata().to_owned())
            .push_bind(r.violation.as_ref().map(|v| v.kind.clone()))
            .push_bind(r.violation.as_ref().map(|v| v.severity.as_str()))
            .push_bind(prev.to_vec())
            .push_bind(hash.to_vec());
    });
    qb.push(" RETURNING seq, id");
    let rows: std::result::Result<Vec<(i64, i64)>, sqlx::Error> =
        qb.build_query_as().fetch_all(&store.pool).await;
    let mut rows = store.note(rows.map_err(StoreError::Sqlx))?;
    // RETURNING's order is not promised: each id is matched to its record by its seq.
    rows.sort_unstable();
    if rows.len() != batch.len() {
        return Err(StoreError::Database(format!(
            "{} ids came back for {} records",
            rows.len(),
            batch.len()
        )));
    }
    store
        .commits
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (last_seq, _, last_hash) = links[links.len() - 1];
    (held.seq, held.hash) = (last_seq, last_hash);
    Ok(rows.into_iter().map(|(_, id)| id).collect())
}

/// The same error again, for each record of a batch it refused.
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unreachable { url, cause } => StoreError::Unreachable {
            url: url.clone(),
            cause: cause.clone(),
        },
        StoreError::WriterClosed => StoreError::WriterClosed,
        other => StoreError::WriteFailed(other.to_string()),
    }
}
