//! `acp-client` from the command line, against an agent that fails to start.

use std::process::Command;

#[test]
fn an_agent_that_exits_at_once_is_reported_with_its_status_and_stderr() {
    let output = Command::new(env!("CARGO_BIN_EXE_acp-client"))
        .args(["--prompt", "hi", "--", "sh", "-c", "echo 'no API key' >&2; exit 3"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("acp-client runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("acp-client: the agent exited (exit status: 3)"),
        "{stderr}"
    );
    assert!(stderr.contains("no API key"), "{stderr}");
}
