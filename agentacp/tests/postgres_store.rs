//! Sessions in PostgreSQL (feature `postgres`, issue #49): servers configured with one database
//! see the same sessions, as replicas of a fleet do, and a database that cannot be reached
//! stops the start-up, naming it. Skipped (saying so) without PostgreSQL's programs; failed
//! under `AGENTACP_REQUIRE_PEERS=1`.
#![cfg(feature = "postgres")]

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::prelude::*;
use serde_json::Value;

mod common;

use common::{Pipe, WAIT, texts};

/// An operator whose manifest offers `session/load` and every optional session method.
#[acp_operator(manifest = "tests/operators/test-sessions/ACP.md")]
struct Archivist;

ok_server!(ArchivistServer for Archivist, GovernanceAware);

/// A server of its own (its own pool, state folder and audit) on database `url`, initialized.
async fn replica(url: &str, root: &std::path::Path, state: &std::path::Path) -> Pipe {
    audited_replica(url, root, state, &MemorySink::new()).await
}

/// [`replica`], auditing to `audit`.
async fn audited_replica(url: &str, root: &std::path::Path, state: &std::path::Path, audit: &MemorySink) -> Pipe {
    let options = ServerOptions {
        workspace_root: Some(root.to_path_buf()),
        state_dir: Some(state.to_path_buf()),
        audit: Some(AuditLog::with_sink(Box::new(audit.clone()))),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    }
    .database(url);
    let mut pipe = Pipe::serve(Archivist, options);
    let params =
        json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"}, "clientCapabilities": {}});
    let (_, answer) = pipe.call("initialize", params).await;
    assert_eq!(answer["result"]["agentCapabilities"]["loadSession"], true, "{answer}");
    pipe
}

fn ids(answer: &Value) -> Vec<String> {
    answer["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("a list of sessions: {answer}"))
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect()
}

/// A session made and prompted through one server is listed, loaded (its history replayed)
/// and prompted through another, which shares nothing with the first but the database.
#[tokio::test]
async fn a_session_made_on_one_server_is_listed_loaded_and_prompted_on_another() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("two_servers");
    let root = tempfile::tempdir().unwrap();
    let (state_a, state_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());

    let mut a = replica(&url, root.path(), state_a.path()).await;
    let (_, made) = a
        .call("session/new", json!({"cwd": root.path(), "mcpServers": []}))
        .await;
    let session = made["result"]["sessionId"].as_str().expect("a session id").to_string();
    let id = a.prompt(&session, "hello from a").await;
    let (_, answer) = a.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    a.finish().await;
    assert!(
        !state_a.path().join("sessions").exists(),
        "the sessions are in the database, not in the state folder"
    );

    let mut b = replica(&url, root.path(), state_b.path()).await;
    let (_, listed) = b.call("session/list", json!({})).await;
    assert_eq!(ids(&listed), [session.as_str()], "{listed}");
    let (replayed, loaded) = b
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert_eq!(texts(&replayed), ["hello from a", "ok"], "{replayed:?}");
    let id = b.prompt(&session, "and from b").await;
    let (_, answer) = b.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    b.finish().await;

    // A third server replays both turns.
    let mut c = replica(&url, root.path(), state_a.path()).await;
    let (replayed, _) = c
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
        )
        .await;
    assert_eq!(texts(&replayed), ["hello from a", "ok", "and from b", "ok"]);
    let (_, deleted) = c.call("session/delete", json!({"sessionId": session})).await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let (_, listed) = c.call("session/list", json!({})).await;
    assert!(ids(&listed).is_empty(), "{listed}");
    c.finish().await;
}

/// A database that cannot be reached stops the start-up with a sentence naming it, without
/// its password; nothing is served.
#[tokio::test]
async fn a_database_that_cannot_be_reached_stops_the_start_naming_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let root = tempfile::tempdir().unwrap();
    let options = ServerOptions {
        workspace_root: Some(root.path().to_path_buf()),
        state_dir: Some(root.path().join("state")),
        ..ServerOptions::default()
    }
    .database(format!("postgres://agent:s3cret@127.0.0.1:{port}/agents"));
    let (_keep, input) = tokio::io::duplex(64);
    let serving = agentacp::server::serve(Archivist, options, input, tokio::io::sink());
    let error = tokio::time::timeout(WAIT, serving)
        .await
        .expect("the start-up ends")
        .expect_err("the server does not start");
    let said = error.to_string();
    assert!(
        said.contains(&format!(
            "cannot reach the database at postgres://agent@127.0.0.1:{port}/agents"
        )),
        "{said}"
    );
    assert!(!said.contains("s3cret"), "{said}");
}

