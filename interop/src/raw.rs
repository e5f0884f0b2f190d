//! A raw JSON-lines client: writes exactly the bytes a test gives it to the agent's stdin and
//! reads the agent's stdout line by line, with no SDK in between.

use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use crate::{AgentDirs, AgentProcess, Direction, StderrMode, TIMEOUT, Transcript};

/// What waiting for the next line gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// A line (without its newline).
    Line(String),
    /// The agent closed its stdout.
    Eof,
    /// Nothing arrived in time.
    Timeout,
}

/// A client that speaks raw newline-delimited JSON to an agent process.
#[derive(Debug)]
pub struct RawClient {
    /// The agent.
    pub process: AgentProcess,
    /// Every line sent and received.
    pub transcript: Transcript,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl RawClient {
    /// Spawns `binary` in `dirs` (stderr captured) and drives it.
    pub fn spawn(binary: &Path, dirs: &AgentDirs) -> Self {
        Self::new(AgentProcess::spawn(binary, dirs, StderrMode::Capture))
    }

    /// Drives an already spawned agent.
    pub fn new(mut process: AgentProcess) -> Self {
        let (stdin, stdout) = process.take_stdio();
        Self {
            process,
            transcript: Transcript::new(),
            stdin: Some(stdin),
            stdout: BufReader::with_capacity(1 << 16, stdout),
        }
    }

    /// Panics with `message`, the wire transcript and the agent's stderr.
    #[track_caller]
    pub fn fail(&self, message: impl std::fmt::Display) -> ! {
        panic!(
            "{message}\n\n{}\n{} stderr:\n{}",
            self.transcript.tail(),
            self.process.name,
            crate::shorten(&self.process.stderr_text(), 8000)
        )
    }

    /// Writes `message` as one line.
    pub async fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string()).await;
    }

    /// Writes `line` and a newline.
    pub async fn send_line(&mut self, line: &str) {
        self.transcript.record(Direction::Sent, line);
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.write_all(&bytes).await;
    }

    async fn write_all(&mut self, bytes: &[u8]) {
        let Some(stdin) = self.stdin.as_mut() else {
            self.fail("write after stdin was closed");
        };
        let write = async {
            stdin.write_all(bytes).await?;
            stdin.flush().await
        };
        match tokio::time::timeout(TIMEOUT, write).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.fail(format!(
                "writing {} bytes to the agent's stdin failed: {e}",
                bytes.len()
            )),
            Err(_) => self.fail(format!(
                "writing {} bytes to the agent's stdin did not finish within {TIMEOUT:?} \
                 (the agent stopped reading its stdin)",
                bytes.len()
            )),
        }
    }

    /// The next line from the agent, waiting at most `timeout`.
    pub async fn next_line(&mut self, timeout: Duration) -> Next {
        let mut buf = Vec::new();
        match tokio::time::timeout(timeout, self.stdout.read_until(b'\n', &mut buf)).await {
            Err(_) => Next::Timeout,
            Ok(Err(e)) => self.fail(format!("reading the agent's stdout failed: {e}")),
            Ok(Ok(0)) => Next::Eof,
            Ok(Ok(_)) => {
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                }
                let line = match String::from_utf8(buf) {
                    Ok(line) => line,
                    Err(e) => {
                        let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
                        self.transcript.record(Direction::Received, &lossy);
                        self.fail("the agent wrote a line that is not UTF-8");
                    }
                };
                self.transcript.record(Direction::Received, &line);
                Next::Line(line)
            }
        }
    }

    /// The next message from the agent, parsed. Fails the test on timeout, EOF or a line that
    /// is not a JSON object.
    pub async fn recv(&mut self) -> Value {
        match self.next_line(TIMEOUT).await {
            Next::Line(line) => match serde_json::from_str::<Value>(&line) {
                Ok(value) if value.is_object() => value,
                _ => self.fail(format!(
                    "the agent wrote a line that is not a JSON object: {}",
                    crate::shorten(&line, 400)
                )),
            },
            Next::Eof => self.fail("the agent closed its stdout while a message was expected"),
            Next::Timeout => self.fail(format!("no message from the agent within {TIMEOUT:?}")),
        }
    }

    /// Reads messages until the response to `id`; the notifications and requests read on the
    /// way are returned with it, in order.
    pub async fn recv_response(&mut self, id: &Value) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.recv().await;
            if message.get("method").is_none() && message.get("id") == Some(id) {
                return (message, before);
            }
            if message.get("method").is_none() {
                self.fail(format!(
                    "expected the response to id {id}, got a response to another id: {message}"
                ));
            }
            before.push(message);
        }
    }

    /// Sends a request and returns its response (notifications on the way are skipped).
    pub async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.recv_response(&id).await.0
    }

    /// `initialize` with protocol version 1 and no client capabilities; returns the response.
    pub async fn initialize(&mut self, id: Value) -> Value {
        let response = self
            .request(
                id,
                "initialize",
                json!({
                    "protocolVersion": 1,
                    "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
                    "clientInfo": {"name": "interop-raw", "version": "0.1.0"}
                }),
            )
            .await;
        if response.get("result").is_none() {
            self.fail(format!("initialize failed: {response}"));
        }
        response
    }

    /// `session/new` in `cwd`; returns the new session id.
    pub async fn new_session(&mut self, id: Value, cwd: &Path) -> String {
        let response = self
            .request(id, "session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        match response["result"]["sessionId"].as_str() {
            Some(session) => session.to_string(),
            None => self.fail(format!("session/new failed: {response}")),
        }
    }

    /// Closes the agent's stdin (EOF).
    pub async fn close_stdin(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.shutdown().await;
        }
    }

    /// Waits (at most [`TIMEOUT`]) for the agent to exit; fails the test if it does not.
    pub async fn expect_exit(&mut self) -> ExitStatus {
        match self.process.wait_exit(TIMEOUT).await {
            Some(status) => status,
            None => self.fail(format!(
                "the agent did not exit within {TIMEOUT:?} of its stdin closing"
            )),
        }
    }
}

/// Asserts that `response` is a JSON-RPC error with `code` answering `id`, with a message
/// naming `what`.
#[track_caller]
pub fn assert_error(client: &RawClient, response: &Value, id: &Value, code: i64, what: &str) {
    let ok = response.get("jsonrpc") == Some(&json!("2.0"))
        && response.get("id") == Some(id)
        && response.get("result").is_none()
        && response["error"]["code"].as_i64() == Some(code)
        && response["error"]["message"].is_string();
    if !ok {
        client.fail(format!(
            "{what}: expected {{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":{code},\"message\":…}}}}, got {response}"
        ));
    }
}
