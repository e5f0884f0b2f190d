//! The official ACP TypeScript SDK (`@agentclientprotocol/sdk`, pinned in `interop/ts`) drives
//! `echo-server` and `governed-server` over stdio through `interop/ts/scenario.mjs`:
//! handshake, a 1000-chunk stream, cancellation, a cwd outside the workspace root, and (for
//! `governed-server`) approved, rejected, denied and read-only tool calls, the server's
//! operator using this editor's files and terminal (`turn.editor()`), and the session surface
//! its manifest declares in `metadata.agentacp` (modes, the model option, `/summary`,
//! `_governed/status`, `session/list`, `close`, `resume`).
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

/// The steps every run prints.
const STEPS: [&str; 6] = [
    "initialize",
    "session/new",
    "stream",
    "cancel",
    "after-cancel",
    "cwd-outside",
];
/// The steps only `--governed` runs print.
const GOVERNED_STEPS: [&str; 15] = [
    "tool-approved",
    "tool-rejected",
    "tool-denied",
    "tool-read",
    "editor-read",
    "editor-write",
    "editor-run",
    "set-mode",
    "set-config-option",
    "slash-command",
    "mode-update",
    "extension",
    "session-list",
    "session-close",
    "session-resume",
];

/// Runs `scenario.mjs` against the binary `name` and asserts that every step passed, each
/// one it should run reported `ok`.
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
    let extra: &[&str] = if governed { &GOVERNED_STEPS } else { &[] };
    for step in STEPS.iter().chain(extra).chain(&["shutdown"]) {
        assert!(
            stdout
                .lines()
                .any(|line| line == format!("ok {step}") || line.starts_with(&format!("ok {step} "))),
            "no `ok {step}` line\n{report}"
        );
    }
    assert!(!stdout.contains("FAIL"), "{report}");
}

#[test]
fn echo_server_with_the_typescript_sdk() {
    run_scenario("echo-server", false);
}

#[test]
fn governed_server_with_the_typescript_sdk() {
    run_scenario("governed-server", true);
}
