//! Streamable HTTP (issue #47), in one run, every client the official Rust SDK's
//! (`agent-client-protocol` 5.0.0; over HTTP and WebSocket its `agent-client-protocol-http`
//! 5.0.0 `HttpClient`, over stdio its line transport on the agent's pipes, which is what the
//! SDK's own process launcher wraps), so the client code is the same on every transport:
//!
//! 1. throughput: `/stream 100000 64` (100,000 `agent_message_chunk` updates of 64 bytes) from
//!    our `echo-server` (release) over Streamable HTTP (`echo-server --listen`, loopback, a
//!    bearer token) against the same server spawned over stdio; target: HTTP ≥ 70 % of stdio;
//! 2. the same over HTTP from `sdk-stream-agent --listen` (release): the agent of the
//!    SDK-ratio benchmark (`benches/stream.rs`) served by the official `AcpHttpServer`;
//!    target: ours ≥ 2× it. Its stdio figure is printed for reference;
//! 3. memory: the server's `VmRSS` (`/proc/PID/status`) listening, after one warm-up connection,
//!    with 1,000 idle connections (each `initialize`d over HTTP, its connection-scoped SSE
//!    stream open and idle: a request after `initialize` was answered on it), and after they
//!    closed; KiB per connection; ours and `AcpHttpServer`'s, each a fresh process;
//! 4. set-up: connect + `initialize` + `session/new`, over HTTP, over WebSocket (the same
//!    endpoint, the SDK client's WebSocket profile) and over stdio (spawning the process).
//!
//! Then 1 and 4 again with our client (`agentacp::client::Client`: `connect` over stdio,
//! `connect_remote` over HTTP and WebSocket) in place of the SDK's, and 1 read by bare
//! readers (a line counter over stdio; over HTTP reqwest `chunk()` by `chunk()`, counting
//! `data:` lines), which parse no update.
//!
//! Each figure: min / median / max over the rounds (after a warm-up round, interleaved), and
//! each ratio pair by pair within a round. The date, the machine and `/proc/loadavg` before
//! and after are printed with the figures.
//!
//! Run with `cargo bench -p interop --bench http`.

#![allow(clippy::print_stdout)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, SessionNotification, StopReason, TextContent,
};
use agent_client_protocol::{Client, ConnectTo, Lines, UntypedMessage};
use agent_client_protocol_http::HttpClient;
use agentacp::client::{AgentCommand, Client as OurClient, ClientOptions};
use agentacp::websocket::Dial;
use interop::bench_support::{median, our_client_stream, raise_fd_limit};
use interop::raw::{Next, RawClient};
use interop::websocket::WsServer;
use interop::{AgentDirs, AgentProcess, StderrMode, TIMEOUT, release_binary};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{Notify, Semaphore, mpsc, watch};

const UPDATES: u64 = 100_000;
const SIZE: usize = 64;
const ROUNDS: usize = 5;
const SETUPS: usize = 30;
const IDLE: usize = 1_000;
/// Idle connections being opened at once.
const OPENING: usize = 32;
const TOKEN: &str = "bench-http-token-0123456789abcdef";
/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(120);

type SdkResult<T> = Result<T, agent_client_protocol::Error>;

/// The official SDK client over the line transport on a spawned agent's stdin and stdout.
fn stdio_transport(stdin: ChildStdin, stdout: ChildStdout) -> impl ConnectTo<Client> + 'static {
    let incoming = futures::stream::unfold(BufReader::with_capacity(1 << 16, stdout), |mut reader| async move {
        let mut line = String::new();
        match reader.read_line(&mut line).await {
            Ok(0) => None,
            Ok(_) => {
                if line.ends_with('\n') {
                    line.pop();
                }
                Some((Ok(line), reader))
            }
            Err(error) => Some((Err(error), reader)),
        }
    });
    let outgoing = futures::sink::unfold(stdin, |mut writer, line: String| async move {
        writer.write_all(line.as_bytes()).await?;
        writer.write_all(b"\n").await?;
        writer.flush().await?;
        Ok::<_, std::io::Error>(writer)
    });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// The official SDK's `HttpClient` for `base` (`http://…` Streamable HTTP, `ws://…` its
