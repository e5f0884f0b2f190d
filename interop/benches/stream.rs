//! Streaming throughput: the official Rust SDK client (`agent-client-protocol` 5) consumes
//! `/stream 100000 64` — 100,000 `agent_message_chunk` updates of 64 bytes — from
//!
//! - (a) our `echo-server` (release build), and
//! - (b) `sdk-stream-agent`, the same behaviour written only with the official SDK (release),
//!
//! in the same run, interleaved; each figure is the median of 5 runs (after one warm-up run
//! each). The agent's peak RSS is `VmHWM` of `/proc/PID/status`, polled while it streams and
//! read once more before its stdin is closed. Two reference figures follow: the same two agents
//! read by a bare line counter (no SDK, no JSON parsing: what the agent alone can emit), and
//! (c) the limit of the medium: a program that serialises the same 100,000 notifications with
//! serde_json into a pipe and parses them back.
//!
//! Run with `cargo bench -p interop --bench stream`.

#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use interop::raw::{Next, RawClient};
use interop::sdk::{Options, SdkClient};
use interop::{AgentDirs, AgentProcess, StderrMode, peak_rss_kib, release_binary, stream_chunk};
use serde::{Deserialize, Serialize};
use serde_json::json;

const UPDATES: usize = 100_000;
const SIZE: usize = 64;
const RUNS: usize = 5;

/// One run: how long the stream took and the agent's peak RSS (KiB).
#[derive(Debug, Clone, Copy)]
struct Run {
    elapsed: Duration,
    peak_kib: u64,
}

