//! ACP v2 streaming throughput (issue #48): 100,000 `agent_message_chunk` updates of 64 bytes
//! (`/stream 100000 64`), consumed in one run, interleaved, from
//!
//! - (a) our `echo-server` (release) over protocol v1,
//! - (b) the same `echo-server` over protocol v2 (the runtime speaks v1 inside; the v2 agent
//!   face translates each outgoing frame),
//! - (c) `sdk-v2-stream-agent`, the same behaviour written only with the official Rust SDK's
//!   v2 agent (`agent-client-protocol` 5, `Agent.v2()`, release),
//!
//! each by two kinds of client:
//!
//! - a line client that parses every frame with serde_json (into a `serde_json::Value`) and
//!   checks every chunk: the same code for all three contestants, so it compares the servers;
//! - the official Rust SDK client: its v1 client (`Client.v1()`) for (a), its v2 client
//!   (`Client.v2()`) for (b) and (c).
//!
//! A turn is timed from sending `session/prompt` to its end (v1: the prompt's answer; v2: the
//! `idle` `state_update` with the stop reason). Both `echo-server`s run with
//! `AGENTACP_PROTOCOL_VERSIONS=1,2`: one binary, one configuration, the client picks the
//! version. One warm-up round, then the median of 5 interleaved rounds; ratios are given both
//! as the ratio of the medians and as the median of each round's own ratio. The agent's peak
//! RSS is `VmHWM` after the stream. The date, the machine and its load average are printed.
//! Last, where v2's extra time goes: the v2 agent face's rewrite of one chunk line and the
//! line client's parse of a chunk line in v1 and in v2, timed in this process, beside the
//! per-line gap between (b) and (a).
//!
//! Run with `cargo bench -p interop --bench v2`. Options:
//!
//! - `cargo bench -p interop --bench v2 -- rewrite`: only the in-process timing of the
//!   rewrite (seconds, no agents);
//! - `AGENTACP_BENCH_V2_BEFORE=<path of another echo-server build>`: that build runs too,
//!   over v1 and v2, interleaved with ours ((a0), (b0)): a before/after comparison at the
//!   same load.

#![allow(clippy::print_stdout)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v2::schema::{
    ContentBlock, Implementation, InitializeRequest, NewSessionRequest, PromptRequest, SessionUpdate, StateUpdate,
    StopReason, TextContent, UpdateSessionNotification,
};
use agent_client_protocol::v2::{ConnectionTo, InitializeOutcome};
use agent_client_protocol::{Agent, Client, Lines};
use interop::bench_support::{median, sdk_stream_with_env};
use interop::{AgentDirs, AgentProcess, StderrMode, TIMEOUT, peak_rss_kib, release_binary};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::oneshot;

const UPDATES: usize = 100_000;
const SIZE: usize = 64;
const RUNS: usize = 5;

/// One agent under test: a binary, the protocol version the client asks for, its environment.
struct Contestant {
    label: &'static str,
    binary: PathBuf,
    version: u16,
    env: Vec<(&'static str, OsString)>,
}

impl Contestant {
    fn spawn(&self, dirs: &AgentDirs) -> AgentProcess {
        let mut env = dirs.env();
        env.extend(self.env.iter().cloned());
        AgentProcess::spawn_with_env(&self.binary, &env, StderrMode::Capture)
    }
}

/// What one run measured.
#[derive(Debug, Clone, Copy)]
struct Run {
    elapsed: Duration,
    peak_kib: u64,
}

impl Run {
    fn rate(&self) -> f64 {
        UPDATES as f64 / self.elapsed.as_secs_f64()
    }
}

/// The line client's side of one agent's stdio: it writes lines and reads frames, each
/// parsed with serde_json.
struct LineClient {
    process: AgentProcess,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl LineClient {
    fn new(mut process: AgentProcess) -> Self {
        let (stdin, stdout) = process.take_stdio();
        LineClient {
            process,
            stdin,
            stdout: BufReader::with_capacity(1 << 16, stdout),
            line: Vec::with_capacity(512),
        }
    }

    #[track_caller]
    fn fail(&self, message: impl std::fmt::Display) -> ! {
        panic!(
            "{}: {message}\nstderr:\n{}",
            self.process.name,
            interop::shorten(&self.process.stderr_text(), 4000)
        )
    }

    async fn send(&mut self, message: Value) {
        let mut bytes = message.to_string().into_bytes();
        bytes.push(b'\n');
        let write = async {
            self.stdin.write_all(&bytes).await?;
            self.stdin.flush().await
        };
        match tokio::time::timeout(TIMEOUT, write).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.fail(format!("writing to its stdin failed: {e}")),
            Err(_) => self.fail("it stopped reading its stdin"),
        }
    }

