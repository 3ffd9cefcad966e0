//! The team relay: events packed into NOTIFY-sized messages, and two runtimes on one throwaway
//! PostgreSQL database (`tw_store::testing`) showing each other's calls only while watched.

use std::time::Duration;

use serde_json::json;
use tw_core::ToolStatus;

use super::*;
use crate::runtime::tests::{Fixture, fixture};

fn event(n: usize, kind: EventKind) -> Arc<ExecutionEvent> {
    Arc::new(ExecutionEvent {
        execution_id: ExecutionId::new(&format!("exec-{n:05}")).unwrap(),
        trace_id: tw_core::TraceId::new("trace").unwrap(),
        tool: "echo".to_owned(),
        at: 1,
        kind,
        replica: None,
    })
}

fn unpack(texts: &[String]) -> Vec<ExecutionEvent> {
    texts
        .iter()
        .flat_map(|t| {
            assert!(t.len() <= MAX_LIVE_MESSAGE, "{} bytes", t.len());
            match serde_json::from_str(t).unwrap() {
                Message::Events { from, events } => {
                    assert_eq!(from, "host:1");
                    events
                }
                other => panic!("{other:?}"),
            }
        })
        .collect()
}

#[test]
fn events_go_in_as_few_messages_as_fit_in_order_and_long_text_is_cut_to_fit() {
    let events: Vec<_> = (0..300)
        .map(|n| {
            event(
                n,
                EventKind::InProgress {
                    stream: crate::events::Stream::Stdout,
                    text: format!("line {n}"),
                },
            )
        })
        .collect();
    let texts = pack("host:1", &events);
    let total: usize = texts.iter().map(String::len).sum();
    assert_eq!(
        texts.len(),
        total.div_ceil(MAX_LIVE_MESSAGE),
        "packed tight"
    );
    let back = unpack(&texts);
    assert_eq!(back.len(), 300);
    assert!(back.iter().zip(&events).all(|(a, b)| a == &**b));

    // Output full of characters JSON escapes, and a long denial: both cut, marked, and sent.
    let noisy = "\"\\\u{1}é".repeat(4000);
    let long = vec![
        event(
            1,
            EventKind::InProgress {
                stream: crate::events::Stream::Stderr,
                text: noisy.clone(),
            },
        ),
        event(
            2,
            EventKind::Denied {
                status: ToolStatus::PermissionDenied,
                reason: "r".repeat(20_000),
            },
        ),
        event(3, EventKind::Started),
        // A confirmation's reason quotes the call's arguments, which may be long.
        event(
            4,
            EventKind::ConfirmationRequested {
                confirmation_id: "c-1".to_owned(),
                reason: "a".repeat(9000),
                expires_at: 1,
            },
        ),
    ];
    let back = unpack(&pack("host:1", &long));
    assert_eq!(back.len(), 4);
    let EventKind::InProgress { text, .. } = &back[0].kind else {
        panic!("{:?}", back[0]);
    };
    assert!(text.ends_with('…') && noisy.starts_with(text.trim_end_matches('…')));
    let EventKind::Denied { reason, .. } = &back[1].kind else {
        panic!("{:?}", back[1]);
    };
    assert!(reason.len() > 1000 && reason.ends_with('…'));
    assert_eq!(back[2].kind, EventKind::Started);
    let EventKind::ConfirmationRequested { reason, .. } = &back[3].kind else {
        panic!("{:?}", back[3]);
    };
    assert!(reason.len() > 1000 && reason.ends_with('…'));
}

/// A runtime on a data directory of its own, on the team store at `url`.
async fn team_runtime(url: &str, policy: &str) -> Fixture {
    let f = fixture(&format!("{policy}[store]\nurl = \"{url}\"\n"), "").await;
    assert!(f.rt.is_team_store());
    f
}

