//! Reading one word: quotes and escapes, `$` expansions (parameters, arithmetic on literal numbers
//! only, `${..}` without indirection or subscripts, `$'..'`), and substitutions (`$(..)`,
//! backquotes, `<(..)`, `>(..)`), whose commands are parsed as scripts of their own and reported
//! as substituted. The word keeps the source text of every expansion.

use super::super::Parse;
use super::super::word::{Word, is_meta};
use super::{End, Parser, parse_script};

impl Parser {
    /// One word up to an unquoted metacharacter, substitutions included.
    pub(super) fn word(&mut self) -> Parse<Word> {
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
