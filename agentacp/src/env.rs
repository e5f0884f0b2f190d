//! The environment an operator runs in, whatever its kind: the `AGENTACP_*` variables, the
//! default state folder, and logging to stderr.

use std::path::PathBuf;

#[cfg(windows)]
mod windows;

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

/// An audit fsync policy from the environment variable `name`: `every`, `batched:N` (N ≥ 1)
/// or `never`; set but unreadable is reported on stderr and ignored.
pub(crate) fn env_fsync_policy(name: &str) -> Option<crate::audit::FsyncPolicy> {
    let text = std::env::var(name).ok().filter(|v| !v.trim().is_empty())?;
    let parsed = parse_fsync_policy(&text);
    if parsed.is_none() {
        tracing::warn!(variable = name, value = %text, "not `every`, `batched:N` or `never`; ignored");
    }
    parsed
}

fn parse_fsync_policy(text: &str) -> Option<crate::audit::FsyncPolicy> {
    use crate::audit::FsyncPolicy;
    match text.trim() {
        "every" => Some(FsyncPolicy::EveryRecord),
        "never" => Some(FsyncPolicy::Never),
        other => {
            let every: usize = other.strip_prefix("batched:")?.trim().parse().ok()?;
            (every >= 1).then_some(FsyncPolicy::Batched { every })
        }
    }
}

/// Where an operator keeps state when no folder is given: `$XDG_STATE_HOME/agentacp/<id>`,
/// else `~/.local/state/agentacp/<id>` (`$HOME`), else, on Windows, `%LOCALAPPDATA%\agentacp\<id>`,
/// else under the temporary folder.
pub(crate) fn default_state_dir(id: &str) -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env_path("HOME").map(|home| home.join(".local/state")));
    #[cfg(windows)]
    let base = base.or_else(|| env_path("LOCALAPPDATA"));
    let base = base.unwrap_or_else(std::env::temp_dir);
    base.join("agentacp").join(id)
}

/// The longest replica name [`replica_name`] takes.
pub const MAX_REPLICA_NAME: usize = 63;

/// This process's name in a fleet of replicas sharing one database (issue #49): the owner of
/// the session leases it takes and the name of its audit chain. `AGENTACP_REPLICA` when set
/// (1 to [`MAX_REPLICA_NAME`] letters, digits, `.`, `_` or `-`; anything else is an error in a
/// sentence), else the machine's host name (what a container gets per replica), else
/// `replica-<pid>`. Two replicas on one machine must each be given `AGENTACP_REPLICA`.
pub fn replica_name() -> Result<String, String> {
    match std::env::var("AGENTACP_REPLICA") {
        Ok(name) if !name.is_empty() => valid_replica_name(&name).map(str::to_string),
        Err(std::env::VarError::NotUnicode(_)) => Err(
            "AGENTACP_REPLICA is not UTF-8 text: give the replica a name of letters, digits, `.`, `_` or `-`".into(),
        ),
        _ => Ok(host_name().unwrap_or_else(|| format!("replica-{}", std::process::id()))),
    }
}

/// `name` when it is a replica name [`replica_name`] takes; else why not.
fn valid_replica_name(name: &str) -> Result<&str, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    // Not starting with `.`: the name is part of the audit chain's, which may not (`.`, `..`).
    if name.len() > MAX_REPLICA_NAME || !name.chars().all(allowed) || name.starts_with('.') {
        return Err(format!(
            "AGENTACP_REPLICA `{name}` is not a replica name: use 1 to {MAX_REPLICA_NAME} letters, digits, `.`, `_` or `-`, not starting with `.`"
        ));
    }
    Ok(name)
}

/// The machine's host name (Linux: `/proc/sys/kernel/hostname`; Windows: `%COMPUTERNAME%`),
/// when it is a valid replica name.
fn host_name() -> Option<String> {
    #[cfg(windows)]
    let name = std::env::var("COMPUTERNAME").ok()?;
    #[cfg(not(windows))]
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    valid_replica_name(name.trim())
        .ok()
        .filter(|name| !name.is_empty())
        .map(str::to_string)
}

