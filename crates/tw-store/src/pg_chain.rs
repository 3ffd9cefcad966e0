//! Which audit chain a team-store writer appends to. A writer holds its chain through a
//! session-level advisory lock on a connection of its own, for as long as it is open; a writer
//! that opens adopts the oldest chain nobody holds (a replica that restarted, a CLI call that
//! ended) and goes on from its head, and only names a new chain when every one is held. So the
//! chains number at most the writers that were ever open at once, not every process that ever
//! wrote, and each checkpoint stays small.
//!
//! If the lock is lost (the database restarted under the writer), another writer may adopt the
//! chain meanwhile; the `UNIQUE (chain, seq)` constraint then refuses the second record at a
//! seq, and the writer that lost claims a chain again before it retries. A chain never forks.
//! Nor does it restart when retention archived and removed every record it had: it goes on
//! from where its archived part ends.

use sqlx::{Connection as _, PgConnection, PgPool, Row as _};

use crate::chain::GENESIS;
use crate::error::Result;

/// A chain held by this writer, and its head.
#[derive(Debug)]
pub(crate) struct Held {
    /// The connection whose session holds the chain's lock.
    owner: PgConnection,
    pub(crate) name: String,
    pub(crate) seq: i64,
    pub(crate) hash: [u8; 32],
}

/// Claims a chain: the oldest one free, or a new one named after this host and process.
pub(crate) async fn claim(pool: &PgPool, host: &str, salt: u64) -> Result<Held> {
    let mut owner = pool.acquire().await?.detach();
    let names: Vec<String> =
        sqlx::query_scalar("SELECT chain FROM audit_chains ORDER BY started_at, chain")
            .fetch_all(&mut owner)
            .await?;
    for name in names {
        if try_lock(&mut owner, &name).await? {
            // Its newest record, or where its archived part ends if every record left was
            // archived.
            let head = sqlx::query(
                "(SELECT seq, hash FROM audit_log WHERE chain = $1 ORDER BY seq DESC LIMIT 1) \
                 UNION ALL (SELECT last_seq, last_hash FROM audit_archive_chains \
                 WHERE chain = $1 ORDER BY last_seq DESC LIMIT 1) ORDER BY 1 DESC LIMIT 1",
            )
            .bind(&name)
            .fetch_optional(&mut owner)
            .await?;
            let (seq, hash) = match head {
                Some(r) => (
                    r.try_get::<i64, _>(0)?,
                    crate::pg_verify::hash32(r.try_get(1)?)?,
                ),
                None => (0, GENESIS),
            };
            return Ok(Held {
                owner,
                name,
                seq,
                hash,
            });
        }
    }
    let name = format!("{host}-{}-{salt:016x}", std::process::id());
    sqlx::query("INSERT INTO audit_chains (chain, started_at, host) VALUES ($1, $2, $3)")
        .bind(&name)
        .bind(crate::checkpoint::now_us())
        .bind(host)
        .execute(&mut owner)
        .await?;
    // A name nobody else has: the lock is free.
    try_lock(&mut owner, &name).await?;
    Ok(Held {
        owner,
        name,
        seq: 0,
        hash: GENESIS,
    })
}

async fn try_lock(conn: &mut PgConnection, chain: &str) -> Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
            .bind(format!("toolwarden chain {chain}"))
            .fetch_one(&mut *conn)
            .await?,
    )
}

impl Held {
    /// Lets the chain go (its lock with its connection).
    pub(crate) async fn release(self) {
        let _ = self.owner.close().await;
    }
}
