//! Issue #50: `scaffold-aip` built for Windows (`x86_64-pc-windows-gnu`, linked by mingw-w64)
//! and run under Wine answers `lint`, `explain` and `audit verify` as the Linux build does: the
//! same exit codes and the same stdout, byte for byte after line endings.
//!
//! The test builds the Windows program itself, into `target/windows`, and runs it under Wine
//! with the shared harness (`test_support::wine`: a prefix of its own, debug channels off; it
//! skips without Wine, mingw-w64 or the rustup target, or fails under `AGENTACP_REQUIRE_PEERS`,
//! as in CI). The program sees the workspace through Wine's `Z:` drive (the Unix root).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use acp_audit::{AuditEvent, AuditLog, FsyncPolicy, Lifecycle};
use common::wine::{self, Wine};

#[test]
fn the_windows_build_under_wine_answers_as_the_linux_build() {
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_for_windows("scaffold-aip", None);
    let logs = audit_logs();
    let root = common::workspace();
    let example = root.join("examples/echo-server/ACP.md");
    let cases: Vec<(&Path, Vec<String>)> = vec![
        (
            &root,
            args(&["lint", "examples/echo-server/ACP.md", "examples/governed-server/ACP.md"]),
        ),
        (
            &root,
            args(&["lint", "examples/bridge/ACP.md", "examples/client/ACP.md"]),
        ),
        (
            &root,
            args(&["lint", "--format", "json", "examples/sandboxed-server/ACP.md"]),
        ),
        (&root, args(&["explain", "examples/governed-server/ACP.md"])),
        (&root, args(&["explain", "--format", "json", "examples/bridge/ACP.md"])),
        (&root, args(&["lint", "scaffold-aip/tests/fixtures/cli-demo"])),
        (
            &root,
            args(&["lint", "--format", "json", "tests/manifests/bad/alias-bomb/ACP.md"]),
        ),
        (&root, args(&["explain", "scaffold-aip/tests/fixtures/cli-demo/ACP.md"])),
        (&root, args(&["lint", "no/such/ACP.md"])),
        (logs.path(), args(&["audit", "verify", "intact.jsonl"])),
        (
            logs.path(),
            args(&["audit", "verify", "--format", "json", "tampered.jsonl"]),
        ),
    ];
    for (dir, args) in &cases {
        let linux = within_limit(
            Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
                .args(args)
                .current_dir(dir),
        );
        let windows = within_limit(wine.command(&exe).current_dir(dir).args(args));
        compare(args, &linux, &windows);
    }
    // A drive-letter path: the workspace as Windows sees it.
    let z_drive = wine::windows_path(&example);
    let linux = within_limit(
        Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
            .arg("lint")
            .arg(&example),
    );
    let windows = within_limit(wine.command(&exe).current_dir(&root).args(["lint", &z_drive]));
    compare(&args(&["lint", &z_drive]), &linux, &windows);
}

/// The owned form of a command line.
fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

/// Same exit code and stdout; stderr the same too, except an OS error's own words (they are
/// Windows' under Wine), so only a run that wrote nothing there must stay silent there.
fn compare(args: &[String], linux: &Output, windows: &Output) {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    let (linux_err, windows_err) = (text(&linux.stderr), wine::quiet(&text(&windows.stderr)));
    let context = format!("scaffold-aip {args:?}\nLinux stderr:\n{linux_err}\nWine stderr:\n{windows_err}");
    assert_eq!(
        windows.status.code(),
        linux.status.code(),
        "exit codes differ: {context}"
    );
    let (linux_out, windows_out) = (text(&linux.stdout), text(&windows.stdout));
    let first_difference = linux_out.lines().zip(windows_out.lines()).find(|(l, w)| l != w);
    assert!(
        windows_out == linux_out,
        "stdout differs (first differing line, Linux then Wine: {first_difference:?}): {context}\nWine stdout:\n{windows_out}"
    );
    assert_eq!(
        windows_err.is_empty(),
        linux_err.is_empty(),
        "stderr differs: {context}"
    );
    let first_words = |err: &str| err.split(": ").next().unwrap_or_default().to_string();
    assert_eq!(
        first_words(&windows_err),
        first_words(&linux_err),
        "stderr differs: {context}"
    );
}

/// A folder with `intact.jsonl` (3 records) and `tampered.jsonl` (its second record altered).
fn audit_logs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(&dir.path().join("intact.jsonl"), FsyncPolicy::EveryRecord).unwrap();
    for (i, state) in Lifecycle::ALL.iter().cycle().take(3).enumerate() {
        log.record(AuditEvent::lifecycle("echo", &format!("sess-{i}"), *state, None))
            .unwrap();
    }
    drop(log);
    let text = std::fs::read_to_string(dir.path().join("intact.jsonl")).unwrap();
    std::fs::write(dir.path().join("tampered.jsonl"), text.replacen("sess-1", "sess-7", 1)).unwrap();
    dir
}

