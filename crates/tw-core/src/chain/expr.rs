//! `when`: the small expression language that decides whether a step runs. It reads references
//! leniently (a missing field or a step without output is `null`), compares with `==`, `!=`,
//! `<`, `<=`, `>`, `>=`, joins with `&&`, `||`, `!` and parentheses, and takes the truth of a
//! lone value the way people expect: `null`, `false`, `0`, `""`, `[]` and `{}` are false.
//!
//! Parsing is bounded (length and nesting) so a hostile chain file cannot exhaust the stack.

use std::fmt;

use serde_json::Value;

use super::reference::{MAX_REFERENCE, Ref, Scope, parse_ref_prefix};

/// How deep parentheses and `!` may nest.
const MAX_DEPTH: usize = 32;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A `when` expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal value.
    Literal(Value),
    /// A reference, read leniently.
    Ref(Ref),
    /// `!e`
    Not(Box<Expr>),
    /// `a && b`
    And(Box<Expr>, Box<Expr>),
    /// `a || b`
    Or(Box<Expr>, Box<Expr>),
    /// `a OP b`
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
}

/// Why an expression does not parse: what, and at which byte.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {at}: {message}")]
pub struct ExprError {
    /// Byte offset in the expression.
    pub at: usize,
    /// What is wrong.
    pub message: String,
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, ExprError> {
        Err(ExprError {
            at: self.at,
            message: message.into(),
        })
    }

