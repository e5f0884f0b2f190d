//! The low-level driver: newline-delimited JSON-RPC over a child's stdio, or JSON-RPC as
//! WebSocket text messages or over Streamable HTTP (`--connect`). Frames are
//! written as raw text (a check may send malformed ones), every read has a deadline, stderr is
//! kept, any stdout line (or line of a text message or an event) that is not a JSON-RPC
//! message is recorded, and on drop the child is killed and reaped, with every process it
//! started (its process tree, noted before its stdin closes and as it is killed:
//! [`acp_process`]), or the connection closed.

mod http;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError, channel};
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

/// A remote agent the kit connects to instead of starting one (`--connect`).
#[derive(Clone)]
pub struct Connect {
    /// The server's URL: `ws://HOST:PORT/acp` for WebSocket, `http://HOST:PORT/acp` for
    /// Streamable HTTP (`wss://` and `https://` are not supported yet).
    pub url: String,
    /// The bearer token shown on the upgrade, or on every HTTP request (`Authorization:
    /// Bearer …`); never printed.
    pub token: Option<String>,
    /// The server's workspace root, as the server sees it: sessions are opened there, and the
    /// confinement checks escape from it. The kit cannot choose a remote server's root.
    pub workspace_root: PathBuf,
}

impl std::fmt::Debug for Connect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connect")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("workspace_root", &self.workspace_root)
            .finish()
    }
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

/// What became of a frame the kit sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// On its way (queued for stdin or the WebSocket), or taken by the HTTP server (`202`,
    /// or `200` with its answer).
    Taken,
    /// Refused by the HTTP server with `status` (a frame it will not hand to the agent): why,
    /// in a sentence. Only over Streamable HTTP.
    Refused {
        /// The HTTP status.
        status: u16,
        /// The refusal in a sentence, with what the server said.
        sentence: String,
    },
}

/// A running agent process spoken to over stdio, or a connection to a remote one (WebSocket
/// or Streamable HTTP).
pub struct Peer {
    end: End,
    /// Frames for the writer thread; `None` once stdin is closed (or the connection closing).
    stdin: Option<Sender<Vec<u8>>>,
    lines: Receiver<String>,
    /// The agent's stderr; over WebSocket, what the kit learnt of the connection's end.
    stderr: Arc<Mutex<String>>,
    /// Stdout lines that were not JSON-RPC messages.
    pub junk: Vec<String>,
    /// The deadline of each read.
    pub timeout: Duration,
    /// What the agent started, as last walked: ended with it.
    tree: acp_process::Tree,
}

/// The other end of a [`Peer`].
enum End {
    /// A child process.
    Process(Child),
    /// A WebSocket connection, owned by a thread; `done` disconnects when the thread has ended
    /// (and so the connection is closed).
    Socket { done: Receiver<()> },
    /// A Streamable HTTP connection; `done` disconnects once it is closed and its streams'
    /// threads have ended.
    Http { http: http::HttpPeer, done: Receiver<()> },
}

/// How long the WebSocket thread blocks in one read or write before it looks at the other: a
/// frame the kit queues waits at most this long to be sent (1 ms: a check over WebSocket takes
/// a few ms more than over stdio; at 5 ms, the suite took 40% longer).
const SOCKET_POLL: Duration = Duration::from_millis(1);

/// How long what the agent started has, after SIGTERM, before SIGKILL.
const TREE_GRACE: Duration = Duration::from_millis(500);

/// Stderr kept per agent, at most this many bytes.
const STDERR_KEEP: usize = 64 * 1024;
/// A stdout line is kept up to this many bytes; the rest of it is dropped (and the line is
/// then not JSON-RPC).
const LINE_KEEP: usize = 16 * 1024 * 1024;

