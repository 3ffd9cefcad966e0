//! The governed pipeline. [`Pipeline::execute`] is the one door every tool call goes through:
//!
//! 1. look up the tool,
//! 2. policy: every layer of `tw_core::policy` at once (tools, license, mode, exec, arguments,
//!    access, confirmation, and the skill layer for a call under a skill), with its explanation;
//!    a denial stops the call here,
//! 3. argument validation (every violation),
//! 4. rate limits, counted atomically in the store,
//! 5. confirmation: a standing grant, or a person's answer (the call waits),
//! 6. run with time limit and cancellation,
//! 7. output-schema validation,
//! 8. output cap,
//! 9. audit record,
//! 10. events.
//!
//! Validation runs before rate counting and confirmation: a person should never be asked to
//! approve a call that would be refused as invalid anyway, and the arguments they are shown are
//! then known to be well formed. Policy runs before validation so a denied tool is denied
//! whatever its arguments; its argument rules are written to be safe on any JSON. The output
//! schema is checked before the cap, on the whole output, because a truncated document cannot be
//! validated.
//!
//! Architecture invariant: exactly one audit record per call, committed before the result is
//! returned. The pipeline runs in its own task, so a caller that stops waiting (a dropped future,
//! a disconnected client) cancels the tool but cannot stop the record being written. When the
//! record cannot be written, the result is withheld and the call reported as failed.
//!
//! The pipeline owns no administrative state: it reads the snapshots the services hold (policy
//! and mode from settings, switches and custom-tool ranks from tools, skills, quarantine) and
//! asks the confirmation service to hold a call.

// A stage's error is the call's final outcome, moved once per call; boxing it would only add an
// allocation to every refusal.
#![allow(clippy::result_large_err)]

mod batch;
pub mod chain;
mod flights;
mod judge;
mod record;
mod run;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::Poll;
use std::time::Instant;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tw_core::policy::{self, Decision, PolicyDecision};
use tw_core::{
    Caller, ErrorCode, ToolCall, ToolDefinition, ToolError, ToolResult, ToolStatus, ValidatorCache,
    Violation,
};

pub use self::batch::BatchMode;
pub use self::flights::{Flight, RunningCall};
use self::flights::{Flights, Running};
use crate::config::Commands;
use crate::confirm::{ConfirmationService, Held};
use crate::error::RuntimeError;
use crate::events::EventKind;
use crate::ids::{new_execution_id, new_trace_id};
use crate::kind::Entry;
use crate::sandboxed::Produced;
use crate::settings::SettingsService;
use crate::shared::Shared;
use crate::skills::SkillService;
use crate::tools::ToolService;
use crate::upstream::UpstreamService;

/// Runs calls. Holds what it reads from the services, and the calls in flight.
pub struct Pipeline {
    shared: Arc<Shared>,
    settings: Arc<SettingsService>,
    tools: Arc<ToolService>,
    skills: Arc<SkillService>,
    confirmations: Arc<ConfirmationService>,
    upstreams: Arc<UpstreamService>,
    validators: ValidatorCache,
    commands: Commands,
    flights: Flights,
    /// Itself, for the chain engine, whose steps are calls of their own.
    me: Weak<Pipeline>,
    /// How the chain engine makes a step's call (see [`chain::StepRunner`]).
    step_runner: chain::StepRunner,
}

/// What the pipeline reads from: every service it consults.
pub(crate) struct Services {
    pub(crate) settings: Arc<SettingsService>,
    pub(crate) tools: Arc<ToolService>,
    pub(crate) skills: Arc<SkillService>,
    pub(crate) confirmations: Arc<ConfirmationService>,
    pub(crate) upstreams: Arc<UpstreamService>,
}

/// How a call ended before producing a result: the stage that stopped it says why.
pub(crate) struct Outcome {
    status: ToolStatus,
    output: Option<Value>,
    error: Option<ToolError>,
    output_bytes: u64,
    truncated: bool,
    execution: Map<String, Value>,
}

impl Outcome {
    fn stop(status: ToolStatus, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            output: None,
            error: Some(ToolError::new(code, message)),
            output_bytes: 0,
            truncated: false,
            execution: Map::new(),
        }
    }
}

