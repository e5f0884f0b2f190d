//! An example server listening for ACP over WebSocket on a loopback port the kernel picks
//! (`--listen 127.0.0.1:0`), for the tests that drive it remotely. The port is read from the
//! line the server prints on stderr (`NAME: listening on ws://127.0.0.1:PORT/acp`), so there
//! is no window in which another process could take it. The server is killed and
//! reaped on drop.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// How long the server may take to log that it listens.
const STARTUP: Duration = Duration::from_secs(20);

/// A server process listening on `127.0.0.1:port`.
pub struct WsServer {
    child: Child,
    /// The port it listens on.
    pub port: u16,
}

impl WsServer {
    /// Starts `binary --listen 127.0.0.1:0` with `env` added and waits (at most [`STARTUP`])
    /// for the log line that names its address. Panics, with the stderr read so far, when the
    /// server exits or stays silent.
    pub fn start(binary: &Path, env: &[(&str, OsString)]) -> WsServer {
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0"])
            .env("AGENTACP_LOG", "info")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let stderr = child.stderr.take().expect("a stderr pipe");
        let (tx, lines) = channel();
        // Reads stderr to its end, so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                // (Once no one listens, the lines are dropped.)
                let _ = tx.send(line);
            }
        });
        let mut server = WsServer { child, port: 0 };
        let deadline = Instant::now() + STARTUP;
        let mut seen = String::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(port) = line
                        .split_once(": listening on ws://")
                        .and_then(|(_, addr)| addr.strip_suffix("/acp"))
                        .and_then(|addr| addr.rsplit_once(':'))
                        .and_then(|(_, port)| port.parse().ok())
                    {
                        server.port = port;
                        return server;
                    }
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "{} did not say where it listens within {STARTUP:?}; stderr:\n{seen}",
                        binary.display()
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = server.child.wait().expect("reap the server");
                    panic!(
                        "{} exited ({status}) before listening; stderr:\n{seen}",
                        binary.display()
                    )
                }
            }
        }
    }

    /// `ws://127.0.0.1:PORT/acp`.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/acp", self.port)
    }
}

impl Drop for WsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
