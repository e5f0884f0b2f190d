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

/// Runs `command` with an empty stdin and collects its output; kills it and fails the test
/// when it has not ended within `limit` (a guard against hanging, not a timing assertion).
pub fn output_within(command: &mut std::process::Command, limit: std::time::Duration) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let pipes: [Box<dyn Read + Send>; 2] = [
        Box::new(child.stdout.take().unwrap()),
        Box::new(child.stderr.take().unwrap()),
    ];
    for (index, mut pipe) in pipes.into_iter().enumerate() {
        let sender = sender.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            let _ = sender.send((index, bytes));
        });
    }
    let mut outputs = [Vec::new(), Vec::new()];
    for _ in 0..2 {
        let Ok((index, bytes)) = receiver.recv_timeout(limit) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} was still running after {limit:?}; killed");
        };
        outputs[index] = bytes;
    }
    let [stdout, stderr] = outputs;
    std::process::Output {
        status: child.wait().unwrap(),
        stdout,
        stderr,
    }
}
