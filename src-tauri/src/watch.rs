//! What the UI learns without asking: every runtime event of this process and of every other
//! process on the data directory that publishes a live feed (the CLI, agents' servers; see
//! `tw_runtime::live`), or, on a team store, of every replica (through the store), forwarded as
//! `tw://execution` events, and the number of pending confirmations, which any process on the data
//! directory can change (an agent's call held for approval, an answer given in the CLI). That
//! number is read from the store every second (and at once when this process's own calls ask or
//! are answered), sent as `tw://confirmations` when it changes, and shown in the window title.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tauri::{AppHandle, Emitter, Manager};
use tw_protocol::LiveEvent;
use tw_protocol::{ConfirmationsChanged, events};
use tw_runtime::live::PeerUpdate;
use tw_runtime::{EventKind, Received};

use crate::{Desktop, convert};

/// How often the pending confirmations are counted.
const POLL: Duration = Duration::from_secs(1);

/// Starts the forwarding tasks; they end with the app.
pub(crate) fn start(app: AppHandle, desktop: Arc<Desktop>) {
    let (nudge_tx, mut nudge_rx) = tokio::sync::mpsc::channel::<()>(8);
    let peer_nudge = nudge_tx.clone();
    let mut events = desktop.runtime.events().subscribe();
    let forward_app = app.clone();
    tauri::async_runtime::spawn(async move {
        while let Some(received) = events.recv().await {
            let Received::Event(event) = received else {
                continue;
            };
            if let Some(frame) = convert::browser_frame(std::process::id(), &event) {
                let _ = forward_app.emit(events::BROWSER_FRAME, frame);
                continue;
            }
            if matches!(
                event.kind,
                EventKind::ConfirmationRequested { .. } | EventKind::ConfirmationResolved { .. }
            ) {
                let _ = nudge_tx.try_send(());
            }
            if let Err(e) = forward_app.emit(events::EXECUTION, convert::live_event(&event)) {
                tracing::debug!(error = %e, "could not forward an execution event");
            }
        }
    });
    // On a team store every process is a replica whose calls reach this runtime's bus through
    // the store (those on this data directory too): from their sockets only the pictures of
    // their browsers are taken, which stay on their host; the rest would show each call twice.
    watch_peers(
        app.clone(),
        &desktop,
        peer_nudge,
        desktop.runtime.is_team_store(),
    );
    tauri::async_runtime::spawn(async move {
        let mut last: Option<usize> = None;
        loop {
            match desktop
                .runtime
                .confirmations()
                .pending_confirmations()
                .await
            {
                Ok(rows) if last != Some(rows.len()) => {
                    let pending = rows.len();
                    last = Some(pending);
                    desktop
                        .pending
                        .store(pending, std::sync::atomic::Ordering::Relaxed);
                    let _ = app.emit(events::CONFIRMATIONS, ConfirmationsChanged { pending });
                    if let Some(window) = app.get_webview_window("main") {
                        let _ = window.set_title(&title(pending));
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not count pending confirmations"),
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = nudge_rx.recv() => {}
            }
        }
    });
}

/// Forwards what the other processes on the data directory publish (only their browsers'
/// pictures when `frames_only`).
fn watch_peers(
    app: AppHandle,
    desktop: &Desktop,
    nudge: tokio::sync::mpsc::Sender<()>,
    frames_only: bool,
) {
    let mut peers = tw_runtime::live::watch_peers(desktop.runtime.data_dir().to_path_buf());
    tauri::async_runtime::spawn(async move {
        let mut open: HashMap<u32, HashSet<String>> = HashMap::new();
        while let Some(update) = peers.recv().await {
            if let PeerUpdate::Event { pid, event } = &update
                && let Some(frame) = convert::browser_frame(*pid, event)
            {
                let _ = app.emit(events::BROWSER_FRAME, frame);
                continue;
            }
            if frames_only {
                continue;
            }
            for event in from_peer(update, &mut open, &nudge) {
                if let Err(e) = app.emit(events::EXECUTION, event) {
                    tracing::debug!(error = %e, "could not forward another process's event");
                }
            }
        }
    });
}

/// Another process's news as live events. `open` tracks each process's calls that have not
/// ended, so that when a process goes away mid-call its calls are closed as `lost` instead of
/// looking as if they ran for ever.
fn from_peer(
    update: PeerUpdate,
    open: &mut HashMap<u32, HashSet<String>>,
    nudge: &tokio::sync::mpsc::Sender<()>,
) -> Vec<LiveEvent> {
    match update {
        PeerUpdate::Hello { pid, running } => running
            .into_iter()
            .map(|call| {
                let id = call.execution_id.to_string();
                open.entry(pid).or_default().insert(id.clone());
                LiveEvent {
                    execution_id: id,
                    tool: call.tool,
                    kind: "started".to_owned(),
                    status: None,
                    at: call.started_at,
                    detail: Some(format!("{} (process {pid})", call.agent_id)),
                    chain_step: None,
                }
            })
            .collect(),
        PeerUpdate::Event { pid, event } => {
            if matches!(
                event.kind,
                EventKind::ConfirmationRequested { .. } | EventKind::ConfirmationResolved { .. }
            ) {
                let _ = nudge.try_send(());
            }
            let live = convert::live_event(&event);
            let calls = open.entry(pid).or_default();
            // A call that started between the subscription and the snapshot is in both.
            if matches!(event.kind, EventKind::Started) && calls.contains(&live.execution_id) {
                return Vec::new();
            }
            if live.status.is_some() {
                calls.remove(&live.execution_id);
            } else {
                calls.insert(live.execution_id.clone());
            }
            vec![live]
        }
        PeerUpdate::Missed { pid, count } => {
            tracing::warn!(pid, count, "live events of another process were dropped");
            Vec::new()
        }
        PeerUpdate::Gone { pid } => {
            let now = tw_runtime::Clock::now_us(&tw_runtime::SystemClock);
            open.remove(&pid)
                .unwrap_or_default()
                .into_iter()
                .map(|execution_id| LiveEvent {
                    execution_id,
                    tool: String::new(),
                    kind: "lost".to_owned(),
                    status: Some("unknown".to_owned()),
                    at: now,
                    detail: Some(format!(
                        "process {pid} ended without reporting; see the audit log"
                    )),
                    chain_step: None,
                })
                .collect()
        }
    }
}

/// The window title, which doubles as the badge.
pub(crate) fn title(pending: usize) -> String {
    match pending {
        0 => "Toolwarden".to_owned(),
        1 => "Toolwarden (1 call waiting for approval)".to_owned(),
        n => format!("Toolwarden ({n} calls waiting for approval)"),
    }
}
