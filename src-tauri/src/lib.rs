//! Toolwarden's desktop shell: a Tauri app that embeds the runtime in its own process, on the same
//! data directory, config and policy files as the `toolwarden` CLI, and serves the Leptos UI.
//!
//! The CLI and the app share one SQLite database, so each sees the other's tools, audit log and
//! pending confirmations: a confirmation approved here releases a call waiting in a CLI or agent
//! process, and the other way round. Commands ([`commands`]) are thin adapters over tw-runtime
//! that speak tw-protocol types; runtime events and changes in the pending confirmations are
//! forwarded to the UI as Tauri events ([`watch`]). How long the app took to become usable is
//! logged once the UI says so ([`Startup`]).

pub mod commands;
mod convert;
mod options;
mod startup;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tauri::{Emitter, Manager};
use tw_runtime::Runtime;

pub use options::Options;
pub use startup::Startup;

/// What every command reaches through Tauri's state.
pub struct Desktop {
    /// The embedded runtime.
    pub runtime: Runtime,
    /// Where it keeps its data (shown in settings).
    pub options: Options,
    /// Calls waiting for approval on the data directory, as last counted ([`watch`]).
    pub pending: AtomicUsize,
    /// Set once the person said to close the window although calls wait.
    pub close_confirmed: AtomicBool,
    /// The HTTP endpoint (MCP and the admin API) this app hosts while it runs.
    pub endpoint: tw_protocol::Endpoint,
    /// When the process started, for the time to interactive.
    pub startup: Startup,
}

impl Desktop {
    /// Whether a request to close the window should be held to ask the person first: calls wait
    /// for approval, and nobody has said to close anyway.
    pub fn should_ask_before_closing(&self) -> Option<usize> {
        let pending = self.pending.load(Ordering::Relaxed);
        (pending > 0 && !self.close_confirmed.load(Ordering::Relaxed)).then_some(pending)
    }
}

