//! The colour a status, decision or event kind is shown in. One mapping for every page, so
//! "denied" is the same red in the tools console, the audit log and the live view.

/// A status colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    /// Success, allowed: green.
    Good,
    /// Denied, failed, expired: red.
    Bad,
    /// Waiting for a person, asking: amber.
    Waiting,
    /// Running: blue.
    Running,
    /// Anything else: grey.
    Neutral,
}

impl Tone {
    /// The CSS class (see style.css).
    pub(crate) fn class(self) -> &'static str {
        match self {
            Tone::Good => "tone-good",
            Tone::Bad => "tone-bad",
            Tone::Waiting => "tone-wait",
            Tone::Running => "tone-run",
            Tone::Neutral => "tone-neutral",
        }
    }
}

/// The tone of a word from the wire: a call status (`success`, `permission_denied`...), a policy
/// decision (`allow`, `deny`, `ask`), a confirmation outcome or a live event kind.
pub(crate) fn tone(word: &str) -> Tone {
    let w = word.to_ascii_lowercase();
    match w.as_str() {
        "success" | "allow" | "approved" | "completed" | "loaded" | "on" | "low" | "ok" => {
            return Tone::Good;
        }
        "ask" | "awaiting_confirmation" | "requires_confirmation" | "pending" | "medium" => {
            return Tone::Waiting;
        }
        "started" | "progress" | "running" => return Tone::Running,
        "off" | "high" => return Tone::Bad,
        _ => {}
    }
    let bad = [
        "deny",
        "denied",
        "fail",
        "error",
        "timeout",
        "cancel",
        "invalid",
        "expired",
        "not_found",
        "disabled",
        "killed",
    ];
    if bad.iter().any(|b| w.contains(b)) {
        Tone::Bad
    } else {
        Tone::Neutral
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn words_get_their_colours() {
        let words = [
            "success",
            "allow",
            "deny",
            "denied",
            "permission_denied",
            "failed",
            "sandbox_error",
            "timeout",
            "cancelled",
            "validation_error",
            "ask",
            "requires_confirmation",
            "awaiting_confirmation",
            "started",
            "progress",
            "confirmation_resolved",
            "warning",
            "low",
            "medium",
            "high",
            "ok",
            "2 errors",
        ];
        let got: Vec<(&str, Tone)> = words.iter().map(|w| (*w, tone(w))).collect();
        use Tone::*;
        let want = vec![
            ("success", Good),
            ("allow", Good),
            ("deny", Bad),
            ("denied", Bad),
            ("permission_denied", Bad),
            ("failed", Bad),
            ("sandbox_error", Bad),
            ("timeout", Bad),
            ("cancelled", Bad),
            ("validation_error", Bad),
            ("ask", Waiting),
            ("requires_confirmation", Waiting),
            ("awaiting_confirmation", Waiting),
            ("started", Running),
            ("progress", Running),
            ("confirmation_resolved", Neutral),
            ("warning", Neutral),
            ("low", Good),
            ("medium", Waiting),
            ("high", Bad),
            ("ok", Good),
            ("2 errors", Bad),
        ];
        assert_eq!(got, want);
    }
}
