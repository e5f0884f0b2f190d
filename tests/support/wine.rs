//! The workspace's programs built for Windows (`x86_64-pc-windows-gnu`, linked by mingw-w64)
//! and run under Wine, for the tests of issue #50.
//!
//! [`Wine::start`] checks that everything is here (`wine64` or `wine` on `PATH`, the target's
//! default linker [`MINGW`], the rustup target [`TARGET`]); when one is missing it says which and
//! returns `None`, or fails the test under [`REQUIRE_PEERS`](crate::REQUIRE_PEERS) (CI). Each
//! [`Wine`] has a prefix of its own in a temporary folder, runs with Wine's debug channels off
//! (`WINEDEBUG=-all`) and is stopped (its `wineserver`, with every Windows process in it) when
//! dropped. [`build_for_windows`] builds the programs of [`PACKAGES`] into `target/windows` (a
//! target dir of its own: the outer `cargo test` holds the lock of `target`), all in one build,
//! and returns the one asked for. A program sees the Unix root as Wine's `Z:` drive.
//!
//! ```no_run
//! use test_support::wine::{self, Wine};
//! let Some(wine) = Wine::start() else { return };
//! let exe = wine::build_for_windows("echo-server", None);
//! let out = wine::output(wine.command(&exe).arg("--version"));
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The Windows target, as rustup names it.
pub const TARGET: &str = "x86_64-pc-windows-gnu";

/// The target's default linker (rustc's), from Debian's `gcc-mingw-w64-x86-64`.
pub const MINGW: &str = "x86_64-w64-mingw32-gcc";

/// How long one run of a Windows program may take before it counts as hanging (a guard, not a
/// timing target): the first run in a prefix creates it, which takes seconds.
pub const LIMIT: Duration = Duration::from_secs(120);

/// How long a build for Windows may take (a cold build of the runtime on two cores takes
/// minutes).
const BUILD_LIMIT: Duration = Duration::from_secs(1800);

/// Wine with a prefix of its own (a temporary folder).
#[derive(Debug)]
pub struct Wine {
    program: PathBuf,
    prefix: tempfile::TempDir,
}

impl Wine {
    /// Wine in a new prefix, with `bcryptprimitives.dll` added when Wine has none (before Wine
    /// 9; see `tests/support/wine/bcryptprimitives.c`); `None`, after saying what is missing (or
    /// failing under CI's flag), when Wine, mingw-w64 or the rustup target is not installed.
    pub fn start() -> Option<Wine> {
        let program = match missing() {
            Ok(program) => program,
            Err(why) => {
                crate::skip_unless_required(&why);
                return None;
            }
        };
        let wine = Wine {
            program,
            prefix: tempfile::tempdir().expect("a temporary folder for the Wine prefix"),
        };
        wine.create_prefix();
        Some(wine)
    }

    /// Creates the prefix (`wineboot --init`, without the Mono and Gecko installers) and adds
    /// the `bcryptprimitives.dll` stand-in when the prefix has none.
    fn create_prefix(&self) {
        let booted = output(self.wine().args(["wineboot", "--init"]));
        let system32 = self.prefix.path().join("drive_c/windows/system32");
        assert!(
            system32.is_dir(),
            "Wine made no prefix in {} (wineboot: {}):\n{}",
            self.prefix.path().display(),
            booted.status,
            quiet(&String::from_utf8_lossy(&booted.stderr))
        );
        let dll = system32.join("bcryptprimitives.dll");
        if dll.exists() {
            return;
        }
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("wine/bcryptprimitives.c");
        let built = output(
            Command::new(MINGW)
                .args(["-shared", "-O2", "-o"])
                .arg(&dll)
                .arg(&source)
                .arg("-ladvapi32"),
        );
        assert!(
            built.status.success(),
            "{MINGW} failed to build {}: {}",
            source.display(),
            String::from_utf8_lossy(&built.stderr)
        );
    }

    /// `wine` in this prefix, quiet, with no program yet.
    fn wine(&self) -> Command {
        let mut command = Command::new(&self.program);
        command
            .env("WINEPREFIX", self.prefix.path())
            .env("WINEDEBUG", "-all")
            .env("WINEDLLOVERRIDES", "mscoree,mshtml=")
            .env("NO_COLOR", "1");
        command
    }

    /// The Windows program `exe` under Wine in this prefix (its arguments follow), without
    /// colour or Wine's debug lines; the working folder is the caller's unless set.
    pub fn command(&self, exe: &Path) -> Command {
        let mut command = self.wine();
        command.arg(exe);
        command
    }

