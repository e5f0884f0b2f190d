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

/// `AGENTACP_LOG`, else `RUST_LOG`, sets what the server logs to stderr (stdout stays the
/// protocol channel); a value that is not a filter is reported on stderr, naming the variable,
/// and the server still serves.
#[test]
fn agentacp_log_filters_stderr_and_a_bad_filter_is_reported() {
    for (variable, setting, expected) in [
        ("AGENTACP_LOG", "info", " INFO agentacp::server: serving"),
        ("AGENTACP_LOG", "warn,agentacp=loud", "AGENTACP_LOG is not a log filter"),
        ("RUST_LOG", "info", " INFO agentacp::server: serving"),
        ("RUST_LOG", "warn,agentacp=loud", "RUST_LOG is not a log filter"),
    ] {
        let scratch = Scratch::new("echo-server-log-test");
        let mut server = StdioPeer::spawn(
            std::path::Path::new(env!("CARGO_BIN_EXE_echo-server")),
            &[],
            &[
                ("AGENTACP_WORKSPACE_ROOT", scratch.path()),
                ("AGENTACP_STATE_DIR", scratch.path()),
                // Blank is unset: the RUST_LOG cases hold even if the caller sets AGENTACP_LOG.
                ("AGENTACP_LOG", std::path::Path::new("")),
                (variable, std::path::Path::new(setting)),
            ],
        );
        let (initialized, _session) = server.open_session(scratch.path());
        assert_eq!(initialized["agentInfo"]["name"], "echo-server", "{initialized}");
        server.close_stdin();
        assert!(server.wait_exit().success());
        let stderr = server.stderr_to_end();
        assert!(
            stderr.contains(expected),
            "{variable}={setting}: stderr lacks `{expected}`:\n{stderr}"
        );
        if setting.starts_with("warn") {
            assert!(
                !stderr.contains(" INFO "),
                "{variable}={setting} logged info:\n{stderr}"
            );
        }
    }
}