/// A stage either passes its value on or stops the call with its final outcome.
type Stage<T> = std::result::Result<T, Outcome>;

impl Pipeline {
    pub(crate) fn new(
        shared: Arc<Shared>,
        services: Services,
        schema_cache_capacity: usize,
        commands: Commands,
        me: Weak<Pipeline>,
        step_runner: chain::StepRunner,
    ) -> Self {
        let Services {
            settings,
            tools,
            skills,
            confirmations,
            upstreams,
        } = services;
        Self {
            shared,
            settings,
            tools,
            skills,
            confirmations,
            upstreams,
            validators: ValidatorCache::new(schema_cache_capacity),
            commands,
            flights: Flights::default(),
            me,
            step_runner,
        }
    }

    /// The event bus every call's events go to.
    pub fn events(&self) -> &crate::events::EventBus {
        &self.shared.events
    }

    /// Builds a call with fresh ids.
    pub fn call(&self, tool: &str, arguments: Value, caller: Caller) -> ToolCall {
        ToolCall {
            tool: tool.to_owned(),
            arguments,
            caller,
            execution_id: new_execution_id(),
            trace_id: new_trace_id(),
            timeout: None,
            no_wait: false,
            chain: None,
        }
    }

    /// Runs one call through the governed pipeline and returns its result once its audit record
    /// is committed. Dropping the returned future cancels the tool; the record is still written.
    pub async fn execute(self: &Arc<Self>, call: ToolCall) -> ToolResult {
        self.execute_with_cancel(call, CancellationToken::new())
            .await
    }

    /// Like [`Pipeline::execute`], with a cancellation token the caller controls.
    pub async fn execute_with_cancel(
        self: &Arc<Self>,
        call: ToolCall,
        cancel: CancellationToken,
    ) -> ToolResult {
        let ids = (
            call.execution_id.clone(),
            call.trace_id.clone(),
            call.tool.clone(),
        );
        // The call runs in the caller's task, polled here: spawning it as a task of its own
        // cost a governed call a wake-up of another worker thread (and the task's making) each
        // time it waited. Dropped before its end (a client gone, a timeout around it), it is
        // cancelled and moves, pinned where it is, into a task of its own, which writes its
        // record (see [`Detached`]). A panic is caught here as a task would catch it.
        let this = Arc::clone(self);
        let mut detached = Detached {
            cancel: cancel.clone(),
            run: Some(Box::pin(async move { this.run_call(call, cancel).await })),
        };
        let joined = std::future::poll_fn(|cx| {
            let Some(run) = detached.run.as_mut() else {
                return Poll::Ready(Err("the call was polled after its end".to_owned()));
            };
            let polled = std::panic::catch_unwind(AssertUnwindSafe(|| run.as_mut().poll(cx)));
            if !matches!(polled, Ok(Poll::Pending)) {
                detached.run = None;
            }
            match polled {
                Ok(Poll::Pending) => Poll::Pending,
                Ok(Poll::Ready(result)) => Poll::Ready(Ok(result)),
                Err(panic) => Poll::Ready(Err(panic_message(panic.as_ref()))),
            }
        })
        .await;
        joined.unwrap_or_else(|e| {
            tracing::error!(execution_id = %ids.0, error = %e, "pipeline task failed");
            ToolResult {
                execution_id: ids.0,
                trace_id: ids.1,
                tool: ids.2,
                status: ToolStatus::Failed,
                output: None,
                error: Some(ToolError::new(
                    ErrorCode::EXECUTION_FAILED,
                    format!("internal error: {e}"),
                )),
                decision: None,
                metadata: Default::default(),
            }
        })
    }

