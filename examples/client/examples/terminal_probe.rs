//! A helper of `tests/wine_cmd_agent.rs` (issue #50), built for Windows and run under Wine: the
//! runtime's built-in `terminal/*` methods (what an agent asks its client for), driven directly.
//!
//! `terminal_probe CWD BIN`: with `BIN` (holding `probe.cmd` and `linger.exe`) as the
//! commands' `PATH`, it runs `probe "two words"` (a batch file found by its bare name, which
//! prints its argument, leaves `linger.exe` running and exits with code 3) and waits for it;
//! runs `probe` with an argument holding `"` (refused); runs `linger` and kills it; releases
//! both terminals. Each outcome is a line on stdout (`exit=…`, `output=…`, `refused=…`,
//! `killed=…`, `released`); then it waits for its stdin to close, so that the test can look
//! for processes left after the release, while it still runs.

use std::io::Write as _;

use agentacp::client::terminal::Terminals;
use agentacp::prelude::wire;

/// A line on stdout, flushed (the test reads them as they come).
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, $($arg)*);
        let _ = out.flush();
    }};
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(cwd), Some(bin)) = (args.next(), args.next()) else {
        eprintln!("usage: terminal_probe CWD BIN");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    runtime.block_on(probe(&cwd, &bin));
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut rest);
}

/// `command args` in `cwd`, with `bin` as its `PATH`.
fn request(cwd: &str, bin: &str, command: &str, args: &[&str]) -> wire::CreateTerminalRequest {
    let mut request = wire::CreateTerminalRequest::new(wire::SessionId("s".into()), command.into());
    request.args = args.iter().map(|arg| (*arg).to_string()).collect();
    request.cwd = Some(cwd.into());
    request.env.push(wire::EnvVariable::new("PATH".into(), bin.into()));
    request
}

async fn probe(cwd: &str, bin: &str) {
    let terminals = Terminals::default();
    let session = wire::SessionId("s".into());

    let probe = (terminals.create(&request(cwd, bin, "probe", &["two words"])).await).expect("probe starts");
    let wait = wire::WaitForTerminalExitRequest::new(session.clone(), probe.terminal_id.clone());
    let exit = terminals.wait_for_exit(&wait).await.expect("probe's exit");
    say!("exit={:?} signal={:?}", exit.exit_code, exit.signal);
    let read = wire::TerminalOutputRequest::new(session.clone(), probe.terminal_id.clone());
    let output = terminals.output(&read).await.expect("probe's output");
    say!("output={}", output.output.trim_end());

    match terminals
        .create(&request(cwd, bin, "probe", &["x\"&echo injected"]))
        .await
    {
        Ok(_) => say!("refused=no"),
        Err(error) => say!("refused={} {}", error.code, error.message),
    }

    let linger = (terminals.create(&request(cwd, bin, "linger", &[])).await).expect("linger starts");
    let kill = wire::KillTerminalRequest::new(session.clone(), linger.terminal_id.clone());
    terminals.kill(&kill).await.expect("kill");
    let wait = wire::WaitForTerminalExitRequest::new(session.clone(), linger.terminal_id.clone());
    let exit = terminals.wait_for_exit(&wait).await.expect("linger's exit");
    say!("killed={:?} signal={:?}", exit.exit_code, exit.signal);

    for id in [probe.terminal_id, linger.terminal_id] {
        let release = wire::ReleaseTerminalRequest::new(session.clone(), id);
        terminals.release(&release).await.expect("release");
    }
    say!("released");
}
