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
