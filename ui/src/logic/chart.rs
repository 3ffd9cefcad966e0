//! The usage chart's geometry: calls per tool per time bucket as stacked bars (busiest tool at the
//! bottom), and denials as a line over them, scaled into a fixed drawing area. Pure numbers so the
//! layout is tested on the host; the view only turns them into SVG.

use tw_protocol::UsageReport;

/// Drawing area, in SVG units.
pub(crate) const WIDTH: f64 = 720.0;
pub(crate) const HEIGHT: f64 = 180.0;

/// One bar segment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Segment {
    pub(crate) x: f64,
    pub(crate) y: f64,
    pub(crate) width: f64,
    pub(crate) height: f64,
    /// Index into the report's series (its colour).
    pub(crate) series: usize,
    /// Tooltip: tool, count.
    pub(crate) title: String,
}

/// The chart: segments, the denials line's points, and the value of the top of the scale.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chart {
    pub(crate) segments: Vec<Segment>,
    pub(crate) denied: Vec<(f64, f64)>,
    pub(crate) max: u64,
}

/// Lays the report out.
pub(crate) fn layout(report: &UsageReport) -> Chart {
    let n = report.total.len();
    let max = report.total.iter().copied().max().unwrap_or(0);
    if n == 0 || max == 0 {
        return Chart {
            segments: Vec::new(),
            denied: Vec::new(),
            max,
        };
    }
    let slot = WIDTH / n as f64;
    let width = (slot * 0.8).max(1.0);
    let scale = HEIGHT / max as f64;
    let mut segments = Vec::new();
    for b in 0..n {
        let mut top = HEIGHT;
        for (i, s) in report.series.iter().enumerate() {
            let count = s.counts.get(b).copied().unwrap_or(0);
            if count == 0 {
                continue;
            }
            let height = count as f64 * scale;
            top -= height;
            segments.push(Segment {
                x: b as f64 * slot + (slot - width) / 2.0,
                y: top,
                width,
                height,
                series: i,
                title: format!("{}: {count}", s.tool),
            });
        }
    }
    let denied = report
        .denied
        .iter()
        .enumerate()
        .map(|(b, &d)| (b as f64 * slot + slot / 2.0, HEIGHT - d as f64 * scale))
        .collect();
    Chart {
        segments,
        denied,
        max,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use tw_protocol::UsageSeries;

    use super::*;

    fn report(series: Vec<(&str, Vec<u64>)>, denied: Vec<u64>) -> UsageReport {
        let n = denied.len();
        let total = (0..n)
            .map(|b| series.iter().map(|(_, c)| c[b]).sum())
            .collect();
        UsageReport {
            since_at: 0,
            until_at: n as i64,
            bucket_us: 1,
            buckets: (0..n as i64).collect(),
            series: series
                .into_iter()
                .map(|(t, counts)| UsageSeries {
                    tool: t.to_owned(),
                    total: counts.iter().sum(),
                    counts,
                })
                .collect(),
            denied,
            total,
            query_ms: 0.0,
        }
    }

    #[test]
    fn bars_stack_from_the_bottom_and_the_tallest_fills_the_height() {
        let c = layout(&report(
            vec![("echo", vec![2, 0]), ("exec", vec![2, 1])],
            vec![1, 0],
        ));
        assert_eq!(c.max, 4);
        let slot = WIDTH / 2.0;
        let w = slot * 0.8;
        let seg = |x: f64, y: f64, h: f64, series: usize, title: &str| Segment {
            x,
            y,
            width: w,
            height: h,
            series,
            title: title.to_owned(),
        };
        let q = HEIGHT / 4.0;
        assert_eq!(
            c.segments,
            vec![
                seg(slot * 0.1, HEIGHT - 2.0 * q, 2.0 * q, 0, "echo: 2"),
                seg(slot * 0.1, 0.0, 2.0 * q, 1, "exec: 2"),
                seg(slot + slot * 0.1, HEIGHT - q, q, 1, "exec: 1"),
            ]
        );
        assert_eq!(
            c.denied,
            vec![(slot / 2.0, HEIGHT - q), (slot * 1.5, HEIGHT)]
        );
    }

    #[test]
    fn an_empty_window_draws_nothing() {
        let c = layout(&report(vec![("echo", vec![0, 0])], vec![0, 0]));
        assert_eq!(c.segments, vec![]);
        assert_eq!(c.max, 0);
    }
}
