//! The one way a person's or a script's audit filter becomes an [`AuditQuery`]: the CLI, the
//! admin API and the desktop app hand over what they were given, in their own input format
//! already parsed to values, and get back a checked query or the field that is wrong.
//!
//! Blank text fields mean "no filter", a status must be one of the statuses, a page holds 1 to
//! [`MAX_PAGE`] rows (50 unless asked), and a time range must end after it starts. The store's own
//! readers stay lenient (a page size out of range is clamped), so code that builds an
//! `AuditQuery` directly cannot crash a reader; front ends use this instead, so a request that
//! makes no sense is refused with its reason rather than quietly changed.

use serde::{Deserialize, Serialize};
use tw_core::ToolStatus;

use crate::error::{Result, StoreError};
use crate::query::{AuditQuery, MAX_PAGE};

/// The page size when a filter does not name one.
pub const DEFAULT_PAGE: u32 = 50;

/// An audit filter as asked for. Every field is optional; [`AuditFilter::query`] checks it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuditFilter {
    /// Only calls to this tool.
    pub tool: Option<String>,
    /// Only calls that ended this way, by status name (`success`, `permission_denied`, ...).
    pub status: Option<String>,
    /// Only calls from this agent.
    pub agent_id: Option<String>,
    /// Only calls made under this skill.
    pub skill: Option<String>,
    /// Only calls started at or after this time (µs since the epoch).
    pub since: Option<i64>,
    /// Only calls started before this time (µs since the epoch).
    pub until: Option<i64>,
    /// Only calls whose tool, arguments, error or output contain this text.
    pub text: Option<String>,
    /// Only calls that broke a rule.
    pub violations_only: bool,
    /// Continue below this id (a previous page's `next_cursor`).
    pub cursor: Option<i64>,
    /// Rows per page, 1 to [`MAX_PAGE`]; [`DEFAULT_PAGE`] when absent.
    pub limit: Option<u32>,
}

/// Blank means absent: a form's empty field filters nothing.
fn given(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.trim().is_empty())
}

fn invalid(field: &'static str, message: impl Into<String>) -> StoreError {
    StoreError::InvalidQuery {
        field,
        message: message.into(),
    }
}

impl AuditFilter {
    /// The checked query, or the first field that is wrong and why.
    pub fn query(self) -> Result<AuditQuery> {
        let status = given(self.status)
            .map(|s| s.trim().parse::<ToolStatus>())
            .transpose()
            .map_err(|e| invalid("status", e))?;
        let limit = self.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(invalid(
                "limit",
                format!("between 1 and {MAX_PAGE} rows a page, not {limit}"),
            ));
        }
        if let (Some(since), Some(until)) = (self.since, self.until)
            && until <= since
        {
            return Err(invalid(
                "until",
                "the end of the range must be after its start",
            ));
        }
        if self.cursor.is_some_and(|c| c < 1) {
            return Err(invalid(
                "cursor",
                "a cursor is a record id, 1 or more (a page's next_cursor)",
            ));
        }
        Ok(AuditQuery {
            tool: given(self.tool),
            status,
            agent_id: given(self.agent_id),
            skill: given(self.skill),
            since: self.since,
            until: self.until,
            text: given(self.text),
            violations_only: self.violations_only,
            cursor: self.cursor,
            limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn check(filter: AuditFilter) -> std::result::Result<AuditQuery, String> {
        filter.query().map_err(|e| e.to_string())
    }

    #[test]
    fn an_empty_filter_is_the_default_query() {
        assert_eq!(check(AuditFilter::default()), Ok(AuditQuery::default()));
    }

    #[test]
    fn blank_fields_filter_nothing_and_values_pass_through() {
        let q = check(AuditFilter {
            tool: Some(" ".into()),
            status: Some("permission_denied".into()),
            agent_id: Some("agent-7".into()),
            skill: Some(String::new()),
            since: Some(10),
            until: Some(20),
            text: Some("needle".into()),
            violations_only: true,
            cursor: Some(99),
            limit: Some(1000),
        });
        assert_eq!(
            q,
            Ok(AuditQuery {
                tool: None,
                status: Some(ToolStatus::PermissionDenied),
                agent_id: Some("agent-7".into()),
                skill: None,
                since: Some(10),
                until: Some(20),
                text: Some("needle".into()),
                violations_only: true,
                cursor: Some(99),
                limit: 1000,
            })
        );
    }

    #[test]
    fn each_wrong_field_is_named() {
        let cases = [
            (
                AuditFilter {
                    status: Some("great".into()),
                    ..AuditFilter::default()
                },
                "invalid audit query: status: ",
            ),
            (
                AuditFilter {
                    limit: Some(0),
                    ..AuditFilter::default()
                },
                "invalid audit query: limit: between 1 and 1000 rows a page, not 0",
            ),
            (
                AuditFilter {
                    limit: Some(1001),
                    ..AuditFilter::default()
                },
                "invalid audit query: limit: between 1 and 1000 rows a page, not 1001",
            ),
            (
                AuditFilter {
                    since: Some(5),
                    until: Some(5),
                    ..AuditFilter::default()
                },
                "invalid audit query: until: the end of the range must be after its start",
            ),
            (
                AuditFilter {
                    cursor: Some(0),
                    ..AuditFilter::default()
                },
                "invalid audit query: cursor: a cursor is a record id",
            ),
        ];
        for (filter, expected) in cases {
            let err = check(filter.clone()).unwrap_err();
            assert!(err.starts_with(expected), "{filter:?}: {err}");
        }
        let field = AuditFilter {
            limit: Some(0),
            ..AuditFilter::default()
        }
        .query()
        .unwrap_err();
        assert!(
            matches!(field, StoreError::InvalidQuery { field: "limit", .. }),
            "{field:?}"
        );
    }
}
