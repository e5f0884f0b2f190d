//! Serving an operator over WebSocket (feature `websocket`): [`Listener`], one ACP connection
//! per WebSocket connection with bearer-token authentication ([`crate::auth`]) and the bounds
//! of [`ListenOptions`]; [`ServeWebSocket`] for `main`. How to run, connect and issue tokens:
//! `docs/remote.md`.

mod admission;
mod listen;

use std::net::SocketAddr;

use crate::env::init_logging;
use crate::error::{Error, Result};
use crate::server::{OffersWebSocket, Operator, Serve, ServerOptions};
pub(crate) use listen::Upgraded;
pub use listen::{ListenOptions, Listener, PATHS};

/// Serving over WebSocket. Implemented for every [`Operator`] whose manifest lists
/// `websocket` ([`OffersWebSocket`]); for any other it does not compile.
pub trait ServeWebSocket: Operator + OffersWebSocket + Sized {
    /// Listens on `addr` with [`ListenOptions::from_env`] and [`ServerOptions::from_env`],
    /// logging to stderr, until SIGTERM or Ctrl-C; then drains.
    fn serve_websocket(self, addr: SocketAddr) -> impl Future<Output = Result<()>> {
        init_logging();
        async move {
            let listen = ListenOptions::from_env(addr).map_err(|message| Error::Io(std::io::Error::other(message)))?;
            let listener = Listener::bind(listen).await?;
            tracing::info!(addr = %listener.local_addr()?, "listening for ACP over WebSocket (path /acp)");
            listener.serve_until_signal(self, ServerOptions::from_env()).await
        }
    }

    /// A whole `main`: stdio with no arguments (how editors launch agents), WebSocket with
    /// `--listen HOST:PORT` (e.g. `--listen 127.0.0.1:8765`). Anything else is a usage error.
    fn run_main(self) -> Result<()> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        match args.as_slice() {
            [] => self.run_stdio(),
            [flag, addr] if flag == "--listen" => {
                let addr = parse_listen(addr)?;
                let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
                runtime.block_on(self.serve_websocket(addr))
            }
            [flag] if flag.starts_with("--listen=") => {
                let addr = parse_listen(&flag["--listen=".len()..])?;
                let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
                runtime.block_on(self.serve_websocket(addr))
            }
            _ => Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "usage: {} [--listen HOST:PORT]  (no arguments: stdio)",
                    std::env::args().next().unwrap_or_default()
                ),
            ))),
        }
    }
}

impl<O: Operator + OffersWebSocket> ServeWebSocket for O {}

/// `HOST:PORT` (`localhost` is 127.0.0.1).
fn parse_listen(addr: &str) -> Result<SocketAddr> {
    let addr = addr.replace("localhost:", "127.0.0.1:");
    addr.parse().map_err(|_| {
        Error::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("--listen wants HOST:PORT, e.g. 127.0.0.1:8765 (got `{addr}`)"),
        ))
    })
}
