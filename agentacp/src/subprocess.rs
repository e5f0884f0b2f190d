//! A program we start and speak to over its stdio — an agent (clients, bridges) or a stdio MCP
//! server (sandboxed servers): spawned in its own process group with a cleared environment,
//! its stderr kept (last lines) for errors, reaped by a task, and stopped by closing stdin,
//! then SIGTERM to the group, then SIGKILL. What it started outside its group (`setsid`) is
//! ended too: the runtime becomes the child subreaper of what it starts, notes the program's
//! descendants before its stdin closes, and ends them after the group ([`acp_process`]).
//! Where the kernel allows it, the program runs in a PID namespace of its own (in a user
//! namespace with the runtime's ids where the runtime is not root; `AGENTACP_CONTAIN_TREE=off`
//! turns it off: [`acp_process::contain_tree`]): everything it starts ends with it even when
//! the runtime is killed (`kill -9`).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::sandbox::Confinement;
use crate::sync::lock;

#[cfg(windows)]
pub(crate) mod windows;

/// Variables passed through from our environment unless [`AgentCommand::env_clear_all`] is
/// called: what a program needs to find its tools and its home, including the XDG base
/// folders the user may have moved (`XDG_STATE_HOME`, ...: without them an agent that honours
/// XDG would keep its state, config, data and cache somewhere else than the user said).
/// `XDG_RUNTIME_DIR` is not among them: it leads to the session's sockets, not to files.
pub const DEFAULT_ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "TERM",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
];

/// How to start an agent: the program, its arguments, its environment and its working folder.
///
/// The environment is cleared: only the variables named in the allow-list (by default
/// [`DEFAULT_ENV_ALLOW`]) are passed through from ours, plus those set with [`AgentCommand::env`].
/// An API key an agent reads from its environment (an `env_var` auth method, e.g.
/// `OPENAI_API_KEY`) must be passed explicitly: [`AgentCommand::allow_env`].
#[derive(Debug, Clone)]
pub struct AgentCommand {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    env_allow: Vec<OsString>,
    cwd: Option<PathBuf>,
    /// The sandbox it runs in (a stdio MCP server of a sandboxed session, a sandboxed
    /// bridge's agent).
    sandbox: Option<Arc<Confinement>>,
    /// What it may use in that sandbox beyond the mounts, and how.
    sandbox_granted: Vec<(PathBuf, crate::sandbox::Grant)>,
}

impl AgentCommand {
    /// Runs `program` (looked up in `PATH` if it has no slash).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        AgentCommand {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            env_allow: DEFAULT_ENV_ALLOW.iter().map(OsString::from).collect(),
            cwd: None,
            sandbox: None,
            sandbox_granted: Vec::new(),
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets a variable in the agent's environment.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Passes the variable `key` through from our environment, when it is set.
    pub fn allow_env(mut self, key: impl AsRef<OsStr>) -> Self {
        self.env_allow.push(key.as_ref().to_owned());
        self
    }

    /// Passes nothing through from our environment (only [`AgentCommand::env`] variables).
    pub fn env_clear_all(mut self) -> Self {
        self.env_allow.clear();
        self
    }

    /// The agent's working folder (default: ours).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// The sandbox it will run in, if any, with what it is granted beyond the mounts.
    pub(crate) fn sandbox(&self) -> Option<Confinement> {
        self.sandbox
            .as_ref()
            .map(|sandbox| sandbox.granting(&self.sandbox_granted))
    }

    /// Runs the program in `sandbox` (its files, memory and network; the environment is
    /// the caller's to give).
    pub(crate) fn confined(mut self, sandbox: Arc<Confinement>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Lets the agent read (and execute) `path`, a file or a folder, when it runs in a
    /// sandbox (a sandboxed bridge's agent: e.g. where its program keeps its code). Outside
    /// a sandbox, nothing changes.
    pub fn sandbox_read(mut self, path: impl Into<PathBuf>) -> Self {
        self.sandbox_granted.push((path.into(), crate::sandbox::Grant::Read));
        self
    }

    /// Lets the agent read and write `path`, a file or a folder, when it runs in a sandbox
    /// (e.g. its state folder). Outside a sandbox, nothing changes.
    pub fn sandbox_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.sandbox_granted
            .push((path.into(), crate::sandbox::Grant::ReadWrite));
        self
    }