/// The user's home folder: `$HOME`, else, on Windows, `%USERPROFILE%`.
pub(crate) fn home() -> Option<PathBuf> {
    let home = env_path("HOME");
    #[cfg(windows)]
    let home = home.or_else(|| env_path("USERPROFILE"));
    home
}

/// The log filter's setting and where it came from: `AGENTACP_LOG`, else `RUST_LOG` (the
/// first one set and not blank), else `None`.
#[cfg(any(feature = "stderr-log", test))]
fn log_setting(var: impl Fn(&str) -> Option<String>) -> Option<(&'static str, String)> {
    ["AGENTACP_LOG", "RUST_LOG"].into_iter().find_map(|name| {
        var(name)
            .filter(|value| !value.trim().is_empty())
            .map(|value| (name, value))
    })
}

/// Installs the runtime's logger, unless the application already installed a global `tracing`
/// subscriber (then it keeps it, and this does nothing): logs to stderr (never stdout: that is
/// the protocol channel), filtered by `AGENTACP_LOG`, else `RUST_LOG` (default `warn`): a level
/// (`info`), `target=level` pairs, or both, comma-separated (`warn,agentacp=debug`). A value
/// that does not parse logs at `warn` and says so. The servers, clients and bridges call it
/// as they start. Without the default feature `stderr-log` it does nothing (and the crate does
/// not depend on `tracing-subscriber`): the application's own subscriber, if any, gets the logs.
#[cfg(feature = "stderr-log")]
pub fn init_logging() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    if tracing::dispatcher::has_been_set() {
        return;
    }
    let setting = log_setting(|name| std::env::var(name).ok());
    let parsed = setting.as_ref().map(|(_, value)| value.parse::<Targets>());
    let filter = match &parsed {
        Some(Ok(targets)) => targets.clone(),
        _ => Targets::new().with_default(LevelFilter::WARN),
    };
    let installed = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false),
        )
        .with(filter)
        .try_init()
        .is_ok();
    if let (true, Some((name, value)), Some(Err(error))) = (installed, &setting, parsed) {
        tracing::warn!(%error, value = value.as_str(), "{name} is not a log filter; logging at `warn`");
    }
}

/// Without the feature `stderr-log`: nothing (see the feature's version).
#[cfg(not(feature = "stderr-log"))]
pub fn init_logging() {}

/// A signal asking the process to stop. On Windows, the console's control events: Ctrl-C and
/// Ctrl-Break are [`Interrupt`](Self::Interrupt), the console window closing and the system
/// shutting down [`Terminate`](Self::Terminate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownSignal {
    /// SIGINT (Ctrl-C); on Windows Ctrl-C or Ctrl-Break.
    Interrupt,
    /// SIGTERM; on Windows the console closing or the system shutting down.
    Terminate,
}

impl ShutdownSignal {
    /// The conventional exit code after it: 128 + the signal's number (130, 143; the same on
    /// Windows).
    pub fn exit_code(self) -> u8 {
        match self {
            ShutdownSignal::Interrupt => 130,
            ShutdownSignal::Terminate => 143,
        }
    }

    /// Its name (`SIGINT`, `SIGTERM`; on Windows the console events').
    pub fn name(self) -> &'static str {
        #[cfg(windows)]
        return match self {
            ShutdownSignal::Interrupt => windows::Event::Interrupt,
            ShutdownSignal::Terminate => windows::Event::Terminate,
        }
        .name();
        #[cfg(not(windows))]
        match self {
            ShutdownSignal::Interrupt => "SIGINT",
            ShutdownSignal::Terminate => "SIGTERM",
        }
    }
}

/// SIGINT and SIGTERM, caught: once installed they no longer end the process, so it can stop
/// what it started (cancel turns, stop the agent's process group) and exit by itself. Install
/// before starting anything that must not outlive the process. Needs a tokio runtime. On
/// Windows: Ctrl-C, Ctrl-Break, the console closing and the system shutting down (Windows
/// ends the process a few seconds after the last two whatever it does).
#[derive(Debug)]
pub struct ShutdownSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(windows)]
    events: windows::ConsoleEvents,
}

