//! Serving an operator over WebSocket (feature `websocket`): [`Listener`], one ACP connection
//! per WebSocket connection with bearer-token authentication ([`crate::auth`]) and the bounds
//! of [`ListenOptions`]; [`ServeWebSocket`] for `main`. How to run, connect and issue tokens:
//! `docs/remote.md`.

mod listen;

use std::net::SocketAddr;

use crate::env::init_logging;
use crate::error::{Error, Result};
pub use crate::listener::{ListenOptions, Listener, PATHS};
use crate::server::{OffersWebSocket, Operator, Serve, ServerOptions};

/// Serving over WebSocket. Implemented for every [`Operator`] whose manifest lists
/// `websocket` ([`OffersWebSocket`]); for any other it does not compile.
pub trait ServeWebSocket: Operator + OffersWebSocket + Sized {
    /// Listens on `addr` with [`ListenOptions::from_env`] and [`ServerOptions::from_env`],
    /// logging to stderr, until SIGTERM or Ctrl-C; then drains. Once bound, it says where on
    /// stderr, whatever the log level: `NAME: listening on ws://ADDR/acp` (the port the
    /// system chose, for port 0).
    fn serve_websocket(self, addr: SocketAddr) -> impl Future<Output = Result<()>> {
        init_logging();
        async move {
            let listen = ListenOptions::from_env(addr).map_err(Error::msg)?;
            let listener = Listener::bind(listen).await?;
            let addr = listener.local_addr()?;
            tracing::info!(%addr, "listening for ACP over WebSocket and Streamable HTTP (path /acp)");
            eprintln!("{}", listening_line(&program_name(Self::spec().name), addr));
            listener.serve_until_signal(self, ServerOptions::from_env()).await
        }
    }

    /// A whole `main`: stdio with no arguments (how editors launch agents), WebSocket and
    /// Streamable HTTP with `--listen HOST:PORT` (e.g. `--listen 127.0.0.1:8765`), the usage on stdout with
    /// `--help` (then `Ok`: exit 0). Anything else is an error in a sentence.
    fn run_main(self) -> Result<()> {
        match main_command(std::env::args().skip(1))? {
            MainCommand::Help => {
                // For a person: stdout is the protocol channel only when serving stdio.
                let usage = usage(&program_name(Self::spec().name));
                std::io::Write::write_all(&mut std::io::stdout(), usage.as_bytes())?;
                Ok(())
            }
            MainCommand::Stdio => self.run_stdio(),
            MainCommand::Listen(addr) => {
                let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
                runtime.block_on(self.serve_websocket(addr))
            }
        }
    }
}

impl<O: Operator + OffersWebSocket> ServeWebSocket for O {}

/// What [`ServeWebSocket::run_main`]'s command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum MainCommand {
    /// No arguments: serve stdio.
    Stdio,
    /// `--listen HOST:PORT` (or `--listen=HOST:PORT`).
    Listen(SocketAddr),
    /// `--help` or `-h`.
    Help,
}

/// Reads `run_main`'s arguments (the program name left out).
fn main_command(args: impl IntoIterator<Item = String>) -> Result<MainCommand> {
    let args: Vec<String> = args.into_iter().collect();
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        return Ok(MainCommand::Help);
    }
    match args.as_slice() {
        [] => Ok(MainCommand::Stdio),
        [flag, addr] if flag == "--listen" => parse_listen(addr).map(MainCommand::Listen),
        [flag] if flag == "--listen" => Err(Error::msg(
            "--listen needs an address, HOST:PORT (e.g. 127.0.0.1:8765); see --help",
        )),
        [flag] if flag.starts_with("--listen=") => parse_listen(&flag["--listen=".len()..]).map(MainCommand::Listen),
        [first, ..] if first == "--listen" || first.starts_with("--listen=") => Err(Error::msg(format!(
            "`{}` is one argument too many: --listen HOST:PORT is the only option; see --help",
            args.last().map(String::as_str).unwrap_or_default()
        ))),
        [first, ..] => Err(Error::msg(format!(
            "`{first}` is not an option of this operator: it takes no arguments (stdio) or --listen HOST:PORT; see --help"
        ))),
    }
}

