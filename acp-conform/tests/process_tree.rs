//! Issue #45.1: the kit ended only the agent's own process. An agent that started helpers (in
//! its process group, or out of it with `setsid`) and then exec'd the real agent left them
//! running after every check. Each check's agent is now ended with its whole tree.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::time::Duration;

use acp_conform::Config;

/// Whether process `pid` still runs (a zombie does not: it runs nothing).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_ascii_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The PID namespace of `pid` (`self`: ours).
fn namespace_of(pid: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).map_or_else(|_| String::new(), |link| link.display().to_string())
}

/// Whether what the agent saw as `pid` in its PID namespace `namespace` still runs: where
/// the kit is root, the agent runs in a namespace of its own, whose pids are not ours; that
/// namespace must then be empty.
fn still_running(pid: u32, namespace: &str) -> bool {
    if namespace == namespace_of("self") {
        return running(pid);
    }
    let Ok(folder) = std::fs::read_dir("/proc") else {
        return false;
    };
    folder
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .any(|host| namespace_of(&host.to_string()) == namespace && running(host))
}

/// Starts two helpers, one in the agent's group and one in a session of its own, writes their
/// pids (and the PID namespace they are seen in) to `pids`, then becomes an agent that never
/// answers (`cat`).
fn helper_agent(pids: &Path) -> Vec<std::ffi::OsString> {
    let script = format!(
        "ns=$(readlink /proc/self/ns/pid); sleep 600 & echo $! $ns >> '{0}'; setsid sleep 600 & echo $! $ns >> '{0}'; exec cat > /dev/null",
        pids.display()
    );
    ["sh", "-c", &script].iter().map(Into::into).collect()
}

#[test]
fn the_agents_helpers_end_with_each_check() {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let pids = scratch.path().join("pids");
    let config = Config {
        timeout: Duration::from_millis(1000),
        ..Config::new(helper_agent(&pids))
    };
    // The preflight (`initialize`) is never answered: the run stops there, its agent ended.
    let error = acp_conform::run(config).expect_err("an agent that never answers fails the preflight");
    assert!(!error.to_string().is_empty());
    let started: Vec<(u32, String)> = std::fs::read_to_string(&pids)
        .expect("the agent wrote its helpers' pids")
        .lines()
        .map(|line| {
            let (pid, namespace) = line.trim().split_once(' ').expect("a pid and a namespace");
            (pid.parse().expect("a pid"), namespace.to_string())
        })
        .collect();
    assert_eq!(started.len(), 2, "two helpers: {started:?}");
    let left: Vec<(u32, String)> = (started.into_iter())
        .filter(|(pid, namespace)| still_running(*pid, namespace))
        .collect();
    assert!(
        left.is_empty(),
        "helpers of the agent still running after the check: {left:?}"
    );
}
