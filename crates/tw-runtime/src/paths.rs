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

/// The user's home directory, for `~` in config paths.
pub fn home_dir() -> Option<PathBuf> {
    dirs::home_dir()
}
