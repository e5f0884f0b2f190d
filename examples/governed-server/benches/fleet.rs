//! Issue #49's figures (docs/performance.md, "A fleet on PostgreSQL"): `governed-server --listen`
//! replicas driven by our client over WebSocket on loopback, on files (sessions in the state
//! folder, the audit log in a file) against PostgreSQL (sessions, audit chain and leases in the
//! database), one replica against three, the history's updates written in batches (the default)
//! and each in a transaction of its own (`AGENTACP_SESSION_APPENDS=each`, as before the batches):
//!
//! - prompt round trips per second (sequential prompts of one short text, one client per
//!   replica, the replicas' clients side by side);
//! - streaming updates per second (`/stream 5000 64`: 5,000 chunks of 64 bytes per turn);
//! - the time from `kill -9` of a replica running a turn to the first prompt of that session
//!   another replica answers (prompting every 20 ms), for two leases;
//! - `session/list` over 100,000 stored sessions (the first page, a page 50,000 in, and the
//!   first page of one `cwd`).
//!
//! `cargo bench -p governed-server --features postgres --bench fleet` (PostgreSQL's server
//! programs must be installed: the test cluster of `test-support`). Prints a Markdown table,
//! with `/proc/loadavg` before and after.

// A benchmark's report is its output.
#![allow(clippy::print_stdout)]

#[path = "../tests/common/replicas.rs"]
mod replicas;

use std::time::{Duration, Instant};

use agentacp::client::{Client, PromptEvent, PromptStream};
use agentacp::wire::default as wire;
use replicas::{Dirs, Replica, WAIT};

/// Prompts per client for the round trips.
const PROMPTS: u32 = 300;
/// Turns per client for the streaming figure.
const STREAMS: u32 = 3;
/// Chunks per streaming turn.
const CHUNKS: u32 = 5000;

