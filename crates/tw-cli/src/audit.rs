//! `toolwarden audit ...`: page through, inspect, export and summarize the audit log.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, anyhow, bail};
use tokio::io::AsyncWriteExt;
use tw_runtime::Runtime;
use tw_store::{AuditExportFormat, AuditPage, AuditQuery, AuditRow, UsageRow};

use crate::cli::{AuditCommand, AuditFilter, ExportFormat};
use crate::out::{errln, out, outln};
use crate::table::Table;

pub(crate) async fn run(rt: &Runtime, cmd: AuditCommand) -> anyhow::Result<u8> {
    match cmd {
        AuditCommand::List {
            filter,
            limit,
            cursor,
            json,
        } => list(rt, &filter, limit, cursor, json).await,
        AuditCommand::Show { execution_id } => show(rt, &execution_id).await,
        AuditCommand::Export {
            filter,
            format,
            output,
        } => export(rt, &filter, format, output.as_deref()).await,
        AuditCommand::Changes {
            since,
            kind,
            limit,
            json,
        } => changes(rt, since.as_deref(), kind, limit, json).await,
        AuditCommand::Report { filter, json } => report(rt, &filter, json).await,
        AuditCommand::Verify {
            archive: Some(file),
            json,
            ..
        } => verify_archive(&file, json),
        AuditCommand::Verify {
            from_checkpoint,
            json,
            archive: None,
        } => verify(rt, &from_checkpoint, json).await,
        AuditCommand::Archive { before, output } => archive(rt, &before, &output).await,
        AuditCommand::Checkpoint => checkpoint(rt).await,
    }
}

async fn verify(rt: &Runtime, saved: &[std::path::PathBuf], as_json: bool) -> anyhow::Result<u8> {
    let mut checkpoints = Vec::new();
    for path in saved {
        checkpoints
            .extend(tw_store::read_checkpoints(path).map_err(tw_runtime::RuntimeError::from)?);
    }
    let report = rt.store().verify(checkpoints).await?;
    let code = u8::from(!report.ok());
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(code);
    }
    let head = |h: &Option<tw_store::Head>| {
        h.as_ref()
            .map_or_else(|| "empty".to_owned(), |h| format!("up to {}", h.id))
    };
    outln!(
        "audit log: {} records ({}); admin log: {} entries ({}); {} checkpoints read",
        report.audit_records,
        head(&report.audit_head),
        report.admin_entries,
        head(&report.admin_head),
        report.checkpoints
    )?;
    match &report.latest_checkpoint {
        Some(c) => outln!(
            "newest checkpoint the logs still match: {} (audit up to {}); {} records after it are chained, not signed yet",
            time(c.created_at),
            c.audit_head_id,
            report.audit_uncovered
        )?,
        None => {
            outln!("no checkpoint covers the log yet (`toolwarden audit checkpoint` makes one)")?
        }
    }
    if report.ok() {
        outln!("ok: every record, output and checkpoint verifies")?;
        return Ok(0);
    }
    outln!("TAMPERED: {} problems", report.problem_count)?;
    for p in &report.problems {
        let at = p.id.map_or_else(String::new, |id| format!(" {id}"));
        outln!("  {}{at}: {:?}: {}", p.log, p.kind, p.message)?;
    }
    if report.problem_count > report.problems.len() as u64 {
        outln!(
            "  ... and {} more",
            report.problem_count - report.problems.len() as u64
        )?;
    }
    Ok(code)
}

fn verify_archive(file: &Path, as_json: bool) -> anyhow::Result<u8> {
    let report = tw_store::verify_archive(file).map_err(tw_runtime::RuntimeError::from)?;
    let code = u8::from(!report.ok);
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(code);
    }
    let h = &report.header;
    outln!(
        "archive {}: {}, started before {}, signed by key {}",
        file.display(),
        span(h),
        time(h.before),
        h.public_key.get(..16).unwrap_or(&h.public_key)
    )?;
    for c in &h.chains {
        outln!(
            "  chain {}: records {} to {} ({})",
            c.chain,
            c.first_seq,
            c.last_seq,
            c.records
        )?;
    }
    if report.ok {
        outln!(
            "ok: the signature, every record's link and output, the count and the last hash verify"
        )?;
    } else {
        outln!("TAMPERED: {} problems", report.problems.len())?;
        for p in &report.problems {
            outln!("  {p}")?;
        }
    }
    Ok(code)
}

