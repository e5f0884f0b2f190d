//! Issue #50: the `sandboxed` tier on Windows, shown under Wine. agentacp's local sandbox
//! confines programs only on Linux, so on Windows:
//!
//! - the example as shipped (its SANDBOX.md requires confinement: it does not accept best
//!   effort) refuses to start, in a sentence naming Windows and what it cannot enforce, with
//!   a non-zero exit code, having answered nothing and written no session to its audit log;
//! - the same operator under a best-effort copy of its profile (`examples/best_effort.rs`:
//!   the sandbox is bound at build time by the manifest, so another profile is another
//!   program) starts, reports at `initialize` and on stderr that nothing is confined and only
//!   `limits.timeout_ms` holds, runs a command for its tool `run`, and ends one at the timeout.
//!
//! The Windows program sees the Unix file system as Wine's `Z:` drive, so every path it is
//! given is written so (`Z:\tmp\…`). The harness (`test_support::wine`) builds the programs
//! into `target/windows` and skips without Wine, mingw-w64 or the rustup target (failing
//! under `AGENTACP_REQUIRE_PEERS`, as in CI).

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use stdio_peer::{Scratch, StdioPeer};
use test_support::wine::{self, Wine};

/// One run's folders: the workspace (inside the profile's workspace mount, `/tmp`) and the
/// state folder with the audit log (outside it: a sandboxed program may not write them).
struct Folders {
    workspace: Scratch,
    state: tempfile::TempDir,
}

impl Folders {
    fn new(label: &str) -> Folders {
        let state = tempfile::Builder::new()
            .prefix(label)
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("a state folder");
        Folders {
            workspace: Scratch::new(label),
            state,
        }
    }

    /// The audit log, as Linux names it.
    fn audit_log(&self) -> PathBuf {
        self.state.path().join("audit.jsonl")
    }

    /// `exe` under Wine, its workspace root, state folder and audit log these folders.
    fn start(&self, wine: &Wine, exe: &Path) -> StdioPeer {
        StdioPeer::start(
            wine.command(exe)
                .current_dir(self.workspace.path())
                .env("AGENTACP_WORKSPACE_ROOT", wine::windows_path(self.workspace.path()))
                .env("AGENTACP_STATE_DIR", wine::windows_path(self.state.path()))
                .env("AGENTACP_AUDIT_LOG", wine::windows_path(&self.audit_log()))
                .env("AGENTACP_LOG", "info"),
        )
    }
}

/// What a best-effort sandbox on Windows says it cannot enforce (agentacp-sandbox's plan).
const NOTHING_CONFINED: &str = "agentacp's local sandbox confines programs only on Linux (Landlock, namespaces, rlimits, cgroups), and this system is Windows: nothing is confined (not the files, the network, the processes, the memory or the CPU time); only limits.timeout_ms holds, and it ends the program, not what the program started";

#[test]
fn the_shipped_sandbox_requires_confinement_so_the_windows_build_refuses_to_start() {
    let shipped = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("SANDBOX.md")).unwrap();
    assert!(
        !shipped.contains("best-effort"),
        "the example's SANDBOX.md requires confinement"
    );
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_for_windows("sandboxed-server", None);
    let folders = Folders::new("sandboxed-wine-required");
    // Nothing is sent: it refuses on its own, with its stdin still open.
    let mut server = folders.start(&wine, &exe);
    let status = server.wait_exit();
    let answered = server.recv_or_end();
    let stderr = wine::quiet(&server.stderr_to_end());
    assert_eq!(status.code(), Some(1), "exit status {status}; stderr:\n{stderr}");
    assert_eq!(answered, None, "it wrote to its protocol channel; stderr:\n{stderr}");
    let refusal = format!(
        "sandboxed-server: `sandboxed-server`: the sandbox cannot be enforced on this system: {NOTHING_CONFINED}. Refusing to run unconfined; a profile that accepts this says `metadata: {{agentacp: {{enforcement: best-effort}}}}` in SANDBOX.md"
    );
    assert!(stderr.contains(&refusal), "stderr:\n{stderr}");
    assert!(!stderr.contains("serving ACP"), "it started serving:\n{stderr}");
    assert!(!stderr.contains("panicked"), "stderr:\n{stderr}");
    // Nothing half-started: the sandbox is planned before the audit log and the session
    // store are opened (as on Linux), so neither was made.
    assert!(!folders.audit_log().exists(), "the refused start made its audit log");
    let state = walk(folders.state.path());
    assert_eq!(
        state,
        Vec::<String>::new(),
        "the refused start made something in its state folder"
    );
}

