//! Shell command lines taken apart into every simple command they would run, so that exec approvals
//! judge commands, never the raw string an agent wrote.
//!
//! This is a security boundary, so the parser is deliberately conservative:
//!
//! - It is total. [`parse_command_line`] and [`expand_argv`] never panic and never return an error;
//!   anything they cannot follow with certainty becomes [`Parsed::Uncertain`] with a reason naming
//!   the construct, and the policy denies it. Nesting is bounded by [`MAX_DEPTH`].
//! - The grammar is POSIX `sh` plus the bash extensions an attacker could use to hide a command
//!   (process substitution, `$'..'`, brace expansion, `|&`, `&>`, `[[`, `coproc`). Control flow,
//!   functions, here-documents, `eval`/`source` and anything else that runs text we cannot see is
//!   refused rather than modelled.
//! - Substitutions (`$(..)`, backquotes, `<(..)`) are parsed recursively and their commands reported
//!   with `substituted`; the word that contained them keeps its source text and makes the outer
//!   command `dynamic`. A word whose value the shell computes is never accepted as a program name.
//! - Wrappers (`sudo`, `env`, `nice`, `bash -c`, `xargs`, `find -exec`, ...) are unwrapped to the
//!   command they run, recording the chain in `wrappers`. Their options are parsed from a table; an
//!   option we do not know might take a value, so it makes the line uncertain instead of a guess.
//! - Every redirection is classified by what the shell does with its target ([`Effect`]): read,
//!   write (create, truncate, append, open read-write: `>`, `>>`, `>|`, `<>`, `&>`, `&>>`,
//!   `>&file`, with a descriptor number or a `{var}`), duplicate, close, or text (`<<<`). Forms
//!   that bash and dash (`/bin/sh` on Debian) read differently are refused or taken the way that
//!   writes: `cmd &> f more` is one command to bash and two to dash. The table is checked
//!   against real bash and dash by tw-runtime's tests.
//! - What a later command inherits is recorded: variables assigned earlier in the line
//!   (`set_before`; the shell exports them if they already were) and whether a `cd`, `env -C` or
//!   `find -execdir` may have moved it to another directory (`moved`), so that the policy never
//!   places `./x` or `> out` in the wrong directory.
//! - Arithmetic is only accepted on literal numbers: bash evaluates variable values and array
//!   subscripts inside `$((..))`, `${a[..]}`, `let` and `printf -v 'a[..]'` as code, so
//!   `x='a[$(id)]'; echo $((x))` runs `id`. The same goes for assignments to variables that change
//!   how commands are found or loaded (`PATH`, `LD_PRELOAD`, `BASH_ENV`, ...).
//!
//! What stays the policy's job: programs that run code from their own arguments or environment
//! (`python -c`, `git -c core.pager=..`, `awk 'BEGIN{system(..)}'`, `PAGER=..`) and a shell reading
//! a script from stdin (`curl x | sh`, `bash <<< ..`) are reported as themselves; resolving
//! `argv[0]` and every wrapper to a path (after a `cd`, `./x` means another file) is the runtime's.
//!
//! The parts: `word` (a word after quote removal and what the shell would still expand in it),
//! `parser` (command lists, subshells, groups, simple commands and redirections; `parser::words`
//! reads one word with its quotes, expansions and substitutions), `redirect` (what a redirection
//! does to its target), `expand` (a command followed through its wrappers to every command it
//! runs), `wrappers` and `options` (how each wrapper runs its command, and its options), and
//! `checks` (what a command may not do even when its words are certain: keywords, opaque
//! builtins, sensitive variables).

mod checks;
mod expand;
mod options;
mod parser;
mod redirect;
#[cfg(test)]
mod tests;
mod word;
mod wrappers;

use serde::{Deserialize, Serialize};

use expand::{Pending, expand};
use word::Arg;

/// The deepest nesting of substitutions, subshells, groups, scripts and wrappers that is followed;
/// anything deeper is uncertain rather than a risk to the stack.
pub const MAX_DEPTH: usize = 16;

/// What the shell does with a redirection's target, by bash's rules (and dash's, which is
/// `/bin/sh` on Debian; where they differ, the one that writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Opens the file for reading: `<`.
    Read,
    /// Opens the file so that it can be written, creating it if it is missing: `>`, `>>`, `>|`,
    /// `<>`, `&>`, `&>>`, `>&FILE` and `1>&FILE` (stdout and stderr to FILE in bash), with any
    /// descriptor number or `{var}`; and `>&`/`<&` to a word only known when the shell runs.
    Write,
    /// Copies or moves a descriptor: `2>&1`, `<&3`, `1>&3-`.
    Duplicate,
    /// Closes a descriptor: `>&-`, `<&-`.
    Close,
    /// Gives the word itself as input: the here-string `<<<`.
    Text,
}

