//! Issue #50: the tour built for Windows (`x86_64-pc-windows-gnu`) and run under Wine: our
//! client starts the governed example server (the tour's own program, `--serve`) as a child
//! process and drives it through every step, the audit log verified at the end, all on
//! Windows. The harness (`test_support::wine`) builds it into `target/windows` and skips
//! without Wine, mingw-w64 or the rustup target (failing under `AGENTACP_REQUIRE_PEERS`, as in
//! CI). Wine is not Windows: see docs/design/windows.md for what this shows and what not.

use test_support::wine::{self, Wine};

#[test]
fn the_windows_build_of_the_tour_passes_every_step_under_wine() {
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_for_windows("tour", None);
    let run = wine::output(&mut wine.command(&exe));
    let stdout = String::from_utf8_lossy(&run.stdout).replace("\r\n", "\n");
    let stderr = wine::quiet(&String::from_utf8_lossy(&run.stderr));
    let context = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(run.status.code(), Some(0), "{context}");
    assert!(stdout.contains("The tour passed: 15 steps"), "{context}");
    assert_eq!(stdout.matches("✓ passed").count(), 15, "{context}");
    for line in [
        "the agent exited cleanly (exit code: 0)",
        "stop  › cancelled",
        "write-file        approved by client:agentacp-tour",
        "delete-workspace  denied by governance",
        "the hash chain holds: ",
    ] {
        assert!(stdout.contains(line), "missing {line:?}: {context}");
    }
}
