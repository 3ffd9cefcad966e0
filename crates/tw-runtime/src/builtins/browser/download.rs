//! What `browser_navigate` does with a URL that turns out to be a download: refused, unless a
//! policy rule names a workspace folder for the call's downloads; then the browser saves it in
//! its profile and the runtime (never the browser) moves it into that folder, within the
//! response size limit, under a safe name, never replacing a file.

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::browser::{
    CancelDownloadParams, DownloadProgressState, EventDownloadProgress, EventDownloadWillBegin,
};
use chromiumoxide::cdp::browser_protocol::page::EventFrameStoppedLoading;
use chromiumoxide::listeners::EventStream;
use chromiumoxide::page::Page;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tw_core::ToolStatus;

use super::{Held, Raw, act, url_and_title};
use crate::builtins::ToolFailure;

/// The longest a granted download may take to finish after it began.
const DOWNLOAD_TIME: Duration = Duration::from_secs(45);

/// A navigation that became a download: refused unless the call's rules name a folder for
/// downloads, else saved there (see [`save`]). Either way the page is loaded again, which ends
/// chromiumoxide's wait for the navigation.
pub(super) async fn downloaded(
    held: &Held,
    url: &str,
    d: &EventDownloadWillBegin,
    progress: Option<&mut EventStream<EventDownloadProgress>>,
) -> Result<Value, ToolFailure> {
    let page = &held.lease.page;
    let saved = save(held, url, d, progress).await;
    reload(page).await;
    let file = saved?;
    let (now, title) = url_and_title(page).await?;
    Ok(json!({
        "url": now,
        "status": null,
        "title": title,
        "download": file,
    }))
}

/// Saves a download that began in the held session into the workspace folder the call's rules
/// name, once the browser has it all (within the network limits' response size), under the name
/// the page suggested made safe, never replacing a file; refused (`download_refused`) when no
/// rule names a folder. Nothing stays in the browser's profile either way.
pub(super) async fn save(
    held: &Held,
    url: &str,
    d: &EventDownloadWillBegin,
    progress: Option<&mut EventStream<EventDownloadProgress>>,
) -> Result<Value, ToolFailure> {
    let (Some(grant), Some(folder), Some(progress)) =
        (&held.net.downloads, &held.lease.downloads, progress)
    else {
        return Err(refusal(url));
    };
    let cap = held.net.settings.limits.max_response_bytes;
    let finished = tokio::time::timeout(DOWNLOAD_TIME, async {
        while let Some(p) = progress.next().await {
            if p.guid != d.guid {
                continue;
            }
            if p.received_bytes > cap as f64 {
                return Err(format!(
                    "it is larger than the {cap} bytes a response may have"
                ));
            }
            match p.state {
                DownloadProgressState::Completed => return Ok(()),
                DownloadProgressState::Canceled => return Err("the browser cancelled it".into()),
                DownloadProgressState::InProgress => {}
            }
        }
        Err("the browser stopped".to_owned())
    })
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "it did not finish within {} s",
            DOWNLOAD_TIME.as_secs()
        ))
    });
    let saved = folder.join(&d.guid);
    let outcome = match finished {
        Ok(()) => save_download(held, grant, &saved, &d.suggested_filename, cap),
        Err(why) => {
            cancel_download(held, &d.guid).await;
            Err(ToolFailure::failed(
                "download_failed",
                format!("the download from {url} was not saved: {why}"),
            ))
        }
    };
    let _ = std::fs::remove_file(&saved);
    outcome
}

/// The downloads an action on the held session's page may begin, watched from before the
/// action: a click on a link to a file begins one without loading a page.
pub(super) struct Watch {
    began: EventStream<EventDownloadWillBegin>,
    progress: Option<EventStream<EventDownloadProgress>>,
}

impl Watch {
    /// Starts watching (and, when the call's rules grant downloads, their progress).
    pub(super) async fn start(held: &Held) -> Result<Self, ToolFailure> {
        let browsers = &held.net.browsers;
        let began = browsers.events().await.map_err(super::browser_failure)?;
        let progress = match &held.lease.downloads {
            Some(_) => Some(browsers.events().await.map_err(super::browser_failure)?),
            None => None,
        };
        Ok(Self { began, progress })
    }

    /// What became of a download the action began in the page (any of its frames): where it
    /// was saved, or why not (`refused`); `None` when it began none. Only what has arrived
    /// counts, unless the action started a navigation that left the page's document in place
    /// (`unfinished`): then a download's news is waited for, at most [`super::SETTLE`].
    pub(super) async fn outcome(mut self, held: &Held, unfinished: bool) -> Option<Value> {
        // The page's frames are asked for only when some download began.
        let mut frames: Option<Vec<String>> = None;
        let until = tokio::time::Instant::now() + super::SETTLE;
        let d = loop {
            let next = if unfinished {
                tokio::time::timeout_at(until, self.began.next()).await.ok()
            } else {
                futures_util::FutureExt::now_or_never(self.began.next())
            };
            let d = match next {
                Some(Some(d)) => d,
                Some(None) | None => return None,
            };
            if frames.is_none() {
                let tree = super::cdp(&held.lease.page, "Page.getFrameTree", json!({})).await;
                frames = Some(match tree {
                    Ok(tree) => super::view::frame_urls(&tree["frameTree"])
                        .into_keys()
                        .collect(),
                    Err(_) => Vec::new(),
                });
            }
            if frames
                .as_ref()
                .is_some_and(|f| f.iter().any(|f| f == d.frame_id.as_ref()))
            {
                break d;
            }
        };
        Some(match save(held, &d.url, &d, self.progress.as_mut()).await {
            Ok(file) => file,
            Err(f) => json!({"url": d.url, "refused": f.message}),
        })
    }
}