/// A redirection of one of a command's file descriptors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redirect {
    /// The operator with its descriptor, if any: `>`, `>>`, `<`, `2>`, `2>&`, `&>`, `<>`, `<<<`,
    /// `{fd}>` (bash picks a free descriptor and stores it in `fd`).
    pub op: String,
    /// The file (or descriptor, after `>&`) after quote removal.
    pub target: String,
    /// What the shell does with the target.
    pub effect: Effect,
    /// The target is only known when the shell runs (`> $OUT`, `> ~/x`, `> *.log`).
    pub expanded: bool,
}

impl Redirect {
    /// Whether the shell may create, truncate or write a file for this redirection.
    pub fn writes(&self) -> bool {
        self.effect == Effect::Write
    }
}

/// One program that a command line would run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimpleCommand {
    /// The words after quote removal, never empty. `argv[0]` is the program as written: resolving
    /// it to a path is the runtime's job. A word holding an expansion keeps its source text.
    pub argv: Vec<String>,
    /// Leading `VAR=value` words, and those given to `env` or `sudo` on the way.
    pub assignments: Vec<(String, String)>,
    /// Redirections of the command, including those of an enclosing group, subshell or wrapper.
    pub redirects: Vec<Redirect>,
    /// The wrappers this command was found inside, outermost first, each as written (`sudo`,
    /// `/usr/bin/env`) or with the flag that made it run a command (`bash -c`, `find -exec`). The
    /// policy must judge them too: `./nice git status` runs `./nice`.
    pub wrappers: Vec<String>,
    /// Some argument, assignment value or redirect target is only known when the shell runs
    /// (`$VAR`, `$(..)`, a glob, `~`), or a wrapper adds arguments (`xargs`, `find -exec`).
    pub dynamic: bool,
    /// This command itself came from inside `$(..)`, backquotes, `<(..)` or `>(..)`.
    pub substituted: bool,
    /// For each word of `argv`, whether the shell or a wrapper computes it when it runs (an
    /// expansion, a glob, a placeholder such as `find`'s `{}`): it may become any number of words,
    /// with any text.
    pub computed: Vec<bool>,
    /// A wrapper adds words after `argv` when it runs (`xargs` without `-I`).
    pub appended: bool,
    /// Variables that earlier commands of the line assigned (`X=1; cmd`) or a named descriptor
    /// set (`{fd}>f`). The shell passes them to this command if they are exported (they came from
    /// the environment, or `set -a` is on), which the line alone cannot tell.
    pub set_before: Vec<String>,
    /// Why this command may run in another directory than the one the line starts in (a `cd`
    /// earlier in the line, `env -C`, `find -execdir`): its relative paths cannot be placed.
    pub moved: Option<String>,
}

/// Everything a command line would run, or why that cannot be known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Parsed {
    /// Every command, in source order (substitutions before the command that uses them). Empty
    /// when nothing runs: a blank line, a comment or a plain assignment.
    Commands(Vec<SimpleCommand>),
    /// The line cannot be judged with certainty; the policy must deny it.
    Uncertain {
        /// The construct that could not be followed, for the policy explanation.
        reason: String,
    },
}

/// Parses a POSIX-sh-ish command line, what `sh -c LINE` would run.
pub fn parse_command_line(line: &str) -> Parsed {
    into_parsed(parser::parse_script(line, 0, Context::default()))
}

/// Expands an argv that is executed without a shell (a custom tool's rendered command): unwraps
/// its wrappers, parses the script of `sh -c SCRIPT`, and returns every command it would run.
pub fn expand_argv(argv: &[String]) -> Parsed {
    if argv.is_empty() {
        return into_parsed(Err("empty argv".to_owned()));
    }
    let command = Pending {
        args: argv.iter().map(|a| Arg::literal(a)).collect(),
        ..Pending::default()
    };
    let mut out = Vec::new();
    into_parsed(expand(command, 0, &mut out).map(|()| out))
}

/// Why setting `name` would change which program a name runs, what it loads, or what a shell
/// runs first; `None` for any other variable. For environments given outside a command line
/// (a call's `env`), judged the same way as `NAME=value` in one.
pub fn sensitive_variable(name: &str) -> Option<String> {
    checks::check_variable(name).err()
}

/// An internal result whose error is the reason a line is uncertain, shown to people as is.
type Parse<T> = Result<T, String>;

fn into_parsed(result: Parse<Vec<SimpleCommand>>) -> Parsed {
    match result {
        Ok(commands) => Parsed::Commands(commands),
        Err(reason) => Parsed::Uncertain { reason },
    }
}

fn too_deep() -> String {
    format!("nested deeper than {MAX_DEPTH} levels")
}

/// What a script inherits from the commands before it: where it runs and what it has assigned.
#[derive(Debug, Clone, Default)]
struct Context {
    /// Why the directory may have changed (see [`SimpleCommand::moved`]).
    moved: Option<String>,
    /// Variables assigned so far (see [`SimpleCommand::set_before`]).
    assigned: Vec<String>,
}

impl Context {
    fn assign(&mut self, name: &str) {
        if !self.assigned.iter().any(|n| n == name) {
            self.assigned.push(name.to_owned());
        }
    }
}
