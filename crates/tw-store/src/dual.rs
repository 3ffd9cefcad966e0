//! One source for the SQL both backends run. The tables the policy engine shares (settings,
//! tools, switches, grants, confirmations, rate limits, tokens, pins, classifications, the admin
//! log) are read and written by the same statements on SQLite and on PostgreSQL: `dual!`
//! compiles a module's SQL functions twice, as its `sqlite` and `pg` submodules, each seeing
//! `Db`, `Conn`, `Pool` and `DbRow` as its backend's types and `PG` as which one it is. The
//! statements use `$1`-style parameters (both drivers take them) and standard SQL; the few
//! places the engines differ test `PG`.

/// Compiles the items given once per backend, as submodules `sqlite` and `pg` of the module it
/// is used in. Inside, `on::<module>` names a sibling module's functions on the same backend.
macro_rules! dual {
    ($($item:item)*) => {
        pub(crate) mod sqlite {
            #![allow(unused_imports, dead_code, clippy::allow_attributes)]
            use super::*;
            use sqlx::Row as _;
            use crate::dual::on::sqlite as on;
            use crate::dual::KeyLock as _;
            pub(crate) type Db = sqlx::Sqlite;
            pub(crate) type Conn = sqlx::SqliteConnection;
            pub(crate) type Pool = sqlx::SqlitePool;
            pub(crate) type DbRow = sqlx::sqlite::SqliteRow;
            pub(crate) const PG: bool = false;
            $($item)*
        }
        pub(crate) mod pg {
            #![allow(unused_imports, dead_code, clippy::allow_attributes)]
            use super::*;
            use sqlx::Row as _;
            use crate::dual::on::pg as on;
            use crate::dual::KeyLock as _;
            pub(crate) type Db = sqlx::Postgres;
            pub(crate) type Conn = sqlx::PgConnection;
            pub(crate) type Pool = sqlx::PgPool;
            pub(crate) type DbRow = sqlx::postgres::PgRow;
            pub(crate) const PG: bool = true;
            $($item)*
        }
    };
}

/// Each backend's view of the dual modules, for calls from one to another.
pub(crate) mod on {
    /// The SQLite side.
    pub(crate) mod sqlite {
        pub(crate) use crate::admin::sqlite as admin;
        pub(crate) use crate::grants::sqlite as grants;
        pub(crate) use crate::record::sqlite as record;
    }
    /// The PostgreSQL side.
    pub(crate) mod pg {
        pub(crate) use crate::admin::pg as admin;
        pub(crate) use crate::grants::pg as grants;
        pub(crate) use crate::record::pg as record;
    }
}

/// A lock held to the end of the current transaction, on a name (a rate-limit key, the admin
/// log's head). SQLite's write transactions are serialized by the file already, so there it
/// takes nothing; PostgreSQL's run side by side, so there it is an advisory lock.
pub(crate) trait KeyLock {
    async fn lock_key(&mut self, key: &str) -> crate::Result<()>;
}

impl KeyLock for sqlx::SqliteConnection {
    async fn lock_key(&mut self, _key: &str) -> crate::Result<()> {
        Ok(())
    }
}

impl KeyLock for sqlx::PgConnection {
    async fn lock_key(&mut self, key: &str) -> crate::Result<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(key.to_owned())
            .execute(&mut *self)
            .await?;
        Ok(())
    }
}
