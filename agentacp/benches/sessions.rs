//! Issue #16: `session/list` over 10,000 stored sessions answers its first page in under
//! 50 ms; `session/resume` of a session with 10,000 history entries answers in under 100 ms.
//!
//! `cargo bench -p agentacp --bench sessions` fills a [`FileStore`] in a temporary folder
//! through the store's own API (`create`, `append`, `flush`, as the runtime writes sessions):
//! 10,000 sessions of two updates each, one of which (the oldest) has 10,000 history entries.
//! Then it serves the runtime's test operator that declares `session/list` and `resume`
//! (`tests/operators/test-sessions`, a governance-aware server, so `session/load` too) over
//! the in-process pipe the runtime tests use, and times each request from its line being
//! written to its answer being read:
//!
//! - `session/list`, first page (50 of 10,000), newest first;
//! - `session/resume` of the 10,000-entry session (no replay);
//! - `session/load` of the same session, for comparison (it replays all 10,000 entries).
//!
//! *Cold* is the first such request after the store is opened (a new `FileStore` instance
//! and a new connection each round; the OS page cache is not dropped, so the files are warm
//! in the kernel); *warm* is the same request again on that connection (for resume, after
//! `session/close`). Median and max of [`ROUNDS`] rounds.

#![allow(clippy::print_stdout, reason = "a benchmark reports its figures on stdout")]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentacp::prelude::*;
use agentacp::server::{FileStore, SessionStore};
use serde_json::Value;

#[path = "../tests/common/mod.rs"]
mod common;

use common::{Pipe, WAIT};

/// The runtime tests' operator that declares every optional session method.
#[acp_operator(manifest = "tests/operators/test-sessions/ACP.md")]
struct Archivist;

ok_server!(ArchivistServer for Archivist, GovernanceAware);

const SESSIONS: usize = 10_000;
const HISTORY: usize = 10_000;
const ROUNDS: usize = 11;
const LIST_TARGET: Duration = Duration::from_millis(50);
const RESUME_TARGET: Duration = Duration::from_millis(100);

/// A session id shaped like the runtime's (`sess_` and 24 hex digits).
fn session_id(n: usize) -> String {
    format!(
        "sess_{:016x}{:08x}",
        (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        n as u32
    )
}

fn chunk(kind: &str, text: &str) -> String {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}}).to_string()
}

/// 10,000 sessions in `cwd`, the first with [`HISTORY`] entries, written by the store's API.
fn fill(store: &FileStore, cwd: &Path) -> String {
    let big = session_id(0);
    store.create(&big, cwd).unwrap();
    for n in 0..HISTORY {
        let update = match n % 2 {
            0 => chunk(
                "user_message_chunk",
                &format!("question {n}: what does this function do?"),
            ),
            _ => chunk(
                "agent_message_chunk",
                &format!("answer {n}: it reads the header line of each session file and sorts them"),
            ),
        };
        store.append(&big, &update).unwrap();
    }
    store.flush_session(&big).unwrap();
    for n in 1..SESSIONS {
        let id = session_id(n);
        store.create(&id, cwd).unwrap();
        store.append(&id, &chunk("user_message_chunk", "hello")).unwrap();
        store.append(&id, &chunk("agent_message_chunk", "ok")).unwrap();
    }
    store.flush().unwrap();
    big
}

/// A new connection to the operator over `store`, initialized.
async fn connect(root: &Path, store: Arc<FileStore>) -> Pipe {
    let options = ServerOptions {
        workspace_root: Some(root.to_path_buf()),
        store: Some(store),
        permission_timeout: WAIT,
        // The audit log (fsynced per record, as by default) beside, not inside, the sessions.
        state_dir: Some(root.join(".state")),
        audit_log: Some(root.join(".state").join("audit.jsonl")),
        ..ServerOptions::default()
    };
    let mut pipe = Pipe::serve(Archivist, options);
    let params =
        json!({"protocolVersion": 1, "clientInfo": {"name": "bench", "version": "1"}, "clientCapabilities": {}});
    let (_, answer) = pipe.call("initialize", params).await;
    assert!(answer.get("result").is_some(), "{answer}");
    pipe
}

/// How long `method` takes from request to answer; the messages before the answer and the
/// answer.
async fn timed(pipe: &mut Pipe, method: &str, params: Value) -> (Duration, Vec<Value>, Value) {
    let start = Instant::now();
    let (before, answer) = pipe.call(method, params).await;
    let took = start.elapsed();
    assert!(answer.get("result").is_some(), "{method}: {answer}");
    (took, before, answer)
}

