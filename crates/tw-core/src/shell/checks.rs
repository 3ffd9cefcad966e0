//! What a command may not do even when every word of it is certain: be a keyword (control flow
//! is not modelled), be a builtin that runs text we cannot see, or set a variable that changes how
//! commands are found, loaded or run (directly, or through a builtin that assigns by name).

use super::Parse;
use super::word::{Arg, is_name};

/// Shell words that are grammar, not programs; we do not model control flow.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "select", "in", "coproc", "[[", "]]", "{", "}", "!",
];

/// Builtins that run text we cannot see or change what later command names mean.
const OPAQUE_BUILTINS: &[(&str, &str)] = &[
    ("eval", "runs a string as shell code"),
    ("source", "runs a file as shell code"),
    (".", "runs a file as shell code"),
    ("trap", "runs a string as shell code later"),
    ("alias", "changes what later command names mean"),
    ("hash", "changes where later command names resolve"),
    ("enable", "loads or disables builtins"),
    ("let", "evaluates arithmetic, which can run commands"),
    ("fc", "re-runs commands from history"),
    ("mapfile", "can run a callback"),
    ("readarray", "can run a callback"),
    ("compgen", "can run commands"),
    ("complete", "can run commands"),
];

/// Whether `program` can be judged as a program: not computed, empty, a keyword or opaque.
pub(super) fn check_program(program: &Arg) -> Parse<()> {
    let name = program.text.as_str();
    if let Some(why) = program.dynamic {
        return Err(format!("{why} in command position: `{name}`"));
    }
    if name.is_empty() {
        return Err("empty command name".to_owned());
    }
    if KEYWORDS.contains(&name) {
        return Err(format!("shell keyword `{name}`"));
    }
    if let Some((_, why)) = OPAQUE_BUILTINS.iter().find(|(n, _)| *n == name) {
        return Err(format!("`{name}` {why}"));
    }
    Ok(())
}

/// Variables that change which program a name runs, what it loads, or what a shell runs first.
pub(super) fn check_variable(name: &str) -> Parse<()> {
    const EXACT: &str = "PATH IFS ENV BASH_ENV SHELL SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND";
    let prefixed = ["LD_", "DYLD_", "BASH_FUNC_"]
        .iter()
        .any(|p| name.starts_with(p));
    if prefixed || EXACT.split(' ').any(|n| n == name) {
        return Err(format!(
            "assignment to `{name}` changes how commands are found or run"
        ));
    }
    Ok(())
}

/// Builtins that set variables by name or evaluate their arguments: they must not reach a
/// sensitive variable (`read PATH`), make a nameref or integer variable (`declare -n x=PATH`,
/// `declare -i`), or name an array subscript (`printf -v 'a[$(id)]' x` runs `id`).
pub(super) fn check_arguments(args: &[Arg]) -> Parse<()> {
    const DECLARERS: [&str; 5] = ["export", "declare", "typeset", "readonly", "local"];
    // Builtins that take variable names; the first three assign to them.
    const NAME_TAKERS: [&str; 7] = ["printf", "read", "getopts", "unset", "test", "[", "wait"];
    let Some((program, rest)) = args.split_first() else {
        return Ok(());
    };
    let name = program.text.as_str();
    let declarer = DECLARERS.contains(&name);
    if !declarer && !NAME_TAKERS.contains(&name) {
        return Ok(());
    }
    for arg in rest {
        let text = arg.text.as_str();
        if declarer && text.starts_with('-') && text.contains(['n', 'i']) {
            return Err(format!(
                "`{name} {text}` makes assignments evaluate or redirect"
            ));
        }
        let var = text
            .split_once('=')
            .map_or(text, |(var, _)| var.trim_end_matches('+'));
        let assigns = declarer || NAME_TAKERS[..3].contains(&name);
        if assigns && is_name(var) {
            check_variable(var)?;
        }
        if text.contains('[') && text.contains(['$', '`']) {
            return Err(format!(
                "`{name}` argument `{text}` has an array subscript bash would evaluate"
            ));
        }
    }
    Ok(())
}
