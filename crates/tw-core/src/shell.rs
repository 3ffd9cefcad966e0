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

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

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
    into_parsed(parse_script(line, 0, Context::default()))
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

/// An internal result whose error is the reason a line is uncertain, shown to people as is.
type Parse<T> = Result<T, String>;

fn into_parsed(result: Parse<Vec<SimpleCommand>>) -> Parsed {
    match result {
        Ok(commands) => Parsed::Commands(commands),
        Err(reason) => Parsed::Uncertain { reason },
    }
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

fn parse_script(src: &str, depth: usize, ctx: Context) -> Parse<Vec<SimpleCommand>> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let mut parser = Parser {
        chars: src.chars().collect(),
        pos: 0,
        depth,
        out: Vec::new(),
        ctx,
    };
    parser.list(End::Eof)?;
    Ok(parser.out)
}

fn too_deep() -> String {
    format!("nested deeper than {MAX_DEPTH} levels")
}

/// A word after quote removal. `dynamic` names the first expansion in it, if any.
#[derive(Debug, Clone, Default)]
struct Arg {
    text: String,
    dynamic: Option<&'static str>,
}

impl Arg {
    fn literal(text: &str) -> Self {
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
struct Word {
    text: String,
    bare: String,
    expansion: Option<&'static str>,
}

impl Word {
    fn literal(&mut self, c: char, quoted: bool) {
        self.text.push(c);
        self.bare.push(if quoted { QUOTED } else { c });
    }

    fn expanded(&mut self, source: String, kind: &'static str) {
        self.text.push_str(&source);
        self.bare.push(QUOTED);
        self.expansion.get_or_insert(kind);
    }

    fn into_arg(self) -> Arg {
        let dynamic = self.expansion.or_else(|| pattern_kind(&self.bare));
        Arg {
            text: self.text,
            dynamic,
        }
    }

    /// `NAME=value` (or `NAME+=value`) with an unquoted name. Values are not globbed.
    fn assignment(&self) -> Option<(String, Arg)> {
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

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_meta(c: char) -> bool {
    " \t\n;&|()<>".contains(c)
}

/// What closes the command list being parsed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Eof,
    Paren,
    Brace,
}

/// Recursive descent over the characters of one script. Commands, including those found inside
/// substitutions, are appended to `out` in the order the shell would start them.
struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
    out: Vec<SimpleCommand>,
    ctx: Context,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.pos + n).copied()
    }