    async fn run_call(&self, call: ToolCall, cancel: CancellationToken) -> ToolResult {
        let started_at = self.shared.now_us();
        let clock = Instant::now();
        let _running = Running::track(&self.flights, &call, started_at, &cancel);
        let span = tracing::info_span!(
            "tool_call",
            trace_id = %call.trace_id,
            span_id = %crate::ids::span_id(call.execution_id.as_str()),
            parent_span_id = call.chain.as_ref().map(|c| crate::ids::span_id(&c.run_id)),
            execution_id = %call.execution_id,
            tool = %call.tool,
            agent = %call.caller.agent_id,
        );
        let caller = call.caller.sanitized();
        let hidden = redacted(&call.arguments);
        let mut decision = None;
        let mut outcome = match self
            .stages(
                &call,
                &caller,
                hidden.as_ref().unwrap_or(&call.arguments),
                &cancel,
                &mut decision,
            )
            .instrument(span.clone())
            .await
        {
            Ok(o) | Err(o) => o,
        };
        let duration_us = i64::try_from(clock.elapsed().as_micros()).unwrap_or(i64::MAX);
        if let Some(link) = &call.chain {
            outcome
                .execution
                .insert("chain".to_owned(), serde_json::json!(link));
        }
        let result = ToolResult {
            execution_id: call.execution_id,
            trace_id: call.trace_id,
            tool: call.tool,
            status: outcome.status,
            output: outcome.output,
            error: outcome.error,
            decision,
            metadata: tw_core::ResultMetadata {
                started_at,
                completed_at: started_at.saturating_add(duration_us),
                duration_us,
                output_bytes: outcome.output_bytes,
                truncated: outcome.truncated,
                execution: outcome.execution,
            },
        };
        let stored = hidden.unwrap_or(call.arguments);
        self.finish(&caller, stored, result, &span).await
    }

    /// Records a call that will not run (e.g. one a stopped batch never reached): Cancelled with
    /// code `skipped`, audited and announced like any other.
    pub(crate) async fn skip(&self, call: ToolCall, message: String) -> ToolResult {
        let now = self.shared.now_us();
        let span = tracing::info_span!(
            "tool_call",
            trace_id = %call.trace_id,
            span_id = %crate::ids::span_id(call.execution_id.as_str()),
            execution_id = %call.execution_id,
            tool = %call.tool,
        );
        let caller = call.caller.sanitized();
        let result = ToolResult {
            execution_id: call.execution_id,
            trace_id: call.trace_id,
            tool: call.tool,
            status: ToolStatus::Cancelled,
            output: None,
            error: Some(ToolError::new(ErrorCode::SKIPPED, message)),
            decision: None,
            metadata: tw_core::ResultMetadata {
                started_at: now,
                completed_at: now,
                ..Default::default()
            },
        };
        let stored = redacted(&call.arguments).unwrap_or(call.arguments);
        self.finish(&caller, stored, result, &span).await
    }

    /// `redacted` is the call's arguments as the audit log will hold them: policy, grants and
    /// confirmations judge those, so a grant made from a logged call matches the call it was
    /// made from.
    async fn stages(
        &self,
        call: &ToolCall,
        caller: &Caller,
        redacted: &Value,
        cancel: &CancellationToken,
        decision_out: &mut Option<PolicyDecision>,
    ) -> Stage<Outcome> {
        let entry = self.stage_lookup(&call.tool)?;
        let def = &entry.definition;
        // Worked out once: policy judges the process this plan describes, and it is what runs.
        let run = self.plan_run(&entry, &call.arguments);
        let state = self.settings.state();
        let evaluation = self.evaluate(&state, &entry, redacted, caller, &run, true);
        let decision = decision_out.insert(evaluation.decision);
        stage_policy(decision)?;
        self.stage_validate_arguments(def, &call.arguments)?;
        if !self.shared.store.is_healthy() {
            return Err(Outcome::stop(
                ToolStatus::Failed,
                ErrorCode::AUDIT_UNAVAILABLE,
                "the audit store is unavailable, so no tool may run",
            ));
        }
        // Rate limits and confirmations are waited for in futures of their own, on the heap,
        // and only when the call has some: inline, they made every call's future (moved to the
        // heap whole when the call starts) several KiB larger.
        if !evaluation.rate_checks.is_empty() {
            Box::pin(self.stage_rate_limits(&call.tool, &evaluation.rate_checks, decision)).await?;
        }
        if decision.decision == Decision::Ask {
            let timeout = state.policy.confirmation_timeout.clone();
            Box::pin(self.stage_confirmation(&entry, call, redacted, decision, timeout, cancel))
                .await?;
        }
        if cancel.is_cancelled() {
            return Err(Outcome::stop(
                ToolStatus::Cancelled,
                ErrorCode::CANCELLED,
                "the call was cancelled before it started",
            ));
        }
        let produced = self.stage_execute(&entry, call, run, cancel).await?;
        self.stage_validate_output(def, &produced)?;
        Ok(stage_cap(def, produced))
    }

