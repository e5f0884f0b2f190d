//! The built-in `terminal/*` methods: commands the agent runs through the client.
//!
//! Each terminal is one command (no shell), started in the `cwd` the runtime checked, in its
//! own process group, with stdin closed and a cleared environment: the variables of
//! [`DEFAULT_ENV_ALLOW`] passed through from ours, plus the request's `env`. Its stdout and
//! stderr are one pipe, so the output keeps the order the command wrote it in; a task drains
//! the pipe as it fills (the command never blocks on its output) into a buffer bounded by
//! `outputByteLimit` (default [`DEFAULT_OUTPUT_BYTES`], at most [`MAX_OUTPUT_BYTES`]), which
//! drops the oldest output first, at a character boundary. Bytes that are not UTF-8 become
//! `U+FFFD`.
//!
//! A thread per terminal waits for the command to exit *without reaping it*: the exited
//! command stays a zombie until the terminal is released (or [`Terminals::kill_all`] runs),
//! so that its process group id cannot be reused by an unrelated process, and `terminal/kill`
//! and `terminal/release` can always SIGKILL the whole group, reaching what the command left
//! running in the background too. Once the group is killed for the last time, the thread
//! reaps the command. Processes that left the group (`setsid`, shells with job control) are
//! out of reach.
//!
//! The exit status is reported once the command has exited and its output is read to the
//! end (or, should something it started in the background keep the pipe open, after
//! [`DRAIN_GRACE`]): after `terminal/wait_for_exit` answers, `terminal/output` holds all of
//! it.
//!
//! At most [`MAX_TERMINALS`] terminals, running or exited but not released, exist at once on
//! a connection. A terminal belongs to the session that created it: asked about under another
//! session id, it is unknown.

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
#[cfg(unix)]
use std::os::fd::OwnedFd;
#[cfg(windows)]
use std::os::windows::io::OwnedHandle as OwnedFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

#[cfg(unix)]
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, WaitIdStatus};
use tokio::io::AsyncReadExt as _;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::jsonrpc::{RpcError, codes};
use crate::subprocess::DEFAULT_ENV_ALLOW;
use crate::sync::lock;
use crate::wire::default as wire;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows::Pid;

/// The most terminals (running, or exited and not yet released) one connection may hold.
pub const MAX_TERMINALS: usize = 64;

/// The output kept when the request gives no `outputByteLimit`: 1 MiB.
pub const DEFAULT_OUTPUT_BYTES: usize = 1024 * 1024;

/// The most output kept whatever the request asks: 16 MiB.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;

/// How long the exit status waits for the output pipe to close once the command has exited
/// (it stays open only while something the command started in the background holds it).
pub const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// How much is read from the pipe at once.
const READ_CHUNK: usize = 16 * 1024;

/// The terminals the agent created on one connection.
///
/// Shared by the connection's tasks: every method takes `&self`, and none holds a lock across
/// an `await`. Dropping it kills and reaps every terminal, like [`Terminals::kill_all`].
#[derive(Debug, Default)]
pub struct Terminals {
    registry: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    /// The number of the last terminal created (ids are `term-1`, `term-2`, ...).
    last: u64,
    /// Terminals being started: they count against [`MAX_TERMINALS`] already.
    starting: usize,
    live: HashMap<String, Arc<Terminal>>,
}

/// One command and what is known of it.
#[derive(Debug)]
struct Terminal {
    session: String,
    /// The command's pid, which is also its process group id.
    pid: Pid,
    output: Arc<Mutex<Output>>,
    /// Set once the command has exited and its output is read.
    exit: watch::Receiver<Option<Exit>>,
    control: Arc<Mutex<Control>>,
    reader: AbortHandle,
    /// Windows: the Job Object holding the command and what it starts (its "group").
    #[cfg(windows)]
    job: acp_process::job::Job,
}

/// Whether the process group may still be signalled.
#[derive(Debug)]
enum Control {
    /// The command is not reaped (running, or a zombie): its pid pins the group id. The
    /// sender reaches the thread that waits for it.
    Pinned(mpsc::Sender<Event>),
    /// The command is reaped or about to be: the group id may name someone else's group.
    Released,
}

/// What the waiting thread is told.
#[derive(Debug)]
enum Event {
    /// The output pipe is closed and read to the end.
    ReaderDone,
    /// The group has been killed for the last time: reap the command.
    Reap,
}

/// How the command ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Exit {
    code: Option<u32>,
    signal: Option<String>,
}

