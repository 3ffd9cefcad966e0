//! Running a tool chain: the execution stage of a `chain__NAME` call. Every step is a call of
//! its own through the whole pipeline (policy with its trace, validation, confirmation,
//! sandbox, limits, its own audit row naming the run and the step, events), so a chain can do
//! nothing its caller could not do one call at a time.
//!
//! Steps start as soon as every step they need has ended, up to the chain's parallel slots; a
//! step whose needed step did not complete is skipped, and so on down the graph. A failed step
//! stops the run (`abort`, and `retry` once its retries are spent), leaves the rest going
//! (`continue`), or completes with a stand-in output (`default`). Retries are for transient
//! failures only: a time-out, an unreachable upstream, a network error; never a denial or
//! invalid arguments. Cancelling the chain's call, or its time limit, cancels every running
//! step; each still leaves its audit row, and the run record is written before the chain
//! call's answer.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tw_core::chain::{self, Chain, OnError, Root, Scope, Step, StepStatus, StepValue};
use tw_core::{ChainLink, ErrorCode, ToolCall, ToolStatus};
use tw_store::{ChainRunEnd, NewChainRun};

use super::Pipeline;
use crate::events::EventKind;
use crate::kind::ChainEntry;
use crate::sandboxed::{ExecFailure, Produced, failure as fail};

/// How a step's call goes through the pipeline: a boxed future behind a plain function the
/// facade supplies. The pipeline runs chains and chains run calls through the pipeline; the
/// compiler proves that circle of `async fn`s `Send` only when it passes through a named type
/// defined outside the pipeline's module, and the facade is the one module that may import the
/// pipeline without being imported by it.
pub type StepRunner = fn(
    Arc<Pipeline>,
    ToolCall,
    CancellationToken,
) -> Pin<Box<dyn Future<Output = tw_core::ToolResult> + Send>>;

/// How many chains deep a step may call another chain.
pub const MAX_DEPTH: u32 = 8;

/// What the run knows of one step, as the run record keeps it.
#[derive(Debug, Clone)]
struct StepState {
    status: StepStatus,
    output: Value,
    started_at: Option<i64>,
    completed_at: Option<i64>,
    attempts: u32,
    execution_ids: Vec<String>,
    error: Option<String>,
}

impl StepState {
    fn pending() -> Self {
        Self {
            status: StepStatus::Pending,
            output: Value::Null,
            started_at: None,
            completed_at: None,
            attempts: 0,
            execution_ids: Vec::new(),
            error: None,
        }
    }

    fn to_json(&self, id: &str) -> Value {
        json!({
            "id": id,
            "status": self.status,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "attempts": self.attempts,
            "execution_ids": self.execution_ids,
            "error": self.error,
        })
    }
}

/// How one step's calls ended.
struct StepDone {
    status: StepStatus,
    output: Value,
    attempts: u32,
    execution_ids: Vec<String>,
    error: Option<String>,
}

impl StepDone {
    /// A step (or item) whose task ended without an answer: it panicked.
    fn lost(why: String) -> Self {
        Self {
            status: StepStatus::Failed,
            output: Value::Null,
            attempts: 0,
            execution_ids: Vec::new(),
            error: Some(format!("the step's task failed: {why}")),
        }
    }
}

type StepFuture = Pin<Box<dyn Future<Output = (usize, StepDone)> + Send>>;

/// A step's (or `for_each` item's) future: polled in place when it is the only one in flight,
/// in a task of its own otherwise. A call that never waits (a no-op, a small file read, its audit
/// row committed in place) is done within one poll, so futures polled together in one task would
/// run one after another; as tasks they spread over the runtime's threads. `lost` answers for a
/// task that panicked. The run's cancellation reaches a task through its token, as it reaches a
/// future polled in place.
fn in_flight<T: Send + 'static>(
    run: impl Future<Output = T> + Send + 'static,
    alone: bool,
    lost: impl FnOnce(String) -> T + Send + 'static,
) -> Pin<Box<dyn Future<Output = T> + Send>> {
    if alone {
        return Box::pin(run);
    }
    let task = tokio::spawn(run);
    Box::pin(async move { task.await.unwrap_or_else(|e| lost(e.to_string())) })
}

