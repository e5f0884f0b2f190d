//! What the `fs/*` and `terminal/*` handlers see of the connection ([`ClientContext`]), and
//! the runtime's check of their requests against the workspace root.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;
use serde_json::value::RawValue;

use super::terminal::Terminals;
use crate::jsonrpc::{RpcError, codes};
use crate::sync::lock;
use crate::workspace::Workspace;

/// What handlers may know about the connection: the workspace root, each session's `cwd`, and
/// the terminals the agent created.
#[derive(Debug)]
pub struct ClientContext {
    workspace: Workspace,
    sessions: Mutex<HashMap<String, PathBuf>>,
    terminals: Terminals,
}

impl ClientContext {
    pub(crate) fn new(workspace: Workspace, terminals: Terminals) -> Self {
        ClientContext {
            workspace,
            sessions: Mutex::default(),
            terminals,
        }
    }

    /// The workspace root (canonical): no path outside it reaches a handler.
    pub fn root(&self) -> &Path {
        self.workspace.root_path()
    }

    /// The workspace root, held open: open files through it (as [`fs`](super::fs) does) so that a symlink
    /// or a file swapped after the check cannot lead outside. See [`Workspace`].
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The `cwd` a session was created (or loaded) with.
    pub fn session_cwd(&self, session: &str) -> Option<PathBuf> {
        lock(&self.sessions).get(session).cloned()
    }

    pub(crate) fn set_session_cwd(&self, session: &str, cwd: PathBuf) {
        lock(&self.sessions).insert(session.to_string(), cwd);
    }

    /// The terminals of this connection (for `terminal/*` handlers that use the built-in
    /// implementation).
    pub fn terminals(&self) -> &Terminals {
        &self.terminals
    }

    /// Checks `path`: absolute, and inside the root once `.` and `..` are applied (it need not
    /// exist; nothing is opened). Returns the normalised path. `-32602` otherwise. The check is
    /// lexical: to open the file, go through [`workspace`](Self::workspace), which refuses
    /// symlinks and cannot be raced.
    pub fn confine(&self, path: &str) -> Result<PathBuf, RpcError> {
        if !Path::new(path).is_absolute() {
            return Err(RpcError::new(
                codes::INVALID_PARAMS,
                format!("`{path}` is not an absolute path; ACP paths must be absolute"),
            ));
        }
        self.workspace.resolve(path).map_err(|reason| {
            RpcError::new(
                codes::INVALID_PARAMS,
                format!("{reason}: the client only gives access inside the workspace root"),
            )
        })
    }

    /// The checked params of a request: for `fs/*` the `path`, for `terminal/create` the `cwd`
    /// (default: the session's `cwd`), replaced by its canonical form.
    pub(crate) fn check(&self, method: &str, params: &RawValue) -> Result<Box<RawValue>, RpcError> {
        let Some(field) = crate::methods::find(method).and_then(|method| method.workspace_path) else {
            return Ok(params.to_owned());
        };
        let mut value: Value = serde_json::from_str(params.get())
            .map_err(|error| RpcError::new(codes::INVALID_PARAMS, format!("invalid params for `{method}`: {error}")))?;
        let Some(object) = value.as_object_mut() else {
            return Err(RpcError::new(
                codes::INVALID_PARAMS,
                format!("the params of `{method}` must be an object"),
            ));
        };
        let given = match object.get(field) {
            Some(Value::String(path)) => path.clone(),
            None | Some(Value::Null) if field == "cwd" => {
                let session = object.get("sessionId").and_then(Value::as_str).unwrap_or_default();
                match self.session_cwd(session) {
                    Some(cwd) => cwd.to_string_lossy().into_owned(),
                    None => self.root().to_string_lossy().into_owned(),
                }
            }
            _ => {
                return Err(RpcError::new(
                    codes::INVALID_PARAMS,
                    format!("`{method}` needs a string `{field}`"),
                ));
            }
        };
        let confined = if field == "cwd" {
            // A folder to start in: it must exist, inside the root, reached without links.
            self.workspace
                .confine_cwd(&given)
                .map(|folder| folder.path())
                .map_err(|reason| RpcError::new(codes::INVALID_PARAMS, reason))?
        } else {
            self.confine(&given)?
        };
        object.insert(
            field.to_string(),
            Value::String(confined.to_string_lossy().into_owned()),
        );
        serde_json::value::to_raw_value(&value).map_err(|error| RpcError::new(codes::INTERNAL_ERROR, error.to_string()))
    }
}

/// Implements the terminal family of a generated `…Client` handler trait with the built-in
/// [`Terminals`] of the connection. Write it inside the `impl` block:
///
/// ```ignore
/// impl MyClient for My {
///     agentacp::builtin_terminal_methods!();
/// }
/// ```
#[macro_export]
macro_rules! builtin_terminal_methods {
    () => {
        async fn create_terminal(
            &self,
            context: &$crate::client::ClientContext,
            request: $crate::wire::default::CreateTerminalRequest,
        ) -> ::core::result::Result<$crate::wire::default::CreateTerminalResponse, $crate::jsonrpc::RpcError> {
            context.terminals().create(&request).await
        }

        async fn terminal_output(
            &self,
            context: &$crate::client::ClientContext,
            request: $crate::wire::default::TerminalOutputRequest,
        ) -> ::core::result::Result<$crate::wire::default::TerminalOutputResponse, $crate::jsonrpc::RpcError> {
            context.terminals().output(&request).await
        }

        async fn wait_for_terminal_exit(
            &self,
            context: &$crate::client::ClientContext,
            request: $crate::wire::default::WaitForTerminalExitRequest,
        ) -> ::core::result::Result<$crate::wire::default::WaitForTerminalExitResponse, $crate::jsonrpc::RpcError> {
            context.terminals().wait_for_exit(&request).await
        }

        async fn kill_terminal(
            &self,
            context: &$crate::client::ClientContext,
            request: $crate::wire::default::KillTerminalRequest,
        ) -> ::core::result::Result<$crate::wire::default::KillTerminalResponse, $crate::jsonrpc::RpcError> {
            context.terminals().kill(&request).await
        }

        async fn release_terminal(
            &self,
            context: &$crate::client::ClientContext,
            request: $crate::wire::default::ReleaseTerminalRequest,
        ) -> ::core::result::Result<$crate::wire::default::ReleaseTerminalResponse, $crate::jsonrpc::RpcError> {
            context.terminals().release(&request).await
        }
    };
}