impl Terminals {
    /// `terminal/create`: starts the command and answers its terminal id.
    ///
    /// `cwd` must be given, as an absolute path to a folder (the runtime sets it, checked and
    /// canonical, before calling this). Errors: `-32602` for a request that cannot be run (an
    /// empty command, a NUL byte, a bad variable name, a `cwd` that is missing or not a
    /// folder, a program that does not exist or may not be executed); `-32603` when
    /// [`MAX_TERMINALS`] terminals are open already, or when starting fails otherwise (out of
    /// processes, threads or file descriptors, no Tokio runtime).
    pub async fn create(
        &self,
        request: &wire::CreateTerminalRequest,
    ) -> Result<wire::CreateTerminalResponse, RpcError> {
        let cwd = check_create(request)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            RpcError::new(
                codes::INTERNAL_ERROR,
                "terminals need a Tokio runtime to read their output",
            )
        })?;
        let slot = self.reserve()?;

        let (pipe_reader, pipe_writer) = std::io::pipe().map_err(|error| internal("cannot create a pipe", &error))?;
        let pipe_writer_2 = pipe_writer
            .try_clone()
            .map_err(|error| internal("cannot create a pipe", &error))?;
        let pipe_reader =
            tokio::process::ChildStdout::from_std(std::process::ChildStdout::from(OwnedFd::from(pipe_reader)))
                .map_err(|error| internal("cannot read a pipe", &error))?;

        // The thread is started first, so that a child is never left without its reaper.
        let (start_tx, start_rx) = mpsc::sync_channel::<(Child, Pid)>(1);
        let (events_tx, events_rx) = mpsc::channel();
        let (exit_tx, exit_rx) = watch::channel(None);
        let control = Arc::new(Mutex::new(Control::Pinned(events_tx.clone())));
        let thread_control = Arc::clone(&control);
        std::thread::Builder::new()
            .name("acp-terminal".into())
            .spawn(move || wait_and_reap(start_rx, events_rx, exit_tx, thread_control))
            .map_err(|error| internal("cannot start a thread to wait for the command", &error))?;

        #[cfg(unix)]
        let mut command = Command::new(&request.command);
        #[cfg(windows)]
        let mut command = Command::new(windows::program(request)?);
        command.args(&request.args).env_clear();
        for key in DEFAULT_ENV_ALLOW {
            if let Some(value) = std::env::var_os(key) {
                command.env(key, value);
            }
        }
        for variable in &request.env {
            command.env(&variable.name, &variable.value);
        }
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        #[cfg(windows)]
        std::os::windows::process::CommandExt::creation_flags(&mut command, acp_process::job::START_FLAGS);
        command
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::from(pipe_writer))
            .stderr(Stdio::from(pipe_writer_2));
        let spawned = command.spawn();
        // The command holds our copies of the pipe's write end: without dropping it, the
        // output would never end.
        drop(command);
        let mut child = spawned.map_err(|error| spawn_error(&request.command, &error))?;
        #[cfg(windows)]
        let (job, pid) = windows::contain(&mut child)?;
        #[cfg(unix)]
        let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RpcError::new(
                codes::INTERNAL_ERROR,
                "the command's pid is out of range",
            ));
        };
        if let Err(mpsc::SendError((mut child, _))) = start_tx.send((child, pid)) {
            // The thread is gone: kill and reap here.
            #[cfg(unix)]
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
            #[cfg(windows)]
            job.terminate();
            let _ = child.wait();
            return Err(RpcError::new(
                codes::INTERNAL_ERROR,
                "the thread waiting for the command stopped",
            ));
        }

        let limit = output_limit(request.output_byte_limit);
        let output = Arc::new(Mutex::new(Output::new(limit)));
        let reader = runtime
            .spawn(read_output(pipe_reader, Arc::clone(&output), events_tx))
            .abort_handle();
        let terminal = Arc::new(Terminal {
            session: request.session_id.0.clone(),
            pid,
            output,
            exit: exit_rx,
            control,
            reader,
            #[cfg(windows)]
            job,
        });
        let id = {
            let mut registry = lock(&self.registry);
            registry.last += 1;
            let id = format!("term-{}", registry.last);
            registry.live.insert(id.clone(), terminal);
            id
        };
        drop(slot);
        tracing::debug!(terminal = %id, %pid, command = %request.command, "terminal started");
        Ok(wire::CreateTerminalResponse::new(wire::TerminalId(id)))
    }

    /// `terminal/output`: the output kept so far, whether some was dropped, and how the
    /// command ended if it has. `-32002` for an unknown (or released) terminal.
    pub async fn output(
        &self,
        request: &wire::TerminalOutputRequest,
    ) -> Result<wire::TerminalOutputResponse, RpcError> {
        let terminal = self.get(&request.session_id, &request.terminal_id)?;
        // The exit status first: when it is set, the output is complete.
        let exit = terminal.exit.borrow().clone();
        let (output, truncated) = {
            let output = lock(&terminal.output);
            (output.text(), output.truncated)
        };
        let mut response = wire::TerminalOutputResponse::new(output, truncated);
        response.exit_status = exit.map(|exit| wire::TerminalExitStatus {
            exit_code: exit.code,
            signal: exit.signal,
            ..Default::default()
        });
        Ok(response)
    }

    /// `terminal/wait_for_exit`: waits until the command has exited and its output is read,
    /// then answers its exit code, or the name of the signal that ended it (`"SIGKILL"`).
    /// `-32002` for an unknown (or released) terminal.
    pub async fn wait_for_exit(
        &self,
        request: &wire::WaitForTerminalExitRequest,
    ) -> Result<wire::WaitForTerminalExitResponse, RpcError> {
        let terminal = self.get(&request.session_id, &request.terminal_id)?;
        let mut exit = terminal.exit.clone();
        let exit = match exit.wait_for(Option::is_some).await {
            Ok(exit) => exit.clone().unwrap_or_default(),
            Err(_) => {
                return Err(RpcError::new(
                    codes::INTERNAL_ERROR,
                    "the command's exit status is lost: its waiting thread stopped",
                ));
            }
        };
        Ok(wire::WaitForTerminalExitResponse {
            exit_code: exit.code,
            signal: exit.signal,
            ..Default::default()
        })
    }

    /// `terminal/kill`: SIGKILLs the command's process group. The terminal stays, its output
    /// readable, until released; killing a command that has exited already is no error.
    /// `-32002` for an unknown (or released) terminal.
    pub async fn kill(&self, request: &wire::KillTerminalRequest) -> Result<wire::KillTerminalResponse, RpcError> {
        let terminal = self.get(&request.session_id, &request.terminal_id)?;
        terminal.kill_group();
        Ok(wire::KillTerminalResponse::default())
    }

    /// `terminal/release`: SIGKILLs the command's process group (whatever of it still runs),
    /// reaps it and forgets the terminal: its id is unknown from then on (`-32002`, as for an
    /// id never created).
    pub async fn release(
        &self,
        request: &wire::ReleaseTerminalRequest,
    ) -> Result<wire::ReleaseTerminalResponse, RpcError> {
        // Checked first, so that another session cannot release it.
        self.get(&request.session_id, &request.terminal_id)?;
        let terminal = lock(&self.registry).live.remove(request.terminal_id.as_str());
        if let Some(terminal) = terminal {
            terminal.shutdown();
            tracing::debug!(terminal = %request.terminal_id.as_str(), "terminal released");
        }
        Ok(wire::ReleaseTerminalResponse::default())
    }

    /// Kills every terminal's process group and has the commands reaped (when the connection
    /// closes). The terminals stay known, their output readable, until released or dropped.
    pub fn kill_all(&self) {
        let terminals: Vec<Arc<Terminal>> = lock(&self.registry).live.values().cloned().collect();
        for terminal in terminals {
            terminal.shutdown();
        }
    }

    /// The terminal `id` of `session`, or `-32002`.
    fn get(&self, session: &wire::SessionId, id: &wire::TerminalId) -> Result<Arc<Terminal>, RpcError> {
        let registry = lock(&self.registry);
        match registry.live.get(id.as_str()) {
            Some(terminal) if terminal.session == session.0 => Ok(Arc::clone(terminal)),
            Some(_) => Err(RpcError::new(
                codes::RESOURCE_NOT_FOUND,
                format!("unknown terminal `{}`: it belongs to another session", id.as_str()),
            )),
            None => Err(RpcError::new(
                codes::RESOURCE_NOT_FOUND,
                format!(
                    "unknown terminal `{}`: never created on this connection, or already released",
                    id.as_str()
                ),
            )),
        }
    }

    /// Counts one more terminal against [`MAX_TERMINALS`] until the guard is dropped.
    fn reserve(&self) -> Result<Slot<'_>, RpcError> {
        let mut registry = lock(&self.registry);
        if registry.live.len() + registry.starting >= MAX_TERMINALS {
            return Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!(
                    "too many terminals: {MAX_TERMINALS} are open on this connection; \
                     release some with `terminal/release` first"
                ),
            ));
        }
        registry.starting += 1;
        Ok(Slot(self))
    }

    #[cfg(all(test, unix))]
    fn pid_of(&self, id: &wire::TerminalId) -> i32 {
        lock(&self.registry).live[id.as_str()].pid.as_raw_nonzero().get()
    }
}