    fn skip_ws(&mut self) {
        while self
            .text
            .as_bytes()
            .get(self.at)
            .is_some_and(u8::is_ascii_whitespace)
        {
            self.at += 1;
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        if self.text[self.at..].starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn nest(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(format!("nested more than {MAX_DEPTH} deep"));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.and()?;
        while self.eat("||") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.not()?;
        while self.eat("&&") {
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, ExprError> {
        self.skip_ws();
        if self.text[self.at..].starts_with('!') && !self.text[self.at..].starts_with("!=") {
            self.at += 1;
            self.nest()?;
            let inner = self.not()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Expr, ExprError> {
        let left = self.atom()?;
        self.skip_ws();
        let rest = &self.text[self.at..];
        let op = [
            ("==", CmpOp::Eq),
            ("!=", CmpOp::Ne),
            ("<=", CmpOp::Le),
            (">=", CmpOp::Ge),
            ("<", CmpOp::Lt),
            (">", CmpOp::Gt),
        ]
        .into_iter()
        .find(|(t, _)| rest.starts_with(t));
        let Some((token, op)) = op else {
            return Ok(left);
        };
        self.at += token.len();
        let right = self.atom()?;
        Ok(Expr::Cmp(op, Box::new(left), Box::new(right)))
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        self.skip_ws();
        let rest = &self.text[self.at..];
        let Some(c) = rest.chars().next() else {
            return self.err("a value or reference is missing");
        };
        match c {
            '(' => {
                self.at += 1;
                self.nest()?;
                let inner = self.or()?;
                self.depth -= 1;
                if !self.eat(")") {
                    return self.err("')' expected");
                }
                Ok(inner)
            }
            '$' => {
                let (r, used) = parse_ref_prefix(&rest[1..]).map_err(|message| ExprError {
                    at: self.at,
                    message,
                })?;
                self.at += 1 + used;
                Ok(Expr::Ref(r))
            }
            '\'' | '"' => {
                let close = rest[1..].find(c).ok_or_else(|| ExprError {
                    at: self.at,
                    message: "an unclosed string".to_owned(),
                })?;
                let s = rest[1..1 + close].to_owned();
                self.at += close + 2;
                Ok(Expr::Literal(Value::String(s)))
            }
            c if c == '-' || c.is_ascii_digit() => {
                let len = rest
                    .find(|ch: char| {
                        !(ch.is_ascii_digit() || matches!(ch, '-' | '+' | '.' | 'e' | 'E'))
                    })
                    .unwrap_or(rest.len());
                let n: serde_json::Number =
                    serde_json::from_str(&rest[..len]).map_err(|_| ExprError {
                        at: self.at,
                        message: format!("{:?} is not a number", &rest[..len]),
                    })?;
                self.at += len;
                Ok(Expr::Literal(Value::Number(n)))
            }
            _ => {
                for (word, v) in [
                    ("true", Value::Bool(true)),
                    ("false", Value::Bool(false)),
                    ("null", Value::Null),
                ] {
                    let after = rest.as_bytes().get(word.len());
                    if rest.starts_with(word)
                        && !after.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    {
                        self.at += word.len();
                        return Ok(Expr::Literal(v));
                    }
                }
                self.err(format!(
                    "unexpected {c:?}: write a reference ($...), a quoted string, a number, true, false or null"
                ))
            }
        }
    }
}

/// Whether a value counts as true.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn order(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

impl Expr {
    /// Parses an expression.
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        if text.len() > MAX_REFERENCE {
            return Err(ExprError {
                at: 0,
                message: format!("an expression is at most {MAX_REFERENCE} bytes"),
            });
        }
        let mut p = Parser {
            text,
            at: 0,
            depth: 0,
        };
        let e = p.or()?;
        p.skip_ws();
        if p.at != text.len() {
            return p.err(format!("unexpected {:?}", &text[p.at..]));
        }
        Ok(e)
    }

    /// Every reference in the expression.
    pub fn refs(&self) -> Vec<&Ref> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a Ref>) {
        match self {
            Expr::Literal(_) => {}
            Expr::Ref(r) => out.push(r),
            Expr::Not(e) => e.collect(out),
            Expr::And(a, b) | Expr::Or(a, b) | Expr::Cmp(_, a, b) => {
                a.collect(out);
                b.collect(out);
            }
        }
    }

    fn value(&self, scope: &Scope<'_>) -> Value {
        match self {
            Expr::Literal(v) => v.clone(),
            Expr::Ref(r) => r.resolve_lenient(scope),
            other => Value::Bool(other.eval(scope)),
        }
    }

    /// Whether the expression holds in `scope`. Comparing values that have no order (a number
    /// with a string, say) is false.
    pub fn eval(&self, scope: &Scope<'_>) -> bool {
        match self {
            Expr::Literal(v) => truthy(v),
            Expr::Ref(r) => truthy(&r.resolve_lenient(scope)),
            Expr::Not(e) => !e.eval(scope),
            Expr::And(a, b) => a.eval(scope) && b.eval(scope),
            Expr::Or(a, b) => a.eval(scope) || b.eval(scope),
            Expr::Cmp(op, a, b) => {
                let (a, b) = (a.value(scope), b.value(scope));
                match op {
                    CmpOp::Eq => equal(&a, &b),
                    CmpOp::Ne => !equal(&a, &b),
                    CmpOp::Lt => order(&a, &b).is_some_and(std::cmp::Ordering::is_lt),
                    CmpOp::Le => order(&a, &b).is_some_and(std::cmp::Ordering::is_le),
                    CmpOp::Gt => order(&a, &b).is_some_and(std::cmp::Ordering::is_gt),
                    CmpOp::Ge => order(&a, &b).is_some_and(std::cmp::Ordering::is_ge),
                }
            }
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, parent: u8) -> fmt::Result {
        // Precedence: or 1, and 2, not/cmp 3; parentheses where a child binds looser.
        let own = match self {
            Expr::Or(..) => 1,
            Expr::And(..) => 2,
            Expr::Not(_) | Expr::Cmp(..) => 3,
            Expr::Literal(_) | Expr::Ref(_) => 5,
        };
        if own < parent {
            f.write_str("(")?;
        }
        match self {
            Expr::Literal(Value::String(s)) if !s.contains('\'') => write!(f, "'{s}'")?,
            Expr::Literal(Value::String(s)) => write!(f, "\"{s}\"")?,
            Expr::Literal(v) => write!(f, "{v}")?,
            Expr::Ref(r) => write!(f, "{r}")?,
            Expr::Not(e) => {
                // `!!x` and `!a == b` read back as written: a not or a comparison under a not
                // needs no parentheses (which would count towards the nesting limit and could
                // take a readable expression past it).
                f.write_str("!")?;
                e.write(f, 3)?;
            }
            Expr::And(a, b) => {
                a.write(f, 2)?;
                f.write_str(" && ")?;
                b.write(f, 3)?;
            }
            Expr::Or(a, b) => {
                a.write(f, 1)?;
                f.write_str(" || ")?;
                b.write(f, 2)?;
            }
            Expr::Cmp(op, a, b) => {
                a.write(f, 4)?;
                write!(f, " {} ", op.as_str())?;
                b.write(f, 4)?;
            }
        }
        if own < parent {
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl fmt::Display for Expr {
    /// The expression in a form [`Expr::parse`] reads back to the same tree.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, 0)
    }
}
