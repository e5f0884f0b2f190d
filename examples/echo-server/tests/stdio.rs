//! The echo server as an editor runs it: a subprocess spoken to over stdio.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use serde_json::json;
use stdio_peer::{Scratch, StdioPeer};

#[test]
fn a_session_echoes_the_prompt_and_the_server_exits_when_stdin_closes() {
    let scratch = Scratch::new("echo-server-test");
    let mut server = StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_echo-server")),
        &[],
        &[
            ("AGENTACP_WORKSPACE_ROOT", scratch.path()),
            ("AGENTACP_STATE_DIR", scratch.path()),
        ],
    );
    server.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}));
    let initialized = server.recv();
    assert_eq!(
        initialized["result"]["agentInfo"]["name"], "echo-server",
        "{initialized}"
    );
    assert_eq!(
        initialized["result"]["_meta"]["aip44"]["tier"], "basic",
        "{initialized}"
    );

    let cwd = scratch.path().to_str().expect("a UTF-8 temporary folder");
    server.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}));
    let session = server.recv()["result"]["sessionId"].clone();
    assert!(session.is_string(), "session/new answers a session id");

    let prompt = json!([{"type": "text", "text": "hello there"}]);
    server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": session, "prompt": prompt}}));
    let turn = server.until_answer(2);
    let said: String = turn
        .iter()
        .filter(|message| message["method"] == "session/update")
        .filter_map(|message| message["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "hello there", "the turn: {turn:?}");
    assert_eq!(turn.last().expect("the answer")["result"]["stopReason"], "end_turn");
    assert!(server.finish().success(), "a closed stdin ends the server cleanly");
}
