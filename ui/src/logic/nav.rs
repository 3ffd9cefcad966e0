//! The console's pages and its keyboard: which page each Alt+digit opens, and when Enter may
//! answer a confirmation dialog.

/// A page of the console, in nav order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Page {
    Tools,
    Confirmations,
    Audit,
    Live,
    Settings,
    Skills,
    Chains,
}

impl Page {
    /// Every page, in nav order (Alt+1 is the first).
    pub(crate) const ALL: [Page; 7] = [
        Page::Tools,
        Page::Confirmations,
        Page::Audit,
        Page::Live,
        Page::Settings,
        Page::Skills,
        Page::Chains,
    ];

    /// The name in element ids: `nav-{slug}`, `page-{slug}`.
    pub(crate) fn slug(self) -> &'static str {
        match self {
            Page::Tools => "tools",
            Page::Confirmations => "confirmations",
            Page::Audit => "audit",
            Page::Live => "live",
            Page::Settings => "settings",
            Page::Skills => "skills",
            Page::Chains => "chains",
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Page::Tools => "Tools",
            Page::Confirmations => "Confirmations",
            Page::Audit => "Audit log",
            Page::Live => "Live events",
            Page::Settings => "Settings",
            Page::Skills => "Skills",
            Page::Chains => "Chains",
        }
    }
}

/// The page a key press opens: Alt (alone) with a digit 1-7, on the main row or the keypad. Takes
/// `KeyboardEvent.code`, not `.key`, since Alt+digit types other characters on some layouts.
pub(crate) fn shortcut(code: &str, alt: bool, ctrl: bool, meta: bool) -> Option<Page> {
    if !alt || ctrl || meta {
        return None;
    }
    let digit = code
        .strip_prefix("Digit")
        .or_else(|| code.strip_prefix("Numpad"))?;
    let n: usize = digit.parse().ok()?;
    n.checked_sub(1).and_then(|i| Page::ALL.get(i)).copied()
}

/// How long a confirmation must have been on screen before Enter approves it, so that an Enter
/// meant for the field a person was typing in when the dialog appeared does not approve a call
/// they have not read.
pub(crate) const ENTER_ARMS_AFTER_MS: f64 = 800.0;

/// Whether Enter may approve a confirmation shown at `shown_at_ms`.
pub(crate) fn enter_armed(shown_at_ms: f64, now_ms: f64) -> bool {
    now_ms - shown_at_ms >= ENTER_ARMS_AFTER_MS
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn alt_digits_open_pages() {
        let got: Vec<Option<Page>> = [
            ("Digit1", true, false, false),
            ("Digit5", true, false, false),
            ("Numpad3", true, false, false),
            ("Digit6", true, false, false),
            ("Digit7", true, false, false),
            ("Digit8", true, false, false),
            ("Digit0", true, false, false),
            ("Digit2", false, false, false),
            ("Digit2", true, true, false),
            ("Digit2", true, false, true),
            ("KeyA", true, false, false),
        ]
        .into_iter()
        .map(|(code, alt, ctrl, meta)| shortcut(code, alt, ctrl, meta))
        .collect();
        assert_eq!(
            got,
            vec![
                Some(Page::Tools),
                Some(Page::Settings),
                Some(Page::Audit),
                Some(Page::Skills),
                Some(Page::Chains),
                None,
                None,
                None,
                None,
                None,
                None
            ]
        );
    }

    #[test]
    fn enter_waits_before_it_approves() {
        assert_eq!(
            [
                enter_armed(1000.0, 1000.0),
                enter_armed(1000.0, 1799.0),
                enter_armed(1000.0, 1800.0)
            ],
            [false, false, true]
        );
    }

    #[test]
    fn slugs_are_the_ids_the_tests_use() {
        let slugs: Vec<&str> = Page::ALL.iter().map(|p| p.slug()).collect();
        assert_eq!(
            slugs,
            [
                "tools",
                "confirmations",
                "audit",
                "live",
                "settings",
                "skills",
                "chains"
            ]
        );
    }
}
