//! Resolving where things are (config file, data directory, workspace roots) from flags, the
//! environment and the config, and opening the runtime there. The order is: flag, environment,
//! config file, platform default.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use tw_core::Caller;
use tw_runtime::{Config, Runtime, RuntimeOptions, paths};

use crate::cli::Global;

/// Everything resolved before the runtime opens.
pub(crate) struct Context {
    pub config: Config,
    pub config_file: Option<PathBuf>,
    pub data_dir: PathBuf,
    pub workspace: Vec<PathBuf>,
    pub caller: Caller,
}

pub(crate) fn init_tracing(verbose: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if verbose { "info" } else { "warn" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

impl Context {
    pub(crate) fn load(g: &Global) -> anyhow::Result<Self> {
        let config_file = match &g.config {
            Some(p) => Some(p.clone()),
            None => paths::default_config_file().filter(|p| p.is_file()),
        };
        let config = match &config_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read config file {}", path.display()))?;
                Config::parse(&text, path, paths::home_dir().as_deref())?
            }
            None => Config::default(),
        };
        let data_dir = match (&g.data_dir, &config.data_dir) {
            (Some(d), _) => d.clone(),
            (None, Some(d)) => d.clone(),
            (None, None) => match paths::default_data_dir() {
                Some(d) => d,
                None => bail!("no data directory: pass --data-dir or set TOOLWARDEN_DATA_DIR"),
            },
        };
        let workspace = if !g.workspace.is_empty() {
            g.workspace.clone()
        } else if !config.workspace.is_empty() {
            config.workspace.clone()
        } else {
            vec![std::env::current_dir().context("cannot read the current directory")?]
        };
        let mut caller = Caller::agent(&g.agent);
        if let Some(s) = &g.skill {
            caller = caller.with_skill(s);
        }
        if let Ok(user) = std::env::var("USER") {
            caller = caller.with_user(&user);
        }
        Ok(Self {
            config,
            config_file,
            data_dir,
            workspace,
            caller,
        })
    }

    pub(crate) async fn open_runtime(&self) -> anyhow::Result<Runtime> {
        let options =
            RuntimeOptions::new(&self.data_dir, self.workspace.clone(), self.config.clone());
        Runtime::open(options).await.with_context(|| {
            format!(
                "cannot open toolwarden with data directory {}",
                self.data_dir.display()
            )
        })
    }

    /// `toolwarden config`
    pub(crate) fn show(&self) -> anyhow::Result<u8> {
        println!(
            "config file:   {}",
            self.config_file
                .as_ref()
                .map_or("(none: built-in defaults)".to_owned(), |f| f
                    .display()
                    .to_string())
        );
        println!("data dir:      {}", self.data_dir.display());
        println!(
            "audit db:      {}",
            self.data_dir.join(tw_runtime::DATABASE_FILE).display()
        );
        for (i, w) in self.workspace.iter().enumerate() {
            println!(
                "{:<15}{}",
                if i == 0 { "workspace:" } else { "" },
                w.display()
            );
        }
        println!("license tier:  {}", self.config.license_tier);
        println!(
            "mode:          {} (at start; `toolwarden mode` shows the current one)",
            self.config.mode
        );
        let files = tw_runtime::policy::policy_paths(&self.config);
        if files.is_empty() {
            println!(
                "policy:        the built-in policy (`toolwarden policy show` lists its rules)"
            );
        } else {
            for (i, f) in files.iter().enumerate() {
                println!("{:<15}{}", if i == 0 { "policy:" } else { "" }, f.display());
            }
        }
        Ok(0)
    }
}
