//! Issue #45.9: `governed-server --listen 127.0.0.1:0` printed nothing, so the port the
//! system picked could not be found. It prints the address it listens on, on stderr, whatever
//! the log level; `--help` prints the usage.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long the server may take to say where it listens.
const STARTUP: Duration = Duration::from_secs(20);

#[test]
fn listening_on_port_0_prints_the_address() {
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_governed-server"))
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("AGENTACP_LOG")
        .env_remove("RUST_LOG")
        .env("AGENTACP_WORKSPACE_ROOT", root.path())
        .env("AGENTACP_STATE_DIR", root.path().join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("governed-server starts");
    let stderr = child.stderr.take().unwrap();
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    // Warnings may come first (no token: loopback only).
    let deadline = std::time::Instant::now() + STARTUP;
    let mut seen = Vec::new();
    let found = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(line) = received.recv_timeout(left) else {
            break None;
        };
        if let Some(addr) = line
            .strip_prefix("governed-server: listening on ws://")
            .and_then(|rest| rest.strip_suffix("/acp"))
        {
            break Some((addr.to_string(), line));
        }
        seen.push(line);
    };
    let _ = child.kill();
    let _ = child.wait();
    let (addr, line) = found.unwrap_or_else(|| panic!("no address on stderr: {seen:#?}"));
    let addr: std::net::SocketAddr = addr.parse().unwrap_or_else(|_| panic!("not an address: {line}"));
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{line}");
}

#[test]
fn help_prints_the_usage_and_exits_0() {
    let output = Command::new(env!("CARGO_BIN_EXE_governed-server"))
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .expect("governed-server runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("usage: governed-server [--listen HOST:PORT]"),
        "{stdout}"
    );
    // Issue #47: --listen serves Streamable HTTP on the same endpoint as WebSocket.
    assert!(stdout.contains("Streamable HTTP (http://HOST:PORT/acp"), "{stdout}");
}
