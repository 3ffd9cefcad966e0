//! Where a policy document came from, and how its sections are read. Each layer gathers its own
//! section (`tools`, `mode`, `exec`, `args`, `access`, `rate`; the confirmation timeout in
//! `compile`), and they all locate what they read and report problems through one [`Reading`],
//! so every message says file:line:column the same way and every problem in a document is
//! reported, not just the first.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;

use toml::Spanned;

use super::doc::PolicyDoc;
use super::selector::{self, PolicyRule, SelectorSet};
use crate::load::line_col;

/// A problem in a policy document, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl PolicyError {
    /// A problem found after the documents were read, when rules from several of them are put
    /// together, so it belongs to no one file.
    pub(super) fn unplaced(message: impl Into<String>) -> Self {
        Self {
            file: "policy".to_owned(),
            line: None,
            column: None,
            message: message.into(),
        }
    }
}

impl PolicyDoc {
    /// Parses a standalone policy file.
    pub fn parse(text: &str, file: &str) -> Result<PolicyDoc, PolicyError> {
        toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unzip();
            PolicyError {
                file: file.to_owned(),
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })
    }
}

/// A parsed document and the text its spans point into.
#[derive(Debug, Clone, Copy)]
pub struct PolicySource<'a> {
    /// The file, for messages and explanations.
    pub file: &'a str,
    /// The file's whole text.
    pub text: &'a str,
    /// The document (for the configuration file: its `[policy]` table).
    pub doc: &'a PolicyDoc,
}

/// One document being read: where its spans point, and where its problems and its summary lines
/// (what `Policy::diff` compares) go.
pub(super) struct Reading<'a> {
    file: &'a str,
    text: &'a str,
    errors: &'a mut Vec<PolicyError>,
    summary: &'a mut BTreeSet<String>,
}

impl<'a> Reading<'a> {
    /// Starts reading `src`, adding to problems and summary lines gathered so far.
    pub(super) fn new(
        src: &PolicySource<'a>,
        errors: &'a mut Vec<PolicyError>,
        summary: &'a mut BTreeSet<String>,
    ) -> Self {
        Self {
            file: src.file,
            text: src.text,
            errors,
            summary,
        }
    }

    /// The document's file, for sources of settings it leaves out.
    pub(super) fn file(&self) -> &'a str {
        self.file
    }

    /// `file:line` of a span: how explanations quote a rule.
    pub(super) fn at(&self, span: Range<usize>) -> String {
        format!("{}:{}", self.file, line_col(self.text, span.start).0)
    }

    /// Records a problem at a span, placed by line and column.
    pub(super) fn fail(&mut self, span: Range<usize>, message: impl Into<String>) {
        let (line, column) = line_col(self.text, span.start);
        self.errors.push(PolicyError {
            file: self.file.to_owned(),
            line: Some(line),
            column: Some(column),
            message: message.into(),
        });
    }

    /// How many problems have been found so far, in this document and the ones before it.
    pub(super) fn error_count(&self) -> usize {
        self.errors.len()
    }

    /// Adds a line to the summary: one per rule, without locations, so that moving a rule is
    /// not a change.
    pub(super) fn note(&mut self, line: String) {
        self.summary.insert(line);
    }

    /// A list of tool selectors, each checked and quoted with its location; `what` names the list
    /// in messages. A bad selector is reported and left out.
    pub(super) fn selectors(&mut self, list: &[Spanned<String>], what: &str) -> Vec<PolicyRule> {
        let mut out = Vec::with_capacity(list.len());
        for s in list {
            match selector::check_selector(s.get_ref()) {
                Ok(()) => out.push(PolicyRule::new(s.get_ref().trim(), self.at(s.span()))),
                Err(e) => self.fail(s.span(), format!("{what}: {e}")),
            }
        }
        out
    }

    /// The same list, compiled into one set.
    pub(super) fn selector_set(&mut self, list: &[Spanned<String>], what: &str) -> SelectorSet {
        let rules = self.selectors(list, what);
        build_set(rules, self.errors)
    }
}

/// Compiles selectors into a set. Each selector was checked with its location already, so this
/// cannot fail in practice; an error here would still be reported rather than ignored.
pub(super) fn build_set(rules: Vec<PolicyRule>, errors: &mut Vec<PolicyError>) -> SelectorSet {
    SelectorSet::build(rules).unwrap_or_else(|e| {
        errors.push(PolicyError::unplaced(e.to_string()));
        SelectorSet::default()
    })
}
