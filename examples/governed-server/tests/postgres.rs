//! The governed server with `AGENTACP_DATABASE_URL` (issue #49): built with feature `postgres`,
//! a session made and prompted by one server process is loaded, its history replayed, by
//! another that shares only the database; built without it, the variable stops the start-up
//! rather than being ignored. Skipped (saying so) without PostgreSQL's programs; failed under
//! `AGENTACP_REQUIRE_PEERS=1`.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use std::path::Path;

use stdio_peer::{Scratch, StdioPeer};

/// The governed server with its workspace in `scratch`, its state in `state` and its
/// sessions in database `url`.
fn start(scratch: &Scratch, state: &Path, url: &str) -> StdioPeer {
    StdioPeer::spawn(
        Path::new(env!("CARGO_BIN_EXE_governed-server")),
        &[],
        &[
            ("AGENTACP_WORKSPACE_ROOT", scratch.path()),
            ("AGENTACP_STATE_DIR", state),
            ("AGENTACP_AUDIT_LOG", &state.join("audit.jsonl")),
            ("AGENTACP_DATABASE_URL", Path::new(url)),
        ],
    )
}

/// The `(sessionUpdate, text)` of each message chunk among `messages`.
#[cfg(feature = "postgres")]
fn chunks(messages: &[serde_json::Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(|m| {
            let update = &m["params"]["update"];
            Some((
                update["sessionUpdate"].as_str()?.to_string(),
                update["content"]["text"].as_str()?.to_string(),
            ))
        })
        .collect()
}

#[cfg(feature = "postgres")]
#[test]
fn a_session_prompted_by_one_process_is_loaded_by_another() {
    use serde_json::json;
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("governed_two_processes");
    let scratch = Scratch::new("governed-postgres");
    let (first_state, second_state) = (scratch.path().join("a"), scratch.path().join("b"));

    let mut first = start(&scratch, &first_state, &url);
    let (_, session) = first.open_session(scratch.path());
    let said = chunks(&first.prompt(2, &session, "remember this"));
    assert!(said.iter().any(|(kind, _)| kind == "agent_message_chunk"), "{said:?}");
    assert!(first.finish().success(), "a closed stdin ends the server cleanly");
    assert!(
        !first_state.join("sessions").exists(),
        "the sessions are in the database"
    );

    let mut second = start(&scratch, &second_state, &url);
    second.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}));
    second.recv();
    let cwd = scratch.path().to_str().expect("a UTF-8 folder");
    second.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": session, "cwd": cwd, "mcpServers": []}}));
    let replayed = chunks(&second.until_answer(1));
    assert_eq!(
        replayed.first(),
        Some(&("user_message_chunk".to_string(), "remember this".to_string())),
        "{replayed:?}"
    );
    assert_eq!(&replayed[1..], &said[..], "the agent's side, as it was sent");
    assert!(second.finish().success());
}

#[cfg(not(feature = "postgres"))]
#[test]
fn a_database_url_without_feature_postgres_stops_the_start() {
    let scratch = Scratch::new("governed-no-postgres");
    let mut server = start(
        &scratch,
        &scratch.path().join("state"),
        "postgres://agent:s3cret@db/agents",
    );
    let status = server.wait_exit();
    assert!(!status.success(), "{status}");
    let said = server.stderr_to_end();
    assert!(said.contains("built without feature `postgres` of agentacp"), "{said}");
    assert!(!said.contains("s3cret"), "{said}");
}
