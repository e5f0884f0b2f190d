//! Benchmark: what a record costs in a database chain (feature `postgres`) against a file,
//! under `EveryRecord` and `Batched { every: 64 }`, in records per second and microseconds a
//! record.
//!
//! `cargo bench -p acp-audit --features postgres --bench database` uses the database at
//! `AGENTACP_BENCH_DATABASE_URL`, else starts the tests' PostgreSQL cluster (loopback, a
//! temporary folder). Records are the tool-call records of about 1 KB of the `fsync` bench.
//! The figures depend on the disks of both: run it where the logs will live.

#![allow(clippy::print_stdout, reason = "a benchmark reports its figures on stdout")]

use std::time::{Duration, Instant};

use acp_audit::{Approval, AuditEvent, AuditLog, FsyncPolicy, ToolCallMirror, ToolOutcomeRecord};
use acp_postgres::{Database, Options};
use serde_json::json;

const RUNS: usize = 3;

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

/// Records `records` records into `log` and flushes; the time taken.
fn fill(log: AuditLog, records: usize) -> Duration {
    let started = Instant::now();
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

fn report(name: &str, records: usize, time: Duration) {
    let rate = records as f64 / time.as_secs_f64();
    let each = time.as_secs_f64() * 1e6 / records as f64;
    println!("{name:<34} {rate:>8.0} records/s {each:>8.1} µs/record ({records} records, median of {RUNS})");
}

fn main() {
    let url = match std::env::var("AGENTACP_BENCH_DATABASE_URL") {
        Ok(url) => url,
        Err(_) => match test_support::postgres::cluster() {
            Some(cluster) => cluster.database("audit_bench"),
            None => {
                println!("no PostgreSQL: set AGENTACP_BENCH_DATABASE_URL or install the server programs");
                return;
            }
        },
    };
    let db = Database::connect(&url, Options::default()).expect("connect");
    let dir = std::env::temp_dir().join(format!("acp-audit-bench-db-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench folder");
    let policies = [
        ("EveryRecord", FsyncPolicy::EveryRecord, 500),
        ("Batched { every: 64 }", FsyncPolicy::Batched { every: 64 }, 5_000),
    ];
    let mut run = 0;
    for (name, policy, records) in policies {
        let file = median(
            (0..RUNS)
                .map(|_| {
                    let path = dir.join("audit.jsonl");
                    let _ = std::fs::remove_file(&path);
                    fill(AuditLog::open(&path, policy).expect("open the file"), records)
                })
                .collect(),
        );
        report(&format!("file, {name}"), records, file);
        let database = median(
            (0..RUNS)
                .map(|_| {
                    run += 1;
                    let chain = format!("bench-{run}");
                    fill(
                        AuditLog::open_database(&db, &chain, policy).expect("open the chain"),
                        records,
                    )
                })
                .collect(),
        );
        report(&format!("database, {name}"), records, database);
    }
    let started = Instant::now();
    let verdicts = acp_audit::verify_database(&db, None).expect("verify");
    let total: u64 = verdicts
        .iter()
        .map(|v| v.result.as_ref().map_or(0, |s| s.records))
        .sum();
    let time = started.elapsed();
    println!(
        "verify_database                    {:>8.0} records/s ({total} records in {} chains)",
        total as f64 / time.as_secs_f64(),
        verdicts.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
