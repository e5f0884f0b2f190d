//! A Windows program for `tests/wine_pipe.rs`: makes a named pipe with
//! [`acp_process::pipe::create_private`] (its first instance), checks that a second "first
//! instance" of the name is refused, connects to it as a client of the same user, and passes a
//! line through it. Prints one `ok: …` line per step on stdout; exits 1, saying why on stderr,
//! at the first step that fails. Elsewhere than on Windows it says so and exits 2.
//!
//! `--wine`: the host is Wine, which (8.0) makes a second first instance of a name instead of
//! refusing it; that step then prints `not refused under Wine: …` and does not fail.

#![allow(clippy::print_stdout, reason = "a test's program: its report is its stdout")]

#[cfg(windows)]
fn main() -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let wine = std::env::args().any(|arg| arg == "--wine");
    match runtime.block_on(windows::check(wine)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("private_pipe: {why}");
            std::process::ExitCode::from(1)
        }
    }
}

#[cfg(not(windows))]
fn main() -> std::process::ExitCode {
    eprintln!("private_pipe: a Windows program (named pipes); build it for a Windows target");
    std::process::ExitCode::from(2)
}

#[cfg(windows)]
mod windows {
    use std::time::Duration;

    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::windows::named_pipe::{ClientOptions, ServerOptions};

    /// Every wait here is bounded by this.
    const LIMIT: Duration = Duration::from_secs(20);

    /// The steps; the first failure, in words. `wine`: see the module.
    pub(super) async fn check(wine: bool) -> Result<(), String> {
        let name = format!(r"\\.\pipe\acp-process-check-{}", std::process::id());
        let mut first = ServerOptions::new();
        first.first_pipe_instance(true).reject_remote_clients(true);
        let server = acp_process::pipe::create_private(&first, &name)
            .map_err(|e| format!("the pipe {name} was not made: {e}"))?;
        println!("ok: made {name} with a DACL for this user only");
        match acp_process::pipe::create_private(&first, &name) {
            Err(_) => println!("ok: a second first instance of the name is refused"),
            Ok(_) if wine => println!("not refused under Wine: a second first instance of the name"),
            Ok(_) => return Err("a second first instance of the same name was made".into()),
        }
        let mut client = ClientOptions::new()
            .open(&name)
            .map_err(|e| format!("this user could not open the pipe: {e}"))?;
        tokio::time::timeout(LIMIT, server.connect())
            .await
            .map_err(|_| "the server saw no connection".to_string())?
            .map_err(|e| format!("the server's connect failed: {e}"))?;
        println!("ok: this user connected");
        client
            .write_all(b"the token\n")
            .await
            .map_err(|e| format!("the client could not write: {e}"))?;
        let mut line = String::new();
        tokio::time::timeout(LIMIT, BufReader::new(server).read_line(&mut line))
            .await
            .map_err(|_| "no line came through".to_string())?
            .map_err(|e| format!("the server could not read: {e}"))?;
        if line != "the token\n" {
            return Err(format!("the server read {line:?}"));
        }
        println!("ok: a line came through");
        Ok(())
    }
}
