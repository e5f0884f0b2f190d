//! Streaming throughput: the official Rust SDK client (`agent-client-protocol` 5) consumes
//! `/stream 100000 64` — 100,000 `agent_message_chunk` updates of 64 bytes — from
//!
//! - (a) our `echo-server` (release build), and
//! - (b) `sdk-stream-agent`, the same behaviour written only with the official SDK (release),
//!
//! in the same run, interleaved; each figure is the median of 5 runs (after one warm-up run
//! each). The agent's peak RSS is `VmHWM` of `/proc/PID/status` (its high-water mark), read
//! after the stream, before its stdin is closed. Two reference figures follow: the same two agents
//! read by a bare line counter (no SDK, no JSON parsing: what the agent alone can emit), and
//! (c) the limit of the medium: a program that serialises the same 100,000 notifications with
//! serde_json into a pipe and parses them back.
//!
//! Run with `cargo bench -p interop --bench stream`.

#![allow(clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use interop::bench_support::{median, sdk_stream, serde_pipe_limit};
use interop::raw::{Next, RawClient};
use interop::{AgentDirs, AgentProcess, StderrMode, peak_rss_kib, release_binary};
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

/// The official SDK client against `binary`.
async fn sdk_run(binary: &Path) -> Run {
    let run = sdk_stream(binary, UPDATES, SIZE).await;
    assert_eq!(
        run.updates,
        UPDATES as u64,
        "{}: {} updates arrived before the response",
        binary.display(),
        run.updates
    );
    Run {
        elapsed: run.elapsed,
        peak_kib: run.agent_peak_kib,
    }
}

/// A bare line counter against `binary`: no SDK, no JSON parsing of the updates.
async fn raw_run(binary: &Path) -> Run {
    let dirs = AgentDirs::new();
    let mut client = RawClient::new(AgentProcess::spawn(binary, &dirs, StderrMode::Capture));
    client.initialize(json!(1)).await;
    // The SDK agent only takes requests once it has seen its initialize response go out.
    let session = client.new_session(json!(2), &dirs.project("p")).await;
    let pid = client.process.pid;
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
    let peak_kib = peak_rss_kib(pid).unwrap_or(0);
    assert_eq!(lines, UPDATES, "{}: updates counted", binary.display());
    client.close_stdin().await;
    assert!(client.expect_exit().await.success());
    Run { elapsed, peak_kib }
}

/// (c): serialise the notifications with serde_json into an OS pipe on one thread, read and
/// parse them back (into the official SDK's types) on another.
fn serde_pipe_run() -> Run {
    Run {
        elapsed: serde_pipe_limit("session-0", UPDATES, SIZE),
        peak_kib: peak_rss_kib(std::process::id()).unwrap_or(0),
    }
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
