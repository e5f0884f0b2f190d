//! The echo server as an editor runs it: a subprocess spoken to over stdio.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

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
    let (initialized, session) = server.open_session(scratch.path());
    assert_eq!(initialized["agentInfo"]["name"], "echo-server", "{initialized}");
    assert_eq!(initialized["_meta"]["aip44"]["tier"], "basic", "{initialized}");

    let turn = server.prompt(2, &session, "hello there");
    let said: String = turn
        .iter()
        .filter(|message| message["method"] == "session/update")
        .filter_map(|message| message["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "hello there", "the turn: {turn:?}");
    assert_eq!(turn.last().expect("the answer")["result"]["stopReason"], "end_turn");
    assert!(server.finish().success(), "a closed stdin ends the server cleanly");
}