/// WebSocket profile), with the bearer token on every request.
fn http_client(base: &str) -> HttpClient {
    HttpClient::builder(base)
        .configure_http(|http| http.no_proxy().default_headers(bearer()))
        .build()
        .expect("an HTTP client")
}

fn bearer() -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {TOKEN}").parse().expect("a header value"),
    );
    headers
}

/// A listening server: ours or the SDK's, with the folders it runs in.
struct Server {
    process: WsServer,
    dirs: AgentDirs,
}

impl Server {
    /// `binary --listen 127.0.0.1:PORT` with a token, and room for the idle connections.
    fn start(binary: &Path) -> Server {
        let dirs = AgentDirs::new();
        let mut env: Vec<(&str, OsString)> = dirs.env();
        env.push(("AGENTACP_TOKEN", TOKEN.into()));
        env.push(("AGENTACP_MAX_CONNECTIONS", (4 * IDLE).to_string().into()));
        Server {
            process: WsServer::start(binary, &env),
            dirs,
        }
    }

    fn http(&self) -> String {
        format!("http://127.0.0.1:{}", self.process.port)
    }

    fn ws(&self) -> String {
        format!("ws://127.0.0.1:{}", self.process.port)
    }

    fn cwd(&self) -> PathBuf {
        self.dirs.project("p")
    }