/// Why the run stopped early.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Aborted,
    Cancelled,
    TimedOut,
}

/// What every call of one run shares.
#[derive(Clone)]
struct RunContext {
    pipeline: Arc<Pipeline>,
    /// The chain (shared, so a running step borrows its definition instead of copying it).
    entry: Arc<ChainEntry>,
    caller: tw_core::Caller,
    trace_id: tw_core::TraceId,
    run_id: String,
    depth: u32,
    no_wait: bool,
}

/// Whether a failed call may succeed if tried again.
fn transient(status: ToolStatus, code: &str) -> bool {
    status == ToolStatus::Timeout
        || (status == ToolStatus::Failed
            && matches!(
                code,
                ErrorCode::NETWORK_ERROR | crate::imported::UNAVAILABLE
            ))
}

/// The steps a step cannot run without: those it names in `depends_on`, its arguments and its
/// `for_each`. Its `when` may look at a step that did not complete (it reads `null` there).
fn hard_needs(step: &Step) -> Vec<&str> {
    let mut out: Vec<&str> = step.depends_on.iter().map(String::as_str).collect();
    let refs = step
        .arguments
        .refs()
        .into_iter()
        .chain(step.for_each.iter().flat_map(|f| f.items.refs()));
    for (_, r) in refs {
        if let Root::Output(id) = &r.root {
            out.push(id);
        }
    }
    out
}

