//! The tour binary, run as a user would: its exit code and the key lines of its transcript.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The tour bounds each step at 30 s; this only guards the test against a tour that hangs.
const TEST_TIMEOUT: Duration = Duration::from_secs(180);

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs the tour with `args`, killing it if it outlives [`TEST_TIMEOUT`].
fn tour(args: &[&str]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tour"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tour starts");
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let mut err = String::new();
        let _ = stdout.read_to_string(&mut out);
        let _ = stderr.read_to_string(&mut err);
        let _ = done.send((out, err));
    });
    let Ok((stdout, stderr)) = finished.recv_timeout(TEST_TIMEOUT) else {
        let _ = child.kill();
        panic!("the tour did not finish within {TEST_TIMEOUT:?}");
    };
    let status = child.wait().expect("the tour is reaped");
    Run {
        code: status.code(),
        stdout,
        stderr,
    }
}

/// The path printed after `prefix` on some line of `text`.
fn path_after(text: &str, prefix: &str) -> PathBuf {
    let line = text
        .lines()
        .find_map(|line| line.trim_start().strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{text}"));
    PathBuf::from(line.trim())
}

#[test]
fn the_tour_runs_every_step_and_verifies_the_audit() {
    let run = tour(&[]);
    assert_eq!(run.code, Some(0), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let out = &run.stdout;
    let steps = [
        "1. The manifest",
        "2. Start the agent and initialize",
        "3. Open a session",
        "4. Streamed text",
        "5. A tool governance allows",
        "6. A tool that needs approval",
        "7. A tool governance denies",
        "8. Cancel a turn",
        "9. Load the session again",
        "10. Modes",
        "11. A config option",
        "12. The slash command",
        "13. List, close and resume the session",
        "14. Close the connection",
        "15. Verify the audit log",
    ];
    for step in steps {
        assert!(
            out.lines().any(|line| line.starts_with(step)),
            "no step {step:?} in:\n{out}"
        );
    }
    assert_eq!(
        out.matches("✓ passed").count(),
        steps.len(),
        "every step passes:\n{out}"
    );
    for line in [
        "tier governance-aware",
        "delete-workspace  deny",
        "agent › Hello! Please say this back.",
        "permission: the agent asks to run write-file; the tour approves",
        "stop  › cancelled",
        "the hash chain holds: ",
        "read-file         auto",
        "write-file        approved by client:agentacp-tour",
        "delete-workspace  denied by governance",
        "mode  › ask",
        "agent › [code, fast] Which mode?",
        "agent › [ask, deep] Which model?",
        "agent › summary: ",
        "session/resume → mode ask",
        "The tour passed: 15 steps",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    assert!(!out.contains(" → {\""), "no wire messages without --wire:\n{out}");
    let audit_log = path_after(out, "the audit log goes to ");
    assert!(
        !audit_log.parent().expect("in the scratch folder").exists(),
        "the scratch folder is removed without --keep"
    );
}

#[test]
fn the_wire_flag_prints_the_messages() {
    let run = tour(&["--wire", "--keep"]);
    assert_eq!(run.code, Some(0), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let out = &run.stdout;
    let sent = |method: &str| {
        out.lines()
            .any(|line| line.starts_with("    → ") && line.contains(&format!("\"method\":\"{method}\"")))
    };
    for method in [
        "initialize",
        "session/new",
        "session/prompt",
        "session/cancel",
        "session/load",
        "session/set_mode",
        "session/set_config_option",
        "session/list",
        "session/close",
        "session/resume",
    ] {
        assert!(sent(method), "no {method} sent on the wire in:\n{out}");
    }
    assert!(
        out.lines()
            .any(|line| line.starts_with("    ← ") && line.contains("\"method\":\"session/request_permission\"")),
        "the permission request is on the wire:\n{out}"
    );
    let scratch = path_after(out, "The scratch folder is kept: ");
    let audit = std::fs::read_to_string(scratch.join("audit.jsonl")).expect("--keep keeps the audit log");
    assert!(audit.lines().count() > 3, "the kept log holds the session's records");
    std::fs::remove_dir_all(&scratch).expect("the test cleans up the kept folder");
}

/// A shell agent that completes the handshake but answers every prompt without saying
/// anything: the tour must notice at the first turn.
const SILENT_AGENT: &str = r#"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"agentInfo":{"name":"silent","version":"0"}}}\n' "$id" ;;
    *'"method":"session/new"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s1"}}\n' "$id" ;;
    *'"method":"session/prompt"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}\n' "$id" ;;
  esac
done
"#;

#[test]
fn a_misbehaving_agent_fails_the_tour_at_the_step_it_breaks() {
    let run = tour(&["--", "sh", "-c", SILENT_AGENT]);
    assert_eq!(run.code, Some(1), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("started silent 0"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("The tour FAILED at step 4 (Streamed text): expected the agent to say"),
        "{}",
        run.stdout
    );
    assert!(run.stderr.contains("tour: failed at step 4"), "{}", run.stderr);
    assert!(
        !run.stdout.contains("5. A tool"),
        "the tour stops at the first failing step"
    );
    assert!(
        run.stdout
            .contains("5. Close the connection\n  the agent exited cleanly"),
        "the agent is still stopped: {}",
        run.stdout
    );
}

#[test]
fn an_agent_that_exits_at_once_fails_the_tour_at_initialize() {
    let run = tour(&["--", "sh", "-c", "echo 'no such model' >&2; exit 3"]);
    assert_eq!(run.code, Some(1), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("The tour FAILED at step 2 (Start the agent and initialize)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("no such model"),
        "the agent's stderr is reported: {}",
        run.stdout
    );
}

/// `--protocol 2`: the same steps over ACP v2 (our client's v2 face in front of the governed
/// example serving 1 and 2), every step passing, the answer naming version 2 (issue #48).
#[test]
fn the_tour_runs_every_step_over_v2() {
    let run = tour(&["--protocol", "2"]);
    assert_eq!(run.code, Some(0), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("initialize: protocol version 2,"), "{}", run.stdout);
    assert_eq!(
        run.stdout.matches("✓ passed").count(),
        15,
        "every step passes:\n{}",
        run.stdout
    );
}
