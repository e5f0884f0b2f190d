//! MCP servers the client provides over the ACP connection (feature `mcp`; MCP-over-ACP, see
//! [`crate::mcp`]'s `tunnel` module and `docs/mcp.md`).
//!
//! [`ClientOptions::with_mcp_over_acp`](super::ClientOptions::with_mcp_over_acp) names a
//! server and how to make its rmcp service. Every session the client opens then lists it in
//! `mcpServers` as `{"type": "acp", "name", "serverId"}`, with a `serverId` of that session's
//! own — when the agent advertises `mcpCapabilities.acp`; otherwise it is left out, with a
//! warning. Each `mcp/connect` of the agent's starts a fresh service of that server on a
//! connection of its own; `mcp/message`s go to it, and `mcp/disconnect` (or the end of the ACP
//! connection) stops it. The agent's tool calls on it are governed like its terminals (see
//! [`mcp_calls`](crate::oversight::mcp_calls)).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::service::{DynService, RoleServer, ServiceExt};
use serde_json::{Value, json};

use crate::jsonrpc::cancels::Cancellable;
use crate::jsonrpc::{RpcError, codes};
use crate::mcp::tunnel::{self, AcpPeer, Tunnel, Tunnels};
use crate::oversight::mcp_calls::{AcpMcpServers, McpMessage};

/// How many MCP connections over ACP an agent may have open at once (each runs a service of
/// the client's): beyond it, `mcp/connect` is refused.
pub(crate) const MAX_OPEN_CONNECTIONS: usize = 256;

/// Makes a fresh MCP service, one per connection.
type MakeService = Arc<dyn Fn() -> Box<dyn DynService<RoleServer>> + Send + Sync>;

/// One MCP server the client provides over ACP.
#[derive(Clone)]
pub struct AcpMcpServer {
    /// Its name in `mcpServers` (the agent knows its tools as `mcp/<name>/<tool>`).
    pub name: String,
    /// The id `mcp/connect` names it by (`serverId`): unique to this client.
    pub server_id: String,
    make: MakeService,
}

impl std::fmt::Debug for AcpMcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpMcpServer")
            .field("name", &self.name)
            .field("server_id", &self.server_id)
            .finish_non_exhaustive()
    }
}

impl AcpMcpServer {
    /// The server `name`, whose service `make` makes (once per connection).
    pub fn new<S, F>(name: impl Into<String>, make: F) -> AcpMcpServer
    where
        S: rmcp::Service<RoleServer>,
        F: Fn() -> S + Send + Sync + 'static,
    {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = name.into();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        let server_id = format!(
            "{name}-{}-{nanos:08x}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        AcpMcpServer {
            name,
            server_id,
            make: Arc::new(move || make().into_dyn()),
        }
    }

    /// Its entry in `mcpServers`, as the `number`th listing of it (each session lists it
    /// under a `serverId` of its own, so a connection tells its session).
    fn entry(&self, number: u64) -> Value {
        json!({"type": "acp", "name": self.name, "serverId": format!("{}.{number}", self.server_id)})
    }
}

/// The client's side of MCP-over-ACP: the open connections.
#[derive(Debug, Default)]
pub(crate) struct McpHost {
    tunnels: Arc<Tunnels>,
    next_connection: AtomicU64,
    /// The servers listed so far, by the `serverId` of each listing.
    listed: AcpMcpServers,
    next_listing: AtomicU64,
}

impl McpHost {
    /// The `mcpServers` entries that list `servers` for `session` (`None`: the session the
    /// request creates, told later with [`session_created`](McpHost::session_created)), and
    /// their server ids.
    pub(crate) fn offer(&self, servers: &[AcpMcpServer], session: Option<&str>) -> (Vec<Value>, Vec<String>) {
        let entries: Vec<Value> = servers
            .iter()
            .map(|server| server.entry(self.next_listing.fetch_add(1, Ordering::Relaxed)))
            .collect();
        let ids = self
            .listed
            .offered(&json!({ "sessionId": session, "mcpServers": entries }));
        (entries, ids)
    }

    /// The servers listed as `ids` belong to `session`.
    pub(crate) fn session_created(&self, ids: &[String], session: &str) {
        self.listed.session_created(ids, session);
    }

    /// `session` is closed: its listings are served no more, and the connections open on
    /// them are stopped (an agent that did not disconnect them would keep them for as long
    /// as the ACP connection lasts).
    pub(crate) fn session_closed(&self, session: &str) {
        for connection in self.listed.session_closed(session) {
            self.tunnels.remove(&connection);
        }
    }

    /// What the agent's `mcp/message` request asks (a tool call, a listing, anything else).
    pub(crate) fn read(&self, params: &Value) -> McpMessage {
        self.listed.read(params)
    }