    /// `VmRSS` and `VmHWM`, KiB.
    fn rss_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

fn text_prompt(session: agent_client_protocol::v1::schema::SessionId, text: String) -> PromptRequest {
    PromptRequest::new(session, vec![ContentBlock::Text(TextContent::new(text))])
}

/// Runs the official SDK client over `transport`: `initialize`, `session/new` in `cwd`, then
/// `/stream`; the time from sending the prompt to having its answer and every update. Panics
/// unless all [`UPDATES`] arrive and the turn ends `end_turn`.
async fn stream_over(transport: impl ConnectTo<Client> + 'static, cwd: PathBuf, what: &str) -> Duration {
    let counted = Arc::new(AtomicU64::new(0));
    let all_in = Arc::new(Notify::new());
    let (count, done) = (counted.clone(), all_in.clone());
    let run = Client
        .v1()
        .name("bench-http")
        .on_receive_notification(
            async move |_: SessionNotification, _cx| {
                if count.fetch_add(1, Ordering::Relaxed) + 1 == UPDATES {
                    done.notify_one();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx| -> SdkResult<(StopReason, Duration)> {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let session = cx
                .send_request(NewSessionRequest::new(cwd))
                .block_task()
                .await?
                .session_id;
            let start = Instant::now();
            let answer = cx
                .send_request(text_prompt(session, format!("/stream {UPDATES} {SIZE}")))
                .block_task()
                .await?;
            // Over HTTP the answer may come on another stream than the updates: the stream is
            // over once both are in.
            if tokio::time::timeout(WAIT, all_in.notified()).await.is_err() {
                return Err(agent_client_protocol::Error::internal_error().data("not every update arrived in time"));
            }
            Ok((answer.stop_reason, start.elapsed()))
        });
    let (stop, elapsed) = tokio::time::timeout(WAIT, run)
        .await
        .unwrap_or_else(|_| panic!("{what}: the stream did not end in time"))
        .unwrap_or_else(|error| panic!("{what}: the SDK client failed: {error}"));
    assert_eq!(stop, StopReason::EndTurn, "{what}: the stop reason");
    assert_eq!(counted.load(Ordering::Relaxed), UPDATES, "{what}: updates counted");
    elapsed
}

/// The official SDK client over `transport`: the time from `start` to `session/new` answered.
async fn set_up_over(
    transport: impl ConnectTo<Client> + 'static,
    cwd: PathBuf,
    start: Instant,
    what: &str,
) -> Duration {
    let took = Arc::new(std::sync::OnceLock::new());
    let noted = took.clone();
    let run = Client
        .v1()
        .name("bench-http")
        .connect_with(transport, async move |cx| -> SdkResult<()> {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            cx.send_request(NewSessionRequest::new(cwd)).block_task().await?;
            let _ = noted.set(start.elapsed());
            Ok(())
        });
    let outcome = tokio::time::timeout(WAIT, run)
        .await
        .unwrap_or_else(|_| panic!("{what}: set-up did not end in time"));
    match (took.get(), outcome) {
        (Some(took), Ok(())) => *took,
        // The SDK's HTTP client can fail its own closing when the foreground ends while it is
        // still opening the new session's stream ("outgoing channel closed while accepted
        // messages awaited SSE stream establishment"): the set-up was done; counted, printed.
        (Some(took), Err(error)) => {
            CLOSE_FAILURES.fetch_add(1, Ordering::Relaxed);
            let _ = CLOSE_FAILURE.set(format!("{what}: {error}"));
            *took
        }
        (None, outcome) => panic!("{what}: the SDK client failed: {outcome:?}"),
    }
}

/// How many SDK clients failed while closing after their set-up, and the first such failure.
static CLOSE_FAILURES: AtomicU64 = AtomicU64::new(0);
static CLOSE_FAILURE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `binary` spawned over stdio in fresh folders: the process, the SDK's transport over its
/// pipes, and a session's `cwd`.
fn spawn_stdio(binary: &Path) -> (AgentProcess, impl ConnectTo<Client> + 'static, AgentDirs) {
    let dirs = AgentDirs::new();
    let mut process = AgentProcess::spawn(binary, &dirs, StderrMode::Capture);
    let (stdin, stdout) = process.take_stdio();
    (process, stdio_transport(stdin, stdout), dirs)
}

/// Once the client let go of its stdin, the agent exits 0.
async fn exits_cleanly(mut process: AgentProcess, what: &str) {
    let status = process.wait_exit(WAIT).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "{what}: the agent did not exit 0 on stdin EOF: {status:?}\n{}",
        process.stderr_text()
    );
}

/// `/stream` from `binary` spawned over stdio.
async fn stream_stdio(binary: &Path, what: &str) -> Duration {
    let (process, transport, dirs) = spawn_stdio(binary);
    let elapsed = stream_over(transport, dirs.project("p"), what).await;
    exits_cleanly(process, what).await;
    elapsed
}

/// `/stream` from `server` over Streamable HTTP, on a new connection.
async fn stream_http(server: &Server, what: &str) -> Duration {
    stream_over(http_client(&server.http()), server.cwd(), what).await
}

/// Set-up over stdio, spawning `binary`.
async fn set_up_stdio(binary: &Path) -> Duration {
    let start = Instant::now();
    let (process, transport, dirs) = spawn_stdio(binary);
    let took = set_up_over(transport, dirs.project("p"), start, "set-up over stdio").await;
    exits_cleanly(process, "set-up over stdio").await;
    took
}

/// Set-up over `base` (`http://…` or `ws://…`).
async fn set_up_remote(base: &str, cwd: PathBuf, what: &str) -> Duration {
    let client = http_client(base);
    set_up_over(client, cwd, Instant::now(), what).await
}

/// Our client's options, its file handlers confined to `dirs`' workspace root.
fn our_options(dirs: &AgentDirs) -> ClientOptions {
    ClientOptions {
        prompt_idle_timeout: TIMEOUT,
        ..ClientOptions::default()
    }
    .with_workspace_root(&dirs.workspace_root)
}

/// Our client spawning `binary` over stdio, in `dirs`.
async fn our_stdio_client(binary: &Path, dirs: &AgentDirs) -> OurClient {
    let mut command = AgentCommand::new(binary);
    for (key, value) in dirs.env() {
        command = command.env(key, value);
    }
    OurClient::connect(command, our_options(dirs))
        .await
        .unwrap_or_else(|error| panic!("our client over stdio: {error}"))
}

/// Our client dialing `base` (`http://…` Streamable HTTP, `ws://…` WebSocket) with the token.
async fn our_remote_client(base: &str, server: &Server) -> OurClient {
    let dial = Dial::new(format!("{base}/acp")).token(TOKEN);
    OurClient::connect_remote(dial, our_options(&server.dirs))
        .await
        .unwrap_or_else(|error| panic!("our client dialing {base}: {error}"))
}

/// `/stream` read by our client from `binary` spawned over stdio.
async fn our_stream_stdio(binary: &Path) -> Duration {
    let dirs = AgentDirs::new();
    let client = our_stdio_client(binary, &dirs).await;
    let elapsed = our_client_stream(&client, &dirs.project("p"), UPDATES as usize, SIZE).await;
    let status = client.close().await;
    assert!(
        status.is_some_and(|s| s.success()),
        "the agent did not exit 0: {status:?}"
    );
    elapsed
}

/// `/stream` read by our client from `server` over Streamable HTTP.
async fn our_stream_http(server: &Server) -> Duration {
    let client = our_remote_client(&server.http(), server).await;
    let elapsed = our_client_stream(&client, &server.cwd(), UPDATES as usize, SIZE).await;
    client.close().await;
    elapsed
}

/// Set-up by our client (connect, which runs `initialize`, then `session/new`): over stdio
/// spawning `binary` when `remote` is `None`, else dialing that base URL of `server`.
async fn our_set_up(binary: &Path, remote: Option<&str>, server: &Server) -> Duration {
    let dirs = AgentDirs::new();
    let start = Instant::now();
    let (client, cwd) = match remote {
        None => (our_stdio_client(binary, &dirs).await, dirs.project("p")),
        Some(base) => (our_remote_client(base, server).await, server.cwd()),
    };
    client.new_session(&cwd).await.expect("session/new");
    let took = start.elapsed();
    client.close().await;
    took
}

/// The `data:` payloads of an SSE response, read line by line without an SSE library.
struct SseData {
    response: reqwest::Response,
    buffer: Vec<u8>,
    /// Where the unread part of `buffer` starts.
    read: usize,
}

impl SseData {
    /// The next event's `data:` payload (comments and other fields skipped); `None` at the end.
    async fn next(&mut self) -> Option<String> {
        loop {
            while let Some(end) = self.buffer[self.read..].iter().position(|&b| b == b'\n') {
                let line = &self.buffer[self.read..self.read + end];
                self.read += end + 1;
                if let Some(data) = line.strip_prefix(b"data:") {
                    return Some(String::from_utf8_lossy(data).trim().to_string());
                }
            }
            // Only an unfinished line is left: keep it, read on.
            self.buffer.drain(..self.read);
            self.read = 0;
            let chunk = tokio::time::timeout(WAIT, self.response.chunk())
                .await
                .expect("an SSE chunk in time")
                .expect("the SSE stream reads")?;
            self.buffer.extend_from_slice(&chunk);
        }
    }
}

/// A bare Streamable HTTP client: `POST`s and `GET`s with reqwest, counting `data:` lines.
struct BareHttp {
    http: reqwest::Client,
    endpoint: String,
    connection: String,
}

impl BareHttp {
    /// `initialize`: a new connection.
    async fn initialize(server: &Server) -> BareHttp {
        let http = reqwest::Client::builder()
            .no_proxy()
            .default_headers(bearer())
            .build()
            .expect("an HTTP client");
        let endpoint = format!("{}/acp", server.http());
        let answer = http
            .post(&endpoint)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#)
            .send()
            .await
            .expect("initialize is answered");
        assert!(answer.status().is_success(), "initialize: {}", answer.status());
        let connection = answer.headers()["acp-connection-id"]
            .to_str()
            .expect("a connection id")
            .to_string();
        BareHttp {
            http,
            endpoint,
            connection,
        }
    }

    async fn post(&self, session: Option<&str>, body: String) {
        let mut request = self
            .http
            .post(&self.endpoint)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("acp-connection-id", &self.connection);
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        let answer = request.body(body).send().await.expect("a POST is answered");
        assert!(answer.status().is_success(), "POST: {}", answer.status());
    }

    async fn stream(&self, session: Option<&str>) -> SseData {
        let mut request = self
            .http
            .get(&self.endpoint)
            .header("accept", "text/event-stream")
            .header("acp-connection-id", &self.connection);
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        let response = request.send().await.expect("a stream opens");
        assert!(response.status().is_success(), "GET: {}", response.status());
        SseData {
            response,
            buffer: Vec::new(),
            read: 0,
        }
    }

    async fn close(&self) {
        let _ = self
            .http
            .delete(&self.endpoint)
            .header("acp-connection-id", &self.connection)
            .send()
            .await;
    }
}

/// `/stream` from `server` read by [`BareHttp`]: no SDK, no JSON parsing of the updates.
async fn bare_stream_http(server: &Server) -> Duration {
    let bare = BareHttp::initialize(server).await;
    let mut connection = bare.stream(None).await;
    let cwd = serde_json::to_string(&server.cwd()).expect("a path");
    bare.post(
        None,
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"session/new","params":{{"cwd":{cwd},"mcpServers":[]}}}}"#),
    )
    .await;
    let session = loop {
        let data = connection.next().await.expect("the session/new answer");
        let message: serde_json::Value = serde_json::from_str(&data).expect("JSON");
        if let Some(session) = message["result"]["sessionId"].as_str() {
            break session.to_string();
        }
    };
    let mut updates = bare.stream(Some(&session)).await;
    let start = Instant::now();
    bare.post(
        Some(&session),
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"/stream {UPDATES} {SIZE}"}}]}}}}"#
        ),
    )
    .await;
    let mut counted = 0u64;
    loop {
        let data = updates.next().await.expect("the stream's updates and answer");
        if data.contains("\"stopReason\"") {
            break;
        }
        counted += 1;
    }
    let elapsed = start.elapsed();
    assert_eq!(counted, UPDATES, "bare HTTP: updates counted");
    bare.close().await;
    elapsed
}