    fn advance(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.chars.len());
    }

    fn source(&self, start: usize, end: usize) -> String {
        self.chars
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .collect()
    }

    /// Whether the next word is exactly the unquoted `c` (`{`, `}`, `!` are only special so).
    fn at_word(&self, c: char) -> bool {
        self.peek() == Some(c) && self.peek_at(1).is_none_or(is_meta)
    }

    /// Moves the current character into `w`.
    fn take(&mut self, w: &mut Word, quoted: bool) {
        if let Some(c) = self.peek() {
            w.literal(c, quoted);
            self.advance(1);
        }
    }

    fn skip_blanks(&mut self) {
        loop {
            match (self.peek(), self.peek_at(1)) {
                (Some(' ' | '\t'), _) => self.advance(1),
                (Some('\\'), Some('\n')) => self.advance(2),
                _ => return,
            }
        }
    }

    fn skip_comment(&mut self) {
        while self.peek().is_some_and(|c| c != '\n') {
            self.advance(1);
        }
    }

    fn nested<T>(&mut self, body: impl FnOnce(&mut Self) -> Parse<T>) -> Parse<T> {
        if self.depth >= MAX_DEPTH {
            return Err(too_deep());
        }
        self.depth += 1;
        let result = body(self);
        self.depth -= 1;
        result
    }

    /// Commands joined by `;`, `&`, `&&`, `||`, `|`, `|&` and newlines, up to `end`.
    fn list(&mut self, end: End) -> Parse<()> {
        let mut pending_op: Option<&str> = None;
        loop {
            self.skip_blanks();
            if self.peek() == Some('#') {
                self.skip_comment();
            }
            match self.peek() {
                None => {
                    if let Some(op) = pending_op {
                        return Err(format!("line ends after `{op}`"));
                    }
                    return match end {
                        End::Eof => Ok(()),
                        End::Paren => Err("unbalanced `(`".to_owned()),
                        End::Brace => Err("unclosed `{` group".to_owned()),
                    };
                }
                Some('\n') => {
                    self.advance(1);
                    continue;
                }
                Some(')') if end == End::Paren && pending_op.is_none() => {
                    self.advance(1);
                    return Ok(());
                }
                Some(c @ (';' | '&' | '|' | ')')) => {
                    return Err(format!("empty command before `{c}`"));
                }
                _ => {}
            }
            if end == End::Brace && pending_op.is_none() && self.at_word('}') {
                self.advance(1);
                return Ok(());
            }
            self.command()?;
            pending_op = None;
            self.skip_blanks();
            match (self.peek(), self.peek_at(1)) {
                (None | Some('\n' | ')' | '#'), _) => {}
                (Some(';'), Some(';')) => return Err("`;;` outside a case statement".to_owned()),
                (Some(';'), _) => self.advance(1),
                (Some('&'), Some('&')) => {
                    self.advance(2);
                    pending_op = Some("&&");
                }
                (Some('&'), _) => self.advance(1),
                (Some('|'), Some('|')) => {
                    self.advance(2);
                    pending_op = Some("||");
                }
                (Some('|'), next) => {
                    self.advance(if next == Some('&') { 2 } else { 1 });
                    pending_op = Some("|");
                }
                (Some(c), _) => return Err(format!("unexpected `{c}` after a command")),
            }
        }
    }

    /// A simple command, a `( subshell )` or a `{ group; }` with its redirections.
    fn command(&mut self) -> Parse<()> {
        // `! cmd` only negates the exit status.
        while self.at_word('!') {
            self.advance(1);
            self.skip_blanks();
        }
        let mark = self.out.len();
        if self.peek() == Some('(') {
            if self.peek_at(1) == Some('(') {
                return Err("arithmetic command `((`".to_owned());
            }
            self.advance(1);
            self.nested(|p| p.list(End::Paren))?;
        } else if self.at_word('{') {
            self.advance(1);
            self.nested(|p| p.list(End::Brace))?;
        } else {
            return self.simple();
        }
        // Redirections after `)` or `}` apply to everything inside.
        let inside = self.out.len();
        let mut redirects = Vec::new();
        loop {
            self.skip_blanks();
            match self.redirect()? {
                Some(r) => redirects.push(r),
                None => break,
            }
        }
        for command in self.out.get_mut(mark..inside).unwrap_or_default() {
            for r in &redirects {
                command.dynamic |= r.target.dynamic.is_some();
                command.redirects.push(r.finish());
                if let Some(name) = &r.named
                    && !command.set_before.contains(name)
                {
                    command.set_before.push(name.clone());
                }
            }
        }
        Ok(())
    }

    fn simple(&mut self) -> Parse<()> {
        let mut words: Vec<Word> = Vec::new();
        let mut redirects: Vec<Redir> = Vec::new();
        // dash, which is /bin/sh on Debian, reads `cmd &> f more words` as `cmd &` and then
        // `> f more words`: a second command that bash never sees.
        let mut both_outputs: Option<String> = None;
        loop {
            self.skip_blanks();
            match self.peek() {
                None | Some('\n' | ';' | '|' | ')') => break,
                Some('&') if self.peek_at(1) != Some('>') => break,
                Some('#') => {
                    self.skip_comment();
                    break;
                }
                Some('(') => {
                    let before = words.last().map_or("", |w| w.text.as_str());
                    return Err(format!(
                        "`(` after `{before}` (function definition or array)"
                    ));
                }
                Some(c) => {
                    if let Some(r) = self.redirect()? {
                        if r.op.starts_with('&') {
                            both_outputs
                                .get_or_insert_with(|| format!("{}{}", r.op, r.target.text));
                        }
                        redirects.push(r);
                        continue;
                    }
                    let start = self.pos;
                    let word = self.word()?;
                    if self.pos == start {
                        return Err(format!("unexpected `{c}`"));
                    }
                    if let Some(r) = &both_outputs {
                        return Err(format!(
                            "`{r}` before `{}`: bash redirects, but POSIX sh (dash) runs the \
                             command in the background and the words after it as another command",
                            word.text
                        ));
                    }
                    words.push(word);
                }
            }
        }
        let mut words = words.into_iter().peekable();
        let mut assignments = Vec::new();
        while let Some(a) = words.peek().and_then(Word::assignment) {
            assignments.push(a);
            words.next();
        }
        let args: Vec<Arg> = words.map(Word::into_arg).collect();
        for name in redirects.iter().filter_map(|r| r.named.as_ref()) {
            check_variable(name)?;
            self.ctx.assign(name);
        }
        let command = Pending {
            assignments,
            args,
            redirects,
            set_before: self.ctx.assigned.clone(),
            moved: self.ctx.moved.clone(),
            ..Pending::default()
        };
        // A bare assignment stays set for the rest of the line.
        if command.args.is_empty() {
            for (name, _) in &command.assignments {
                self.ctx.assign(name);
            }
        }
        let mark = self.out.len();
        expand(command, self.depth, &mut self.out)?;
        // After `cd`, relative paths of later commands name other files.
        if let Some(cd) = self
            .out
            .get(mark..)
            .unwrap_or_default()
            .iter()
            .find_map(|c| {
                let program = c.argv.first()?;
                let name = program.rsplit('/').next().unwrap_or(program);
                ["cd", "pushd", "popd"]
                    .contains(&name)
                    .then(|| name.to_owned())
            })
        {
            self.ctx
                .moved
                .get_or_insert(format!("`{cd}` earlier in the line changes the directory"));
        }
        Ok(())
    }

    /// A redirection operator (with its optional descriptor number or `{var}`) and its target,
    /// if one starts here.
    fn redirect(&mut self) -> Parse<Option<Redir>> {
        const OPS: [&str; 11] = [
            "&>>", "&>", "<<<", "<<", ">>", ">|", ">&", "<&", "<>", ">", "<",
        ];
        let mut at = self.pos;
        let mut named = None;
        if self.peek() == Some('{') {
            // `{var}>file`: bash opens the file on a descriptor it picks and stores the number in
            // `var`; the word is not an argument.
            let mut end = at + 1;
            while self
                .chars
                .get(end)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                end += 1;
            }
            let name = self.source(at + 1, end);
            if self.chars.get(end) == Some(&'}') && is_name(&name) {
                named = Some(name);
                at = end + 1;
            }
        } else {
            while self.chars.get(at).is_some_and(char::is_ascii_digit) {
                at += 1;
            }
        }
        let ahead: String = self.chars.iter().skip(at).take(3).collect();
        let Some(op) = OPS.iter().find(|op| ahead.starts_with(*op)) else {
            return Ok(None);
        };
        let prefixed = at > self.pos;
        let process_substitution = op.len() == 1 && ahead[1..].starts_with('(');
        // `2&>f` and `{v}&>f` are a word followed by `&>f`, in bash too.
        if process_substitution || (prefixed && op.starts_with('&')) {
            return Ok(None);
        }
        if *op == "<<" {
            return Err("here-document `<<` (its body is not parsed)".to_owned());
        }
        let fd = self.source(self.pos, at);
        self.pos = at;
        self.advance(op.len());
        self.skip_blanks();
        let substitution = matches!((self.peek(), self.peek_at(1)), (Some('<' | '>'), Some('(')));
        if self.peek().is_none_or(is_meta) && !substitution {
            return Err(format!("redirection `{fd}{op}` without a target"));
        }
        let target = self.word()?.into_arg();
        let effect = effect(op, &fd, &target)?;
        Ok(Some(Redir {
            op: format!("{fd}{op}"),
            target,
            effect,
            named,
        }))
    }

    /// One word up to an unquoted metacharacter, substitutions included.
    fn word(&mut self) -> Parse<Word> {
        let mut w = Word::default();
        while let Some(c) = self.peek() {
            match c {
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    let start = self.pos;
                    self.advance(2);
                    self.substitution(|p| p.list(End::Paren))?;
                    w.expanded(self.source(start, self.pos), "process substitution");
                }
                c if is_meta(c) => break,
                '\\' => {
                    self.advance(1);
                    match self.peek() {
                        Some('\n') => self.advance(1),
                        Some(_) => self.take(&mut w, true),
                        None => w.literal('\\', false),
                    }
                }
                '\'' => self.single_quoted(&mut w)?,
                '"' => self.double_quoted(&mut w)?,
                '$' => self.dollar(&mut w, false)?,
                '`' => self.backtick(&mut w)?,
                _ => self.take(&mut w, false),
            }
        }
        Ok(w)
    }

    fn single_quoted(&mut self, w: &mut Word) -> Parse<()> {
        self.advance(1);
        loop {
            match self.peek() {
                None => return Err("unbalanced single quote".to_owned()),
                Some('\'') => {
                    self.advance(1);
                    return Ok(());
                }
                Some(_) => self.take(w, true),
            }
        }
    }

    fn double_quoted(&mut self, w: &mut Word) -> Parse<()> {
        self.advance(1);
        loop {
            match (self.peek(), self.peek_at(1)) {
                (None, _) => return Err("unbalanced double quote".to_owned()),
                (Some('"'), _) => {
                    self.advance(1);
                    return Ok(());
                }
                (Some('\\'), Some('\n')) => self.advance(2),
                (Some('\\'), Some(c @ ('"' | '\\' | '$' | '`'))) => {
                    w.literal(c, true);
                    self.advance(2);
                }
                (Some('$'), _) => self.dollar(w, true)?,
                (Some('`'), _) => self.backtick(w)?,
                (Some(_), _) => self.take(w, true),
            }
        }
    }

    /// Everything starting with `$`: substitutions, parameters, `$'..'`, `$".."`.
    fn dollar(&mut self, w: &mut Word, in_double_quotes: bool) -> Parse<()> {
        let start = self.pos;
        let kind = match (self.peek_at(1), self.peek_at(2)) {
            (Some('('), Some('(')) => {
                self.arithmetic()?;
                "arithmetic expansion"
            }
            (Some('('), _) => {
                self.advance(2);
                self.substitution(|p| p.list(End::Paren))?;
                "command substitution"
            }
            (Some('['), _) => return Err("arithmetic expansion `$[`".to_owned()),
            (Some('{'), _) => {
                self.advance(2);
                self.nested(Self::braced)?;
                "parameter expansion"
            }
            (Some('\''), _) if !in_double_quotes => {
                self.advance(2);
                self.ansi_c()?;
                "ANSI-C quoting"
            }
            (Some('"'), _) if !in_double_quotes => {
                self.advance(1);
                self.double_quoted(&mut Word::default())?;
                "locale translation"
            }
            (Some(c), _) if c.is_ascii_alphabetic() || c == '_' => {
                self.advance(1);
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.advance(1);
                }
                "parameter expansion"
            }
            (Some(c), _) if c.is_ascii_digit() || "@*#?-$!".contains(c) => {
                self.advance(2);
                "parameter expansion"
            }
            _ => {
                w.literal('$', in_double_quotes);
                self.advance(1);
                return Ok(());
            }
        };
        w.expanded(self.source(start, self.pos), kind);
        Ok(())
    }

    fn arithmetic(&mut self) -> Parse<()> {
        self.advance(3);
        let mut open = 0usize;
        loop {
            match self.peek() {
                None => return Err("unbalanced `$((`".to_owned()),
                Some('(') => open += 1,
                Some(')') if open > 0 => open -= 1,
                Some(')') if self.peek_at(1) == Some(')') => {
                    self.advance(2);
                    return Ok(());
                }
                Some(')') => return Err("unbalanced `$((`".to_owned()),
                Some(c) if c.is_ascii_digit() || " \t+-*/%<>=!&|^~?:,".contains(c) => {}
                Some(c) => {
                    return Err(format!(
                        "arithmetic expansion with `{c}`: bash evaluates names and substitutions in it as code"
                    ));
                }
            }
            self.advance(1);
        }
    }

    /// The body of `${..}`, which may nest quotes and substitutions.
    fn braced(&mut self) -> Parse<()> {
        let start = self.pos;
        loop {
            match self.peek() {
                None => return Err("unbalanced `${`".to_owned()),
                Some('}') => break,
                Some('\\') => self.advance(2),
                Some('\'') => self.single_quoted(&mut Word::default())?,
                Some('"') => self.double_quoted(&mut Word::default())?,
                Some('$') => self.dollar(&mut Word::default(), false)?,
                Some('`') => self.backtick(&mut Word::default())?,
                Some(_) => self.advance(1),
            }
        }
        let body = self.source(start, self.pos);
        self.advance(1);
        let after_name = body
            .trim_start_matches('#')
            .trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
        if body.starts_with('!') {
            return Err(format!("indirect expansion `${{{body}}}`"));
        }
        if after_name.starts_with('[') {
            return Err(format!(
                "array subscript in `${{{body}}}`: bash evaluates it as code"
            ));
        }
        if body.contains("@P") {
            return Err(format!(
                "prompt expansion `${{{body}}}` runs substitutions in a value"
            ));
        }
        Ok(())
    }

    fn ansi_c(&mut self) -> Parse<()> {
        loop {
            match self.peek() {
                None => return Err("unbalanced `$'`".to_owned()),
                Some('\\') => self.advance(2),
                Some('\'') => {
                    self.advance(1);
                    return Ok(());
                }
                Some(_) => self.advance(1),
            }
        }
    }

    /// A backquoted substitution: its text is unescaped once, then parsed as a script.
    fn backtick(&mut self, w: &mut Word) -> Parse<()> {
        let start = self.pos;
        self.advance(1);
        let mut inner = String::new();
        loop {
            match (self.peek(), self.peek_at(1)) {
                (None, _) => return Err("unbalanced backquote".to_owned()),
                (Some('`'), _) => break,
                (Some('\\'), Some(c @ ('$' | '`' | '\\'))) => {
                    inner.push(c);
                    self.advance(2);
                }
                (Some(c), _) => {
                    inner.push(c);
                    self.advance(1);
                }
            }
        }
        self.advance(1);
        let ctx = self.ctx.clone();
        let commands = self.nested(|p| parse_script(&inner, p.depth, ctx))?;
        self.out.extend(commands.into_iter().map(|mut c| {
            c.substituted = true;
            c
        }));
        w.expanded(self.source(start, self.pos), "command substitution");
        Ok(())
    }

    fn substitution(&mut self, body: impl FnOnce(&mut Self) -> Parse<()>) -> Parse<()> {
        let mark = self.out.len();
        self.nested(body)?;
        for command in self.out.iter_mut().skip(mark) {
            command.substituted = true;
        }
        Ok(())
    }
}

