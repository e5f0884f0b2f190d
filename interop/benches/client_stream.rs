//! Client streaming throughput (issue #5): `/stream 100000 64` — 100,000
//! `agent_message_chunk` updates of 64 bytes — from our `echo-server` (release build),
//! consumed by
//!
//! - (a) our client, `agentacp::client::Client` (`PromptStream::next` until `Stop`), and
//! - (b) the official Rust SDK client (`agent-client-protocol` 5.0.0, [`interop::sdk`]),
//!
//! and (c) the limit of the medium: the same notifications serialised with serde_json into an
//! OS pipe and parsed back line by line ([`interop::bench_support::serde_pipe_limit`]).
//! (a) is the whole ours × ours pipeline; it is reported as a share of (c).
//!
//! Each client runs in its own process (this binary, re-executed with `--client-child`), so
//! its peak RSS (`VmHWM` of `/proc/self/status`, read when the stream has ended) is its own;
//! a child that only starts the same tokio runtime gives the floor. Each client runs on a
//! multi-thread runtime with 2 workers (what `#[tokio::main]` builds on a 2-core machine, and
//! what `benches/stream.rs` uses) and on a current-thread runtime. The time is measured inside
//! the child, from sending `session/prompt` to its response. Every run checks that exactly
//! 100,000 text chunks of 64 bytes arrived, and the limit program's JSON is checked against a
//! line read from echo-server. One warm-up run of each, then 5 rounds of every client and (c),
//! interleaved; the figures are medians.
//!
//! Run with `cargo bench -p interop --bench client_stream`.

#![allow(clippy::print_stdout)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use agentacp::client::{AgentCommand, Client, ClientOptions};
use interop::bench_support::{StreamRun, chunk_notification, median, our_client_stream, sdk_stream, serde_pipe_limit};
use interop::raw::{Next, RawClient};
use interop::{AgentDirs, TIMEOUT, peak_rss_kib, release_binary};
use serde_json::{Value, json};

const UPDATES: usize = 100_000;
const SIZE: usize = 64;
const RUNS: usize = 5;
/// The argument that makes this binary run one client and print its figures.
const CHILD: &str = "--client-child";

/// (a) our client consumes the stream from `binary`, in fresh folders.
async fn ours(binary: &Path) -> StreamRun {
    let dirs = AgentDirs::new();
    let mut command = AgentCommand::new(binary);
    for (key, value) in dirs.env() {
        command = command.env(key, value);
    }
    let options = ClientOptions {
        prompt_idle_timeout: TIMEOUT,
        ..ClientOptions::default()
    }
    .with_workspace_root(&dirs.workspace_root);
    let client = Client::connect(command, options).await.expect("connect to echo-server");
    let elapsed = our_client_stream(&client, &dirs.project("p"), UPDATES, SIZE).await;
    let agent_peak_kib = client.pid().and_then(peak_rss_kib).unwrap_or(0);
    let status = client.close().await;
    assert!(
        status.is_some_and(|s| s.success()),
        "echo-server did not exit 0 on stdin EOF: {status:?}"
    );
    StreamRun {
        elapsed,
        updates: UPDATES as u64,
        agent_peak_kib,
    }
}

/// The tokio runtime a client child runs on: `multi` is what `#[tokio::main]` builds on this
/// 2-core machine (2 workers), `current` a single-threaded one.
fn runtime(flavor: &str) -> tokio::runtime::Runtime {
    match flavor {
        "multi" => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
        "current" => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        other => panic!("unknown runtime flavor {other:?}"),
    }
    .expect("a tokio runtime")
}

/// The child: runs one client (`ours`, `sdk`, or `baseline`: nothing but the runtime) on a
/// `flavor` runtime and prints its figures as one JSON line.
fn child(kind: &str, flavor: &str, binary: &Path) {
    let runtime = runtime(flavor);
    let run = runtime.block_on(async {
        match kind {
            "ours" => Some(ours(binary).await),
            "sdk" => Some(sdk_stream(binary, UPDATES, SIZE).await),
            "baseline" => None,
            other => panic!("unknown client {other:?}"),
        }
    });
    let client_peak_kib = peak_rss_kib(std::process::id()).expect("VmHWM of /proc/self/status");
    let line = match run {
        Some(run) => json!({
            "seconds": run.elapsed.as_secs_f64(),
            "updates": run.updates,
            "agent_peak_kib": run.agent_peak_kib,
            "client_peak_kib": client_peak_kib,
        }),
        None => json!({ "client_peak_kib": client_peak_kib }),
    };
    println!("{line}");
}

