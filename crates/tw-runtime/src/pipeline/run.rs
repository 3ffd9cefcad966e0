//! Stage 6, running a call: what a call will run is planned once from its arguments (policy
//! judges that plan, and the same plan is started, so a relative program is judged where it
//! runs), then the tool runs in-process (built-ins, imported tools) or as a sandboxed process
//! (custom tools, the process-running built-ins), with the call's time limit and cancellation.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tw_core::target::Egress;
use tw_core::{ErrorCode, ToolCall, ToolCategory, ToolDefinition, ToolError, ToolStatus};

use super::{Outcome, Pipeline, Stage};
use crate::builtins::exec::{Planned, ProcessContext, ProcessTool};
use crate::builtins::net::NetContext;
use crate::builtins::{self, BuiltinTool, ToolContext};
use crate::events::EventKind;
use crate::kind::{Entry, ToolKind};
use crate::net::NetFacts;
use crate::sandboxed::{self, ExecFailure, Produced};

/// How long a tool may take to say what a held call would touch.
const PREVIEW_TIME: Duration = Duration::from_secs(3);

/// What a call will run, worked out once from its arguments: the exec layer judges this argv in
/// this directory, and the process is started from the same plan.
pub(crate) struct RunPlan {
    /// The command policy judges (a custom tool's rendered argv, a process tool's planned one);
    /// `None` lets the exec layer read the call's own `command` or `argv`.
    pub(super) argv: Option<Vec<String>>,
    /// The directory the process starts in: exec's `cwd`, run_tests' `path`, else the first
    /// workspace root.
    pub(super) cwd: PathBuf,
    /// A process tool's plan (or why it cannot run), kept for running.
    planned: Option<(
        Arc<dyn ProcessTool>,
        std::result::Result<Planned, builtins::ToolFailure>,
    )>,
}

impl Pipeline {
    /// Plans what a call will run (see [`RunPlan`]).
    pub(super) fn plan_run(&self, entry: &Entry, arguments: &Value) -> RunPlan {
        let root = self.shared.first_root();
        match &entry.kind {
            ToolKind::Custom(template) => RunPlan {
                argv: template
                    .render(arguments, &entry.definition.parameters)
                    .ok(),
                cwd: root,
                planned: None,
            },
            ToolKind::Process(tool) => {
                let planned = tool.plan(&self.process_context(), arguments);
                let (argv, cwd) = match &planned {
                    Ok(p) => (tool.policy_argv(p), p.cwd.clone().unwrap_or(root)),
                    Err(_) => (None, root),
                };
                RunPlan {
                    argv,
                    cwd,
                    planned: Some((Arc::clone(tool), planned)),
                }
            }
            ToolKind::Builtin(_) | ToolKind::Upstream(_) | ToolKind::Chain(_) => RunPlan {
                argv: None,
                cwd: root,
                planned: None,
            },
        }
    }