/// The `--help` text of `run_main`.
fn usage(program: &str) -> String {
    format!(
        "usage: {program} [--listen HOST:PORT]

Serves this ACP operator over stdio (no arguments: how an editor starts it), or with
--listen over the network at HOST:PORT/acp, both remote profiles on the one endpoint:
WebSocket (ws://HOST:PORT/acp) and Streamable HTTP (http://HOST:PORT/acp; HTTP/1.1 and
HTTP/2). Port 0: one the system picks; the address is printed on stderr. Remote clients
authenticate with a token: AGENTACP_TOKEN or AGENTACP_TOKENS_FILE; without tokens only a
loopback address may be used. TLS (wss:// and https://): AGENTACP_TLS_CERT and
AGENTACP_TLS_KEY. Other settings come from the AGENTACP_* variables (docs/remote.md,
docs/design/runtime.md).

  --listen HOST:PORT   serve WebSocket and Streamable HTTP instead of stdio, until SIGTERM
                       or Ctrl-C
  -h, --help           print this and exit
"
    )
}

/// The line that says where the operator listens.
fn listening_line(program: &str, addr: SocketAddr) -> String {
    format!("{program}: listening on ws://{addr}/acp")
}

/// The name this program was started as (its file name, without `.exe` on Windows), else
/// `fallback` (the manifest's).
fn program_name(fallback: &str) -> String {
    std::env::args_os()
        .next()
        .and_then(|arg0| {
            let path = std::path::Path::new(&arg0);
            let exe = cfg!(windows) && path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("exe"));
            let name = if exe { path.file_stem() } else { path.file_name() };
            name.map(|name| name.to_string_lossy().into_owned())
        })
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| fallback.to_string())
}

/// `HOST:PORT` (`localhost` is 127.0.0.1).
fn parse_listen(addr: &str) -> Result<SocketAddr> {
    addr.replace("localhost:", "127.0.0.1:")
        .parse()
        .map_err(|_| Error::msg(format!("--listen wants HOST:PORT, e.g. 127.0.0.1:8765 (got `{addr}`)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(args: &[&str]) -> Result<MainCommand> {
        main_command(args.iter().map(|arg| arg.to_string()))
    }

    /// Issue #45.9: `--help` was a usage error (exit 1); it is the usage, exit 0.
    #[test]
    fn help_is_the_usage_and_not_an_error() {
        assert_eq!(command(&["--help"]).unwrap(), MainCommand::Help);
        assert_eq!(command(&["-h"]).unwrap(), MainCommand::Help);
        assert_eq!(
            command(&["--listen", "127.0.0.1:0", "--help"]).unwrap(),
            MainCommand::Help
        );
        let usage = usage("my-agent");
        assert!(usage.starts_with("usage: my-agent [--listen HOST:PORT]\n"), "{usage}");
        assert!(usage.contains("--help"), "{usage}");
        // Issue #47: the one endpoint serves both remote profiles, and the usage says so.
        assert!(
            usage.contains("WebSocket (ws://HOST:PORT/acp) and Streamable HTTP (http://HOST:PORT/acp"),
            "{usage}"
        );
    }

    #[test]
    fn stdio_and_both_listen_forms_are_read() {
        assert_eq!(command(&[]).unwrap(), MainCommand::Stdio);
        let addr: SocketAddr = "127.0.0.1:8765".parse().unwrap();
        assert_eq!(
            command(&["--listen", "localhost:8765"]).unwrap(),
            MainCommand::Listen(addr)
        );
        assert_eq!(
            command(&["--listen=127.0.0.1:8765"]).unwrap(),
            MainCommand::Listen(addr)
        );
    }

    /// Every bad command line is a sentence that names what is wrong and points at `--help`,
    /// never a Rust value.
    #[test]
    fn a_bad_command_line_is_said_in_a_sentence() {
        for (args, names) in [
            (&["--verbose"][..], "`--verbose` is not an option"),
            (&["--listen"][..], "--listen needs an address"),
            (&["--listen", "nowhere"][..], "(got `nowhere`)"),
            (
                &["--listen", "127.0.0.1:1", "extra"][..],
                "`extra` is one argument too many",
            ),
        ] {
            let error = command(args).expect_err("refused").to_string();
            assert!(error.contains(names), "{args:?}: {error}");
            assert!(!error.contains("Custom {") && !error.contains("kind:"), "{error}");
        }
    }

    /// Issue #45.9: the address was only logged at `info`; the line on stderr names it.
    #[test]
    fn the_listening_line_names_the_address_the_system_chose() {
        let addr: SocketAddr = "127.0.0.1:40123".parse().unwrap();
        assert_eq!(
            listening_line("my-agent", addr),
            "my-agent: listening on ws://127.0.0.1:40123/acp"
        );
    }
}
