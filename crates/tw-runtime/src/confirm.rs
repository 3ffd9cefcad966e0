//! Confirmations and grants: a call that policy asks about waits for a person, without holding up
//! any other call, until someone approves or denies it, or it expires (denied: fail closed).
//!
//! The pending request is a row in the store, so any process on the same data directory can answer
//! it: the desktop app approving a call a CLI process is waiting on, or `toolwarden confirm
//! approve` releasing a call held by the app. A waiter in the answering process is woken at once;
//! one in another process notices on its next look at the row (every [`POLL`]), or at once on
//! a team store, whose database pushes the change (see `changes`).
//!
//! Approving may create a grant, a standing approval for this exact call, for calls matching an
//! argument pattern, or for the tool; for this caller or any; for a while or for good. A grant
//! turns a later Ask into an Allow (never a Deny into anything), and a new grant releases every
//! pending call it covers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tw_core::policy::grant::{Grant, GrantScope};
use tw_core::policy::{Decision, Layer, LayerVerdict, PolicyDecision, RuleRef, Severity};
use tw_core::{Caller, ToolCall};
use tw_store::{
    ConfirmationQuery, ConfirmationRow, ConfirmationState, GrantQuery, GrantRow, NewConfirmation,
    NewGrant, Resolution, ResolveOutcome,
};

use crate::error::{Result, RuntimeError};
use crate::events::EventKind;
use crate::ids::new_execution_id;
use crate::shared::Shared;

/// How often a waiting call looks at its request when no one in this process answered it.
pub const POLL: Duration = Duration::from_millis(100);

/// In-process waiters, woken when this process answers their request.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    map: std::sync::Mutex<HashMap<String, Arc<Notify>>>,
}

impl Waiters {
    fn register(&self, id: &str) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        self.lock().insert(id.to_owned(), Arc::clone(&notify));
        notify
    }

    fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    fn wake(&self, id: &str) {
        if let Some(n) = self.lock().get(id) {
            n.notify_one();
        }
    }

    fn wake_all(&self) {
        for n in self.lock().values() {
            n.notify_one();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What an approval should remember. A grant made on its own that does not say covers every
/// call of its tool (the default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Remember {
    /// Calls with exactly these arguments.
    Exact,
    /// Calls whose arguments match this pattern (see [`GrantScope::Pattern`]).
    Pattern(Map<String, Value>),
    /// Every call of the tool.
    #[default]
    Tool,
}

/// Whose calls a grant covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Who {
    /// Any caller.
    Anyone,
    /// The caller of the call being approved (only with an approval).
    SameCaller,
    /// This agent.
    Agent(String),
}

/// A standing approval to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantSpec {
    /// Which calls.
    pub remember: Remember,
    /// Whose calls; `None`: the service's default, the same caller when approving a call and
    /// anyone for a grant made on its own (see [`ConfirmationService::grant`]).
    pub who: Option<Who>,
    /// How long it lasts; `None` is until revoked. Zero is refused.
    pub duration: Option<Duration>,
}

/// What answering a request did; an unknown id is an error instead
/// ([`RuntimeError::NotFound`], `unknown_confirmation`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Answered {
    /// This answer settled the request.
    Resolved {
        /// The request as it now stands.
        confirmation: Box<ConfirmationRow>,
        /// The grant created with it.
        grant: Option<Box<GrantRow>>,
    },
    /// The request was settled before this answer arrived; nothing changed.
    AlreadyResolved {
        /// How it was settled.
        state: ConfirmationState,
        /// Who settled it (`None` when it expired).
        by: Option<String>,
        /// When (µs since the epoch; for an expired request, its deadline).
        at: i64,
    },
}

fn unknown_confirmation(id: &str) -> RuntimeError {
    RuntimeError::NotFound {
        code: "unknown_confirmation",
        message: format!("no confirmation request has id {id:?}"),
    }
}