#[test]
fn a_best_effort_sandbox_starts_on_windows_says_only_the_timeout_holds_and_ends_a_command_at_it() {
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_example_for_windows("sandboxed-server", "best_effort");
    let folders = Folders::new("sandboxed-wine-best-effort");
    let mut server = folders.start(&wine, &exe);

    let workspace = wine::windows_path(folders.workspace.path());
    let (initialized, session) = server.open_session(Path::new(&workspace));
    let enforced = &initialized["_meta"]["aip44"]["sandbox_enforcement"];
    assert_eq!(enforced["enforcement"], "best-effort", "{enforced}");
    assert_eq!(enforced["files"], Value::Null, "nothing is confined: {enforced}");
    assert_eq!(enforced["network"], Value::Null, "the network is open: {enforced}");
    assert_eq!(enforced["processes"], Value::Null, "{enforced}");
    assert_eq!(enforced["gaps"], json!([NOTHING_CONFINED]), "{enforced}");

    // A command for the tool `run` (asked for, approved): it runs, in the workspace.
    let said = run(&mut server, 2, &session, "/run cmd /c echo hello from the sandbox");
    assert_eq!(said, "completed: hello from the sandbox");
    // What does hold besides the timeout: the environment is cleared to `env.passthrough`.
    let said = run(&mut server, 3, &session, "/run cmd /c set AGENTACP_LOG");
    assert!(
        said.starts_with("failed: exited with exit code: 1"),
        "AGENTACP_LOG is not passed: {said}"
    );
    // One that would run a minute is ended at limits.timeout_ms (5 s), and is gone after.
    let said = run(&mut server, 4, &session, "/run ping -n 60 127.0.0.1");
    assert!(
        said.starts_with("failed: stopped by the sandbox after 5000 ms (limits.timeout_ms)"),
        "{said}"
    );
    assert_eq!(
        running_under(&wine, "ping"),
        Vec::<String>::new(),
        "the timed-out command still runs"
    );

    server.close_stdin();
    let status = server.wait_exit();
    let stderr = wine::quiet(&server.stderr_to_end());
    assert_eq!(status.code(), Some(0), "exit status {status}; stderr:\n{stderr}");
    assert!(
        stderr.contains("sandbox not fully enforced (best effort)") && stderr.contains("this system is Windows"),
        "each gap is logged at warn:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "stderr:\n{stderr}");
    // Its audit log, written on Windows, is a valid chain here, with the session's tool calls.
    let log = folders.audit_log();
    let summary = acp_audit::verify_file(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    assert!(summary.records >= 4, "the session's records: {summary:?}");
}

/// Prompts `text` as request `id`, approving the permission asked for; what the agent said.
fn run(server: &mut StdioPeer, id: u64, session: &Value, text: &str) -> String {
    let prompt = json!([{"type": "text", "text": text}]);
    server.send(json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {"sessionId": session, "prompt": prompt}}));
    let mut said = String::new();
    loop {
        let message = server.recv();
        if message["method"] == "session/request_permission" {
            let options = message["params"]["options"].as_array().cloned().unwrap_or_default();
            let allow = options
                .iter()
                .find(|option| option["kind"] == "allow_once")
                .unwrap_or_else(|| panic!("no allow_once option: {message}"));
            server.send(json!({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}}));
        } else if message["method"] == "session/update" {
            let update = &message["params"]["update"];
            if update["sessionUpdate"] == "agent_message_chunk" {
                said.push_str(update["content"]["text"].as_str().unwrap_or_default());
            }
        } else if message["id"] == id {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            return said;
        }
    }
}

/// The command lines of the processes running in `wine`'s prefix that name `program`.
fn running_under(wine: &Wine, program: &str) -> Vec<String> {
    let prefix = format!("WINEPREFIX={}", wine.prefix().display());
    let read = |path: PathBuf| std::fs::read(path).unwrap_or_default();
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    processes
        .flatten()
        .map(|process| process.path())
        .filter(|path| {
            read(path.join("environ"))
                .split(|b| *b == 0)
                .any(|v| v == prefix.as_bytes())
        })
        .map(|path| String::from_utf8_lossy(&read(path.join("cmdline"))).replace('\0', " "))
        .filter(|line| line.to_lowercase().contains(program))
        .collect()
}

/// The files under `folder`, relative to it.
fn walk(folder: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let path = entry.path();
        found.push(path.strip_prefix(folder).unwrap().display().to_string());
        if path.is_dir() {
            found.extend(
                walk(&path)
                    .into_iter()
                    .map(|inner| format!("{}/{inner}", entry.file_name().display())),
            );
        }
    }
    found
}
