//! The editor's files and terminals, for a server operator: [`Turn::editor`] (tier
//! governance-aware and up).
//!
//! An editor such as Zed can read its unsaved buffers to the agent (`fs/read_text_file`),
//! save through its own buffers (`fs/write_text_file`) and run commands in its terminal
//! (`terminal/*`). A server operator reaches them here, and only when
//!
//! 1. the manifest declares the method (`metadata.aip44.capabilities.client` of a server),
//! 2. the editor advertised it in `clientCapabilities` at `initialize`, and
//! 3. the path is inside the session's folder or one of its `additionalDirectories` (lexically:
//!    the editor opens it, not us).
//!
//! Each call is then a governed tool call named after the method (`fs/read_text_file`,
//! `fs/write_text_file`, `terminal/create`): governance decides, the user may be asked, the
//! editor is shown a `tool_call`, and the audit log records the call with its approval. What
//! is audited and shown is a summary (the path, the byte count, the exit status); file
//! contents and command output go to the operator only.

use std::future::Future;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::governance::ToolKind;
use crate::jsonrpc::pending::RequestFailure;
use crate::tier::{ClientTools, Governed};

use super::connection::Connection;
use super::turn::{ToolOutcome, Turn, TurnScope};
use crate::methods::ClientMethods;
pub use crate::spec::{READ_TEXT_FILE, TERMINAL, WRITE_TEXT_FILE};

/// Why an editor call did not give a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditorError {
    /// The manifest does not declare the method (`metadata.aip44.capabilities.client`).
    NotDeclared(&'static str),
    /// The editor did not advertise the method at `initialize`.
    NotOffered(&'static str),
    /// The path is not inside the session's folder.
    OutsideSession(String),
    /// Governance denied the call; it was not shown to the editor.
    Denied(String),
    /// The user (or a timeout) rejected the call.
    Rejected(String),
    /// The editor answered with an error, did not answer in time, or the call failed.
    Failed(String),
}

impl std::fmt::Display for EditorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EditorError::NotDeclared(method) => write!(
                f,
                "`{method}` is not declared in ACP.md: set it under `metadata.aip44.capabilities.client`"
            ),
            EditorError::NotOffered(method) => {
                write!(f, "the editor does not offer `{method}` (see its `clientCapabilities`)")
            }
            EditorError::OutsideSession(path) => write!(f, "`{path}` is outside the session's folder"),
            EditorError::Denied(reason) => write!(f, "denied by governance: {reason}"),
            EditorError::Rejected(reason) => write!(f, "rejected: {reason}"),
            EditorError::Failed(reason) => write!(f, "the editor call failed: {reason}"),
        }
    }
}

impl std::error::Error for EditorError {}

impl From<EditorError> for Error {
    fn from(error: EditorError) -> Self {
        Error::other(error)
    }
}

/// A command to run in the editor's terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalCommand {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// The working folder, inside the session's folder (default: the session's folder).
    pub cwd: Option<String>,
    /// How much output the editor keeps (its default when `None`).
    pub output_byte_limit: Option<u64>,
    /// How long the command may run before it is killed (default 120 s).
    pub timeout: Duration,
}

