//! Chain runs: one row per run of a tool chain, with its input, its output and every step's
//! status and timing. The steps' own calls are audit rows (their metadata names the run), read
//! back here through the `chain_run_id` column the schema computes from that metadata.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::QueryBuilder;

use crate::codec;
use crate::error::{Result, StoreError};
use crate::record::{AuditRow, COLUMNS as AUDIT_COLUMNS};

/// A run as it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewChainRun {
    /// The run's id: the execution id of the chain tool's call.
    pub id: String,
    /// The chain's name.
    pub chain: String,
    /// The trace the run and its steps share.
    pub trace_id: String,
    /// Who called it.
    pub agent_id: String,
    /// The skill it runs under.
    pub skill: Option<String>,
    /// The person behind the agent.
    pub user_id: Option<String>,
    /// Its input (redacted).
    pub input: Value,
    /// Every step, pending.
    pub steps: Value,
    /// When it started (µs since the epoch).
    pub started_at: i64,
    /// The process running it (see migration 0011), so a crash can be told from a live run.
    #[serde(default)]
    pub owner: Option<String>,
}

/// A run the store holds as running, as a runtime checks whether its process still lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningChainRun {
    /// The run's id.
    pub id: String,
    /// The process running it; `None` for runs written before owners were recorded.
    pub owner: Option<String>,
    /// Each step's state as last written.
    pub steps: Value,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainRunEnd {
    /// `completed`, `failed`, `cancelled`, `timeout`, or `interrupted` (its process ended first).
    pub status: String,
    /// What it returned.
    pub output: Option<Value>,
    /// Why it did not complete.
    pub error: Option<String>,
    /// Every step's final state.
    pub steps: Value,
    /// When it ended.
    pub completed_at: i64,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainRunRow {
    /// The run's id (the chain call's execution id).
    pub id: String,
    /// The chain's name.
    pub chain: String,
    /// The trace the run and its steps share.
    pub trace_id: String,
    /// Who called it.
    pub agent_id: String,
    /// The skill it ran under.
    pub skill: Option<String>,
    /// The person behind the agent.
    pub user_id: Option<String>,
    /// `running`, `completed`, `failed`, `cancelled`, `timeout` or `interrupted`.
    pub status: String,
    /// Its input.
    pub input: Value,
    /// What it returned.
    pub output: Option<Value>,
    /// Why it did not complete.
    pub error: Option<String>,
    /// Each step: `{id, status, started_at, completed_at, attempts, execution_ids, error}`.
    pub steps: Value,
    /// When it started (µs since the epoch).
    pub started_at: i64,
    /// When it ended.
    pub completed_at: Option<i64>,
}

/// Which runs to list: newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChainRunQuery {
    /// Only runs of this chain.
    pub chain: Option<String>,
    /// Only runs that ended (or are) this way.
    pub status: Option<String>,
    /// At most this many (1 to 1000; 50 when absent).
    pub limit: Option<u32>,
}

const COLUMNS: &str = "id, chain, trace_id, agent_id, skill, user_id, status, input, output, \
     error, steps, started_at, completed_at";

/// Records a run as started: on the store file's rusqlite connection, in place
/// (`Writer::write_in_place`).
pub(crate) fn start(conn: &rusqlite::Connection, run: &NewChainRun) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO chain_runs (id, chain, trace_id, agent_id, skill, user_id, status, input, \
         steps, started_at, owner) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)",
    )?
    .execute(rusqlite::params![
        run.id,
        run.chain,
        run.trace_id,
        run.agent_id,
        run.skill,
        run.user_id,
        run.input.to_string(),
        run.steps.to_string(),
        run.started_at,
        run.owner,
    ])?;
    Ok(())
}

/// Whether `end` says how a run ends.
pub(crate) fn check_end(end: &ChainRunEnd) -> Result<()> {
    if !matches!(
        end.status.as_str(),
        "completed" | "failed" | "cancelled" | "timeout" | "interrupted"
    ) {
        return Err(StoreError::InvalidQuery {
            field: "status",
            message: format!("{:?} is not how a run ends", end.status),
        });
    }
    Ok(())
}

/// Records how a run ended (see [`check_end`]), on the store file's rusqlite connection in
/// place; false if it was not running.
pub(crate) fn finish(
    conn: &rusqlite::Connection,
    id: &str,
    end: &ChainRunEnd,
) -> rusqlite::Result<bool> {
    let done = conn
        .prepare_cached(
            "UPDATE chain_runs SET status = ?, output = ?, error = ?, steps = ?, completed_at = ? \
             WHERE id = ? AND status = 'running'",
        )?
        .execute(rusqlite::params![
            end.status,
            end.output.as_ref().map(Value::to_string),
            end.error,
            end.steps.to_string(),
            end.completed_at,
            id,
        ])?;
    Ok(done == 1)
}

