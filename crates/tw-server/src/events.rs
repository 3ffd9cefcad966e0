//! `GET /api/v1/events`: this process's execution events as server-sent events, for scripts
//! that watch what agents do; on a team store, every replica's (each marked with its `replica`).
//! Each event is `event: execution` with the event's JSON; a subscriber that falls behind gets
//! `event: missed` with how many it lost, never a stalled server. The stream ends when the
//! endpoint shuts down.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use tw_runtime::{Received, Subscription};

use crate::Gateway;

/// How often an idle stream says it is alive (proxies drop silent connections).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(crate) async fn stream(
    State(g): State<Arc<Gateway>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let events = g.rt.events().subscribe();
    let stop = g.shutdown.clone();
    let stream = futures_util::stream::unfold(
        (events, stop),
        |(mut events, stop): (Subscription, _)| async move {
            let received = tokio::select! {
                () = stop.cancelled() => return None,
                r = events.recv() => r?,
            };
            let event = match received {
                Received::Event(e) => Event::default()
                    .event("execution")
                    .json_data(&*e)
                    .unwrap_or_else(|_| Event::default().event("execution").data("{}")),
                Received::Missed(n) => Event::default()
                    .event("missed")
                    .data(format!("{{\"missed\":{n}}}")),
            };
            Some((Ok(event), (events, stop)))
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}