async fn archive(rt: &Runtime, before: &str, output: &Path) -> anyhow::Result<u8> {
    let before = parse_time(before)?;
    match rt.store().archive(before, output).await? {
        Some(s) => outln!(
            "archived {} into {} and removed {} from the log",
            span(&s.header),
            s.path.display(),
            s.removed
        )?,
        None => errln!(
            "no record started before {}: nothing archived",
            time(before)
        ),
    }
    Ok(0)
}

/// What an archive holds, in a few words: SQLite's records by id, or a team store's by chain.
fn span(h: &tw_store::ArchiveHeader) -> String {
    if h.chains.is_empty() {
        format!("records {} to {} ({})", h.first_id, h.last_id, h.records)
    } else {
        format!(
            "{} records of {} chain{} (ids {} to {})",
            h.records,
            h.chains.len(),
            if h.chains.len() == 1 { "" } else { "s" },
            h.first_id,
            h.last_id
        )
    }
}

async fn checkpoint(rt: &Runtime) -> anyhow::Result<u8> {
    match rt.store().checkpoint().await? {
        Some(c) => outln!("{}", serde_json::to_string(&c)?)?,
        None => errln!("both logs are empty: there is nothing to sign yet"),
    }
    Ok(0)
}

async fn list(
    rt: &Runtime,
    filter: &AuditFilter,
    limit: u32,
    cursor: Option<i64>,
    as_json: bool,
) -> anyhow::Result<u8> {
    let mut q = query(filter)?;
    q.cursor = cursor;
    let page = list_page(async |q| rt.store().query(q).await, q, limit).await?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&page)?)?;
        return Ok(0);
    }
    out!("{}", list_table(&page.rows).render())?;
    if let Some(c) = page.next_cursor {
        outln!("more: toolwarden audit list --cursor {c}")?;
    }
    Ok(0)
}

fn list_table(rows: &[AuditRow]) -> Table {
    let mut t = Table::new(&[
        "ID",
        "STARTED",
        "TOOL",
        "STATUS",
        "CALLER",
        "DURATION",
        "EXECUTION",
        "ERROR",
    ]);
    for r in rows {
        t.row(vec![
            r.id.to_string(),
            time(r.started_at),
            r.tool.clone(),
            r.status.to_string(),
            r.agent_id.clone(),
            duration(r.duration_us),
            r.execution_id.clone(),
            r.error_message.clone().unwrap_or_default(),
        ]);
    }
    t
}

async fn show(rt: &Runtime, execution_id: &str) -> anyhow::Result<u8> {
    let Some(row) = rt.store().get(execution_id).await? else {
        bail!("no audit record with execution id {execution_id:?}");
    };
    print_row(&row)?;
    // A step of a chain names its run; a chain's call lists its steps' calls.
    if let Some(link) = row.metadata.get("chain") {
        outln!(
            "chain run {} (`toolwarden chains runs {}`): step {}, attempt {}",
            link["run_id"].as_str().unwrap_or_default(),
            link["run_id"].as_str().unwrap_or_default(),
            link["step"].as_str().unwrap_or_default(),
            link["attempt"]
        )?;
    }
    if row.metadata.get("chain_run").is_some() {
        let steps = rt.store().chain_step_rows(execution_id).await?;
        outln!("steps of this chain run ({} calls):", steps.len())?;
        for s in steps {
            outln!(
                "  {}  {}  {}  {}",
                s.metadata["chain"]["step"].as_str().unwrap_or_default(),
                s.tool,
                s.status,
                s.execution_id
            )?;
        }
    }
    Ok(0)
}

/// Writes the filtered records to `output`, else to stdout, and says on stderr how many.
async fn export(
    rt: &Runtime,
    filter: &AuditFilter,
    format: ExportFormat,
    output: Option<&Path>,
) -> anyhow::Result<u8> {
    let q = query(filter)?;
    let format = match format {
        ExportFormat::Jsonl => AuditExportFormat::Jsonl,
        ExportFormat::Csv => AuditExportFormat::Csv,
    };
    let n = match output {
        Some(path) => export_to_file(rt, &q, format, path).await?,
        None => export_to_stdout(rt, &q, format).await?,
    };
    errln!("exported {n} records");
    Ok(0)
}

