//! Issue #50: `scaffold-aip` built for Windows (`x86_64-pc-windows-gnu`, linked by mingw-w64)
//! and run under Wine answers `lint`, `explain` and `audit verify` as the Linux build does: the
//! same exit codes and the same stdout, byte for byte after line endings.
//!
//! The test builds the Windows program itself, into `target/windows` (a target dir of its own:
//! the outer `cargo test` holds the lock of `target`). It needs the rustup target, `wine64` or
//! `wine` and `x86_64-w64-mingw32-gcc` (the target's default linker); without one of them it
//! skips, or fails under `AGENTACP_REQUIRE_PEERS` (CI). Wine runs in a prefix of its own in a
//! temporary folder, with its debug channels off; the program sees the workspace through Wine's
//! `Z:` drive (the Unix root).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use acp_audit::{AuditEvent, AuditLog, FsyncPolicy, Lifecycle};

/// The Windows target, as rustup names it.
const TARGET: &str = "x86_64-pc-windows-gnu";
/// The target's default linker (rustc's), from Debian's `gcc-mingw-w64-x86-64`.
const MINGW: &str = "x86_64-w64-mingw32-gcc";
/// A run that has not ended by then hangs (a guard, not a timing target); the first Wine run
/// creates the prefix, which takes seconds.
const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn the_windows_build_under_wine_answers_as_the_linux_build() {
    let Some(wine) = ["wine64", "wine"].into_iter().find_map(on_path) else {
        return common::skip_unless_required("neither wine64 nor wine is on PATH: the Windows build is not run");
    };
    if on_path(MINGW).is_none() || !has_rustup_target() {
        return common::skip_unless_required(&format!(
            "{MINGW} or the rustup target {TARGET} is missing: scaffold-aip is not built for Windows"
        ));
    }
    let wine = Wine::start(wine, build_for_windows());
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
        let windows = within_limit(wine.command(dir).args(args));
        compare(args, &linux, &windows);
    }
    // A drive-letter path: the workspace as Windows sees it.
    let z_drive = format!("Z:{}", example.display()).replace('/', "\\");
    let linux = within_limit(
        Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
            .arg("lint")
            .arg(&example),
    );
    let windows = within_limit(wine.command(&root).args(["lint", &z_drive]));
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
    let (linux_err, windows_err) = (text(&linux.stderr), wine_quiet(&text(&windows.stderr)));
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

/// Wine's own lines on stderr (the loader's `wine: …`, a debug channel's `0024:err:…`) left out.
fn wine_quiet(stderr: &str) -> String {
    let wine_line = |line: &&str| {
        line.starts_with("wine: ")
            || line
                .split_once(':')
                .is_some_and(|(id, _)| id.len() == 4 && id.chars().all(|c| c.is_ascii_hexdigit()))
    };
    stderr
        .lines()
        .filter(|line| !wine_line(line))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Wine with a prefix of its own (a temporary folder) running one Windows program.
struct Wine {
    program: PathBuf,
    exe: PathBuf,
    prefix: tempfile::TempDir,
}

impl Wine {
    /// Creates the prefix (the first run does) and gives it `bcryptprimitives.dll` when Wine has
    /// none (before Wine 9; see tests/wine/bcryptprimitives.c).
    fn start(program: PathBuf, exe: PathBuf) -> Wine {
        let wine = Wine {
            program,
            exe,
            prefix: tempfile::tempdir().unwrap(),
        };
        // Creating the prefix; the program itself may fail to start here (no bcryptprimitives).
        within_limit(wine.command(wine.prefix.path()).arg("--version"));
        let system32 = wine.prefix.path().join("drive_c/windows/system32");
        assert!(
            system32.is_dir(),
            "Wine made no prefix in {}",
            wine.prefix.path().display()
        );
        let dll = system32.join("bcryptprimitives.dll");
        if !dll.exists() {
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wine/bcryptprimitives.c");
            let built = within_limit(
                Command::new(MINGW)
                    .args(["-shared", "-O2", "-o"])
                    .arg(&dll)
                    .arg(&source)
                    .arg("-ladvapi32"),
            );
            assert!(
                built.status.success(),
                "{MINGW} failed: {}",
                String::from_utf8_lossy(&built.stderr)
            );
        }
        wine
    }

    /// The program under Wine in `dir` (Wine maps it to `Z:\…`), without colour or Wine's debug lines.
    fn command(&self, dir: &Path) -> Command {
        let mut command = Command::new(&self.program);
        command
            .arg(&self.exe)
            .current_dir(dir)
            .env("WINEPREFIX", self.prefix.path())
            .env("WINEDEBUG", "-all")
            .env("NO_COLOR", "1");
        command
    }
}

impl Drop for Wine {
    /// Stops this prefix's wineserver (and the Windows processes Wine started in it) before the
    /// prefix is deleted.
    fn drop(&mut self) {
        let server = self.program.with_file_name("wineserver");
        let server = if server.exists() {
            server
        } else {
            PathBuf::from("wineserver")
        };
        let _ = Command::new(server)
            .arg("-k")
            .env("WINEPREFIX", self.prefix.path())
            .status();
    }
}

/// Builds `scaffold-aip.exe` (default features) into `target/windows`; returns its path.
fn build_for_windows() -> PathBuf {
    let root = common::workspace();
    let target_dir = root.join("target/windows");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "--quiet",
            "--target",
            TARGET,
            "-p",
            "scaffold-aip",
            "--target-dir",
        ])
        .arg(&target_dir)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cargo build --target {TARGET} failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    target_dir.join(TARGET).join("debug/scaffold-aip.exe")
}

/// Whether rustup installed the standard library for [`TARGET`].
fn has_rustup_target() -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    Command::new(rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .is_ok_and(|out| out.status.success() && Path::new(String::from_utf8_lossy(&out.stdout).trim()).is_dir())
}

/// `name` found in a folder of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
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

/// Runs `command` (stdin empty) and collects its output; kills it and fails the test when it
/// has not ended within [`LIMIT`].
fn within_limit(command: &mut Command) -> Output {
    common::output_within(command, LIMIT)
}
