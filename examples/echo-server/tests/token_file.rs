//! A server started with `AGENTACP_TOKENS_FILE` naming something that is not a token file
//! (issue #44, item 6): `/dev/zero` grew the server to gigabytes, a FIFO hung it. Each must
//! stop the server at once with a sentence naming the file.

#![cfg(unix)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Starts `echo-server --listen 127.0.0.1:0` with `AGENTACP_TOKENS_FILE=tokens_file` and
/// returns how it ended. So that a bug cannot hang or swamp the test, the server gets at most
/// 2 GiB of address space and may not write to any file (`ulimit -v`, `ulimit -f 0`), and is
/// killed, failing the test, if it is still running after a minute (a guard against hanging,
/// not a timing assertion).
fn start_with_tokens_file(dir: &Path, tokens_file: &Path) -> Output {
    const LIMIT: Duration = Duration::from_secs(60);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2097152 && ulimit -f 0 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_echo-server"))
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(dir)
        .env("AGENTACP_TOKENS_FILE", tokens_file)
        .env("AGENTACP_WORKSPACE_ROOT", dir)
        .env("AGENTACP_STATE_DIR", dir)
        .env_remove("AGENTACP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        let _ = sender.send(bytes);
    });
    let Ok(stderr) = receiver.recv_timeout(LIMIT) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the server was still running after {LIMIT:?} with the token file {tokens_file:?}; killed");
    };
    Output {
        status: child.wait().unwrap(),
        stdout: Vec::new(),
        stderr,
    }
}

#[test]
fn a_server_refuses_dev_zero_or_a_fifo_as_its_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("tokens");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for (file, kind) in [
        (fifo.as_path(), "a FIFO"),
        (Path::new("/dev/zero"), "a character device"),
    ] {
        let output = start_with_tokens_file(dir.path(), file);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{file:?}: {stderr}");
        let expected = format!(
            "{}: not a regular file ({kind}); a token file is a regular file",
            file.display()
        );
        assert!(
            stderr.contains(&expected),
            "{file:?}: expected `{expected}` in:\n{stderr}"
        );
    }
}