/// Runs the app: resolves the data directory and config like the CLI does (flags, then
/// `TOOLWARDEN_*` variables, then the config file, then platform defaults), opens the runtime,
/// and shows the window. Exits with a message on stderr if the runtime cannot open.
pub fn run() {
    let startup = Startup::now();
    init_tracing();
    let options = match Options::from_args(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("toolwarden-desktop: {e:#}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run_app(tauri::Builder::default(), options, startup) {
        eprintln!("toolwarden-desktop: {e:#}");
        std::process::exit(1);
    }
}

/// Builds and runs the app on `builder` (tests pass a mock builder), timing its start from
/// `startup`.
pub fn run_app(
    builder: tauri::Builder<tauri::Wry>,
    options: Options,
    startup: Startup,
) -> anyhow::Result<()> {
    let lock = options.lock_single_instance()?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    tauri::async_runtime::set(tokio.handle().clone());
    // The runtime spawns tasks (policy watcher, sandbox self-test) as it opens and starts.
    let _in_tokio = tokio.enter();
    let runtime = tokio.block_on(options.open_runtime())?;
    runtime.start_sandbox_self_test();
    // Calls this app runs show in other processes' watchers (`toolwarden running`, `cancel`).
    if let Err(e) = runtime.publish_live() {
        tracing::warn!(error = %e, "this app's calls are not published to other processes");
    }
    // Agents connect here while the app runs; the app works without it (the address may be
    // taken by `toolwarden serve` on the same data directory, which serves the same tools).
    let stop_endpoint = tokio_util::sync::CancellationToken::new();
    let endpoint = match tokio.block_on(tw_server::start(
        runtime.clone(),
        &options.places.config.serve,
        stop_endpoint.clone(),
    )) {
        Ok(e) => tw_protocol::Endpoint {
            mcp_url: Some(e.mcp_url()),
            token_file: Some(e.token_file.display().to_string()),
            error: None,
        },
        Err(e) => {
            tracing::warn!(error = %e, "the HTTP endpoint is not running");
            tw_protocol::Endpoint {
                error: Some(e.to_string()),
                ..tw_protocol::Endpoint::default()
            }
        }
    };
    // Upstream MCP servers connect in the background; their tools appear when they do.
    let upstream: Vec<_> = options.places.config.upstream.values().cloned().collect();
    if !upstream.is_empty() {
        let (rt, stop) = (runtime.clone(), stop_endpoint.clone());
        // They stop with the endpoint's token when the app exits.
        tokio.spawn(async move {
            let _running = tw_mcp::upstream::start(&rt, upstream, stop).await;
        });
    }
    let desktop = Arc::new(Desktop {
        runtime: runtime.clone(),
        options,
        pending: AtomicUsize::new(0),
        close_confirmed: AtomicBool::new(false),
        endpoint,
        startup,
    });
    let app = builder
        .manage(Arc::clone(&desktop))
        .invoke_handler(tauri::generate_handler![
            commands::list_tools,
            commands::get_tool,
            commands::set_tool_enabled,
            commands::list_confirmations,
            commands::answer_confirmation,
            commands::query_audit,
            commands::get_audit_record,
            commands::cancel_execution,
            commands::get_settings,
            commands::set_mode,
            commands::list_grants,
            commands::revoke_grant,
            commands::custom::save_custom_tool,
            commands::custom::remove_custom_tool,
            commands::custom::run_tool,
            commands::report::export_audit,
            commands::report::audit_report,
            commands::close_window,
            commands::report_interactive,
            commands::reload_policy,
            commands::skills::list_skills,
            commands::skills::get_skill,
            commands::skills::set_skill_override,
            commands::skills::check_skill,
            commands::skills::save_skill,
            commands::chains::list_chains,
            commands::chains::get_chain,
            commands::chains::check_chain,
            commands::chains::save_chain,
            commands::chains::run_chain,
            commands::chains::list_chain_runs,
            commands::chains::get_chain_run,
        ])
        .on_window_event(|window, event| {
            if let tauri::WindowEvent::CloseRequested { api, .. } = event
                && let Some(pending) = window.state::<Arc<Desktop>>().should_ask_before_closing()
            {
                api.prevent_close();
                let changed = tw_protocol::ConfirmationsChanged { pending };
                if let Err(e) = window.emit(tw_protocol::events::CLOSE_REQUESTED, changed) {
                    tracing::warn!(error = %e, "cannot ask before closing; closing");
                    window
                        .state::<Arc<Desktop>>()
                        .close_confirmed
                        .store(true, Ordering::Relaxed);
                    let _ = window.close();
                }
            }
        })
        .setup(move |app| {
            watch::start(app.handle().clone(), Arc::clone(&desktop));
            Ok(())
        })
        .build(tauri::generate_context!())?;
    app.run(move |handle, event| {
        if let tauri::RunEvent::Exit = event {
            stop_endpoint.cancel();
            let rt = handle.state::<Arc<Desktop>>().runtime.clone();
            tauri::async_runtime::block_on(rt.close());
        }
    });
    drop(lock);
    Ok(())
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(tw_runtime::log_filter("warn")));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    /// The capability file grants exactly the commands tw-protocol names, and no plugin but
    /// event listening.
    #[test]
    fn the_capability_file_grants_exactly_the_protocols_commands() {
        let text = include_str!("../capabilities/main.json");
        let doc: serde_json::Value = serde_json::from_str(text).unwrap();
        let mut granted: Vec<String> = doc["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_owned())
            .collect();
        granted.sort();
        let mut expected: Vec<String> = tw_protocol::commands::ALL
            .iter()
            .map(|c| format!("allow-{}", c.replace('_', "-")))
            .chain([
                "core:event:allow-listen".into(),
                "core:event:allow-unlisten".into(),
            ])
            .collect();
        expected.sort();
        assert_eq!(granted, expected);
    }
}
