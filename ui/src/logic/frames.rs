//! The live view's browser pictures: the latest [`BrowserFrame`] of each browser session (a
//! process's browser, an agent's context in it), most recently changed first, a bounded few.

use tw_protocol::BrowserFrame;

/// Sessions kept; the one unheard from longest falls off.
pub(crate) const MAX_SESSIONS: usize = 12;

/// The latest picture per session.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Frames {
    latest: Vec<BrowserFrame>,
}

impl Frames {
    /// Keeps `frame` as its session's latest, unless an even later one is already kept (events
    /// of two processes may interleave out of order).
    pub(crate) fn push(&mut self, frame: BrowserFrame) {
        if let Some(i) = self.latest.iter().position(|f| same_session(f, &frame)) {
            if self.latest[i].at > frame.at {
                return;
            }
            self.latest.remove(i);
        }
        self.latest.insert(0, frame);
        self.latest.truncate(MAX_SESSIONS);
    }

    /// Forgets a session's picture (a person dismissed it).
    pub(crate) fn dismiss(&mut self, pid: u32, session: &str) {
        self.latest
            .retain(|f| !(f.pid == pid && f.session == session));
    }

    /// The pictures, most recently changed first.
    pub(crate) fn latest(&self) -> &[BrowserFrame] {
        &self.latest
    }
}

fn same_session(a: &BrowserFrame, b: &BrowserFrame) -> bool {
    a.pid == b.pid && a.session == b.session
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(pid: u32, session: &str, url: &str, at: i64) -> BrowserFrame {
        BrowserFrame {
            pid,
            session: session.to_owned(),
            execution_id: format!("e{at}"),
            tool: "browser_navigate".to_owned(),
            url: url.to_owned(),
            at,
            image: "data:image/jpeg;base64,/9j/".to_owned(),
        }
    }

    fn shown(f: &Frames) -> Vec<(u32, &str, &str)> {
        f.latest()
            .iter()
            .map(|f| (f.pid, f.session.as_str(), f.url.as_str()))
            .collect()
    }

    #[test]
    fn each_session_shows_its_latest_page_most_recent_first() {
        let mut f = Frames::default();
        f.push(frame(1, "agent-a", "http://a/1", 10));
        f.push(frame(1, "agent-b", "http://b/1", 20));
        f.push(frame(1, "agent-a", "http://a/2", 30));
        // The same agent in another process is another browser.
        f.push(frame(2, "agent-a", "http://other/", 40));
        assert_eq!(
            shown(&f),
            vec![
                (2, "agent-a", "http://other/"),
                (1, "agent-a", "http://a/2"),
                (1, "agent-b", "http://b/1"),
            ]
        );
        // An older picture arriving late does not replace a newer one.
        f.push(frame(1, "agent-a", "http://a/stale", 25));
        assert_eq!(shown(&f)[1], (1, "agent-a", "http://a/2"));
        f.dismiss(1, "agent-a");
        assert_eq!(
            shown(&f),
            vec![
                (2, "agent-a", "http://other/"),
                (1, "agent-b", "http://b/1")
            ]
        );
    }

    #[test]
    fn only_so_many_sessions_are_kept() {
        let mut f = Frames::default();
        for i in 0..(MAX_SESSIONS as i64 + 5) {
            f.push(frame(1, &format!("s{i}"), "http://x/", i));
        }
        assert_eq!(f.latest().len(), MAX_SESSIONS);
        assert_eq!(f.latest()[0].session, format!("s{}", MAX_SESSIONS + 4));
    }
}
