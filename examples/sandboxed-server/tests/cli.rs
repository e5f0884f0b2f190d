//! Issue #45.9: `sandboxed-server` ignored `--listen` and `--help` — and served stdio instead,
//! opening (creating) its audit log. It serves stdio only: `--help` prints its usage, any
//! argument is refused, and neither touches the audit log; nor does a start the sandbox
//! refuses.

use std::process::{Command, Stdio};

/// Runs the server with `args`, its audit log and state folder in a temporary folder; the
/// exit status, stdout, stderr, and whether anything was written there.
fn run(args: &[&str]) -> (Option<i32>, String, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sandboxed-server"))
        .args(args)
        .env("AGENTACP_STATE_DIR", dir.path().join("state"))
        .env("AGENTACP_AUDIT_LOG", dir.path().join("audit.jsonl"))
        .env("AGENTACP_WORKSPACE_ROOT", dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("sandboxed-server runs");
    let written = std::fs::read_dir(dir.path()).unwrap().next().is_some();
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.code(), text(output.stdout), text(output.stderr), written)
}

#[test]
fn help_prints_the_usage_and_opens_nothing() {
    let (code, stdout, stderr, written) = run(&["--help"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("Usage: sandboxed-server"), "{stdout}");
    assert!(stdout.contains("over stdio only"), "{stdout}");
    assert!(!written, "--help wrote to the state folder or the audit log");
}

#[test]
fn listen_is_refused_and_opens_nothing() {
    let (code, stdout, stderr, written) = run(&["--listen", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("error: unexpected argument '--listen' found"),
        "{stderr}"
    );
    assert!(
        !written,
        "a refused command line wrote to the state folder or the audit log"
    );
}

/// A start the sandbox refuses (here: the state folder and the audit log inside the
/// workspace, the program's one writable mount) opens nothing: the sandbox is planned before
/// the audit log and the session store are opened, so no empty log or session folder is left.
#[test]
fn a_start_the_sandbox_refuses_opens_nothing() {
    let (code, stdout, stderr, written) = run(&[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("sandbox"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !written,
        "a start the sandbox refused wrote to the state folder or the audit log"
    );
}
