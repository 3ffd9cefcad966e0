//! `toolwarden running` and `toolwarden cancel`: the calls in flight in every process on the data
//! directory (the CLI, the desktop app, agents' servers), read from their live feeds, and on a
//! team store on every replica (shown by its `host:pid` instead of a pid), and a way to
//! stop one of them from another terminal. The cancelled call still gets its audit record, written
//! by the process that ran it.

use tw_core::ExecutionId;
use tw_runtime::Runtime;
use tw_runtime::live::Flight;

use crate::audit::time;
use crate::out::{errln, out, outln};
use crate::table::Table;

/// Exit code when `cancel` finds no such call running anywhere.
const NOT_RUNNING: u8 = 9;

/// Lists the calls in flight on the data directory, oldest first.
pub(crate) async fn running(rt: &Runtime, json_out: bool) -> anyhow::Result<u8> {
    let flights = rt.running_everywhere().await;
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&flights)?)?;
        return Ok(0);
    }
    if flights.is_empty() {
        outln!("No calls in flight.")?;
        return Ok(0);
    }
    out!("{}", running_table(&flights).render())?;
    Ok(0)
}

fn running_table(flights: &[Flight]) -> Table {
    let mut table = Table::new(&["STARTED", "PID", "TOOL", "AGENT", "EXECUTION"]);
    for Flight {
        pid,
        replica,
        call: c,
    } in flights
    {
        table.row(vec![
            time(c.started_at),
            // Another replica's process: its host too.
            replica.clone().unwrap_or_else(|| pid.to_string()),
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
    if rt.cancel_anywhere(&id).await {
        outln!("Cancel requested for {id}; its audit record says how it ended.")?;
        Ok(0)
    } else {
        errln!("No call {id} is in flight on this data directory.");
        Ok(NOT_RUNNING)
    }
}
