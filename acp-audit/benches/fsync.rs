//! Benchmark: what each fsync policy costs, in records per second, and how fast a log is
//! verified (what `AuditLog::open` and `scaffold-aip audit verify` spend reading it).
//!
//! `cargo bench -p acp-audit --bench fsync` appends tool-call records of about 1 KB to a log
//! in the system temp folder under each policy (median of 5 runs), then verifies the largest
//! log, and times the records in memory (their CPU cost alone). The figures depend on the
//! disk: run it where the logs will live.

#![allow(clippy::print_stdout, reason = "a benchmark reports its figures on stdout")]

use std::path::Path;
use std::time::{Duration, Instant};

use acp_audit::{
    Approval, AuditEvent, AuditLog, FsyncPolicy, MemorySink, ToolCallMirror, ToolOutcomeRecord, verify_file,
};
use serde_json::json;

const RUNS: usize = 5;

fn event(i: usize) -> AuditEvent {
    AuditEvent::tool_call(ToolCallMirror {
        operator: "bench".into(),
        session: "sess-bench".into(),
        tool_call_id: format!("call_{i}"),
        tool: "write-file".into(),
        arguments: json!({"path": "notes.txt", "content": "x".repeat(200)}),
        outcome: ToolOutcomeRecord::Result(json!({"written": 200})),
        approval: Approval::Auto,
    })
}

/// Appends `records` records under `policy` to a fresh log at `path`; the time taken.
fn append(path: &Path, policy: FsyncPolicy, records: usize) -> Duration {
    let _ = std::fs::remove_file(path);
    let started = Instant::now();
    let log = AuditLog::open(path, policy).expect("open the log");
    for i in 0..records {
        log.record(event(i)).expect("record");
    }
    log.flush().expect("flush");
    started.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let dir = std::env::temp_dir().join(format!("acp-audit-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench folder");
    let path = dir.join("audit.jsonl");
    let policies = [
        ("EveryRecord", FsyncPolicy::EveryRecord, 500),
        ("Batched { every: 64 }", FsyncPolicy::Batched { every: 64 }, 20_000),
        ("Never", FsyncPolicy::Never, 20_000),
    ];
    for (name, policy, records) in policies {
        let time = median((0..RUNS).map(|_| append(&path, policy, records)).collect());
        let rate = records as f64 / time.as_secs_f64();
        println!("{name:<22} {rate:>9.0} records/s ({records} records in {time:.2?}, median of {RUNS})");
    }
    // What a record costs without the disk: building, hashing, serialising.
    let records = 20_000;
    let time = median(
        (0..RUNS)
            .map(|_| {
                let log = AuditLog::with_sink(Box::new(MemorySink::new()));
                let started = Instant::now();
                for i in 0..records {
                    log.record(event(i)).expect("record");
                }
                started.elapsed()
            })
            .collect(),
    );
    let rate = records as f64 / time.as_secs_f64();
    println!(
        "{:<22} {rate:>9.0} records/s ({:.2?} per record: the CPU cost without the disk)",
        "in memory",
        time / records as u32
    );
    let bytes = std::fs::metadata(&path).expect("the log").len();
    let time = median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                verify_file(&path).expect("the log verifies");
                started.elapsed()
            })
            .collect(),
    );
    let rate = bytes as f64 / time.as_secs_f64() / (1024.0 * 1024.0);
    println!("verify                 {rate:>9.0} MiB/s ({bytes} bytes in {time:.2?}, median of {RUNS})");
    let _ = std::fs::remove_dir_all(&dir);
}
