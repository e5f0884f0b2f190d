//! Issue #45.4: a bridge whose agent cannot be started or reached answers the editor's
//! `initialize` with an error naming the program or URL and the cause, then exits 1 with the
//! same on stderr (before, it exited without a word and the editor waited its whole timeout).
//! Issue #45.6: the editor's `authenticate` with an `env_var` method whose variable the bridge
//! does not pass is answered with the `--pass-env` flag that passes it.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use serde_json::{Value, json};
use stdio_peer::{Scratch, StdioPeer};

fn bridge(args: &[&str], scratch: &Scratch) -> StdioPeer {
    let audit = scratch.path().join("bridge.jsonl");
    let env = [
        ("AGENTACP_AUDIT_LOG", audit.as_path()),
        ("AGENTACP_STATE_DIR", scratch.path()),
    ];
    StdioPeer::spawn(Path::new(env!("CARGO_BIN_EXE_governance-bridge")), args, &env)
}

/// Sends `initialize`, expects an error naming `what`, then the bridge's exit (stdin still
/// open: it does not wait for the editor to leave) with `what` on stderr.
fn initialize_is_answered_with_the_reason(args: &[&str], what: &str) {
    let scratch = Scratch::new("bridge-unreachable");
    let mut bridge = bridge(args, &scratch);
    bridge.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}));
    let answer = bridge.recv();
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("governance-bridge cannot "), "{answer}");
    assert!(message.contains(what), "{answer}");
    let status = bridge.wait_exit();
    let stderr = bridge.stderr_to_end();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "governance-bridge: {}",
            &message["governance-bridge ".len()..]
        )),
        "{stderr}"
    );
}

#[test]
fn a_missing_program_is_named_to_the_editor_and_on_stderr() {
    initialize_is_answered_with_the_reason(
        &["--", "agentacp-surely-missing-agent"],
        "the agent `agentacp-surely-missing-agent`: no program of that name on PATH",
    );
}

#[test]
fn a_refused_connection_is_named_to_the_editor_and_on_stderr() {
    // A port nothing listens on any more.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("ws://127.0.0.1:{port}/acp");
    initialize_is_answered_with_the_reason(&["--connect", &url], &format!("the agent at {url}: "));
}

/// Over WebSocket (the upgrade refused) and over Streamable HTTP (issue #47: the first
/// request refused) alike.
#[test]
fn a_401_is_named_to_the_editor_and_on_stderr() {
    for scheme in ["ws", "http"] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("{scheme}://{}/acp", listener.local_addr().unwrap());
        // Answers one request with 401, as a server with tokens answers a wrong one.
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        });
        initialize_is_answered_with_the_reason(
            &["--connect", &url],
            &format!("the agent at {url}: it refused the connection: 401"),
        );
    }
}

const AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../test-support/env_key_agent.py");
const VAR: &str = "AGENTACP_TEST_AUTH_KEY";

/// `initialize` then `authenticate` with the agent's `env_var` method: the answer.
fn authenticate_through(flags: &[&str], scratch: &Scratch) -> Value {
    let audit = scratch.path().join("bridge.jsonl");
    let key = scratch.path().join("not-a-real-key");
    let env = [
        ("AGENTACP_AUDIT_LOG", audit.as_path()),
        ("AGENTACP_STATE_DIR", scratch.path()),
        (VAR, key.as_path()),
    ];
    let args: Vec<&str> = flags.iter().copied().chain(["--", "python3", AGENT]).collect();
    let mut bridge = StdioPeer::spawn(Path::new(env!("CARGO_BIN_EXE_governance-bridge")), &args, &env);
    bridge.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}));
    let initialized = bridge.recv();
    assert!(initialized["result"]["authMethods"].is_array(), "{initialized}");
    bridge.send(json!({"jsonrpc": "2.0", "id": 2, "method": "authenticate", "params": {"methodId": "key"}}));
    let answer = bridge.recv();
    assert!(bridge.finish().success());
    answer
}

#[test]
fn an_env_var_method_whose_variable_is_not_passed_is_answered_with_the_pass_env_flag() {
    let scratch = Scratch::new("bridge-auth-env");
    let refused = authenticate_through(&[], &scratch);
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "{VAR} is set here but not passed to the agent: pass it with `--pass-env {VAR}`"
        )),
        "{refused}"
    );
    assert!(!message.contains("not-a-real-key"), "never the value: {refused}");
    let passed = authenticate_through(&["--pass-env", VAR], &scratch);
    assert_eq!(passed["result"], json!({}), "{passed}");
}