/// `/stream` from `binary` over stdio read by a bare line counter.
async fn bare_stream_stdio(binary: &Path) -> Duration {
    let dirs = AgentDirs::new();
    let mut client = RawClient::new(AgentProcess::spawn(binary, &dirs, StderrMode::Capture));
    client.initialize(serde_json::json!(1)).await;
    let session = client.new_session(serde_json::json!(2), &dirs.project("p")).await;
    let start = Instant::now();
    client
        .send(
            &serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                "sessionId": session,
                "prompt": [{"type": "text", "text": format!("/stream {UPDATES} {SIZE}")}]
            }}),
        )
        .await;
    let mut counted = 0u64;
    loop {
        match client.next_line(TIMEOUT).await {
            Next::Line(line) if line.contains("\"stopReason\"") => break,
            Next::Line(_) => counted += 1,
            other => client.fail(format!("stream ended early: {other:?}")),
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(counted, UPDATES, "bare stdio: updates counted");
    client.close_stdin().await;
    assert!(client.expect_exit().await.success());
    elapsed
}

/// Idle SDK clients of one server, each `initialize`d over HTTP with its connection's SSE
/// stream open; they end (`DELETE`) when released.
struct IdleClients {
    release: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<SdkResult<()>>>,
}

impl IdleClients {
    /// Opens `count` of them on `server`, [`OPENING`] at a time, all sharing one HTTP client
    /// (one connection pool: a client's `POST`s reuse pooled connections; each SSE stream
    /// holds one of its own).
    async fn open(server: &Server, count: usize) -> IdleClients {
        let http = reqwest::Client::builder()
            .no_proxy()
            .default_headers(bearer())
            .build()
            .expect("an HTTP client");
        let endpoint = format!("{}/acp", server.http());
        let (release, released) = watch::channel(false);
        let (ready, mut readied) = mpsc::unbounded_channel();
        let opening = Arc::new(Semaphore::new(OPENING));
        let tasks =
            (0..count)
                .map(|_| {
                    let transport = HttpClient::from_http_client(&endpoint, http.clone()).expect("an HTTP client");
                    let (mut released, ready, opening) = (released.clone(), ready.clone(), opening.clone());
                    tokio::spawn(Client.v1().name("bench-idle").connect_with(
                        transport,
                        async move |cx| -> SdkResult<()> {
                            let permit = opening.acquire_owned().await.expect("the semaphore");
                            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                                .block_task()
                                .await?;
                            // Its answer (an error: no such method) comes on the connection's
                            // SSE stream, which the SDK client opens before it sends anything
                            // after `initialize`: once answered, the stream is open.
                            let ping = UntypedMessage::new("_bench/ping", serde_json::json!({}))?;
                            let _ = cx.send_request(ping).block_task().await;
                            drop(permit);
                            let _ = ready.send(());
                            let _ = released.wait_for(|released| *released).await;
                            Ok(())
                        },
                    ))
                })
                .collect();
        for n in 0..count {
            tokio::time::timeout(WAIT, readied.recv())
                .await
                .unwrap_or_else(|_| panic!("only {n} of {count} idle connections opened in time"))
                .expect("the idle clients");
        }
        IdleClients { release, tasks }
    }

    /// Releases them and waits until each has ended.
    async fn close(self) {
        let _ = self.release.send(true);
        for task in self.tasks {
            let outcome = tokio::time::timeout(WAIT, task)
                .await
                .expect("an idle client ended in time");
            if let Ok(Err(error)) = outcome {
                println!("  (an idle client ended with an error: {error})");
            }
        }
    }
}

/// What the idle connections cost one server, KiB.
struct IdleMemory {
    listening: u64,
    before: u64,
    with_idle: u64,
    peak: u64,
    after: u64,
}

impl IdleMemory {
    fn per_connection(&self) -> f64 {
        (self.with_idle as f64 - self.before as f64) / IDLE as f64
    }
}

/// A fresh `binary --listen`: its RSS listening, after one connection opened and closed,
/// with [`IDLE`] idle connections, and after they closed.
async fn idle_memory(binary: &Path) -> IdleMemory {
    let server = Server::start(binary);
    let (listening, _) = server.rss_kib();
    IdleClients::open(&server, 1).await.close().await;
    let (before, _) = server.rss_kib();
    let idle = IdleClients::open(&server, IDLE).await;
    let (with_idle, peak) = server.rss_kib();
    idle.close().await;
    let (after, _) = server.rss_kib();
    IdleMemory {
        listening,
        before,
        with_idle,
        peak,
        after,
    }
}

/// Min, median and max.
#[derive(Debug, Clone, Copy)]
struct Spread {
    min: f64,
    median: f64,
    max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        Spread {
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            median: median(values.to_vec()),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

fn rates(runs: &[Duration]) -> Vec<f64> {
    runs.iter().map(|d| UPDATES as f64 / d.as_secs_f64()).collect()
}

fn millis(runs: &[Duration]) -> Vec<f64> {
    runs.iter().map(|d| d.as_secs_f64() * 1000.0).collect()
}

/// Pair by pair, `a[i] / b[i]`.
fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| a / b).collect()
}

fn rate_row(label: &str, runs: &[Duration]) {
    let s = Spread::of(&rates(runs));
    println!("  {label:<52} {:>9.0} {:>9.0} {:>9.0}", s.min, s.median, s.max);
}

fn ms_row(label: &str, runs: &[Duration]) {
    let s = Spread::of(&millis(runs));
    println!("  {label:<52} {:>9.2} {:>9.2} {:>9.2}", s.min, s.median, s.max);
}

/// A ratio: of the medians, and pair by pair (min / median / max), against its target.
fn ratio_row(label: &str, a: &[f64], b: &[f64], target: Option<f64>) {
    let pairwise = Spread::of(&ratios(a, b));
    let of_medians = median(a.to_vec()) / median(b.to_vec());
    let verdict = match target {
        Some(target) if of_medians >= target && pairwise.median >= target => format!(" (target ≥ {target:.2}: met)"),
        Some(target) => format!(" (target ≥ {target:.2}: NOT met)"),
        None => String::new(),
    };
    println!(
        "  {label}: {of_medians:.2}× of the medians; pair by pair {:.2} / {:.2} / {:.2}{verdict}",
        pairwise.min, pairwise.median, pairwise.max
    );
}

fn memory_row(label: &str, m: &IdleMemory) {
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "  {label:<28} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>9.1}",
        mib(m.listening),
        mib(m.before),
        mib(m.with_idle),
        mib(m.peak),
        mib(m.after),
        m.per_connection()
    );
}

