//! Finding the workspace's binaries from a test, without building anything twice.
//!
//! `cargo test --workspace` (the README's test command) already builds the plain executable of
//! every binary whose package has integration tests, with the features of the whole workspace's
//! test build. [`debug_binary`] asks cargo for exactly that build again
//! (`cargo test --workspace --no-run --message-format=json`): after the outer build it is fresh,
//! so it costs a fingerprint check, where a `cargo build --bin NAME` would resolve features
//! differently and rebuild the dependency tree. A binary that build does not produce falls back
//! to `cargo build --bin NAME`, and so does every binary when that build fails. `cargo test`
//! does not hold cargo's build lock while tests run, so the nested command shares the target
//! folder. It runs without the variables cargo sets for the test (`CARGO_MANIFEST_DIR`, ...):
//! a build script that watches one would otherwise run again and rebuild everything above it.
//!
//! Also compiled into `agentacp/tests/client.rs` with `#[path]`: keep it free of this crate's
//! other modules.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

/// The root of the cargo workspace (the parent of this crate's folder).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("a workspace member has a parent folder")
        .to_path_buf()
}

/// The debug build of the workspace binary `name`; see the module docs. Cached per process,
/// failures included (a broken build fails every test at once instead of being retried).
pub fn debug_binary(name: &str) -> Result<PathBuf, String> {
    static TEST_BUILD: OnceLock<HashMap<String, PathBuf>> = OnceLock::new();
    let built = TEST_BUILD.get_or_init(|| {
        // When some test target of the workspace does not build (a developer's work in
        // progress), every binary falls back to being built alone.
        let stdout = cargo(&["test", "--workspace", "--no-run", "--message-format=json"]).unwrap_or_default();
        executables(&stdout).collect()
    });
    match built.get(name) {
        Some(path) => Ok(path.clone()),
        None => built_alone(name, false),
    }
}

/// The release build of the workspace binary `name` (for benchmarks), cached per process.
pub fn release_binary(name: &str) -> Result<PathBuf, String> {
    built_alone(name, true)
}

/// `cargo build -q --bin NAME [--release]`, cached per process.
fn built_alone(name: &str, release: bool) -> Result<PathBuf, String> {
    type Cache = HashMap<(String, bool), Result<PathBuf, String>>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    // Holding the lock while building serialises tests asking at once (cargo's lock would).
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry((name.to_string(), release))
        .or_insert_with(|| {
            let mut args = vec!["build", "-q", "--bin", name, "--message-format=json"];
            if release {
                args.push("--release");
            }
            let stdout = cargo(&args)?;
            executables(&stdout)
                .find(|(built, _)| built == name)
                .map(|(_, path)| path)
                .ok_or_else(|| format!("cargo built no executable for bin `{name}`"))
        })
        .clone()
}

/// Runs `$CARGO ARGS` from the workspace root; its stdout, or an error with cargo's output.
fn cargo(args: &[&str]) -> Result<String, String> {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(&program);
    command.current_dir(workspace_root()).args(args);
    // What cargo sets for the running test, not for a build: left in, `CARGO_MANIFEST_DIR`
    // reruns the build scripts that watch it (ring's) and so rebuilds everything above them,
    // minutes on two cores, and again for the outer build.
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_for_the_test) {
            command.env_remove(&name);
        }
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.to_string_lossy()))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        return Ok(stdout);
    }
    let diagnostics: Vec<String> = messages(&stdout)
        .filter_map(|m| m["message"]["rendered"].as_str().map(str::to_string))
        .collect();
    Err(format!(
        "`cargo {}` failed ({}):\n{}\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr),
        diagnostics.join("\n")
    ))
}

/// Whether `name` is one of the variables cargo sets for a test it runs (and not one the
/// user set for cargo itself, such as `CARGO_TARGET_DIR` or `CARGO_INCREMENTAL`).
fn set_for_the_test(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
            "OUT_DIR",
        ]
        .contains(&name)
}

fn messages(stdout: &str) -> impl Iterator<Item = Value> + '_ {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
}

/// The plain (not unit-test) binaries in cargo's `compiler-artifact` messages: name and path.
fn executables(stdout: &str) -> impl Iterator<Item = (String, PathBuf)> + '_ {
    messages(stdout)
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == false)
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind == "bin"))
        })
        .filter_map(|m| {
            let name = m["target"]["name"].as_str()?.to_string();
            let path = PathBuf::from(m["executable"].as_str()?);
            Some((name, path))
        })
}
