//! `acp-client`'s own commands (`/mode`, `/config`, `/sessions`, `/resume`, `/commands`)
//! against the fake agent of agentacp's tests (`agentacp/tests/fake/session_agent.py`), with
//! every feature offered and with none.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `acp-client` against the fake agent in `mode`, the lines of `input` on its stdin;
/// its stdout, its stderr, and the methods the agent received. Bounded: killed after a minute.
fn run(mode: &str, input: &str) -> (String, String, Vec<String>) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../agentacp/tests/fake/session_agent.py");
    let seen = root.join("seen.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_acp-client"))
        .env("AGENTACP_AUDIT_LOG", root.join("audit.jsonl"))
        .arg("--cwd")
        .arg(&root)
        .arg("--")
        .arg("python3")
        .arg(&script)
        .arg(mode)
        .arg(&seen)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("acp-client runs");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("acp-client did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let seen = std::fs::read_to_string(seen).unwrap_or_default();
    (stdout, stderr, seen.lines().map(str::to_string).collect())
}

#[test]
fn modes_config_sessions_resume_and_the_agents_commands() {
    let input = "/commands\n/mode\n/mode code\n/mode\n/config\n/config model smart\n/config think maybe\n\
                 /sessions\n/review the diff\n/resume old-1\nhello\n";
    let (stdout, stderr, seen) = run("full", input);
    // The agent's commands: once when they arrived, once for `/commands`.
    assert_eq!(
        stdout.matches("[commands] the agent's slash commands").count(),
        2,
        "{stdout}"
    );
    assert!(
        stdout.contains("[commands]   /plan <what to plan> — Plan the work"),
        "{stdout}"
    );
    assert!(stdout.contains("[mode] * ask: Ask"), "{stdout}");
    assert!(stdout.contains("[mode] now code"), "{stdout}");
    assert!(stdout.contains("[mode] * code: Code — Writes code"), "{stdout}");
    assert!(
        stdout.contains("[config] model (Model) = fast  [fast, smart]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[config] think (Think) = false  [true, false]"),
        "{stdout}"
    );
    assert!(stdout.contains("[config] model set"), "{stdout}");
    assert!(stderr.contains("`think` is a boolean option"), "{stderr}");
    for n in 0..5 {
        assert!(
            stdout.contains(&format!("[sessions]   old-{n}: Session {n}")),
            "{stdout}"
        );
    }
    // The agent's command is a prompt, as text.
    assert!(stdout.contains("prompted: /review the diff"), "{stdout}");
    assert!(stdout.contains("[sessions] resumed old-1"), "{stdout}");
    assert!(stdout.contains("prompted: hello"), "{stdout}");
    let methods: Vec<&str> = seen
        .iter()
        .map(String::as_str)
        .filter(|m| m.starts_with("session/"))
        .collect();
    assert_eq!(
        methods,
        [
            "session/new",
            "session/set_mode",
            "session/set_config_option",
            "session/list",
            "session/list",
            "session/list",
            "session/prompt",
            "session/resume",
            "session/prompt"
        ]
    );
}

#[test]
fn what_the_agent_does_not_offer_is_said_and_nothing_is_sent() {
    let input = "/mode\n/mode code\n/config\n/config model smart\n/sessions\n/resume old-1\n/commands\n/x\n";
    let (_, stderr, seen) = run("bare", input);
    assert!(
        stderr.contains("[client] the agent offers no modes in this session"),
        "{stderr}"
    );
    assert!(stderr.contains("does not offer `session/set_mode`"), "{stderr}");
    assert!(
        stderr.contains("the agent offers no config options in this session"),
        "{stderr}"
    );
    assert!(
        stderr.contains("does not offer `session/set_config_option`"),
        "{stderr}"
    );
    assert!(stderr.contains("does not offer `session/list`"), "{stderr}");
    assert!(stderr.contains("does not offer `session/resume`"), "{stderr}");
    assert!(stderr.contains("the agent has offered no slash commands"), "{stderr}");
    assert_eq!(seen, ["initialize", "session/new", "session/prompt"], "{stderr}");
}
