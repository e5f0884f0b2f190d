//! A command run inside the sandbox: confined, limited, its output collected.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::plan::Confinement;

/// The most of each of stdout and stderr kept (the rest is read and dropped, and
/// [`SandboxOutput::truncated`] says so).
pub const OUTPUT_LIMIT: usize = 8 * 1024 * 1024;

/// Without `limits.timeout_ms`, how long a command may run: 10 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// How long the output pipes may stay open after the command is gone (a program it left
/// running in the background holds them).
const DRAIN: Duration = Duration::from_secs(2);

/// A limit of the sandbox that stopped a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitExceeded {
    /// `limits.timeout_ms`: the command ran longer (its process group was killed).
    Timeout(Duration),
    /// `limits.cpu_ms`: it used more CPU time (`SIGXCPU` / `SIGKILL` from `RLIMIT_CPU`).
    Cpu(Duration),
    /// `limits.memory_mb` (MiB), as its run's cgroup counts it (all its processes together,
    /// shared memory included): the kernel's out-of-memory killer ended some of them.
    Memory(u64),
}

/// Why a command could not run, or was stopped.
#[derive(Debug)]
pub enum SandboxError {
    /// The sandbox is `read_only: true`: it runs no commands (`sandbox_read_only`).
    ReadOnly,
    /// The program could not be started (not found, not allowed, …).
    Spawn {
        /// The program.
        program: OsString,
        /// Why.
        source: std::io::Error,
    },
    /// A limit stopped it; what it wrote until then is kept.
    Limit {
        /// Which limit.
        limit: LimitExceeded,
        /// Its output until it was stopped.
        output: Box<SandboxOutput>,
    },
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxError::ReadOnly => f.write_str(
                "sandbox_read_only: the sandbox is read-only (SANDBOX.md `read_only: true`) and runs no commands",
            ),
            SandboxError::Spawn { program, source } => {
                write!(
                    f,
                    "cannot start `{}` in the sandbox: {source}",
                    program.to_string_lossy()
                )
            }
            SandboxError::Limit { limit, output } => {
                match limit {
                    LimitExceeded::Timeout(after) => write!(
                        f,
                        "stopped by the sandbox after {} ms (limits.timeout_ms)",
                        after.as_millis()
                    )?,
                    LimitExceeded::Cpu(cpu) => write!(
                        f,
                        "stopped by the sandbox after {} ms of CPU time (limits.cpu_ms)",
                        cpu.as_millis()
                    )?,
                    LimitExceeded::Memory(mb) => write!(
                        f,
                        "stopped by the sandbox: its processes used more than {mb} MiB of memory together, shared memory included (limits.memory_mb), and the kernel ended them"
                    )?,
                }
                match output.stderr_tail() {
                    Some(line) => write!(f, "; its last stderr line: {line}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for SandboxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SandboxError::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Linux: the child gets SIGKILL when the thread that started it dies — with the runtime,
/// even when that is killed with `kill -9` and nothing of ours runs (`prctl
/// PR_SET_PDEATHSIG`). Children are started from a runtime worker thread, which lives as long
/// as the runtime. What the child started is reached through its process group (or its PID
/// namespace) at close, not by this signal.
/// (`acp_process::die_with_parent`, shared with `scaffold-aip conform`; elsewhere nothing:
/// a child outlives a killed runtime.)
pub fn die_with_parent(command: &mut tokio::process::Command) {
    acp_process::die_with_parent(command.as_std_mut());
}

/// A failed start of a confined program: with the step of its confinement that failed named,
/// when it was one (the child can pass back only an `errno`); any other error as it is.
pub fn explain_spawn_error(error: std::io::Error) -> std::io::Error {
    #[cfg(all(target_os = "linux", feature = "enforce"))]
    let error = super::confine::explain_spawn_error(error);
    error
}

/// What a command did.
#[derive(Debug, Clone)]
pub struct SandboxOutput {
    /// How it exited (`None` when it could not be reaped).
    pub status: Option<ExitStatus>,
    /// Its standard output (at most 8 MiB).
    pub stdout: Vec<u8>,
    /// Its standard error (at most 8 MiB).
    pub stderr: Vec<u8>,
    /// Whether stdout or stderr was longer than 8 MiB.
    pub truncated: bool,
}

impl SandboxOutput {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|status| status.success())
    }

    /// Its standard output as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Its standard error as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    fn stderr_tail(&self) -> Option<String> {
        let text = self.stderr_text();
        text.lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .map(str::to_string)
    }
}

/// A command to run confined ([`Confinement::command`], or `turn.sandbox().command(…)` in
/// the session's folder): the environment holds only `env.passthrough` and what
/// [`SandboxCommand::env`] sets; stdin is empty unless [`SandboxCommand::stdin`] gives it.
#[derive(Debug)]
#[must_use = "a command does nothing until `output` is awaited"]
pub struct SandboxCommand<'c> {
    confinement: &'c Confinement,
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    stdin: Option<Vec<u8>>,
}

