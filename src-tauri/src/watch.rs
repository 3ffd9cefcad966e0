//! What the UI learns without asking: every runtime event of this process, forwarded as a
//! `tw://execution` event, and the number of pending confirmations, which any process on the data
//! directory can change (an agent's call held for approval, an answer given in the CLI). That
//! number is read from the store every second (and at once when this process's own calls ask or
//! are answered), sent as `tw://confirmations` when it changes, and shown in the window title.

use std::sync::Arc;
use std::time::Duration;

use tauri::{AppHandle, Emitter, Manager};
use tw_protocol::{ConfirmationsChanged, events};
use tw_runtime::{EventKind, Received};

use crate::{Desktop, convert};

/// How often the pending confirmations are counted.
const POLL: Duration = Duration::from_secs(1);

/// Starts the forwarding tasks; they end with the app.
pub(crate) fn start(app: AppHandle, desktop: Arc<Desktop>) {
    let (nudge_tx, mut nudge_rx) = tokio::sync::mpsc::channel::<()>(8);
    let mut events = desktop.runtime.events().subscribe();
    let forward_app = app.clone();
    tauri::async_runtime::spawn(async move {
        while let Some(received) = events.recv().await {
            let Received::Event(event) = received else {
                continue;
            };
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
    tauri::async_runtime::spawn(async move {
        let mut last: Option<usize> = None;
        loop {
            match desktop.runtime.pending_confirmations().await {
                Ok(rows) if last != Some(rows.len()) => {
                    let pending = rows.len();
                    last = Some(pending);
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

/// The window title, which doubles as the badge.
pub(crate) fn title(pending: usize) -> String {
    match pending {
        0 => "Toolwarden".to_owned(),
        1 => "Toolwarden (1 call waiting for approval)".to_owned(),
        n => format!("Toolwarden ({n} calls waiting for approval)"),
    }
}