/// A person's answer to a held call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Let the call run; with a grant, also remember the approval for later calls.
    Approve {
        /// What to remember, if anything.
        grant: Option<GrantSpec>,
    },
    /// Refuse the call.
    Deny,
}

impl Answer {
    /// Whether the answer lets the call run.
    pub fn approves(&self) -> bool {
        matches!(self, Answer::Approve { .. })
    }
}

fn core_grant(row: &GrantRow) -> Grant {
    Grant {
        id: row.id.clone(),
        tool: row.tool.clone(),
        scope: row.scope.clone(),
        agent_id: row.agent_id.clone(),
        skill: row.skill.clone(),
        expires_at: row.expires_at,
        revoked: row.revoked_at.is_some(),
    }
}

/// How a held call ended.
pub(crate) enum Held {
    /// A person (or a grant) let it through.
    Approved(LayerVerdict),
    /// Denied, expired, or withdrawn because the call was cancelled.
    Refused {
        /// The verdict recorded in the trace.
        verdict: LayerVerdict,
        /// Whether the call was cancelled (its status is then Cancelled, not PermissionDenied).
        cancelled: bool,
    },
}

/// Owns pending confirmations and grants: holding a call for a person, answering it, and
/// standing approvals with their defaults and limits.
pub struct ConfirmationService {
    shared: Arc<Shared>,
    waiters: Waiters,
}

fn new_id() -> String {
    new_execution_id().to_string()
}

