//! Issue #47: `governed-server --listen` run as a process (as a supervisor runs it), driven
//! over Streamable HTTP: SIGTERM while a turn runs answers the turn `cancelled` on its
//! session's stream, ends the streams, and exits 0; every audit record names the token's
//! identity. (The same over WebSocket: `interop/tests/remote_server.rs`.) The client is plain
//! HTTP/1.1 over `std::net`, every read bounded.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(30);
const TOKEN: &str = "sigterm-test-token-0123456789";
const IDENTITY: &str = "ci-runner";

/// The server process and what it wrote on stderr.
struct Server {
    child: Child,
    addr: String,
    stderr: mpsc::Receiver<String>,
}

impl Server {
    fn start(dirs: &tempfile::TempDir) -> Server {
        let root = dirs.path().join("workspace");
        std::fs::create_dir_all(root.join("p")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_governed-server"))
            .args(["--listen", "127.0.0.1:0"])
            .env_remove("AGENTACP_LOG")
            .env_remove("RUST_LOG")
            .env("AGENTACP_WORKSPACE_ROOT", &root)
            .env("AGENTACP_STATE_DIR", dirs.path().join("state"))
            .env("AGENTACP_AUDIT_LOG", dirs.path().join("audit.jsonl"))
            .env("AGENTACP_TOKEN", TOKEN)
            .env("AGENTACP_TOKEN_IDENTITY", IDENTITY)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("governed-server starts");
        let (lines, stderr) = mpsc::channel();
        let output = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let deadline = Instant::now() + WAIT;
        let addr = loop {
            let line = stderr
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the server says where it listens");
            if let Some(addr) = line.strip_prefix("governed-server: listening on ws://") {
                break addr.trim_end_matches("/acp").to_string();
            }
        };
        Server { child, addr, stderr }
    }

    /// A new TCP connection to it, its reads bounded.
    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(&self.addr).expect("the server accepts");
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream
    }

    /// What it wrote on stderr so far.
    fn stderr_text(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a request on `stream` (its own `Content-Length`); reads the answer's head and body
/// (by `Content-Length`). The status line, the headers (lower-case names) and the body.
fn exchange(stream: &mut TcpStream, head: &str, body: &str) -> (String, Vec<(String, String)>, String) {
    let request = format!("{head}Content-Length: {}\r\n\r\n{body}", body.len());
    stream.write_all(request.as_bytes()).unwrap();
    let (status, headers) = read_head(stream);
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .map_or(0, |(_, value)| value.parse().unwrap());
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
    (status, headers, String::from_utf8(body).unwrap())
}

/// Reads a response head, byte by byte (so that nothing after it is taken).
fn read_head(stream: &mut TcpStream) -> (String, Vec<(String, String)>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).expect("a response head in time");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_string();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    (status, headers)
}

/// The head of a request to `/acp` with the token and `headers` (each ending in CRLF).
fn head(method: &str, headers: &str) -> String {
    format!("{method} /acp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n{headers}")
}

/// POSTs `message` on `stream` for `connection` (and `session`); the status line.
fn post(stream: &mut TcpStream, message: &str, connection: &str, session: Option<&str>) -> String {
    let session = session
        .map(|session| format!("Acp-Session-Id: {session}\r\n"))
        .unwrap_or_default();
    let headers = format!("Content-Type: application/json\r\nAcp-Connection-Id: {connection}\r\n{session}");
    exchange(stream, &head("POST", &headers), message).0
}

/// Opens a stream of `connection` (and `session`) on a TCP connection of its own.
fn open_stream(server: &Server, connection: &str, session: Option<&str>) -> TcpStream {
    let mut stream = server.connect();
    let session = session
        .map(|session| format!("Acp-Session-Id: {session}\r\n"))
        .unwrap_or_default();
    let headers = format!("Accept: text/event-stream\r\nAcp-Connection-Id: {connection}\r\n{session}\r\n");
    stream.write_all(head("GET", &headers).as_bytes()).unwrap();
    let (status, _) = read_head(&mut stream);
    assert_eq!(status, "HTTP/1.1 200 OK");
    stream
}

/// Reads `stream` (the raw bytes of an SSE body) into `seen` until `wanted` is in it; the
/// text after it.
fn read_until(stream: &mut TcpStream, seen: &mut String, wanted: &str) -> String {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(at) = seen.find(wanted) {
            return seen[at + wanted.len()..].to_string();
        }
        let read = stream.read(&mut chunk).expect("the stream goes on in time");
        assert!(read > 0, "the stream ended before `{wanted}`: {seen}");
        seen.push_str(&String::from_utf8_lossy(&chunk[..read]));
    }
}

#[test]
fn sigterm_answers_the_running_turn_cancelled_on_its_stream_and_the_server_exits_0() {
    let dirs = tempfile::tempdir().unwrap();
    let mut server = Server::start(&dirs);
    let mut posts = server.connect();
    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
    let (status, headers, body) = exchange(
        &mut posts,
        &head("POST", "Content-Type: application/json\r\n"),
        initialize,
    );
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let connection = headers
        .iter()
        .find(|(name, _)| name == "acp-connection-id")
        .map(|(_, value)| value.clone())
        .expect("the connection is named");
    let mut events = open_stream(&server, &connection, None);
    let cwd = dirs.path().join("workspace/p").canonicalize().unwrap();
    let new_session = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []}});
    assert_eq!(
        post(&mut posts, &new_session.to_string(), &connection, None),
        "HTTP/1.1 202 Accepted"
    );
    let after = read_until(&mut events, &mut String::new(), r#""sessionId":""#);
    let session = after.split('"').next().unwrap().to_string();
    assert!(session.starts_with("sess_"), "{after}");

    let mut turn = open_stream(&server, &connection, Some(&session));
    let prompt = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "/forever"}]}});
    assert_eq!(
        post(&mut posts, &prompt.to_string(), &connection, Some(&session)),
        "HTTP/1.1 202 Accepted"
    );
    let mut seen = String::new();
    read_until(&mut turn, &mut seen, "tick 0");

    let killed = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    // The turn's answer: the only `stopReason` on the stream.
    let seen_before = seen.len();
    read_until(&mut turn, &mut seen, r#""stopReason":"#);
    let answer = &seen[seen_before.saturating_sub(64)..];
    assert!(
        seen.contains(r#""stopReason":"cancelled""#),
        "{answer}\n{}",
        server.stderr_text()
    );
    // The stream ends (its last chunk, then the connection closes).
    let mut rest = Vec::new();
    turn.read_to_end(&mut rest).expect("the stream ended in time");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running after SIGTERM:\n{}",
            server.stderr_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = server.stderr_text();
    assert!(status.success(), "exit {status:?}:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let log = std::fs::read_to_string(dirs.path().join("audit.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = log.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert!(
        records
            .iter()
            .any(|r| r["action"] == "auth.login" && r["actor"]["id"] == IDENTITY),
        "{log}"
    );
    for record in &records {
        assert_eq!(record["metadata"]["aip44"]["identity"], IDENTITY, "{record}");
    }
}
