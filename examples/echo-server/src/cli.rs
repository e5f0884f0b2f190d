//! The command line of the example servers that offer WebSocket (this one and
//! `governed-server`, which includes this file): stdio without arguments, WebSocket with
//! `--listen HOST:PORT`, `--help`. Errors are printed as sentences, never as Rust values.

use std::net::SocketAddr;
use std::process::ExitCode;

use agentacp::server::websocket::{ListenOptions, Listener, ServeWebSocket};
use agentacp::server::{Serve, ServerOptions};
use clap::Parser;

/// Serves the operator over stdio (how an editor starts it), or over WebSocket with
/// `--listen`. Settings come from the AGENTACP_* variables (docs/design/runtime.md).
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Args {
    /// Serve remote clients over WebSocket at ws://HOST:PORT/acp instead of stdio, until
    /// SIGTERM or Ctrl-C. The address is printed on stderr (port 0: one the system picks).
    /// Tokens: AGENTACP_TOKEN or AGENTACP_TOKENS_FILE (see docs/remote.md).
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_listen)]
    listen: Option<SocketAddr>,
}

/// `HOST:PORT`, `localhost` meaning 127.0.0.1.
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let addr = text.replace("localhost:", "127.0.0.1:");
    addr.parse()
        .map_err(|_| format!("HOST:PORT expected, e.g. 127.0.0.1:8765 (got `{text}`)"))
}

/// The whole `main` of an example server: the arguments, then stdio or WebSocket; an error
/// is one line on stderr and exit status 1 (2 for a bad command line).
pub fn main<O: ServeWebSocket>(operator: O) -> ExitCode {
    let args = Args::parse();
    let outcome = match args.listen {
        None => operator.run_stdio(),
        Some(addr) => listen(operator, addr),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}: {error}", env!("CARGO_PKG_NAME"));
            ExitCode::FAILURE
        }
    }
}

/// Listens on `addr` and says where on stderr (the port the system picked, for port 0).
fn listen<O: ServeWebSocket>(operator: O, addr: SocketAddr) -> agentacp::Result<()> {
    agentacp::env::init_logging();
    let options = ListenOptions::from_env(addr).map_err(agentacp::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = Listener::bind(options).await?;
        eprintln!(
            "{}: listening on ws://{}/acp",
            env!("CARGO_PKG_NAME"),
            listener.local_addr()?
        );
        listener.serve_until_signal(operator, ServerOptions::from_env()).await
    })
}
