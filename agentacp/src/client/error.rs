//! What can go wrong talking to an agent.

use std::fmt;
use std::process::ExitStatus;
use std::time::Duration;

use super::render::clip;
use crate::jsonrpc::{RpcError, codes};

/// An error of the [`Client`](super::Client).
#[derive(Debug)]
pub enum ClientError {
    /// The agent could not be started; for a remote agent
    /// (`Client::connect_websocket`, feature `websocket`), not reached: a refused
    /// upgrade is `PermissionDenied` (`401`, `403`) or `ConnectionRefused`, its text naming
    /// the status. The error's text is a sentence that names the program (`cannot start the
    /// agent `codex-acp`: …`) or the URL (`cannot reach the agent at ws://…: …`).
    Spawn(std::io::Error),
    /// No answer (or, during a prompt, no message at all) within the time allowed.
    Timeout {
        /// What we waited for (`initialize`, `session/new`, ...).
        what: String,
        /// The timeout that ran out.
        after: Duration,
        /// The last lines the agent wrote to stderr.
        stderr: Vec<String>,
    },
    /// The agent closed its output or exited while we waited.
    AgentExited {
        /// Its exit status, when it had exited.
        status: Option<ExitStatus>,
        /// The last lines it wrote to stderr.
        stderr: Vec<String>,
    },
    /// The agent answered with a JSON-RPC error (its code as it was, standard or not, and
    /// its `data`; `Display` shows both).
    Rpc {
        /// The method of our request.
        method: String,
        /// The error.
        error: Box<RpcError>,
    },
    /// The agent chose a protocol version this client does not speak.
    UnsupportedProtocol {
        /// The version the agent chose.
        agent: u64,
        /// The version we asked for.
        ours: u16,
    },
    /// An answer that does not fit the method's result type.
    InvalidResponse {
        /// The method of our request.
        method: String,
        /// Why.
        reason: String,
    },
    /// A call not allowed now (e.g. a second prompt in a session while one runs).
    InvalidState(String),
    /// A method the agent did not offer (a capability missing at `initialize`, or a session
    /// answered without `modes` / `configOptions`): refused here, nothing was sent.
    NotOffered {
        /// The method (`session/list`, `session/set_mode`, ...).
        method: String,
        /// What the agent would have had to advertise.
        missing: String,
    },
    /// The client was closed.
    Closed,
}

/// The most of an error's `data` shown by `Display`, in characters.
const DATA_CHARS: usize = 2000;

fn write_stderr(f: &mut fmt::Formatter<'_>, stderr: &[String]) -> fmt::Result {
    if stderr.is_empty() {
        return f.write_str("; the agent wrote nothing to stderr");
    }
    f.write_str("; last lines of the agent's stderr:")?;
    for line in stderr {
        write!(f, "\n  {line}")?;
    }
    Ok(())
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // A sentence naming the program or the URL (`Downstream::open`).
            ClientError::Spawn(error) => write!(f, "{error}"),
            ClientError::Timeout { what, after, stderr } => {
                write!(f, "timeout: no answer to `{what}` within {after:?}")?;
                write_stderr(f, stderr)
            }
            ClientError::AgentExited { status, stderr } => {
                match status {
                    Some(status) => write!(f, "the agent exited ({status})")?,
                    None => f.write_str("the agent closed its output")?,
                }
                write_stderr(f, stderr)
            }
            ClientError::Rpc { method, error } => {
                write!(f, "the agent answered `{method}` with an error: {error}")?;
                match &error.data {
                    None | Some(serde_json::Value::Null) => Ok(()),
                    // The real cause is often here (Codex: an `Internal error` whose data says why).
                    Some(serde_json::Value::String(text)) => write!(f, "; data: {}", clip(text, DATA_CHARS)),
                    Some(data) => write!(f, "; data: {}", clip(&data.to_string(), DATA_CHARS)),
                }
            }
            ClientError::UnsupportedProtocol { agent, ours } => write!(
                f,
                "the agent chose ACP protocol version {agent}, which this client does not speak (it asked for version {ours})"
            ),
            ClientError::InvalidResponse { method, reason } => {
                write!(f, "the agent's answer to `{method}` is not valid: {reason}")
            }
            ClientError::InvalidState(message) => f.write_str(message),
            ClientError::NotOffered { method, missing } => {
                write!(f, "the agent does not offer `{method}` ({missing}); nothing was sent")
            }
            ClientError::Closed => f.write_str("the client is closed"),
        }
    }
}

impl ClientError {
    /// The agent's JSON-RPC error, when it answered with one.
    pub fn rpc(&self) -> Option<&RpcError> {
        match self {
            ClientError::Rpc { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Whether the agent refused because the client must `authenticate` first (`-32000`).
    pub fn is_auth_required(&self) -> bool {
        self.rpc().is_some_and(|error| error.code == codes::AUTH_REQUIRED)
    }

    /// Whether the agent answered that what the request names (a session, a file) does not
    /// exist (`-32002`, "Resource not found").
    pub fn is_resource_not_found(&self) -> bool {
        self.rpc().is_some_and(|error| error.code == codes::RESOURCE_NOT_FOUND)
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Spawn(error) => Some(error),
            ClientError::Rpc { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }
}

impl From<ClientError> for crate::Error {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::Rpc { error, .. } => crate::Error::Rpc(*error),
            ClientError::Closed => crate::Error::Closed,
            other => crate::Error::other(other),
        }
    }
}