    /// The working directory set with [`current_dir`](AgentCommand::current_dir).
    pub fn working_dir(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    /// The program, as given to [`new`](AgentCommand::new).
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The value the agent's environment will have for `key`: set with
    /// [`env`](AgentCommand::env) (the last one wins), else passed through from ours when
    /// `key` is in the allow-list.
    pub fn agent_env(&self, key: impl AsRef<OsStr>) -> Option<OsString> {
        let key = key.as_ref();
        if let Some((_, value)) = self.env.iter().rev().find(|(k, _)| k == key) {
            return Some(value.clone());
        }
        self.env_allow
            .iter()
            .any(|allowed| allowed == key)
            .then(|| std::env::var_os(key))
            .flatten()
    }

    /// The command, and its run's cgroup where its sandbox limits it with one (kept while it
    /// runs: dropped, it kills what is left inside).
    fn to_command(&self) -> std::io::Result<(Command, Option<acp_process::cgroup::RunCgroup>)> {
        #[cfg(unix)]
        let mut command = Command::new(&self.program);
        #[cfg(windows)]
        let mut command = Command::new(windows::program_file(
            &self.program,
            &self.args,
            &self.agent_env("PATH").unwrap_or_default(),
        )?);
        command.args(&self.args).env_clear();
        for key in &self.env_allow {
            if let Some(value) = std::env::var_os(key) {
                command.env(key, value);
            }
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A backstop should everything else be dropped with the runtime.
            .kill_on_drop(true);
        crate::sandbox::die_with_parent(&mut command);
        #[cfg(unix)]
        {
            // Its own group, so that stopping it stops what it started too.
            command.process_group(0);
            // Outside a sandbox (which has a PID namespace of its own where it can): a PID
            // namespace of its own where the kernel allows one (for a runtime that is not root,
            // inside a user namespace), so that what it starts dies with it, also when the runtime
            // is killed (`acp_process::contain_tree`).
            if self.sandbox.is_none() && acp_process::contain_tree(command.as_std_mut()) {
                tracing::debug!(program = ?self.program, "started in a PID namespace of its own");
            }
        }
        // Suspended until it is in a Job Object of its own, leading a console group of its own.
        #[cfg(windows)]
        command.creation_flags(acp_process::job::START_FLAGS);
        if let Some(sandbox) = self.sandbox() {
            for (missing, _) in self.sandbox_granted.iter().filter(|(path, _)| !path.exists()) {
                tracing::warn!(path = %missing.display(), program = ?self.program, "granted to a sandboxed program but does not exist: not granted");
            }
            let path = self.agent_env("PATH");
            let program = (Path::new(&self.program), self.cwd.as_deref());
            let cgroup = sandbox.apply(&mut command, program, path.as_deref(), false)?;
            return Ok((command, cgroup));
        }
        Ok((command, None))
    }
}

/// The last lines the agent wrote to stderr.
#[derive(Debug)]
pub(crate) struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    keep: usize,
    done: watch::Sender<bool>,
}

/// The longest stderr line kept, in bytes (the rest is cut).
const STDERR_LINE_BYTES: usize = 2000;

impl StderrTail {
    pub(crate) fn lines(&self) -> Vec<String> {
        lock(&self.lines).iter().cloned().collect()
    }

    /// Keeps `text` as the newest line (the oldest goes when `keep` are kept).
    fn push(&self, text: String) {
        if self.keep == 0 {
            return;
        }
        let mut lines = lock(&self.lines);
        if lines.len() == self.keep {
            lines.pop_front();
        }
        lines.push_back(text);
    }

    /// Waits (at most `limit`) until the agent's stderr is closed, so its last lines are in.
    pub(crate) async fn wait_closed(&self, limit: Duration) {
        let mut done = self.done.subscribe();
        let _ = tokio::time::timeout(limit, done.wait_for(|done| *done)).await;
    }
}

/// Whether the agent has exited, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitState {
    Running,
    /// Reaped; the status when `wait` worked.
    Exited(Option<ExitStatus>),
}

/// The running agent process (its pipes are handed to the connection). Dropped before
/// [`AgentProcess::stop`] finished, it stops the agent's group synchronously
/// ([`AgentProcess::stop_now`]): the backstop for a connection dropped with its runtime.
#[derive(Debug)]
pub(crate) struct AgentProcess {
    pub(crate) pid: Option<u32>,
    pub(crate) exit: watch::Receiver<ExitState>,
    pub(crate) stderr: Arc<StderrTail>,
    /// Set once the group is known to be empty (nothing left to stop).
    stopped: std::sync::atomic::AtomicBool,
    /// What it started, as last walked: ended after the group, wherever it went.
    tree: Mutex<acp_process::Tree>,
    /// A remote agent: no process, no group; its "stderr" is how the connection ended.
    remote: bool,
    /// Its run's cgroup, where its sandbox limits it with one: ended (what is left inside
    /// killed, the cgroup removed) once it is stopped.
    cgroup: Mutex<Option<acp_process::cgroup::RunCgroup>>,
    /// Windows: the Job Object holding it and everything it starts (none for a remote agent);
    /// dropped, it kills what is left in it.
    #[cfg(windows)]
    job: Option<acp_process::job::Job>,
}