/// A terminal being started.
struct Slot<'a>(&'a Terminals);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut registry = lock(&self.0.registry);
        registry.starting = registry.starting.saturating_sub(1);
    }
}

impl Terminal {
    /// SIGKILLs the group, unless the command is reaped (or about to be).
    fn kill_group(&self) {
        let control = lock(&self.control);
        if let Control::Pinned(_) = *control {
            self.signal_group();
        }
    }

    /// SIGKILLs the group a last time and has the command reaped; stops reading its output.
    /// Idempotent.
    fn shutdown(&self) {
        let mut control = lock(&self.control);
        if let Control::Pinned(events) = std::mem::replace(&mut *control, Control::Released) {
            self.signal_group();
            let _ = events.send(Event::Reap);
        }
        drop(control);
        self.reader.abort();
    }
}

impl Terminal {
    /// SIGKILL to the command's process group (Windows: its Job Object's processes killed).
    fn signal_group(&self) {
        #[cfg(unix)]
        signal_group(self.pid);
        #[cfg(windows)]
        windows::kill(&self.job, self.pid);
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(unix)]
fn signal_group(pid: Pid) {
    if let Err(error) = rustix::process::kill_process_group(pid, Signal::KILL) {
        tracing::debug!(%error, %pid, "SIGKILL to a terminal's process group failed");
    }
}

/// Checks what `create` needs before anything is started; answers the `cwd`.
fn check_create(request: &wire::CreateTerminalRequest) -> Result<&Path, RpcError> {
    let invalid = |message: String| RpcError::new(codes::INVALID_PARAMS, message);
    if request.command.is_empty() {
        return Err(invalid("`terminal/create` needs a non-empty `command`".into()));
    }
    if request.command.contains('\0') {
        return Err(invalid("the `command` contains a NUL byte".into()));
    }
    if let Some(index) = request.args.iter().position(|arg| arg.contains('\0')) {
        return Err(invalid(format!("argument {index} contains a NUL byte")));
    }
    for variable in &request.env {
        if variable.name.is_empty() || variable.name.contains(['=', '\0']) {
            return Err(invalid(format!(
                "`{}` is not a valid environment variable name (empty, or with `=` or a NUL byte)",
                variable.name.escape_debug()
            )));
        }
        if variable.value.contains('\0') {
            return Err(invalid(format!(
                "the value of the environment variable `{}` contains a NUL byte",
                variable.name
            )));
        }
    }
    let Some(cwd) = request.cwd.as_deref() else {
        return Err(invalid("`terminal/create` needs a `cwd`".into()));
    };
    let cwd = Path::new(cwd);
    if !cwd.is_absolute() {
        return Err(invalid(format!(
            "the `cwd` `{}` is not an absolute path",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(invalid(format!("the `cwd` `{}` is not a folder", cwd.display())));
    }
    Ok(cwd)
}

fn internal(what: &str, error: &std::io::Error) -> RpcError {
    RpcError::new(codes::INTERNAL_ERROR, format!("{what}: {error}"))
}

/// The error for a command that could not be started: `-32602` when the request is at fault.
fn spawn_error(program: &str, error: &std::io::Error) -> RpcError {
    match error.kind() {
        ErrorKind::NotFound if program.contains('/') => {
            RpcError::new(codes::INVALID_PARAMS, format!("cannot run `{program}`: no such file"))
        }
        ErrorKind::NotFound => RpcError::new(
            codes::INVALID_PARAMS,
            format!("cannot run `{program}`: no such program in the PATH"),
        ),
        ErrorKind::PermissionDenied | ErrorKind::InvalidInput | ErrorKind::NotADirectory | ErrorKind::IsADirectory => {
            RpcError::new(codes::INVALID_PARAMS, format!("cannot run `{program}`: {error}"))
        }
        // ERROR_BAD_EXE_FORMAT: not an executable format.
        #[cfg(windows)]
        _ if windows::not_executable(error) => {
            RpcError::new(codes::INVALID_PARAMS, format!("cannot run `{program}`: {error}"))
        }
        // ENOEXEC: not an executable format.
        #[cfg(unix)]
        _ if error.raw_os_error() == Some(rustix::io::Errno::NOEXEC.raw_os_error()) => {
            RpcError::new(codes::INVALID_PARAMS, format!("cannot run `{program}`: {error}"))
        }
        _ => RpcError::new(codes::INTERNAL_ERROR, format!("cannot run `{program}`: {error}")),
    }
}

/// The output to keep for a requested `outputByteLimit`.
fn output_limit(requested: Option<u64>) -> usize {
    match requested {
        None => DEFAULT_OUTPUT_BYTES,
        Some(limit) => usize::try_from(limit).unwrap_or(usize::MAX).min(MAX_OUTPUT_BYTES),
    }
}

/// The last `limit` bytes (or fewer) of a command's output, valid UTF-8.
#[derive(Debug)]
struct Output {
    bytes: VecDeque<u8>,
    limit: usize,
    truncated: bool,
}

impl Output {
    fn new(limit: usize) -> Self {
        Output {
            bytes: VecDeque::new(),
            limit,
            truncated: false,
        }
    }

    /// Appends `text`, then drops the oldest bytes beyond the limit, up to a char boundary.
    fn push(&mut self, text: &str) {
        self.bytes.extend(text.as_bytes());
        if self.bytes.len() > self.limit {
            let mut cut = self.bytes.len() - self.limit;
            // A UTF-8 continuation byte is `10xxxxxx`: no char starts there.
            while self.bytes.get(cut).is_some_and(|byte| byte & 0xC0 == 0x80) {
                cut += 1;
            }
            self.bytes.drain(..cut);
            self.truncated = true;
        }
    }

    fn text(&self) -> String {
        let (front, back) = self.bytes.as_slices();
        let mut bytes = Vec::with_capacity(self.bytes.len());
        bytes.extend_from_slice(front);
        bytes.extend_from_slice(back);
        // Always valid: only whole chars are pushed, and only whole chars dropped.
        String::from_utf8(bytes).unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
    }
}

/// Decodes a byte stream as UTF-8, lossily, a char split between reads kept whole.
#[derive(Debug, Default)]
struct Utf8Decoder {
    /// The start of a char whose end is not read yet (at most 3 bytes).
    pending: Vec<u8>,
}

impl Utf8Decoder {
    fn decode(&mut self, input: &[u8], out: &mut String) {
        let mut bytes = std::mem::take(&mut self.pending);
        bytes.extend_from_slice(input);
        let mut rest = bytes.as_slice();
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    rest = &[];
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    out.push_str(&String::from_utf8_lossy(valid));
                    match error.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = after.get(bad..).unwrap_or_default();
                        }
                        // An incomplete char at the end: the next read may complete it.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
    }

    /// The end of the stream: an incomplete char left is replaced.
    fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            out.push_str(&String::from_utf8_lossy(&self.pending));
            self.pending.clear();
        }
    }
}

/// Drains the output pipe into `output` until it is closed (or the task is aborted).
async fn read_output(mut pipe: tokio::process::ChildStdout, output: Arc<Mutex<Output>>, events: mpsc::Sender<Event>) {
    let mut buffer = vec![0; READ_CHUNK];
    let mut decoder = Utf8Decoder::default();
    let mut text = String::new();
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) => break,
            Ok(read) => {
                text.clear();
                decoder.decode(buffer.get(..read).unwrap_or_default(), &mut text);
                lock(&output).push(&text);
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => {
                tracing::debug!(%error, "reading a terminal's output failed");
                break;
            }
        }
    }
    text.clear();
    decoder.finish(&mut text);
    if !text.is_empty() {
        lock(&output).push(&text);
    }
    let _ = events.send(Event::ReaderDone);
}