    fn stage_lookup(&self, name: &str) -> Stage<Arc<Entry>> {
        self.shared.registry.get(name).ok_or_else(|| {
            let shown: String = name.chars().take(80).collect();
            Outcome::stop(
                ToolStatus::NotFound,
                ErrorCode::TOOL_NOT_FOUND,
                format!("no tool named {shown:?} is registered"),
            )
        })
    }

    fn stage_validate_arguments(&self, def: &ToolDefinition, arguments: &Value) -> Stage<()> {
        match self.validators.validate(&def.parameters, arguments) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(violations)) => Err(invalid(
                ToolStatus::ValidationError,
                ErrorCode::INVALID_ARGUMENTS,
                "arguments",
                violations,
            )),
            Err(e) => Err(Outcome::stop(
                ToolStatus::Failed,
                ErrorCode::SCHEMA_ERROR,
                format!("tool {}'s parameter schema cannot be used: {e}", def.name),
            )),
        }
    }

    /// Stage 4: counts the call against its rate limits, atomically, in the store.
    async fn stage_rate_limits(
        &self,
        tool: &str,
        checks: &[policy::rate::RateCheck],
        decision: &mut PolicyDecision,
    ) -> Stage<()> {
        if checks.is_empty() {
            return Ok(());
        }
        let outcome = self
            .shared
            .store
            .rate_acquire(checks, self.shared.now_us())
            .await
            .map_err(|e| {
                Outcome::stop(
                    ToolStatus::Failed,
                    ErrorCode::AUDIT_UNAVAILABLE,
                    format!("rate limits could not be counted, so the call is refused: {e}"),
                )
            })?;
        decision.push(policy::rate::judge(tool, checks, &outcome));
        stage_policy(decision)
    }

    /// Stage 5: an Ask is answered by a standing grant or by a person; the call waits.
    async fn stage_confirmation(
        &self,
        entry: &Entry,
        call: &ToolCall,
        arguments: &Value,
        decision: &mut PolicyDecision,
        timeout: (u64, String),
        cancel: &CancellationToken,
    ) -> Stage<()> {
        if decision.decision != Decision::Ask {
            return Ok(());
        }
        let unavailable = |e: RuntimeError| {
            Outcome::stop(
                ToolStatus::Failed,
                ErrorCode::AUDIT_UNAVAILABLE,
                format!("the confirmation could not be handled, so the call is refused: {e}"),
            )
        };
        if self
            .confirmations
            .apply_grants(call, arguments, decision)
            .await
            .map_err(unavailable)?
        {
            return Ok(());
        }
        let reason = decision.deciding().map_or_else(
            || "policy asks for approval".to_owned(),
            |v| v.reason.clone(),
        );
        if call.no_wait {
            return Err(Outcome::stop(
                ToolStatus::RequiresConfirmation,
                ErrorCode::CONFIRMATION_REQUIRED,
                reason,
            ));
        }
        let context = self.preview(entry, call, cancel).await;
        match self
            .confirmations
            .hold(call, arguments, context, decision, timeout, cancel)
            .await
            .map_err(unavailable)?
        {
            Held::Approved(verdict) => {
                decision.settle_ask(verdict);
                Ok(())
            }
            Held::Refused { verdict, cancelled } => {
                let message = verdict.reason.clone();
                let code = verdict.code.clone().unwrap_or_default();
                decision.settle_ask(verdict);
                Err(if cancelled {
                    Outcome::stop(ToolStatus::Cancelled, ErrorCode::CANCELLED, message)
                } else {
                    Outcome::stop(ToolStatus::PermissionDenied, &code, message)
                })
            }
        }
    }

    fn stage_validate_output(&self, def: &ToolDefinition, produced: &Produced) -> Stage<()> {
        let Some(schema) = &def.output_schema else {
            return Ok(());
        };
        match self.validators.validate(schema, &produced.output) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(violations)) => {
                let mut o = invalid(
                    ToolStatus::Failed,
                    ErrorCode::INVALID_OUTPUT,
                    "output",
                    violations,
                );
                o.execution = produced.execution.clone();
                Err(o)
            }
            Err(e) => Err(Outcome::stop(
                ToolStatus::Failed,
                ErrorCode::SCHEMA_ERROR,
                format!("tool {}'s output schema cannot be used: {e}", def.name),
            )),
        }
    }

    /// Stages 9 and 10: the audit record (the result is withheld if it cannot be written), then
    /// the events. `arguments` are already redacted.
    async fn finish(
        &self,
        caller: &Caller,
        arguments: Value,
        mut result: ToolResult,
        span: &tracing::Span,
    ) -> ToolResult {
        if let Err(e) = self.audit(caller, arguments, &result).await {
            let _enter = span.enter();
            tracing::error!(error = %e, "audit record could not be written; result withheld");
            self.shared.metrics.audit_failed();
            self.emit(
                &result,
                EventKind::Warning {
                    message: format!("audit record could not be written: {e}"),
                },
            );
            result.status = ToolStatus::Failed;
            result.output = None;
            result.metadata.output_bytes = 0;
            result.error = Some(ToolError::new(
                ErrorCode::AUDIT_UNAVAILABLE,
                format!("the audit record could not be written, so the result is withheld: {e}"),
            ));
        }
        self.shared.metrics.record(caller, &result);
        if let Some(t) = &self.shared.telemetry {
            t.span(caller, &result);
        }
        self.announce(&result, span);
        result
    }
}

