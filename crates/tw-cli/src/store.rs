//! `toolwarden store doctor`: the store's state at a glance, as the store reports it; and
//! `toolwarden store migrate`: a single-user store copied into a team store.

use tw_runtime::Runtime;

use crate::audit::time;
use crate::cli::StoreCommand;
use crate::out::{out, outln};
use crate::table::Table;

pub(crate) async fn run(rt: &Runtime, cmd: StoreCommand) -> anyhow::Result<u8> {
    match cmd {
        StoreCommand::Doctor { json } => doctor(rt, json).await,
        // Handled before a runtime opens (see `main`).
        StoreCommand::Migrate { from, to, json } => {
            let _ = (from, to, json);
            anyhow::bail!("store migrate runs without the configured store")
        }
    }
}

/// Copies `sqlite:PATH` into the team store at `to`, and prints what was copied.
pub(crate) async fn migrate(
    ctx: &crate::setup::Context,
    from: &str,
    to: &str,
    as_json: bool,
) -> anyhow::Result<u8> {
    let Some(path) = from.strip_prefix("sqlite:") else {
        anyhow::bail!("--from must be sqlite:PATH (got {from:?})");
    };
    tw_runtime::config::check_store_url(to).map_err(|m| anyhow::anyhow!("--to: {m}"))?;
    let path = match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => std::path::Path::new(&home).join(rest),
        _ => std::path::PathBuf::from(path),
    };
    let local = ctx.places.data_dir.join(tw_runtime::DATABASE_FILE);
    let report = tw_store::migrate_to_team_store(&path, to, &local).await?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(0);
    }
    let mut t = Table::new(&["TABLE", "ROWS"]);
    for (table, n) in &report.tables {
        t.row(vec![table.clone(), n.to_string()]);
    }
    out!("{}", t.render())?;
    outln!(
        "ok: {} audit records and {} admin entries copied and verified",
        report.verified.audit_records,
        report.verified.admin_entries
    )?;
    Ok(0)
}

/// Exits 1 if the store takes no records or runs another schema than this build's.
async fn doctor(rt: &Runtime, as_json: bool) -> anyhow::Result<u8> {
    let r = rt.store().doctor().await?;
    let code = u8::from(!r.ok());
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
        return Ok(code);
    }
    let mut t = Table::new(&["", ""]);
    let yes_no = |b: bool| if b { "yes" } else { "NO" }.to_owned();
    let rows = [
        ("backend", format!("{} at {}", r.backend, r.location)),
        (
            "size",
            format!(
                "{:.1} MiB ({} journal)",
                r.size_bytes as f64 / 1048576.0,
                r.journal_mode
            ),
        ),
        ("read latency", format!("{} µs", r.read_latency_us)),
        ("takes records", yes_no(r.writable)),
        (
            "schema",
            format!(
                "{} (this build: {})",
                r.schema_version, r.build_schema_version
            ),
        ),
        ("newest record", r.newest_record.to_string()),
        (
            "waiting to be indexed",
            format!("{} records in the tail", r.tail_records),
        ),
        (
            "text index",
            r.text_index.map_or_else(
                || "none (text searches read the log)".to_owned(),
                |s| {
                    format!(
                        "up to {} ({} behind)",
                        s.indexed_to,
                        s.newest - s.indexed_to
                    )
                },
            ),
        ),
        (
            "last checkpoint",
            r.last_checkpoint.map_or_else(
                || "none yet".to_owned(),
                |(at, head)| format!("{} (up to {head})", time(at)),
            ),
        ),
        ("not yet signed", format!("{} records", r.unsigned_records)),
        ("archives", r.archives.to_string()),
        (
            "signing key",
            r.public_key
                .unwrap_or_else(|| "none yet (made with the first checkpoint)".to_owned()),
        ),
    ];
    for (k, v) in rows {
        t.row(vec![k.to_owned(), v]);
    }
    out!("{}", t.render_rows())?;
    Ok(code)
}
