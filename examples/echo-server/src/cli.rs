//! The `main` of the example servers that offer WebSocket (this one and `governed-server`,
//! which includes this file): agentacp's [`ServeWebSocket::run_main`] (stdio without
//! arguments, WebSocket with `--listen HOST:PORT`, `--help`), its error said on stderr.

use std::process::ExitCode;

use agentacp::server::websocket::ServeWebSocket;

/// The whole `main` of an example server: exit status 0, or the error as a sentence on stderr
/// (never a Rust value) and 1.
pub fn main<O: ServeWebSocket>(operator: O) -> ExitCode {
    match operator.run_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}: {error}", env!("CARGO_PKG_NAME"));
            ExitCode::FAILURE
        }
    }
}
