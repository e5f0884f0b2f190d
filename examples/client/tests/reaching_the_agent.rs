//! Issue #45.4 and #45.6: `acp-client` names the program it cannot start, and an `env_var`
//! auth method's variable set in the user's environment reaches the agent when the method is
//! named with `--auth` (else the error, or the auth hint, says which flag passes it).

use std::process::{Command, Output, Stdio};

/// The fake agent with an `env_var` method `key` reading this variable.
const AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../test-support/env_key_agent.py");
const VAR: &str = "AGENTACP_TEST_AUTH_KEY";

/// `acp-client ARGS -- python3 AGENT`, with `VAR` set to `key` when given (and never else).
fn client(args: &[&str], key: Option<&str>) -> (Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_acp-client"));
    command
        .env("AGENTACP_STATE_DIR", dir.path())
        .env_remove(VAR)
        .args(["--prompt", "hi", "--cwd"])
        .arg(dir.path())
        .args(args)
        .args(["--", "python3", AGENT])
        .stdin(Stdio::null());
    if let Some(key) = key {
        command.env(VAR, key);
    }
    let output = command.output().expect("acp-client runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stderr)
}

#[test]
fn a_program_that_cannot_be_started_is_named_with_the_cause() {
    let output = Command::new(env!("CARGO_BIN_EXE_acp-client"))
        .args(["--prompt", "hi", "--", "agentacp-surely-missing-agent"])
        .stdin(Stdio::null())
        .output()
        .expect("acp-client runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "acp-client: cannot start the agent `agentacp-surely-missing-agent`: no program of that name on PATH"
        ),
        "{stderr}"
    );
}

#[test]
fn a_method_named_with_auth_gets_its_variable_passed_when_it_is_set_here() {
    let (output, stderr) = client(&["--auth", "key"], Some("not-a-real-key"));
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("[auth] passing {VAR} to the agent for --auth key")),
        "{stderr}"
    );
    assert!(!stderr.contains("not-a-real-key"), "never the value: {stderr}");
}

#[test]
fn a_method_named_with_auth_whose_variable_is_not_set_is_an_error_naming_it() {
    let (output, stderr) = client(&["--auth", "key"], None);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the auth method `key` reads {VAR} from the agent's environment; {VAR} is not set: export {VAR}=…"
        )),
        "{stderr}"
    );
}

#[test]
fn without_auth_the_hint_names_the_flags_that_pass_a_variable_set_here() {
    let (output, stderr) = client(&[], Some("not-a-real-key"));
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "pass it with `--env {VAR}`; or name the method with `--auth key`"
        )),
        "{stderr}"
    );
    // Passed with --env, the default picks the method by itself.
    let (output, stderr) = client(&["--env", VAR], Some("not-a-real-key"));
    assert!(output.status.success(), "{stderr}");
}