/// Spawns the agent; returns the process and its stdin and stdout.
pub(crate) fn spawn(
    command: &AgentCommand,
    stderr_lines: usize,
) -> std::io::Result<(AgentProcess, ChildStdin, ChildStdout)> {
    // What the agent starts and leaves behind is reparented to us, not to PID 1: stopping the
    // agent can still find it.
    if let Err(why) = acp_process::adopt_orphans_result() {
        tracing::debug!("{why}: what an agent leaves behind outside its process group may outlive it");
    }
    let (mut command_to_run, cgroup) = command.to_command()?;
    #[cfg(unix)]
    let mut child = (command_to_run.spawn()).map_err(crate::sandbox::explain_spawn_error)?;
    #[cfg(windows)]
    let (mut child, job) = windows::spawn_in_job(&mut command_to_run, command.args.len())?;
    let pid = child.id();
    let (stdin, stdout, stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
        (Some(stdin), Some(stdout), Some(stderr)) => (stdin, stdout, stderr),
        _ => {
            return Err(std::io::Error::other("the agent's stdio pipes were not created"));
        }
    };
    let (done, _) = watch::channel(false);
    let tail = Arc::new(StderrTail {
        lines: Mutex::new(VecDeque::with_capacity(stderr_lines)),
        keep: stderr_lines,
        done,
    });
    tokio::spawn(read_stderr(stderr, Arc::clone(&tail), pid));
    let (exit_tx, exit) = watch::channel(ExitState::Running);
    tokio::spawn(reap(child, exit_tx));
    tracing::debug!(?pid, program = ?command.program, "agent started");
    Ok((
        AgentProcess {
            pid,
            exit,
            stderr: tail,
            stopped: std::sync::atomic::AtomicBool::new(false),
            tree: Mutex::default(),
            remote: false,
            cgroup: Mutex::new(cgroup),
            #[cfg(windows)]
            job: Some(job),
        },
        stdin,
        stdout,
    ))
}

impl AgentProcess {
    /// The stand-in for a remote agent: no pid and no process group (nothing to signal or
    /// reap: it counts as exited), and, as its last "stderr" line, how the connection to `url`
    /// ended, once `pump` tells.
    #[cfg(feature = "websocket")]
    pub(crate) fn remote(
        url: &str,
        stderr_lines: usize,
        pump: tokio::task::JoinHandle<crate::websocket::Ended>,
    ) -> AgentProcess {
        let (done, _) = watch::channel(false);
        let tail = Arc::new(StderrTail {
            lines: Mutex::new(VecDeque::with_capacity(stderr_lines.min(1))),
            keep: stderr_lines.max(1),
            done,
        });
        let url = url.to_string();
        let report = Arc::clone(&tail);
        tokio::spawn(async move {
            let line = crate::websocket::ended_line(&url, pump.await.ok());
            tracing::debug!(agent = %url, "{line}");
            report.push(line);
            report.done.send_replace(true);
        });
        let (_, exit) = watch::channel(ExitState::Exited(None));
        AgentProcess {
            pid: None,
            exit,
            stderr: tail,
            stopped: std::sync::atomic::AtomicBool::new(true),
            tree: Mutex::default(),
            remote: true,
            cgroup: Mutex::default(),
            #[cfg(windows)]
            job: None,
        }
    }
}

async fn read_stderr(stderr: tokio::process::ChildStderr, tail: Arc<StderrTail>, pid: Option<u32>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        // A line is read whole here; it is cut before it is kept. `take` bounds the buffer.
        let read = (&mut reader).take(64 * 1024).read_until(b'\n', &mut line).await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let mut text = String::from_utf8_lossy(&line).trim_end().to_string();
                if text.len() > STDERR_LINE_BYTES {
                    let mut cut = STDERR_LINE_BYTES;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text.truncate(cut);
                    text.push('…');
                }
                tracing::debug!(?pid, agent_stderr = %text);
                tail.push(text);
            }
        }
    }
    tail.done.send_replace(true);
}