impl<'c> SandboxCommand<'c> {
    fn new(confinement: &'c Confinement, program: &OsStr, cwd: &Path) -> Self {
        SandboxCommand {
            confinement,
            program: program.to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: cwd.to_path_buf(),
            stdin: None,
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(|arg| arg.as_ref().to_owned()));
        self
    }

    /// Sets a variable (besides those passed through).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// The working folder (it must be inside a mount to be usable).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cwd = dir.as_ref().to_path_buf();
        self
    }

    /// What the command reads on stdin.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Runs the command to its end, confined, within `limits.timeout_ms` (default
    /// 10 minutes). A non-zero exit is an `Ok` output (see
    /// [`SandboxOutput::success`]); a command stopped by a limit is [`SandboxError::Limit`].
    pub async fn output(self) -> Result<SandboxOutput, SandboxError> {
        let child_path = self.child_path();
        let confinement = self.confinement;
        if confinement.profile.read_only {
            return Err(SandboxError::ReadOnly);
        }
        let mut command = tokio::process::Command::new(&self.program);
        command.args(&self.args).env_clear().current_dir(&self.cwd);
        for (key, value) in confinement.passed_env() {
            command.env(key, value);
        }
        command.envs(self.env.iter().map(|(key, value)| (key, value)));
        command
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        // Before the confinement's steps: the outer process it leaves ignores SIGTERM and
        // SIGHUP, so a runtime that died would leave the command running, past its timeout.
        die_with_parent(&mut command);
        let spawn_error = |source| SandboxError::Spawn {
            program: self.program.clone(),
            source,
        };
        // Kept to the end of the run: dropping it kills what is left in it.
        let cgroup = confinement
            .apply(
                &mut command,
                (Path::new(&self.program), Some(&self.cwd)),
                child_path.as_deref(),
                true,
            )
            .map_err(spawn_error)?;
        let mut child = (command.spawn()).map_err(|error| spawn_error(explain_spawn_error(error)))?;
        // Whatever the command leaves in its group goes with it, also when this future is
        // dropped (a cancelled turn).
        let mut group = KillGroup::of(child.id());
        if let (Some(bytes), Some(mut stdin)) = (self.stdin, child.stdin.take()) {
            // A command that does not read its stdin must not hold us up: written aside.
            tokio::spawn(async move {
                let _ = stdin.write_all(&bytes).await;
            });
        }
        let stdout = tokio::spawn(read_capped(child.stdout.take()));
        let stderr = tokio::spawn(read_capped(child.stderr.take()));
        let timeout = confinement.profile.limits.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(status) => (status.ok(), false),
            Err(_) => {
                group.kill();
                // Elsewhere than Unix there is no group: the command itself is ended.
                #[cfg(not(unix))]
                let _ = child.start_kill();
                let status = tokio::time::timeout(DRAIN, child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok);
                (status, true)
            }
        };
        // What it left behind in its group holds the pipes open. Once: the group may be
        // empty after this, and its number then given to another process's group.
        group.kill();
        group.disarm();
        // What is left in its cgroup goes too, wherever it went; and the kernel says whether
        // its memory limit ended some of it.
        let oom_kills = match cgroup {
            Some(cgroup) => end_cgroup(cgroup).await,
            None => 0,
        };
        let collect = |task: tokio::task::JoinHandle<(Vec<u8>, bool)>| async move {
            tokio::time::timeout(DRAIN, task)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default()
        };
        let ((stdout, cut_out), (stderr, cut_err)) = tokio::join!(collect(stdout), collect(stderr));
        let output = SandboxOutput {
            status,
            stdout,
            stderr,
            truncated: cut_out || cut_err,
        };
        let exceeded = if timed_out {
            Some(LimitExceeded::Timeout(timeout))
        } else {
            exceeded(confinement, oom_kills, output.status)
        };
        match exceeded {
            Some(limit) => Err(SandboxError::Limit {
                limit,
                output: Box::new(output),
            }),
            None => Ok(output),
        }
    }

    /// The `PATH` the command gets: its own, else the one its confinement passes on.
    fn child_path(&self) -> Option<OsString> {
        (self.env.iter().rev())
            .find(|(key, _)| key == "PATH")
            .map(|(_, value)| value.clone())
            .or_else(|| {
                (self.confinement.passed_env())
                    .find(|(key, _)| *key == "PATH")
                    .map(|(_, value)| value)
            })
    }
}