/// Moves a finished download from the browser's profile into the workspace.
fn save_download(
    held: &Held,
    grant: &crate::builtins::net::DownloadGrant,
    saved: &std::path::Path,
    suggested: &str,
    cap: usize,
) -> Result<Value, ToolFailure> {
    let fail = |why: String| ToolFailure::failed("download_failed", why);
    let meta = std::fs::symlink_metadata(saved)
        .map_err(|e| fail(format!("the browser's copy is not there: {e}")))?;
    if !meta.is_file() || meta.len() > cap as u64 {
        return Err(fail(format!(
            "the browser's copy is not a file of at most {cap} bytes"
        )));
    }
    let bytes =
        std::fs::read(saved).map_err(|e| fail(format!("reading the browser's copy: {e}")))?;
    let name = file_name(suggested);
    let root = held.workspace.roots().first().cloned().unwrap_or_default();
    let target = root.join(&grant.folder).join(&name);
    if let Some(why) = (grant.refusal)(&target.display().to_string()) {
        return Err(ToolFailure {
            status: ToolStatus::PermissionDenied,
            code: "path_forbidden".to_owned(),
            message: format!("the download was not saved: {why}"),
        });
    }
    let out = tw_sandbox::fs::save_new_file(&held.workspace, &grant.folder, &name, &bytes)
        .map_err(|e| fail(format!("the download was not saved: {e}")))?;
    Ok(json!({
        "path": out.path,
        "bytes": bytes.len(),
        "sha256": tw_store::sha256_hex(&bytes),
        "rule": grant.rule,
    }))
}

/// Asks the browser to stop a download (it removes what it wrote).
async fn cancel_download(held: &Held, guid: &str) {
    let cancel = CancelDownloadParams::builder()
        .guid(guid)
        .browser_context_id(held.lease.context().clone())
        .build();
    match cancel {
        Ok(c) => {
            if let Err(e) = held.lease.page.execute(c).await {
                tracing::debug!(error = %e, "the download could not be cancelled");
            }
        }
        Err(e) => tracing::debug!(error = %e, "the download could not be cancelled"),
    }
}

/// A file name a page suggested, made one plain component: separators and control characters
/// become `_`, leading dots go (no hidden files), at most 200 bytes; `download` when nothing
/// is left.
fn file_name(suggested: &str) -> String {
    let mut name: String = suggested
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    name = name
        .trim_start_matches(['.', ' '])
        .trim_end_matches([' ', '.'])
        .to_owned();
    while name.len() > 200 {
        name.pop();
    }
    if name.is_empty() {
        "download".to_owned()
    } else {
        name
    }
}

/// Loads the page again (it stays where it was). chromiumoxide waits for every navigation to
/// load and sends the next only then; one that became a download never loads, and this ends
/// the wait.
async fn reload(page: &Page) {
    // Done when the main frame stopped loading on its new document: a stop of another frame,
    // or one left over from the download, would leave the next navigation a stop to mistake.
    let reloaded = async {
        let mut stopped = page
            .event_listener::<EventFrameStoppedLoading>()
            .await
            .map_err(super::cdp_failure)?;
        let (frame, before) = super::main_frame(page).await?;
        page.execute(Raw {
            method: "Page.reload",
            params: json!({}),
        })
        .await
        .map_err(super::cdp_failure)?;
        while let Some(s) = stopped.next().await {
            if s.frame_id.as_ref() == frame && super::main_frame(page).await?.1 != before {
                break;
            }
        }
        Ok::<_, ToolFailure>(())
    };
    match tokio::time::timeout(act::NAVIGATION, reloaded).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e.message, "the page could not be loaded again"),
        Err(_) => tracing::debug!("the page did not load again in time"),
    }
}

/// Why a download was not saved: no rule names a folder for it.
fn refusal(url: &str) -> ToolFailure {
    ToolFailure {
        status: ToolStatus::PermissionDenied,
        code: "download_refused".to_owned(),
        message: format!(
            "{url} is a download, and downloads are off: a policy rule's `downloads` names the \
             workspace folder they may be saved in"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suggested_file_name_becomes_one_plain_visible_component() {
        for (suggested, name) in [
            ("report.pdf", "report.pdf"),
            ("../../etc/passwd", "_.._etc_passwd"),
            (".bashrc", "bashrc"),
            ("a\\b\u{0}c\n", "a_b_c_"),
            ("...", "download"),
            ("", "download"),
        ] {
            assert_eq!(file_name(suggested), name, "{suggested:?}");
        }
        assert!(file_name(&"é".repeat(300)).len() <= 200);
    }
}