async fn reap(mut child: Child, exit: watch::Sender<ExitState>) {
    let status = child.wait().await;
    if let Err(error) = &status {
        tracing::warn!(%error, "waiting for the agent failed");
    }
    exit.send_replace(ExitState::Exited(status.ok()));
}

impl AgentProcess {
    /// The exit state now.
    pub(crate) fn state(&self) -> ExitState {
        *self.exit.borrow()
    }

    /// Waits, at most `limit`, for the agent to be reaped.
    pub(crate) async fn wait_exit(&self, limit: Duration) -> ExitState {
        let mut exit = self.exit.clone();
        match tokio::time::timeout(limit, exit.wait_for(|s| *s != ExitState::Running)).await {
            Ok(Ok(state)) => *state,
            _ => self.state(),
        }
    }

    /// The agent's process group (its pid: it leads the group it was started in).
    #[cfg(unix)]
    fn group(&self) -> Option<rustix::process::Pid> {
        self.pid
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw)
    }

    /// SIGTERM to the agent's process group (Windows: `CTRL_BREAK_EVENT`).
    #[cfg(unix)]
    fn terminate_group(&self) {
        self.signal_group(rustix::process::Signal::TERM);
    }

    /// SIGKILL to the agent's process group (Windows: every process of its Job Object killed).
    #[cfg(unix)]
    fn kill_group(&self) {
        self.signal_group(rustix::process::Signal::KILL);
    }

    /// `CTRL_BREAK_EVENT` to the agent's console process group (the polite step).
    #[cfg(windows)]
    fn terminate_group(&self) {
        if let Some(pid) = self.pid.filter(|_| self.job.is_some()) {
            windows::terminate_group(pid);
        }
    }

    /// Kills every process of the agent's Job Object.
    #[cfg(windows)]
    fn kill_group(&self) {
        if let Some(job) = &self.job {
            windows::kill_group(job);
        }
    }

    /// Whether a process of the agent's Job Object still runs (an exited one leaves it at
    /// once, so this is also [`AgentProcess::group_running`] there).
    #[cfg(windows)]
    fn group_alive(&self) -> bool {
        self.job.as_ref().is_some_and(|job| !job.is_empty())
    }

    /// The same as [`AgentProcess::group_alive`] on Windows.
    #[cfg(windows)]
    fn group_running(&self) -> bool {
        self.group_alive()
    }

    /// Sends `signal` to the agent's process group. The group id stays reserved while any
    /// process is in the group, so after the leader is reaped it still names only what the
    /// agent left behind (or nothing: then the call fails with ESRCH).
    #[cfg(unix)]
    fn signal_group(&self, signal: rustix::process::Signal) {
        let Some(group) = self.group() else { return };
        if let Err(error) = rustix::process::kill_process_group(group, signal) {
            tracing::debug!(%error, ?signal, "signalling the agent's process group failed");
        }
    }

    /// Whether any process is left in the agent's process group. What we adopted from it and
    /// has exited is reaped first: a zombie of ours would keep the group from ever emptying.
    #[cfg(unix)]
    fn group_alive(&self) -> bool {
        let Some(group) = self.group() else { return false };
        let alive = || rustix::process::test_kill_process_group(group).is_ok();
        if !alive() {
            return false;
        }
        let number = group.as_raw_nonzero().get().unsigned_abs();
        acp_process::reap_adopted_in_group(number) == 0 || alive()
    }

    /// Waits, at most `limit`, for the process group to be empty (polled: the kernel tells
    /// nobody when a group empties).
    async fn wait_group_gone(&self, limit: Duration) -> bool {
        poll_until(limit, || !self.group_alive()).await
    }

    /// Stops the agent, whose stdin must be closed already: waits `exit_grace` for it to exit
    /// on its own, then SIGTERMs its process group, waits `kill_grace`, then SIGKILLs the
    /// group, and waits for the reap. Whatever the agent leaves behind in its group — even
    /// when it exited promptly — gets the same SIGTERM, then SIGKILL after `kill_grace`.
    pub(crate) async fn stop(&self, exit_grace: Duration, kill_grace: Duration) -> ExitState {
        if self.remote {
            // Nothing to signal: our side is closed; give the connection `exit_grace` to end.
            self.stderr.wait_closed(exit_grace).await;
            return self.state();
        }
        self.note_descendants();
        let mut state = self.wait_exit(exit_grace).await;
        if state == ExitState::Running {
            tracing::debug!(pid = ?self.pid, "the agent did not exit after stdin closed; SIGTERM");
            self.terminate_group();
            state = self.wait_exit(kill_grace).await;
            if state == ExitState::Running {
                tracing::warn!(pid = ?self.pid, "the agent ignored SIGTERM; SIGKILL");
                self.kill_group();
                state = self.wait_exit(Duration::from_secs(5)).await;
            }
        }
        // The leader is gone; its group may not be.
        self.stop_group_left(kill_grace).await;
        self.end_descendants(kill_grace).await;
        self.end_cgroup();
        if !self.group_alive() {
            self.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        state
    }

    /// Ends its run's cgroup, if it has one: what is left inside is killed (bounded; by now
    /// usually nothing), and the cgroup removed.
    fn end_cgroup(&self) {
        let Some(cgroup) = lock(&self.cgroup).take() else {
            return;
        };
        let oom_kills = cgroup.oom_kills();
        if oom_kills > 0 {
            tracing::warn!(pid = ?self.pid, oom_kills, "the sandbox's memory limit (limits.memory_mb, all its processes together) ended some of its processes");
        }
        if !cgroup.end() {
            tracing::warn!(pid = ?self.pid, "its cgroup could not be emptied and removed: left behind");
        }
    }

    /// Notes what the agent has started so far, so that stopping it ends those too, wherever
    /// they went (another group, another session). Called before its stdin closes, after which
    /// it may exit and orphan them (they are then our children, but no longer below it).
    pub(crate) fn note_descendants(&self) {
        let Some(pid) = self.pid.filter(|_| !self.remote) else {
            return;
        };
        // Once reaped, its pid may name another process.
        if self.state() == ExitState::Running {
            lock(&self.tree).note_descendants_of(pid);
        }
    }

    /// Ends what the agent started outside its group (see [`AgentProcess::note_descendants`]):
    /// SIGTERM, `kill_grace`, SIGKILL, a bounded wait; reaped where they are our children.
    async fn end_descendants(&self, kill_grace: Duration) {
        let mut tree = std::mem::take(&mut *lock(&self.tree));
        tree.refresh();
        if !tree.running() {
            return;
        }
        tracing::debug!(pid = ?self.pid, left = ?tree.pids(), "processes the agent started are left; SIGTERM");
        tree.terminate();
        if !wait_tree_gone(&mut tree, kill_grace).await {
            tree.refresh();
            tracing::warn!(pid = ?self.pid, left = ?tree.pids(), "processes the agent started ignored SIGTERM; SIGKILL");
            tree.kill();
            if !wait_tree_gone(&mut tree, Duration::from_secs(2)).await {
                tracing::error!(pid = ?self.pid, left = ?tree.pids(), "processes the agent started could not be stopped");
            }
        }
    }

    /// What is left in the agent's group once it is gone: SIGTERM, then SIGKILL after
    /// `kill_grace`.
    async fn stop_group_left(&self, kill_grace: Duration) {
        if self.group_alive() {
            tracing::debug!(pid = ?self.pid, "processes left in the agent's group; SIGTERM");
            self.terminate_group();
            if !self.wait_group_gone(kill_grace).await {
                tracing::warn!(pid = ?self.pid, "processes in the agent's group ignored SIGTERM; SIGKILL");
                self.kill_group();
            }
        }
    }

    /// Stops the agent's process group now, without the runtime: SIGTERM to the group, then
    /// up to `kill_grace` for every process in it to exit, then SIGKILL, then a last bounded
    /// wait (polled; blocks the calling thread). For the paths that cannot await — a client
    /// dropped without `Client::close`, a runtime shutting down — so the
    /// group is stopped before the process goes on (or exits). The agent's stdin is not given
    /// its grace here: whoever can await uses [`AgentProcess::stop`]. Then what it started
    /// outside its group, the same way.
    pub(crate) fn stop_now(&self, kill_grace: Duration) {
        self.note_descendants();
        self.stop_group_now(kill_grace);
        let mut tree = std::mem::take(&mut *lock(&self.tree));
        if !tree.end(kill_grace) {
            tracing::error!(pid = ?self.pid, left = ?tree.pids(), "processes the agent started could not be stopped");
        }
        self.end_cgroup();
    }

    /// The agent's process group, stopped now (see [`AgentProcess::stop_now`]).
    fn stop_group_now(&self, kill_grace: Duration) {
        use std::sync::atomic::Ordering;
        if self.stopped.swap(true, Ordering::SeqCst) || !self.group_running() {
            return;
        }
        tracing::debug!(pid = ?self.pid, "stopping the agent's process group now; SIGTERM");
        self.terminate_group();
        if self.wait_group_stopped_blocking(kill_grace) {
            return;
        }
        tracing::warn!(pid = ?self.pid, "the agent's process group ignored SIGTERM; SIGKILL");
        self.kill_group();
        if !self.wait_group_stopped_blocking(Duration::from_secs(2)) {
            tracing::error!(pid = ?self.pid, "the agent's process group could not be stopped");
        }
    }

    /// Whether a process of the agent's group still runs (zombies waiting for their reap do
    /// not count: they run nothing, and the reaper may be the runtime this waits without).
    #[cfg(unix)]
    fn group_running(&self) -> bool {
        let Some(group) = self.group() else { return false };
        if !self.group_alive() {
            return false;
        }
        group_has_running_process(group)
    }

    /// Polls, blocking, at most `limit`, until no process of the group runs.
    fn wait_group_stopped_blocking(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if !self.group_running() {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        // The connection went away without stopping the agent (its task was dropped with the
        // runtime): stop the group, SIGKILL after a short grace.
        self.stop_now(Duration::from_millis(500));
    }
}

/// Polls, at most `limit`, until no process of `tree` runs.
async fn wait_tree_gone(tree: &mut acp_process::Tree, limit: Duration) -> bool {
    poll_until(limit, || !tree.running()).await
}

/// Polls `done` every 10 ms, at most `limit` (the kernel tells nobody when processes are
/// gone): whether it held in time.
async fn poll_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Linux: whether a process in `group` is not a zombie (read from `/proc/*/stat`).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn group_has_running_process(group: rustix::process::Pid) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    let group = group.as_raw_nonzero().get();
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // "pid (comm) S ppid pgrp ...": the fields after the last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = rest.split_ascii_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|field| field.parse::<i32>().ok());
        pgrp == Some(group) && !matches!(state, Some("Z" | "X"))
    })
}