impl Pipeline {
    /// Runs `entry`'s chain for `call` (the `chain__NAME` call, already judged and validated).
    pub(super) async fn run_chain(
        &self,
        entry: &Arc<ChainEntry>,
        call: &ToolCall,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> Result<Produced, ExecFailure> {
        let Some(pipeline) = self.me.upgrade() else {
            return Err(fail(
                ToolStatus::Failed,
                ErrorCode::EXECUTION_FAILED,
                "the runtime is shutting down".to_owned(),
                Map::new(),
            ));
        };
        let depth = call.chain.as_ref().map_or(0, |l| l.depth) + 1;
        if depth > MAX_DEPTH {
            return Err(fail(
                ToolStatus::Failed,
                ErrorCode::EXECUTION_FAILED,
                format!("chains call each other more than {MAX_DEPTH} deep"),
                Map::new(),
            ));
        }
        let chain = &entry.chain;
        let mut caller = call.caller.sanitized();
        // A chain a skill declares runs its steps under that skill, held to its tools. A caller
        // under another skill may not borrow it: a skill narrows, never widens (0006).
        match (&caller.skill, &entry.skill) {
            (Some(own), Some(declared)) if own != declared => {
                return Err(fail(
                    ToolStatus::PermissionDenied,
                    tw_core::skill::SKILL_DENIED,
                    format!(
                        "chain {} belongs to skill {declared}; a call under skill {own} cannot run its steps under {declared}",
                        chain.name
                    ),
                    Map::new(),
                ));
            }
            (_, Some(declared)) => caller.skill = Some(declared.clone()),
            (_, None) => {}
        }
        let run_id = call.execution_id.to_string();
        let ctx = RunContext {
            pipeline,
            entry: Arc::clone(entry),
            caller: caller.clone(),
            trace_id: call.trace_id.clone(),
            run_id: run_id.clone(),
            depth,
            no_wait: call.no_wait,
        };
        let mut states: Vec<StepState> = chain.steps.iter().map(|_| StepState::pending()).collect();
        let steps_json = |states: &[StepState]| {
            Value::Array(
                chain
                    .steps
                    .iter()
                    .zip(states)
                    .map(|(s, st)| st.to_json(&s.id))
                    .collect(),
            )
        };
        let store = &self.shared.store;
        let input = tw_core::redact::redact(&call.arguments);
        store
            .start_chain_run(NewChainRun {
                id: run_id.clone(),
                chain: chain.name.clone(),
                trace_id: call.trace_id.to_string(),
                agent_id: caller.agent_id.clone(),
                skill: caller.skill.clone(),
                user_id: caller.user.clone(),
                input,
                steps: steps_json(&states),
                started_at: self.shared.now_us(),
                owner: crate::owner::this_process().map(str::to_owned),
            })
            .await
            .map_err(|e| {
                fail(
                    ToolStatus::Failed,
                    ErrorCode::AUDIT_UNAVAILABLE,
                    format!("the chain run could not be recorded: {e}"),
                    Map::new(),
                )
            })?;

        let (stopped, values) = self
            .drive(chain, &ctx, call, &mut states, limit, cancel)
            .await;
        let scope = Scope {
            input: &call.arguments,
            steps: &values,
            item: None,
        };
        let mut outcome: Result<Value, (ToolStatus, String, String)> = match stopped {
            Some((Stop::Cancelled, _)) => Err((
                ToolStatus::Cancelled,
                ErrorCode::CANCELLED.to_owned(),
                "the chain run was cancelled".to_owned(),
            )),
            Some((Stop::TimedOut, _)) => Err((
                ToolStatus::Timeout,
                ErrorCode::TIMEOUT.to_owned(),
                format!("the chain did not finish within {} ms", limit.as_millis()),
            )),
            Some((Stop::Aborted, why)) => Err((
                ToolStatus::Failed,
                ErrorCode::EXECUTION_FAILED.to_owned(),
                why,
            )),
            None => Ok(Value::Null),
        };
        if outcome.is_ok() {
            outcome = match &chain.output {
                Some(t) => t.render(&scope).map_err(|e| {
                    (
                        ToolStatus::Failed,
                        ErrorCode::EXECUTION_FAILED.to_owned(),
                        format!("the chain's output: {e}"),
                    )
                }),
                // The last step's output, in the order the steps run.
                None => Ok(chain
                    .order()
                    .ok()
                    .and_then(|o| o.last().copied())
                    .map_or(Value::Null, |i| states[i].output.clone())),
            };
        }
        let summary: Map<String, Value> = chain
            .steps
            .iter()
            .zip(&states)
            .map(|(s, st)| (s.id.clone(), json!(st.status)))
            .collect();
        let mut execution = Map::new();
        execution.insert(
            "chain_run".to_owned(),
            json!({"run_id": run_id, "chain": chain.name, "steps": summary}),
        );
        let end = ChainRunEnd {
            status: match &outcome {
                Ok(_) => "completed",
                Err((ToolStatus::Cancelled, ..)) => "cancelled",
                Err((ToolStatus::Timeout, ..)) => "timeout",
                Err(_) => "failed",
            }
            .to_owned(),
            output: outcome.as_ref().ok().map(tw_core::redact::redact),
            error: outcome.as_ref().err().map(|(_, _, m)| m.clone()),
            steps: steps_json(&states),
            completed_at: self.shared.now_us(),
        };
        if let Err(e) = store.finish_chain_run(&run_id, end).await {
            return Err(fail(
                ToolStatus::Failed,
                ErrorCode::AUDIT_UNAVAILABLE,
                format!("the chain run's end could not be recorded: {e}"),
                execution,
            ));
        }
        match outcome {
            Ok(output) => Ok(Produced {
                output,
                execution,
                truncated: false,
            }),
            Err((status, code, message)) => Err(fail(status, &code, message, execution)),
        }
    }

    /// Runs the steps until none is left, or the run stops: then says why. Also gives what
    /// references read of every step that ended (the chain's output is made from it).
    async fn drive(
        &self,
        chain: &Chain,
        ctx: &RunContext,
        call: &ToolCall,
        states: &mut [StepState],
        limit: Duration,
        cancel: &CancellationToken,
    ) -> (Option<(Stop, String)>, HashMap<String, StepValue>) {
        let input = &call.arguments;
        let steps_cancel = cancel.child_token();
        // Steps running in tasks of their own stop if this run goes away before they end.
        let _stop_steps = steps_cancel.clone().drop_guard();
        let index: HashMap<&str, usize> = chain
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let order = chain.order().unwrap_or_default();
        // Worked out once per run: which steps each one waits for, and which it cannot do
        // without. What references read is kept up to date as steps end, not rebuilt.
        let lookup = |ids: Vec<&str>| -> Vec<usize> {
            ids.into_iter()
                .filter_map(|n| index.get(n).copied())
                .collect()
        };
        let needs: Vec<Vec<usize>> = chain
            .steps
            .iter()
            .map(|s| lookup(s.needs().into_iter().collect()))
            .collect();
        let hard: Vec<Vec<usize>> = chain.steps.iter().map(|s| lookup(hard_needs(s))).collect();
        let mut values = values(chain, states);
        let slots = chain.max_parallel.max(1) as usize;
        let mut running: FuturesUnordered<StepFuture> = FuturesUnordered::new();
        let mut stop: Option<(Stop, String)> = None;
        let deadline = tokio::time::sleep(limit);
        tokio::pin!(deadline);
        loop {
            if stop.is_none() {
                // Start (or settle) every step whose needs have ended, in order, while slots last.
                let mut launched = Vec::new();
                for &i in &order {
                    if running.len() + launched.len() >= slots {
                        break;
                    }
                    if states[i].status != StepStatus::Pending {
                        continue;
                    }
                    let step = &chain.steps[i];
                    if !needs[i].iter().all(|&n| states[n].status.is_final()) {
                        continue;
                    }
                    let now = self.shared.now_us();
                    if let Some(&j) = hard[i]
                        .iter()
                        .find(|&&j| states[j].status != StepStatus::Completed)
                    {
                        let why = format!(
                            "needs step {:?}, which is {}",
                            chain.steps[j].id, states[j].status
                        );
                        settle(&mut states[i], StepStatus::Skipped, now, why);
                        sync(&mut values, step, &states[i]);
                        self.announce_step(call, step, &states[i]);
                        continue;
                    }
                    let scope = Scope {
                        input,
                        steps: &values,
                        item: None,
                    };
                    if let Some(w) = &step.when
                        && !w.eval(&scope)
                    {
                        let why = format!("`when` is false: {w}");
                        settle(&mut states[i], StepStatus::Skipped, now, why);
                        sync(&mut values, step, &states[i]);
                        self.announce_step(call, step, &states[i]);
                        continue;
                    }
                    match prepare(step, &scope) {
                        Ok(calls) => {
                            states[i].status = StepStatus::Running;
                            states[i].started_at = Some(now);
                            self.announce_step(call, step, &states[i]);
                            let token = steps_cancel.child_token();
                            launched.push((i, run_step(ctx.clone(), calls, token, i)));
                        }
                        Err(message) => {
                            settle(&mut states[i], StepStatus::Failed, now, message.clone());
                            let stops = on_failure(step, &mut states[i]);
                            sync(&mut values, step, &states[i]);
                            self.announce_step(call, step, &states[i]);
                            if let Some(s) = stops {
                                stop = Some((s, format!("step {:?} failed: {message}", step.id)));
                                steps_cancel.cancel();
                                break;
                            }
                        }
                    }
                }
                let alone = running.is_empty() && launched.len() == 1;
                for (i, step) in launched {
                    running.push(in_flight(step, alone, move |why| (i, StepDone::lost(why))));
                }
            }
            if running.is_empty() {
                break;
            }
            tokio::select! {
                biased;
                done = running.next() => {
                    let Some((i, done)) = done else { break };
                    // The caller's cancellation reaches the steps' calls directly, so a step
                    // (its call ended on another thread) can report it before the branch below
                    // sees it: the run was cancelled all the same.
                    if stop.is_none() && cancel.is_cancelled() {
                        stop = Some((Stop::Cancelled, String::new()));
                        steps_cancel.cancel();
                    }
                    let step = &chain.steps[i];
                    let st = &mut states[i];
                    st.status = done.status;
                    st.output = done.output;
                    st.attempts = done.attempts;
                    st.execution_ids = done.execution_ids;
                    st.error = done.error.clone();
                    st.completed_at = Some(self.shared.now_us());
                    if stop.is_none() && matches!(done.status, StepStatus::Failed | StepStatus::Denied) {
                        let message = done.error.unwrap_or_default();
                        if let Some(s) = on_failure(step, st) {
                            stop = Some((s, format!("step {:?} {}: {message}", step.id, done.status)));
                            steps_cancel.cancel();
                        }
                    }
                    sync(&mut values, step, &states[i]);
                    self.announce_step(call, step, &states[i]);
                }
                () = cancel.cancelled(), if stop.is_none() => {
                    stop = Some((Stop::Cancelled, String::new()));
                    steps_cancel.cancel();
                }
                () = &mut deadline, if stop.is_none() => {
                    stop = Some((Stop::TimedOut, String::new()));
                    steps_cancel.cancel();
                }
            }
        }
        // Steps the run never reached.
        let now = self.shared.now_us();
        for (step, st) in chain.steps.iter().zip(states.iter_mut()) {
            if st.status.is_final() {
                continue;
            }
            let (status, why) = match stop {
                Some((Stop::Aborted, _)) => {
                    (StepStatus::Skipped, "the run stopped at a failed step")
                }
                Some((Stop::TimedOut, _)) => (StepStatus::Cancelled, "the chain ran out of time"),
                _ => (StepStatus::Cancelled, "the run was cancelled"),
            };
            settle(st, status, now, why.to_owned());
            self.announce_step(call, step, st);
        }
        (stop, values)
    }

    /// Tells the live feed where `step` is now (the chain call's event; its id is the run's).
    fn announce_step(&self, call: &ToolCall, step: &Step, st: &StepState) {
        if self.shared.events.has_subscribers() {
            self.shared.emit_for(
                call,
                EventKind::ChainStep {
                    step: step.id.clone(),
                    status: st.status,
                    attempts: st.attempts,
                    execution_ids: st.execution_ids.clone(),
                    detail: st.error.clone(),
                },
            );
        }
    }
}

/// Makes what references read of `step` what its state says now.
fn sync(values: &mut HashMap<String, StepValue>, step: &Step, st: &StepState) {
    if let Some(v) = values.get_mut(&step.id) {
        v.status = st.status;
        if st.status.produced_output() {
            v.output = st.output.clone();
        }
    }
}

fn settle(st: &mut StepState, status: StepStatus, now: i64, why: String) {
    st.status = status;
    st.completed_at = Some(now);
    st.error = Some(why);
}

/// What a failed step does to the run: `None` to go on (its state settled), or why to stop.
fn on_failure(step: &Step, st: &mut StepState) -> Option<Stop> {
    match &step.on_error {
        OnError::Continue => None,
        OnError::Default(v) => {
            st.status = StepStatus::Completed;
            st.output = v.clone();
            None
        }
        OnError::Abort | OnError::Retry { .. } => Some(Stop::Aborted),
    }
}

/// Every step's state as references read it.
fn values(chain: &Chain, states: &[StepState]) -> HashMap<String, StepValue> {
    chain
        .steps
        .iter()
        .zip(states)
        .map(|(s, st)| {
            (
                s.id.clone(),
                StepValue {
                    status: st.status,
                    output: st.output.clone(),
                },
            )
        })
        .collect()
}

/// The arguments of each call a step makes: one, or one per `for_each` item.
fn prepare(step: &Step, scope: &Scope<'_>) -> Result<Vec<(Value, Option<usize>)>, String> {
    let Some(each) = &step.for_each else {
        return step
            .arguments
            .render(scope)
            .map(|a| vec![(a, None)])
            .map_err(|e| format!("arguments: {e}"));
    };
    let items = each
        .items
        .render(scope)
        .map_err(|e| format!("for_each: {e}"))?;
    let Value::Array(items) = items else {
        return Err(format!(
            "for_each: the items are {}, not an array",
            tw_core::schema::kind_of(&items)
        ));
    };
    if items.len() > chain::MAX_ITEMS {
        return Err(format!(
            "for_each: {} items, more than the {} a step may run over",
            items.len(),
            chain::MAX_ITEMS
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(n, item)| {
            let scope = Scope {
                item: Some((item, n)),
                ..*scope
            };
            step.arguments
                .render(&scope)
                .map(|a| (a, Some(n)))
                .map_err(|e| format!("arguments of item {n}: {e}"))
        })
        .collect()
}

/// Runs a step's calls (with retries), `for_each` items up to their parallel slots.
async fn run_step(
    ctx: RunContext,
    calls: Vec<(Value, Option<usize>)>,
    cancel: CancellationToken,
    index: usize,
) -> (usize, StepDone) {
    let entry = Arc::clone(&ctx.entry);
    let step = &entry.chain.steps[index];
    let fan_out = step.for_each.is_some();
    let slots = step
        .for_each
        .as_ref()
        .map_or(1, |f| f.max_parallel.max(1) as usize);
    let mut outputs: Vec<Value> = vec![Value::Null; calls.len()];
    let mut done = StepDone {
        status: StepStatus::Completed,
        output: Value::Null,
        attempts: 0,
        execution_ids: Vec::new(),
        error: None,
    };
    let alone = slots == 1 || calls.len() == 1;
    let mut pending = calls.into_iter();
    let mut flight = FuturesUnordered::new();
    let items_cancel = cancel.child_token();
    // Items running in tasks of their own stop if this step goes away before they end.
    let _stop_items = items_cancel.clone().drop_guard();
    loop {
        while flight.len() < slots && done.status == StepStatus::Completed {
            let Some((arguments, item)) = pending.next() else {
                break;
            };
            let one = call_with_retries(
                ctx.clone(),
                index,
                arguments,
                item,
                items_cancel.child_token(),
            );
            flight.push(in_flight(one, alone, move |why| {
                (
                    item,
                    0,
                    Vec::new(),
                    Err((StepStatus::Failed, format!("the item's task failed: {why}"))),
                )
            }));
        }
        let Some(one) = flight.next().await else {
            break;
        };
        let (item, attempts, ids, result) = one;
        done.attempts += attempts;
        done.execution_ids.extend(ids);
        match result {
            Ok(output) => outputs[item.unwrap_or(0)] = output,
            Err((status, message)) if done.status == StepStatus::Completed => {
                done.status = status;
                done.error = Some(match item {
                    Some(n) => format!("item {n}: {message}"),
                    None => message,
                });
                // One item failing fails the step: the others stop.
                items_cancel.cancel();
            }
            Err(_) => {}
        }
    }
    if done.status == StepStatus::Completed {
        done.output = if fan_out {
            Value::Array(outputs)
        } else {
            outputs.pop().unwrap_or(Value::Null)
        };
    }
    (index, done)
}

/// One call of a step, tried again after transient failures as `on_error: retry` allows.
/// Gives the item, the attempts made, their execution ids, and the output or why it failed.
async fn call_with_retries(
    ctx: RunContext,
    index: usize,
    arguments: Value,
    item: Option<usize>,
    cancel: CancellationToken,
) -> (
    Option<usize>,
    u32,
    Vec<String>,
    Result<Value, (StepStatus, String)>,
) {
    let step = &ctx.entry.chain.steps[index];
    let (retries, backoff) = match step.on_error {
        OnError::Retry { max, backoff_ms } => (max, backoff_ms),
        _ => (0, 0),
    };
    let tool = step.target.tool_name();
    let mut ids = Vec::new();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut call = ctx
            .pipeline
            .call(&tool, arguments.clone(), ctx.caller.clone());
        call.trace_id = ctx.trace_id.clone();
        call.timeout = step.timeout_ms.map(Duration::from_millis);
        call.no_wait = ctx.no_wait;
        call.chain = Some(ChainLink {
            run_id: ctx.run_id.clone(),
            step: step.id.clone(),
            attempt,
            item,
            depth: ctx.depth,
        });
        ids.push(call.execution_id.to_string());
        let run = ctx.pipeline.step_runner;
        let result = run(Arc::clone(&ctx.pipeline), call, cancel.child_token()).await;
        if result.status == ToolStatus::Success {
            return (item, attempt, ids, Ok(result.output.unwrap_or(Value::Null)));
        }
        let (code, message) = result.error.as_ref().map_or(("", String::new()), |e| {
            (e.code.as_str(), e.message.clone())
        });
        let message = format!("{} ({}): {message}", result.status, tool);
        if attempt <= retries && transient(result.status, code) && !cancel.is_cancelled() {
            let wait = Duration::from_millis(backoff.saturating_mul(1 << (attempt - 1).min(16)));
            tokio::select! {
                () = tokio::time::sleep(wait) => continue,
                () = cancel.cancelled() => {}
            }
        }
        return (
            item,
            attempt,
            ids,
            Err((StepStatus::after_call(result.status), message)),
        );
    }
}
