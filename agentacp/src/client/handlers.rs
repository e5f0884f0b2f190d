//! The methods a client offers the agent besides permissions: `fs/*` and `terminal/*`.
//!
//! A [`ClientHandlers`] says which it offers ([`ClientMethods`], sent in `initialize`) and
//! answers them. The runtime checks every request before a handler sees it: a method the
//! capabilities do not offer is answered `-32601`; a path must be absolute and, once
//! canonical (symlinks resolved), inside the workspace root, else `-32602`; a terminal's `cwd`
//! likewise. The handler then receives the canonical path.

use serde_json::Value;
use serde_json::value::RawValue;

use super::context::ClientContext;
use super::fs;
use crate::future::BoxFuture;
use crate::jsonrpc::{RpcError, codes};
use crate::methods::ClientMethods;
use crate::wire::default as wire;

/// What a handler answers: the result object, or a JSON-RPC error.
pub type HandlerResult = Result<Value, RpcError>;

/// Answers the agent's `fs/*` and `terminal/*` requests. `#[acp_operator]` implements it for
/// a `kind: client` struct from the handler trait it generates; [`Builtin`] and [`NoHandlers`] are
/// ready-made.
pub trait ClientHandlers: Send + Sync + 'static {
    /// What to offer. Only these methods reach [`handle`](ClientHandlers::handle).
    fn capabilities(&self) -> ClientMethods;

    /// Answers one request (already checked, see the module docs); `None` if the method is not
    /// handled here after all (`-32601`).
    fn handle<'a>(
        &'a self,
        context: &'a ClientContext,
        method: &'a str,
        params: &'a RawValue,
    ) -> Option<BoxFuture<'a, HandlerResult>>;
}

/// Offers nothing: every `fs/*` and `terminal/*` request is answered `-32601`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHandlers;

impl ClientHandlers for NoHandlers {
    fn capabilities(&self) -> ClientMethods {
        ClientMethods::NONE
    }

    fn handle<'a>(&'a self, _: &'a ClientContext, _: &'a str, _: &'a RawValue) -> Option<BoxFuture<'a, HandlerResult>> {
        None
    }
}

/// The ready-made handlers: text files inside the workspace root ([`fs`](super::fs)), and
/// commands run in it ([`Terminals`](super::terminal::Terminals)), each only when switched on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Builtin {
    offered: ClientMethods,
}

impl Builtin {
    /// `fs/read_text_file` only.
    pub fn read_only() -> Self {
        Builtin::default().with(ClientMethods {
            read_text_file: true,
            ..ClientMethods::NONE
        })
    }

    /// `fs/read_text_file` and `fs/write_text_file`.
    pub fn read_write() -> Self {
        Builtin::default().with(ClientMethods {
            read_text_file: true,
            write_text_file: true,
            terminal: false,
        })
    }

    /// Exactly the methods `offered`.
    pub fn with(mut self, offered: ClientMethods) -> Self {
        self.offered = offered;
        self
    }

    /// Also the `terminal/*` family.
    pub fn with_terminal(mut self) -> Self {
        self.offered.terminal = true;
        self
    }
}

impl ClientHandlers for Builtin {
    fn capabilities(&self) -> ClientMethods {
        self.offered
    }

    fn handle<'a>(
        &'a self,
        context: &'a ClientContext,
        method: &'a str,
        params: &'a RawValue,
    ) -> Option<BoxFuture<'a, HandlerResult>> {
        use wire::AgentRequest as Request;
        if !self.offered.offers(method) {
            return None;
        }
        let terminals = context.terminals();
        Some(Box::pin(async move {
            match Request::decode(method, Some(params))? {
                Request::FsReadTextFile(request) => encode(fs::read_text_file(context, &request).await?),
                Request::FsWriteTextFile(request) => encode(fs::write_text_file(context, &request).await?),
                Request::TerminalCreate(request) => encode(terminals.create(&request).await?),
                Request::TerminalOutput(request) => encode(terminals.output(&request).await?),
                Request::TerminalWaitForExit(request) => encode(terminals.wait_for_exit(&request).await?),
                Request::TerminalKill(request) => encode(terminals.kill(&request).await?),
                Request::TerminalRelease(request) => encode(terminals.release(&request).await?),
                _ => Err(RpcError::new(
                    codes::METHOD_NOT_FOUND,
                    format!("method not found: `{method}`"),
                )),
            }
        }))
    }
}

/// Reads a request's params as `T` (`-32602` when they do not fit).
pub fn decode<T: serde::de::DeserializeOwned>(method: &str, params: &RawValue) -> Result<T, RpcError> {
    serde_json::from_str(params.get())
        .map_err(|error| RpcError::new(codes::INVALID_PARAMS, format!("invalid params for `{method}`: {error}")))
}

/// A handler's answer as JSON.
pub fn encode(response: impl serde::Serialize) -> HandlerResult {
    serde_json::to_value(response).map_err(|error| RpcError::new(codes::INTERNAL_ERROR, error.to_string()))
}
