//! Where Toolwarden keeps its files by default, shared by the CLI and the desktop app so both open
//! the same audit log and custom tools.

use std::path::PathBuf;

/// Environment variable that overrides the data directory.
pub const DATA_DIR_ENV: &str = "TOOLWARDEN_DATA_DIR";
/// Environment variable that names the config file.
pub const CONFIG_ENV: &str = "TOOLWARDEN_CONFIG";

/// The platform's data directory for Toolwarden (`~/.local/share/toolwarden` on Linux).
pub fn default_data_dir() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("toolwarden"))
}

/// The default config file (`~/.config/toolwarden/config.toml` on Linux); used only if it exists.
pub fn default_config_file() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("toolwarden").join("config.toml"))
}

/// The user's downloads folder (`XDG_DOWNLOAD_DIR`, `~/Downloads`), for exports.
pub fn download_dir() -> Option<PathBuf> {
    dirs::download_dir()
}

/// The user's home directory, for `~` in config paths.
pub fn home_dir() -> Option<PathBuf> {
    dirs::home_dir()
}

/// Where a front end (the CLI, the desktop app) works: the config file and what it says, the data
/// directory and the workspace roots, resolved in the one order every front end uses, so that
/// they all open the same database and policy: a flag (or `TOOLWARDEN_*`, which the front end
/// reads as a flag), then the config file, then the platform default.
#[derive(Debug, Clone)]
pub struct Places {
    /// The parsed config (defaults when there is no file).
    pub config: crate::Config,
    /// The config file, if one is used.
    pub config_file: Option<PathBuf>,
    /// The data directory (audit database, settings, custom tools, live feeds).
    pub data_dir: PathBuf,
    /// Workspace roots the file tools may use.
    pub workspace: Vec<PathBuf>,
}

/// Why the places could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum PlacesError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The config file is not valid (with file:line).
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    /// No data directory was given and the platform has none.
    #[error("no data directory: pass --data-dir or set {DATA_DIR_ENV}")]
    NoDataDir,
    /// No workspace was given and the current directory cannot be read.
    #[error("cannot read the current directory (the default workspace): {0}")]
    CurrentDir(std::io::Error),
}

impl Places {
    /// Fills in what was not given: the config file from the default place (if it exists), the
    /// data directory and the workspace from the config, else the platform's data directory and
    /// the current directory.
    pub fn resolve(
        data_dir: Option<PathBuf>,
        config_file: Option<PathBuf>,
        workspace: Vec<PathBuf>,
    ) -> Result<Self, PlacesError> {
        let config_file = config_file.or_else(|| default_config_file().filter(|p| p.is_file()));
        let config = match &config_file {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| PlacesError::ReadConfig {
                        path: path.clone(),
                        source,
                    })?;
                crate::Config::parse(&text, path, home_dir().as_deref())?
            }
            None => crate::Config::default(),
        };
        let data_dir = data_dir
            .or_else(|| config.data_dir.clone())
            .or_else(default_data_dir)
            .ok_or(PlacesError::NoDataDir)?;
        // Absolute, so that every path derived from it (sandbox scratch directories, live feed
        // sockets) means the same wherever it is used.
        let data_dir = std::path::absolute(&data_dir).map_err(PlacesError::CurrentDir)?;
        let workspace = if !workspace.is_empty() {
            workspace
        } else if !config.workspace.is_empty() {
            config.workspace.clone()
        } else {
            vec![std::env::current_dir().map_err(PlacesError::CurrentDir)?]
        };
        Ok(Self {
            config,
            config_file,
            data_dir,
            workspace,
        })
    }
}
