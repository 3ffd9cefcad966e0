//! Where the app's data and configuration are: resolved exactly as the CLI resolves them, so
//! both open the same database and policy (flag, then `TOOLWARDEN_DATA_DIR` /
//! `TOOLWARDEN_CONFIG`, then the config file, then the platform defaults); and the lock that
//! keeps a second app off the same data directory.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use tw_runtime::Runtime;
use tw_runtime::paths::Places;

/// The resolved places.
#[derive(Debug, Clone)]
pub struct Options {
    /// Config, data directory and workspace, as the CLI resolves them.
    pub places: Places,
}

impl Options {
    /// From command-line arguments (`--data-dir DIR`, `--config FILE`, `--workspace DIR`...).
    pub fn from_args(args: impl IntoIterator<Item = String>) -> anyhow::Result<Self> {
        let mut data_dir = None;
        let mut config = None;
        let mut workspace = Vec::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
                _ => (arg.clone(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .with_context(|| format!("{flag} needs a value"))
            };
            match flag.as_str() {
                "--data-dir" => data_dir = Some(PathBuf::from(value()?)),
                "--config" => config = Some(PathBuf::from(value()?)),
                "--workspace" => workspace.push(PathBuf::from(value()?)),
                "-h" | "--help" => {
                    println!(
                        "toolwarden-desktop [--data-dir DIR] [--config FILE] [--workspace DIR]...\n\
                         The same places as the toolwarden CLI; TOOLWARDEN_DATA_DIR and \
                         TOOLWARDEN_CONFIG work too."
                    );
                    std::process::exit(0);
                }
                other => bail!("unknown argument {other:?} (see --help)"),
            }
        }
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Self::resolve(
            data_dir.or_else(|| env("TOOLWARDEN_DATA_DIR")),
            config.or_else(|| env("TOOLWARDEN_CONFIG")),
            workspace,
        )
    }

    /// Fills in what was not given, in the CLI's order.
    pub fn resolve(
        data_dir: Option<PathBuf>,
        config_file: Option<PathBuf>,
        workspace: Vec<PathBuf>,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            places: Places::resolve(data_dir, config_file, workspace)?,
        })
    }

    /// Opens the runtime on these places.
    pub async fn open_runtime(&self) -> anyhow::Result<Runtime> {
        Runtime::open_at(&self.places).await.with_context(|| {
            format!(
                "cannot open toolwarden with data directory {}",
                self.places.data_dir.display()
            )
        })
    }

    /// Holds the data directory's app lock for as long as the returned file lives: one desktop
    /// app per data directory (CLI and agent processes are not affected).
    pub fn lock_single_instance(&self) -> anyhow::Result<std::fs::File> {
        let data_dir = &self.places.data_dir;
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("cannot create {}", data_dir.display()))?;
        let path = data_dir.join("desktop.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(file),
            Err(rustix::io::Errno::WOULDBLOCK) => bail!(
                "another Toolwarden desktop app is already running on {}",
                data_dir.display()
            ),
            Err(e) => Err(anyhow::anyhow!("cannot lock {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_environment_and_a_second_app_is_refused() {
        let dir = tempfile::TempDir::new().unwrap();
        let data = dir.path().join("data");
        let o = Options::from_args([
            "--data-dir".to_owned(),
            data.display().to_string(),
            format!("--workspace={}", dir.path().display()),
        ])
        .unwrap();
        assert_eq!(o.places.data_dir, data);
        assert_eq!(o.places.workspace, vec![dir.path().to_path_buf()]);
        let first = o.lock_single_instance().unwrap();
        let second = o.lock_single_instance().unwrap_err().to_string();
        assert!(second.contains("already running"), "{second}");
        drop(first);
        assert!(o.lock_single_instance().is_ok());
        let e = Options::from_args(["--bogus".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown argument \"--bogus\""), "{e}");
    }
}