dual! {
    /// Records a run as started, on PostgreSQL (SQLite writes it in place: [`start`]).
    pub(crate) async fn start_run(conn: &mut Conn, run: &NewChainRun) -> Result<()> {
        sqlx::query(
            "INSERT INTO chain_runs (id, chain, trace_id, agent_id, skill, user_id, status, \
             input, steps, started_at, owner) \
             VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8, $9, $10)",
        )
        .bind(run.id.clone())
        .bind(run.chain.clone())
        .bind(run.trace_id.clone())
        .bind(run.agent_id.clone())
        .bind(run.skill.clone())
        .bind(run.user_id.clone())
        .bind(run.input.to_string())
        .bind(run.steps.to_string())
        .bind(run.started_at)
        .bind(run.owner.clone())
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Records how a run ended, on PostgreSQL (SQLite: [`finish`]); false if it was not running.
    pub(crate) async fn finish_run(conn: &mut Conn, id: &str, end: &ChainRunEnd) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE chain_runs SET status = $1, output = $2, error = $3, steps = $4, \
             completed_at = $5 WHERE id = $6 AND status = 'running'",
        )
        .bind(end.status.clone())
        .bind(end.output.as_ref().map(Value::to_string))
        .bind(end.error.clone())
        .bind(end.steps.to_string())
        .bind(end.completed_at)
        .bind(id.to_owned())
        .execute(&mut *conn)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub(crate) async fn get(pool: &Pool, id: &str) -> Result<Option<ChainRunRow>> {
        let mut qb =
            QueryBuilder::<Db>::new(format!("SELECT {COLUMNS} FROM chain_runs WHERE id = "));
        qb.push_bind(id.to_owned());
        let row = qb.build().fetch_optional(pool).await?;
        row.as_ref().map(decode).transpose()
    }

    pub(crate) async fn list(pool: &Pool, q: &ChainRunQuery) -> Result<Vec<ChainRunRow>> {
        let mut qb =
            QueryBuilder::<Db>::new(format!("SELECT {COLUMNS} FROM chain_runs WHERE 1 = 1"));
        if let Some(chain) = &q.chain {
            qb.push(" AND chain = ").push_bind(chain.clone());
        }
        if let Some(status) = &q.status {
            qb.push(" AND status = ").push_bind(status.clone());
        }
        qb.push(" ORDER BY started_at DESC, id LIMIT ")
            .push_bind(i64::from(q.limit.unwrap_or(50).clamp(1, 1000)));
        qb.build()
            .fetch_all(pool)
            .await?
            .iter()
            .map(decode)
            .collect()
    }

    /// Every run held as running, with its owner.
    pub(crate) async fn running(pool: &Pool) -> Result<Vec<RunningChainRun>> {
        let rows = sqlx::query("SELECT id, owner, steps FROM chain_runs WHERE status = 'running'")
            .fetch_all(pool)
            .await?;
        rows.iter()
            .map(|row| {
                let id: String = row.try_get("id")?;
                let steps: String = row.try_get("steps")?;
                Ok(RunningChainRun {
                    steps: codec::json(|| format!("chain run {id}, column steps"), &steps)?,
                    owner: row.try_get("owner")?,
                    id,
                })
            })
            .collect()
    }

    /// The audit rows of a run's steps, in the order they were written.
    pub(crate) async fn step_rows(pool: &Pool, run_id: &str) -> Result<Vec<AuditRow>> {
        let mut qb = QueryBuilder::<Db>::new(format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE chain_run_id = "
        ));
        qb.push_bind(run_id.to_owned()).push(" ORDER BY id");
        qb.build()
            .fetch_all(pool)
            .await?
            .iter()
            .map(on::record::decode_row)
            .collect()
    }

    fn decode(row: &DbRow) -> Result<ChainRunRow> {
        let id: String = row.try_get("id")?;
        let what = |column: &str| format!("chain run {id}, column {column}");
        let input: String = row.try_get("input")?;
        let output: Option<String> = row.try_get("output")?;
        let steps: String = row.try_get("steps")?;
        Ok(ChainRunRow {
            chain: row.try_get("chain")?,
            trace_id: row.try_get("trace_id")?,
            agent_id: row.try_get("agent_id")?,
            skill: row.try_get("skill")?,
            user_id: row.try_get("user_id")?,
            status: row.try_get("status")?,
            input: codec::json(|| what("input"), &input)?,
            output: output
                .map(|t| codec::json(|| what("output"), &t))
                .transpose()?,
            error: row.try_get("error")?,
            steps: codec::json(|| what("steps"), &steps)?,
            started_at: row.try_get("started_at")?,
            completed_at: row.try_get("completed_at")?,
            id,
        })
    }
}