/// A redirection as the parser found it.
#[derive(Debug, Clone)]
struct Redir {
    op: String,
    target: Arg,
    effect: Effect,
    /// The variable of a `{var}>` redirection.
    named: Option<String>,
}

impl Redir {
    fn finish(&self) -> Redirect {
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
fn effect(op: &str, fd: &str, target: &Arg) -> Parse<Effect> {
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

/// A command whose words are known but whose wrappers are not yet unwrapped.
#[derive(Debug, Clone, Default)]
struct Pending {
    assignments: Vec<(String, Arg)>,
    args: Vec<Arg>,
    redirects: Vec<Redir>,
    wrappers: Vec<String>,
    dynamic: bool,
    appended: bool,
    set_before: Vec<String>,
    moved: Option<String>,
}

impl Pending {
    fn finish(self) -> SimpleCommand {
        let dynamic = self.dynamic
            || self.args.iter().any(|a| a.dynamic.is_some())
            || self.assignments.iter().any(|(_, v)| v.dynamic.is_some())
            || self.redirects.iter().any(|r| r.target.dynamic.is_some());
        SimpleCommand {
            computed: self.args.iter().map(|a| a.dynamic.is_some()).collect(),
            argv: self.args.into_iter().map(|a| a.text).collect(),
            assignments: self
                .assignments
                .into_iter()
                .map(|(n, v)| (n, v.text))
                .collect(),
            redirects: self.redirects.iter().map(Redir::finish).collect(),
            wrappers: self.wrappers,
            dynamic,
            substituted: false,
            appended: self.appended,
            set_before: self.set_before,
            moved: self.moved,
        }
    }

    /// The command a wrapper runs, inheriting the wrapper's chain, environment and redirections.
    fn enter(mut self, inner: Inner) -> Self {
        self.wrappers.push(inner.label);
        self.assignments.extend(inner.assignments);
        self.args = inner.args;
        self.dynamic |= inner.dynamic;
        self.appended |= inner.appended;
        if let Some(why) = inner.moved {
            self.moved.get_or_insert(why);
        }
        if let Some(placeholder) = &inner.placeholder {
            for arg in self
                .args
                .iter_mut()
                .filter(|a| a.text.contains(placeholder))
            {
                arg.dynamic
                    .get_or_insert("a placeholder replaced per input");
            }
        }
        self
    }
}

/// How a program relates to the commands it runs.
enum Step {
    /// Not a wrapper, or a wrapper with nothing to run: judge the program itself.
    Run,
    /// Nothing runs (`command -v`, a bare `exec`).
    Nothing,
    Inner(Inner),
    /// A shell script given as text (`bash -c SCRIPT`, `flock -c`, `watch`).
    Script {
        label: String,
        script: Arg,
    },
    /// `find` itself and each command it runs with `-exec`.
    Find(Vec<Inner>),
}

/// The command a wrapper runs and what the wrapper adds to it.
struct Inner {
    label: String,
    args: Vec<Arg>,
    assignments: Vec<(String, Arg)>,
    dynamic: bool,
    /// The wrapper adds arguments after `args` (`xargs`).
    appended: bool,
    placeholder: Option<String>,
    /// Why the wrapper runs the command in another directory.
    moved: Option<String>,
}

impl Inner {
    fn new(label: &str, args: &[Arg]) -> Self {
        Self {
            label: label.to_owned(),
            args: args.to_vec(),
            assignments: Vec::new(),
            dynamic: false,
            appended: false,
            placeholder: None,
            moved: None,
        }
    }
}

/// Unwraps `command` and appends every command it runs to `out`.
fn expand(command: Pending, depth: usize, out: &mut Vec<SimpleCommand>) -> Parse<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    for (name, _) in &command.assignments {
        check_variable(name)?;
    }
    let Some(program) = command.args.first() else {
        return nothing_runs(&command);
    };
    check_program(program)?;
    let mut command = command;
    command.redirects.extend(wrapper_writes(&command.args));
    match unwrap(&command.args)? {
        Step::Run => {
            check_arguments(&command.args)?;
            out.push(command.finish());
        }
        Step::Nothing => nothing_runs(&command)?,
        Step::Inner(inner) => expand(command.enter(inner), depth + 1, out)?,
        Step::Find(execs) => {
            out.push(command.clone().finish());
            for inner in execs {
                expand(command.clone().enter(inner), depth + 1, out)?;
            }
        }
        Step::Script { label, script } => {
            if let Some(why) = script.dynamic {
                return Err(format!("the script of `{label}` is not known ({why})"));
            }
            let mut outer = command;
            outer.args = Vec::new();
            outer.wrappers.push(label);
            let outer = outer.finish();
            // The script's shell inherits the directory and whatever was exported to it.
            let mut ctx = Context {
                moved: outer.moved.clone(),
                assigned: Vec::new(),
            };
            for name in &outer.set_before {
                ctx.assign(name);
            }
            for mut inner in parse_script(&script.text, depth + 1, ctx)? {
                inner.wrappers.splice(0..0, outer.wrappers.iter().cloned());
                inner
                    .assignments
                    .splice(0..0, outer.assignments.iter().cloned());
                inner
                    .redirects
                    .splice(0..0, outer.redirects.iter().cloned());
                inner.dynamic |= outer.dynamic;
                out.push(inner);
            }
        }
    }
    Ok(())
}

/// No program runs, but the shell still opens redirect targets: `> file` truncates it.
fn nothing_runs(command: &Pending) -> Parse<()> {
    let harmless = |r: &Redir| {
        r.target.dynamic.is_none()
            && (r.target.text == "/dev/null"
                || matches!(r.effect, Effect::Duplicate | Effect::Close))
    };
    match command.redirects.iter().find(|r| !harmless(r)) {
        Some(r) => Err(format!(
            "redirection `{}{}` without a command",
            r.op, r.target.text
        )),
        None => Ok(()),
    }
}

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

fn check_program(program: &Arg) -> Parse<()> {
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

/// Why setting `name` would change which program a name runs, what it loads, or what a shell
/// runs first; `None` for any other variable. For environments given outside a command line
/// (a call's `env`), judged the same way as `NAME=value` in one.
pub fn sensitive_variable(name: &str) -> Option<String> {
    check_variable(name).err()
}

/// Variables that change which program a name runs, what it loads, or what a shell runs first.
fn check_variable(name: &str) -> Parse<()> {
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
fn check_arguments(args: &[Arg]) -> Parse<()> {
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

/// Each wrapper's options, getopt style: a `:` after a short option and a `=` after a long one
/// mark those that take a value. Anything not listed makes the line uncertain, because an unknown
/// option may take a value and shift where the command starts.
#[rustfmt::skip] // a table reads best one wrapper per line
const WRAPPER_OPTIONS: &[(&str, &str, &str)] = &[
    ("nice",    "n:",       "adjustment="),
    ("ionice",  "c:n:t",    "class= classdata= ignore"),
    ("setsid",  "fwc",      "fork wait ctty"),
    ("stdbuf",  "i:o:e:",   "input= output= error="),
    ("time",    "pvaqo:f:", "portability verbose append quiet output= format="),
    ("strace",  "cCdDfFhiknqrtTvVwxyYzZa:b:e:E:I:o:O:P:s:S:u:U:X:", ""),
    ("ltrace",  "bcCdDfhiLrStTVa:A:e:F:l:n:o:s:u:w:x:X:", ""),
    ("env",     "i0vu:C:S:", "ignore-environment null debug unset= chdir= split-string="),
    ("timeout", "vfps:k:",  "preserve-status foreground verbose signal= kill-after="),
    ("command", "pvV",      ""),
    ("exec",    "cla:",     ""),
    ("doas",    "nsLu:a:",  ""),
    ("chroot",  "",         "skip-chdir userspec= groups="),
    ("sudo",    "AbEHiKknPSsBNu:g:C:D:p:r:t:T:U:R:", "askpass background preserve-env set-home \
        login non-interactive stdin shell preserve-groups user= group= chdir= prompt= role= type= \
        close-from= command-timeout= other-user= chroot="),
    ("flock",   "sxeunoFvw:E:", "shared exclusive unlock nonblock nb close no-fork verbose \
        fcntl timeout= wait= conflict-exit-code="),
    ("watch",   "bcCdegprtwxn:q:", "differences precise no-title beep errexit chgexit color \
        no-color exec no-wrap no-rerun interval= equexit="),
    ("xargs",   "0rtpxon:L:I:d:P:s:a:E:", "null no-run-if-empty verbose interactive exit \
        open-tty replace max-args= max-lines= delimiter= max-procs= max-chars= arg-file= eof= \
        process-slot-var="),
];
/// Wrappers that take options and then run the rest of their arguments as a command.
const PLAIN_WRAPPERS: [&str; 9] = [
    "nice", "ionice", "nohup", "builtin", "setsid", "stdbuf", "time", "strace", "ltrace",
];
const SHELLS: [&str; 10] = [
    "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "posh", "rbash",
];

/// Options seen while skipping a wrapper's options, with their values.
type Seen = Vec<(String, Option<String>)>;

/// Skips the options of `tool` at the start of `args`, returning where its operands start.
fn options(tool: &str, args: &[Arg]) -> Parse<(usize, Seen)> {
    let (short, long) = WRAPPER_OPTIONS
        .iter()
        .find(|(name, ..)| *name == tool)
        .map_or(("", ""), |(_, short, long)| (*short, *long));
    // Whether long option `name` takes a value, if it exists.
    let long_takes_value = |name: &str| {
        long.split_whitespace()
            .find(|o| o.trim_end_matches('=') == name)
            .map(|o| o.ends_with('='))
    };
    let mut seen = Vec::new();
    let mut i = 0;
    // A value in the next argument; an expansion there could split into more words.
    let next_value = |i: &mut usize, option: &str| match args.get(*i) {
        Some(arg) if arg.dynamic.is_none() => {
            *i += 1;
            Ok(arg.text.clone())
        }
        Some(arg) => Err(not_known(&arg.text, tool)),
        None => Err(format!("option `{option}` of `{tool}` needs a value")),
    };
    while let Some(arg) = args.get(i) {
        let a = arg.text.as_str();
        if arg.dynamic.is_some() {
            return Err(not_known(a, tool));
        }
        if a == "--" {
            return Ok((i + 1, seen));
        }
        if a == "-" || !a.starts_with('-') {
            break;
        }
        i += 1;
        if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let value = match (long_takes_value(name), inline) {
                (Some(true), None) => Some(next_value(&mut i, a)?),
                (Some(_), inline) => inline,
                (None, _) => return Err(unknown_option(tool, a)),
            };
            seen.push((format!("--{name}"), value));
            continue;
        }
        for (at, c) in a.char_indices().skip(1) {
            let Some(found) = short.find(c).filter(|_| c != ':') else {
                return Err(unknown_option(tool, &format!("-{c}")));
            };
            let option = format!("-{c}");
            if !short[found + 1..].starts_with(':') {
                seen.push((option, None));
                continue;
            }
            let attached = &a[at + c.len_utf8()..];
            let value = if attached.is_empty() {
                next_value(&mut i, &option)?
            } else {
                attached.to_owned()
            };
            seen.push((option, Some(value)));
            break;
        }
    }
    Ok((i, seen))
}

fn unknown_option(tool: &str, option: &str) -> String {
    format!("unknown option `{option}` to `{tool}`")
}

fn not_known(text: &str, tool: &str) -> String {
    format!("`{text}` is expanded by the shell before the command of `{tool}`")
}

fn tail(args: &[Arg], at: usize) -> &[Arg] {
    args.get(at..).unwrap_or_default()
}

fn inner_or(label: &str, args: &[Arg], empty: Step) -> Step {
    if args.is_empty() {
        empty
    } else {
        Step::Inner(Inner::new(label, args))
    }
}

fn seen_any(seen: &Seen, options: &[&str]) -> bool {
    seen.iter().any(|(o, _)| options.contains(&o.as_str()))
}

/// What running `args` does, recognising wrappers by the basename of the program.
fn unwrap(args: &[Arg]) -> Parse<Step> {
    let Some((program, rest)) = args.split_first() else {
        return Ok(Step::Run);
    };
    let written = program.text.as_str();
    let name = written.rsplit('/').next().unwrap_or(written);
    if PLAIN_WRAPPERS.contains(&name) {
        // `nice -5 cmd` is the old spelling of `nice -n 5 cmd`.
        let numeric = rest.first().is_some_and(|a| {
            a.text
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        });
        let skip = usize::from(name == "nice" && numeric);
        let (at, _) = options(name, tail(rest, skip))?;
        return Ok(inner_or(written, tail(rest, skip + at), Step::Run));
    }
    let step = match name {
        "env" => {
            let (at, seen) = options(name, rest)?;
            if seen_any(&seen, &["-S", "--split-string"]) {
                return Err("`env -S` splits a string into a command line".to_owned());
            }
            let at = at + usize::from(tail(rest, at).first().is_some_and(|a| a.text == "-"));
            let (at, assignments) = leading_assignments(name, rest, at, false)?;
            let mut inner = Inner::new(written, tail(rest, at));
            inner.assignments = assignments;
            if seen_any(&seen, &["-C", "--chdir"]) {
                inner.moved = Some(format!("`{written} -C` runs it in another directory"));
            }
            if inner.args.is_empty() {
                Step::Run
            } else {
                Step::Inner(inner)
            }
        }
        "sudo" | "doas" => {
            let (at, seen) = options(name, rest)?;
            let (at, assignments) = leading_assignments(name, rest, at, name == "doas")?;
            let shell = seen_any(&seen, &["-i", "-s", "--login", "--shell"]);
            if at >= rest.len() {
                if shell {
                    return Err(format!("`{name}` without a command opens a shell"));
                }
                return Ok(Step::Run);
            }
            // With -s/-i sudo escapes the command for the target shell, except `$`.
            if shell && tail(rest, at).iter().any(|a| a.text.contains('$')) {
                return Err(format!("`{name} -s` expands `$` in its command"));
            }
            let mut inner = Inner::new(written, tail(rest, at));
            inner.assignments = assignments;
            if seen_any(&seen, &["-D", "--chdir"]) {
                inner.moved = Some(format!("`{written} -D` runs it in another directory"));
            }
            Step::Inner(inner)
        }
        "timeout" => {
            let (at, _) = options(name, rest)?;
            inner_or(written, tail(rest, at + 1), Step::Run)
        }
        "command" => {
            let (at, seen) = options(name, rest)?;
            if seen_any(&seen, &["-v", "-V"]) {
                Step::Nothing
            } else {
                inner_or(written, tail(rest, at), Step::Nothing)
            }
        }
        "exec" => {
            let (at, _) = options(name, rest)?;
            inner_or(written, tail(rest, at), Step::Nothing)
        }
        "chroot" => {
            let (at, _) = options(name, rest)?;
            if tail(rest, at + 1).is_empty() {
                return Err("`chroot` without a command runs an interactive shell".to_owned());
            }
            inner_or(written, tail(rest, at + 1), Step::Run)
        }
        "flock" => {
            let (at, _) = options(name, rest)?;
            let after = tail(rest, at + 1);
            match after.first().map(|a| a.text.as_str()) {
                None => Step::Run,
                Some("-c" | "--command") => match after.get(1) {
                    Some(script) => Step::Script {
                        label: format!("{written} -c"),
                        script: script.clone(),
                    },
                    None => return Err("`flock -c` without a command".to_owned()),
                },
                Some(_) => inner_or(written, after, Step::Run),
            }
        }
        "watch" => {
            let (at, seen) = options(name, rest)?;
            let command = tail(rest, at);
            if command.is_empty() || seen_any(&seen, &["-x", "--exec"]) {
                inner_or(written, command, Step::Run)
            } else {
                // Without -x, watch joins its arguments and hands them to `sh -c`.
                let text: Vec<&str> = command.iter().map(|a| a.text.as_str()).collect();
                let dynamic = command.iter().find_map(|a| a.dynamic);
                Step::Script {
                    label: written.to_owned(),
                    script: Arg {
                        text: text.join(" "),
                        dynamic,
                    },
                }
            }
        }
        "xargs" => {
            let (at, seen) = options(name, rest)?;
            let mut inner = Inner::new(written, tail(rest, at));
            if inner.args.is_empty() {
                inner.args.push(Arg::literal("echo"));
            }
            inner.dynamic = true;
            inner.placeholder = seen.into_iter().find_map(|(o, v)| match o.as_str() {
                "-I" => v,
                "--replace" => Some(v.unwrap_or_else(|| "{}".to_owned())),
                _ => None,
            });
            // With -I each input line replaces the placeholder; otherwise it is appended.
            inner.appended = inner.placeholder.is_none();
            Step::Inner(inner)
        }
        "find" => find(written, rest)?,
        "busybox" => match rest.first() {
            Some(applet) if !applet.text.starts_with('-') => inner_or(written, rest, Step::Run),
            _ => Step::Run,
        },
        _ if SHELLS.contains(&name) => shell(name, written, rest)?,
        _ => Step::Run,
    };
    Ok(step)
}

/// Files a wrapper itself writes, as writing redirections of the command it runs: the output
/// file of `strace -o`, `ltrace -o` and `time -o`, and the lock file `flock` creates. A tracer may
/// add a process id to the name, so its file is never a known path.
fn wrapper_writes(args: &[Arg]) -> Vec<Redir> {
    let Some((program, rest)) = args.split_first() else {
        return Vec::new();
    };
    let name = program.text.rsplit('/').next().unwrap_or(&program.text);
    let Ok((at, seen)) = options(name, rest) else {
        return Vec::new();
    };
    let write = |op: String, target: Arg| Redir {
        op,
        target,
        effect: Effect::Write,
        named: None,
    };
    match name {
        "strace" | "ltrace" | "time" => seen
            .into_iter()
            .filter(|(o, _)| o == "-o" || o == "--output")
            .filter_map(|(o, v)| {
                let dynamic = (name != "time").then_some("a file name the tracer extends");
                Some(write(format!("{name} {o} "), Arg { text: v?, dynamic }))
            })
            .collect(),
        "flock" => match rest.get(at) {
            Some(file) if !file.text.chars().all(|c| c.is_ascii_digit()) => {
                vec![write("flock ".to_owned(), file.clone())]
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// `VAR=value` words a wrapper takes before its command. `env` accepts any name; `sudo` only
/// shell names.
fn leading_assignments(
    tool: &str,
    args: &[Arg],
    mut at: usize,
    none: bool,
) -> Parse<(usize, Vec<(String, Arg)>)> {
    let mut assignments = Vec::new();
    while let Some(arg) = args.get(at).filter(|_| !none) {
        let Some((name, value)) = arg.text.split_once('=') else {
            break;
        };
        if name.is_empty() || (tool != "env" && !is_name(name)) {
            break;
        }
        if arg.dynamic.is_some() {
            return Err(not_known(&arg.text, tool));
        }
        assignments.push((name.to_owned(), Arg::literal(value)));
        at += 1;
    }
    Ok((at, assignments))
}

/// `find` runs the commands after `-exec`, `-execdir`, `-ok` and `-okdir` up to `;` or `{} +`.
fn find(written: &str, rest: &[Arg]) -> Parse<Step> {
    if let Some(arg) = rest.iter().find(|a| a.dynamic.is_some()) {
        return Err(format!(
            "`find` argument `{}` is expanded by the shell and could add -exec",
            arg.text
        ));
    }
    let mut execs = Vec::new();
    let mut i = 0;
    while let Some(arg) = rest.get(i) {
        i += 1;
        let action = arg.text.as_str();
        if !matches!(action, "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let start = i;
        loop {
            let Some(word) = rest.get(i) else {
                return Err(format!("`find {action}` without a closing `;` or `+`"));
            };
            let after_braces = i > start && rest.get(i - 1).is_some_and(|p| p.text == "{}");
            if word.text == ";" || (word.text == "+" && after_braces) {
                break;
            }
            i += 1;
        }
        let command = rest.get(start..i).unwrap_or_default();
        if command.is_empty() {
            return Err(format!("`find {action}` without a command"));
        }
        let mut inner = Inner::new(&format!("{written} {action}"), command);
        inner.dynamic = true;
        inner.placeholder = Some("{}".to_owned());
        if action.ends_with("dir") {
            inner.moved = Some(format!(
                "`{written} {action}` runs it in the directory of each file found"
            ));
        }
        execs.push(inner);
        i += 1;
    }
    Ok(if execs.is_empty() {
        Step::Run
    } else {
        Step::Find(execs)
    })
}

/// A shell runs its `-c SCRIPT`; with a script file or stdin it is judged as itself.
fn shell(name: &str, written: &str, rest: &[Arg]) -> Parse<Step> {
    const FLAGS: &str = "abefhiklmnprstuvxBCEHPT";
    const LONG: [&str; 7] = [
        "norc",
        "noprofile",
        "login",
        "posix",
        "noediting",
        "restricted",
        "verbose",
    ];
    const LONG_WITH_VALUE: [&str; 2] = ["rcfile", "init-file"];
    let mut i = 0;
    let mut command = false;
    while let Some(arg) = rest.get(i) {
        let a = arg.text.as_str();
        if arg.dynamic.is_some() {
            if command {
                break; // the script, judged below
            }
            return Err(not_known(a, name));
        }
        if a == "-" || a == "--" {
            i += 1;
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            if LONG_WITH_VALUE.contains(&long) {
                i += 1;
            } else if !LONG.contains(&long) {
                return Err(unknown_option(name, a));
            }
            i += 1;
            continue;
        }
        let Some(flags) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) else {
            break;
        };
        i += 1;
        for c in flags.chars() {
            match c {
                'c' if a.starts_with('-') => command = true,
                // `-o pipefail`, `-O extglob`: the option name is the next word.
                'o' | 'O' => i += 1,
                c if FLAGS.contains(c) => {}
                _ => return Err(unknown_option(name, &format!("-{c}"))),
            }
        }
    }
    if let Some(arg) = rest
        .get(..i)
        .unwrap_or(rest)
        .iter()
        .find(|a| a.dynamic.is_some())
    {
        return Err(not_known(&arg.text, name));
    }
    if !command {
        return Ok(Step::Run);
    }
    match rest.get(i) {
        Some(script) => Ok(Step::Script {
            label: format!("{written} -c"),
            script: script.clone(),
        }),
        None => Err(format!("`{name} -c` without a script")),
    }
}
