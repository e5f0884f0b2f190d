//! The audit log of a server on a database (feature `postgres`, issue #49): the replica's
//! chain `<operator id>@<replica>` in the database instead of the state folder's file,
//! continued by the next start, one writer per chain; `AGENTACP_AUDIT_LOG` still names a file.
//! Skipped (saying so) without PostgreSQL's programs; failed under `AGENTACP_REQUIRE_PEERS=1`.
#![cfg(feature = "postgres")]

use acp_postgres::{Database, Options};
use agentacp::audit::{ChainVerdict, verify_database};
use agentacp::prelude::*;

mod common;

use common::{Pipe, WAIT};

/// An operator without an `audit` key: its log is `audit.jsonl` in the state folder, or its
/// chain in the database.
#[acp_operator(manifest = "tests/operators/test-sessions/ACP.md")]
struct Archivist;

ok_server!(ArchivistServer for Archivist, GovernanceAware);

fn options(url: &str, root: &std::path::Path, state: &std::path::Path) -> ServerOptions {
    ServerOptions {
        workspace_root: Some(root.to_path_buf()),
        state_dir: Some(state.to_path_buf()),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    }
    .database(url)
}

/// Serves, makes a session and prompts it once, and ends.
async fn one_turn(options: ServerOptions, root: &std::path::Path) {
    let mut pipe = Pipe::serve(Archivist, options);
    let params =
        json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"}, "clientCapabilities": {}});
    pipe.call("initialize", params).await;
    let (_, made) = pipe.call("session/new", json!({"cwd": root, "mcpServers": []})).await;
    let session = made["result"]["sessionId"].as_str().expect("a session id").to_string();
    let id = pipe.prompt(&session, "hello").await;
    let (_, answer) = pipe.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    pipe.finish().await;
}

/// The chains of `url`: `(chain, records)`, each intact.
fn chains(url: &str) -> Vec<(String, u64)> {
    let db = Database::connect(url, Options::default()).unwrap();
    verify_database(&db, None)
        .unwrap()
        .into_iter()
        .map(|ChainVerdict { chain, result }| {
            let records = result.unwrap_or_else(|fault| panic!("{fault}")).records;
            (chain, records)
        })
        .collect()
}

#[tokio::test]
async fn a_server_on_a_database_writes_its_chain_there_and_the_next_start_continues_it() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("audit_chain");
    let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let chain = format!("test-sessions@{}", agentacp::env::replica_name().unwrap());
    one_turn(options(&url, root.path(), state.path()), root.path()).await;
    let [(name, first)] = chains(&url).try_into().unwrap();
    assert_eq!(name, chain);
    assert!(first >= 3, "the turn's lifecycle was recorded: {first} records");
    assert!(!state.path().join("audit.jsonl").exists(), "no file is written");

    one_turn(options(&url, root.path(), state.path()), root.path()).await;
    let [(name, second)] = chains(&url).try_into().unwrap();
    assert_eq!(name, chain);
    assert!(second > first, "the chain goes on: {first} then {second} records");
}

#[tokio::test]
async fn a_second_server_with_the_same_replica_name_does_not_start() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("audit_two_writers");
    let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut first = Pipe::serve(Archivist, options(&url, root.path(), state.path()));
    let params =
        json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"}, "clientCapabilities": {}});
    first.call("initialize", params).await;
    let (_keep, input) = tokio::io::duplex(64);
    let second = options(&url, root.path(), state.path());
    let error = agentacp::server::serve(Archivist, second, input, tokio::io::sink())
        .await
        .expect_err("the second writer does not start");
    let said = error.to_string();
    let chain = format!("test-sessions@{}", agentacp::env::replica_name().unwrap());
    assert!(
        said.starts_with(&format!(
            "audit log: the audit chain {chain} in the database at postgres://"
        )),
        "{said}"
    );
    assert!(
        said.contains("give this one its own name with AGENTACP_REPLICA"),
        "{said}"
    );
    first.finish().await;
}

#[tokio::test]
async fn an_audit_log_file_given_explicitly_is_still_a_file() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("audit_file_wins");
    let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let file = state.path().join("explicit.jsonl");
    let options = ServerOptions {
        audit_log: Some(file.clone()),
        ..options(&url, root.path(), state.path())
    };
    one_turn(options, root.path()).await;
    assert!(agentacp::audit::verify_file(&file).unwrap().records >= 3);
    assert_eq!(chains(&url), [], "nothing was recorded in the database");
}