impl ShutdownSignals {
    /// Installs the handlers.
    #[cfg(unix)]
    pub fn install() -> std::io::Result<ShutdownSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(ShutdownSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Installs the handlers.
    #[cfg(windows)]
    pub fn install() -> std::io::Result<ShutdownSignals> {
        Ok(ShutdownSignals {
            events: windows::ConsoleEvents::install()?,
        })
    }

    /// Waits for the next SIGINT or SIGTERM.
    pub async fn recv(&mut self) -> ShutdownSignal {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next SIGINT or SIGTERM.
    #[cfg(windows)]
    pub fn poll_recv(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<ShutdownSignal> {
        self.events.poll_recv(cx).map(|event| match event {
            windows::Event::Interrupt => ShutdownSignal::Interrupt,
            windows::Event::Terminate => ShutdownSignal::Terminate,
        })
    }

    /// Polls for the next SIGINT or SIGTERM.
    #[cfg(unix)]
    pub fn poll_recv(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<ShutdownSignal> {
        use std::task::Poll;
        // `None` (the driver is gone) never resolves: the process ends some other way.
        if let Poll::Ready(Some(())) = self.interrupt.poll_recv(cx) {
            return Poll::Ready(ShutdownSignal::Interrupt);
        }
        if let Poll::Ready(Some(())) = self.terminate.poll_recv(cx) {
            return Poll::Ready(ShutdownSignal::Terminate);
        }
        Poll::Pending
    }
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT): when a long-running listener should drain and stop.
/// On Windows: on any of [`ShutdownSignals`]' console events.
#[cfg(windows)]
pub async fn shutdown_signal() {
    windows::shutdown_signal().await
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT): when a long-running listener should drain and stop.
#[cfg(unix)]
pub async fn shutdown_signal() {
    let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(signal) => signal,
        Err(error) => {
            tracing::warn!(%error, "cannot watch for SIGTERM; only Ctrl-C stops the listener");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM: draining"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: draining"),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_fsync_policy;
    use crate::audit::FsyncPolicy;

    #[test]
    fn fsync_policies_are_read_and_anything_else_is_none() {
        assert_eq!(parse_fsync_policy("every"), Some(FsyncPolicy::EveryRecord));
        assert_eq!(parse_fsync_policy(" never "), Some(FsyncPolicy::Never));
        assert_eq!(
            parse_fsync_policy("batched:64"),
            Some(FsyncPolicy::Batched { every: 64 })
        );
        for bad in ["batched:0", "batched:", "batched:x", "sometimes", "Every"] {
            assert_eq!(parse_fsync_policy(bad), None, "{bad}");
        }
    }
}

#[cfg(test)]
mod replica_tests {
    use super::valid_replica_name;

    /// Issue #49: a replica name is used as a lease owner and an audit chain's name; one that
    /// is too long or holds other characters is refused in a sentence.
    #[test]
    fn a_replica_name_is_short_and_plain_or_refused_in_a_sentence() {
        assert_eq!(valid_replica_name("replica-a.eu_1"), Ok("replica-a.eu_1"));
        for bad in ["a b", "a/b", "ä", &"x".repeat(64), ".", "..", ".hidden"] {
            let error = valid_replica_name(bad).unwrap_err();
            assert!(
                error.starts_with(&format!("AGENTACP_REPLICA `{bad}` is not a replica name")),
                "{error}"
            );
        }
    }
}

#[cfg(test)]
mod log_tests {
    use super::log_setting;

    #[test]
    fn agentacp_log_comes_first_then_rust_log() {
        let both = |name: &str| Some(if name == "RUST_LOG" { "debug" } else { "info" }.to_string());
        assert_eq!(log_setting(both), Some(("AGENTACP_LOG", "info".to_string())));
        let rust_only = |name: &str| (name == "RUST_LOG").then(|| "agentacp=debug".to_string());
        assert_eq!(log_setting(rust_only), Some(("RUST_LOG", "agentacp=debug".to_string())));
        let blank = |name: &str| Some(if name == "RUST_LOG" { "trace" } else { " " }.to_string());
        assert_eq!(log_setting(blank), Some(("RUST_LOG", "trace".to_string())));
        assert_eq!(log_setting(|_| None), None);
    }
}
