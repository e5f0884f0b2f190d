//! Issue #50: the governance bridge built for Windows (`x86_64-pc-windows-gnu`) and run under
//! Wine between this test (the editor, on the bridge's stdio) and the echo server's Windows
//! build as its agent, which the bridge starts itself (a Windows program starting a Windows
//! program, in a Job Object): `initialize`, `session/new` in a `Z:\…` folder, a prompt answered
//! with streamed updates through the bridge, a turn cancelled while it streams, end of input
//! ending both with exit code 0; the bridge's audit log and the agent's, written on Windows,
//! verified here. The harness (`test_support::wine`) builds into `target/windows` (the echo
//! server's build is the one `examples/echo-server/tests/wine.rs` uses) and skips without Wine,
//! mingw-w64 or the rustup target (failing under `AGENTACP_REQUIRE_PEERS`, as in CI).

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use std::path::Path;

use serde_json::json;
use stdio_peer::{Scratch, StdioPeer};
use test_support::wine::{self, Wine};

#[test]
fn the_windows_bridge_relays_a_session_to_a_windows_agent_under_wine() {
    let Some(wine) = Wine::start() else { return };
    let bridge = wine::build_for_windows("governance-bridge", None);
    let agent = wine::build_for_windows("echo-server", None);
    let scratch = Scratch::new("bridge-wine");
    let folder = wine::windows_path(scratch.path());
    let in_folder = |name: &str| wine::windows_path(&scratch.path().join(name));
    let mut editor = StdioPeer::start(
        wine.command(&bridge)
            .arg("--")
            .arg(wine::windows_path(&agent))
            .current_dir(scratch.path())
            .env_remove("RUST_LOG")
            .env("AGENTACP_LOG", "info")
            .env("AGENTACP_WORKSPACE_ROOT", &folder)
            .env("AGENTACP_STATE_DIR", &folder)
            .env("AGENTACP_AUDIT_LOG", in_folder("bridge.jsonl"))
            .env("AGENTACP_DOWNSTREAM_AUDIT_LOG", in_folder("agent.jsonl")),
    );

    let (initialized, session) = editor.open_session(Path::new(&folder));
    assert_eq!(initialized["agentInfo"]["name"], "governance-bridge", "{initialized}");

    let turn = editor.prompt(2, &session, "hello through the bridge");
    let said: String = turn
        .iter()
        .filter(|message| message["method"] == "session/update")
        .filter_map(|message| message["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "hello through the bridge", "the turn: {turn:?}");
    assert_eq!(turn.last().expect("the answer")["result"]["stopReason"], "end_turn");

    // A turn that streams until cancelled: the cancel goes through the bridge to the agent.
    let forever = json!([{"type": "text", "text": "/forever"}]);
    editor.send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": forever}}));
    let update = editor.recv();
    assert_eq!(update["method"], "session/update", "{update}");
    editor.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}));
    let rest = editor.until_answer(3);
    let answer = rest.last().expect("the answer");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");

    // The editor leaves: the bridge ends its agent and exits cleanly.
    editor.close_stdin();
    let status = editor.wait_exit();
    let stderr = wine::quiet(&editor.stderr_to_end());
    assert_eq!(status.code(), Some(0), "exit status {status}; stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "stderr:\n{stderr}");

    // Both audit logs, written on Windows, are valid chains here (as `scaffold-aip audit
    // verify` checks them); the bridge's records both directions of the session.
    for (log, at_least) in [("bridge.jsonl", 4), ("agent.jsonl", 2)] {
        let log = scratch.path().join(log);
        let summary = agentacp::audit::verify_file(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        assert!(summary.records >= at_least, "{}: {summary:?}", log.display());
    }
}