impl Peer {
    /// Starts the agent; an error names what could not be started.
    pub fn spawn(launch: &Launch, timeout: Duration) -> Result<Peer, String> {
        let (program, args) = launch.command.split_first().ok_or("no agent command given")?;
        // What an agent leaves behind (even outside its group and session) is reparented to
        // the kit, not to PID 1, so that the kit's end can still find it.
        acp_process::adopt_orphans();
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A group of its own, which `turn.sigterm` signals (as agentacp's runtime does): in a
        // PID namespace, the kit's child stands for the agent and leaves signals other than
        // SIGKILL to the agent, which is in its group.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        // It dies with the kit, even by `kill -9`, and in a PID namespace of its own (where
        // the kernel allows one), so does everything it started ([`acp_process::contain_tree`]).
        acp_process::die_with_parent(&mut command);
        acp_process::contain_tree(&mut command);
        let mut child = (command.spawn()).map_err(|e| format!("cannot start {}: {e}", Path::new(program).display()))?;
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
            end: End::Process(child),
            lines,
            stderr,
            junk: Vec::new(),
            timeout,
            tree: acp_process::Tree::default(),
        })
    }

    /// Connects to `target`: over Streamable HTTP for an `http://` URL (nothing is sent
    /// until the first frame, `initialize`, which opens the connection: an error then says
    /// why it cannot), else over WebSocket ([`Peer::connect_websocket`]).
    pub fn connect(target: &Connect, timeout: Duration) -> Result<Peer, String> {
        let scheme = target
            .url
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return Peer::connect_websocket(target, timeout);
        }
        let http::Ends {
            http,
            lines,
            notes,
            done,
        } = http::connect(target, timeout)?;
        Ok(Peer {
            stdin: None,
            end: End::Http { http, done },
            lines,
            stderr: notes,
            junk: Vec::new(),
            timeout,
            tree: acp_process::Tree::default(),
        })
    }

    /// Opens a WebSocket connection to `target` (`ws://` only), showing its token on the
    /// upgrade; every step (name lookup aside) waits at most `timeout`. An error says why:
    /// unreachable, refused (`401`: a token is wanted or wrong), not a WebSocket server.
    pub fn connect_websocket(target: &Connect, timeout: Duration) -> Result<Peer, String> {
        use tungstenite::client::IntoClientRequest;
        use tungstenite::handshake::HandshakeError;
        use tungstenite::http::{HeaderValue, StatusCode, header};

        let url = &target.url;
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| format!("--connect {url}: not a WebSocket URL: {e}"))?;
        match request.uri().scheme_str() {
            Some("ws") => {}
            Some("wss") => {
                return Err(format!(
                    "--connect {url}: wss:// is not supported by the kit yet (it has no TLS); \
                     connect over ws://, e.g. to a loopback port or through a tunnel"
                ));
            }
            _ => return Err(format!("--connect {url}: not a ws:// URL")),
        }
        let host = request
            .uri()
            .host()
            .ok_or_else(|| format!("--connect {url}: no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = request.uri().port_u16().unwrap_or(80);
        if let Some(token) = &target.token {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| "the token is not a valid header value".to_string())?;
            request.headers_mut().insert(header::AUTHORIZATION, value);
        }
        let addrs = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot connect to {url}: {e}"))?;
        let mut last = format!("cannot connect to {url}: {host} has no address");
        let mut stream = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(connected) => {
                    stream = Some(connected);
                    break;
                }
                Err(e) => last = format!("cannot connect to {url}: {e}"),
            }
        }
        let stream = stream.ok_or(last)?;
        let io = |e: std::io::Error| format!("cannot connect to {url}: {e}");
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let (socket, _) = tungstenite::client(request, stream).map_err(|error| match error {
            HandshakeError::Interrupted(_) => format!(
                "{url}: no answer to the WebSocket upgrade within {} ms",
                timeout.as_millis()
            ),
            HandshakeError::Failure(tungstenite::Error::Http(response)) => match response.status() {
                StatusCode::UNAUTHORIZED => unauthorized(url, target.token.is_some()),
                status => format!("{url}: the server refused the WebSocket upgrade: {status}"),
            },
            HandshakeError::Failure(error) => format!("{url}: the WebSocket upgrade failed: {error}"),
        })?;
        socket.get_ref().set_read_timeout(Some(SOCKET_POLL)).map_err(io)?;
        socket.get_ref().set_write_timeout(Some(SOCKET_POLL)).map_err(io)?;
        let (tx, lines) = channel();
        let (stdin, frames) = channel::<Vec<u8>>();
        let (finished, done) = channel();
        let notes = Arc::new(Mutex::new(String::new()));
        let kept = Arc::clone(&notes);
        thread::spawn(move || {
            pump(socket, &frames, &tx, &kept, timeout);
            drop(finished);
        });
        Ok(Peer {
            stdin: Some(stdin),
            end: End::Socket { done },
            lines,
            stderr: notes,
            junk: Vec::new(),
            timeout,
            tree: acp_process::Tree::default(),
        })
    }

    /// Queues one frame, as given and followed by a newline, for the agent's stdin (over
    /// HTTP: POSTs it); an error when stdin is closed or the agent stopped reading it for good
    /// (its pipe broke), or when the HTTP server refuses it.
    pub fn send_raw(&mut self, frame: &str) -> Result<(), String> {
        match self.try_send_raw(frame)? {
            Sent::Taken => Ok(()),
            Sent::Refused { sentence, .. } => Err(sentence),
        }
    }

    /// [`Peer::send_raw`], telling a frame the HTTP server refused ([`Sent::Refused`]) from
    /// one it could not send.
    pub fn try_send_raw(&mut self, frame: &str) -> Result<Sent, String> {
        if let End::Http { http, .. } = &self.end {
            return http.post(frame);
        }
        let stdin = self.stdin.as_ref().ok_or("stdin is closed")?;
        let mut bytes = Vec::with_capacity(frame.len() + 1);
        bytes.extend_from_slice(frame.as_bytes());
        bytes.push(b'\n');
        stdin
            .send(bytes)
            .map_err(|_| format!("cannot write to the agent: its stdin is closed{}", self.stderr_hint()))?;
        Ok(Sent::Taken)
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
    ///
    /// A deadline that has passed (`within` zero) is a timeout even when messages are queued:
    /// a loop that reads until its deadline ends on time however fast the agent writes.
    pub fn recv_within(&mut self, within: Duration) -> Result<Value, ReadError> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ReadError::Timeout);
            }
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

    /// The agent's process id; `None` over a connection.
    pub fn pid(&self) -> Option<u32> {
        match &self.end {
            End::Process(child) => Some(child.id()),
            End::Socket { .. } | End::Http { .. } => None,
        }
    }

    /// Whether this is a connection to a remote agent (no process of the kit's).
    pub fn is_remote(&self) -> bool {
        !matches!(self.end, End::Process(_))
    }

    /// Whether this is a Streamable HTTP connection: the agent's messages come on several
    /// streams (the connection's and each session's), with no order between them.
    pub fn is_http(&self) -> bool {
        matches!(self.end, End::Http { .. })
    }

    /// Where the agent's messages come from, for evidence: `stdout`, `the WebSocket` or
    /// `the SSE streams`.
    pub fn channel(&self) -> &'static str {
        match self.end {
            End::Process(_) => "stdout",
            End::Socket { .. } => "the WebSocket",
            End::Http { .. } => "the SSE streams",
        }
    }

    /// Closes the agent's stdin (EOF); over WebSocket, starts closing the connection (a close
    /// frame), reading on until the server closes its side; over HTTP, ends the connection
    /// (`DELETE`), after which the server ends its streams.
    pub fn close_stdin(&mut self) {
        // Before: once it exits, what it started is no longer below it.
        self.note_descendants();
        self.stdin = None;
        if let End::Http { http, .. } = &self.end {
            http.close();
        }
    }

    /// Notes what the agent has started so far (while it runs: once reaped, its pid may name
    /// another process), to be ended with it.
    fn note_descendants(&mut self) {
        if let End::Process(child) = &mut self.end
            && matches!(child.try_wait(), Ok(None))
        {
            self.tree.note_descendants_of(child.id());
        }
    }

    /// Waits at most `within` for the agent to exit. Over WebSocket: for the connection to be
    /// closed (after [`Peer::close_stdin`], or by the server); over HTTP, for its streams to
    /// end after that. There is no exit status then, so this is always `None`.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        match &mut self.end {
            End::Process(child) => loop {
                match child.try_wait() {
                    Ok(Some(status)) => return Some(status),
                    Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(2)),
                    _ => return None,
                }
            },
            End::Socket { done } | End::Http { done, .. } => {
                let _ = done.recv_timeout(within);
                None
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
        let label = if self.is_remote() { "connection" } else { "stderr" };
        match stderr.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(line) => format!(" ({label}: {})", crate::trim(line)),
            None => String::new(),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.note_descendants();
        self.stdin = None;
        match &mut self.end {
            End::Process(child) => {
                // SIGTERM to its group first, and a grace to exit, as an editor would: killed
                // outright, an agent may leave a lock behind that stalls its next start (Gemini
                // CLI's projects lock). In a PID namespace the kit's child passes it on.
                if matches!(child.try_wait(), Ok(None)) && acp_process::terminate_group(child.id()) {
                    let deadline = Instant::now() + TREE_GRACE;
                    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                        thread::sleep(Duration::from_millis(5));
                    }
                }
                if matches!(child.try_wait(), Ok(None)) {
                    let _ = child.kill();
                }
                let _ = child.wait();
                // Then what it started: in its process group or not, and orphaned (adopted by
                // the kit) or not.
                self.tree.end(TREE_GRACE);
            }
            // The thread closes the connection (a close frame, then the server's) and ends; the
            // next check's connection does not overlap this one.
            End::Socket { done } => {
                let _ = done.recv_timeout(self.timeout);
            }
            // The same over HTTP: `DELETE`, then the server ends the streams.
            End::Http { http, done } => {
                http.close();
                let _ = done.recv_timeout(self.timeout);
            }
        }
    }
}