    /// Makes `cargo` (a `cargo test --target` [`TARGET`] `…` command) run the Windows test
    /// programs it builds under this Wine: cargo's runner is this prefix's `wine`, with its
    /// environment.
    pub fn cargo_runner<'c>(&self, cargo: &'c mut Command) -> &'c mut Command {
        let template = self.wine();
        cargo.env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER", template.get_program());
        for (name, value) in template.get_envs() {
            match value {
                Some(value) => cargo.env(name, value),
                None => cargo.env_remove(name),
            };
        }
        cargo
    }

    /// The prefix (`drive_c` is inside).
    pub fn prefix(&self) -> &Path {
        self.prefix.path()
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

/// The Wine program to run, or what is missing for a Windows build run under Wine, in a
/// sentence.
pub fn missing() -> Result<PathBuf, String> {
    let Some(program) = ["wine64", "wine"].into_iter().find_map(on_path) else {
        return Err("neither wine64 nor wine is on PATH: the Windows build is not run".into());
    };
    if on_path(MINGW).is_none() {
        return Err(format!(
            "{MINGW} (Debian's gcc-mingw-w64-x86-64) is not on PATH: nothing is built for Windows"
        ));
    }
    if !has_rustup_target() {
        return Err(format!(
            "the rustup target {TARGET} is not installed (rustup target add {TARGET}): nothing is built for Windows"
        ));
    }
    Ok(program)
}

/// The packages whose programs the Wine tests run: every Windows build builds all their
/// binaries (and [`EXAMPLES`]) in one `cargo build`, with their default features, so that
/// features unify the same way every time and each later build (another test, another test
/// program) is a fingerprint check that builds nothing. A test that needs another program adds
/// its package here rather than building it apart.
pub const PACKAGES: [&str; 9] = [
    "scaffold-aip",
    "echo-server",
    "tour",
    "governed-server",
    "acp-client",
    "governance-bridge",
    "acp-process",
    "acp-audit",
    "sandboxed-server",
];

/// The examples of [`PACKAGES`] built with them (`package`, `example`).
pub const EXAMPLES: [(&str, &str); 4] = [
    ("acp-process", "private_pipe"),
    ("acp-audit", "hold_log"),
    ("acp-client", "terminal_probe"),
    ("sandboxed-server", "best_effort"),
];

/// The Windows program `bin` of `package` (`package.exe` without `bin`), built with the rest
/// of [`PACKAGES`] into `target/windows`.
pub fn build_for_windows(package: &str, bin: Option<&str>) -> PathBuf {
    assert!(
        PACKAGES.contains(&package),
        "{package} is not in test_support::wine::PACKAGES: add it there (every Windows build is one build of that set)"
    );
    build_all().join(format!("{}.exe", bin.unwrap_or(package)))
}

/// The example `example` of `package`, built with [`PACKAGES`] into `target/windows`.
pub fn build_example_for_windows(package: &str, example: &str) -> PathBuf {
    assert!(
        EXAMPLES.contains(&(package, example)),
        "{package}'s example {example} is not in test_support::wine::EXAMPLES: add it there"
    );
    build_all().join("examples").join(format!("{example}.exe"))
}

/// `cargo build --target` [`TARGET`] of [`PACKAGES`]' binaries and [`EXAMPLES`], once per test
/// program, into `target/windows`; the folder of the build (`…/debug`).
fn build_all() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = crate::workspace();
            let target_dir = root.join("target/windows");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut command = Command::new(cargo);
            command
                .current_dir(&root)
                .args(["build", "--quiet", "--target", TARGET, "--target-dir"])
                .arg(&target_dir)
                .args(PACKAGES.iter().flat_map(|package| ["-p", package]))
                .arg("--bins")
                .args(EXAMPLES.iter().flat_map(|(_, example)| ["--example", example]));
            let built = crate::output_within(&mut command, BUILD_LIMIT);
            assert!(
                built.status.success(),
                "{command:?} failed:\n{}",
                String::from_utf8_lossy(&built.stderr)
            );
            target_dir.join(TARGET).join("debug")
        })
        .clone()
}

/// How a Windows program under Wine names the Unix path `path` (absolute): on Wine's `Z:`
/// drive, the Unix root, with `\\` for `/` (`/tmp/x` is `Z:\\tmp\\x`).
pub fn windows_path(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// Runs `command` (stdin empty) and collects its output; kills it and fails the test when it
/// has not ended within [`LIMIT`].
pub fn output(command: &mut Command) -> Output {
    crate::output_within(command, LIMIT)
}

/// `stderr` without Wine's own lines (the loader's `wine: …`, a debug channel's `0024:err:…`),
/// each kept line ending in `\n`. (The launcher's "wine32 is missing" notice is not printed
/// under `WINEDEBUG=-all`.)
pub fn quiet(stderr: &str) -> String {
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

#[cfg(test)]
mod tests {
    #[test]
    fn wines_own_lines_are_dropped_from_stderr() {
        let stderr = "wine: created the configuration directory '/tmp/x'\n0024:err:ole:foo bar\nerror: the manifest is bad: line 3\n";
        assert_eq!(super::quiet(stderr), "error: the manifest is bad: line 3\n");
    }

    #[test]
    fn a_unix_path_is_named_on_wines_z_drive() {
        assert_eq!(super::windows_path(std::path::Path::new("/tmp/a b/c")), r"Z:\tmp\a b\c");
    }
}
