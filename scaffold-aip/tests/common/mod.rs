//! Helpers shared by the integration tests: those of every crate's tests (the `test-support`
//! crate), and what only the command line's tests need.
// Each test file uses a part of it.
#![allow(dead_code, unused_imports)]

pub use test_support::*;

/// Runs the built `scaffold-aip` with `args` in `dir` on hostile input, so that a bug cannot
/// hang, swamp or damage anything: the child gets at most 2 GiB of address space (`ulimit
/// -v`), may not write a byte to any file (`ulimit -f 0`: a bug that took `/dev/zero` for a
/// token file cannot replace it, even as root), and is killed, failing the test, if it has not
/// finished within a minute (a guard against hanging, not a timing assertion). Stdin is empty.
#[cfg(unix)]
pub fn run_bounded(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg("ulimit -v 2097152 && ulimit -f 0 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_scaffold-aip"))
        .args(args)
        .current_dir(dir);
    output_within(&mut command, std::time::Duration::from_secs(60))
}

/// Runs the built `scaffold-aip` with `args` in `dir`, stdin empty, with
/// `AGENTACP_DATABASE_URL` set to `database` (or, `None`, removed), as a bare `--database`
/// reads it.
pub fn run_with_database_env(dir: &std::path::Path, args: &[&str], database: Option<&str>) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_scaffold-aip"));
    command
        .current_dir(dir)
        .args(args)
        .stdin(std::process::Stdio::null())
        .env_remove("AGENTACP_DATABASE_URL");
    if let Some(url) = database {
        command.env("AGENTACP_DATABASE_URL", url);
    }
    command.output().unwrap()
}

/// The URL of a database nobody serves (a loopback port just free), with user `agent` and
/// password `s3cret` (which no message may show), and its port.
pub fn unreachable_database() -> (String, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    (format!("postgres://agent:s3cret@127.0.0.1:{port}/agents"), port)
}