/// The date (UTC), the machine, and the load.
fn context() -> String {
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    format!("{date}; {cores} cores (nproc), {model}, {memory:.0} GiB")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    raise_fd_limit(4 * IDLE as u64 + 256);
    let ours = release_binary("echo-server");
    let theirs = release_binary("sdk-stream-agent");
    println!("\nStreamable HTTP benchmark, {}", context());
    println!("load average before: {}", loadavg());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let (ours_http, theirs_http) = (Server::start(&ours), Server::start(&theirs));
        throughput(&ours, &theirs, &ours_http, &theirs_http).await;
        set_up(&ours, &ours_http, &theirs_http).await;
        drop((ours_http, theirs_http));
        memory(&ours, &theirs).await;
    });
    println!("\nload average after: {}", loadavg());
}

/// 1 and 2: `/stream` over each transport, interleaved rounds after a warm-up.
async fn throughput(ours: &Path, theirs: &Path, ours_http: &Server, theirs_http: &Server) {
    stream_stdio(ours, "warm-up").await;
    stream_http(ours_http, "warm-up").await;
    stream_http(theirs_http, "warm-up").await;
    stream_stdio(theirs, "warm-up").await;
    our_stream_stdio(ours).await;
    our_stream_http(ours_http).await;
    bare_stream_stdio(ours).await;
    bare_stream_http(ours_http).await;
    bare_stream_http(theirs_http).await;
    let (mut a, mut b, mut c, mut d, mut e, mut f) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut g, mut h, mut i) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        g.push(bare_stream_stdio(ours).await);
        h.push(bare_stream_http(ours_http).await);
        i.push(bare_stream_http(theirs_http).await);
        a.push(stream_stdio(ours, "echo-server over stdio").await);
        b.push(stream_http(ours_http, "echo-server over HTTP").await);
        c.push(stream_http(theirs_http, "AcpHttpServer over HTTP").await);
        d.push(stream_stdio(theirs, "sdk-stream-agent over stdio").await);
        e.push(our_stream_stdio(ours).await);
        f.push(our_stream_http(ours_http).await);
    }
    println!(
        "\n1, 2. /stream {UPDATES} {SIZE}, updates/s, {ROUNDS} rounds after a warm-up; official Rust SDK client \
         (agent-client-protocol 5.0.0; over HTTP agent-client-protocol-http 5.0.0 HttpClient)"
    );
    println!("  {:<52} {:>9} {:>9} {:>9}", "", "min", "median", "max");
    rate_row("(a) echo-server (ours), stdio", &a);
    rate_row("(b) echo-server (ours), Streamable HTTP", &b);
    rate_row("(c) sdk-stream-agent in AcpHttpServer, Streamable HTTP", &c);
    rate_row("(d) sdk-stream-agent, stdio (reference)", &d);
    ratio_row("(b)/(a) HTTP / stdio, ours", &rates(&b), &rates(&a), Some(0.70));
    ratio_row("(b)/(c) ours / AcpHttpServer, HTTP", &rates(&b), &rates(&c), Some(2.0));
    ratio_row("(c)/(d) AcpHttpServer / its stdio", &rates(&c), &rates(&d), None);
    println!("  our client (agentacp::client::Client) reading echo-server:");
    rate_row("(e) over stdio", &e);
    rate_row("(f) over Streamable HTTP", &f);
    ratio_row("(f)/(e) HTTP / stdio, our client", &rates(&f), &rates(&e), Some(0.70));
    println!(
        "  a bare reqwest reader (no SDK, no JSON parsing of the updates; chunk by chunk: itself a limit, see docs/performance.md):"
    );
    rate_row("(g) echo-server, stdio (lines)", &g);
    rate_row("(h) echo-server, Streamable HTTP (SSE data lines)", &h);
    rate_row("(i) AcpHttpServer, Streamable HTTP (SSE data lines)", &i);
    ratio_row("(h)/(g) HTTP / stdio, ours", &rates(&h), &rates(&g), Some(0.70));
    ratio_row("(h)/(i) ours / AcpHttpServer, HTTP", &rates(&h), &rates(&i), Some(2.0));
}

