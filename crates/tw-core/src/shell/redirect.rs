//! What a redirection does: the operator with its descriptor, the target word, and what the
//! shell does with the target ([`Effect`]), by bash's rules and dash's where they differ.

use super::word::Arg;
use super::{Effect, Parse, Redirect};

/// A redirection as the parser found it.
#[derive(Debug, Clone)]
pub(super) struct Redir {
    pub(super) op: String,
    pub(super) target: Arg,
    pub(super) effect: Effect,
    /// The variable of a `{var}>` redirection.
    pub(super) named: Option<String>,
}

impl Redir {
    pub(super) fn finish(&self) -> Redirect {
        Redirect {
            op: self.op.clone(),
            target: self.target.text.clone(),
            effect: self.effect,
            expanded: self.target.dynamic.is_some(),
        }
    }
}

/// What the shell does with a redirection (see [`Effect`]). A file name after `n>&` (n other
/// than 1) or `<&` is an error in both bash ("ambiguous redirect") and dash ("bad fd number");
/// the line is refused rather than the error modelled.
pub(super) fn effect(op: &str, fd: &str, target: &Arg) -> Parse<Effect> {
    let descriptor = |t: &str| {
        let digits = t.strip_suffix('-').unwrap_or(t);
        !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
    };
    Ok(match op {
        "<" => Effect::Read,
        "<<<" => Effect::Text,
        ">&" | "<&" => {
            let t = target.text.as_str();
            if target.dynamic.is_some() {
                // `>&$X` writes the file $X names unless it holds a number.
                Effect::Write
            } else if t == "-" {
                Effect::Close
            } else if descriptor(t) {
                Effect::Duplicate
            } else if op == ">&" && (fd.is_empty() || fd == "1") {
                Effect::Write
            } else {
                return Err(format!(
                    "`{fd}{op}{t}`: a file name after `{op}` is an error in bash and sh"
                ));
            }
        }
        _ => Effect::Write,
    })
}