    /// The next frame, parsed.
    async fn next(&mut self) -> Value {
        self.line.clear();
        match tokio::time::timeout(TIMEOUT, self.stdout.read_until(b'\n', &mut self.line)).await {
            Ok(Ok(0)) => self.fail("it closed its stdout"),
            Ok(Ok(_)) => match serde_json::from_slice(&self.line) {
                Ok(value) => value,
                Err(e) => self.fail(format!("it wrote a line that is not JSON ({e})")),
            },
            Ok(Err(e)) => self.fail(format!("reading its stdout failed: {e}")),
            Err(_) => self.fail(format!("nothing arrived within {TIMEOUT:?}")),
        }
    }

    /// Sends request `id` and returns its result (frames before it are skipped).
    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let mut frame = self.next().await;
            if frame["id"] == id && frame.get("method").is_none() {
                match frame.get_mut("result") {
                    Some(result) => return result.take(),
                    None => self.fail(format!("{method} failed: {frame}")),
                }
            }
        }
    }
}

/// Whether `update` is a text chunk of the agent's of [`SIZE`] bytes.
fn is_chunk(update: &Value) -> bool {
    update["sessionUpdate"] == "agent_message_chunk" && update["content"]["text"].as_str().map(str::len) == Some(SIZE)
}

/// The line client consumes the stream of `contestant` in its protocol version.
async fn line_run(contestant: &Contestant) -> Run {
    let dirs = AgentDirs::new();
    let mut client = LineClient::new(contestant.spawn(&dirs));
    let pid = client.process.pid;
    let (initialize, new) = match contestant.version {
        1 => (
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "bench-v2", "version": "1"}}),
            json!({"cwd": dirs.project("p"), "mcpServers": []}),
        ),
        _ => (
            json!({"protocolVersion": 2, "info": {"name": "bench-v2", "version": "1"}, "capabilities": {}}),
            json!({"cwd": dirs.project("p")}),
        ),
    };
    let answer = client.request(1, "initialize", initialize).await;
    if answer["protocolVersion"] != contestant.version {
        client.fail(format!("initialize chose another version: {answer}"));
    }
    let session = client.request(2, "session/new", new).await["sessionId"].clone();
    let start = Instant::now();
    let text = format!("/stream {UPDATES} {SIZE}");
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": text}]}}),
        )
        .await;
    let mut counted = 0usize;
    let stop = loop {
        let frame = client.next().await;
        let update = &frame["params"]["update"];
        if frame["method"] == "session/update" {
            if is_chunk(update) {
                counted += 1;
            } else if update["sessionUpdate"] == "state_update"
                && update["state"] == "idle"
                && update.get("stopReason").is_some()
            {
                break update["stopReason"].clone();
            }
        } else if frame["id"] == 3 && contestant.version == 1 {
            break frame["result"]["stopReason"].clone();
        }
    };
    let elapsed = start.elapsed();
    let peak_kib = peak_rss_kib(pid).unwrap_or(0);
    if stop != "end_turn" || counted != UPDATES {
        client.fail(format!("the turn ended {stop} after {counted} of {UPDATES} chunks"));
    }
    drop(client.stdin);
    let status = client.process.wait_exit(TIMEOUT).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "{} did not exit cleanly on EOF: {status:?}",
        contestant.label
    );
    Run { elapsed, peak_kib }
}

/// An agent's stdio as the official SDK's line transport.
fn sdk_lines(
    stdin: ChildStdin,
    stdout: ChildStdout,
) -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
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
            Err(e) => Some((Err(e), reader)),
        }
    });
    let outgoing = futures::sink::unfold(stdin, |mut stdin, line: String| async move {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        stdin.write_all(&bytes).await?;
        stdin.flush().await?;
        Ok::<_, std::io::Error>(stdin)
    });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

fn sdk_error(message: impl Into<String>) -> agent_client_protocol::Error {
    agent_client_protocol::Error::internal_error().data(message.into())
}