impl ConfirmationService {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            waiters: Waiters::default(),
        }
    }

    /// Wakes the call in this process waiting on request `id`, if any (another replica
    /// settled it).
    pub(crate) fn wake(&self, id: &str) {
        self.waiters.wake(id);
    }

    /// Wakes every call waiting here, to look at its request again.
    pub(crate) fn wake_all(&self) {
        self.waiters.wake_all();
    }

    /// Looks for an active grant covering the call; applies the first to `decision`.
    pub(crate) async fn apply_grants(
        &self,
        call: &ToolCall,
        arguments: &Value,
        decision: &mut PolicyDecision,
    ) -> Result<bool> {
        let now = self.shared.now_us();
        let grants = self
            .shared
            .store
            .grants(&GrantQuery {
                tool: Some(call.tool.clone()),
                active_at: Some(now),
                include_revoked: false,
            })
            .await?;
        let caller = call.caller.sanitized();
        for row in grants {
            let grant = core_grant(&row);
            if grant.covers(&call.tool, arguments, &caller, now) {
                let who = format!("granted by {} ", row.created_by);
                return Ok(decision.apply_grant(
                    RuleRef::new(format!("grant {}", row.id), who.trim_end()),
                    format!("covered by a standing approval: {}", grant.describe()),
                ));
            }
        }
        Ok(false)
    }

    /// Holds a call for a person's answer, for as long as policy's confirmation timeout (how
    /// many seconds, and the rule that says so) allows.
    pub(crate) async fn hold(
        &self,
        call: &ToolCall,
        arguments: &Value,
        context: Option<Value>,
        decision: &PolicyDecision,
        timeout: (u64, String),
        cancel: &CancellationToken,
    ) -> Result<Held> {
        let now = self.shared.now_us();
        let (timeout_secs, timeout_source) = timeout;
        let expires_at =
            now.saturating_add(i64::try_from(timeout_secs).unwrap_or(i64::MAX / 2) * 1_000_000);
        let reason = decision.deciding().map_or_else(
            || "policy asks for approval".to_owned(),
            |v| v.reason.clone(),
        );
        let id = new_id();
        let caller = call.caller.sanitized();
        self.shared
            .store
            .create_confirmation(NewConfirmation {
                id: id.clone(),
                execution_id: call.execution_id.to_string(),
                tool: call.tool.clone(),
                arguments: arguments.clone(),
                agent_id: caller.agent_id.clone(),
                skill: caller.skill.clone(),
                user_id: caller.user.clone(),
                reason: reason.clone(),
                explanation: serde_json::to_value(&decision.trace).unwrap_or(Value::Null),
                context,
                created_at: now,
                expires_at,
            })
            .await?;
        let notify = self.waiters.register(&id);
        self.shared.emit_for(
            call,
            EventKind::ConfirmationRequested {
                confirmation_id: id.clone(),
                reason,
                expires_at,
            },
        );
        tracing::info!(confirmation_id = %id, tool = %call.tool, "call waits for a person's approval");
        let outcome = self
            .wait(&id, expires_at, &notify, cancel, &timeout_source)
            .await;
        self.waiters.remove(&id);
        let held = outcome?;
        let (state, by) = match &held {
            Held::Approved(v) => ("approved", v.rule.as_ref().map(|r| r.source.clone())),
            Held::Refused { verdict, .. } => (
                if verdict.code.as_deref() == Some("confirmation_expired") {
                    "expired"
                } else {
                    "denied"
                },
                verdict.rule.as_ref().map(|r| r.source.clone()),
            ),
        };
        self.shared.emit_for(
            call,
            EventKind::ConfirmationResolved {
                confirmation_id: id,
                state: state.to_owned(),
                by,
            },
        );
        Ok(held)
    }

    async fn wait(
        &self,
        id: &str,
        expires_at: i64,
        notify: &Notify,
        cancel: &CancellationToken,
        timeout_source: &str,
    ) -> Result<Held> {
        loop {
            if let Some(held) = self.settled(id, timeout_source).await? {
                return Ok(held);
            }
            let now = self.shared.now_us();
            if now >= expires_at {
                self.shared.store.expire_confirmations(now).await?;
                continue;
            }
            let left = Duration::from_micros(u64::try_from(expires_at - now).unwrap_or(0));
            tokio::select! {
                () = notify.notified() => {}
                () = tokio::time::sleep(POLL.min(left)) => {}
                () = cancel.cancelled() => {
                    let withdrawn = Resolution {
                        approve: false,
                        by: "toolwarden".to_owned(),
                        note: Some("the call was cancelled while it waited".to_owned()),
                        grant: None,
                    };
                    let now = self.shared.now_us();
                    if let ResolveOutcome::Resolved { .. } =
                        self.shared.store.resolve_confirmation(id, withdrawn, now).await?
                    {
                        return Ok(Held::Refused {
                            verdict: LayerVerdict::stop(
                                Layer::Confirmation,
                                Decision::Deny,
                                "cancelled",
                                Severity::Warning,
                                "the call was cancelled while it waited for approval",
                            ),
                            cancelled: true,
                        });
                    }
                    // Someone answered first; their answer stands.
                }
            }
        }
    }

    /// The request's answer, if it has one.
    async fn settled(&self, id: &str, timeout_source: &str) -> Result<Option<Held>> {
        let Some(row) = self.shared.store.confirmation(id).await? else {
            return Err(RuntimeError::Internal(format!(
                "confirmation {id} disappeared from the store"
            )));
        };
        let by = row.resolved_by.clone().unwrap_or_default();
        let note = row
            .note
            .as_deref()
            .map_or_else(String::new, |n| format!(": {n}"));
        Ok(match row.state {
            ConfirmationState::Pending => None,
            ConfirmationState::Approved => Some(Held::Approved(
                LayerVerdict::allow(Layer::Confirmation, format!("approved by {by}{note}"))
                    .by(RuleRef::new(format!("confirmation {id}"), by)),
            )),
            ConfirmationState::Denied => Some(Held::Refused {
                verdict: LayerVerdict::stop(
                    Layer::Confirmation,
                    Decision::Deny,
                    "confirmation_denied",
                    Severity::Warning,
                    format!("denied by {by}{note}"),
                )
                .by(RuleRef::new(format!("confirmation {id}"), by)),
                cancelled: false,
            }),
            ConfirmationState::Expired => Some(Held::Refused {
                verdict: LayerVerdict::stop(
                    Layer::Confirmation,
                    Decision::Deny,
                    "confirmation_expired",
                    Severity::Warning,
                    "no one answered before the request expired, so the call is denied".to_owned(),
                )
                .by(RuleRef::new("confirmation.timeout_secs", timeout_source)),
                cancelled: false,
            }),
        })
    }

    /// Pending requests, oldest first.
    pub async fn pending_confirmations(&self) -> Result<Vec<ConfirmationRow>> {
        self.shared
            .store
            .expire_confirmations(self.shared.now_us())
            .await?;
        Ok(self
            .shared
            .store
            .confirmations(&ConfirmationQuery::default())
            .await?)
    }

    /// Requests in any state, newest answers first after the pending ones.
    pub async fn confirmations(&self, q: &ConfirmationQuery) -> Result<Vec<ConfirmationRow>> {
        self.shared
            .store
            .expire_confirmations(self.shared.now_us())
            .await?;
        Ok(self.shared.store.confirmations(q).await?)
    }

    fn new_grant(
        &self,
        tool: &str,
        call: Option<(&Value, &str)>,
        spec: &GrantSpec,
        by: &str,
    ) -> Result<NewGrant> {
        let arguments = call.map(|(args, _)| args);
        let scope = match (&spec.remember, arguments) {
            (Remember::Exact, Some(args)) => GrantScope::Exact(args.clone()),
            (Remember::Exact, None) => {
                return Err(RuntimeError::invalid(
                    "remember",
                    "an exact-call grant needs a call to copy the arguments from; give a pattern or the tool",
                ));
            }
            (Remember::Pattern(p), _) => GrantScope::Pattern(p.clone()),
            (Remember::Tool, _) => GrantScope::Tool,
        };
        scope
            .check()
            .map_err(|e| RuntimeError::invalid("remember", e))?;
        // The narrowest sensible default: the caller of the call being approved; a grant made
        // on its own has no caller to narrow it to.
        let who = spec.who.clone().unwrap_or(if call.is_some() {
            Who::SameCaller
        } else {
            Who::Anyone
        });
        let agent_id = match (&who, call) {
            (Who::Anyone, _) => None,
            (Who::Agent(a), _) => Some(a.clone()),
            (Who::SameCaller, Some((_, agent))) => Some(agent.to_owned()),
            (Who::SameCaller, None) => {
                return Err(RuntimeError::invalid(
                    "who",
                    "\"the same caller\" only makes sense when approving a call; name the agent",
                ));
            }
        };
        if let Who::Agent(a) = &who
            && a.trim().is_empty()
        {
            return Err(RuntimeError::invalid(
                "who",
                "name the agent the grant is for",
            ));
        }
        if spec.duration.is_some_and(|d| d.is_zero()) {
            return Err(RuntimeError::invalid(
                "duration",
                "a grant must last some time; leave the duration out for one that lasts until revoked",
            ));
        }
        let expires_at = spec.duration.map(|d| {
            self.shared
                .now_us()
                .saturating_add(i64::try_from(d.as_micros()).unwrap_or(i64::MAX / 2))
        });
        Ok(NewGrant {
            id: new_id(),
            tool: tool.to_owned(),
            scope,
            agent_id,
            skill: None,
            created_by: by.to_owned(),
            expires_at,
            confirmation_id: None,
        })
    }

    /// Answers a pending request as `by`, with an optional note. An approval may remember
    /// itself as a grant, which also releases every other pending call it covers. An unknown id
    /// is an error ([`RuntimeError::NotFound`], `unknown_confirmation`); a request already
    /// settled is left as it was ([`Answered::AlreadyResolved`]).
    pub async fn answer(
        &self,
        id: &str,
        answer: Answer,
        by: &str,
        note: Option<&str>,
    ) -> Result<Answered> {
        let now = self.shared.now_us();
        let grant = match &answer {
            Answer::Approve { grant: Some(spec) } => {
                let Some(row) = self.shared.store.confirmation(id).await? else {
                    return Err(unknown_confirmation(id));
                };
                Some(self.new_grant(&row.tool, Some((&row.arguments, &row.agent_id)), spec, by)?)
            }
            Answer::Approve { grant: None } | Answer::Deny => None,
        };
        let outcome = self
            .shared
            .store
            .resolve_confirmation(
                id,
                Resolution {
                    approve: answer.approves(),
                    by: by.to_owned(),
                    note: note.map(str::to_owned),
                    grant,
                },
                now,
            )
            .await?;
        self.waiters.wake(id);
        if let ResolveOutcome::Resolved {
            confirmation,
            grant: Some(grant),
        } = &outcome
        {
            self.shared
                .admin(
                    by,
                    "grant_created",
                    format!(
                        "approving confirmation {} granted {}",
                        confirmation.id,
                        core_grant(grant).describe()
                    ),
                    serde_json::to_value(grant.as_ref()).unwrap_or(Value::Null),
                )
                .await;
            self.release_covered(grant, by).await?;
        }
        match outcome {
            ResolveOutcome::Resolved {
                confirmation,
                grant,
            } => Ok(Answered::Resolved {
                confirmation,
                grant,
            }),
            ResolveOutcome::AlreadyResolved { state, by, at } => {
                Ok(Answered::AlreadyResolved { state, by, at })
            }
            ResolveOutcome::NotFound => Err(unknown_confirmation(id)),
        }
    }

    /// Creates a grant outside an approval: for `tool` (which must be registered), covering
    /// anyone unless `spec` names an agent.
    pub async fn grant(&self, tool: &str, spec: &GrantSpec, by: &str) -> Result<GrantRow> {
        self.shared.registered(tool)?;
        let new = self.new_grant(tool, None, spec, by)?;
        let row = self
            .shared
            .store
            .create_grant(new, self.shared.now_us())
            .await?;
        self.shared
            .admin(
                by,
                "grant_created",
                format!("granted {}", core_grant(&row).describe()),
                serde_json::to_value(&row).unwrap_or(Value::Null),
            )
            .await;
        self.release_covered(&row, by).await?;
        Ok(row)
    }

    /// Revokes a grant. One that is unknown or already revoked is an error
    /// ([`RuntimeError::NotFound`], `unknown_grant`).
    pub async fn revoke_grant(&self, id: &str, by: &str) -> Result<()> {
        let done = self
            .shared
            .store
            .revoke_grant(id, by, self.shared.now_us())
            .await?;
        if !done {
            return Err(RuntimeError::NotFound {
                code: "unknown_grant",
                message: format!("no grant in force has id {id:?}"),
            });
        }
        self.shared
            .admin(
                by,
                "grant_revoked",
                format!("revoked grant {id}"),
                Value::Null,
            )
            .await;
        Ok(())
    }

    /// Grants, active ones only unless `include_revoked`.
    pub async fn grants(&self, include_revoked: bool) -> Result<Vec<GrantRow>> {
        Ok(self
            .shared
            .store
            .grants(&GrantQuery {
                tool: None,
                active_at: (!include_revoked).then(|| self.shared.now_us()),
                include_revoked,
            })
            .await?)
    }

    /// Approves every pending request the grant covers.
    async fn release_covered(&self, grant: &GrantRow, by: &str) -> Result<()> {
        let g = core_grant(grant);
        let now = self.shared.now_us();
        for pending in self
            .shared
            .store
            .confirmations(&ConfirmationQuery::default())
            .await?
        {
            let mut caller = Caller::agent(&pending.agent_id);
            caller.skill = pending.skill.clone();
            if g.covers(&pending.tool, &pending.arguments, &caller, now) {
                let released = Resolution {
                    approve: true,
                    by: by.to_owned(),
                    note: Some(format!("covered by grant {}", grant.id)),
                    grant: None,
                };
                self.shared
                    .store
                    .resolve_confirmation(&pending.id, released, now)
                    .await?;
                self.waiters.wake(&pending.id);
            }
        }
        Ok(())
    }
}
