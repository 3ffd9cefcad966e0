//! The `toolwarden` binary: parses the command line, opens the runtime on the configured data
//! directory and workspace, and runs one command. Errors that are Toolwarden's own (bad config,
//! unusable data directory) exit with code 10 and a one-line message; tool calls exit with the code
//! of their status, and refused requests with the code of their kind (`exit`). A reader that
//! closes stdout ends the command quietly (`out`).

// Every print goes through `out`, where a closed stdout is an error instead of a panic.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod audit;
mod call;
mod chains;
mod cli;
mod confirm;
mod exit;
mod mcp;
mod out;
mod policy;
mod running;
mod sandbox;
mod serve;
mod setup;
mod skills;
mod store;
mod table;
mod tools;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::out::errln;

use crate::exit::EXIT_INTERNAL;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A usage error: clap writes it to stderr (ignoring a closed one) and exits 2.
        Err(e) if e.use_stderr() => e.exit(),
        // `--help` and `--version` go to stdout, like every other output: through `out`.
        Err(e) => {
            let text = e.render();
            let shown = if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                out::out!("{}", text.ansi())
            } else {
                out::out!("{text}")
            };
            return match shown {
                Ok(()) => ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(EXIT_INTERNAL)),
                Err(e) if out::is_closed(&e) => ExitCode::from(out::EXIT_CLOSED),
                Err(e) => {
                    errln!("error: {e:#}");
                    ExitCode::from(EXIT_INTERNAL)
                }
            };
        }
    };
    setup::init_tracing(cli.global.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_INTERNAL);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        // The runtime is closed by now: every call that started has written its record.
        Err(e) if out::is_closed(&e) => ExitCode::from(out::EXIT_CLOSED),
        Err(e) => {
            errln!("error: {e:#}");
            ExitCode::from(exit::for_error(&e))
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<u8> {
    let ctx = setup::Context::load(&cli.global)?;
    if let Command::Config = cli.command {
        return ctx.show();
    }
    // A migration opens the two stores it names, not the configured one.
    if let Command::Store(crate::cli::StoreCommand::Migrate { from, to, json }) = &cli.command {
        return store::migrate(&ctx, from, to, *json).await;
    }
    let rt = match ctx.open_runtime().await {
        Ok(rt) => rt,
        // Toolwarden cannot start: its own trouble, whatever the cause's kind.
        Err(e) => {
            errln!("error: {e:#}");
            return Ok(EXIT_INTERNAL);
        }
    };
    for w in rt.warnings() {
        errln!("warning: {w}");
    }
    if matches!(
        cli.command,
        Command::Call(_)
            | Command::Batch(_)
            | Command::Chains(crate::cli::ChainsCommand::Run { .. })
            | Command::Mcp { cmd: None }
            | Command::Serve { cmd: None, .. }
    ) {
        // Lets the desktop app (or another watcher) see these calls run and cancel them.
        if let Err(e) = rt.publish_live() {
            tracing::debug!(error = %e, "the live feed is not published");
        }
    }
    let result = match cli.command {
        Command::Tools(cmd) => tools::run(&rt, &ctx, cmd).await,
        Command::Call(args) => call::call(&rt, &ctx, args).await,
        Command::Batch(args) => call::batch(&rt, &ctx, args).await,
        Command::Audit(cmd) => audit::run(&rt, cmd).await,
        Command::Store(cmd) => store::run(&rt, cmd).await,
        Command::Policy(cmd) => policy::run(&rt, &ctx, cmd).await,
        Command::Confirm(cmd) => confirm::confirm(&rt, &ctx, cmd).await,
        Command::Grants(cmd) => confirm::grants(&rt, &ctx, cmd).await,
        Command::Mode { cmd } => confirm::mode(&rt, &ctx, cmd).await,
        Command::Sandbox(cmd) => sandbox::run(&rt, cmd).await,
        Command::Skills(cmd) => skills::run(&rt, &ctx, cmd).await,
        Command::Chains(cmd) => chains::run(&rt, &ctx, cmd).await,
        Command::Running { json } => running::running(&rt, json).await,
        Command::Cancel { execution_id } => running::cancel(&rt, &execution_id).await,
        Command::Mcp { cmd: None } => mcp::serve(&rt, &ctx, cli.global.agent.clone()).await,
        Command::Mcp { cmd: Some(cmd) } => mcp::admin(&rt, &ctx, cmd).await,
        Command::Serve { listen, cmd } => serve::run(&rt, &ctx, listen, cmd).await,
        Command::Config => Ok(0),
    };
    rt.close().await;
    result
}