async fn export_to_file(
    rt: &Runtime,
    q: &AuditQuery,
    format: AuditExportFormat,
    path: &Path,
) -> anyhow::Result<u64> {
    let mut f = tokio::fs::File::create(path)
        .await
        .with_context(|| format!("cannot create {}", path.display()))?;
    let n = rt.store().export(q, format, &mut f).await?;
    f.flush().await?;
    Ok(n)
}

/// Records stream out as they are read; a reader that stops reading ends the export where it
/// is, quietly.
async fn export_to_stdout(
    rt: &Runtime,
    q: &AuditQuery,
    format: AuditExportFormat,
) -> anyhow::Result<u64> {
    let mut out = tokio::io::stdout();
    match rt.store().export(q, format, &mut out).await {
        Ok(n) => {
            out.flush().await.map_err(crate::out::stdout_error)?;
            Ok(n)
        }
        Err(tw_store::StoreError::Export(e)) => Err(crate::out::stdout_error(e)),
        Err(e) => Err(e.into()),
    }
}

async fn changes(
    rt: &Runtime,
    since: Option<&str>,
    kind: Option<String>,
    limit: u32,
    as_json: bool,
) -> anyhow::Result<u8> {
    let q = tw_store::AdminQuery {
        since: since.map(parse_time).transpose()?,
        kind,
        cursor: None,
        limit,
    }
    .checked()
    .map_err(tw_runtime::RuntimeError::from)?;
    let rows = rt.store().admin_events(&q).await?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(0);
    }
    let mut table = Table::new(&["AT", "BY", "KIND", "WHAT"]).max_width(400);
    for r in rows {
        table.row(vec![time(r.at), r.actor, r.kind, r.summary]);
    }
    out!("{}", table.render())?;
    Ok(0)
}

async fn report(rt: &Runtime, filter: &AuditFilter, as_json: bool) -> anyhow::Result<u8> {
    let report = rt.store().usage_report(&query(filter)?).await?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(0);
    }
    outln!("by tool")?;
    out!("{}", usage_table("TOOL", &report.by_tool))?;
    outln!()?;
    outln!("by caller")?;
    out!("{}", usage_table("CALLER", &report.by_caller))?;
    // Calls made under no skill are in the two tables above only.
    if !report.by_skill.is_empty() {
        outln!()?;
        outln!("by skill")?;
        out!("{}", usage_table("SKILL", &report.by_skill))?;
    }
    Ok(0)
}

/// One page of up to `limit` (1 to 1000) records, asked of `fetch` (the store's query). The store
/// stops a text search at its scan window and may hand back a short page that is not the last;
/// the command line asks on from that page's cursor until the page is full or the log is
/// searched to the end, so a page here is short only when it is the last, as without text.
async fn list_page(
    mut fetch: impl AsyncFnMut(&AuditQuery) -> tw_store::Result<AuditPage>,
    mut q: AuditQuery,
    limit: u32,
) -> anyhow::Result<AuditPage> {
    let limit = limit.clamp(1, tw_store::MAX_PAGE);
    let mut rows = Vec::new();
    loop {
        q.limit = limit - u32::try_from(rows.len()).unwrap_or(limit);
        let page = fetch(&q).await?;
        rows.extend(page.rows);
        match page.next_cursor {
            Some(c) if rows.len() < limit as usize => q.cursor = Some(c),
            next_cursor => {
                return Ok(AuditPage {
                    rows,
                    next_cursor,
                    scanned_to: page.scanned_to,
                });
            }
        }
    }
}

fn usage_table(key: &str, rows: &[UsageRow]) -> String {
    let mut t = Table::new(&[
        key,
        "CALLS",
        "OK",
        "FAILED",
        "DENIED",
        "INVALID",
        "ASKED",
        "VIOLATIONS",
        "AVG",
        "TOOLS",
        "LAST",
    ]);
    for r in rows {
        t.row(vec![
            r.key.clone(),
            r.calls.to_string(),
            r.success.to_string(),
            r.failed.to_string(),
            r.denied.to_string(),
            r.invalid.to_string(),
            r.awaiting_confirmation.to_string(),
            r.violations.to_string(),
            duration(i64::try_from(r.avg_duration_us).unwrap_or(i64::MAX)),
            r.distinct_tools.to_string(),
            time(r.last_at),
        ]);
    }
    t.render()
}

fn print_row(r: &AuditRow) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(r)?)?;
    Ok(())
}

pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// RFC 3339, or a duration meaning that long ago.
pub(crate) fn parse_time(s: &str) -> anyhow::Result<i64> {
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        let d = t
            .duration_since(UNIX_EPOCH)
            .map_err(|_| anyhow!("{s:?} is before 1970"))?;
        return Ok(i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    }
    match humantime::parse_duration(s) {
        Ok(d) => Ok(now_us() - i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
        Err(_) => bail!(
            "{s:?} is neither an RFC 3339 time (2026-11-22T10:00:00Z) nor a duration (90m, 2h, 7d)"
        ),
    }
}

/// The flags as the store's audit filter (times read from RFC 3339 or "2h ago"); the store
/// checks it.
fn query(f: &AuditFilter) -> anyhow::Result<AuditQuery> {
    let filter = tw_store::AuditFilter {
        tool: f.tool.clone(),
        status: f.status.clone(),
        agent_id: f.caller.clone(),
        skill: f.skill.clone(),
        since: f.since.as_deref().map(parse_time).transpose()?,
        until: f.until.as_deref().map(parse_time).transpose()?,
        text: f.text.clone(),
        ..tw_store::AuditFilter::default()
    };
    Ok(filter.query().map_err(tw_runtime::RuntimeError::from)?)
}

pub(crate) fn time(us: i64) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_micros(u64::try_from(us).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

fn duration(us: i64) -> String {
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.1}ms", us as f64 / 1_000.0)
    } else {
        format!("{:.2}s", us as f64 / 1_000_000.0)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row(id: i64) -> AuditRow {
        serde_json::from_value(json!({
            "id": id, "execution_id": format!("e{id}"), "trace_id": "t", "tool": "echo",
            "agent_id": "a", "arguments": {}, "status": "success", "output_bytes": 0,
            "truncated": false, "started_at": 0, "completed_at": 0, "duration_us": 0,
            "metadata": {},
        }))
        .unwrap()
    }

    fn page(ids: &[i64], next_cursor: Option<i64>, scanned_to: Option<i64>) -> AuditPage {
        AuditPage {
            rows: ids.iter().copied().map(row).collect(),
            next_cursor,
            scanned_to,
        }
    }

    /// `list_page` against pages the store would give, each keyed by the (cursor, limit) asked:
    /// the ids it lists, its cursor, and what it asked.
    fn check(limit: u32, pages: &[((Option<i64>, u32), AuditPage)]) -> (Vec<i64>, Option<i64>) {
        let mut asked = Vec::new();
        let fetch = async |q: &AuditQuery| -> tw_store::Result<AuditPage> {
            asked.push((q.cursor, q.limit));
            let (_, p) = pages
                .iter()
                .find(|(key, _)| *key == (q.cursor, q.limit))
                .unwrap_or_else(|| panic!("unexpected query {q:?}"));
            Ok(p.clone())
        };
        let q = AuditQuery {
            text: Some("x".into()),
            ..AuditQuery::default()
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let got = runtime.block_on(list_page(fetch, q, limit)).unwrap();
        let keys: Vec<_> = pages.iter().map(|(key, _)| *key).collect();
        assert_eq!(asked, keys);
        (got.rows.iter().map(|r| r.id).collect(), got.next_cursor)
    }

    #[test]
    fn a_text_search_page_asks_on_through_short_windows_until_it_is_full() {
        // A window with two matches, one with none, then enough to fill the page.
        let pages = [
            ((None, 5), page(&[100, 99], Some(90), Some(90))),
            ((Some(90), 3), page(&[], Some(80), Some(80))),
            ((Some(80), 3), page(&[75, 74, 73], Some(73), None)),
        ];
        assert_eq!(check(5, &pages), (vec![100, 99, 75, 74, 73], Some(73)));
        // Filled exactly by a window's last matches: the cursor goes on below the window.
        let pages = [
            ((None, 3), page(&[9, 8], Some(7), Some(7))),
            ((Some(7), 1), page(&[6], Some(4), Some(4))),
        ];
        assert_eq!(check(3, &pages), (vec![9, 8, 6], Some(4)));
        // The end of the log: a short last page, no cursor.
        let pages = [
            ((None, 50), page(&[5], Some(3), Some(3))),
            ((Some(3), 49), page(&[2], None, None)),
        ];
        assert_eq!(check(50, &pages), (vec![5, 2], None));
        // A page over the store's limit is asked for at the limit.
        let pages = [((None, 1000), page(&[1], None, None))];
        assert_eq!(check(5000, &pages), (vec![1], None));
    }
}
