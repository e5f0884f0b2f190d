//! The limits and timeouts every role shares, with their one set of defaults.

use std::time::Duration;

use crate::env::env_number;

/// The limits and timeouts a server, a client and a bridge share. Each role's options
/// (`ServerOptions`, `ClientOptions`, `BridgeOptions`) keeps its own public field for each one
/// it uses, with the default given here, so that one value holds for every role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest accepted message, in bytes (`AGENTACP_MAX_FRAME_BYTES`): 4 MiB. A larger
    /// one is answered with an error (`-32600`) and the connection goes on.
    pub max_frame_bytes: usize,
    /// How long a write may wait for a peer that stopped reading before the connection counts
    /// as closed (`AGENTACP_WRITE_TIMEOUT_MS`): 60 s.
    pub write_timeout: Duration,
    /// How long the peer may take to answer a request (other than a prompt)
    /// (`AGENTACP_REQUEST_TIMEOUT_MS`, read by the bridge): 60 s.
    pub request_timeout: Duration,
    /// During a prompt, the longest time without any message from the agent: 10 min.
    pub prompt_idle_timeout: Duration,
    /// How long a permission question may wait for its answer
    /// (`AGENTACP_PERMISSION_TIMEOUT_MS`): 5 min.
    pub permission_timeout: Duration,
    /// How long an agent this side started may take to exit once its stdin closed, before
    /// SIGTERM: 2 s (interpreted agents under load need more than one).
    pub exit_grace: Duration,
    /// How long after SIGTERM before SIGKILL: 5 s.
    pub kill_grace: Duration,
    /// At end of input, how long running prompts get to answer: 5 s.
    pub shutdown_grace: Duration,
}

impl Limits {
    /// The defaults, the same for every role.
    pub const DEFAULT: Limits = Limits {
        max_frame_bytes: crate::jsonrpc::frame::DEFAULT_MAX_FRAME_BYTES,
        write_timeout: Duration::from_secs(60),
        request_timeout: Duration::from_secs(60),
        prompt_idle_timeout: Duration::from_secs(600),
        permission_timeout: Duration::from_secs(300),
        exit_grace: Duration::from_secs(2),
        kill_grace: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(5),
    };

    /// The defaults, overridden by the `AGENTACP_*` variables that are set (see the fields).
    /// A variable that is set but unreadable is reported and ignored.
    pub fn from_env() -> Limits {
        let mut limits = Limits::DEFAULT;
        let millis = |name: &str| env_number(name).map(Duration::from_millis);
        if let Some(bytes) = env_number("AGENTACP_MAX_FRAME_BYTES") {
            limits.max_frame_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        if let Some(timeout) = millis("AGENTACP_WRITE_TIMEOUT_MS") {
            limits.write_timeout = timeout;
        }
        if let Some(timeout) = millis("AGENTACP_REQUEST_TIMEOUT_MS") {
            limits.request_timeout = timeout;
        }
        if let Some(timeout) = millis("AGENTACP_PERMISSION_TIMEOUT_MS") {
            limits.permission_timeout = timeout;
        }
        limits
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
