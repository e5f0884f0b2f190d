//! The governed server as an editor runs it: a subprocess spoken to over stdio.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use serde_json::Value;
use stdio_peer::{Scratch, StdioPeer};

#[test]
fn an_unlisted_tool_is_denied_unseen_and_audited() {
    let scratch = Scratch::new("governed-server-test");
    let audit = scratch.path().join("audit.jsonl");
    let mut server = StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_governed-server")),
        &[],
        &[
            ("AGENTACP_WORKSPACE_ROOT", scratch.path()),
            ("AGENTACP_STATE_DIR", scratch.path()),
            ("AGENTACP_AUDIT_LOG", &audit),
        ],
    );
    let (initialized, session) = server.open_session(scratch.path());
    assert_eq!(initialized["agentCapabilities"]["loadSession"], true, "{initialized}");
    assert_eq!(
        initialized["_meta"]["aip44"]["tier"], "governance-aware",
        "{initialized}"
    );

    let turn = server.prompt(2, &session, "/tool format-disk {}");
    let kinds: Vec<&str> = turn
        .iter()
        .filter_map(|message| message["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["agent_message_chunk"],
        "no tool call reaches the client: {turn:?}"
    );
    assert!(server.finish().success(), "a closed stdin ends the server cleanly");

    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .expect("the audit log is written")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each record is JSON"))
        .collect();
    let denied = records
        .iter()
        .find(|record| record["action"] == "tool.call")
        .expect("the denied call is recorded");
    assert_eq!(denied["metadata"]["aip44"]["tool"], "format-disk");
    assert_eq!(
        denied["metadata"]["aip44"]["approval"]["deniedBy"], "governance",
        "{denied}"
    );
}

/// Issue #23.16: every session held a file open for good, so at a low `RLIMIT_NOFILE` new
/// sessions failed and the tools of existing ones too. With 64 descriptors, 300 sessions open,
/// each with history on disk, and the first session's tool still reads its file.
#[test]
fn hundreds_of_sessions_fit_in_a_small_file_descriptor_limit() {
    let scratch = Scratch::new("governed-server-fds");
    let audit = scratch.path().join("audit.jsonl");
    std::fs::write(scratch.path().join("notes.txt"), "still readable").unwrap();
    let binary = env!("CARGO_BIN_EXE_governed-server");
    let mut server = StdioPeer::spawn(
        std::path::Path::new("/bin/sh"),
        &["-c", "ulimit -n 64 && exec \"$0\"", binary],
        &[
            ("AGENTACP_WORKSPACE_ROOT", scratch.path()),
            ("AGENTACP_STATE_DIR", scratch.path()),
            ("AGENTACP_AUDIT_LOG", &audit),
        ],
    );
    let (_, first) = server.open_session(scratch.path());
    let cwd = scratch.path().to_str().unwrap();
    for id in 10..310u64 {
        server.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}));
        let answer = server.until_answer(id).pop().unwrap();
        let session = answer["result"]["sessionId"].clone();
        assert!(session.is_string(), "session {id}: {answer}");
        // Each one writes history (the prompt and the answer) to its own file.
        server.prompt(1000 + id, &session, "hello");
    }
    let turn = server.prompt(2, &first, r#"/tool read-file {"path":"notes.txt"}"#);
    let text = turn.iter().map(|m| m.to_string()).collect::<String>();
    assert!(text.contains("still readable"), "{text}");
    assert!(server.finish().success());
}
