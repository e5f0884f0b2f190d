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