/// A governed call being polled by its caller. Dropped before its end, it cancels the call and
/// hands the rest to a task of its own, so the call still writes its audit record (and stops
/// its tool) though nobody waits for its answer.
struct Detached {
    run: Option<Pin<Box<dyn Future<Output = ToolResult> + Send>>>,
    cancel: CancellationToken,
}

impl Drop for Detached {
    fn drop(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        self.cancel.cancel();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(run)),
            Err(_) => tracing::error!(
                "a governed call was dropped outside the runtime before its end; its record \
                 is not written"
            ),
        }
    }
}

fn invalid(status: ToolStatus, code: &str, what: &str, violations: Vec<Violation>) -> Outcome {
    let n = violations.len();
    let message = format!(
        "{what} do not match the schema ({n} violation{}): {}",
        if n == 1 { "" } else { "s" },
        tw_core::schema::join_violations(&violations)
    );
    let mut o = Outcome::stop(status, code, message);
    if let Some(e) = o.error.as_mut() {
        e.violations = violations;
    }
    o
}

/// Stage 2 (and after each later verdict): a denial stops the call with the deciding layer's
/// code and reason.
fn stage_policy(decision: &PolicyDecision) -> Stage<()> {
    if decision.decision != Decision::Deny {
        return Ok(());
    }
    let deciding = decision.deciding();
    Err(Outcome::stop(
        ToolStatus::PermissionDenied,
        deciding
            .and_then(|v| v.code.as_deref())
            .unwrap_or(ErrorCode::POLICY_DENIED),
        deciding.map_or_else(|| "policy denies the call".to_owned(), |v| v.reason.clone()),
    ))
}

/// Arguments as they may be stored and judged, secrets redacted: `None` when there is nothing to
/// redact, so the common call copies nothing.
fn redacted(arguments: &Value) -> Option<Value> {
    tw_core::redact::needs_redaction(arguments).then(|| tw_core::redact::redact(arguments))
}

/// Stage 8: the output cap.
fn stage_cap(def: &ToolDefinition, produced: Produced) -> Outcome {
    let max = usize::try_from(def.constraints.max_output_bytes).unwrap_or(usize::MAX);
    let (output, bytes, truncated) = tw_core::output::cap_output(produced.output, max);
    Outcome {
        status: ToolStatus::Success,
        output: Some(output),
        error: None,
        output_bytes: bytes as u64,
        truncated: truncated || produced.truncated,
        execution: produced.execution,
    }
}

/// What a caught panic said, as a task's `JoinError` would put it.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic");
    format!("task panicked with message {what:?}")
}