/// Polls the peak RSS of `pid` every 5 ms until dropped, keeping the maximum.
struct RssPoller {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssPoller {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, peak) = (stop.clone(), peak.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(kib) = peak_rss_kib(pid) {
                        peak.fetch_max(kib, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        Self {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// The maximum seen, including one last reading now.
    fn finish(mut self, pid: u32) -> u64 {
        if let Some(kib) = peak_rss_kib(pid) {
            self.peak.fetch_max(kib, Ordering::Relaxed);
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// The official SDK client against `binary`.
async fn sdk_run(binary: &Path) -> Run {
    let dirs = AgentDirs::new();
    let process = AgentProcess::spawn(binary, &dirs, StderrMode::Capture);
    let pid = process.pid;
    let client = SdkClient::connect(
        process,
        Options {
            transcript: false,
            record_updates: false,
        },
    )
    .await;
    client.initialize().await;
    let session = client.new_session(&dirs.project("p")).await;
    let poller = RssPoller::start(pid);
    let start = Instant::now();
    let response = client.prompt(&session, &format!("/stream {UPDATES} {SIZE}")).ok().await;
    let elapsed = start.elapsed();
    let peak_kib = poller.finish(pid);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let updates = client.update_count();
    assert_eq!(
        updates,
        UPDATES as u64,
        "{}: {updates} updates arrived before the response",
        binary.display()
    );
    let status = client.shutdown().await;
    assert!(status.success(), "{} exited with {status}", binary.display());
    Run { elapsed, peak_kib }
}

/// A bare line counter against `binary`: no SDK, no JSON parsing of the updates.
async fn raw_run(binary: &Path) -> Run {
    let dirs = AgentDirs::new();
    let mut client = RawClient::new(AgentProcess::spawn(binary, &dirs, StderrMode::Capture));
    client.initialize(json!(1)).await;
    // The SDK agent only takes requests once it has seen its initialize response go out.
    let session = client.new_session(json!(2), &dirs.project("p")).await;
    let pid = client.process.pid;
    let poller = RssPoller::start(pid);
    let start = Instant::now();
    client
        .send(
            &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                "sessionId": session,
                "prompt": [{"type": "text", "text": format!("/stream {UPDATES} {SIZE}")}]
            }}),
        )
        .await;
    let mut lines = 0usize;
    loop {
        match client.next_line(interop::TIMEOUT).await {
            Next::Line(line) if line.contains("\"stopReason\"") => break,
            Next::Line(_) => lines += 1,
            other => client.fail(format!("stream ended early: {other:?}")),
        }
    }
    let elapsed = start.elapsed();
    let peak_kib = poller.finish(pid);
    assert_eq!(lines, UPDATES, "{}: updates counted", binary.display());
    client.close_stdin().await;
    assert!(client.expect_exit().await.success());
    Run { elapsed, peak_kib }
}

#[derive(Serialize, Deserialize)]
struct Notification {
    jsonrpc: String,
    method: String,
    params: SessionNotification,
}

/// (c): serialise the notifications with serde_json into an OS pipe on one thread, read and
/// parse them back (into the official SDK's types) on another.
fn serde_pipe_run() -> Run {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    let start = Instant::now();
    let producer = std::thread::spawn(move || {
        let mut out = BufWriter::with_capacity(1 << 16, writer);
        for i in 0..UPDATES {
            let message = Notification {
                jsonrpc: "2.0".to_string(),
                method: "session/update".to_string(),
                params: SessionNotification::new(
                    "session-0",
                    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(
                        stream_chunk(i, SIZE),
                    )))),
                ),
            };
            serde_json::to_writer(&mut out, &message).expect("serialise");
            out.write_all(b"\n").expect("write");
        }
        out.flush().expect("flush");
    });
    let mut input = BufReader::with_capacity(1 << 16, reader);
    let mut line = String::new();
    let mut parsed = 0usize;
    while input.read_line(&mut line).expect("read") > 0 {
        let message: Notification = serde_json::from_str(&line).expect("parse");
        if let SessionUpdate::AgentMessageChunk(chunk) = &message.params.update
            && let ContentBlock::Text(text) = &chunk.content
        {
            assert_eq!(text.text.len(), SIZE);
            parsed += 1;
        }
        line.clear();
    }
    producer.join().expect("the producer thread");
    let elapsed = start.elapsed();
    assert_eq!(parsed, UPDATES);
    Run {
        elapsed,
        peak_kib: peak_rss_kib(std::process::id()).unwrap_or(0),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

struct Figures {
    rate: f64,
    seconds: f64,
    peak_mib: f64,
}

fn figures(runs: &[Run]) -> Figures {
    Figures {
        rate: median(runs.iter().map(|r| UPDATES as f64 / r.elapsed.as_secs_f64()).collect()),
        seconds: median(runs.iter().map(|r| r.elapsed.as_secs_f64()).collect()),
        peak_mib: median(runs.iter().map(|r| r.peak_kib as f64 / 1024.0).collect()),
    }
}

fn row(label: &str, f: &Figures) {
    println!("{label:<44} {:>12.0} {:>10.3} {:>12.1}", f.rate, f.seconds, f.peak_mib);
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let ours = release_binary("echo-server");
    let theirs = release_binary("sdk-stream-agent");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");

    let (mut sdk_ours, mut sdk_theirs, mut raw_ours, mut raw_theirs, mut pipe) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    runtime.block_on(async {
        // Warm-up (page cache, lazy loading), not counted.
        sdk_run(&ours).await;
        sdk_run(&theirs).await;
        for _ in 0..RUNS {
            sdk_ours.push(sdk_run(&ours).await);
            sdk_theirs.push(sdk_run(&theirs).await);
        }
        for _ in 0..RUNS {
            raw_ours.push(raw_run(&ours).await);
            raw_theirs.push(raw_run(&theirs).await);
        }
    });
    for _ in 0..RUNS {
        pipe.push(serde_pipe_run());
    }

    let (a, b) = (figures(&sdk_ours), figures(&sdk_theirs));
    let (ra, rb) = (figures(&raw_ours), figures(&raw_theirs));
    let c = figures(&pipe);
    println!(
        "\n/stream {UPDATES} {SIZE}: {UPDATES} agent_message_chunk updates of {SIZE} bytes; \
         median of {RUNS} runs"
    );
    println!(
        "{:<44} {:>12} {:>10} {:>12}",
        "", "updates/s", "seconds", "peak RSS MiB"
    );
    println!("official Rust SDK client (agent-client-protocol 5.0.0) reading:");
    row("  (a) echo-server (ours, release)", &a);
    row("  (b) sdk-stream-agent (official SDK, release)", &b);
    println!(
        "  ratio ours/theirs: {:.2}x updates/s, {:.2}x peak RSS",
        a.rate / b.rate,
        a.peak_mib / b.peak_mib
    );
    println!("bare line counter (no SDK, no parsing) reading:");
    row("  echo-server (ours)", &ra);
    row("  sdk-stream-agent", &rb);
    println!(
        "  ratio ours/theirs: {:.2}x updates/s, {:.2}x peak RSS",
        ra.rate / rb.rate,
        ra.peak_mib / rb.peak_mib
    );
    println!("limit:");
    println!(
        "{:<44} {:>12.0} {:>10.3} {:>12}",
        "  (c) serde_json → pipe → serde_json", c.rate, c.seconds, "-"
    );
}
