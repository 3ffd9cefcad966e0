//! The runtime's own tests on a team store, when the suite asks for one
//! (`TOOLWARDEN_TEST_STORE=postgres`, scripts/test's second pass): every data directory a test
//! opens a runtime on gets a fresh database on the throwaway PostgreSQL cluster, the same one
//! each time it is opened again (a second "process" on the same installation). Test builds only.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

/// The team store `data_dir`'s runtimes use in this run, or `None` on SQLite.
pub(crate) async fn url_for(data_dir: &Path) -> Option<String> {
    static DATABASES: LazyLock<Mutex<HashMap<PathBuf, String>>> = LazyLock::new(Default::default);
    if !tw_store::testing::on_team_store() {
        return None;
    }
    if let Some(url) = DATABASES.lock().unwrap().get(data_dir) {
        return Some(url.clone());
    }
    let url = tw_store::testing::suite_database().await?;
    Some(
        DATABASES
            .lock()
            .unwrap()
            .entry(data_dir.to_owned())
            .or_insert(url)
            .clone(),
    )
}
