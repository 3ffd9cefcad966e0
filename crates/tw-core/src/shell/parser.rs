//! The grammar of a script: command lists joined by `;`, `&`, `&&`, `||`, `|` and newlines,
//! subshells, `{ }` groups and simple commands with their assignments and redirections. Each
//! simple command is handed to `expand` as soon as it is read, so commands come out in the order
//! the shell would start them, substitutions first. Reading one word (quotes, escapes, `$`
//! expansions and substitutions) is in `words`.

use super::checks::check_variable;
use super::expand::{Pending, expand};
use super::redirect::{Redir, effect};
use super::word::{Arg, Word, is_meta, is_name};
use super::{Context, MAX_DEPTH, Parse, SimpleCommand, too_deep};

mod words;

/// Parses one script (a line, a substitution's body or a `-c` script) `depth` levels down, in
/// what it inherits from the commands before it.
pub(super) fn parse_script(src: &str, depth: usize, ctx: Context) -> Parse<Vec<SimpleCommand>> {
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
        let (words, redirects) = self.simple_words()?;
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

    /// The words and redirections of a simple command, up to the operator or the end that closes
    /// it.
    fn simple_words(&mut self) -> Parse<(Vec<Word>, Vec<Redir>)> {
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
        Ok((words, redirects))
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
}
