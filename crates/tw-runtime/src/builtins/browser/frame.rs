//! Pictures of browser pages for people watching (the desktop's live view): each browser call
//! ends with a JPEG of its session's page, published as a live event, only while someone
//! watches every event.

use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use serde_json::Value;
use tw_core::ToolDefinition;

use super::url_and_title;
use crate::builtins::net::NetContext;
use crate::builtins::{BuiltinTool, PreviewFuture, ToolContext, ToolFuture};

/// The longest a picture of the page for a watcher may add to a call.
const FRAME_TIME: Duration = Duration::from_secs(2);
/// The largest picture sent to watchers (JPEG bytes); a bigger one is left out.
const MAX_FRAME: usize = 1 << 20;

/// A browser tool whose calls end with a picture of the session's page for whoever watches
/// (the desktop's live view): taken after the call, inside its time, only while someone
/// watches every event; a picture that cannot be taken is left out, never failing the call.
pub(super) struct Framed(pub(super) Arc<dyn BuiltinTool>);

impl BuiltinTool for Framed {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        self.0.definition()
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let out = self.0.call(ctx, args).await;
            if let Some(net) = &ctx.net
                && let Some(announce) = &net.frames
            {
                match tokio::time::timeout(FRAME_TIME, frame(net)).await {
                    Ok(Some(kind)) => announce(kind),
                    Ok(None) => {}
                    Err(_) => tracing::debug!("no picture of the page in time for the watchers"),
                }
            }
            out
        })
    }

    fn side_effects(&self, args: &Value) -> Option<bool> {
        self.0.side_effects(args)
    }

    fn preview<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> Option<PreviewFuture<'a>> {
        self.0.preview(ctx, args)
    }
}

/// A picture of the page the call's session acts on, as a [`crate::events::EventKind::Frame`];
/// `None` when the session is gone (closed, or its browser stopped) or the picture fails.
async fn frame(net: &NetContext) -> Option<crate::events::EventKind> {
    let (page, _) = net.browsers.peek(&net.owner).await?;
    let (url, _) = url_and_title(&page).await.ok()?;
    let jpeg = page
        .screenshot(
            chromiumoxide::page::ScreenshotParams::builder()
                .format(CaptureScreenshotFormat::Jpeg)
                .quality(60)
                .build(),
        )
        .await
        .map_err(|e| tracing::debug!(error = %e, "no picture of the page for the watchers"))
        .ok()?;
    if jpeg.len() > MAX_FRAME {
        return None;
    }
    let (agent, skill) = net.owner.split_once('\u{0}').unwrap_or((&net.owner, ""));
    Some(crate::events::EventKind::Frame {
        session: if skill.is_empty() {
            agent.to_owned()
        } else {
            format!("{agent} / {skill}")
        },
        url,
        mime_type: "image/jpeg".to_owned(),
        data: base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &jpeg),
    })
}