/// One v2 turn by the SDK's v2 client on an open connection to agent `pid`: the time from
/// the prompt to the `idle` state update, its stop reason, and the agent's peak RSS then.
async fn sdk_v2_turn(
    cx: ConnectionTo<Agent>,
    (cwd, pid): (PathBuf, u32),
    idle: oneshot::Receiver<StopReason>,
) -> agent_client_protocol::Result<(Run, StopReason)> {
    let initialize = InitializeRequest::new(ProtocolVersion::V2, Implementation::new("bench-v2", "1"));
    let outcome = tokio::time::timeout(TIMEOUT, cx.send_initialize(initialize).block_task())
        .await
        .map_err(|_| sdk_error("initialize was not answered in time"))??;
    if !matches!(outcome, InitializeOutcome::Initialized(_)) {
        return Err(sdk_error(format!("initialize ended {outcome:?}")));
    }
    let session = tokio::time::timeout(TIMEOUT, cx.send_request(NewSessionRequest::new(cwd)).block_task())
        .await
        .map_err(|_| sdk_error("session/new was not answered in time"))??
        .session_id;
    let text = format!("/stream {UPDATES} {SIZE}");
    let start = Instant::now();
    let prompt = PromptRequest::new(session, vec![ContentBlock::Text(TextContent::new(text))]);
    tokio::time::timeout(TIMEOUT, cx.send_request(prompt).block_task())
        .await
        .map_err(|_| sdk_error("session/prompt was not acknowledged in time"))??;
    let stop = tokio::time::timeout(TIMEOUT, idle)
        .await
        .map_err(|_| sdk_error("no idle state update in time"))?
        .map_err(|_| sdk_error("the connection ended before the idle state update"))?;
    let elapsed = start.elapsed();
    let peak_kib = peak_rss_kib(pid).unwrap_or(0);
    Ok((Run { elapsed, peak_kib }, stop))
}

