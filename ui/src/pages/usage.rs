//! The audit page's usage report: calls per tool over the last days as stacked bars, denials as a
//! line over them, with a legend and totals; and the export of the filtered rows to a file.

use leptos::prelude::*;
use tw_protocol::{
    AuditQueryParams, ExportParams, ExportResult, IpcError, ReportParams, UsageReport, commands,
};

use crate::app::{AppState, Load};
use crate::browser;
use crate::ipc;
use crate::logic::chart::{HEIGHT, WIDTH, layout};
use crate::logic::time::duration;
use crate::widgets::load_state;

/// Windows the report offers, in days.
const WINDOWS: [(i64, &str); 3] = [(1, "24 h"), (7, "7 days"), (30, "30 days")];
const DAY_US: i64 = 86_400_000_000;

/// Writes the rows `filter` selects to a file and says where.
pub(crate) fn export(state: AppState, filter: AuditQueryParams, format: &'static str) {
    leptos::task::spawn_local(async move {
        let params = ExportParams {
            filter,
            format: format.to_owned(),
        };
        let r: Result<ExportResult, IpcError> = ipc::invoke(commands::EXPORT_AUDIT, &params).await;
        match r {
            Ok(done) => state.notice.set(Some(format!(
                "exported {} rows to {}",
                done.rows, done.path
            ))),
            Err(e) => state.report(&e),
        }
    });
}

fn load(state: AppState, days: i64, report: RwSignal<Load<UsageReport>>) {
    report.set(Load::Loading);
    let until = browser::ms_to_us(browser::now_ms());
    let params = ReportParams {
        since_at: Some(until - days * DAY_US),
        until_at: Some(until),
    };
    leptos::task::spawn_local(async move {
        let r: Result<UsageReport, IpcError> = ipc::invoke(commands::AUDIT_REPORT, &params).await;
        if let Err(e) = &r {
            state.report(e);
        }
        report.set(r.into());
    });
}

/// The chart panel.
#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn UsagePanel(state: AppState) -> impl IntoView {
    let days = RwSignal::new(7);
    let report: RwSignal<Load<UsageReport>> = RwSignal::new(Load::Loading);
    Effect::new(move |_| load(state, days.get(), report));
    let buttons = WINDOWS
        .map(|(d, label)| {
            view! {
                <button
                    class=move || if days.get() == d { "btn small primary" } else { "btn small" }
                    on:click=move |_| days.set(d)
                >
                    {label}
                </button>
            }
        })
        .to_vec();
    view! {
        <section class="card wide" id="usage">
            <header class="page-head">
                <h2>"Usage"</h2>
                {buttons}
                <span class="muted small">
                    {move || {
                        report
                            .with(|r| {
                                r.ready()
                                    .map(|r| {
                                        format!(
                                            "{} calls · {} denied · buckets of {} · {:.1} ms",
                                            r.total.iter().sum::<u64>(),
                                            r.denied.iter().sum::<u64>(),
                                            duration(r.bucket_us),
                                            r.query_ms,
                                        )
                                    })
                                    .unwrap_or_default()
                            })
                    }}
                </span>
            </header>
            {move || report.with(|r| load_state(r, "the usage report"))}
            {move || report.with(|r| r.ready().cloned()).map(chart)}
        </section>
    }
}

fn chart(r: UsageReport) -> impl IntoView {
    let c = layout(&r);
    if c.max == 0 {
        return view! { <p class="muted">"No calls in this window."</p> }.into_any();
    }
    let bars = c
        .segments
        .into_iter()
        .map(|s| {
            view! {
                <rect
                    x=s.x
                    y=s.y
                    width=s.width
                    height=s.height
                    class=format!("series-{}", s.series)
                >
                    <title>{s.title}</title>
                </rect>
            }
        })
        .collect_view();
    let line = c
        .denied
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect::<Vec<_>>()
        .join(" ");
    let legend = r
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            view! {
                <span class="legend-item">
                    <span class=format!("swatch series-{i}")></span>
                    {format!("{} ({})", s.tool, s.total)}
                </span>
            }
        })
        .collect_view();
    let first = r.buckets.first().copied().unwrap_or(r.since_at);
    view! {
        <svg
            class="usage-chart"
            viewBox=format!("0 0 {WIDTH} {}", HEIGHT + 2.0)
            preserveAspectRatio="none"
            role="img"
            aria-label="Calls per tool over time"
        >
            {bars}
            <polyline class="denied-line" points=line></polyline>
        </svg>
        <div class="chart-axis muted small">
            <span>{browser::local_time(first)}</span>
            <span>{format!("max {} calls per bucket", c.max)}</span>
            <span>{browser::local_time(r.until_at)}</span>
        </div>
        <div class="legend">
            {legend}
            <span class="legend-item">
                <span class="swatch denied"></span>
                "denied"
            </span>
        </div>
    }
    .into_any()
}