impl TerminalCommand {
    /// `command` with no arguments, in the session's folder, killed after 120 s.
    pub fn new(command: impl Into<String>) -> Self {
        TerminalCommand {
            command: command.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            output_byte_limit: None,
            timeout: Duration::from_secs(120),
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets how long the command may run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// What a command run in the editor's terminal left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// Its output, as the editor kept it.
    pub output: String,
    /// Whether the editor cut the output at its byte limit.
    pub truncated: bool,
    /// The exit code, when it exited.
    pub exit_code: Option<i64>,
    /// The signal that ended it, when one did (`"timeout"` when agentacp killed it).
    pub signal: Option<String>,
}

/// The editor's files and terminal, for one turn; from [`Turn::editor`].
#[derive(Debug)]
pub struct Editor<'a, 't, T: Governed> {
    turn: &'a mut Turn<'t, T>,
}

impl<'t, T: Governed> Turn<'t, T> {
    /// The editor's files and terminal (tier governance-aware and up): each call governed,
    /// audited, and checked against the manifest and the editor's capabilities.
    ///
    /// Not on a manifest that lists protocol version 2, which has no client file system or
    /// terminals (tier [`V2`](crate::tier::V2)): calling it there does not compile.
    pub fn editor(&mut self) -> Editor<'_, 't, T>
    where
        T: ClientTools,
    {
        Editor { turn: self }
    }
}

#[derive(Deserialize)]
struct ReadAnswer {
    content: String,
}

#[derive(Deserialize)]
struct CreateAnswer {
    #[serde(rename = "terminalId")]
    terminal_id: String,
}

#[derive(Deserialize, Default)]
struct ExitAnswer {
    #[serde(rename = "exitCode", default)]
    exit_code: Option<i64>,
    #[serde(default)]
    signal: Option<String>,
}

#[derive(Deserialize)]
struct OutputAnswer {
    output: String,
    #[serde(default)]
    truncated: bool,
}

impl<'t, T: Governed> Editor<'_, 't, T> {
    /// The text of `path` (relative to the session's folder, or absolute inside it), as the
    /// editor has it: unsaved changes included.
    pub async fn read_text_file(&mut self, path: &str) -> Result<String> {
        self.read(path, None, None).await
    }

    /// `limit` lines of `path` from line `line` (1-based).
    pub async fn read_text_file_lines(&mut self, path: &str, line: u32, limit: u32) -> Result<String> {
        self.read(path, Some(line), Some(limit)).await
    }

    async fn read(&mut self, path: &str, line: Option<u32>, limit: Option<u32>) -> Result<String> {
        let absolute = self.allowed(READ_TEXT_FILE, |m| m.read_text_file, path)?;
        let mut arguments = json!({"path": absolute});
        if let Some(line) = line {
            arguments["line"] = json!(line);
        }
        if let Some(limit) = limit {
            arguments["limit"] = json!(limit);
        }
        let mut params = arguments.clone();
        params["sessionId"] = json!(self.turn.session_id());
        let title = format!("Read {absolute}");
        self.governed(READ_TEXT_FILE, ToolKind::Read, title, arguments, |scope| async move {
            let answer: ReadAnswer = send(&scope.connection, READ_TEXT_FILE, &params).await?;
            let summary = json!({"bytes": answer.content.len()});
            Ok((answer.content, summary))
        })
        .await
    }

    /// Writes `content` to `path` through the editor (its buffer, then the disk).
    pub async fn write_text_file(&mut self, path: &str, content: &str) -> Result<()> {
        let absolute = self.allowed(WRITE_TEXT_FILE, |m| m.write_text_file, path)?;
        let arguments = json!({"path": absolute, "bytes": content.len()});
        let params = json!({"sessionId": self.turn.session_id(), "path": absolute, "content": content});
        let title = format!("Write {absolute}");
        self.governed(WRITE_TEXT_FILE, ToolKind::Edit, title, arguments, |scope| async move {
            let _: Value = send(&scope.connection, WRITE_TEXT_FILE, &params).await?;
            Ok(((), json!({"written": true})))
        })
        .await
    }

    /// Runs `command` in the editor's terminal and waits for it (at most its `timeout`, then
    /// it is killed), collects its output and releases the terminal. A cancelled turn kills
    /// and releases it too.
    pub async fn run_command(&mut self, command: &TerminalCommand) -> Result<CommandOutput> {
        let cwd = match &command.cwd {
            Some(cwd) => self.allowed(TERMINAL, |m| m.terminal, cwd)?,
            None => self.allowed(TERMINAL, |m| m.terminal, ".")?,
        };
        let arguments = json!({"command": command.command, "args": command.args, "cwd": cwd});
        let mut params = json!({
            "sessionId": self.turn.session_id(),
            "command": command.command,
            "args": command.args,
            "env": command.env.iter().map(|(name, value)| json!({"name": name, "value": value})).collect::<Vec<_>>(),
            "cwd": cwd,
        });
        if let Some(limit) = command.output_byte_limit {
            params["outputByteLimit"] = json!(limit);
        }
        let title = format!("Run {}", command.command);
        let timeout = command.timeout;
        self.governed(TERMINAL, ToolKind::Execute, title, arguments, |scope| async move {
            let created: CreateAnswer = send(&scope.connection, "terminal/create", &params).await?;
            let terminal = json!({"sessionId": scope.session.id(), "terminalId": created.terminal_id});
            // Released whatever happens; killed and released even if the turn is dropped.
            let guard = TerminalGuard {
                connection: scope.connection.clone(),
                terminal: Some(terminal.clone()),
            };
            let ran = run_to_end(&scope.connection, &terminal, timeout).await;
            guard.release().await;
            let output = ran?;
            let summary = json!({
                "exitCode": output.exit_code,
                "signal": output.signal,
                "outputBytes": output.output.len(),
                "truncated": output.truncated,
            });
            Ok((output, summary))
        })
        .await
    }

    /// The absolute path of `path` when `method` may be called with it.
    fn allowed(&self, method: &'static str, flag: fn(ClientMethods) -> bool, path: &str) -> Result<String> {
        let connection = &self.turn.scope().connection;
        if !flag(connection.declared_editor()) {
            return Err(EditorError::NotDeclared(method).into());
        }
        if !flag(connection.offered_editor()) {
            return Err(EditorError::NotOffered(method).into());
        }
        let absolute = self
            .turn
            .session()
            .resolve_in_roots(path)
            .map_err(|_| EditorError::OutsideSession(path.to_string()))?;
        Ok(absolute.to_string_lossy().into_owned())
    }

    /// Runs `call` as the governed tool call `tool`; `call` gives the operator's value and the
    /// summary that is audited and shown.
    async fn governed<R, F, Fut>(
        &mut self,
        tool: &'static str,
        kind: ToolKind,
        title: String,
        arguments: Value,
        call: F,
    ) -> Result<R>
    where
        F: FnOnce(&'t TurnScope) -> Fut,
        Fut: Future<Output = std::result::Result<(R, Value), String>>,
    {
        let scope = self.turn.scope();
        let mut value = None;
        let slot = &mut value;
        let outcome = self
            .turn
            .tool_call(tool, arguments)
            .title(title)
            .kind(kind)
            .run(|_arguments| async move {
                let (result, summary) = call(scope).await?;
                *slot = Some(result);
                Ok::<_, String>(summary)
            })
            .await?;
        match outcome {
            ToolOutcome::Completed(_) => value.ok_or_else(|| Error::msg("internal: the editor call left no value")),
            ToolOutcome::Failed(reason) => Err(EditorError::Failed(reason).into()),
            ToolOutcome::Rejected(reason) => Err(EditorError::Rejected(reason).into()),
            ToolOutcome::Denied(reason) => Err(EditorError::Denied(reason).into()),
        }
    }
}

/// A terminal in the editor that must not be left behind: [`TerminalGuard::release`] releases
/// it; dropped unreleased (the turn was cancelled and its future dropped), it kills and
/// releases it from a task of its own.
struct TerminalGuard {
    connection: std::sync::Arc<Connection>,
    /// `{sessionId, terminalId}`, until released.
    terminal: Option<Value>,
}

impl TerminalGuard {
    async fn release(mut self) {
        if let Some(terminal) = self.terminal.take() {
            release(&self.connection, &terminal, false).await;
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let Some(terminal) = self.terminal.take() else { return };
        let connection = self.connection.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { release(&connection, &terminal, true).await });
            }
            Err(_) => tracing::warn!(%terminal, "a terminal in the editor was left behind: no runtime to release it"),
        }
    }
}