/// The official SDK's v2 client consumes the stream of `contestant` (a v2 agent).
async fn sdk_v2_run(contestant: &Contestant) -> Run {
    let dirs = AgentDirs::new();
    let mut process = contestant.spawn(&dirs);
    let pid = process.pid;
    let (stdin, stdout) = process.take_stdio();
    let counted = Arc::new(AtomicU64::new(0));
    let (idle_tx, idle_rx) = oneshot::channel();
    let idle_tx = Mutex::new(Some(idle_tx));
    let on_update = counted.clone();
    let outcome = Client
        .v2()
        .name("bench-v2")
        .on_receive_notification(
            async move |notification: UpdateSessionNotification, _cx: ConnectionTo<Agent>| {
                match notification.update {
                    SessionUpdate::AgentMessageChunk(chunk)
                        if matches!(&chunk.content, ContentBlock::Text(text) if text.text.len() == SIZE) =>
                    {
                        on_update.fetch_add(1, Ordering::Relaxed);
                    }
                    SessionUpdate::StateUpdate(StateUpdate::Idle(idle)) => {
                        if let Some(stop) = idle.stop_reason
                            && let Some(tx) = idle_tx.lock().expect("idle lock").take()
                        {
                            let _ = tx.send(stop);
                        }
                    }
                    _ => {}
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(sdk_lines(stdin, stdout), async |cx: ConnectionTo<Agent>| {
            sdk_v2_turn(cx, (dirs.project("p"), pid), idle_rx).await
        })
        .await;
    let (run, stop) = outcome.unwrap_or_else(|e| {
        panic!(
            "{}: the SDK v2 client failed: {e:?}\nstderr:\n{}",
            contestant.label,
            interop::shorten(&process.stderr_text(), 4000)
        )
    });
    let counted = counted.load(Ordering::Relaxed) as usize;
    assert!(
        stop == StopReason::EndTurn && counted == UPDATES,
        "{}: the turn ended {stop:?} after {counted} of {UPDATES} chunks",
        contestant.label
    );
    // The connection is gone, so is the agent's stdin.
    let status = process.wait_exit(TIMEOUT).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "{} did not exit cleanly on EOF: {status:?}",
        contestant.label
    );
    run
}

/// The official SDK client in `contestant`'s version: v1's for v1, v2's for v2.
async fn sdk_run(contestant: &Contestant) -> Run {
    if contestant.version == 2 {
        return sdk_v2_run(contestant).await;
    }
    let run = sdk_stream_with_env(&contestant.binary, &contestant.env, UPDATES, SIZE).await;
    assert_eq!(run.updates, UPDATES as u64, "{}: updates counted", contestant.label);
    Run {
        elapsed: run.elapsed,
        peak_kib: run.agent_peak_kib,
    }
}

/// The figures of one contestant read by one client: medians of the runs.
fn row(label: &str, runs: &[Run]) {
    let rate = median(runs.iter().map(Run::rate).collect());
    let seconds = median(runs.iter().map(|r| r.elapsed.as_secs_f64()).collect());
    let peak = median(runs.iter().map(|r| r.peak_kib as f64 / 1024.0).collect());
    println!("  {label:<46} {rate:>12.0} {seconds:>9.3} {peak:>13.1}");
}

/// `top / bottom`: the ratio of the medians, and the median of each round's own ratio.
fn ratio(name: &str, top: &[Run], bottom: &[Run], target: &str) {
    let of_medians = median(top.iter().map(Run::rate).collect()) / median(bottom.iter().map(Run::rate).collect());
    let per_round = median(top.iter().zip(bottom).map(|(t, b)| t.rate() / b.rate()).collect());
    println!("  {name:<46} {of_medians:>6.3}x (per round {per_round:.3}x)   target {target}");
}

/// Where the v2 turn's extra time goes, in this process: per chunk line as the runtime writes
/// it (v1), the v2 agent face's rewrite of it (`AgentFace::rewrite`, what `Outbox::send` does
/// on a v2 connection before the line is queued), and serde_json's parse into a `Value` (what
/// the line client does with each frame) of the line in v1 and as rewritten for v2 (one field
/// more: the client's share of the gap). Nanoseconds per line, the median of [`RUNS`] passes
/// over [`UPDATES`] lines.
fn translation_alone() -> Translation {
    use agentacp::dialect::v2::AgentFace;
    use agentacp::jsonrpc::outbox::Rewrite;
    let session = "sess_3a42ddb6582ff61a485d195e76c4c617";
    let line = |i: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{}"}}}}}}}}"#,
            interop::stream_chunk(i, SIZE)
        )
        .into_bytes()
    };
    let per_line = |elapsed: Duration| elapsed.as_nanos() as f64 / UPDATES as f64;
    let parse = |lines: &[Vec<u8>]| {
        let start = Instant::now();
        for line in lines {
            let value: Value = serde_json::from_slice(line).expect("a chunk line");
            assert!(is_chunk(&value["params"]["update"]));
        }
        per_line(start.elapsed())
    };
    let (mut rewrite, mut parse_v1, mut parse_v2) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let lines: Vec<Vec<u8>> = (0..UPDATES).map(|i| [line(i), b"\n".to_vec()].concat()).collect();
        let face = AgentFace::new();
        let mut out = Vec::with_capacity(4);
        let start = Instant::now();
        for line in lines {
            face.rewrite(line, &mut out);
            assert_eq!(out.len(), 1, "one chunk, one line");
            out.clear();
        }
        rewrite.push(per_line(start.elapsed()));
        let lines: Vec<Vec<u8>> = (0..UPDATES).map(line).collect();
        parse_v1.push(parse(&lines));
        let face = AgentFace::new();
        let mut v2_lines = Vec::with_capacity(UPDATES);
        for line in lines {
            face.rewrite([line, b"\n".to_vec()].concat(), &mut v2_lines);
        }
        parse_v2.push(parse(&v2_lines));
    }
    Translation {
        rewrite: median(rewrite),
        parse_v1: median(parse_v1),
        parse_v2: median(parse_v2),
    }
}

/// What [`translation_alone`] measured: nanoseconds per chunk line.
struct Translation {
    rewrite: f64,
    parse_v1: f64,
    parse_v2: f64,
}

/// A command's first line of output, or `?`.
fn first_line(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.lines().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The date, the machine and the load average, as performance.md reports them.
fn print_setting(when: &str) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|line| {
                line.strip_prefix("model name")
                    .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "?".into());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .next()
                .map(|line| line.split_whitespace().nth(1).unwrap_or("?").to_string())
        })
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or_else(|| "?".into(), |kib| format!("{:.0} GiB", kib / 1024.0 / 1024.0));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{when}: {} | {cores} cores, {cpu}, {memory} | load average {}",
        first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
}

