//! Remote ACP (issue #17): our `echo-server` (release build) over WebSocket on loopback
//! against the same server over stdio, in the same run, read by the same kind of client — a
//! bare counter that does not parse the updates (over stdio it counts lines, over WebSocket
//! text messages; tokio-tungstenite is the WebSocket client):
//!
//! - throughput: `/stream 100000 64`, median of 5 runs each (after a warm-up), interleaved;
//!   target: WebSocket ≥ 70 % of stdio;
//! - set-up: connect (TCP + upgrade with the bearer token) → `initialize` answered →
//!   `session/new` answered, median of 50 connections;
//! - memory: the server's RSS (`VmRSS`) with 100 idle connections, each initialized with a
//!   session open, and its peak (`VmHWM`); target: ≤ 50 MiB;
//! - bursts: 1,000 upgrades at once (the limit is 256: the rest are answered `503`), three
//!   times, each burst closed before the next; the server's RSS after each (flat memory: the
//!   second and third bursts should leave it where the first did).
//!
//! Run with `cargo bench -p interop --bench websocket`.

#![allow(clippy::print_stdout)]

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use interop::bench_support::{median, raise_fd_limit};
use interop::raw::{Next, RawClient};
use interop::{AgentDirs, AgentProcess, StderrMode, release_binary};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const UPDATES: usize = 100_000;
const SIZE: usize = 64;
const RUNS: usize = 5;
const SETUPS: usize = 50;
const IDLE: usize = 100;
const BURST: usize = 1_000;
const BURSTS: usize = 5;
const TOKEN: &str = "bench-token-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(60);

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// `echo-server --listen 127.0.0.1:PORT` with a token; killed on drop.
struct Listening {
    child: tokio::process::Child,
    url: String,
    _dirs: AgentDirs,
}

impl Listening {
    async fn start(binary: &Path) -> Listening {
        let dirs = AgentDirs::new();
        // A free port: bound, read, released; the server takes it next.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut env: Vec<(&str, OsString)> = dirs.env();
        env.push(("AGENTACP_TOKEN", TOKEN.into()));
        let child = tokio::process::Command::new(binary)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("echo-server starts");
        let url = format!("ws://127.0.0.1:{port}/acp");
        // Ready when it accepts a connection (bounded).
        let deadline = Instant::now() + WAIT;
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(Instant::now() < deadline, "echo-server did not listen on {port}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Listening {
            child,
            url,
            _dirs: dirs,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    async fn connect(&self) -> Ws {
        let mut request = self.url.as_str().into_client_request().unwrap();
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
            .await
            .expect("connected in time")
            .expect("the upgrade is accepted");
        ws
    }

    fn cwd(&self) -> String {
        self._dirs.project("p").display().to_string()
    }
}

async fn send(ws: &mut Ws, message: Value) {
    ws.send(Message::text(message.to_string())).await.expect("sent");
}

/// The next text message.
async fn next_text(ws: &mut Ws) -> String {
    loop {
        match tokio::time::timeout(WAIT, ws.next()).await.expect("in time") {
            Some(Ok(Message::Text(text))) => return text.to_string(),
            Some(Ok(_)) => continue,
            other => panic!("the connection ended: {other:?}"),
        }
    }
}

/// initialize, then session/new; the session id.
async fn open_session(ws: &mut Ws, cwd: &str) -> String {
    send(
        ws,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
    )
    .await;
    next_text(ws).await;
    send(
        ws,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}),
    )
    .await;
    let answer: Value = serde_json::from_str(&next_text(ws).await).unwrap();
    answer["result"]["sessionId"].as_str().expect("a session").to_string()
}

fn stream_prompt(session: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
        "sessionId": session,
        "prompt": [{"type": "text", "text": format!("/stream {UPDATES} {SIZE}")}]
    }})
}

/// The stream over WebSocket: seconds from the prompt to its answer.
async fn websocket_run(server: &Listening) -> Duration {
    let mut ws = server.connect().await;
    let session = open_session(&mut ws, &server.cwd()).await;
    let start = Instant::now();
    send(&mut ws, stream_prompt(&session)).await;
    let mut updates = 0usize;
    loop {
        let text = next_text(&mut ws).await;
        if text.contains("\"stopReason\"") {
            break;
        }
        updates += 1;
    }
    let elapsed = start.elapsed();
    assert_eq!(updates, UPDATES, "updates counted over WebSocket");
    let _ = ws.close(None).await;
    elapsed
}

