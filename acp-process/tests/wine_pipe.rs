//! Issue #50: `acp_process::pipe::create_private` (the security descriptor of agentacp's bridge
//! pipe, `unsafe` Windows calls) run under Wine: `examples/private_pipe.rs` built for Windows
//! makes a pipe, is refused a second first instance of its name, connects to it as the same
//! user and passes a line. What this cannot show: that another user is refused (a test runs as
//! one user, and Wine's access checks are its own), and that Windows refuses a second first
//! instance of a name (Wine 8.0 makes it: the example is told `--wine`, and says so). Skips without Wine, mingw-w64 or the
//! rustup target (fails under `AGENTACP_REQUIRE_PEERS`, as in CI).

use test_support::wine::{self, Wine};

#[test]
fn a_private_pipe_is_made_and_carries_a_line_under_wine() {
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_example_for_windows("acp-process", "private_pipe");
    let run = wine::output(wine.command(&exe).arg("--wine"));
    let stdout = String::from_utf8_lossy(&run.stdout).replace("\r\n", "\n");
    let stderr = wine::quiet(&String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let steps = |prefix: &str| stdout.lines().filter(|line| line.starts_with(prefix)).count();
    let refused = steps("ok: a second first instance of the name is refused");
    let not_refused = steps("not refused under Wine: ");
    assert_eq!(
        (steps("ok: "), refused + not_refused),
        (3 + refused, 1),
        "every step: {stdout}"
    );
    if not_refused == 1 {
        eprintln!("note: this Wine does not refuse a second first instance of a pipe's name");
    }
}
