//! What the filter forms mean: the audit form's text fields become `query_audit` parameters, and
//! the tools console's filters become a predicate over the listed tools (the list is small and
//! fully loaded, so filtering it in place answers each keystroke without a round trip).

use tw_protocol::{AuditQueryParams, ToolSummary};

use super::time::WallTime;

/// Rows per audit page.
pub(crate) const AUDIT_PAGE_SIZE: u32 = 50;

/// The audit filter form as typed: every field is the raw text of an input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AuditForm {
    pub(crate) tool: String,
    pub(crate) status: String,
    pub(crate) caller: String,
    pub(crate) skill: String,
    /// A `datetime-local` value: calls at or after it.
    pub(crate) from: String,
    /// A `datetime-local` value: calls before it.
    pub(crate) to: String,
    pub(crate) text: String,
}

impl AuditForm {
    /// The query for one page: blank fields filter nothing, text is trimmed, and the times are read
    /// as local wall time through `offset_min` (minutes east of UTC at that wall time; the browser
    /// knows its zone's rules, this code does not). An unreadable time is an error naming the field.
    pub(crate) fn to_params(
        &self,
        cursor: Option<i64>,
        offset_min: impl Fn(WallTime) -> i64,
    ) -> Result<AuditQueryParams, String> {
        let time = |label: &str, raw: &str| -> Result<Option<i64>, String> {
            let raw = raw.trim();
            if raw.is_empty() {
                return Ok(None);
            }
            let wall = WallTime::parse(raw)
                .ok_or_else(|| format!("{label}: {raw:?} is not a date and time"))?;
            Ok(Some(wall.to_us(offset_min(wall))))
        };
        let since_at = time("from", &self.from)?;
        let until_at = time("to", &self.to)?;
        if let (Some(since), Some(until)) = (since_at, until_at)
            && since >= until
        {
            return Err("from: must be before to".to_owned());
        }
        Ok(AuditQueryParams {
            tool: text(&self.tool),
            status: text(&self.status),
            caller: text(&self.caller),
            skill: text(&self.skill),
            since_at,
            until_at,
            text: text(&self.text),
            cursor,
            limit: Some(AUDIT_PAGE_SIZE),
        })
    }
}

fn text(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

/// Which tools the console shows. Empty strings match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ToolFilter {
    /// Case-insensitive substring of the name or the description.
    pub(crate) search: String,
    pub(crate) category: String,
    pub(crate) group: String,
    pub(crate) tier: String,
    pub(crate) risk: String,
    /// `""` (any), `"on"` or `"off"` at the current tier.
    pub(crate) enabled: String,
}

impl ToolFilter {
    /// Whether `tool` passes every filter.
    pub(crate) fn matches(&self, tool: &ToolSummary) -> bool {
        let exact = |want: &str, have: &str| want.is_empty() || want == have;
        let search = self.search.trim().to_lowercase();
        let found = search.is_empty()
            || tool.name.to_lowercase().contains(&search)
            || tool.description.to_lowercase().contains(&search);
        let enabled = match self.enabled.as_str() {
            "on" => tool.enabled,
            "off" => !tool.enabled,
            _ => true,
        };
        found
            && enabled
            && exact(&self.category, &tool.category)
            && exact(&self.group, &tool.group)
            && exact(&self.tier, &tool.tier)
            && exact(&self.risk, &tool.risk)
    }
}

/// The distinct values of one field, sorted, for a filter's choices.
pub(crate) fn choices(tools: &[ToolSummary], field: impl Fn(&ToolSummary) -> &str) -> Vec<String> {
    let mut v: Vec<String> = tools.iter().map(|t| field(t).to_owned()).collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn tool(name: &str, category: &str, risk: &str, enabled: bool) -> ToolSummary {
        ToolSummary {
            name: name.to_owned(),
            description: format!("the {name} tool"),
            category: category.to_owned(),
            group: "fs".to_owned(),
            risk: risk.to_owned(),
            tier: "core".to_owned(),
            requires_confirmation: false,
            builtin: true,
            enabled,
            disabled_tiers: vec![],
            decision: "allow".to_owned(),
            reason: String::new(),
        }
    }

    #[test]
    fn a_blank_form_asks_for_the_newest_page() {
        let p = AuditForm::default().to_params(None, |_| 0).unwrap();
        assert_eq!(
            p,
            AuditQueryParams {
                limit: Some(50),
                ..AuditQueryParams::default()
            }
        );
    }

    #[test]
    fn filled_fields_are_trimmed_and_times_read_in_the_local_zone() {
        let form = AuditForm {
            tool: " exec ".into(),
            status: "success".into(),
            caller: "cli".into(),
            skill: "  ".into(),
            from: "2024-05-01T12:00".into(),
            to: "2024-05-01T13:30".into(),
            text: "rm -rf".into(),
        };
        // two hours east of UTC
        let p = form.to_params(Some(77), |_| 120).unwrap();
        assert_eq!(
            p,
            AuditQueryParams {
                tool: Some("exec".into()),
                status: Some("success".into()),
                caller: Some("cli".into()),
                skill: None,
                since_at: Some(1_714_557_600_000_000),
                until_at: Some(1_714_563_000_000_000),
                text: Some("rm -rf".into()),
                cursor: Some(77),
                limit: Some(50),
            }
        );
    }

    #[test]
    fn bad_times_name_their_field() {
        let form = |from: &str, to: &str| AuditForm {
            from: from.into(),
            to: to.into(),
            ..AuditForm::default()
        };
        let got: Vec<Result<AuditQueryParams, String>> = vec![
            form("yesterday", "").to_params(None, |_| 0),
            form("", "2024-02-30T00:00").to_params(None, |_| 0),
            form("2024-05-02T00:00", "2024-05-01T00:00").to_params(None, |_| 0),
        ];
        assert_eq!(
            got,
            vec![
                Err("from: \"yesterday\" is not a date and time".to_owned()),
                Err("to: \"2024-02-30T00:00\" is not a date and time".to_owned()),
                Err("from: must be before to".to_owned()),
            ]
        );
    }

    #[test]
    fn tool_filters_combine() {
        let tools = vec![
            tool("read_file", "file_system", "low", true),
            tool("delete_file", "file_system", "high", false),
            tool("http_get", "network", "medium", true),
        ];
        let names = |f: ToolFilter| -> Vec<&str> {
            tools
                .iter()
                .filter(|t| f.matches(t))
                .map(|t| t.name.as_str())
                .collect()
        };
        assert_eq!(
            names(ToolFilter::default()),
            ["read_file", "delete_file", "http_get"]
        );
        assert_eq!(
            names(ToolFilter {
                search: "FILE".into(),
                ..ToolFilter::default()
            }),
            ["read_file", "delete_file"]
        );
        assert_eq!(
            names(ToolFilter {
                search: "the http".into(),
                ..ToolFilter::default()
            }),
            ["http_get"]
        );
        assert_eq!(
            names(ToolFilter {
                category: "file_system".into(),
                enabled: "on".into(),
                ..ToolFilter::default()
            }),
            ["read_file"]
        );
        assert_eq!(
            names(ToolFilter {
                risk: "high".into(),
                enabled: "off".into(),
                ..ToolFilter::default()
            }),
            ["delete_file"]
        );
        assert_eq!(choices(&tools, |t| &t.category), ["file_system", "network"]);
    }
}
