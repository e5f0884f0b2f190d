//! Test support for the examples' own tests (included with `#[path]`): a program spoken to
//! over its stdin and stdout, one JSON line at a time, with every wait bounded.

#![allow(dead_code, reason = "each example's tests use part of it")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The bound on every wait for the program.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A scratch folder under the system's temporary folder, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh, empty, canonical folder.
    pub fn new(label: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let path = std::env::temp_dir().join(format!("{label}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).expect("the scratch folder is created");
        Scratch(path.canonicalize().expect("the scratch folder exists"))
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running program; it is killed on drop if still running.
pub struct StdioPeer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl StdioPeer {
    /// Starts `program` with `args` and the extra environment `env`.
    pub fn spawn(program: &Path, args: &[&str], env: &[(&str, &Path)]) -> StdioPeer {
        let mut command = Command::new(program);
        command.args(args);
        for (key, value) in env {
            command.env(key, value);
        }
        StdioPeer::start(&mut command)
    }

    /// Starts `command` (a program under Wine, say), its stdin, stdout and stderr piped.
    pub fn start(command: &mut Command) -> StdioPeer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{command:?} starts: {e}"));
        let lines = forward_lines(child.stdout.take().expect("piped"));
        let stderr = forward_lines(child.stderr.take().expect("piped"));
        let stdin = child.stdin.take();
        StdioPeer {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    /// Sends one message.
    pub fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").expect("the program reads its stdin");
    }

    /// Sends one line as it is (a message a `Value` could not hold, such as one nested
    /// deeper than `serde_json` reads).
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("the program reads its stdin");
    }

    /// The next message, within [`TIMEOUT`].
    pub fn recv(&mut self) -> Value {
        let line = match self.lines.recv_timeout(TIMEOUT) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("no message within {TIMEOUT:?}; stderr: {}", self.stderr_so_far())
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the program closed its stdout; stderr: {}", self.stderr_so_far())
            }
        };
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// `initialize` (id 0) then `session/new` in `cwd` (id 1): the `initialize` result and the
    /// session id.
    pub fn open_session(&mut self, cwd: &Path) -> (Value, Value) {
        self.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}));
        let initialized = self.recv()["result"].clone();
        let cwd = cwd.to_str().expect("a UTF-8 folder");
        self.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}),
        );
        let session = self.recv()["result"]["sessionId"].clone();
        assert!(session.is_string(), "session/new answers a session id");
        (initialized, session)
    }

    /// `session/prompt` with one text block, as request `id`: the messages up to its answer.
    pub fn prompt(&mut self, id: u64, session: &Value, text: &str) -> Vec<Value> {
        let prompt = json!([{"type": "text", "text": text}]);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {"sessionId": session, "prompt": prompt}}));
        self.until_answer(id)
    }

    /// Messages up to and including the answer to request `id`.
    pub fn until_answer(&mut self, id: u64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.recv();
            let done = message["id"] == id && message.get("method").is_none();
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// The program's process id (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin (end of input for the program); its stdout can still be read.
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// The next line, or `None` once the program closed its stdout (within [`TIMEOUT`]).
    pub fn recv_or_end(&mut self) -> Option<Value> {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok(line) => Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!(
                    "no message and no end within {TIMEOUT:?}; stderr: {}",
                    self.stderr_so_far()
                )
            }
        }
    }

    /// Closes stdin and waits (within [`TIMEOUT`]) for the program to exit.
    pub fn finish(mut self) -> ExitStatus {
        drop(self.stdin.take());
        self.wait_exit()
    }

    /// Waits (within [`TIMEOUT`]) for the program to exit: on its own while its stdin is
    /// still open, or after [`finish`](Self::finish) closed it.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("the program can be waited for") {
                return status;
            }
            if Instant::now() >= deadline {
                let stdin = if self.stdin.is_some() {
                    "its stdin still open"
                } else {
                    "after its stdin was closed"
                };
                panic!("the program had not exited after a wait of {TIMEOUT:?} ({stdin})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// All of stderr, once the program closed it (within [`TIMEOUT`]).
    pub fn stderr_to_end(&self) -> String {
        let deadline = Instant::now() + TIMEOUT;
        let mut lines = Vec::new();
        loop {
            match self
                .stderr
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => lines.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => return lines.join("\n"),
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("stderr stayed open for {TIMEOUT:?}"),
            }
        }
    }

    /// The stderr lines received so far.
    pub fn stderr_so_far(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for StdioPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn forward_lines(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}
