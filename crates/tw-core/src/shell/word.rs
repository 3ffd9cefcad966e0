//! Words as the shell sees them after quote removal: the text, and whether (and why) the shell
//! would still expand it when it runs: a substitution, a parameter, a glob, a tilde or braces.
//! Only unquoted characters are globbed, tilde-expanded or read as an assignment's name, so a
//! word keeps a second copy with every quoted character masked.

/// A word after quote removal. `dynamic` names the first expansion in it, if any.
#[derive(Debug, Clone, Default)]
pub(super) struct Arg {
    pub(super) text: String,
    pub(super) dynamic: Option<&'static str>,
}

impl Arg {
    pub(super) fn literal(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            dynamic: None,
        }
    }
}

/// Stands in `Word::bare` for a quoted character or an expansion, neither of which can start a
/// glob, a tilde or an assignment name.
const QUOTED: char = '\0';

/// A word as the lexer builds it. `bare` mirrors `text` with everything quoted replaced by
/// [`QUOTED`], because globbing, tildes and assignments only apply to unquoted characters.
#[derive(Default)]
pub(super) struct Word {
    pub(super) text: String,
    bare: String,
    expansion: Option<&'static str>,
}

impl Word {
    pub(super) fn literal(&mut self, c: char, quoted: bool) {
        self.text.push(c);
        self.bare.push(if quoted { QUOTED } else { c });
    }

    pub(super) fn expanded(&mut self, source: String, kind: &'static str) {
        self.text.push_str(&source);
        self.bare.push(QUOTED);
        self.expansion.get_or_insert(kind);
    }

    pub(super) fn into_arg(self) -> Arg {
        let dynamic = self.expansion.or_else(|| pattern_kind(&self.bare));
        Arg {
            text: self.text,
            dynamic,
        }
    }

    /// `NAME=value` (or `NAME+=value`) with an unquoted name. Values are not globbed.
    pub(super) fn assignment(&self) -> Option<(String, Arg)> {
        let eq = self.bare.find('=')?;
        let name = self.bare.get(..eq)?;
        let name = name.strip_suffix('+').unwrap_or(name);
        if !is_name(name) {
            return None;
        }
        let tilde = self.bare.get(eq + 1..)?.starts_with('~');
        let value = Arg {
            text: self.text.get(eq + 1..)?.to_owned(),
            dynamic: self.expansion.or(tilde.then_some("tilde expansion")),
        };
        Some((name.to_owned(), value))
    }
}

/// What the shell would still expand in the unquoted characters of a word.
fn pattern_kind(bare: &str) -> Option<&'static str> {
    if bare.starts_with('~') {
        return Some("tilde expansion");
    }
    let bracket = bare.find('[').is_some_and(|at| bare[at..].contains(']'));
    if bare.contains(['*', '?']) || bracket {
        return Some("glob");
    }
    let mut rest = bare;
    while let Some(open) = rest.find('{') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find('}') else { break };
        if rest[..close].contains(',') || rest[..close].contains("..") {
            return Some("brace expansion");
        }
    }
    None
}

/// Whether `name` is a shell variable name.
pub(super) fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `c` ends an unquoted word.
pub(super) fn is_meta(c: char) -> bool {
    " \t\n;&|()<>".contains(c)
}
