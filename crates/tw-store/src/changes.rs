//! The change counters (migration 0008): how many times each table that every runtime follows
//! has been written. A runtime polls these few rows once a second and re-reads only the tables
//! whose counter moved, so a change made by another process (the CLI switching the mode, the
//! desktop app adding a custom tool) reaches it within a second for the cost of one small query.

use std::collections::BTreeMap;

use crate::error::Result;

/// The tables with a counter, as named in [`ChangeCounters`].
pub const WATCHED_TABLES: [&str; 6] = [
    "settings",
    "tool_switches",
    "skill_overrides",
    "tool_classifications",
    "custom_tools",
    "upstream_pins",
];

/// Each watched table's counter, by table name.
pub type ChangeCounters = BTreeMap<String, i64>;

dual! {
    pub(crate) async fn read(pool: &Pool) -> Result<ChangeCounters> {
        let rows: Vec<(String, i64)> = sqlx::query_as("SELECT name, counter FROM change_counters")
            .fetch_all(pool)
            .await?;
        Ok(rows.into_iter().collect())
    }
}
