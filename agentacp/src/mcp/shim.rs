//! The stdio shim of a bridge (`docs/mcp.md`, "Through a bridge"): for an agent that takes
//! neither MCP-over-ACP nor HTTP MCP servers, the bridge lists each of the editor's
//! MCP-over-ACP servers as a stdio server whose program is the bridge's own executable, with
//! [`URL_ENV`] and [`TOKEN_ENV`] set. Run so, that program carries the MCP messages on its
//! stdin and stdout to the bridge's loopback endpoint (rmcp's stdio and streamable-HTTP
//! transports, message by message) until either side ends, and exits.

use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;

use crate::error::{Error, Result};

/// The variable that names the endpoint a shim carries its stdio to.
pub const URL_ENV: &str = "AGENTACP_MCP_SHIM_URL";
/// The variable that holds the endpoint's bearer token.
pub const TOKEN_ENV: &str = "AGENTACP_MCP_SHIM_TOKEN";

/// When this process was started as a bridge's stdio shim ([`URL_ENV`] is set): carries its
/// stdio to the endpoint until either side ends, and returns `Some` with how it ended. `None`
/// at once otherwise. A bridge's `bridge_stdio` calls it first; a bridge served some other way
/// whose program is its shim (the default) calls it at the start of `main`.
pub async fn serve_if_asked() -> Option<Result<()>> {
    let url = std::env::var(URL_ENV).ok()?;
    let token = std::env::var(TOKEN_ENV).unwrap_or_default();
    Some(carry(&url, &token).await)
}

/// Carries MCP between stdio (as the agent's server) and the endpoint at `url` (as its client).
async fn carry(url: &str, token: &str) -> Result<()> {
    let headers = [("Authorization".to_string(), format!("Bearer {token}"))];
    let mut endpoint = super::http_transport(url, &headers).map_err(Error::msg)?;
    let mut stdio = AsyncRwTransport::<RoleServer, _, _>::new_server(tokio::io::stdin(), tokio::io::stdout());
    loop {
        tokio::select! {
            from_agent = stdio.receive() => match from_agent {
                Some(message) => endpoint
                    .send(message)
                    .await
                    .map_err(|error| Error::msg(format!("the bridge's MCP endpoint: {error}")))?,
                None => break,
            },
            from_endpoint = endpoint.receive() => match from_endpoint {
                Some(message) => stdio
                    .send(message)
                    .await
                    .map_err(|error| Error::msg(format!("writing to stdout failed: {error}")))?,
                None => break,
            },
        }
    }
    let _ = endpoint.close().await;
    Ok(())
}
