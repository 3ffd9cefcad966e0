//! The audit viewer's exports and usage charts: every row the viewer's filters select written to
//! a file (JSON Lines or CSV) in the user's downloads folder, and calls per tool over time with
//! the denials among them.

use std::sync::Arc;
use std::time::Instant;

use tauri::State;
use tw_protocol::{ExportParams, ExportResult, ReportParams, UsageReport, UsageSeries};
use tw_store::{AuditExportFormat, TimelineCell, TimelineWindow};

use super::{Reply, audit_query, internal, invalid, refused};
use crate::Desktop;

/// Tools drawn as their own series; the rest are summed as `other`.
const TOP_TOOLS: usize = 8;

fn now_us() -> i64 {
    tw_runtime::Clock::now_us(&tw_runtime::SystemClock)
}

/// Writes every row the filters select (newest first) to a new file and says where.
#[tauri::command]
pub async fn export_audit(
    state: State<'_, Arc<Desktop>>,
    params: ExportParams,
) -> Reply<ExportResult> {
    let (format, ext) = match params.format.as_str() {
        "jsonl" => (AuditExportFormat::Jsonl, "jsonl"),
        "csv" => (AuditExportFormat::Csv, "csv"),
        other => {
            return Err(invalid(
                "/format",
                format!("{other:?} is not an export format; use jsonl or csv"),
            ));
        }
    };
    let mut q = audit_query(params.filter)?;
    q.cursor = None;
    let dir = export_dir(&state.options.places.data_dir);
    let path = dir.join(format!("toolwarden-audit-{}.{ext}", now_us() / 1_000_000));
    let write = async {
        tokio::fs::create_dir_all(&dir).await?;
        // create_new: never overwrite a file that is already there.
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await?;
        let mut out = tokio::io::BufWriter::new(file);
        let rows = state
            .runtime
            .store()
            .export(&q, format, &mut out)
            .await
            .map_err(std::io::Error::other)?;
        tokio::io::AsyncWriteExt::flush(&mut out).await?;
        Ok::<u64, std::io::Error>(rows)
    };
    let rows = write
        .await
        .map_err(|e| internal(&format!("writing {}", path.display()), e))?;
    Ok(ExportResult {
        path: path.display().to_string(),
        rows,
    })
}

/// The downloads folder, else the home folder, else the data directory.
fn export_dir(data_dir: &std::path::Path) -> std::path::PathBuf {
    tw_runtime::paths::download_dir()
        .filter(|p| p.is_dir())
        .or_else(tw_runtime::paths::home_dir)
        .unwrap_or_else(|| data_dir.join("exports"))
}

/// Folds the store's cells into per-tool series (the busiest [`TOP_TOOLS`], then `other`),
/// denials and totals per bucket.
pub(crate) fn fold(
    cells: &[TimelineCell],
    buckets: usize,
) -> (Vec<UsageSeries>, Vec<u64>, Vec<u64>) {
    let mut per_tool: std::collections::BTreeMap<&str, Vec<u64>> = Default::default();
    let mut denied = vec![0; buckets];
    let mut total = vec![0; buckets];
    for c in cells.iter().filter(|c| c.bucket < buckets) {
        per_tool.entry(&c.tool).or_insert_with(|| vec![0; buckets])[c.bucket] += c.calls;
        denied[c.bucket] += c.denied;
        total[c.bucket] += c.calls;
    }
    let mut series: Vec<UsageSeries> = per_tool
        .into_iter()
        .map(|(tool, counts)| UsageSeries {
            tool: tool.to_owned(),
            total: counts.iter().sum(),
            counts,
        })
        .collect();
    series.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.tool.cmp(&b.tool)));
    if series.len() > TOP_TOOLS {
        let rest = series.split_off(TOP_TOOLS);
        let mut counts = vec![0; buckets];
        for s in &rest {
            for (sum, n) in counts.iter_mut().zip(&s.counts) {
                *sum += n;
            }
        }
        series.push(UsageSeries {
            tool: "other".to_owned(),
            total: counts.iter().sum(),
            counts,
        });
    }
    (series, denied, total)
}

/// Calls per tool over time and denials, for a window (the store's [`TimelineWindow`]: the
/// last week unless given, cut into about 72 buckets).
#[tauri::command]
pub async fn audit_report(
    state: State<'_, Arc<Desktop>>,
    params: ReportParams,
) -> Reply<UsageReport> {
    let window = TimelineWindow::new(params.since_at, params.until_at, now_us())
        .map_err(|e| refused("the usage report", e.into()))?;
    let started = Instant::now();
    let cells = state
        .runtime
        .store()
        .timeline(&window)
        .await
        .map_err(|e| refused("the usage report", e.into()))?;
    let (series, denied, total) = fold(&cells, window.buckets());
    Ok(UsageReport {
        since_at: window.since,
        until_at: window.until,
        bucket_us: window.bucket_us,
        buckets: window.starts(),
        series,
        denied,
        total,
        query_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn cell(tool: &str, bucket: usize, calls: u64, denied: u64) -> TimelineCell {
        TimelineCell {
            tool: tool.to_owned(),
            bucket,
            calls,
            denied,
        }
    }

    #[test]
    fn the_busiest_tools_get_series_and_the_rest_are_other() {
        let mut cells = vec![cell("echo", 0, 50, 5), cell("echo", 2, 10, 0)];
        for (i, t) in ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
            .iter()
            .enumerate()
        {
            cells.push(cell(t, 1, 20 - i as u64, 1));
        }
        let (series, denied, total) = fold(&cells, 3);
        let names: Vec<&str> = series.iter().map(|s| s.tool.as_str()).collect();
        assert_eq!(names, ["echo", "a", "b", "c", "d", "e", "f", "g", "other"]);
        assert_eq!(series[0].counts, vec![50, 0, 10]);
        // h (13 calls) and i (12 calls) are summed.
        assert_eq!(series[8].counts, vec![0, 25, 0]);
        assert_eq!(series[8].total, 25);
        assert_eq!(denied, vec![5, 9, 0]);
        assert_eq!(
            total,
            vec![50, 20 + 19 + 18 + 17 + 16 + 15 + 14 + 13 + 12, 10]
        );
    }
}
