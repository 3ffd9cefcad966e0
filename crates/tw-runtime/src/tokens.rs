//! Who may use the HTTP endpoint: the administrator's token, a file in the data directory made
//! on first use, and agents' tokens, issued one at a time and stored only as hashes.
//!
//! Two kinds, because they must not reach the same things: the administrator's token reaches
//! the admin API (approving confirmations, switching tools, reloading policy) and MCP; an
//! agent's token reaches MCP only, and every call made with it is recorded as its agent. An
//! agent holding a token that can approve its own confirmations would make them pointless.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use tw_store::{AdminEvent, ApiTokenRow, NewApiToken};

use crate::error::{Result, RuntimeError};
use crate::shared::Shared;

/// The administrator's token file, in the data directory.
pub const ADMIN_TOKEN_FILE: &str = "serve-token";

/// What every token starts with, so a leaked one is recognisable (secret scanners, logs).
pub const TOKEN_PREFIX: &str = "tw_";

/// A new random token: the prefix and 256 bits in hex.
fn new_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| RuntimeError::Unavailable(format!("no randomness for a token: {e}")))?;
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        tw_core::fingerprint::hex(&bytes)
    ))
}

/// A token's SHA-256 in lowercase hex, as stored and compared.
pub fn token_sha256(token: &str) -> String {
    tw_core::fingerprint::sha256_hex(token.as_bytes())
}

/// The administrator's token for the data directory `dir`, made (0600, atomically, never
/// overwriting one another process just made) when there is none. A file others may read is
/// refused rather than used: anyone who read it could act as the administrator.
pub fn admin_token(dir: &Path) -> Result<(String, PathBuf)> {
    let path = dir.join(ADMIN_TOKEN_FILE);
    let bad = |m: String| RuntimeError::Unavailable(format!("{}: {m}", path.display()));
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let mode = std::fs::metadata(&path)
                .map_err(|e| bad(e.to_string()))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(bad(format!(
                    "others may read it (mode {:o}); run `chmod 600 {}`, or delete it for a new \
                     token",
                    mode & 0o777,
                    path.display()
                )));
            }
            let token = text.trim().to_owned();
            if !token.starts_with(TOKEN_PREFIX) || token.len() < TOKEN_PREFIX.len() + 32 {
                return Err(bad(
                    "this is not a Toolwarden token; delete the file for a new one".to_owned(),
                ));
            }
            Ok((token, path))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token = new_token()?;
            let tmp = dir.join(format!(".{ADMIN_TOKEN_FILE}.{}", std::process::id()));
            let written = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .and_then(|mut f| {
                    f.write_all(format!("{token}\n").as_bytes())?;
                    f.sync_all()
                });
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(bad(e.to_string()));
            }
            // A hard link fails if another process made the file first; then theirs is used.
            let linked = std::fs::hard_link(&tmp, &path);
            let _ = std::fs::remove_file(&tmp);
            match linked {
                Ok(()) => Ok((token, path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => admin_token(dir),
                Err(e) => Err(bad(e.to_string())),
            }
        }
        Err(e) => Err(bad(e.to_string())),
    }
}

/// What a presented token turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenHolder {
    /// The administrator.
    Admin,
    /// An agent, by id.
    Agent(String),
}

/// Owns the HTTP endpoint's tokens: the administrator's file and agents' hashed tokens.
pub struct TokenService {
    shared: Arc<Shared>,
}

impl TokenService {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// The administrator's token of this runtime's data directory (made if there is none).
    pub fn admin_token(&self) -> Result<(String, PathBuf)> {
        admin_token(self.shared.data_dir())
    }

    /// Issues a token for `agent`: shown once (returned here), stored as its hash.
    pub async fn issue_api_token(
        &self,
        agent: &str,
        label: Option<String>,
        by: &str,
    ) -> Result<(String, ApiTokenRow)> {
        tw_core::call::check_agent_id(agent).map_err(|e| RuntimeError::invalid("agent", e))?;
        let agent_id = agent.to_owned();
        let token = new_token()?;
        let now = self.shared.now_us();
        let row = self
            .shared
            .store
            .issue_api_token(
                &NewApiToken {
                    agent_id: agent_id.clone(),
                    token_sha256: token_sha256(&token),
                    label: label.clone(),
                    at: now,
                    by: by.to_owned(),
                },
                &AdminEvent {
                    at: now,
                    actor: by.to_owned(),
                    kind: "api_token_issued".to_owned(),
                    summary: format!("issued an HTTP token for agent {agent_id}"),
                    details: json!({ "agent_id": agent_id, "label": label }),
                },
            )
            .await?;
        Ok((token, row))
    }

    /// Revokes every live token of `agent`; the ones revoked (none: nothing was recorded).
    pub async fn revoke_api_tokens(&self, agent: &str, by: &str) -> Result<Vec<ApiTokenRow>> {
        let now = self.shared.now_us();
        Ok(self
            .shared
            .store
            .revoke_api_tokens(
                agent,
                now,
                by,
                &AdminEvent {
                    at: now,
                    actor: by.to_owned(),
                    kind: "api_token_revoked".to_owned(),
                    summary: format!("revoked the HTTP tokens of agent {agent}"),
                    details: json!({ "agent_id": agent }),
                },
            )
            .await?)
    }

    /// Who `token` belongs to, if anyone: the administrator (`admin_sha256`, the hash of the
    /// administrator's token, see [`token_sha256`]) or a live agent token. Hashes are compared,
    /// so the comparison's timing says nothing about the token.
    pub async fn token_holder(
        &self,
        token: &str,
        admin_sha256: &str,
    ) -> Result<Option<TokenHolder>> {
        let sha = token_sha256(token);
        if sha == admin_sha256 {
            return Ok(Some(TokenHolder::Admin));
        }
        Ok(self
            .shared
            .store
            .api_token_agent(&sha)
            .await?
            .map(TokenHolder::Agent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_token_is_made_once_private_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (first, path) = admin_token(dir.path()).unwrap();
        assert!(
            first.starts_with(TOKEN_PREFIX) && first.len() == 67,
            "{first}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(admin_token(dir.path()).unwrap().0, first);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_token_file_others_can_read_or_that_is_not_a_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = admin_token(dir.path()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = admin_token(dir.path()).unwrap_err().to_string();
        assert!(e.contains("others may read it (mode 644)"), "{e}");
        std::fs::write(&path, "hunter2\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = admin_token(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a Toolwarden token"), "{e}");
    }

    #[test]
    fn hashes_are_lowercase_hex_of_sha256() {
        assert_eq!(
            token_sha256("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
