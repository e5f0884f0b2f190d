//! The official ACP TypeScript SDK (`@agentclientprotocol/sdk`, pinned in `interop/ts`) drives
//! `echo-server` and `governed-server` over stdio through `interop/ts/scenario.mjs`:
//! handshake, a 1000-chunk stream, cancellation, a cwd outside the workspace root, and (for
//! `governed-server`) approved, rejected, denied and read-only tool calls, and the server's
//! operator using this editor's files and terminal (`turn.editor()`).
//!
//! Skipped, saying so, when `node` is not on `PATH` or `npm ci --prefix interop/ts` has not
//! been run (`interop/ts/node_modules` is absent).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The whole scenario must finish within this; the script's own steps time out after 30 s each.
const DEADLINE: Duration = Duration::from_secs(300);

fn ts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ts")
}

/// Why the TypeScript side cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => return Some("`node` is not on PATH".to_owned()),
    }
    let sdk = ts_dir().join("node_modules/@agentclientprotocol/sdk");
    if !sdk.is_dir() {
        return Some(format!(
            "{} is absent (run `npm ci --prefix interop/ts`)",
            sdk.display()
        ));
    }
    None
}

/// Runs `scenario.mjs` against the binary `name` and asserts that every step passed.
fn run_scenario(name: &str, governed: bool) {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let binary = interop::example_binary(name);

    let dirs = interop::AgentDirs::new();
    let cwd = dirs.workspace_root.join("project");
    std::fs::create_dir(&cwd).expect("create the session cwd");

    let mut command = Command::new("node");
    command
        .arg(ts_dir().join("scenario.mjs"))
        .arg(&binary)
        .current_dir(ts_dir())
        .envs(dirs.env())
        .env("SCENARIO_CWD", &cwd)
        .env("SCENARIO_OUTSIDE", dirs.outside())
        .env("SCENARIO_AGENT_NAME", name);
    if governed {
        command.arg("--governed");
    }
    let interop::ScriptOutput { status, stdout, stderr } = interop::run_script(&mut command, DEADLINE);
    let report = format!(
        "node scenario.mjs {} {}\n--- stdout\n{stdout}--- stderr\n{stderr}---",
        binary.display(),
        if governed { "--governed" } else { "" }
    );
    match status {
        None => panic!("the scenario did not finish within {DEADLINE:?}\n{report}"),
        Some(status) if !status.success() => panic!("the scenario failed ({status})\n{report}"),
        Some(_) => eprintln!("{report}"),
    }
}

#[test]
fn echo_server_with_the_typescript_sdk() {
    run_scenario("echo-server", false);
}

#[test]
fn governed_server_with_the_typescript_sdk() {
    run_scenario("governed-server", true);
}