/// `terminal/kill` (when `kill`), then `terminal/release`; failures are logged.
async fn release(connection: &Connection, terminal: &Value, kill: bool) {
    let methods: &[&str] = if kill {
        &["terminal/kill", "terminal/release"]
    } else {
        &["terminal/release"]
    };
    for method in methods {
        if let Err(error) = send::<Value>(connection, method, terminal).await {
            tracing::warn!(%error, "the editor did not answer `{method}`");
        }
    }
}

/// One request to the editor, bounded by the editor timeout. (A cancel needs no branch here:
/// the runtime drops the turn's future, and with it this request, at once.)
async fn send<A: for<'de> Deserialize<'de>>(
    connection: &Connection,
    method: &str,
    params: &Value,
) -> std::result::Result<A, String> {
    match connection.request(method, params, connection.editor_timeout).await {
        Ok(raw) => serde_json::from_str(raw.get()).map_err(|error| format!("`{method}`: unreadable answer: {error}")),
        Err(RequestFailure::TimedOut) => Err(format!(
            "`{method}`: no answer within {} ms",
            connection.editor_timeout.as_millis()
        )),
        Err(RequestFailure::Closed) => Err(format!("`{method}`: the connection closed")),
        Err(RequestFailure::Rpc(error)) => Err(format!("`{method}`: {error}")),
    }
}

/// Waits for the command (killing it after `timeout`), then reads its output. At a cancel
/// the turn's future is dropped and the [`TerminalGuard`] kills and releases the terminal.
async fn run_to_end(
    connection: &Connection,
    terminal: &Value,
    timeout: Duration,
) -> std::result::Result<CommandOutput, String> {
    let exit = match tokio::time::timeout(timeout, wait_for_exit(connection, terminal)).await {
        Ok(exit) => exit?,
        Err(_) => {
            if let Err(error) = send::<Value>(connection, "terminal/kill", terminal).await {
                tracing::warn!(%error, "the editor did not answer `terminal/kill`");
            }
            ExitAnswer {
                exit_code: None,
                signal: Some("timeout".to_string()),
            }
        }
    };
    let output: OutputAnswer = send(connection, "terminal/output", terminal).await?;
    Ok(CommandOutput {
        output: output.output,
        truncated: output.truncated,
        exit_code: exit.exit_code,
        signal: exit.signal,
    })
}

/// `terminal/wait_for_exit`, which may take as long as the command: no editor timeout here
/// (the caller bounds it by the command's).
async fn wait_for_exit(connection: &Connection, terminal: &Value) -> std::result::Result<ExitAnswer, String> {
    match connection
        .request("terminal/wait_for_exit", terminal, Duration::MAX)
        .await
    {
        Ok(raw) => Ok(serde_json::from_str(raw.get()).unwrap_or_default()),
        Err(RequestFailure::Rpc(error)) => Err(format!("`terminal/wait_for_exit`: {error}")),
        Err(RequestFailure::Closed) => Err("`terminal/wait_for_exit`: the connection closed".to_string()),
        Err(RequestFailure::TimedOut) => Err("`terminal/wait_for_exit`: no answer".to_string()),
    }
}