/// 4: set-up, each transport in turn, [`SETUPS`] rounds after a warm-up.
async fn set_up(ours: &Path, ours_http: &Server, theirs_http: &Server) {
    let labels = [
        "echo-server, stdio (spawning the process)",
        "echo-server, Streamable HTTP",
        "echo-server, WebSocket (same endpoint)",
        "AcpHttpServer, Streamable HTTP",
        "AcpHttpServer, WebSocket",
        "our client: echo-server, stdio (spawning the process)",
        "our client: echo-server, Streamable HTTP",
        "our client: echo-server, WebSocket",
    ];
    let mut runs: Vec<Vec<Duration>> = vec![Vec::new(); labels.len()];
    for round in 0..=SETUPS {
        let took = [
            set_up_stdio(ours).await,
            set_up_remote(&ours_http.http(), ours_http.cwd(), labels[1]).await,
            set_up_remote(&ours_http.ws(), ours_http.cwd(), labels[2]).await,
            set_up_remote(&theirs_http.http(), theirs_http.cwd(), labels[3]).await,
            set_up_remote(&theirs_http.ws(), theirs_http.cwd(), labels[4]).await,
            our_set_up(ours, None, ours_http).await,
            our_set_up(ours, Some(&ours_http.http()), ours_http).await,
            our_set_up(ours, Some(&ours_http.ws()), ours_http).await,
        ];
        // Round 0 is the warm-up.
        if round > 0 {
            for (runs, took) in runs.iter_mut().zip(took) {
                runs.push(took);
            }
        }
    }
    println!("\n4. set-up: connect + initialize + session/new, ms, {SETUPS} rounds after a warm-up");
    println!("  {:<52} {:>9} {:>9} {:>9}", "", "min", "median", "max");
    for (label, runs) in labels.iter().zip(&runs) {
        ms_row(label, runs);
    }
    let failures = CLOSE_FAILURES.load(Ordering::Relaxed);
    if failures > 0 {
        println!(
            "  ({failures} official SDK clients failed while closing after their set-up, e.g. {})",
            CLOSE_FAILURE.get().map_or("", String::as_str)
        );
    }
}

/// 3: the idle connections' memory, each server a fresh process.
async fn memory(ours: &Path, theirs: &Path) {
    let ours_memory = idle_memory(ours).await;
    let theirs_memory = idle_memory(theirs).await;
    println!(
        "\n3. server RSS, MiB, {IDLE} idle connections (each initialized over HTTP, its SSE stream open); \
         per connection = (with − after warm-up) / {IDLE}"
    );
    println!(
        "  {:<28} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "", "listen", "warm", "idle", "peak", "closed", "KiB/conn"
    );
    memory_row("echo-server (ours)", &ours_memory);
    memory_row("AcpHttpServer (SDK agent)", &theirs_memory);
    println!(
        "  ours / AcpHttpServer per connection: {:.2}×",
        ours_memory.per_connection() / theirs_memory.per_connection()
    );
}
