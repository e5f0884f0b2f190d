//! A server serving ACP over a WebSocket (`--listen 127.0.0.1:PORT`, see `docs/remote.md`) for
//! the tests whose official SDK clients connect to it (`tests/ts_sdk.rs`, `tests/py_sdk.rs`),
//! and the SDK agents' own HTTP servers that our client dials (`tests/http_servers.rs`).

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TIMEOUT;

/// How many times [`WsServer::start`] tries a fresh port when the server exits before it
/// accepts (another process took the port between picking and binding it).
const ATTEMPTS: usize = 3;

/// A server process listening on a port (on loopback unless started with
/// [`WsServer::start_on`]), killed when dropped.
#[derive(Debug)]
pub struct WsServer {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    /// Where it is reached: `127.0.0.1`, unless it listens on one other address only.
    host: Ipv4Addr,
    stderr: tempfile::NamedTempFile,
}

impl WsServer {
    /// Starts `binary --listen 127.0.0.1:PORT` with `env` added to its environment, on a port
    /// that was free a moment before (bound to `127.0.0.1:0`, read, released: the server does
    /// not report a port 0 it was given), and returns once the port accepts a TCP connection.
    /// Panics, with the server's stderr, when it exits first or does not accept within
    /// [`TIMEOUT`].
    pub fn start(binary: &Path, env: &[(&str, OsString)]) -> Self {
        Self::start_on(binary, env, Ipv4Addr::LOCALHOST)
    }

    /// [`WsServer::start`], listening on `address` (`0.0.0.0`: every address of the
    /// machine; then it is reached on loopback). A server that listens beyond loopback wants
    /// a token: give it one in `env`.
    pub fn start_on(binary: &Path, env: &[(&str, OsString)], address: Ipv4Addr) -> Self {
        Self::start_program(binary, &[], env, address)
    }

    /// [`WsServer::start_on`] for `program ARGS --listen ADDRESS:PORT` (a script under its
    /// interpreter: `node http-agent.mjs`, say).
    pub fn start_program(program: &Path, args: &[OsString], env: &[(&str, OsString)], address: Ipv4Addr) -> Self {
        let binary = program;
        let host = if address.is_unspecified() {
            Ipv4Addr::LOCALHOST
        } else {
            address
        };
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let port = free_port();
            let stderr = tempfile::NamedTempFile::new().expect("a temporary stderr file");
            let child = Command::new(binary)
                .args(args)
                .arg("--listen")
                .arg(format!("{address}:{port}"))
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr.reopen().expect("reopen the stderr file"))
                .spawn()
                .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", binary.display()));
            let mut server = Self {
                child,
                port,
                host,
                stderr,
            };
            match server.wait_until_accepting() {
                Ok(()) => return server,
                Err(why) => last = format!("{why}\n--- server stderr\n{}---", server.stderr_text()),
            }
        }
        panic!(
            "{} --listen did not accept connections ({ATTEMPTS} attempts); the last: {last}",
            binary.display()
        );
    }

    /// Connecting is the readiness check: retried until the port accepts, the process exits,
    /// or [`TIMEOUT`] passes.
    fn wait_until_accepting(&mut self) -> Result<(), String> {
        let addr = SocketAddr::from((self.host, self.port));
        let started = Instant::now();
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait().expect("poll the server") {
                return Err(format!("the server exited ({status}) before accepting on {addr}"));
            }
            if started.elapsed() > TIMEOUT {
                return Err(format!("{addr} did not accept within {TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `ws://127.0.0.1:PORT/acp` (or the one address it listens on).
    pub fn url(&self) -> String {
        format!("ws://{}:{}/acp", self.host, self.port)
    }

    /// The server's process id (its memory is read from `/proc/PID/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("poll the server").is_none()
    }

    /// Sends SIGTERM (a supervisor stopping the server: it drains and exits).
    pub fn terminate(&self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).expect("a child has a pid above 0");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("signal the server");
    }

    /// The server's exit status once it exits within `timeout`; `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the server") {
                return Some(status);
            }
            if started.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }
}

impl Drop for WsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listened on a moment ago.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// A bearer token for one test: not guessable from the test's name, different each run.
pub fn test_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    format!("interop-{:016x}{:08x}", hasher.finish(), std::process::id())
}

/// An IPv4 address of this machine that is not loopback: the source address of its route
/// to a documentation address (a UDP socket's `connect` picks it; nothing is sent). `None`
/// on a machine with no such route.
pub fn non_loopback_ipv4() -> Option<Ipv4Addr> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    socket.connect((Ipv4Addr::new(203, 0, 113, 1), 9)).ok()?;
    match socket.local_addr().ok()?.ip() {
        std::net::IpAddr::V4(address) if !address.is_loopback() && !address.is_unspecified() => Some(address),
        _ => None,
    }
}
