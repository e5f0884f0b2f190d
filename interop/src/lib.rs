//! Test support for driving ACP agents over stdio: building the example binaries, spawning
//! an agent in its own temporary workspace, a raw JSON-lines client, and a client built on the
//! official Rust SDK (`agent-client-protocol` 5) that records every message it sees.
//!
//! Shared by `tests/rust_sdk.rs`, `tests/raw_protocol.rs` and the benchmarks in `benches/`
//! (with [`bench_support`]); [`python_with_acp`] and [`run_script`] by the tests that run the
//! Python and TypeScript SDKs' scripts. Every await that depends on the agent is bounded by [`TIMEOUT`],
//! so a broken agent fails the test (with the wire messages seen and the agent's stderr)
//! instead of hanging it.

pub mod audit;
pub mod bench_support;
pub mod notes_mcp;
pub mod raw;
pub mod sdk;
mod transcript;
pub mod websocket;
pub mod workspace_bins;

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::process::{Child, ChildStdin, ChildStdout, Command};

pub use transcript::{Direction, Transcript};
pub use workspace_bins::workspace_root;

/// The bound on every wait for the agent (a response, an update, an exit).
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The path of the debug build of the workspace binary `name` (see [`workspace_bins`]).
/// Panics, with cargo's output, when it cannot be built.
pub fn example_binary(name: &str) -> PathBuf {
    workspace_bins::debug_binary(name).unwrap_or_else(|e| panic!("{e}"))
}

/// The path of the release build of the workspace binary `name` (for the benchmarks).
pub fn release_binary(name: &str) -> PathBuf {
    workspace_bins::release_binary(name).unwrap_or_else(|e| panic!("{e}"))
}

/// The temporary folders an agent runs in: an authorised workspace root, a state folder and
/// an audit log path, removed on drop.
#[derive(Debug)]
pub struct AgentDirs {
    tmp: tempfile::TempDir,
    /// `AGENTACP_WORKSPACE_ROOT` (canonical).
    pub workspace_root: PathBuf,
    /// `AGENTACP_STATE_DIR`.
    pub state_dir: PathBuf,
    /// `AGENTACP_AUDIT_LOG`.
    pub audit_log: PathBuf,
}

impl AgentDirs {
    /// Fresh, empty folders.
    pub fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("agentacp-interop-")
            .tempdir()
            .expect("a temporary folder");
        let base = tmp.path().canonicalize().expect("the temporary folder canonicalises");
        let workspace_root = base.join("workspace");
        let state_dir = base.join("state");
        let audit_dir = base.join("audit");
        for dir in [&workspace_root, &state_dir, &audit_dir] {
            std::fs::create_dir_all(dir).expect("create a temporary folder");
        }
        Self {
            audit_log: audit_dir.join("audit.jsonl"),
            workspace_root,
            state_dir,
            tmp,
        }
    }

    /// A folder `name` inside the workspace root, created if needed (a session's `cwd`).
    pub fn project(&self, name: &str) -> PathBuf {
        let dir = self.workspace_root.join(name);
        std::fs::create_dir_all(&dir).expect("create a project folder");
        dir
    }

    /// A folder outside the workspace root (but inside the temporary folder).
    pub fn outside(&self) -> PathBuf {
        let dir = self
            .tmp
            .path()
            .canonicalize()
            .expect("the temporary folder canonicalises")
            .join("outside");
        std::fs::create_dir_all(&dir).expect("create a temporary folder");
        dir
    }

    /// The `AGENTACP_*` variables naming these folders.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("AGENTACP_WORKSPACE_ROOT", self.workspace_root.clone().into()),
            ("AGENTACP_STATE_DIR", self.state_dir.clone().into()),
            ("AGENTACP_AUDIT_LOG", self.audit_log.clone().into()),
        ]
    }

    /// The variables for `governance-bridge` in front of `governed-server`: the bridge logs to
    /// `bridge_audit`, the server behind it to [`AgentDirs::audit_log`].
    pub fn bridge_env(&self, bridge_audit: &Path) -> Vec<(&'static str, OsString)> {
        vec![
            ("AGENTACP_WORKSPACE_ROOT", self.workspace_root.clone().into()),
            ("AGENTACP_STATE_DIR", self.state_dir.clone().into()),
            ("AGENTACP_AUDIT_LOG", bridge_audit.into()),
            ("AGENTACP_DOWNSTREAM_AUDIT_LOG", self.audit_log.clone().into()),
        ]
    }

    /// Writes a shell-script agent into the state folder that answers `initialize` and
    /// `session/new`, and sends one `agent_message_chunk` (`early`) before each prompt's
    /// response and one (`late`) after it: the negative control of the harnesses, which must
    /// notice the late one. Ids may be numbers or strings.
    pub fn late_update_agent(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let chunk = |text: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}}}}}"#
            )
        };
        let body = format!(
            r#"#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\("[^"]*"\|[0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' "{{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{{\"protocolVersion\":1,\"agentCapabilities\":{{}}}}}}" ;;
    *'"method":"session/new"'*) printf '%s\n' "{{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{{\"sessionId\":\"s1\"}}}}" ;;
    *'"method":"session/prompt"'*)
      printf '%s\n' '{early}'
      printf '%s\n' "{{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{{\"stopReason\":\"end_turn\"}}}}"
      printf '%s\n' '{late}' ;;
  esac