/// Elsewhere: a process in the group (zombies included) counts as running.
#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
fn group_has_running_process(_: rustix::process::Pid) -> bool {
    true
}

use tokio::io::AsyncReadExt as _;

#[cfg(all(test, target_os = "linux", feature = "sandbox"))]
mod tests {
    use super::*;
    use crate::sandbox::{KernelSupport, SandboxProfile};

    /// Issue #44: a sandboxed agent (or stdio MCP server) whose sandbox sets `memory_mb` runs
    /// in a cgroup of its own (which counts its shared memory), joined before it runs; the
    /// cgroup is removed when the agent is stopped.
    #[tokio::test]
    async fn a_sandboxed_agent_runs_in_a_cgroup_of_its_own_removed_when_it_stops() {
        let cgroups = acp_process::cgroup::probe();
        if cgroups.available().memory.is_none() {
            test_support::skip_unless_required(&format!(
                "this process may make no memory cgroup here ({:?})",
                cgroups.why_not()
            ));
            return;
        }
        let doc = serde_json::json!({
            "provider": "local", "config": {}, "limits": {"memory_mb": 64},
            "metadata": {"agentacp": {"enforcement": "best-effort"}},
        });
        let profile = SandboxProfile::from_frontmatter(&doc).unwrap();
        let confinement = Confinement::plan(profile, None, KernelSupport::probe()).unwrap();
        let command = AgentCommand::new("/bin/sleep")
            .arg("60")
            .confined(Arc::new(confinement));
        let (agent, stdin, _stdout) = spawn(&command, 4).unwrap();
        let pid = agent.pid.unwrap();
        let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let name = (own.lines())
            .find(|line| {
                line.split(':')
                    .nth(1)
                    .is_some_and(|c| c.split(',').any(|c| c == "memory"))
            })
            .or_else(|| own.lines().find(|line| line.starts_with("0::")))
            .and_then(|line| line.rsplit('/').next())
            .unwrap_or_default()
            .to_string();
        assert!(name.starts_with("agentacp-"), "not in a run's cgroup: {own}");
        let dir = (cgroups.folders().into_iter())
            .map(|folder| folder.join(&name))
            .find(|dir| dir.exists())
            .expect("its cgroup");
        drop(stdin);
        agent.stop(Duration::from_millis(100), Duration::from_millis(500)).await;
        assert!(!dir.exists(), "left behind: {}", dir.display());
    }
}
