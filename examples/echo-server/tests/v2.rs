//! Issue #48: the echo server serving ACP v1 and v2 on stdio (`AGENTACP_PROTOCOL_VERSIONS`),
//! driven by a v2 client's raw frames.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use serde_json::{Value, json};
use stdio_peer::{Scratch, StdioPeer};

fn spawn(scratch: &Scratch) -> StdioPeer {
    StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_echo-server")),
        &[],
        &[
            ("AGENTACP_WORKSPACE_ROOT", scratch.path()),
            ("AGENTACP_STATE_DIR", scratch.path()),
            ("AGENTACP_PROTOCOL_VERSIONS", std::path::Path::new("1,2")),
        ],
    )
}

#[test]
fn a_v2_client_gets_a_v2_turn_and_a_v1_client_a_v1_one() {
    let scratch = Scratch::new("echo-server-v2-test");
    let mut server = spawn(&scratch);
    let init = json!({"protocolVersion": 2, "info": {"name": "raw", "version": "1"}, "capabilities": {}});
    server.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}));
    let initialized = server.until_answer(0).pop().expect("the answer");
    assert_eq!(initialized["result"]["protocolVersion"], 2, "{initialized}");
    assert_eq!(initialized["result"]["info"]["name"], "echo-server", "{initialized}");
    let cwd = scratch.path().canonicalize().unwrap();
    server.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": cwd}}));
    let created = server.until_answer(1).pop().expect("the answer");
    let session = created["result"]["sessionId"].clone();
    server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}}));
    assert!(server.recv()["result"]["messageId"].is_string(), "acknowledged first");
    let mut turn: Vec<Value> = Vec::new();
    while turn.last().is_none_or(|m| m["params"]["update"]["state"] != "idle") {
        turn.push(server.recv());
    }
    let kinds: Vec<&str> = turn
        .iter()
        .map(|m| {
            let update = &m["params"]["update"];
            update["state"]
                .as_str()
                .unwrap_or(update["sessionUpdate"].as_str().unwrap_or("?"))
        })
        .collect();
    assert_eq!(
        kinds,
        ["user_message", "running", "agent_message_chunk", "idle"],
        "{turn:?}"
    );
    assert_eq!(turn[2]["params"]["update"]["content"]["text"], "hello");
    assert!(turn[2]["params"]["update"]["messageId"].is_string());
    assert_eq!(turn[3]["params"]["update"]["stopReason"], "end_turn");
    assert!(server.finish().success());

    // The same binary, same setting: a v1 client is served v1.
    let mut server = spawn(&scratch);
    let (initialized, _session) = server.open_session(scratch.path());
    assert_eq!(initialized["protocolVersion"], 1, "{initialized}");
    assert!(server.finish().success());
}