/// The waiting thread: waits for the command to exit (without reaping it), for its output to
/// be read, publishes the exit status, then waits to be told to reap it.
fn wait_and_reap(
    start: mpsc::Receiver<(Child, Pid)>,
    events: mpsc::Receiver<Event>,
    exit: watch::Sender<Option<Exit>>,
    control: Arc<Mutex<Control>>,
) {
    let Ok((mut child, pid)) = start.recv() else {
        // The command did not start.
        return;
    };
    drop(start);
    let (status, reaped) = match wait_exited(pid) {
        Ok(status) => (status, false),
        Err(error) => {
            // Cannot wait without reaping: reap, and signal the group no more.
            tracing::debug!(%error, %pid, "waitid on a terminal's command failed; reaping it");
            *lock(&control) = Control::Released;
            let status = match child.wait() {
                #[cfg(unix)]
                Ok(status) => {
                    use std::os::unix::process::ExitStatusExt as _;
                    Exit {
                        code: status.code().and_then(|code| u32::try_from(code).ok()),
                        signal: status.signal().map(signal_name),
                    }
                }
                #[cfg(windows)]
                Ok(status) => Exit {
                    code: windows::exit_code(status),
                    signal: None,
                },
                Err(error) => {
                    tracing::warn!(%error, %pid, "a terminal's command could not be waited for");
                    Exit::default()
                }
            };
            (status, true)
        }
    };
    // The first event: the output is read (or the grace is over), or reap now.
    let reap_now = match events.recv_timeout(DRAIN_GRACE) {
        Ok(Event::ReaderDone) | Err(mpsc::RecvTimeoutError::Timeout) => false,
        Ok(Event::Reap) | Err(mpsc::RecvTimeoutError::Disconnected) => true,
    };
    exit.send_replace(Some(status));
    if reaped {
        return;
    }
    if !reap_now {
        // Until `Reap`, or until every sender is gone.
        while let Ok(Event::ReaderDone) = events.recv() {}
    }
    if let Err(error) = child.wait() {
        tracing::warn!(%error, %pid, "reaping a terminal's command failed");
    }
}

