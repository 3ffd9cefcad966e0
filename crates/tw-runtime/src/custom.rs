//! Custom tools: an administrator-defined command, filled from validated arguments and run as a child
//! process in the sandbox, with the tool's time limit, output cap and the call's cancellation.
//!
//! A command that cannot get the isolation its definition (or policy) asks for is a SandboxError
//! before anything starts; it is never run with less. Exit status 0 is success; anything else is a
//! failure whose message carries the end of standard error, which is where programs explain
//! themselves.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tw_core::policy::Policy;
use tw_core::{CommandTemplate, ErrorCode, OutputFormat, ToolStatus};
use tw_sandbox::Workspace;

use crate::sandboxed::{self, ExecFailure, Launch, Produced, STDERR_IN_MESSAGE, failure, tail};

pub(crate) async fn run(
    launch: Launch<'_>,
    policy: &Arc<Policy>,
    workspace: &Arc<Workspace>,
    template: &CommandTemplate,
    cwd: std::path::PathBuf,
    limit: std::time::Duration,
    cancel: &CancellationToken,
) -> Result<Produced, ExecFailure> {
    let def = launch.definition;
    let argv = template
        .render(&launch.call.arguments, &def.parameters)
        .map_err(|e| {
            failure(
                ToolStatus::ValidationError,
                ErrorCode::INVALID_ARGUMENTS,
                e.to_string(),
                Default::default(),
            )
        })?;
    let mut argv = argv.into_iter();
    let program = argv.next().unwrap_or_default();
    let (mut spec, raised_by) =
        sandboxed::base_spec(policy, def, workspace, limit, program, cwd).await?;
    spec.args = argv.collect();
    spec.env = template.env.clone();
    let launch = Launch {
        raised_by: raised_by.clone(),
        ..launch
    };
    let (out, mut execution) = sandboxed::run(launch, spec, cancel).await?;
    if !out.stderr.is_empty() {
        execution.insert("stderr".into(), json!(tail(&out.stderr, STDERR_IN_MESSAGE)));
    }
    if out.exit.code != Some(0) {
        let how = match (out.exit.code, out.exit.signal) {
            (_, Some(sig)) => format!("was killed by signal {sig}"),
            (Some(code), None) => format!("exited with status {code}"),
            (None, None) => "ended abnormally".to_owned(),
        };
        let stderr = tail(&out.stderr, STDERR_IN_MESSAGE);
        let message = if stderr.is_empty() {
            format!("{} {how}", template.program())
        } else {
            format!("{} {how}: {stderr}", template.program())
        };
        let mut f = failure(
            ToolStatus::Failed,
            ErrorCode::EXECUTION_FAILED,
            message,
            execution,
        );
        f.output = Some(Value::String(
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
        return Err(f);
    }
    let output = match template.output {
        OutputFormat::Text => Value::String(String::from_utf8_lossy(&out.stdout).into_owned()),
        OutputFormat::Json => {
            if out.stdout_truncated {
                return Err(failure(
                    ToolStatus::Failed,
                    ErrorCode::INVALID_OUTPUT,
                    format!(
                        "standard output exceeded {} bytes, so the JSON result is incomplete",
                        def.constraints.max_output_bytes
                    ),
                    execution,
                ));
            }
            serde_json::from_slice(&out.stdout).map_err(|e| {
                failure(
                    ToolStatus::Failed,
                    ErrorCode::INVALID_OUTPUT,
                    format!("standard output is not one JSON document: {e}"),
                    execution.clone(),
                )
            })?
        }
    };
    Ok(Produced {
        output,
        execution,
        truncated: out.stdout_truncated,
    })
}