/// Waits up to 10 s for `ready`.
async fn until(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..200 {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen within 10 s");
}

/// The events `sub` receives until one ends `id`'s call (at most 10 s).
async fn until_ended(sub: &mut Subscription, id: &ExecutionId) -> Vec<Arc<ExecutionEvent>> {
    let mut out = Vec::new();
    loop {
        let r = tokio::time::timeout(Duration::from_secs(10), sub.recv())
            .await
            .unwrap_or_else(|_| panic!("no end of {id} within 10 s; got {out:?}"));
        match r {
            Some(Received::Event(e)) => {
                let done = e.execution_id == *id && e.kind.ends_call();
                out.push(e);
                if done {
                    return out;
                }
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_watcher_on_one_replica_sees_the_others_calls_which_send_nothing_while_nobody_watches() {
    let url = tw_store::testing::PgCluster::shared()
        .fresh_database()
        .await;
    let (fa, fb) = (team_runtime(&url, "").await, team_runtime(&url, "").await);
    let (a, b) = (&fa.rt, &fb.rt);
    let caller = tw_core::Caller::agent("t");

    // Nobody watches: A's relay does not even listen to A's bus.
    let r = a
        .execute(a.call("echo", json!({"n": 0}), caller.clone()))
        .await;
    assert_eq!(r.status, ToolStatus::Success);
    assert!(!a.events().has_subscribers(), "nothing is built for nobody");

    // Someone watches on B: A hears of it at once and forwards its calls there.
    let mut watching = b.events().subscribe();
    until("A tapping its events for B's watcher", || {
        a.events().has_subscribers()
    })
    .await;
    let r = a
        .execute(a.call("echo", json!({"n": 1}), caller.clone()))
        .await;
    let seen = until_ended(&mut watching, &r.execution_id).await;
    let kinds: Vec<_> = seen
        .iter()
        .filter(|e| e.execution_id == r.execution_id)
        .map(|e| (e.kind.ends_call(), e.replica.clone(), e.trace_id.clone()))
        .collect();
    let a_name = seen[0]
        .replica
        .clone()
        .expect("marked as another replica's");
    assert_eq!(
        kinds,
        vec![
            (false, Some(a_name.clone()), r.trace_id.clone()),
            (true, Some(a_name.clone()), r.trace_id.clone()),
        ],
        "started then completed, marked as A's"
    );

    // B's own calls reach its watcher once, unmarked, and do not come back from A.
    let mine = b
        .execute(b.call("echo", json!({"n": 2}), caller.clone()))
        .await;
    let seen = until_ended(&mut watching, &mine.execution_id).await;
    let own: Vec<_> = seen
        .iter()
        .filter(|e| e.execution_id == mine.execution_id)
        .collect();
    assert_eq!(own.len(), 2, "{own:?}");
    assert!(own.iter().all(|e| e.replica.is_none()));
    let again = a
        .execute(a.call("echo", json!({"n": 3}), caller.clone()))
        .await;
    let seen = until_ended(&mut watching, &again.execution_id).await;
    assert!(
        seen.iter().all(|e| e.execution_id != mine.execution_id),
        "{seen:?}"
    );

    // The watcher leaves: within a tick B says so, and A stops listening.
    drop(watching);
    tokio::time::timeout(TICK * 3, async {
        until("A letting go of its events", || {
            !a.events().has_subscribers()
        })
        .await;
    })
    .await
    .unwrap();
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_watcher_that_arrives_is_shown_the_calls_already_running_on_other_replicas_and_can_cancel_them()
 {
    let url = tw_store::testing::PgCluster::shared()
        .fresh_database()
        .await;
    // A's call waits for a person's approval while B's watcher arrives.
    let asks = "[policy]\nallow = [\"echo\"]\n[policy.modes.normal]\nask = [\"echo\"]\n";
    let (fa, fb) = (team_runtime(&url, asks).await, team_runtime(&url, "").await);
    let (a, b) = (&fa.rt, &fb.rt);
    let call = a.call("echo", json!({}), tw_core::Caller::agent("t"));
    let id = call.execution_id.clone();
    let pending = {
        let a = a.clone();
        tokio::spawn(async move { a.execute(call).await })
    };
    until("the call to be in flight on A", || {
        a.pipeline()
            .running_calls()
            .iter()
            .any(|c| c.execution_id == id)
    })
    .await;
    let mut watching = b.events().subscribe();
    let started = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(Received::Event(e)) = watching.recv().await
                && e.execution_id == id
            {
                return e;
            }
        }
    })
    .await
    .expect("B's watcher is told of A's call in flight");
    assert_eq!(started.kind, EventKind::Started);
    assert!(started.replica.is_some());
    // `toolwarden running` on B lists A's call, marked with A.
    let listed = b.running_everywhere().await;
    assert_eq!(
        listed
            .iter()
            .map(|f| (f.call.execution_id.clone(), f.replica.clone()))
            .collect::<Vec<_>>(),
        vec![(id.clone(), started.replica.clone())]
    );
    // Cancel, as B's live view asks for it: A runs the call, A cancels it, B hears so.
    assert!(b.cancel_anywhere(&id).await, "A said it cancelled the call");
    let ended = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .expect("the cancelled call ends")
        .unwrap();
    assert_eq!(ended.status, ToolStatus::Cancelled);
    let nobody = crate::new_execution_id();
    assert!(!b.cancel_anywhere(&nobody).await, "no replica runs it");
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn the_open_calls_of_a_replica_that_went_silent_end_as_lost() {
    let url = tw_store::testing::PgCluster::shared()
        .fresh_database()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let mut options = tw_store::StoreOptions::new(dir.path().join("tw.db"));
    options.url = Some(url);
    let store = tw_store::Store::open(options).await.unwrap();
    let bus = EventBus::new();
    let mut watching = bus.subscribe();
    let mut relay = State {
        me: "here:1".to_owned(),
        channel: store.team_channel().unwrap(),
        bus: bus.clone(),
        pipeline: Weak::new(),
        tap: None,
        watched: HashMap::new(),
        watching: true,
        remote: HashMap::new(),
        asked: HashMap::new(),
        rolls: HashMap::new(),
        asks: 0,
    };
    let started = |n: usize, kind| {
        let mut e = (*event(n, kind)).clone();
        e.replica = None;
        e
    };
    let message = |events| {
        serde_json::to_string(&Message::Events {
            from: "there:2".to_owned(),
            events,
        })
        .unwrap()
    };
    relay
        .hear(&message(vec![
            started(1, EventKind::Started),
            started(2, EventKind::Started),
            started(
                2,
                EventKind::Completed {
                    status: ToolStatus::Success,
                    duration_us: 5,
                },
            ),
        ]))
        .await;
    let mut heard = Vec::new();
    while let Some(Received::Event(e)) = watching.try_recv() {
        heard.push((e.execution_id.to_string(), e.replica.clone()));
    }
    let there = Some("there:2".to_owned());
    assert_eq!(
        heard,
        vec![
            ("exec-00001".to_owned(), there.clone()),
            ("exec-00002".to_owned(), there.clone()),
            ("exec-00002".to_owned(), there.clone()),
        ]
    );
    // Heard from just now: nothing is lost yet.
    relay.close_lost();
    assert!(watching.try_recv().is_none());
    relay.remote.get_mut("there:2").unwrap().heard = Instant::now() - LOST_AFTER;
    relay.close_lost();
    let Some(Received::Event(lost)) = watching.try_recv() else {
        panic!("the open call ends as lost");
    };
    assert_eq!(lost.execution_id.to_string(), "exec-00001");
    assert!(matches!(&lost.kind, EventKind::Lost { reason } if reason.contains("there:2")));
    assert!(watching.try_recv().is_none(), "the ended call is not lost");
    store.close().await;
}
