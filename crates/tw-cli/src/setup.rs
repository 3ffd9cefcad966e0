//! Resolving where things are (config file, data directory, workspace roots) from flags, the
//! environment and the config, and opening the runtime there. The order is: flag, environment,
//! config file, platform default.

use anyhow::Context as _;
use tw_core::Caller;
use tw_runtime::Runtime;
use tw_runtime::paths::Places;

use crate::cli::Global;
use crate::out::outln;

/// Everything resolved before the runtime opens.
pub(crate) struct Context {
    pub places: Places,
    pub caller: Caller,
}

pub(crate) fn init_tracing(verbose: bool) {
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{EnvFilter, filter::dynamic_filter_fn};
    let default = if verbose { "info" } else { "warn" };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(tw_runtime::log_filter(default)));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // A log line stderr cannot take (`2>&1 | head`) is dropped: by default tracing would
        // report it with `eprintln!`, which panics on that same closed pipe.
        .log_internal_errors(false)
        .with_filter(filter)
        // Once stdout's reader is gone, the MCP transport's complaints that it cannot write
        // there are expected: the command is ending quietly, as it was asked to. (Looked at
        // when the transport complains, which may be before the watch on stdout saw it go.)
        .with_filter(dynamic_filter_fn(|meta, _| {
            !(meta.target().starts_with("rmcp")
                && *meta.level() <= tracing::Level::WARN
                && (crate::out::is_gone() || crate::out::reader_gone_now()))
        }));
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

impl Context {
    pub(crate) fn load(g: &Global) -> anyhow::Result<Self> {
        let places = Places::resolve(g.data_dir.clone(), g.config.clone(), g.workspace.clone())?;
        let mut caller = Caller::agent(g.agent.as_deref().unwrap_or("cli"));
        if let Some(s) = &g.skill {
            caller = caller.with_skill(s);
        }
        if let Ok(user) = std::env::var("USER") {
            caller = caller.with_user(&user);
        }
        Ok(Self { places, caller })
    }

    pub(crate) async fn open_runtime(&self) -> anyhow::Result<Runtime> {
        Runtime::open_at(&self.places).await.with_context(|| {
            format!(
                "cannot open toolwarden with data directory {}",
                self.places.data_dir.display()
            )
        })
    }

    /// `toolwarden config`
    pub(crate) fn show(&self) -> anyhow::Result<u8> {
        outln!(
            "config file:   {}",
            self.places
                .config_file
                .as_ref()
                .map_or("(none: built-in defaults)".to_owned(), |f| f
                    .display()
                    .to_string())
        )?;
        outln!("data dir:      {}", self.places.data_dir.display())?;
        outln!(
            "audit db:      {}",
            self.places
                .data_dir
                .join(tw_runtime::DATABASE_FILE)
                .display()
        )?;
        for (i, w) in self.places.workspace.iter().enumerate() {
            outln!(
                "{:<15}{}",
                if i == 0 { "workspace:" } else { "" },
                w.display()
            )?;
        }
        outln!("license tier:  {}", self.places.config.license_tier)?;
        outln!(
            "mode:          {} (at start; `toolwarden mode` shows the current one)",
            self.places.config.mode
        )?;
        let files = tw_runtime::policy::policy_paths(&self.places.config);
        if files.is_empty() {
            outln!(
                "policy:        the built-in policy (`toolwarden policy show` lists its rules)"
            )?;
        } else {
            for (i, f) in files.iter().enumerate() {
                outln!("{:<15}{}", if i == 0 { "policy:" } else { "" }, f.display())?;
            }
        }
        Ok(0)
    }
}