    fn process_context(&self) -> ProcessContext<'_> {
        ProcessContext {
            workspace: &self.shared.workspace,
            commands: &self.commands,
        }
    }

    pub(super) async fn stage_execute(
        &self,
        entry: &Entry,
        call: &ToolCall,
        run: RunPlan,
        cancel: &CancellationToken,
    ) -> Stage<Produced> {
        let def = &entry.definition;
        let limit = call
            .timeout
            .map_or(def.constraints.max_execution_time(), |t| {
                t.min(def.constraints.max_execution_time())
            });
        self.shared.emit_for(call, EventKind::Started);
        tracing::info!(name: "tool_call_started", trace_id = %call.trace_id, tool = %call.tool, "tool call started");
        let ran = match &entry.kind {
            ToolKind::Builtin(tool) => {
                self.run_builtin(tool.as_ref(), def, call, limit, cancel)
                    .await
            }
            // A process or a chain takes milliseconds; its future goes on the heap of its own,
            // so a built-in's call (microseconds) does not carry its size.
            ToolKind::Custom(template) => {
                let policy = self.settings.policy();
                Box::pin(crate::custom::run(
                    self.launch(call, def),
                    &policy,
                    &self.shared.workspace,
                    template,
                    run.cwd,
                    limit,
                    cancel,
                ))
                .await
            }
            ToolKind::Process(_) => match run.planned {
                Some(planned) => {
                    Box::pin(self.run_process(planned, run.cwd, call, def, limit, cancel)).await
                }
                None => Err(sandboxed::failure(
                    ToolStatus::Failed,
                    ErrorCode::EXECUTION_FAILED,
                    "the process tool planned no process".to_owned(),
                    Map::new(),
                )),
            },
            ToolKind::Upstream(tool) => {
                self.run_builtin(tool.as_ref(), def, call, limit, cancel)
                    .await
            }
            ToolKind::Chain(chain) => Box::pin(self.run_chain(chain, call, limit, cancel)).await,
        };
        ran.map_err(|f| Outcome {
            status: f.status,
            output: f.output,
            error: Some(f.error),
            output_bytes: 0,
            truncated: false,
            execution: f.execution,
        })
    }

    fn launch<'a>(&'a self, call: &'a ToolCall, def: &'a ToolDefinition) -> sandboxed::Launch<'a> {
        let policy = self.settings.policy();
        // Processes reach the network only when policy grants it, through the egress proxy,
        // judged by the grant and every other domain rule the call is held to.
        let egress = policy.rules.network_grant(def).map(|grant| {
            let mut layers = vec![grant];
            layers.extend(self.egress_layers(&policy, def, call));
            (Arc::clone(&self.shared.gatekeeper), Egress::new(layers))
        });
        sandboxed::Launch {
            sandbox: &self.shared.sandbox,
            events: &self.shared.events,
            clock: Arc::clone(&self.shared.clock),
            call,
            definition: def,
            raised_by: None,
            egress,
        }
    }

    /// The domain rules a call's connections are held to: the policy's rules for the tool,
    /// and those of the skill it is called under.
    fn egress_layers(
        &self,
        policy: &tw_core::policy::Policy,
        def: &ToolDefinition,
        call: &ToolCall,
    ) -> Vec<tw_core::target::EgressLayer> {
        let mut layers = policy.rules.egress_layers(def);
        if let Some(skill) = &call.caller.skill {
            let (needed, _) = policy.access.needed(def);
            layers.extend(self.skills.egress_layer(skill, def, needed));
        }
        layers
    }

    async fn run_process(
        &self,
        planned: (
            Arc<dyn ProcessTool>,
            std::result::Result<Planned, builtins::ToolFailure>,
        ),
        cwd: PathBuf,
        call: &ToolCall,
        def: &ToolDefinition,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> std::result::Result<Produced, ExecFailure> {
        let to_failure =
            |f: builtins::ToolFailure| sandboxed::failure(f.status, &f.code, f.message, Map::new());
        let (tool, planned) = planned;
        let planned = planned.map_err(to_failure)?;
        let background = planned.background;
        let mut argv = planned.argv.into_iter();
        let program = argv.next().unwrap_or_default();
        let policy = self.settings.policy();
        let (mut spec, raised_by) =
            sandboxed::base_spec(&policy, def, &self.shared.workspace, limit, program, cwd).await?;
        spec.args = argv.collect();
        spec.env = planned.env;
        spec.stdin = planned.stdin;
        if let Some(t) = planned.timeout {
            spec.timeout = spec.timeout.min(t);
        }
        if let Some(time_limit) = background {
            // Started and looked after by the runtime's jobs; this call only starts it. The
            // egress proxy lives as long as a call, so a job the policy grants hosts through it
            // would silently have none: refused instead.
            if spec.isolation >= tw_core::IsolationLevel::Strict
                && self.settings.policy().rules.network_grant(def).is_some()
            {
                return Err(to_failure(builtins::ToolFailure {
                    status: ToolStatus::ValidationError,
                    code: ErrorCode::INVALID_ARGUMENTS.to_owned(),
                    message: "/background: a rule grants this tool hosts through the egress \
                              proxy, which a background job cannot keep; run it in the \
                              foreground"
                        .to_owned(),
                }));
            }
            let now = self.shared.clock.now_us();
            let job = self
                .shared
                .jobs
                .start(&self.shared.sandbox, spec, &call.caller, time_limit, now)
                .await
                .map_err(to_failure)?;
            let mut execution = Map::new();
            if let Some(rule) = raised_by {
                execution.insert("isolation_raised_by".into(), json!(rule));
            }
            execution.insert("background_job".into(), json!(job.id));
            return Ok(Produced {
                output: json!({
                    "job_id": job.id,
                    "background": true,
                    "time_limit_ms": u64::try_from(time_limit.as_millis()).unwrap_or(u64::MAX),
                }),
                execution,
                truncated: false,
            });
        }
        let launch = sandboxed::Launch {
            raised_by: raised_by.clone(),
            ..self.launch(call, def)
        };
        let (out, execution) = sandboxed::run(launch, spec, cancel).await?;
        match tool.finish(&out) {
            Ok(output) => Ok(Produced {
                output,
                execution,
                truncated: out.stdout_truncated || out.stderr_truncated,
            }),
            Err(f) => Err(sandboxed::failure(f.status, &f.code, f.message, execution)),
        }
    }

    /// What a built-in runs with. Network and communication tools reach out only through the
    /// gatekeeper, under the policy's domain rules for this tool and those of the skill it is
    /// called under.
    fn tool_context(
        &self,
        def: &ToolDefinition,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> ToolContext {
        let net = matches!(
            def.category,
            ToolCategory::Network | ToolCategory::Communication
        )
        .then(|| {
            let policy = self.settings.policy();
            Arc::new(NetContext {
                gate: Arc::clone(&self.shared.gatekeeper),
                egress: Egress::new(self.egress_layers(&policy, def, call)),
                settings: Arc::clone(&self.shared.network),
                facts: Mutex::new(NetFacts::default()),
                browsers: Arc::clone(&self.shared.browsers),
                owner: format!(
                    "{}\u{0}{}",
                    call.caller.agent_id,
                    call.caller.skill.as_deref().unwrap_or_default()
                ),
                downloads: policy.rules.downloads(def).map(|(folder, rule)| {
                    let (policy, def) = (Arc::clone(&policy), def.clone());
                    builtins::net::DownloadGrant {
                        folder: folder.to_owned(),
                        rule: rule.to_owned(),
                        refusal: Box::new(move |path| policy.rules.path_refusal(&def, path)),
                    }
                }),
                frames: self.shared.events.has_watchers().then(|| {
                    let (shared, call) = (Arc::clone(&self.shared), call.clone());
                    Arc::new(move |kind| shared.emit_for(&call, kind)) as builtins::net::Announce
                }),
            })
        });
        ToolContext {
            workspace: Arc::clone(&self.shared.workspace),
            cancel: cancel.child_token(),
            max_output_bytes: def.constraints.max_output_bytes,
            net,
            sandbox: self.shared.sandbox.clone(),
            caller: call.caller.clone(),
        }
    }

    /// What the call would touch, as its tool sees it now, for the person asked to approve it;
    /// `None` when the tool has nothing to add or cannot tell within [`PREVIEW_TIME`].
    pub(super) async fn preview(
        &self,
        entry: &Entry,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Option<Value> {
        let ToolKind::Builtin(tool) = &entry.kind else {
            return None;
        };
        let ctx = self.tool_context(&entry.definition, call, cancel);
        let future = tool.preview(&ctx, &call.arguments)?;
        tokio::time::timeout(PREVIEW_TIME, future)
            .await
            .ok()
            .flatten()
    }

    async fn run_builtin(
        &self,
        tool: &dyn BuiltinTool,
        def: &ToolDefinition,
        call: &ToolCall,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> std::result::Result<Produced, ExecFailure> {
        let ctx = self.tool_context(def, call, cancel);
        let net = ctx.net.clone();
        // What the call did on the network goes into its audit record, however it ended.
        let execution = || {
            let mut execution = Map::new();
            if let Some(net) = &net {
                let facts = net.facts.lock().unwrap_or_else(PoisonError::into_inner);
                if facts.requests > 0 || facts.refusal.is_some() {
                    execution.insert("network".to_owned(), facts.to_json());
                }
            }
            execution
        };
        let fail = |status, code: &str, message: String| ExecFailure {
            status,
            error: ToolError::new(code, message),
            output: None,
            execution: execution(),
        };
        // Most built-ins are done on their first poll (the file tools' small operations run
        // inline), so that poll comes before a timer is made: a timer entry made and dropped
        // unused cost a tenth of a governed no-op call. The deadline is fixed before the poll,
        // so a tool that waits gets the same limit, and one that is done wins as it would first
        // in the biased select.
        let deadline = tokio::time::Instant::now() + limit;
        let mut running = tool.call(&ctx, &call.arguments);
        let first = std::future::poll_fn(|cx| Poll::Ready(running.as_mut().poll(cx))).await;
        let ran = match first {
            Poll::Ready(r) => r,
            Poll::Pending => tokio::select! {
                biased;
                r = &mut running => r,
                () = tokio::time::sleep_until(deadline) => {
                    ctx.cancel.cancel();
                    return Err(fail(ToolStatus::Timeout, ErrorCode::TIMEOUT, format!("tool {} did not finish within {} ms", def.name, limit.as_millis())));
                }
                () = cancel.cancelled() => {
                    return Err(fail(ToolStatus::Cancelled, ErrorCode::CANCELLED, "the call was cancelled".to_owned()));
                }
            },
        };
        ran.map(|output| Produced {
            output,
            execution: execution(),
            truncated: false,
        })
        .map_err(|f| fail(f.status, &f.code, f.message))
    }
}