/// Prints the in-process timing of the rewrite (see [`translation_alone`]); `gap`: the
/// per-line gap between (b) and (a) measured by the line client, when the agents ran.
fn print_translation(gap: Option<f64>) {
    let Translation {
        rewrite,
        parse_v1,
        parse_v2,
    } = translation_alone();
    println!("where v2's time goes, per chunk line (ns):");
    if let Some(gap) = gap {
        println!("  {:<46} {gap:>12.0}", "(b) - (a) by the line client");
    }
    println!(
        "  {:<46} {rewrite:>12.0}",
        "AgentFace::rewrite of a chunk line, in process"
    );
    println!("  {:<46} {parse_v1:>12.0}", "serde_json parse of a v1 chunk line");
    println!("  {:<46} {parse_v2:>12.0}", "serde_json parse of its v2 line");
    println!("  {:<46} {:>12.0}", "  the v2 line's extra parse", parse_v2 - parse_v1);
}

/// The contestants: (a), (b), (c), then (a0), (b0) when another echo-server build is given.
fn contestants(before: Option<PathBuf>) -> Vec<Contestant> {
    let both = || vec![("AGENTACP_PROTOCOL_VERSIONS", OsString::from("1,2"))];
    let echo = |label, binary: &PathBuf, version| Contestant {
        label,
        binary: binary.clone(),
        version,
        env: both(),
    };
    let ours = release_binary("echo-server");
    let mut contestants = vec![
        echo("(a) echo-server, v1", &ours, 1),
        echo("(b) echo-server, v2", &ours, 2),
        Contestant {
            label: "(c) sdk-v2-stream-agent (official SDK, v2)",
            binary: release_binary("sdk-v2-stream-agent"),
            version: 2,
            env: Vec::new(),
        },
    ];
    if let Some(before) = before {
        contestants.push(echo("(a0) echo-server before, v1", &before, 1));
        contestants.push(echo("(b0) echo-server before, v2", &before, 2));
    }
    contestants
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument `rewrite` times the rewrite alone,
    // any other is accepted and ignored.
    if std::env::args().skip(1).any(|arg| arg == "rewrite") {
        print_setting("start");
        return print_translation(None);
    }
    let before = std::env::var_os("AGENTACP_BENCH_V2_BEFORE").map(PathBuf::from);
    let contestants = contestants(before);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    print_setting("start");
    // lines[i] and sdk[i]: the runs of contestant i.
    let mut lines: Vec<Vec<Run>> = contestants.iter().map(|_| Vec::new()).collect();
    let mut sdk = lines.clone();
    runtime.block_on(async {
        for round in 0..=RUNS {
            for (i, contestant) in contestants.iter().enumerate() {
                let (by_line, by_sdk) = (line_run(contestant).await, sdk_run(contestant).await);
                // Round 0 warms up (page cache, lazy loading) and is not counted.
                if round > 0 {
                    lines[i].push(by_line);
                    sdk[i].push(by_sdk);
                }
            }
        }
    });
    print_setting("end");

    println!(
        "\n/stream {UPDATES} {SIZE}: {UPDATES} agent_message_chunk updates of {SIZE} bytes; \
         median of {RUNS} interleaved rounds after a warm-up"
    );
    println!(
        "  {:<46} {:>12} {:>9} {:>13}",
        "", "updates/s", "seconds", "agent peak MiB"
    );
    for (title, runs) in [
        (
            "line client, serde_json parse of every frame (the same client for all):",
            &lines,
        ),
        (
            "official Rust SDK client (agent-client-protocol 5.0.0; v1 client for (a), v2 for (b), (c)):",
            &sdk,
        ),
    ] {
        println!("{title}");
        for (contestant, runs) in contestants.iter().zip(runs.iter()) {
            row(contestant.label, runs);
        }
        ratio("v2 / v1, ours: (b) / (a)", &runs[1], &runs[0], ">= 0.90x");
        ratio("ours / SDK, v2: (b) / (c)", &runs[1], &runs[2], ">= 2x");
        if runs.len() == 5 {
            ratio("v2 / v1, before: (b0) / (a0)", &runs[4], &runs[3], "-");
            ratio("v2, ours / before: (b) / (b0)", &runs[1], &runs[4], "-");
        }
    }
    let gap =
        1e9 / median(lines[1].iter().map(Run::rate).collect()) - 1e9 / median(lines[0].iter().map(Run::rate).collect());
    print_translation(Some(gap));
}
