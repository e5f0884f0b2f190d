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