fn main() {
    let Some(cluster) = test_support::postgres::cluster() else {
        eprintln!("no PostgreSQL: nothing measured");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load before: {}", load().trim());
    runtime.block_on(async {
        println!("| setup | prompt round trips/s | streaming updates/s |");
        println!("|---|---|---|");
        // Before and after issue #49's grouped appends, side by side: `each` writes every
        // update in a transaction of its own, as before.
        for (label, database, count, appends) in [
            ("file store, 1 replica", None, 1, "grouped"),
            (
                "PostgreSQL, 1 replica, each update a transaction",
                Some(cluster.database("bench_one_each")),
                1,
                "each",
            ),
            (
                "PostgreSQL, 1 replica, grouped",
                Some(cluster.database("bench_one")),
                1,
                "grouped",
            ),
            (
                "PostgreSQL, 3 replicas, each update a transaction",
                Some(cluster.database("bench_three_each")),
                3,
                "each",
            ),
            (
                "PostgreSQL, 3 replicas, grouped",
                Some(cluster.database("bench_three")),
                3,
                "grouped",
            ),
        ] {
            let dirs = Dirs::new();
            let env = [("AGENTACP_SESSION_APPENDS", appends)];
            let replicas: Vec<Replica> = ["a", "b", "c"][..count]
                .iter()
                .map(|name| Replica::start_with(name, database.as_deref(), &dirs, 10_000, &env))
                .collect();
            let (trips, updates) = throughput(&replicas, &dirs).await;
            println!("| {label} | {trips:.0} | {updates:.0} |");
        }
        println!();
        for lease_ms in [10_000, 1_500] {
            let database = cluster.database("bench_takeover");
            let taken = takeover(&database, lease_ms).await;
            println!(
                "takeover of a dead replica's session, lease {lease_ms} ms: {:.2} s after kill -9",
                taken.as_secs_f64()
            );
        }
        println!();
        list_over_many(&cluster.database("bench_list"), cluster).await;
    });
    println!("load after: {}", load().trim());
}

/// Round trips/s and updates/s of every replica's client together.
async fn throughput(replicas: &[Replica], dirs: &Dirs) -> (f64, f64) {
    let mut clients = Vec::new();
    for replica in replicas {
        let client = replica.client(dirs).await;
        let session = client.new_session(&dirs.project).await.unwrap();
        clients.push((client, session));
    }
    let started = Instant::now();
    let runs = clients.iter().map(|(client, session)| async move {
        for _ in 0..PROMPTS {
            finish(client.prompt_text(session, "ping").await.unwrap()).await;
        }
    });
    join_all(runs).await;
    let trips = f64::from(PROMPTS) * clients.len() as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let runs = clients.iter().map(|(client, session)| async move {
        for _ in 0..STREAMS {
            let text = format!("/stream {CHUNKS} 64");
            finish(client.prompt_text(session, &text).await.unwrap()).await;
        }
    });
    join_all(runs).await;
    let updates = f64::from(STREAMS * CHUNKS) * clients.len() as f64 / started.elapsed().as_secs_f64();
    (trips, updates)
}

/// Polls `futures` side by side until each is done.
async fn join_all<F: Future<Output = ()>>(futures: impl Iterator<Item = F>) {
    let mut pending: Vec<_> = futures.map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        pending.retain_mut(|future| future.as_mut().poll(cx).is_pending());
        if pending.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}

/// Reads a turn to its end; its stop reason (`None`: it failed).
async fn finish(mut stream: PromptStream) -> Option<wire::StopReason> {
    loop {
        match tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("the turn goes on")
        {
            Some(Ok(PromptEvent::Stop(reason))) => return Some(reason),
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return None,
        }
    }
}

/// From `kill -9` of the replica running a turn to another replica's answer to the session's
/// next prompt.
async fn takeover(database: &str, lease_ms: u64) -> Duration {
    let dirs = Dirs::new();
    let mut a = Replica::start("a", Some(database), &dirs, lease_ms);
    let b = Replica::start("b", Some(database), &dirs, lease_ms);
    let (on_a, on_b) = (a.client(&dirs).await, b.client(&dirs).await);
    let session = on_a.new_session(&dirs.project).await.unwrap();
    on_b.resume_session(&session, &dirs.project).await.unwrap();
    let mut running = on_a.prompt_text(&session, "/forever").await.unwrap();
    while !matches!(running.next().await, Some(Ok(PromptEvent::Update(_)))) {}
    // A renewal happened: the kill comes at a random point of the renewal period.
    tokio::time::sleep(Duration::from_millis(lease_ms / 2)).await;
    let killed = Instant::now();
    a.kill();
    loop {
        if finish(on_b.prompt_text(&session, "again").await.unwrap()).await == Some(wire::StopReason::EndTurn) {
            return killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_millis(lease_ms) + WAIT,
            "never taken over"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `session/list` over 100,000 sessions written straight into the database.
async fn list_over_many(database: &str, cluster: &test_support::postgres::Cluster) {
    let dirs = Dirs::new();
    let replica = Replica::start("a", Some(database), &dirs, 10_000);
    let client: Client = replica.client(&dirs).await;
    // The replica made the schema; a tenth of the sessions in the project folder.
    let other = dirs.root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let sql = format!(
        "insert into agentacp_sessions (operator, identity, id, cwd, created_at, updated_at)
         select 'governed-server', '', 'sess_' || lpad(to_hex(g), 32, '0'),
                case when g % 10 = 0 then '{}' else '{}' end,
                now() - g * interval '1 second', now() - g * interval '1 second'
         from generate_series(1, 100000) g",
        dirs.project.display(),
        other.display()
    );
    cluster.psql(database, &sql).unwrap();
    // What autovacuum does after such an insert: the planner learns the table's size.
    cluster.psql(database, "analyze agentacp_sessions").unwrap();
    // The cursor of the page 50,000 sessions in (a keyset: paged to, 1,000 pages of 50).
    let mut deep = None;
    for _ in 0..1_000 {
        deep = client.list_sessions(None, deep).await.unwrap().next_cursor;
    }
    for (what, cwd, cursor) in [
        ("first page", None, None),
        ("page at 50,000", None, deep),
        (
            "first page of one cwd (10,000 sessions)",
            Some(dirs.project.as_path()),
            None,
        ),
    ] {
        let mut times = Vec::new();
        for _ in 0..21 {
            let started = Instant::now();
            let page = client.list_sessions(cwd, cursor.clone()).await.unwrap();
            times.push(started.elapsed());
            assert_eq!(page.sessions.len(), 50);
        }
        times.sort();
        println!(
            "session/list over 100,000 sessions, {what}: median {:.2} ms",
            times[times.len() / 2].as_secs_f64() * 1000.0
        );
    }
}