done
"#,
            early = chunk("early"),
            late = chunk("late"),
        );
        let script = self.state_dir.join("late-agent.sh");
        std::fs::write(&script, body).expect("write the script");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        script
    }
}

impl Default for AgentDirs {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a spawned agent's stderr goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StderrMode {
    /// Into a temporary file, shown in failure messages.
    Capture,
    /// The test's own stderr.
    Inherit,
    /// Nowhere.
    Discard,
}

/// A spawned agent process, killed when dropped.
#[derive(Debug)]
pub struct AgentProcess {
    /// The child (`kill_on_drop`). Its stdin and stdout are taken by the client driving it.
    pub child: Child,
    /// A short name for messages (the binary's file name).
    pub name: String,
    /// The process id.
    pub pid: u32,
    stderr_file: Option<tempfile::NamedTempFile>,
}

impl AgentProcess {
    /// Spawns `binary` with `AGENTACP_WORKSPACE_ROOT`, `AGENTACP_STATE_DIR` and
    /// `AGENTACP_AUDIT_LOG` pointing into `dirs`.
    pub fn spawn(binary: &Path, dirs: &AgentDirs, stderr: StderrMode) -> Self {
        Self::spawn_with_env(binary, &dirs.env(), stderr)
    }

    /// Spawns `binary` with piped stdin/stdout, `env` added to the environment.
    pub fn spawn_with_env(binary: &Path, env: &[(&str, OsString)], stderr: StderrMode) -> Self {
        Self::spawn_command(binary, &[], env, stderr)
    }

    /// Spawns `binary ARGS` (`node agent.mjs`, say) like [`AgentProcess::spawn_with_env`].
    pub fn spawn_command(binary: &Path, args: &[OsString], env: &[(&str, OsString)], stderr: StderrMode) -> Self {
        let mut command = Command::new(binary);
        command.args(args);
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let stderr_file = match stderr {
            StderrMode::Capture => {
                let file = tempfile::NamedTempFile::new().expect("a temporary stderr file");
                command.stderr(file.reopen().expect("reopen the stderr file"));
                Some(file)
            }
            StderrMode::Inherit => {
                command.stderr(Stdio::inherit());
                None
            }
            StderrMode::Discard => {
                command.stderr(Stdio::null());
                None
            }
        };
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", binary.display()));
        let pid = child.id().expect("a running child has an id");
        Self {
            child,
            name: binary
                .file_name()
                .map_or_else(|| binary.display().to_string(), |n| n.to_string_lossy().into()),
            pid,
            stderr_file,
        }
    }

    /// Takes the child's stdin and stdout (once).
    pub fn take_stdio(&mut self) -> (ChildStdin, ChildStdout) {
        (
            self.child.stdin.take().expect("stdin not taken yet"),
            self.child.stdout.take().expect("stdout not taken yet"),
        )
    }

    /// What the agent wrote to stderr so far (when captured), for failure messages.
    pub fn stderr_text(&self) -> String {
        self.stderr_file
            .as_ref()
            .map(|f| std::fs::read_to_string(f.path()).unwrap_or_default())
            .unwrap_or_else(|| "(stderr not captured)".to_string())
    }

    /// The path of the captured stderr file, if any.
    pub fn stderr_path(&self) -> Option<PathBuf> {
        self.stderr_file.as_ref().map(|f| f.path().to_path_buf())
    }

    /// Waits for the process to exit, at most `timeout`; `None` when it is still running.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => Some(status.expect("wait for the agent")),
            Err(_) => None,
        }
    }

    /// The process's peak resident set size so far (`VmHWM` of `/proc/PID/status`), in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        peak_rss_kib(self.pid)
    }
}

