//! Issue #45.9: the command line's manners. `--help` printed
//! `Error: Io(Custom { kind: InvalidInput, error: "usage: …" })` and exited 1; a bad argument
//! was a Rust value too. The example serves through `ServeWebSocket::run_main` (issue #46),
//! so these are its manners (docs/remote.md).

use std::process::{Command, Stdio};

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_echo-server"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("echo-server runs");
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.code(), text(output.stdout), text(output.stderr))
}

#[test]
fn help_prints_the_usage_and_exits_0() {
    for flag in ["--help", "-h"] {
        let (code, stdout, stderr) = run(&[flag]);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains("usage: echo-server [--listen HOST:PORT]"), "{stdout}");
        assert!(
            stdout.contains("--listen HOST:PORT   serve WebSocket and Streamable HTTP"),
            "{stdout}"
        );
    }
}

#[test]
fn a_bad_command_line_is_a_sentence_not_a_rust_value() {
    for args in [&["--bogus"][..], &["--listen", "nowhere"], &["extra"]] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(stderr.starts_with("echo-server: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("Io(") && !stderr.contains("Custom {"), "{stderr}");
    }
    let (_, _, stderr) = run(&["--listen", "nowhere"]);
    assert!(
        stderr.contains("--listen wants HOST:PORT, e.g. 127.0.0.1:8765 (got `nowhere`)"),
        "{stderr}"
    );
}
