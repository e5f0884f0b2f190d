//! The bridge as an editor runs it: in front of an agent that fails to start, fed its
//! requests all at once and then end of input (`printf … | governance-bridge`), and passing a
//! named variable to its agent (`--pass-env`).

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use serde_json::json;
use stdio_peer::{Scratch, StdioPeer};

#[test]
fn a_downstream_agent_that_dies_ends_the_bridge_with_its_status_and_stderr() {
    let mut bridge = StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_governance-bridge")),
        &["--", "sh", "-c", "echo 'model weights missing' >&2; exit 7"],
        &[],
    );
    // stdin stays open: the editor is still there, the agent is what went away.
    let status = bridge.wait_exit();
    let stderr = bridge.stderr_to_end();
    assert!(
        !status.success(),
        "the bridge ends with an error when its agent is gone: {stderr}"
    );
    assert!(stderr.contains("exit status: 7"), "{stderr}");
    assert!(stderr.contains("model weights missing"), "{stderr}");
}

/// A downstream agent in `sh` that answers nothing until it is told to cancel: then it answers
/// `initialize` (id 1) and the prompt (id 2, `cancelled`).
const ANSWERS_AT_CANCEL: &str = r#"while read -r line; do case "$line" in *'"session/cancel"'*)
echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}'
echo '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}';; esac; done"#;

#[test]
fn end_of_input_with_requests_in_flight_still_answers_them_then_the_bridge_exits_0() {
    let scratch = Scratch::new("bridge-eof");
    let audit = scratch.path().join("bridge.jsonl");
    let mut bridge = StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_governance-bridge")),
        &["--", "sh", "-c", ANSWERS_AT_CANCEL],
        &[("AGENTACP_AUDIT_LOG", &audit)],
    );
    // What `printf '…initialize…\n…prompt…\n' | governance-bridge` does: both requests, then
    // end of input before either is answered.
    bridge.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}));
    bridge.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}}));
    bridge.close_stdin();
    // The bridge interrupts the running prompt downstream, as a server interrupts its turns,
    // and relays both answers before it exits.
    let initialized = bridge
        .recv_or_end()
        .expect("the initialize answer, before the bridge exits");
    assert_eq!(initialized["id"], 1, "{initialized}");
    assert_eq!(
        initialized["result"]["agentInfo"]["name"], "governance-bridge",
        "{initialized}"
    );
    let prompted = bridge
        .recv_or_end()
        .expect("the prompt's answer, before the bridge exits");
    assert_eq!(prompted["id"], 2, "{prompted}");
    assert_eq!(prompted["result"]["stopReason"], "cancelled", "{prompted}");
    assert!(bridge.recv_or_end().is_none(), "nothing more");
    let status = bridge.wait_exit();
    assert!(status.success(), "{status:?}: {}", bridge.stderr_to_end());
    agentacp::audit::verify_file(&audit).expect("the bridge's audit log verifies");
}

/// A downstream agent in `sh` that answers `initialize` with whether `SOME_KEY` reached it.
const REPORTS_SOME_KEY: &str = r#"read -r line
printf '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{},"_meta":{"key":"%s"}}}\n' "${SOME_KEY:-absent}"
while read -r line; do :; done"#;

/// Issue #15.5: the agent gets a cleared environment; `--pass-env NAME` passes one variable.
#[test]
fn pass_env_lets_a_named_variable_through_to_the_agent() {
    let scratch = Scratch::new("bridge-pass-env");
    let audit = scratch.path().join("bridge.jsonl");
    let key = scratch.path().join("the-key");
    let env = [("AGENTACP_AUDIT_LOG", audit.as_path()), ("SOME_KEY", key.as_path())];
    for (flags, expected) in [
        (&[][..], "absent".to_string()),
        (&["--pass-env", "SOME_KEY"][..], key.display().to_string()),
    ] {
        let args: Vec<&str> = flags
            .iter()
            .copied()
            .chain(["--", "sh", "-c", REPORTS_SOME_KEY])
            .collect();
        let mut bridge = StdioPeer::spawn(
            std::path::Path::new(env!("CARGO_BIN_EXE_governance-bridge")),
            &args,
            &env,
        );
        bridge.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}));
        let initialized = bridge.recv();
        assert_eq!(
            initialized["result"]["_meta"]["key"], expected,
            "{flags:?}: {initialized}"
        );
        bridge.close_stdin();
        assert!(
            bridge.finish().success(),
            "{flags:?}: the bridge exits 0 once the editor left"
        );
    }
}
