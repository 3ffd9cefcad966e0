//! The exit codes of `toolwarden`, decided here and nowhere else: a call exits with its status's
//! code; a command the runtime refused exits with the code of the refusal's kind; Toolwarden's
//! own trouble (it cannot start, a bug) exits 10; a usage error exits 2 (clap's); a reader that
//! closed stdout ends the command with 141.
//!
//! The kinds reuse the call statuses' codes where they mean the same thing: an unknown name is
//! 9 (a call's `not_found`), a refusal by tier or policy 7 (`permission_denied`), an invalid
//! request 8 (`validation_error`).

use tw_core::{CoreError, ToolStatus};
use tw_runtime::error::{core_kind, store_kind};
use tw_runtime::{ErrorKind, RuntimeError};
use tw_store::StoreError;

/// Exit code for problems with Toolwarden itself rather than with a tool call or a request.
pub(crate) const EXIT_INTERNAL: u8 = 10;

/// The exit code for a call's status.
pub(crate) fn for_status(status: ToolStatus) -> u8 {
    match status {
        ToolStatus::Success => 0,
        ToolStatus::Failed => 1,
        ToolStatus::Timeout => 3,
        ToolStatus::Cancelled => 4,
        ToolStatus::RequiresConfirmation => 5,
        ToolStatus::SandboxError => 6,
        ToolStatus::PermissionDenied => 7,
        ToolStatus::ValidationError => 8,
        ToolStatus::NotFound => 9,
    }
}

/// The exit code for a request the runtime refused, by the refusal's kind.
pub(crate) fn for_kind(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::NotFound => 9,
        ErrorKind::Denied => 7,
        ErrorKind::Invalid => 8,
        ErrorKind::Conflict => 11,
        ErrorKind::Unavailable => 12,
        ErrorKind::Internal => EXIT_INTERNAL,
    }
}

/// A tool name nobody registered, said with where to look (exits as not found).
pub(crate) fn unknown_tool(name: &str) -> anyhow::Error {
    RuntimeError::unknown_tool(format!(
        "no tool named {name:?} is registered (see `toolwarden tools list`)"
    ))
    .into()
}

/// The exit code for a command's error: the kind of the first runtime, domain or store error
/// in its chain, else [`EXIT_INTERNAL`].
pub(crate) fn for_error(e: &anyhow::Error) -> u8 {
    e.chain()
        .find_map(|cause| {
            cause
                .downcast_ref::<RuntimeError>()
                .map(RuntimeError::kind)
                .or_else(|| cause.downcast_ref::<CoreError>().map(core_kind))
                .or_else(|| cause.downcast_ref::<StoreError>().map(store_kind))
        })
        .map_or(EXIT_INTERNAL, for_kind)
}

#[cfg(test)]
mod tests {
    use anyhow::Context as _;

    use super::*;

    #[test]
    fn each_kind_has_its_own_code_and_statuses_keep_theirs() {
        let codes: Vec<(ErrorKind, u8)> =
            ErrorKind::ALL.iter().map(|k| (*k, for_kind(*k))).collect();
        assert_eq!(
            codes,
            vec![
                (ErrorKind::NotFound, 9),
                (ErrorKind::Conflict, 11),
                (ErrorKind::Invalid, 8),
                (ErrorKind::Denied, 7),
                (ErrorKind::Unavailable, 12),
                (ErrorKind::Internal, 10),
            ]
        );
        // The kinds that mean what a call's status means share its code.
        assert_eq!(
            for_kind(ErrorKind::NotFound),
            for_status(ToolStatus::NotFound)
        );
        assert_eq!(
            for_kind(ErrorKind::Denied),
            for_status(ToolStatus::PermissionDenied)
        );
        assert_eq!(
            for_kind(ErrorKind::Invalid),
            for_status(ToolStatus::ValidationError)
        );
    }

    #[test]
    fn an_error_is_judged_by_the_first_runtime_error_in_its_chain() {
        let refused =
            anyhow::Error::new(RuntimeError::BuiltinName("echo".into())).context("tools.toml");
        assert_eq!(for_error(&refused), 11);
        let unknown = anyhow::Error::new(CoreError::UnknownTool("nope".into()));
        assert_eq!(for_error(&unknown), 9);
        let store: anyhow::Result<()> = Err(StoreError::WriterClosed).context("audit");
        assert_eq!(for_error(&store.unwrap_err()), 12);
        assert_eq!(
            for_error(&anyhow::anyhow!("a plain problem")),
            EXIT_INTERNAL
        );
    }
}
