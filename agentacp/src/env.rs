//! The environment an operator runs in, whatever its kind: the `AGENTACP_*` variables, the
//! default state folder, and logging to stderr.

use std::path::PathBuf;

/// A path from the environment variable `name`, when it is set and not empty.
pub(crate) fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// A whole number from the environment variable `name`; set but unreadable is reported on
/// stderr and ignored.
pub(crate) fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var_os(name).filter(|v| !v.is_empty())?;
    let parsed = text.to_str().and_then(|t| t.trim().parse().ok());
    if parsed.is_none() {
        tracing::warn!(variable = name, value = ?text, "not a whole number; ignored");
    }
    parsed
}

/// Where an operator keeps state when no folder is given: `$XDG_STATE_HOME/agentacp/<id>`,
/// else `~/.local/state/agentacp/<id>`, else under the temporary folder.
pub(crate) fn default_state_dir(id: &str) -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home().map(|home| home.join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("agentacp").join(id)
}

pub(crate) fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Logs to stderr (never stdout: that is the protocol channel), filtered by `AGENTACP_LOG`
/// (default `warn`). Does nothing if a subscriber is already installed.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTACP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_ansi(false)
        .try_init();
}
