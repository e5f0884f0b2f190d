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
    // A port nothing listens on (bound, then released), over WebSocket and Streamable HTTP.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = closed.local_addr().expect("its address").port();
    drop(closed);
    for scheme in ["ws", "http"] {
        let url = format!("{scheme}://127.0.0.1:{port}/acp");
        let (status, err) = conform(&["--connect", &url, "--token", "do-not-print", "--workspace-root", "/tmp"]);
        assert_eq!(status, EXIT_USAGE, "{err}");
        assert!(err.contains(&format!("cannot connect to {url}")), "{err}");
        assert!(!err.contains("do-not-print"), "{err}");
    }
}

/// Issue #45.1: an agent that started a helper outside its group and session (`setsid`) and
/// exited at once left the helper running: the kit had nothing left to walk it from. The kit
/// adopts such orphans (child subreaper), and `scaffold-aip` ends them as it exits.
#[cfg(target_os = "linux")]
#[test]
fn what_an_agent_left_behind_ends_with_the_program() {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let pid_file = scratch.path().join("helper.pid");
    let agent = r#"setsid sleep 600 < /dev/null > /dev/null 2>&1 & echo $! $(readlink /proc/self/ns/pid) > "$1""#;
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .args(["conform", "--timeout-ms", "2000", "--", "sh", "-c", agent, "agent"])
        .arg(&pid_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("scaffold-aip runs");
    assert_eq!(status.code(), Some(EXIT_USAGE), "the agent exits before `initialize`");
    let (helper, namespace) = helper_written(&pid_file);
    let left = running_as(helper, &namespace);
    for pid in &left {
        let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
    }
    assert!(left.is_empty(), "the agent's helper {helper} outlived scaffold-aip");
}

/// The pid the agent wrote of its helper, and the PID namespace it saw it in.
#[cfg(target_os = "linux")]
fn helper_written(file: &std::path::Path) -> (u32, String) {
    let text = std::fs::read_to_string(file).expect("the agent wrote its helper's pid");
    let (pid, namespace) = text.trim().split_once(' ').expect("a pid and a namespace");
    (pid.parse().expect("a pid"), namespace.to_string())
}

/// The PID namespace of process `pid` (`self`: ours).
#[cfg(target_os = "linux")]
fn namespace_of(pid: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).map_or_else(|_| String::new(), |link| link.display().to_string())
}

/// What still runs (no zombie) of what the agent saw as `pid` in PID namespace `namespace`:
/// that process where it is ours; else (a kit run as root starts agents in a namespace of
/// their own) every process left in that namespace.
#[cfg(target_os = "linux")]
fn running_as(pid: u32, namespace: &str) -> Vec<u32> {
    let running = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_ascii_whitespace().next())
                .is_some_and(|state| state != "Z" && state != "X")
        })
    };
    if namespace == namespace_of("self") {
        return [pid].into_iter().filter(|pid| running(*pid)).collect();
    }
    let Ok(folder) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    (folder.flatten())
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|host| namespace_of(&host.to_string()) == namespace && running(*host))
        .collect()
}

/// Issue #44.10: `kill -9` of `scaffold-aip conform` left its agent running (no death
/// signal), and with it what the agent started in a session of its own. Where the kit is
/// root (as here and in CI), the agent dies with it, in a PID namespace that takes everything
/// it started along.
#[cfg(target_os = "linux")]
#[test]
fn what_an_agent_started_ends_when_the_kit_is_killed() {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|line| line.split_ascii_whitespace().take(3).eq(["Uid:", "0", "0"]))
    });
    if !root {
        eprintln!("skipped: only a kit run as root ends what the agent started after kill -9");
        return;
    }
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let pid_file = scratch.path().join("helper.pid");
    // Never answers `initialize`: the kit waits for it (up to a minute).
    let agent = r#"setsid sleep 600 < /dev/null > /dev/null 2>&1 & echo $! $(readlink /proc/self/ns/pid) > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 600"#;
    let mut kit = std::process::Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .args(["conform", "--timeout-ms", "60000", "--", "sh", "-c", agent, "agent"])
        .arg(&pid_file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("scaffold-aip runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !pid_file.exists() {
        assert!(std::time::Instant::now() < deadline, "the agent wrote no pid");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (helper, namespace) = helper_written(&pid_file);
    assert!(
        kit.try_wait().expect("a status").is_none(),
        "the kit still waits for the agent"
    );
    kit.kill().expect("SIGKILL");
    kit.wait().expect("reaped");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut left = running_as(helper, &namespace);
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = running_as(helper, &namespace);
    }
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(left.is_empty(), "left running after kill -9 of scaffold-aip: {left:?}");
}
