//! `toolwarden running` and `toolwarden cancel`: the calls in flight in every process on the data
//! directory (the CLI, the desktop app, agents' servers), read from their live feeds, and a way to
//! stop one of them from another terminal. The cancelled call still gets its audit record, written
//! by the process that ran it.

use serde_json::json;
use tw_core::ExecutionId;
use tw_runtime::Runtime;
use tw_runtime::live;

use crate::audit::time;
use crate::out::{errln, out, outln};
use crate::table::Table;

/// Exit code when `cancel` finds no such call running anywhere.
const NOT_RUNNING: u8 = 9;

/// Lists the calls in flight elsewhere and in this process, oldest first.
pub(crate) async fn running(rt: &Runtime, json_out: bool) -> anyhow::Result<u8> {
    let calls = in_flight(rt).await;
    if json_out {
        let rows: Vec<_> = calls
            .iter()
            .map(|(pid, c)| {
                json!({
                    "pid": pid,
                    "execution_id": c.execution_id,
                    "trace_id": c.trace_id,
                    "tool": c.tool,
                    "agent_id": c.agent_id,
                    "started_at": c.started_at,
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(0);
    }
    if calls.is_empty() {
        outln!("No calls in flight.")?;
        return Ok(0);
    }
    out!("{}", running_table(&calls).render())?;
    Ok(0)
}

/// Every process's calls in flight on the data directory, each with its process id, oldest
/// first.
async fn in_flight(rt: &Runtime) -> Vec<(u32, live::RunningCall)> {
    let mut calls: Vec<(u32, live::RunningCall)> = live::running_elsewhere(rt.data_dir())
        .await
        .into_iter()
        .flat_map(|(pid, calls)| calls.into_iter().map(move |c| (pid, c)))
        .collect();
    calls.sort_by_key(|(_, c)| c.started_at);
    calls
}

fn running_table(calls: &[(u32, live::RunningCall)]) -> Table {
    let mut table = Table::new(&["STARTED", "PID", "TOOL", "AGENT", "EXECUTION"]);
    for (pid, c) in calls {
        table.row(vec![
            time(c.started_at),
            pid.to_string(),
            c.tool.clone(),
            c.agent_id.clone(),
            c.execution_id.to_string(),
        ]);
    }
    table
}

/// Cancels a call in flight in this or any other process on the data directory.
pub(crate) async fn cancel(rt: &Runtime, id: &str) -> anyhow::Result<u8> {
    let id = match ExecutionId::new(id) {
        Ok(id) => id,
        Err(e) => {
            // A usage error (exit 2), like any other bad argument.
            errln!("error: not an execution id: {e}");
            return Ok(2);
        }
    };
    if rt.cancel(&id) || live::cancel_elsewhere(rt.data_dir(), &id).await {
        outln!("Cancel requested for {id}; its audit record says how it ended.")?;
        Ok(0)
    } else {
        errln!("No call {id} is in flight on this data directory.");
        Ok(NOT_RUNNING)
    }
}
