//! Issue #50: the echo server built for Windows (`x86_64-pc-windows-gnu`) and run under Wine,
//! driven over stdio from Linux as an editor drives it: `initialize`, `session/new`, a prompt
//! answered with streamed updates, a turn cancelled while it streams, and end of input ending
//! the process with exit code 0; its audit log, written on Windows, verified here. Then the
//! conformance kit against `wine echo-server.exe`.
//!
//! The Windows program sees the Unix file system as Wine's `Z:` drive, so every path it is
//! given is written so (`Z:\tmp\…`). The harness (`test_support::wine`) builds the program
//! into `target/windows` and skips without Wine, mingw-w64 or the rustup target (failing
//! under `AGENTACP_REQUIRE_PEERS`, as in CI). Wine is not Windows: see
//! docs/design/windows.md for what this shows and what it does not.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use std::path::Path;

use serde_json::json;
use stdio_peer::{Scratch, StdioPeer};
use test_support::wine::{self, Wine};

/// The echo server under Wine, its workspace root and state folder the scratch folder.
fn start(wine: &Wine, exe: &Path, scratch: &Scratch) -> StdioPeer {
    let folder = wine::windows_path(scratch.path());
    StdioPeer::start(
        wine.command(exe)
            .current_dir(scratch.path())
            .env("AGENTACP_WORKSPACE_ROOT", &folder)
            .env("AGENTACP_STATE_DIR", &folder)
            .env("AGENTACP_LOG", "info"),
    )
}

#[test]
fn the_windows_build_serves_a_session_over_stdio_under_wine() {
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_for_windows("echo-server", None);
    let scratch = Scratch::new("echo-server-wine");
    let mut server = start(&wine, &exe, &scratch);
    let folder = wine::windows_path(scratch.path());

    let (initialized, session) = server.open_session(Path::new(&folder));
    assert_eq!(initialized["agentInfo"]["name"], "echo-server", "{initialized}");
    assert_eq!(initialized["_meta"]["aip44"]["tier"], "basic", "{initialized}");

    let turn = server.prompt(2, &session, "hello from Linux");
    let said: String = turn
        .iter()
        .filter(|message| message["method"] == "session/update")
        .filter_map(|message| message["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "hello from Linux", "the turn: {turn:?}");
    assert_eq!(turn.last().expect("the answer")["result"]["stopReason"], "end_turn");

    // A turn that streams (`tick 0`, `tick 1`, …) until cancelled: cancelled after three updates.
    let forever = json!([{"type": "text", "text": "/forever"}]);
    server.send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": forever}}));
    for tick in 0..3 {
        let update = server.recv();
        assert_eq!(update["method"], "session/update", "{update}");
        let text = update["params"]["update"]["content"]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains(&format!("tick {tick}")), "{update}");
    }
    server.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}));
    let rest = server.until_answer(3);
    let answer = rest.last().expect("the answer");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");

    // End of input ends the server, cleanly.
    server.close_stdin();
    let status = server.wait_exit();
    let stderr = wine::quiet(&server.stderr_to_end());
    assert_eq!(status.code(), Some(0), "exit status {status}; stderr:\n{stderr}");
    assert!(stderr.contains("serving"), "the log goes to stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "stderr:\n{stderr}");

    // The audit log the Windows program wrote (lifecycle records) is a valid chain here.
    let log = scratch.path().join("audit.jsonl");
    let summary = acp_audit::verify_file(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    assert!(summary.records >= 2, "the session's records: {summary:?}");
}

/// The conformance kit (`scaffold-aip conform`'s library) starts `wine echo-server.exe` as its
/// agent, with the manifest, naming every path on Wine's `Z:` drive (`Config::wine_drive`).
#[test]
fn the_windows_build_under_wine_passes_the_conformance_suite() {
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_for_windows("echo-server", None);
    let command = wine.command(&exe);
    let mut argv = vec![command.get_program().to_os_string()];
    argv.extend(command.get_args().map(|arg| arg.to_os_string()));
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md");
    let mut config = acp_conform::Config {
        audit_log: Some(acp_conform::manifest_audit(&manifest).expect("the manifest resolves")),
        expected_initialize: Some(acp_conform::manifest_initialize(&manifest).expect("the manifest explains")),
        timeout: std::time::Duration::from_secs(30),
        wine_drive: Some('Z'),
        ..acp_conform::Config::new(argv)
    };
    for (name, value) in command.get_envs() {
        config
            .launch
            .env
            .push((name.to_os_string(), value.unwrap_or_default().to_os_string()));
    }
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(acp_conform::failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    // As on Linux (tests/conform.rs): only the tool call checks do not apply at tier basic.
    assert_eq!(
        acp_conform::skipped(&verdicts),
        vec![
            "audit.tool-calls",
            "audit.denied-not-on-wire",
            "audit.rejected-not-run",
            "audit.unanswered-not-run"
        ],
        "{verdicts:#?}"
    );
}

/// Without `AGENTACP_STATE_DIR`, `XDG_STATE_HOME` or `HOME` (as on Windows), the state folder is
/// `%LOCALAPPDATA%\agentacp\<id>`: the audit log is written there.
#[test]
fn the_windows_build_keeps_its_state_under_local_app_data() {
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_for_windows("echo-server", None);
    let scratch = Scratch::new("echo-server-wine-state");
    let folder = wine::windows_path(scratch.path());
    let mut server = StdioPeer::start(
        wine.command(&exe)
            .current_dir(scratch.path())
            .env("AGENTACP_WORKSPACE_ROOT", &folder)
            .env_remove("AGENTACP_STATE_DIR")
            .env_remove("XDG_STATE_HOME")
            .env_remove("HOME"),
    );
    let (_, session) = server.open_session(Path::new(&folder));
    server.prompt(2, &session, "where is my state?");
    assert!(server.finish().success());
    // Wine's profile folders: `drive_c/users/<user>/AppData/Local` in the prefix.
    let users = wine.prefix().join("drive_c/users");
    let logs: Vec<_> = std::fs::read_dir(&users)
        .unwrap_or_else(|e| panic!("{}: {e}", users.display()))
        .map(|user| {
            user.unwrap()
                .path()
                .join("AppData/Local/agentacp/echo-server/audit.jsonl")
        })
        .filter(|log| log.is_file())
        .collect();
    assert_eq!(
        logs.len(),
        1,
        "one audit log under a user's AppData/Local/agentacp/echo-server: {logs:?}"
    );
    let summary = acp_audit::verify_file(&logs[0]).unwrap_or_else(|e| panic!("{}: {e}", logs[0].display()));
    assert!(summary.records >= 2, "the session's records: {summary:?}");
}