/// The stream over stdio, read the same way.
async fn stdio_run(binary: &Path) -> Duration {
    let dirs = AgentDirs::new();
    let mut client = RawClient::new(AgentProcess::spawn(binary, &dirs, StderrMode::Capture));
    client.initialize(json!(1)).await;
    let session = client.new_session(json!(2), &dirs.project("p")).await;
    let start = Instant::now();
    client.send(&stream_prompt(&session)).await;
    let mut updates = 0usize;
    loop {
        match client.next_line(interop::TIMEOUT).await {
            Next::Line(line) if line.contains("\"stopReason\"") => break,
            Next::Line(_) => updates += 1,
            other => client.fail(format!("stream ended early: {other:?}")),
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(updates, UPDATES, "updates counted over stdio");
    client.close_stdin().await;
    assert!(client.expect_exit().await.success());
    elapsed
}

/// `VmRSS` and `VmHWM` of `pid`, in MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let binary = release_binary("echo-server");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let server = Listening::start(&binary).await;
        // Warm-up, not counted.
        websocket_run(&server).await;
        stdio_run(&binary).await;
        let (mut over_ws, mut over_stdio) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            over_ws.push(websocket_run(&server).await.as_secs_f64());
            over_stdio.push(stdio_run(&binary).await.as_secs_f64());
        }
        let rate = |seconds: &[f64]| median(seconds.iter().map(|s| UPDATES as f64 / s).collect());
        let (ws_rate, stdio_rate) = (rate(&over_ws), rate(&over_stdio));

        let mut setups = Vec::new();
        for _ in 0..SETUPS {
            let start = Instant::now();
            let mut ws = server.connect().await;
            open_session(&mut ws, &server.cwd()).await;
            setups.push(start.elapsed().as_secs_f64() * 1000.0);
            let _ = ws.close(None).await;
        }
        drop(server);

        // A fresh server for the memory figure: 100 idle connections, each with a session.
        let server = Listening::start(&binary).await;
        let (before, _) = rss_mib(server.pid());
        let mut idle = Vec::new();
        for _ in 0..IDLE {
            let mut ws = server.connect().await;
            open_session(&mut ws, &server.cwd()).await;
            idle.push(ws);
        }
        let (with_idle, peak) = rss_mib(server.pid());
        drop(idle);

        // Bursts: each upgrade is served or refused 503; all are closed before the next burst.
        raise_fd_limit(2 * BURST as u64 + 256);
        let mut after_bursts = Vec::new();
        let (mut served, mut refused) = (0, 0);
        for _ in 0..BURSTS {
            let attempts: Vec<_> = (0..BURST)
                .map(|_| {
                    let mut request = server.url.as_str().into_client_request().unwrap();
                    request
                        .headers_mut()
                        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
                    tokio::spawn(async move { tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request)).await })
                })
                .collect();
            let mut open = Vec::new();
            for attempt in attempts {
                match attempt.await.unwrap().expect("every upgrade is answered in time") {
                    Ok((ws, _)) => {
                        served += 1;
                        open.push(ws);
                    }
                    Err(error) if error.to_string().contains("503") => refused += 1,
                    Err(error) => panic!("an upgrade failed without a clear answer: {error}"),
                }
            }
            for mut ws in open {
                let _ = ws.close(None).await;
            }
            // Served again once they are gone: the server is up and has let them go.
            let mut ws = server.connect().await;
            open_session(&mut ws, &server.cwd()).await;
            let _ = ws.close(None).await;
            after_bursts.push(rss_mib(server.pid()).0);
        }
        let (_, burst_peak) = rss_mib(server.pid());

        println!("\necho-server (release), /stream {UPDATES} {SIZE}, median of {RUNS} runs; bare counting clients");
        println!("{:<36} {:>12} {:>10}", "", "updates/s", "seconds");
        println!("{:<36} {:>12.0} {:>10.3}", "  stdio", stdio_rate, median(over_stdio.clone()));
        println!("{:<36} {:>12.0} {:>10.3}", "  WebSocket (loopback, ws://)", ws_rate, median(over_ws.clone()));
        println!("  WebSocket / stdio: {:.0} % (target ≥ 70 %)", ws_rate / stdio_rate * 100.0);
        println!(
            "connection set-up (connect + upgrade → initialize → session/new), median of {SETUPS}: {:.2} ms",
            median(setups)
        );
        println!(
            "server RSS: {before:.1} MiB listening, {with_idle:.1} MiB with {IDLE} idle connections (peak {peak:.1} MiB; target ≤ 50 MiB)"
        );
        println!(
            "bursts of {BURST} upgrades at once, {BURSTS} times: {served} served, {refused} refused 503; server RSS after each: {} MiB (peak {burst_peak:.1} MiB)",
            after_bursts.iter().map(|mib| format!("{mib:.1}")).collect::<Vec<_>>().join(", ")
        );
    });
}