/// Ends a run's `cgroup` (what is left in it goes): how many of its processes the kernel's
/// out-of-memory killer ended.
async fn end_cgroup(cgroup: acp_process::cgroup::RunCgroup) -> u64 {
    let kills = cgroup.oom_kills();
    // Bounded (a few seconds at most), but blocking: off the runtime's threads.
    let ended = tokio::task::spawn_blocking(move || cgroup.end()).await;
    if !ended.unwrap_or(false) {
        tracing::warn!("a sandboxed run's cgroup could not be emptied and removed: left behind");
    }
    kills
}

/// The limit of `confinement` that ended a run which exited with `status`, `oom_kills` of its
/// processes ended by the out-of-memory killer; none when it ended on its own.
fn exceeded(confinement: &Confinement, oom_kills: u64, status: Option<ExitStatus>) -> Option<LimitExceeded> {
    let limits = &confinement.profile.limits;
    // Before the CPU time: the out-of-memory killer's SIGKILL reads as RLIMIT_CPU's.
    if let Some(mb) = limits.memory_mb
        && oom_kills > 0
    {
        return Some(LimitExceeded::Memory(mb));
    }
    limits.cpu.filter(|_| cpu_limit_signal(status)).map(LimitExceeded::Cpu)
}

/// A command's process group, killed (SIGKILL) when dropped. Elsewhere than Unix it holds
/// nothing: only the command itself is ended (`kill_on_drop`, and at its timeout), not what it
/// started (a Job Object would reach those; not built yet).
struct KillGroup(Option<ProcessGroup>);

#[cfg(unix)]
type ProcessGroup = rustix::process::Pid;
#[cfg(not(unix))]
type ProcessGroup = std::convert::Infallible;

impl KillGroup {
    /// The group the child `pid` leads (it was started with `process_group(0)`).
    fn of(pid: Option<u32>) -> KillGroup {
        #[cfg(unix)]
        let group = pid.and_then(|pid| rustix::process::Pid::from_raw(pid as i32));
        #[cfg(not(unix))]
        let group = pid.and(None);
        KillGroup(group)
    }

    fn kill(&self) {
        #[cfg(unix)]
        if let Some(group) = self.0 {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }

    /// Signals nothing more, not even when dropped.
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for KillGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether the status is `RLIMIT_CPU`'s: killed by SIGXCPU, or by SIGKILL at the hard limit.
/// (Elsewhere than Unix there is no such limit, and no signal.)
#[cfg(not(unix))]
fn cpu_limit_signal(_status: Option<ExitStatus>) -> bool {
    false
}

/// Whether the status is `RLIMIT_CPU`'s: killed by SIGXCPU, or by SIGKILL at the hard limit.
#[cfg(unix)]
fn cpu_limit_signal(status: Option<ExitStatus>) -> bool {
    use std::os::unix::process::ExitStatusExt;
    let xcpu = rustix::process::Signal::XCPU.as_raw();
    let kill = rustix::process::Signal::KILL.as_raw();
    status
        .and_then(|status| status.signal())
        .is_some_and(|signal| signal == xcpu || signal == kill)
}

/// Reads `pipe` to its end, keeping at most [`OUTPUT_LIMIT`] bytes; whether it was cut.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>) -> (Vec<u8>, bool) {
    let Some(mut pipe) = pipe else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut chunk = vec![0; 64 * 1024];
    let mut cut = false;
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                let room = OUTPUT_LIMIT - kept.len();
                kept.extend_from_slice(&chunk[..read.min(room)]);
                cut |= read > room;
            }
        }
    }
    (kept, cut)
}

impl Confinement {
    /// A command to run confined, in the workspace root (see [`SandboxCommand`]).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> SandboxCommand<'_> {
        SandboxCommand::new(self, program.as_ref(), &self.workspace)
    }
}