/// A new session through `pipe`: its id.
async fn new_session(pipe: &mut Pipe, root: &std::path::Path) -> String {
    let (_, made) = pipe.call("session/new", json!({"cwd": root, "mcpServers": []})).await;
    made["result"]["sessionId"].as_str().expect("a session id").to_string()
}

/// Issue #49: a replica that died mid-turn left its session's lease held; with no prompt of
/// the session, a running server's sweeper records the turn as interrupted (audit and
/// history, once) within the documented bound (2¼ leases; 10 s leases here, the default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_turn_is_recorded_interrupted_without_a_prompt() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("sweeper");
    let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let audit = MemorySink::new();
    let mut server = audited_replica(&url, root.path(), state.path(), &audit).await;
    let session = new_session(&mut server, root.path()).await;
    // The dead replica's lease: held, expired, never to be renewed.
    let db = acp_postgres::Database::connect(&url, acp_postgres::Options::default()).unwrap();
    let id = session.clone();
    db.run(move |c| {
        c.execute(
            "insert into agentacp_leases (operator, session_id, owner, epoch, held, expires_at)
             select operator, id, 'dead', 1, true, now() from agentacp_sessions where id = $1",
            &[&id],
        )
    })
    .unwrap();
    let marker = "[This turn was interrupted: replica dead stopped before it ended.]";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(45);
    let replayed = loop {
        let (replayed, _) = server
            .call(
                "session/load",
                json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
            )
            .await;
        if texts(&replayed).iter().any(|text| text.contains(marker)) {
            break replayed;
        }
        assert!(std::time::Instant::now() < deadline, "never recorded: {replayed:?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(texts(&replayed).len(), 1, "the marker once: {replayed:?}");
    server.finish().await;
    let interrupted: Vec<Value> = audit
        .lines()
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["action"] == "turn.interrupted")
        .collect();
    assert_eq!(interrupted.len(), 1, "{interrupted:?}");
    assert_eq!(interrupted[0]["subject"]["ref"], session.as_str());
    assert_eq!(interrupted[0]["input"]["replica"], "dead");
    assert_eq!(interrupted[0]["input"]["epoch"], 1);
    let held: i64 = db
        .run(|c| c.query_one("select count(*) from agentacp_leases where held", &[]))
        .unwrap()
        .get(0);
    assert_eq!(held, 0, "the sweeper let the lease go");
}

/// Issue #49: `session/list` pages by keyset: paging through 120 sessions while new ones
/// are made and listed ones are written lists every session that existed exactly once, with
/// no duplicate (an offset would repeat the rows pushed down by the new ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_while_sessions_are_made_and_written_lists_each_existing_session_once() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("keyset");
    let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut server = replica(&url, root.path(), state.path()).await;
    let mut existing = Vec::new();
    for _ in 0..120 {
        existing.push(new_session(&mut server, root.path()).await);
    }
    let (mut seen, mut made) = (Vec::new(), Vec::new());
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let (_, page) = server.call("session/list", params).await;
        let listed = ids(&page);
        // Between pages: new sessions, and one already listed written again (both go to
        // the top of the list).
        for _ in 0..7 {
            made.push(new_session(&mut server, root.path()).await);
        }
        let id = server.prompt(&listed[0], "again").await;
        let (_, answer) = server.until_answer(id).await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        seen.extend(listed);
        match page["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let mut once = seen.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), seen.len(), "no session listed twice");
    for session in &existing {
        assert!(seen.contains(session), "{session} was not listed");
    }
    assert!(
        made.iter().all(|new| !seen.contains(new)),
        "the new ones are newer than the cursor"
    );
    let (_, foreign) = server.call("session/list", json!({"cursor": "offset:50"})).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    let said = foreign["error"]["message"].as_str().unwrap();
    assert!(said.contains("is not one this agent gave"), "{said}");
    server.finish().await;
}