#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn median(&self) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        sorted[sorted.len() / 2]
    }

    fn max(&self) -> Duration {
        self.0.iter().copied().max().unwrap_or_default()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let cwd = root.join("project");
    std::fs::create_dir(&cwd).unwrap();
    let sessions = root.join(".state").join("sessions");

    let started = Instant::now();
    let big = fill(&FileStore::open(&sessions).unwrap(), &cwd);
    println!(
        "filled {SESSIONS} sessions ({HISTORY} entries in {big}) in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (mut list_cold, mut list_warm) = (Samples::default(), Samples::default());
    let (mut resume_cold, mut resume_warm) = (Samples::default(), Samples::default());
    let (mut load_cold, mut load_warm) = (Samples::default(), Samples::default());
    let (mut store_page, mut store_list, mut store_summary): (Samples, Samples, Samples) = Default::default();
    runtime.block_on(async {
        for _ in 0..ROUNDS {
            // session/list, first page.
            let mut pipe = connect(&root, Arc::new(FileStore::open(&sessions).unwrap())).await;
            for samples in [&mut list_cold, &mut list_warm] {
                let (took, _, page) = timed(&mut pipe, "session/list", json!({})).await;
                let listed = page["result"]["sessions"].as_array().map_or(0, Vec::len);
                assert_eq!(listed, 50, "a first page of 50: {page}");
                assert!(page["result"]["nextCursor"].is_string(), "a next page: {page}");
                // Newest first: the big session was written first, so it is not on page one.
                assert_ne!(page["result"]["sessions"][0]["sessionId"], json!(big));
                samples.0.push(took);
            }
            pipe.finish().await;

            // session/resume of the 10,000-entry session: no replay.
            let mut pipe = connect(&root, Arc::new(FileStore::open(&sessions).unwrap())).await;
            for samples in [&mut resume_cold, &mut resume_warm] {
                let (took, before, _) = timed(&mut pipe, "session/resume", json!({"sessionId": big, "cwd": cwd})).await;
                assert!(before.is_empty(), "resume replays nothing");
                samples.0.push(took);
                let (_, closed) = pipe.call("session/close", json!({"sessionId": big})).await;
                assert!(closed.get("result").is_some(), "{closed}");
            }
            pipe.finish().await;

            // session/load of the same session: replays every entry before answering.
            let mut pipe = connect(&root, Arc::new(FileStore::open(&sessions).unwrap())).await;
            for samples in [&mut load_cold, &mut load_warm] {
                let (took, before, _) = timed(
                    &mut pipe,
                    "session/load",
                    json!({"sessionId": big, "cwd": cwd, "mcpServers": []}),
                )
                .await;
                let replayed = before.iter().filter(|m| m["method"] == "session/update").count();
                assert_eq!(replayed, HISTORY, "load replays the whole history");
                samples.0.push(took);
            }
            pipe.finish().await;

            // The store calls alone, each on a fresh instance: what the runtime asks of the
            // store for a first page (`list_page`), every session (`list`, which reads every
            // header once), and a resume (`summary`).
            let store = FileStore::open(&sessions).unwrap();
            let start = Instant::now();
            let (first, more) = store.list_page(None, None, 50).unwrap();
            store_page.0.push(start.elapsed());
            assert_eq!((first.len(), more), (50, true));
            let store = FileStore::open(&sessions).unwrap();
            let start = Instant::now();
            let all = store.list().unwrap();
            store_list.0.push(start.elapsed());
            assert_eq!(all.len(), SESSIONS);
            let store = FileStore::open(&sessions).unwrap();
            let start = Instant::now();
            let summary = store.summary(&big).unwrap().expect("stored");
            store_summary.0.push(start.elapsed());
            assert_eq!(summary.cwd, cwd);
        }
    });

    println!(
        "{SESSIONS} sessions in a FileStore, one with {HISTORY} entries; request to answer over the \
         in-process pipe; median / max of {ROUNDS} rounds (lower is better)"
    );
    println!("| request | cold median | cold max | warm median | warm max | target | met |");
    println!("|---|---|---|---|---|---|---|");
    let rows: [(&str, &Samples, &Samples, Option<Duration>); 3] = [
        (
            "`session/list`, first page of 50",
            &list_cold,
            &list_warm,
            Some(LIST_TARGET),
        ),
        (
            "`session/resume`, 10,000 entries",
            &resume_cold,
            &resume_warm,
            Some(RESUME_TARGET),
        ),
        ("`session/load`, 10,000 entries replayed", &load_cold, &load_warm, None),
    ];
    for (name, cold, warm, target) in rows {
        let (target, met) = match target {
            Some(target) => (
                format!("< {}", ms(target)),
                if cold.max().max(warm.max()) < target {
                    "yes (max)"
                } else if cold.median().max(warm.median()) < target {
                    "yes (median)"
                } else {
                    "no"
                },
            ),
            None => ("—".to_string(), "—"),
        };
        println!(
            "| {name} | {} | {} | {} | {} | {target} | {met} |",
            ms(cold.median()),
            ms(cold.max()),
            ms(warm.median()),
            ms(warm.max())
        );
    }
    println!(
        "store alone, fresh instance, median (max): list_page(first 50) {} ({}); list() of all {} ({}); \
         summary() {} ({})",
        ms(store_page.median()),
        ms(store_page.max()),
        ms(store_list.median()),
        ms(store_list.max()),
        ms(store_summary.median()),
        ms(store_summary.max())
    );
}