    /// `mcp/connect`: a fresh service of the server `serverId` (one of `servers`), on a new
    /// connection to `peer` whose id is the answer; each request on it waits at most
    /// `timeout`.
    pub(crate) fn connect(
        &self,
        servers: &[AcpMcpServer],
        peer: Arc<dyn AcpPeer>,
        timeout: Duration,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let invalid = |message: String| RpcError::new(codes::INVALID_PARAMS, message);
        let server_id = tunnel::server_id_of(params)
            .ok_or_else(|| invalid(format!("invalid params for `{}`: no `serverId`", tunnel::CONNECT)))?;
        let server = self
            .listed
            .name_of(server_id)
            .and_then(|name| servers.iter().find(|server| server.name == name))
            .ok_or_else(|| invalid(format!("this client provides no MCP server `{server_id}`")))?;
        if self.tunnels.open_count() >= MAX_OPEN_CONNECTIONS {
            return Err(RpcError::new(
                codes::INVALID_REQUEST,
                format!("{MAX_OPEN_CONNECTIONS} MCP connections are open already; disconnect one first"),
            ));
        }
        let connection_id = format!(
            "{}-{}",
            server.name,
            self.next_connection.fetch_add(1, Ordering::Relaxed)
        );
        self.listed.connected(server_id, &connection_id);
        let (tunnel, transport) = Tunnel::open::<RoleServer>(connection_id.clone(), peer, timeout);
        // Ids of ours, numbered: never one routed already.
        let routed = self.tunnels.insert(tunnel);
        debug_assert!(routed, "connection id {connection_id} reused");
        let service = (server.make)();
        let name = server.name.clone();
        tokio::spawn(async move {
            match service.serve(transport).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(error) => tracing::warn!(server = name, %error, "an MCP connection over ACP did not start"),
            }
        });
        tracing::debug!(
            server = server.name,
            connection = connection_id,
            "MCP over ACP: connected"
        );
        Ok(json!({ "connectionId": connection_id }))
    }

    /// An `mcp/message` request: the answer of its connection's service (`-32800` when it
    /// is cancelled first).
    pub(crate) async fn message(
        &self,
        params: Option<&serde_json::value::RawValue>,
        cancellable: Cancellable,
    ) -> Result<Value, RpcError> {
        self.tunnels.request(params, Some(cancellable)).await
    }

    /// An `mcp/message` notification, to its connection's service.
    pub(crate) fn notification(&self, params: Option<&serde_json::value::RawValue>) {
        self.tunnels.notification(params);
    }

    /// `mcp/disconnect`: stops the connection's service.
    pub(crate) fn disconnect(&self, params: &Value) -> Result<Value, RpcError> {
        let connection_id = tunnel::connection_id_of(params).ok_or_else(|| {
            RpcError::new(
                codes::INVALID_PARAMS,
                format!("invalid params for `{}`: no `connectionId`", tunnel::DISCONNECT),
            )
        })?;
        self.listed.disconnected(connection_id);
        match self.tunnels.remove(connection_id) {
            Some(_) => Ok(json!({})),
            None => Err(RpcError::new(
                codes::INVALID_PARAMS,
                format!("no open MCP connection `{connection_id}`"),
            )),
        }
    }

    /// Stops every connection: the agent is gone.
    pub(crate) fn end_all(&self) {
        self.tunnels.end_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::future::BoxFuture;

    /// A server with nothing to offer (rmcp's defaults).
    #[derive(Clone)]
    struct Empty;

    impl rmcp::ServerHandler for Empty {}

    /// A peer the client's services never hear from.
    struct Silent;

    impl AcpPeer for Silent {
        fn request(&self, _: tunnel::PeerRequest) -> BoxFuture<'static, Result<Value, RpcError>> {
            Box::pin(std::future::pending())
        }

        fn notify(&self, _: &'static str, _: Value) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    fn connect(host: &McpHost, servers: &[AcpMcpServer], server_id: &str) -> Result<Value, RpcError> {
        let params = json!({"serverId": server_id});
        host.connect(servers, Arc::new(Silent), Duration::from_secs(5), &params)
    }

    /// An agent that keeps connecting is refused past the limit, each connection running a
    /// service of the client's until then; a disconnect makes room again.
    #[tokio::test]
    async fn connections_past_the_limit_are_refused() {
        let host = McpHost::default();
        let servers = [AcpMcpServer::new("notes", || Empty)];
        let (_, ids) = host.offer(&servers, Some("s1"));
        let mut last = Value::Null;
        for _ in 0..MAX_OPEN_CONNECTIONS {
            last = connect(&host, &servers, &ids[0]).expect("under the limit");
        }
        let refused = connect(&host, &servers, &ids[0]).expect_err("past the limit");
        assert!(refused.message.contains("open already"), "{}", refused.message);
        host.disconnect(&last).expect("disconnected");
        connect(&host, &servers, &ids[0]).expect("room again");
    }

    /// A closed session's listings are served no more and its open connections stop; another
    /// session's stay.
    #[tokio::test]
    async fn a_closed_sessions_connections_are_stopped_and_its_servers_no_longer_offered() {
        let host = McpHost::default();
        let servers = [AcpMcpServer::new("notes", || Empty)];
        let (_, closing) = host.offer(&servers, Some("s1"));
        let (_, staying) = host.offer(&servers, Some("s2"));
        let gone = connect(&host, &servers, &closing[0]).unwrap();
        let kept = connect(&host, &servers, &staying[0]).unwrap();
        host.session_closed("s1");
        assert!(
            host.disconnect(&gone).is_err(),
            "the closed session's connection is open"
        );
        assert!(
            connect(&host, &servers, &closing[0]).is_err(),
            "its listing is still offered"
        );
        host.disconnect(&kept).expect("the other session's connection is open");
    }
}
