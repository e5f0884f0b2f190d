//! The error type of operator code and of the runtime.

use std::fmt;

use crate::jsonrpc::{RpcError, codes};

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong in an operator or in the runtime. Each maps onto a JSON-RPC answer
/// (see [`Error::to_rpc`]); [`Error::Cancelled`] becomes `stopReason: cancelled` instead.
#[derive(Debug)]
pub enum Error {
    /// The turn was cancelled by the client; operator code should return it with `?`.
    Cancelled,
    /// The request's params are wrong (`-32602`).
    InvalidParams(String),
    /// A JSON-RPC error to send as it is.
    Rpc(RpcError),
    /// The connection to the peer is gone.
    Closed,
    /// The audit log could not be written; the action it records did not happen.
    Audit(String),
    /// An I/O error.
    Io(std::io::Error),
    /// Anything else (`-32603`).
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// An error with a message (`-32603`).
    pub fn msg(message: impl Into<String>) -> Self {
        Error::Other(message.into().into())
    }

    /// Wraps any error (`-32603`).
    pub fn other(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Other(Box::new(error))
    }

    /// The JSON-RPC error this becomes when it fails a request.
    pub fn to_rpc(&self) -> RpcError {
        match self {
            Error::Rpc(error) => error.clone(),
            Error::InvalidParams(message) => RpcError::new(codes::INVALID_PARAMS, message.clone()),
            Error::Cancelled => RpcError::new(codes::REQUEST_CANCELLED, "cancelled"),
            other => RpcError::new(codes::INTERNAL_ERROR, other.to_string()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cancelled => f.write_str("the turn was cancelled"),
            Error::InvalidParams(message) => write!(f, "invalid params: {message}"),
            Error::Rpc(error) => write!(f, "{error}"),
            Error::Closed => f.write_str("the connection to the peer is closed"),
            Error::Audit(message) => write!(f, "audit log: {message}"),
            Error::Io(error) => write!(f, "{error}"),
            Error::Other(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(error) => Some(error),
            Error::Other(error) => Some(error.as_ref()),
            Error::Rpc(error) => Some(error),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(error: std::io::Error) -> Self {
        Error::Io(error)
    }
}

impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Self {
        Error::Other(Box::new(error))
    }
}

impl From<RpcError> for Error {
    fn from(error: RpcError) -> Self {
        Error::Rpc(error)
    }
}

impl From<crate::jsonrpc::outbox::Closed> for Error {
    fn from(_: crate::jsonrpc::outbox::Closed) -> Self {
        Error::Closed
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::msg(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Error::msg(message)
    }
}

/// A request that does not decode as its method's wire type: `-32602` (or `-32601` for a
/// method the wire module does not have), with serde's reason.
impl From<crate::wire::support::DecodeError> for RpcError {
    fn from(error: crate::wire::support::DecodeError) -> Self {
        RpcError::new(error.code(), error.to_string())
    }
}

/// See the [`RpcError`] conversion.
impl From<crate::wire::support::DecodeError> for Error {
    fn from(error: crate::wire::support::DecodeError) -> Self {
        Error::Rpc(error.into())
    }
}
