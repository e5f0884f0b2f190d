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

/// An agent in `sh` that writes the first line it reads (the editor's `initialize`) to the
/// file `$1`, then never answers: it becomes `sleep $2` (found by that in `/proc`).
const NEVER_ANSWERS: &str = r#"read -r line; printf '%s\n' "$line" > "$1"; exec sleep "$2""#;

/// The agent's `sleep` duration: a day, with this test process's id as the fraction, so that
/// no other process on the machine (another run of these tests) has the same command line.
fn never_answering_duration() -> String {
    format!("86399.{}", std::process::id())
}

/// Whether the `sleep` the agent [`NEVER_ANSWERS`] becomes is still running.
fn never_answering_agent_runs() -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let wanted = format!("sleep\0{}\0", never_answering_duration());
    entries
        .flatten()
        .any(|entry| std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| cmdline == wanted.as_bytes()))
}

/// SIGTERM while the agent had not answered `initialize`: the bridge waited out the request
/// timeout (60 s) before it stopped the agent and exited. The `initialize` now gets the
/// shutdown grace, as a running prompt does, and the agent is stopped.
#[test]
fn sigterm_before_the_agent_answers_initialize_ends_the_bridge_and_the_agent() {
    let scratch = Scratch::new("bridge-sigterm-initialize");
    let audit = scratch.path().join("bridge.jsonl");
    let seen = scratch.path().join("seen");
    let seen_arg = seen.to_str().expect("a UTF-8 folder");
    let mut bridge = StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_governance-bridge")),
        &[
            "--",
            "sh",
            "-c",
            NEVER_ANSWERS,
            "agent",
            seen_arg,
            &never_answering_duration(),
        ],
        &[
            ("AGENTACP_AUDIT_LOG", &audit),
            // Well past the bound `wait_exit` puts on the exit below.
            ("AGENTACP_REQUEST_TIMEOUT_MS", std::path::Path::new("120000")),
        ],
    );
    bridge.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}));
    // Once the agent has the request, the bridge is running (its signal handlers set).
    let deadline = std::time::Instant::now() + stdio_peer::TIMEOUT;
    while !std::fs::read_to_string(&seen).is_ok_and(|line| line.contains("initialize")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never got `initialize`; stderr: {}",
            bridge.stderr_so_far()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &bridge.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    // Bounded by `stdio_peer::TIMEOUT` (30 s), well under the request timeout (120 s).
    let status = bridge.wait_exit();
    let stderr = bridge.stderr_to_end();
    assert!(
        status.success(),
        "SIGTERM ends the bridge as end of input does: {status:?}; {stderr}"
    );
    assert!(!never_answering_agent_runs(), "the agent outlived the bridge; {stderr}");
    let answer = bridge.recv_or_end().expect("the editor's `initialize` is answered");
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer.get("error").is_some(), "{answer}");
}