/// `VmHWM` of `/proc/PID/status` in KiB (Linux), `None` when unreadable.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The text of chunk `i` of `/stream N SIZE`: `i` zero-padded to 8 digits, then `.` up to
/// `size` bytes.
pub fn stream_chunk(i: usize, size: usize) -> String {
    let mut text = format!("{i:08}");
    while text.len() < size {
        text.push('.');
    }
    text
}

/// `scaffold-aip explain --format json` of the manifest of `examples/EXAMPLE`, through the
/// library (what the example must advertise at `initialize`).
pub fn explained(example: &str) -> serde_json::Value {
    let path = workspace_root().join("examples").join(example).join("ACP.md");
    let checked =
        acp_manifest::manifest::check_file(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    assert!(
        !checked.has_errors(),
        "{} has errors: {:?}",
        path.display(),
        checked.diagnostics
    );
    let explanation = acp_manifest::explain::explain(&checked).expect("a checked manifest explains");
    serde_json::to_value(explanation).expect("an explanation serialises")
}

/// Shortens `text` to at most `max` bytes (on a character boundary) for messages.
pub fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// The variable under which a test whose peer (Node, an npm package, the Python SDK, a real
/// agent) is missing fails instead of skipping (`.ci/run` sets it).
pub use test_support::REQUIRE_PEERS;

/// Says why a test is skipped (its peer is missing): prints `skipped: {why}` on stderr, or,
/// when [`REQUIRE_PEERS`] is set to anything but `0` or empty, fails the test with that reason
/// ([`test_support::skip_unless_required`]). The caller returns right after.
pub fn skip_without_peer(why: &str) {
    test_support::skip_unless_required(why);
}

/// The Python that runs the scripts of `interop/py` (the official Python SDK, import name
/// `acp`): `$AGENTACP_PYTHON`, else `interop/py/.venv/bin/python`. `Err` says why it cannot
/// (and how to set it up) when it cannot `import acp`; the tests then skip, printing it.
/// Checked once per test process (importing `acp` takes a second or more).
pub fn python_with_acp() -> Result<PathBuf, String> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON.get_or_init(find_python_with_acp).clone()
}

fn find_python_with_acp() -> Result<PathBuf, String> {
    let python = std::env::var_os("AGENTACP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("py/.venv/bin/python"));
    let imports = std::process::Command::new(&python)
        .args(["-c", "import acp"])
        .output()
        .is_ok_and(|out| out.status.success());
    if imports {
        Ok(python)
    } else {
        Err(format!(
            "{} cannot `import acp` (python3 -m venv interop/py/.venv && \
             interop/py/.venv/bin/pip install -r interop/py/requirements.txt; or set AGENTACP_PYTHON)",
            python.display()
        ))
    }
}

/// The Python whose `agent-client-protocol` has the protocol v2 API (`acp.experimental.v2`,
/// only in the 1.0 release candidates): `$AGENTACP_PYTHON_V2`, else
/// `interop/py/.venv-v2/bin/python`. `Err` says why it cannot (and how to set it up).
pub fn python_with_acp_v2() -> Result<PathBuf, String> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let python = std::env::var_os("AGENTACP_PYTHON_V2")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("py/.venv-v2/bin/python"));
            let imports = std::process::Command::new(&python)
                .args(["-c", "import acp.experimental.v2"])
                .output()
                .is_ok_and(|out| out.status.success());
            if imports {
                Ok(python)
            } else {
                Err(format!(
                    "{} cannot `import acp.experimental.v2` (python3 -m venv interop/py/.venv-v2 && \
                     interop/py/.venv-v2/bin/pip install -r interop/py/requirements-v2.txt; or set \
                     AGENTACP_PYTHON_V2)",
                    python.display()
                ))
            }
        })
        .clone()
}

/// What a script run by [`run_script`] did.
#[derive(Debug)]
pub struct ScriptOutput {
    /// Its exit status; `None` when it did not finish within the deadline (it was killed).
    pub status: Option<ExitStatus>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr (with that of any child that inherited it).
    pub stderr: String,
}

/// Runs `command` (stdin closed, stdout and stderr captured) to its end, killing it after
/// `deadline`.
pub fn run_script(command: &mut std::process::Command, deadline: Duration) -> ScriptOutput {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {:?}: {e}", command.get_program()));
    // Read both pipes on their own threads so a chatty child cannot block on a full pipe.
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = read_all(Box::new(child.stderr.take().expect("piped stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the script") {
            break Some(status);
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    ScriptOutput {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}