/// Owns a WebSocket connection: sends the frames of `frames` as text messages and the lines
/// of each text message it receives to `lines` (a binary message as one line that is not
/// JSON-RPC), blocking at most [`SOCKET_POLL`] on either side. When `frames` is closed (the
/// peer closes or is dropped), it sends a close frame and reads on until the server closes,
/// at most `timeout`. What ends the connection is noted in `notes`.
fn pump(
    mut socket: tungstenite::WebSocket<TcpStream>,
    frames: &Receiver<Vec<u8>>,
    lines: &Sender<String>,
    notes: &Mutex<String>,
    timeout: Duration,
) {
    use tungstenite::{Error, Message};

    let note = |text: String| {
        if let Ok(mut kept) = notes.lock()
            && kept.len() < STDERR_KEEP
        {
            kept.push_str(&text);
            kept.push('\n');
        }
    };
    let pending = |error: &Error| matches!(error, Error::Io(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
    // Set once the kit is done sending: by then a close frame is on its way.
    let mut closing: Option<Instant> = None;
    // Whether a frame is queued that did not go out whole (the server was not reading).
    let mut unflushed = false;
    loop {
        if closing.is_none() {
            loop {
                match frames.try_recv() {
                    Ok(mut frame) => {
                        if frame.last() == Some(&b'\n') {
                            frame.pop();
                        }
                        let text = String::from_utf8_lossy(&frame).into_owned();
                        // A frame that does not go out at once stays queued (flushed below).
                        match socket.send(Message::text(text)) {
                            Ok(()) => {}
                            Err(error) if pending(&error) => unflushed = true,
                            Err(error) => {
                                note(format!("cannot send: {error}"));
                                return;
                            }
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        closing = Some(Instant::now() + timeout);
                        match socket.close(None) {
                            Ok(()) => break,
                            Err(error) if pending(&error) => {
                                unflushed = true;
                                break;
                            }
                            Err(_) => return,
                        }
                    }
                }
            }
        } else if closing.is_some_and(|deadline| Instant::now() >= deadline) {
            note("the server did not close the connection in time".into());
            return;
        }
        if unflushed {
            match socket.flush() {
                Ok(()) => unflushed = false,
                Err(error) if pending(&error) => {}
                Err(Error::ConnectionClosed | Error::AlreadyClosed) => return,
                Err(error) => {
                    note(format!("cannot send: {error}"));
                    return;
                }
            }
        }
        match socket.read() {
            Ok(Message::Text(text)) => {
                let text = text.as_str();
                let text = text.strip_suffix('\n').unwrap_or(text);
                for line in text.split('\n') {
                    let line = line.strip_suffix('\r').unwrap_or(line);
                    let cut = line.len().min(LINE_KEEP);
                    let line = String::from_utf8_lossy(&line.as_bytes()[..cut]).into_owned();
                    // (After the kit is done, no one may listen: the server's lines are dropped.)
                    let _ = lines.send(line);
                }
            }
            Ok(Message::Binary(bytes)) => {
                let _ = lines.send(format!("<a binary message of {} bytes>", bytes.len()));
            }
            Ok(Message::Close(frame)) => {
                if closing.is_none() {
                    note(match frame {
                        Some(frame) => format!("the server closed the connection: {} {}", frame.code, frame.reason),
                        None => "the server closed the connection".into(),
                    });
                }
            }
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
            Err(error) if pending(&error) => {}
            Err(Error::ConnectionClosed | Error::AlreadyClosed) => return,
            Err(error) => {
                note(format!("the connection failed: {error}"));
                return;
            }
        }
    }
}

/// The start-up error of a server that answered `401` at `url`.
fn unauthorized(url: &str, token: bool) -> String {
    if token {
        format!("{url}: 401 Unauthorized: the server refused the token (--token)")
    } else {
        format!("{url}: 401 Unauthorized: the server wants a token (--token or AGENTACP_CONFORM_TOKEN)")
    }
}

/// Sends each line of `reader` (without its line ending) to `lines`, each cut to
/// [`LINE_KEEP`] bytes, until EOF, a read error, or no one listening.
fn read_lines(reader: impl BufRead, lines: &Sender<String>) {
    let _ = each_line(reader, |line| lines.send(line.to_string()).is_ok());
}

/// Hands each line of `reader` (without its line ending and trailing white space, cut to
/// [`LINE_KEEP`] bytes) to `line`, until EOF (`Ok`; a last line without its newline too), a
/// read error (`Err`), or `line` says stop (`Ok`).
fn each_line(mut reader: impl BufRead, mut line_of: impl FnMut(&str) -> bool) -> std::io::Result<()> {
    let mut line = Vec::new();
    loop {
        let (used, ended) = match reader.fill_buf() {
            Ok([]) => break,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
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
            let more = line_of(String::from_utf8_lossy(&line).trim_end());
            line.clear();
            if !more {
                return Ok(());
            }
        }
    }
    if !line.is_empty() {
        line_of(String::from_utf8_lossy(&line).trim_end());
    }
    Ok(())
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
