//! The stdio shim of a bridge (`docs/mcp.md`, "Through a bridge"): for an agent that takes
//! neither MCP-over-ACP nor HTTP MCP servers, the bridge lists each of the editor's
//! MCP-over-ACP servers as a stdio server whose program is the bridge's own executable, with
//! [`SOCKET_ENV`] and [`TOKEN_ENV`] set. Run so, that program connects to the bridge's Unix
//! socket (on Windows: its named pipe), sends the token on a line of its own, then carries the
//! bytes of its stdin to the socket and those of the socket to its stdout (MCP, one message
//! per line) until either side ends, and exits.

use std::path::Path;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{Error, Result};

/// The channel between the bridge and its shims, Unix's and Windows'.
#[cfg(unix)]
#[path = "shim/unix.rs"]
pub(crate) mod channel;
/// The channel between the bridge and its shims, Unix's and Windows'.
#[cfg(windows)]
#[path = "shim/windows.rs"]
pub(crate) mod channel;

/// The variable that names the bridge's socket (on Windows: its pipe) a shim carries its
/// stdio to.
pub const SOCKET_ENV: &str = "AGENTACP_MCP_SHIM_SOCKET";
/// The variable that holds the token of the server the shim stands for.
pub const TOKEN_ENV: &str = "AGENTACP_MCP_SHIM_TOKEN";

/// When this process was started as a bridge's stdio shim ([`SOCKET_ENV`] is set): carries its
/// stdio to the bridge until either side ends, and returns `Some` with how it ended. `None`
/// at once otherwise. A bridge's `bridge_stdio` calls it first; a bridge served some other way
/// whose program is its shim (the default) calls it at the start of `main`.
pub async fn serve_if_asked() -> Option<Result<()>> {
    let socket = std::env::var_os(SOCKET_ENV)?;
    let token = std::env::var(TOKEN_ENV).unwrap_or_default();
    Some(carry(Path::new(&socket), &token).await)
}

/// Carries stdio to the bridge's socket at `socket`, as the server `token` names.
async fn carry(socket: &Path, token: &str) -> Result<()> {
    let connect = channel::connect(socket);
    let stream = tokio::time::timeout(super::CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| {
            Error::msg(format!(
                "the bridge's socket {} did not accept in time",
                socket.display()
            ))
        })?
        .map_err(|error| Error::msg(format!("the bridge's socket {}: {error}", socket.display())))?;
    let (from_bridge, mut to_bridge) = tokio::io::split(stream);
    to_bridge.write_all(format!("{token}\n").as_bytes()).await?;
    tokio::select! {
        sent = pass(crate::jsonrpc::stdio::stdin(), to_bridge) => sent,
        received = pass(from_bridge, crate::jsonrpc::stdio::stdout()) => received,
    }
}

/// Copies `from` to `to`, flushing after each read, until `from` ends; then shuts `to` down.
async fn pass(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) -> Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            to.shutdown().await?;
            return Ok(());
        }
        to.write_all(&buffer[..read]).await?;
        to.flush().await?;
    }
}
