//! The low-level driver: newline-delimited JSON-RPC over a child's stdio. Frames are written
//! as raw text (a check may send malformed ones), every read has a deadline, stderr is kept,
//! any stdout line that is not a JSON-RPC message is recorded, and the child is killed and
//! reaped on drop.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How the agent under test is started.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// Extra environment variables.
    pub env: Vec<(OsString, OsString)>,
}

/// Why a read gave no message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Nothing arrived before the deadline.
    Timeout,
    /// The agent closed its stdout (it exited or crashed).
    Closed,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Timeout => f.write_str("no message before the timeout"),
            ReadError::Closed => f.write_str("the agent closed stdout"),
        }
    }
}

/// A running agent process spoken to over stdio.
pub struct Peer {
    child: Child,
    /// Frames for the writer thread; `None` once stdin is closed.
    stdin: Option<Sender<Vec<u8>>>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    /// Stdout lines that were not JSON-RPC messages.
    pub junk: Vec<String>,
    /// The deadline of each read.
    pub timeout: Duration,
}

/// Stderr kept per agent, at most this many bytes.
const STDERR_KEEP: usize = 64 * 1024;
/// A stdout line is kept up to this many bytes; the rest of it is dropped (and the line is
/// then not JSON-RPC).
const LINE_KEEP: usize = 16 * 1024 * 1024;

impl Peer {
    /// Starts the agent; an error names what could not be started.
    pub fn spawn(launch: &Launch, timeout: Duration) -> Result<Peer, String> {
        let (program, args) = launch.command.split_first().ok_or("no agent command given")?;
        let mut child = Command::new(program)
            .args(args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", Path::new(program).display()))?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let stderr_pipe = child.stderr.take().ok_or("no stderr pipe")?;
        let (tx, lines) = channel();
        thread::spawn(move || read_lines(BufReader::new(stdout), &tx));
        // Writes happen on their own thread, so an agent that stops reading its stdin cannot
        // block the kit (the pipe holds 64 KiB); a read's deadline still applies.
        let mut stdin_pipe = child.stdin.take().ok_or("no stdin pipe")?;
        let (stdin, frames) = channel::<Vec<u8>>();
        thread::spawn(move || {
            for frame in frames {
                if stdin_pipe.write_all(&frame).and_then(|()| stdin_pipe.flush()).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let kept = Arc::clone(&stderr);
        thread::spawn(move || {
            let reader = BufReader::new(stderr_pipe);
            for line in reader.lines() {
                let Ok(line) = line else { break };
                if let Ok(mut kept) = kept.lock()
                    && kept.len() < STDERR_KEEP
                {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
        });
        Ok(Peer {
            stdin: Some(stdin),
            child,
            lines,
            stderr,
            junk: Vec::new(),
            timeout,
        })
    }

    /// Queues one frame, as given and followed by a newline, for the agent's stdin; an error
    /// when stdin is closed or the agent stopped reading it for good (its pipe broke).
    pub fn send_raw(&mut self, frame: &str) -> Result<(), String> {
        let stdin = self.stdin.as_ref().ok_or("stdin is closed")?;
        let mut bytes = Vec::with_capacity(frame.len() + 1);
        bytes.extend_from_slice(frame.as_bytes());
        bytes.push(b'\n');
        stdin
            .send(bytes)
            .map_err(|_| format!("cannot write to the agent: its stdin is closed{}", self.stderr_hint()))
    }

    /// Sends a JSON-RPC message.
    pub fn send(&mut self, message: &Value) -> Result<(), String> {
        self.send_raw(&message.to_string())
    }

    /// Sends a request.
    pub fn request(&mut self, id: Value, method: &str, params: Value) -> Result<(), String> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), String> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// The next JSON-RPC message, waiting at most `within`.
    pub fn recv_within(&mut self, within: Duration) -> Result<Value, ReadError> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => return Err(ReadError::Timeout),
                Err(RecvTimeoutError::Disconnected) => return Err(ReadError::Closed),
            };
            match serde_json::from_str::<Value>(&line) {
                Ok(value) if is_jsonrpc(&value) => return Ok(value),
                _ => self.junk.push(line),
            }
        }
    }

    /// The next JSON-RPC message within the peer's timeout.
    pub fn recv(&mut self) -> Result<Value, ReadError> {
        self.recv_within(self.timeout)
    }

    /// Reads until the response to `id`; returns the messages before it and the response.
    /// Requests from the agent are collected with the rest, not answered.
    pub fn until_response(&mut self, id: &Value) -> Result<(Vec<Value>, Value), ReadError> {
        let deadline = Instant::now() + self.timeout;
        let mut before = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.recv_within(left)?;
            if message.get("method").is_none() && message.get("id") == Some(id) {
                return Ok((before, message));
            }
            before.push(message);
        }
    }

    /// Sends a request and waits for its response (see [`Peer::until_response`]).
    pub fn call(&mut self, id: Value, method: &str, params: Value) -> Result<(Vec<Value>, Value), String> {
        self.request(id.clone(), method, params)?;
        self.until_response(&id)
            .map_err(|e| format!("{method} (id {id}): {e}{}", self.stderr_hint()))
    }

    /// The agent's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes the agent's stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits at most `within` for the agent to exit.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(2)),
                _ => return None,
            }
        }
    }

    /// What the agent wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The last stderr line, as a hint for an error message (empty when there is none).
    pub fn stderr_hint(&self) -> String {
        let stderr = self.stderr();
        match stderr.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(line) => format!(" (stderr: {})", crate::trim(line)),
            None => String::new(),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stdin = None;
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Sends each line of `reader` (without its line ending) to `lines`, each cut to
/// [`LINE_KEEP`] bytes, until EOF, a read error, or no one listening.
fn read_lines(mut reader: impl BufRead, lines: &Sender<String>) {
    let mut line = Vec::new();
    loop {
        let (used, ended) = match reader.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(buffer) => match buffer.iter().position(|&b| b == b'\n') {
                Some(at) => {
                    let keep = (LINE_KEEP.saturating_sub(line.len())).min(at);
                    line.extend_from_slice(&buffer[..keep]);
                    (at + 1, true)
                }
                None => {
                    let keep = LINE_KEEP.saturating_sub(line.len()).min(buffer.len());
                    line.extend_from_slice(&buffer[..keep]);
                    (buffer.len(), false)
                }
            },
        };
        reader.consume(used);
        if ended {
            let text = String::from_utf8_lossy(&line).trim_end().to_string();
            line.clear();
            if lines.send(text).is_err() {
                return;
            }
        }
    }
    if !line.is_empty() {
        let _ = lines.send(String::from_utf8_lossy(&line).trim_end().to_string());
    }
}

/// Whether `value` is shaped like a JSON-RPC 2.0 message.
pub fn is_jsonrpc(value: &Value) -> bool {
    value.get("jsonrpc") == Some(&json!("2.0"))
        && (value.get("method").is_some_and(Value::is_string)
            || (value.get("id").is_some() && (value.get("result").is_some() || value.get("error").is_some())))
}

/// The error code of a response, if it is an error.
pub fn error_code(response: &Value) -> Option<i64> {
    response.get("error")?.get("code")?.as_i64()
}
