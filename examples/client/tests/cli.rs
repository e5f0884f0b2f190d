//! `acp-client` from the command line, against agents that fail (to start, or a turn), and
//! what the agents it starts see.

use std::process::Command;

/// `acp-client --prompt hi` with the agent `sh -c script` and `env` added to its
/// environment, which must fail (exit status 1); returns its stderr.
fn failing_agent_stderr(script: &str, env: &[(&str, &str)]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_acp-client"))
        .args(["--prompt", "hi", "--", "sh", "-c", script])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("acp-client runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    stderr
}

#[test]
fn an_agent_that_exits_at_once_is_reported_with_its_status_and_stderr() {
    let stderr = failing_agent_stderr("echo 'no API key' >&2; exit 3", &[]);
    assert!(
        stderr.contains("acp-client: the agent exited (exit status: 3)"),
        "{stderr}"
    );
    assert!(stderr.contains("no API key"), "{stderr}");
}

/// Issue #45.9: the agent `acp-client` starts sees the user's XDG base folders, so an agent
/// that keeps its state in `$XDG_STATE_HOME` does not fall back to `~/.local/state`.
#[test]
fn the_agent_sees_the_users_xdg_base_folders() {
    // The agent prints what it sees on stderr and exits: the client reports its stderr.
    let script =
        r#"echo "state=$XDG_STATE_HOME config=$XDG_CONFIG_HOME data=$XDG_DATA_HOME cache=$XDG_CACHE_HOME" >&2; exit 3"#;
    let env = [
        ("XDG_STATE_HOME", "/xdg/state"),
        ("XDG_CONFIG_HOME", "/xdg/config"),
        ("XDG_DATA_HOME", "/xdg/data"),
        ("XDG_CACHE_HOME", "/xdg/cache"),
    ];
    let stderr = failing_agent_stderr(script, &env);
    assert!(
        stderr.contains("state=/xdg/state config=/xdg/config data=/xdg/data cache=/xdg/cache"),
        "{stderr}"
    );
}

/// An agent that offers a command with a description of three lines, then answers a prompt
/// with some text and an error.
const FAILING_AGENT: &str = r#"
import json, sys
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
def update(u):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": u}})
for line in sys.stdin:
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1, "agentCapabilities": {},
              "agentInfo": {"name": "failing", "version": "0"}}})
    elif method == "session/new":
        update({"sessionUpdate": "available_commands_update", "availableCommands": [
            {"name": "plan", "description": "Plan the work:\nfirst the steps,\nthen their order"}]})
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "partial answer"}})
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "the model went away"}})
"#;

/// Issue #45.9: the client's error was appended to the agent's last text, on its line, and
/// the lines of a multi-line command description after the first lost their `[commands]`
/// prefix. stdout and stderr go to one file here, as on a terminal.
#[test]
fn an_error_starts_its_own_line_and_every_description_line_keeps_its_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("failing_agent.py");
    std::fs::write(&script, FAILING_AGENT).unwrap();
    let transcript = dir.path().join("transcript.txt");
    let file = std::fs::File::create(&transcript).unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_acp-client"))
        .env("AGENTACP_STATE_DIR", dir.path())
        .args(["--prompt", "hi", "--cwd"])
        .arg(dir.path())
        .arg("--")
        .arg("python3")
        .arg(&script)
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .expect("acp-client runs");
    let text = std::fs::read_to_string(&transcript).unwrap();
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "[commands]   /plan — Plan the work:\n[commands]     first the steps,\n[commands]     then their order\n"
        ),
        "{text}"
    );
    assert!(text.contains("partial answer\nacp-client: "), "{text}");
    assert!(text.contains("the model went away"), "{text}");
}

/// The runtime's logs went nowhere: `acp-client` installed no logger, so a warning such as
/// the one for a bad `AGENTACP_CONTAIN_TREE` was never shown. It is on stderr now, and stdout
/// stays the conversation's.
#[test]
fn the_runtimes_warnings_are_on_stderr_and_not_on_stdout() {
    let output = Command::new(env!("CARGO_BIN_EXE_acp-client"))
        .args(["--prompt", "hi", "--", "sh", "-c", "exit 3"])
        .env("AGENTACP_CONTAIN_TREE", "bogus")
        .env("AGENTACP_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("acp-client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let warning = r#"AGENTACP_CONTAIN_TREE is "bogus", which is neither "off" nor "auto""#;
    assert!(stderr.contains(warning), "stderr: {stderr}");
    assert!(!stdout.contains("AGENTACP_CONTAIN_TREE"), "stdout: {stdout}");
}