/// Runs `command` (stdin empty) and collects its output, within the harness's limit.
fn within_limit(command: &mut Command) -> Output {
    wine::output(command)
}

/// `token new` on Windows takes its random bytes from the system (`getrandom`: `ProcessPrng`)
/// and locks the token file's sidecar with `LockFileEx`: it writes a new file, then adds to
/// it (a rename over the existing file), and the Linux build reads the result and accepts
/// each printed token. Before, it said "no /dev/urandom to generate a token from".
#[test]
fn token_new_on_windows_writes_tokens_the_linux_build_accepts() {
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_for_windows("scaffold-aip", None);
    let dir = tempfile::tempdir().unwrap();
    let mut tokens = Vec::new();
    for (identity, flags) in [("alice", &[][..]), ("bob", &["--add"][..])] {
        let made = within_limit(
            wine.command(&exe)
                .current_dir(dir.path())
                .args(["token", "new", "--identity", identity, "--file", "tokens"])
                .args(flags),
        );
        let stderr = wine::quiet(&String::from_utf8_lossy(&made.stderr));
        assert!(made.status.success(), "token new {identity} under Wine: {stderr}");
        let token = String::from_utf8_lossy(&made.stdout).trim().to_string();
        tokens.push((identity, token));
    }
    assert_ne!(tokens[0].1, tokens[1].1, "two tokens, two random values");
    let listed = within_limit(
        Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
            .current_dir(dir.path())
            .args(["token", "list", "--file", "tokens"]),
    );
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let text = std::fs::read_to_string(dir.path().join("tokens")).unwrap();
    for (identity, token) in &tokens {
        assert!(token.starts_with("acp_") && token.len() == 68, "not a token: {token:?}");
        let line = format!("{identity} {}", acp_tokens::hash_token(token));
        assert!(text.lines().any(|entry| entry == line), "{line:?} not in:\n{text}");
        let listed = String::from_utf8_lossy(&listed.stdout);
        assert!(listed.contains(&line), "{line:?} not listed:\n{listed}");
    }
}

/// A second writer of a live audit log is refused on Windows too, in the sentence Linux
/// gives (the lock is `LockFileEx` on a byte past the data there, not `flock`), while the
/// log stays readable: `audit verify` of the live log succeeds. Once the first writer is
/// gone, the next one gets the log. Before, Windows took no lock, and both wrote.
#[test]
fn a_second_writer_of_a_live_audit_log_is_refused_under_wine() {
    let Some(wine) = Wine::start() else { return };
    let scaffold = wine::build_for_windows("scaffold-aip", None);
    let hold_log = wine::build_example_for_windows("acp-audit", "hold_log");
    let dir = tempfile::tempdir().unwrap();
    let mut first = wine
        .command(&hold_log)
        .current_dir(dir.path())
        .arg("audit.jsonl")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let holding = first_line(first.stdout.take().unwrap());
    let second = within_limit(wine.command(&hold_log).current_dir(dir.path()).arg("audit.jsonl"));
    let verified =
        within_limit(
            wine.command(&scaffold)
                .current_dir(dir.path())
                .args(["audit", "verify", "audit.jsonl"]),
        );
    drop(first.stdin.take());
    let first_status = wait_within(first);
    let third = within_limit(wine.command(&hold_log).current_dir(dir.path()).arg("audit.jsonl"));

    assert_eq!(holding.as_deref(), Some("holding"), "the first writer did not start");
    let second_err = wine::quiet(&String::from_utf8_lossy(&second.stderr));
    assert_eq!(
        second.status.code(),
        Some(1),
        "the second writer was not refused: {second_err}"
    );
    assert!(
        second_err.contains("is locked for writing by another process; a second writer would fork its chain"),
        "{second_err}"
    );
    let verify_err = wine::quiet(&String::from_utf8_lossy(&verified.stderr));
    assert!(verified.status.success(), "audit verify of the live log: {verify_err}");
    assert!(first_status.success(), "the first writer failed: {first_status}");
    let third_err = wine::quiet(&String::from_utf8_lossy(&third.stderr));
    assert!(third.status.success(), "the lock was not released: {third_err}");
}

/// The first line `pipe` gives (without its line ending), read on a thread so that a program
/// that hangs fails the test after the harness's limit instead of holding it up.
fn first_line(pipe: impl std::io::Read + Send + 'static) -> Option<String> {
    use std::io::BufRead;
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = std::io::BufReader::new(pipe).read_line(&mut line);
        let _ = sender.send(read.ok().map(|_| line.trim_end().to_string()));
    });
    receiver.recv_timeout(wine::LIMIT).ok().flatten()
}

/// How `child` exited, once it has (within the harness's limit: else the test fails, and the
/// Wine prefix's processes end with it).
fn wait_within(mut child: std::process::Child) -> std::process::ExitStatus {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait());
    });
    let waited = receiver.recv_timeout(wine::LIMIT);
    waited
        .expect("the first writer had not ended after its stdin closed")
        .unwrap()
}