/// One child run's figures.
#[derive(Debug, Clone, Copy)]
struct Run {
    seconds: f64,
    client_peak_kib: u64,
    agent_peak_kib: u64,
}

/// Runs this binary as a `kind` client of `binary` on a `flavor` runtime; checks the count of
/// updates.
fn run_child(kind: &str, flavor: &str, binary: &Path) -> Run {
    let exe = std::env::current_exe().expect("this benchmark's path");
    let output = Command::new(exe)
        .args([CHILD, kind, flavor])
        .arg(binary)
        .output()
        .expect("run the client child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the {kind} client ({flavor}) failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let figures: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("the {kind} client printed no figures:\n{stdout}\n{stderr}"));
    let number = |key: &str| figures[key].as_u64().unwrap_or(0);
    if kind != "baseline" {
        assert_eq!(
            number("updates"),
            UPDATES as u64,
            "the {kind} client ({flavor}) received {} updates, not {UPDATES}",
            figures["updates"]
        );
    }
    Run {
        seconds: figures["seconds"].as_f64().unwrap_or(0.0),
        client_peak_kib: number("client_peak_kib"),
        agent_peak_kib: number("agent_peak_kib"),
    }
}

/// Reads one real update line of `/stream 1 SIZE` from `binary` and checks that the limit
/// program's line for chunk 0 is the same JSON; returns the session id and the line's length.
fn real_line(binary: &Path, runtime: &tokio::runtime::Runtime) -> (String, usize) {
    runtime.block_on(async {
        let dirs = AgentDirs::new();
        let mut client = RawClient::spawn(binary, &dirs);
        client.initialize(json!(1)).await;
        let session = client.new_session(json!(2), &dirs.project("p")).await;
        client
            .send(
                &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                    "sessionId": session,
                    "prompt": [{"type": "text", "text": format!("/stream 1 {SIZE}")}]
                }}),
            )
            .await;
        let line = match client.next_line(TIMEOUT).await {
            Next::Line(line) => line,
            other => client.fail(format!("no update: {other:?}")),
        };
        let ours: Value = serde_json::from_str(&line).expect("echo-server's update is JSON");
        let limit = serde_json::to_value(chunk_notification(&session, 0, SIZE)).expect("serialise");
        if ours != limit {
            client.fail(format!(
                "the limit program's JSON differs from echo-server's:\n  echo-server: {ours}\n  limit:       {limit}"
            ));
        }
        let limit_line = serde_json::to_string(&chunk_notification(&session, 0, SIZE)).expect("serialise");
        assert_eq!(limit_line.len(), line.len(), "line lengths: {limit_line}\n{line}");
        client.close_stdin().await;
        assert!(client.expect_exit().await.success());
        (session, line.len())
    })
}

/// Median, min and max updates/s, and median peak RSS (MiB) of the client and the agent.
struct Figures {
    rate: f64,
    min: f64,
    max: f64,
    client_mib: f64,
    agent_mib: f64,
}

fn figures(runs: &[Run]) -> Figures {
    let rates: Vec<f64> = runs.iter().map(|r| UPDATES as f64 / r.seconds).collect();
    Figures {
        min: rates.iter().copied().fold(f64::INFINITY, f64::min),
        max: rates.iter().copied().fold(0.0, f64::max),
        rate: median(rates),
        client_mib: median(runs.iter().map(|r| r.client_peak_kib as f64 / 1024.0).collect()),
        agent_mib: median(runs.iter().map(|r| r.agent_peak_kib as f64 / 1024.0).collect()),
    }
}

