//! `scaffold-aip conform`: exit status 2 for usage and start-up errors (the suite itself is
//! tested in acp-conform and the examples).

use scaffold_aip::cli::{EXIT_USAGE, run};

fn conform(args: &[&str]) -> (i32, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let status = run(
        ["scaffold-aip", "conform"].iter().chain(args).copied(),
        &mut out,
        &mut err,
    );
    (status, String::from_utf8_lossy(&err).into_owned())
}

#[test]
fn usage_and_start_up_errors_exit_2() {
    let (status, _) = conform(&[]);
    assert_eq!(status, EXIT_USAGE, "no agent given");
    let (status, err) = conform(&["--timeout-ms", "500", "--", "/nonexistent/acp-agent"]);
    assert_eq!(status, EXIT_USAGE, "{err}");
    assert!(err.contains("cannot start"), "{err}");
    let (status, err) = conform(&["--only", "no.such-check", "--", "true"]);
    assert_eq!(status, EXIT_USAGE, "{err}");
    let (status, err) = conform(&["--manifest", "/nonexistent/ACP.md", "--", "true"]);
    assert_eq!(status, EXIT_USAGE, "{err}");
}

#[test]
fn connect_takes_a_workspace_root_and_no_agent_command() {
    let (status, err) = conform(&[
        "--connect",
        "ws://127.0.0.1:9/acp",
        "--workspace-root",
        "/tmp",
        "--",
        "true",
    ]);
    assert_eq!(status, EXIT_USAGE, "--connect and an agent command: {err}");
    assert!(err.contains("--connect"), "{err}");
    let (status, err) = conform(&["--connect", "ws://127.0.0.1:9/acp"]);
    assert_eq!(status, EXIT_USAGE, "--connect without --workspace-root: {err}");
    assert!(err.contains("--workspace-root"), "{err}");
    let (status, err) = conform(&["--token", "secret", "--", "true"]);
    assert_eq!(status, EXIT_USAGE, "--token without --connect: {err}");
    let (status, err) = conform(&["--workspace-root", "/tmp", "--", "true"]);
    assert_eq!(status, EXIT_USAGE, "--workspace-root without --connect: {err}");
}

#[test]
fn an_unreachable_server_is_a_start_up_error_and_the_token_is_not_printed() {
    // A port nothing listens on (bound, then released).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let url = format!(
        "ws://127.0.0.1:{}/acp",
        closed.local_addr().expect("its address").port()
    );
    drop(closed);
    let (status, err) = conform(&["--connect", &url, "--token", "do-not-print", "--workspace-root", "/tmp"]);
    assert_eq!(status, EXIT_USAGE, "{err}");
    assert!(err.contains("cannot connect"), "{err}");
    assert!(!err.contains("do-not-print"), "{err}");
}

/// Issue #45.1: an agent that started a helper outside its group and session (`setsid`) and
/// exited at once left the helper running: the kit had nothing left to walk it from. The kit
/// adopts such orphans (child subreaper), and `scaffold-aip` ends them as it exits.
#[cfg(target_os = "linux")]
#[test]
fn what_an_agent_left_behind_ends_with_the_program() {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let pid_file = scratch.path().join("helper.pid");
    let agent = r#"setsid sleep 600 < /dev/null > /dev/null 2>&1 & echo $! > "$1""#;
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .args(["conform", "--timeout-ms", "2000", "--", "sh", "-c", agent, "agent"])
        .arg(&pid_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("scaffold-aip runs");
    assert_eq!(status.code(), Some(EXIT_USAGE), "the agent exits before `initialize`");
    let helper: u32 = std::fs::read_to_string(&pid_file)
        .expect("the agent wrote its helper's pid")
        .trim()
        .parse()
        .expect("a pid");
    let left = std::path::Path::new(&format!("/proc/{helper}")).exists();
    if left {
        let _ = std::process::Command::new("kill").arg(helper.to_string()).status();
    }
    assert!(!left, "the agent's helper {helper} outlived scaffold-aip");
}
