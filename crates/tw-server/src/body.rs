//! The admin API's request bodies, each read by one pure function: text in, a value or an error
//! that says what and where out. The handlers in `api` call these, and the fuzzer
//! (`fuzz/fuzz_targets/api_body.rs`) calls the same ones, so what is fuzzed is what serves.
//!
//! `POST /policy/explain` is read by axum's `Json` extractor, which checks the content type and
//! then calls `Json::from_bytes`; its body type and the conversion after it are here, and the
//! fuzzer calls `Json::<ExplainBody>::from_bytes` itself.

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value};
use tw_core::policy::access::AccessLevel;
use tw_core::{Caller, DefinitionFormat, LicenseTier, OperationalMode, ToolSpec};
use tw_runtime::{Answer, GrantSpec, OverrideChange, Remember, Who};

/// A request body the API refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError {
    /// 400 for a malformed body, 422 for a tool definition that cannot be used.
    pub status: StatusCode,
    /// The stable code of the API's error body.
    pub code: &'static str,
    /// What is wrong, with the line and column or the field.
    pub message: String,
    /// 1-based line of the body at fault, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
}

impl BodyError {
    fn bad(message: String, line: Option<usize>, column: Option<usize>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request",
            message,
            line,
            column,
        }
    }

    fn invalid_tool(message: String, line: Option<usize>, column: Option<usize>) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "invalid_tool",
            message,
            line,
            column,
        }
    }
}