/// The median over the rounds of `runs[i]`'s rate over `base[i]`'s. Each round runs every
/// configuration back to back, so this is less exposed to the load changing between rounds
/// than the ratio of the medians.
fn per_round(runs: &[Run], base: &[Run]) -> f64 {
    median(runs.iter().zip(base).map(|(r, b)| b.seconds / r.seconds).collect())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, kind, flavor, binary] = args.as_slice()
        && flag == CHILD
    {
        child(kind, flavor, Path::new(binary));
        return;
    }
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let build = Instant::now();
    let echo = release_binary("echo-server");
    let build = build.elapsed();
    let total = Instant::now();
    let load_before = load_average();
    let (session, line_bytes) = real_line(&echo, &runtime("multi"));

    // (client, runtime flavor): the clients, each on both runtimes.
    let clients = [
        ("ours", "multi"),
        ("sdk", "multi"),
        ("ours", "current"),
        ("sdk", "current"),
    ];
    // Warm-up (page cache, lazy loading), not counted.
    for (kind, flavor) in clients {
        run_child(kind, flavor, &echo);
    }
    serde_pipe_limit(&session, UPDATES, SIZE);
    let baseline =
        ["multi", "current"].map(|flavor| run_child("baseline", flavor, &echo).client_peak_kib as f64 / 1024.0);
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); clients.len()];
    let mut limit = Vec::new();
    for _ in 0..RUNS {
        for ((kind, flavor), runs) in clients.iter().zip(&mut runs) {
            runs.push(run_child(kind, flavor, &echo));
        }
        let elapsed = serde_pipe_limit(&session, UPDATES, SIZE);
        limit.push(Run {
            seconds: elapsed.as_secs_f64(),
            client_peak_kib: 0,
            agent_peak_kib: 0,
        });
    }

    println!(
        "\nclient_stream: echo-server (release) `/stream {UPDATES} {SIZE}`: {UPDATES} agent_message_chunk \
         updates of {SIZE} bytes ({line_bytes}-byte lines); median of {RUNS} interleaved rounds after one warm-up"
    );
    println!(
        "{:<50} {:<15} {:>10} {:>15} {:>11} {:>10}",
        "what", "client runtime", "updates/s", "min-max", "client RSS", "agent RSS"
    );
    let row = |label: &str, flavor: &str, f: &Figures, rss: bool| {
        let (client, agent) = if rss {
            (format!("{:.1} MiB", f.client_mib), format!("{:.1} MiB", f.agent_mib))
        } else {
            ("n/a".to_string(), "-".to_string())
        };
        println!(
            "{label:<50} {flavor:<15} {:>10.0} {:>15} {client:>11} {agent:>10}",
            f.rate,
            format!("{:.0}-{:.0}", f.min, f.max)
        );
    };
    let flavor_name = |flavor: &str| {
        if flavor == "multi" {
            "multi-thread 2"
        } else {
            "current-thread"
        }
    };
    let all: Vec<Figures> = runs.iter().map(|r| figures(r)).collect();
    let c = figures(&limit);
    for ((kind, flavor), f) in clients.iter().zip(&all) {
        let label = if *kind == "ours" {
            "(a) ours: agentacp::client::Client <- echo-server"
        } else {
            "(b) official SDK client 5.0.0 <- echo-server"
        };
        row(label, flavor_name(flavor), f, true);
    }
    row("(c) limit: serde_json -> OS pipe -> serde_json", "-", &c, false);
    println!(
        "{:<50} {:<15} {:>10} {:>15} {:>11}",
        "    client child with only its runtime",
        "multi/current",
        "",
        "",
        format!("{:.1}/{:.1} MiB", baseline[0], baseline[1])
    );
    for (i, flavor) in ["multi", "current"].into_iter().enumerate() {
        let (a, b) = (&all[2 * i], &all[2 * i + 1]);
        let (a_runs, b_runs) = (&runs[2 * i], &runs[2 * i + 1]);
        println!(
            "{}: ours/SDK (a)/(b) {:.2}x updates/s (per round {:.2}x; target >= 2x), client RSS {:.2}x; \
             ours x ours (a)/(c) {:.0} % of the limit (per round {:.0} %; target >= 40 %)",
            flavor_name(flavor),
            a.rate / b.rate,
            per_round(a_runs, b_runs),
            a.client_mib / b.client_mib,
            100.0 * a.rate / c.rate,
            100.0 * per_round(a_runs, &limit),
        );
    }
    println!(
        "client RSS: VmHWM of the client's own process (this binary re-run as a child; the runtime-only \
         child above is the floor); the limit runs in the parent, so it has none"
    );
    println!(
        "load average before: {load_before}, after: {}; measuring took {:.1} s (building echo-server {:.1} s)",
        load_average(),
        total.elapsed().as_secs_f64(),
        build.as_secs_f64()
    );
}