/// Waits until `pid` has exited (our handle of it stays open): its exit code.
#[cfg(windows)]
fn wait_exited(pid: Pid) -> std::io::Result<Exit> {
    windows::wait_exit_code(pid).map(|code| Exit {
        code: Some(code),
        signal: None,
    })
}

/// Waits until `pid` has exited, leaving it unreaped.
#[cfg(unix)]
fn wait_exited(pid: Pid) -> std::io::Result<Exit> {
    loop {
        match rustix::process::waitid(WaitId::Pid(pid), WaitIdOptions::EXITED | WaitIdOptions::NOWAIT) {
            Ok(Some(status)) => return Ok(describe(&status)),
            Ok(None) => return Err(std::io::Error::other("waitid reported no child")),
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
}

#[cfg(unix)]
fn describe(status: &WaitIdStatus) -> Exit {
    if let Some(code) = status.exit_status() {
        Exit {
            code: u32::try_from(code).ok(),
            signal: None,
        }
    } else if let Some(signal) = status.terminating_signal() {
        Exit {
            code: None,
            signal: Some(signal_name(signal)),
        }
    } else {
        Exit::default()
    }
}

/// `SIGKILL` for 9, ...; `signal 34` for a signal without a name here.
#[cfg(unix)]
fn signal_name(number: i32) -> String {
    const NAMES: &[(Signal, &str)] = &[
        (Signal::HUP, "SIGHUP"),
        (Signal::INT, "SIGINT"),
        (Signal::QUIT, "SIGQUIT"),
        (Signal::ILL, "SIGILL"),
        (Signal::TRAP, "SIGTRAP"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::BUS, "SIGBUS"),
        (Signal::FPE, "SIGFPE"),
        (Signal::KILL, "SIGKILL"),
        (Signal::USR1, "SIGUSR1"),
        (Signal::SEGV, "SIGSEGV"),
        (Signal::USR2, "SIGUSR2"),
        (Signal::PIPE, "SIGPIPE"),
        (Signal::ALARM, "SIGALRM"),
        (Signal::TERM, "SIGTERM"),
        (Signal::CHILD, "SIGCHLD"),
        (Signal::CONT, "SIGCONT"),
        (Signal::STOP, "SIGSTOP"),
        (Signal::TSTP, "SIGTSTP"),
        (Signal::TTIN, "SIGTTIN"),
        (Signal::TTOU, "SIGTTOU"),
        (Signal::URG, "SIGURG"),
        (Signal::XCPU, "SIGXCPU"),
        (Signal::XFSZ, "SIGXFSZ"),
        (Signal::VTALARM, "SIGVTALRM"),
        (Signal::PROF, "SIGPROF"),
        (Signal::WINCH, "SIGWINCH"),
        (Signal::SYS, "SIGSYS"),
    ];
    NAMES
        .iter()
        .find(|(signal, _)| signal.as_raw() == number)
        .map_or_else(|| format!("signal {number}"), |(_, name)| (*name).to_string())
}

#[cfg(test)]
mod tests {
    //! The tests that start programs (`sh`, `sleep`, `env`, …) are Unix's; Windows' terminals
    //! run under Wine in `examples/client/tests/wine_cmd_agent.rs`.

    #[cfg(unix)]
    use std::time::Instant;

    use super::*;

    /// The longest any test waits for a process (a bound, not a delay).
    #[cfg(unix)]
    const PATIENCE: Duration = Duration::from_secs(30);

    #[cfg(unix)]
    fn session() -> wire::SessionId {
        wire::SessionId("session-1".into())
    }

    #[cfg(unix)]
    fn cwd() -> String {
        std::env::temp_dir()
            .canonicalize()
            .expect("the temp folder")
            .to_string_lossy()
            .into_owned()
    }

    #[cfg(unix)]
    fn request(command: &str, args: &[&str]) -> wire::CreateTerminalRequest {
        let mut request = wire::CreateTerminalRequest::new(session(), command.into());
        request.args = args.iter().map(|arg| (*arg).to_string()).collect();
        request.cwd = Some(cwd());
        request
    }

    /// `sh -c script`.
    #[cfg(unix)]
    fn sh(script: &str) -> wire::CreateTerminalRequest {
        request("sh", &["-c", script])
    }

    #[cfg(unix)]
    async fn create(terminals: &Terminals, request: wire::CreateTerminalRequest) -> wire::TerminalId {
        terminals
            .create(&request)
            .await
            .expect("the terminal starts")
            .terminal_id
    }

    #[cfg(unix)]
    async fn output(terminals: &Terminals, id: &wire::TerminalId) -> Result<wire::TerminalOutputResponse, RpcError> {
        terminals
            .output(&wire::TerminalOutputRequest::new(session(), id.clone()))
            .await
    }

    #[cfg(unix)]
    async fn wait(terminals: &Terminals, id: &wire::TerminalId) -> wire::WaitForTerminalExitResponse {
        let request = wire::WaitForTerminalExitRequest::new(session(), id.clone());
        tokio::time::timeout(PATIENCE, terminals.wait_for_exit(&request))
            .await
            .expect("the command exits in time")
            .expect("wait_for_exit answers")
    }

    #[cfg(unix)]
    async fn kill(terminals: &Terminals, id: &wire::TerminalId) -> Result<wire::KillTerminalResponse, RpcError> {
        terminals
            .kill(&wire::KillTerminalRequest::new(session(), id.clone()))
            .await
    }

    /// A `sleep 100` started in `terminals`: its terminal and its pid.
    #[cfg(unix)]
    async fn sleeper(terminals: &Terminals) -> (wire::TerminalId, i32) {
        let id = create(terminals, request("sleep", &["100"])).await;
        let pid = terminals.pid_of(&id);
        (id, pid)
    }

    /// Runs `request` to its exit: then its output.
    #[cfg(unix)]
    async fn output_at_exit(
        terminals: &Terminals,
        request: wire::CreateTerminalRequest,
    ) -> wire::TerminalOutputResponse {
        let id = create(terminals, request).await;
        wait(terminals, &id).await;
        output(terminals, &id).await.unwrap()
    }

    #[cfg(unix)]
    async fn release(terminals: &Terminals, id: &wire::TerminalId) -> Result<wire::ReleaseTerminalResponse, RpcError> {
        terminals
            .release(&wire::ReleaseTerminalRequest::new(session(), id.clone()))
            .await
    }

    /// Polls `check` until it holds; fails after [`PATIENCE`].
    #[cfg(unix)]
    async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The state letter and parent pid of `pid`, from `/proc` (`None`: no such process).
    #[cfg(unix)]
    fn proc_state(pid: i32) -> Option<(char, u32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) S ppid ...`; `comm` may hold spaces and parentheses.
        let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let ppid = fields.next()?.parse().ok()?;
        Some((state, ppid))
    }

    /// Running (or sleeping), not dead.
    #[cfg(unix)]
    fn is_alive(pid: i32) -> bool {
        proc_state(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
    }

    /// A zombie child of this process.
    #[cfg(unix)]
    fn is_our_zombie(pid: i32) -> bool {
        proc_state(pid).is_some_and(|(state, ppid)| state == 'Z' && ppid == std::process::id())
    }

    /// A child of this process, zombie or not (`false` once reaped).
    #[cfg(unix)]
    fn is_our_child(pid: i32) -> bool {
        proc_state(pid).is_some_and(|(_, ppid)| ppid == std::process::id())
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn echo_output_is_captured() {
        let terminals = Terminals::default();
        let id = create(&terminals, request("echo", &["hello", "wörld"])).await;
        assert_eq!(id.as_str(), "term-1");
        let exit = wait(&terminals, &id).await;
        assert_eq!((exit.exit_code, exit.signal), (Some(0), None));
        let output = output(&terminals, &id).await.unwrap();
        assert_eq!(output.output, "hello wörld\n");
        assert!(!output.truncated);
        let status = output.exit_status.expect("an exit status once exited");
        assert_eq!((status.exit_code, status.signal), (Some(0), None));
        let second = create(&terminals, request("true", &[])).await;
        assert_eq!(second.as_str(), "term-2");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn stdout_and_stderr_are_captured_in_order() {
        let terminals = Terminals::default();
        let output = output_at_exit(
            &terminals,
            sh("echo out1; echo err1 >&2; echo out2; echo err2 >&2; echo out3"),
        )
        .await;
        assert_eq!(output.output, "out1\nerr1\nout2\nerr2\nout3\n");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn exit_code_is_reported_by_wait_for_exit_and_output() {
        let terminals = Terminals::default();
        let running = create(&terminals, request("sleep", &["100"])).await;
        let id = create(&terminals, sh("echo bye; exit 3")).await;
        let exit = wait(&terminals, &id).await;
        assert_eq!((exit.exit_code, exit.signal), (Some(3), None));
        let output = output(&terminals, &id).await.unwrap();
        assert_eq!(output.output, "bye\n");
        assert_eq!(output.exit_status.and_then(|status| status.exit_code), Some(3));
        // Still running: no exit status.
        let running_output = super::tests::output(&terminals, &running).await.unwrap();
        assert_eq!(running_output.exit_status, None);
        release(&terminals, &running).await.unwrap();
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn wait_for_exit_answers_after_all_output_is_read() {
        let terminals = Terminals::default();
        let lines = sh("i=0; while [ $i -lt 5000 ]; do echo line$i; i=$((i+1)); done");
        let output = output_at_exit(&terminals, lines).await;
        let expected: String = (0..5000).map(|i| format!("line{i}\n")).collect();
        assert_eq!(output.output, expected);
        assert!(!output.truncated);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn output_is_truncated_from_the_beginning_at_a_char_boundary() {
        let terminals = Terminals::default();
        let print = |text: &str, limit: Option<u64>| {
            let mut request = request("sh", &["-c", "printf '%s' \"$1\"", "sh", text]);
            request.output_byte_limit = limit;
            request
        };
        let run = async |request| {
            let output = output_at_exit(&terminals, request).await;
            (output.output, output.truncated)
        };
        // 4 + 4 × 3 bytes; the last 7 would start inside a `€`.
        assert_eq!(run(print("aaaa€€€€", Some(7))).await, ("€€".to_string(), true));
        // Exactly at the limit: nothing dropped.
        assert_eq!(run(print("aaaa€€€€", Some(16))).await, ("aaaa€€€€".to_string(), false));
        // Larger than a read, with 4-byte chars: 99 bytes of the last are kept of 4001.
        let long = format!("x{}", "🦀".repeat(1000));
        let (kept, truncated) = run(print(&long, Some(99))).await;
        assert!(truncated);
        assert_eq!(kept, "🦀".repeat(24));
        assert_eq!(run(print("abc", Some(0))).await, (String::new(), true));
        // Default limit: a little output is kept whole.
        assert_eq!(run(print("é", None)).await, ("é".to_string(), false));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn invalid_utf8_is_replaced() {
        let terminals = Terminals::default();
        let output = output_at_exit(&terminals, sh("printf 'a\\377b\\342\\202\\254c\\342'")).await;
        assert_eq!(output.output, "a\u{FFFD}b€c\u{FFFD}");
    }

    #[test]
    fn decoder_keeps_a_char_split_between_reads() {
        let mut decoder = Utf8Decoder::default();
        let mut out = String::new();
        let euro = "€".as_bytes();
        decoder.decode(&[b'a', euro[0]], &mut out);
        assert_eq!(out, "a");
        decoder.decode(&euro[1..2], &mut out);
        assert_eq!(out, "a");
        decoder.decode(&[euro[2], 0xFF, b'b', 0xF0, 0x9F], &mut out);
        assert_eq!(out, "a€\u{FFFD}b");
        decoder.finish(&mut out);
        assert_eq!(out, "a€\u{FFFD}b\u{FFFD}");
    }

    #[test]
    fn output_buffer_keeps_whole_chars() {
        let mut output = Output::new(5);
        output.push("ab");
        assert_eq!((output.text(), output.truncated), ("ab".to_string(), false));
        output.push("€€");
        // 8 bytes; the last 5 start inside the first `€`, so only the second is kept.
        assert_eq!((output.text(), output.truncated), ("€".to_string(), true));
        output.push("xy");
        assert_eq!(output.text(), "€xy");
    }

    #[test]
    fn output_limit_has_a_default_and_a_cap() {
        assert_eq!(output_limit(None), DEFAULT_OUTPUT_BYTES);
        assert_eq!(output_limit(Some(10)), 10);
        assert_eq!(output_limit(Some(u64::MAX)), MAX_OUTPUT_BYTES);
    }

    #[cfg(unix)]
    #[test]
    fn signals_are_named() {
        assert_eq!(signal_name(Signal::KILL.as_raw()), "SIGKILL");
        assert_eq!(signal_name(Signal::TERM.as_raw()), "SIGTERM");
        assert_eq!(signal_name(Signal::ALARM.as_raw()), "SIGALRM");
        assert_eq!(signal_name(1000), "signal 1000");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn kill_reaches_the_process_group_and_keeps_the_terminal() {
        let terminals = Arc::new(Terminals::default());
        let id = create(&terminals, sh("sleep 100 & echo $!; sleep 100")).await;
        let mut text = String::new();
        let deadline = Instant::now() + PATIENCE;
        while !text.ends_with('\n') {
            assert!(Instant::now() < deadline, "the background pid is not printed");
            tokio::time::sleep(Duration::from_millis(10)).await;
            text = output(&terminals, &id).await.unwrap().output;
        }
        let background: i32 = text.trim().parse().expect("a pid");
        assert!(is_alive(background), "the background sleep runs");
        let leader = terminals.pid_of(&id);

        // Waiting from another task, while this one kills.
        let waiter = tokio::spawn({
            let terminals = Arc::clone(&terminals);
            let id = id.clone();
            async move { wait(&terminals, &id).await }
        });
        kill(&terminals, &id).await.unwrap();
        let exit = waiter.await.unwrap();
        assert_eq!((exit.exit_code, exit.signal.as_deref()), (None, Some("SIGKILL")));
        eventually("the background sleep is dead", || !is_alive(background)).await;

        // Still there until released; killing again is fine.
        let after = output(&terminals, &id).await.unwrap();
        assert_eq!(after.output, text);
        assert_eq!(
            after.exit_status.and_then(|status| status.signal).as_deref(),
            Some("SIGKILL")
        );
        kill(&terminals, &id).await.unwrap();
        assert_eq!(wait(&terminals, &id).await.signal.as_deref(), Some("SIGKILL"));

        release(&terminals, &id).await.unwrap();
        eventually("the command is reaped", || !is_our_child(leader)).await;
        for error in [
            output(&terminals, &id).await.map(drop).unwrap_err(),
            kill(&terminals, &id).await.map(drop).unwrap_err(),
            release(&terminals, &id).await.map(drop).unwrap_err(),
            terminals
                .wait_for_exit(&wire::WaitForTerminalExitRequest::new(session(), id.clone()))
                .await
                .map(drop)
                .unwrap_err(),
        ] {
            assert_eq!(error.code, codes::RESOURCE_NOT_FOUND, "{error}");
            assert!(error.message.contains("term-1"), "{error}");
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn release_kills_a_running_command() {
        let terminals = Terminals::default();
        let (id, pid) = sleeper(&terminals).await;
        assert!(is_alive(pid));
        release(&terminals, &id).await.unwrap();
        eventually("the released command is killed and reaped", || !is_our_child(pid)).await;
        let error = output(&terminals, &id).await.unwrap_err();
        assert_eq!(error.code, codes::RESOURCE_NOT_FOUND);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_terminal_is_unknown_to_other_sessions() {
        let terminals = Terminals::default();
        let id = create(&terminals, request("sleep", &["100"])).await;
        let other = wire::SessionId("session-2".into());
        let error = terminals
            .release(&wire::ReleaseTerminalRequest::new(other.clone(), id.clone()))
            .await
            .unwrap_err();
        assert_eq!(error.code, codes::RESOURCE_NOT_FOUND);
        let error = terminals
            .output(&wire::TerminalOutputRequest::new(other, id.clone()))
            .await
            .unwrap_err();
        assert_eq!(error.code, codes::RESOURCE_NOT_FOUND);
        // Not released by the other session.
        assert_eq!(output(&terminals, &id).await.unwrap().exit_status, None);
        release(&terminals, &id).await.unwrap();
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn bad_requests_and_spawn_failures_are_reported() {
        let terminals = Terminals::default();
        // Refused as invalid params: the message.
        let refused = async |request: wire::CreateTerminalRequest| {
            let error = terminals.create(&request).await.unwrap_err();
            assert_eq!(error.code, codes::INVALID_PARAMS, "{error}");
            error.message
        };
        let message = refused(request("agentacp-no-such-program", &[])).await;
        assert!(message.contains("`agentacp-no-such-program`"), "{message}");
        assert!(message.contains("no such program"), "{message}");
        let message = refused(request("/agentacp/no/such/program", &[])).await;
        assert!(message.contains("no such file"), "{message}");

        let mut no_cwd = request("true", &[]);
        no_cwd.cwd = None;
        let mut relative_cwd = request("true", &[]);
        relative_cwd.cwd = Some("relative".into());
        let mut missing_cwd = request("true", &[]);
        missing_cwd.cwd = Some("/agentacp/no/such/folder".into());
        let mut bad_name = request("true", &[]);
        bad_name.env.push(wire::EnvVariable::new("A=B".into(), "c".into()));
        let mut nul_value = request("true", &[]);
        nul_value.env.push(wire::EnvVariable::new("A".into(), "c\0".into()));
        for request in [
            request("", &[]),
            request("tr\0ue", &[]),
            request("echo", &["a\0"]),
            no_cwd,
            relative_cwd,
            missing_cwd,
            bad_name,
            nul_value,
        ] {
            refused(request).await;
        }
        // Nothing was kept, nothing stays reserved.
        let registry = lock(&terminals.registry);
        assert!(registry.live.is_empty());
        assert_eq!(registry.starting, 0);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn environment_is_cleared_but_for_the_allow_list_and_the_request() {
        let terminals = Terminals::default();
        let mut request = request("env", &[]);
        request
            .env
            .push(wire::EnvVariable::new("AGENTACP_FROM_REQUEST".into(), "a b=c".into()));
        request
            .env
            .push(wire::EnvVariable::new("LANG".into(), "C.UTF-8".into()));
        let id = create(&terminals, request).await;
        assert_eq!(wait(&terminals, &id).await.exit_code, Some(0));
        let output = output(&terminals, &id).await.unwrap().output;
        let lines: Vec<&str> = output.lines().collect();
        assert!(lines.contains(&"AGENTACP_FROM_REQUEST=a b=c"), "{output}");
        assert!(lines.contains(&"LANG=C.UTF-8"), "the request overrides: {output}");
        if let Some(path) = std::env::var_os("PATH") {
            let expected = format!("PATH={}", path.to_string_lossy());
            assert!(lines.contains(&expected.as_str()), "{output}");
        }
        for line in &lines {
            let name = line.split('=').next().unwrap_or_default();
            assert!(
                DEFAULT_ENV_ALLOW.contains(&name) || name == "AGENTACP_FROM_REQUEST",
                "`{name}` leaked into the terminal: {output}"
            );
        }
        // Our variables outside the allow-list (cargo sets several) are not there.
        let names: Vec<&str> = lines.iter().filter_map(|line| line.split('=').next()).collect();
        let unlisted: Vec<String> = std::env::vars_os()
            .filter_map(|(name, _)| name.into_string().ok())
            .filter(|name| !DEFAULT_ENV_ALLOW.contains(&name.as_str()))
            .collect();
        assert!(!unlisted.is_empty(), "the test needs a variable outside the allow-list");
        for name in unlisted {
            assert!(
                !names.contains(&name.as_str()),
                "`{name}` leaked into the terminal: {output}"
            );
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_command_runs_in_cwd() {
        let folder = tempfile::tempdir().unwrap();
        let folder = folder.path().canonicalize().unwrap();
        let terminals = Terminals::default();
        let mut request = request("pwd", &[]);
        request.cwd = Some(folder.to_string_lossy().into_owned());
        let id = create(&terminals, request).await;
        wait(&terminals, &id).await;
        let output = output(&terminals, &id).await.unwrap().output;
        assert_eq!(output, format!("{}\n", folder.display()));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn kill_all_leaves_no_zombie() {
        let terminals = Terminals::default();
        let exited = create(&terminals, request("true", &[])).await;
        let sleeping = create(&terminals, request("sleep", &["100"])).await;
        let group = create(&terminals, sh("sleep 100 & sleep 100")).await;
        let pids = [&exited, &sleeping, &group].map(|id| terminals.pid_of(id));
        wait(&terminals, &exited).await;
        // By design: an exited, unreleased command stays unreaped, its group id pinned.
        assert!(is_our_zombie(pids[0]));

        terminals.kill_all();
        eventually("every command is reaped", || pids.iter().all(|&pid| !is_our_child(pid))).await;
        assert_eq!(wait(&terminals, &sleeping).await.signal.as_deref(), Some("SIGKILL"));
        assert_eq!(wait(&terminals, &group).await.signal.as_deref(), Some("SIGKILL"));
        // Every zombie child of ours, should other tests have left some, is not one of these.
        let zombies: Vec<i32> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&pid| is_our_zombie(pid))
            .collect();
        assert!(pids.iter().all(|pid| !zombies.contains(pid)), "{zombies:?}");
        // Still known, output readable; killing is a no-op now.
        assert!(output(&terminals, &exited).await.is_ok());
        kill(&terminals, &sleeping).await.unwrap();
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn dropping_the_terminals_kills_and_reaps() {
        let terminals = Terminals::default();
        let (_id, pid) = sleeper(&terminals).await;
        drop(terminals);
        eventually("the command is killed and reaped", || !is_our_child(pid)).await;
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn live_terminals_are_bounded() {
        let terminals = Terminals::default();
        let mut ids = Vec::new();
        for _ in 0..MAX_TERMINALS {
            ids.push(create(&terminals, request("sleep", &["100"])).await);
        }
        let error = terminals.create(&request("true", &[])).await.unwrap_err();
        assert_eq!(error.code, codes::INTERNAL_ERROR);
        assert!(error.message.contains("too many terminals"), "{error}");
        release(&terminals, &ids[0]).await.unwrap();
        create(&terminals, request("true", &[])).await;
        terminals.kill_all();
    }
}