/// `POST /tools` and `PUT /tools/{name}`: one custom tool's spec (JSON, the file format's), with
/// the line, column and field of what is wrong.
pub fn tool_spec(body: &str) -> Result<ToolSpec, BodyError> {
    let mut specs = tw_core::load_tool_specs(body, "request body", DefinitionFormat::Json)
        .map_err(|e| BodyError::invalid_tool(e.to_string(), e.line, e.column))?;
    match (specs.pop(), specs.is_empty()) {
        (Some(spec), true) => Ok(spec),
        _ => Err(BodyError::invalid_tool(
            "send one tool per request".to_owned(),
            None,
            None,
        )),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SwitchBody {
    /// The tier to switch it for (default: the one this installation runs).
    tier: Option<LicenseTier>,
}

/// `POST /tools/{name}/enable` and `/disable`: nothing, or `{"tier": ...}`; the tier named, if any.
pub fn switch(body: &str) -> Result<Option<LicenseTier>, BodyError> {
    Ok(optional::<SwitchBody>(body)?.and_then(|b| b.tier))
}

/// `POST /policy/explain`'s body, as axum's `Json` extractor reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainBody {
    tool: String,
    #[serde(default)]
    arguments: Map<String, Value>,
    agent: Option<String>,
    skill: Option<String>,
    user: Option<String>,
}

/// A call to explain: the tool, its arguments and who would call it.
#[derive(Debug, Clone, PartialEq)]
pub struct Explain {
    /// The tool's name, as sent.
    pub tool: String,
    /// The arguments (an object).
    pub arguments: Value,
    /// The caller the body describes; the agent is `default_agent` unless it names one.
    pub caller: Caller,
}

impl ExplainBody {
    /// The call the body describes.
    pub fn into_explain(self, default_agent: &str) -> Explain {
        let mut caller = Caller::agent(self.agent.as_deref().unwrap_or(default_agent));
        if let Some(s) = &self.skill {
            caller = caller.with_skill(s);
        }
        if let Some(u) = &self.user {
            caller = caller.with_user(u);
        }
        Explain {
            tool: self.tool,
            arguments: Value::Object(self.arguments),
            caller,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    note: Option<String>,
    /// With an approval: remember it (`exact`, `tool`, or `{"pattern": {...}}`).
    remember: Option<Remember>,
    /// Whose calls the remembered approval covers (default: the caller of this call).
    who: Option<Who>,
    /// How long it lasts, in seconds (default: until revoked).
    duration_secs: Option<u64>,
}

/// A person's answer as the API received it.
#[derive(Debug)]
pub struct AnswerRequest {
    /// Approve (perhaps remembering it) or deny.
    pub answer: Answer,
    /// Why, for the record.
    pub note: Option<String>,
}

/// `POST /confirmations/{id}/approve` and `/deny`: nothing, or a note and (with an approval
/// only) the grant to remember. Whose calls a grant covers, when `who` is absent, is the
/// confirmation service's default.
pub fn answer(body: &str, approve: bool) -> Result<AnswerRequest, BodyError> {
    let b: AnswerBody = optional(body)?.unwrap_or_default();
    if !approve && (b.remember.is_some() || b.who.is_some() || b.duration_secs.is_some()) {
        return Err(BodyError::bad(
            "remember, who and duration_secs only go with approve".to_owned(),
            None,
            None,
        ));
    }
    if b.remember.is_none() && (b.who.is_some() || b.duration_secs.is_some()) {
        return Err(BodyError::bad(
            "who and duration_secs describe a grant: give remember too".to_owned(),
            None,
            None,
        ));
    }
    let answer = if approve {
        Answer::Approve {
            grant: b.remember.map(|remember| GrantSpec {
                remember,
                who: b.who,
                duration: b.duration_secs.map(std::time::Duration::from_secs),
            }),
        }
    } else {
        Answer::Deny
    };
    Ok(AnswerRequest {
        answer,
        note: b.note,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    tool: String,
    /// `tool` (the default), `{"pattern": {...}}`; `exact` is refused by the service (a grant
    /// made on its own has no call to copy).
    remember: Option<Remember>,
    /// `anyone` (the service's default here) or `{"agent": id}`.
    who: Option<Who>,
    /// How long it lasts, in seconds (default: until revoked).
    duration_secs: Option<u64>,
}

/// What `POST /grants` asks: a standing approval for one tool.
#[derive(Debug, PartialEq)]
pub struct GrantRequest {
    /// The tool, as sent; the confirmation service checks it is registered.
    pub tool: String,
    /// Which calls, whose, and for how long; absent parts are the service's defaults.
    pub spec: GrantSpec,
}

/// `POST /grants`: `{"tool", "remember"?, "who"?, "duration_secs"?}`. Whether the grant makes
/// sense (a known tool, a pattern that checks, a duration above zero) is the confirmation
/// service's to decide.
pub fn grant(body: &str) -> Result<GrantRequest, BodyError> {
    let b: GrantBody = required(body)?;
    Ok(GrantRequest {
        tool: b.tool,
        spec: GrantSpec {
            remember: b.remember.unwrap_or_default(),
            who: b.who,
            duration: b.duration_secs.map(std::time::Duration::from_secs),
        },
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModeBody {
    mode: OperationalMode,
}

/// `PUT /mode`: `{"mode"}`, one of the operational modes.
pub fn mode(body: &str) -> Result<OperationalMode, BodyError> {
    Ok(required::<ModeBody>(body)?.mode)
}

/// An optional JSON body: none, or an object of the expected shape.
fn optional<T: serde::de::DeserializeOwned>(body: &str) -> Result<Option<T>, BodyError> {
    if body.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(body).map(Some).map_err(|e| {
        let at = (e.line() > 0).then(|| (e.line(), e.column()));
        BodyError::bad(
            format!("the request body: {e}"),
            at.map(|(l, _)| l),
            at.map(|(_, c)| c),
        )
    })
}

/// What `POST /skills/{name}/override` asks: one tool, what to do with it, and why.
#[derive(Debug)]
pub struct SkillOverrideRequest {
    /// The tool.
    pub tool: String,
    /// Add it (up to a level), remove it, or clear the override.
    pub change: OverrideChange,
    /// Why, for the admin log (not with a clear).
    pub reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OverrideBody {
    tool: String,
    /// `add`, `remove` or `clear`.
    action: String,
    /// With `add`: `standard` (default), `elevated` or `admin`.
    access_level: Option<String>,
    reason: Option<String>,
}

/// `POST /skills/{name}/override`: `{"tool", "action": "add"|"remove"|"clear",
/// "access_level"?, "reason"?}`. What an override may say beyond its shape is the skills
/// service's to check.
pub fn skill_override(body: &str) -> Result<SkillOverrideRequest, BodyError> {
    let b: OverrideBody = required(body)?;
    let level = b
        .access_level
        .as_deref()
        .map(str::parse::<AccessLevel>)
        .transpose()
        .map_err(|e| BodyError::bad(format!("access_level: {e}"), None, None))?;
    let change = match (b.action.as_str(), level) {
        ("add", level) => OverrideChange::Add(level.unwrap_or_default()),
        ("remove" | "clear", Some(_)) => {
            return Err(BodyError::bad(
                format!("access_level: only an addition has one, not a {}", b.action),
                None,
                None,
            ));
        }
        ("remove", None) => OverrideChange::Remove,
        ("clear", None) => OverrideChange::Clear,
        (other, _) => {
            return Err(BodyError::bad(
                format!("action: {other:?} is not add, remove or clear"),
                None,
                None,
            ));
        }
    };
    Ok(SkillOverrideRequest {
        tool: b.tool,
        change,
        reason: b.reason,
    })
}

/// What `POST /skills/classify/{tool}` asks.
#[derive(Debug, PartialEq, Eq)]
pub enum Classify {
    /// Set the tool's capabilities as the administrator, with a note.
    Set {
        /// Capability names from the catalog.
        capabilities: Vec<String>,
        /// Why.
        note: Option<String>,
    },
    /// Clear the administrator's setting; a classifier decides again.
    Clear,
    /// Run the classifier again.
    Again,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassifyBody {
    set: Option<Vec<String>>,
    note: Option<String>,
    #[serde(default)]
    clear: bool,
    #[serde(default)]
    again: bool,
}

/// `POST /skills/classify/{tool}`: exactly one of `{"set": [...], "note"?}`, `{"clear": true}`
/// and `{"again": true}`.
pub fn classify(body: &str) -> Result<Classify, BodyError> {
    let b: ClassifyBody = required(body)?;
    let bad = |m: &str| Err(BodyError::bad(m.to_owned(), None, None));
    match (b.set, b.clear, b.again) {
        (Some(capabilities), false, false) => Ok(Classify::Set {
            capabilities,
            note: b.note,
        }),
        (None, true, false) | (None, false, true) if b.note.is_some() => {
            bad("note: only a set of capabilities takes a note")
        }
        (None, true, false) => Ok(Classify::Clear),
        (None, false, true) => Ok(Classify::Again),
        (None, false, false) => bad("say one of set, clear or again"),
        _ => bad("set, clear and again are alternatives: say one"),
    }
}

/// A JSON body that must be there, of the expected shape.
fn required<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, BodyError> {
    optional(body)?
        .ok_or_else(|| BodyError::bad("the request needs a JSON body".to_owned(), None, None))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanBody {
    goal: String,
    skill: Option<String>,
}

/// `POST /chains/plan`: `{"goal", "skill"?}`. Whether the goal says anything is the chain
/// service's to check.
pub fn chain_plan(body: &str) -> Result<(String, Option<String>), BodyError> {
    let b: PlanBody = required(body)?;
    Ok((b.goal, b.skill))
}
