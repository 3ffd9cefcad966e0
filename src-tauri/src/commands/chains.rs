//! The chains page: the chains loaded and the problems of those that did not load, one chain's
//! steps and YAML, the editor's check and save of a chain file, running a chain as the app's
//! caller, and its runs. The chain service reads, checks, saves and records; a run is the tool
//! `chain__NAME` through the same pipeline as every other call. These commands only translate.

use std::sync::Arc;

use tauri::State;
use tw_protocol::{
    ChainCheck, ChainDetail, ChainList, ChainParams, ChainRun, ChainRunParams, ChainRunsParams,
    ChainTextParams, IpcError, RunChainParams,
};
use tw_runtime::RuntimeError;
use tw_runtime::chains::chain_tool;
use tw_store::ChainRunQuery;

use super::{Reply, actor, caller, invalid, refused};
use crate::{Desktop, convert};

/// A refused save: a text with errors is an error at the text (the runtime's message lists
/// them, each with its line), so the editor shows it there; a name taken is a conflict.
pub(crate) fn refused_save(e: RuntimeError) -> IpcError {
    match e {
        RuntimeError::Invalid {
            field: "chain",
            message,
        } => invalid("/text", message),
        e => refused("saving the chain", e),
    }
}

/// Every chain in force, and every problem found loading them.
#[tauri::command]
pub async fn list_chains(state: State<'_, Arc<Desktop>>) -> Reply<ChainList> {
    let chains = state.runtime.chains();
    Ok(ChainList {
        chains: chains
            .summaries()
            .iter()
            .map(convert::chains::summary)
            .collect(),
        problems: chains
            .problems()
            .iter()
            .map(convert::chains::problem)
            .collect(),
    })
}

/// One chain: its steps, its input schema and its YAML.
#[tauri::command]
pub async fn get_chain(state: State<'_, Arc<Desktop>>, params: ChainParams) -> Reply<ChainDetail> {
    let entry = state
        .runtime
        .chains()
        .require(&params.name)
        .map_err(|e| refused("reading the chain", e))?;
    Ok(convert::chains::detail(&entry))
}

/// A chain file's problems, without saving it (the editor checks as the person types).
#[tauri::command]
pub async fn check_chain(
    state: State<'_, Arc<Desktop>>,
    params: ChainTextParams,
) -> Reply<ChainCheck> {
    let (chains, found) = state
        .runtime
        .chains()
        .check_text(&params.text, params.skill.as_deref());
    Ok(convert::chains::check(&chains, &found))
}

/// Saves a chain file into the chains directory: refused, and nothing written, when it has an
/// error or names a chain that exists; in force at once otherwise.
#[tauri::command]
pub async fn save_chain(
    state: State<'_, Arc<Desktop>>,
    params: ChainTextParams,
) -> Reply<Vec<String>> {
    state
        .runtime
        .chains()
        .save(
            &params.text,
            params.skill.as_deref(),
            &actor(),
            params.replace,
        )
        .await
        .map_err(refused_save)
}

/// Starts a run of a chain as the app's caller and answers its id at once; the run goes on
/// through the pipeline (policy, confirmation, each step's own checks, audit) and is followed
/// through its live events.
#[tauri::command]
pub async fn run_chain(state: State<'_, Arc<Desktop>>, params: RunChainParams) -> Reply<String> {
    let rt = &state.runtime;
    rt.chains()
        .require(&params.name)
        .map_err(|e| refused("running the chain", e))?;
    let call = rt.call(&chain_tool(&params.name), params.input, caller());
    let id = call.execution_id.to_string();
    let rt = rt.clone();
    tauri::async_runtime::spawn(async move {
        let result = rt.execute(call).await;
        tracing::debug!(run = %result.execution_id, status = %result.status, "chain run ended");
    });
    Ok(id)
}

/// Runs, newest first.
#[tauri::command]
pub async fn list_chain_runs(
    state: State<'_, Arc<Desktop>>,
    params: ChainRunsParams,
) -> Reply<Vec<ChainRun>> {
    let rows = state
        .runtime
        .chains()
        .runs(&ChainRunQuery {
            chain: params.chain,
            status: None,
            limit: params.limit,
        })
        .await
        .map_err(|e| refused("listing the chain runs", e))?;
    Ok(rows.iter().map(convert::chains::run).collect())
}

/// One run, with each step's state.
#[tauri::command]
pub async fn get_chain_run(
    state: State<'_, Arc<Desktop>>,
    params: ChainRunParams,
) -> Reply<ChainRun> {
    let (run, _calls) = state
        .runtime
        .chains()
        .run(&params.id)
        .await
        .map_err(|e| refused("reading the chain run", e))?;
    Ok(convert::chains::run(&run))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_refused_save_is_an_error_at_the_text_and_a_taken_name_a_conflict() {
        let e = refused_save(RuntimeError::invalid(
            "chain",
            "line 3: error: steps[0].tool: no tool named \"nope\"; line 7: error: output: bad",
        ));
        assert_eq!(
            (e.code.as_str(), e.field.as_deref(), e.message.as_str()),
            (
                "invalid",
                Some("/text"),
                "line 3: error: steps[0].tool: no tool named \"nope\"; line 7: error: output: bad"
            )
        );
        let exists = refused_save(RuntimeError::Conflict {
            code: "chain_exists",
            message: "a chain named \"notes\" exists already".into(),
        });
        assert_eq!(
            (exists.code.as_str(), exists.field.as_deref()),
            ("conflict", None)
        );
    }
}
