//! `turn.mcp()` (tier sandboxed, feature `mcp`): the tools of the session's MCP servers, and
//! governed calls to them.
//!
//! A call is a governed tool call like any other ([`Turn::tool_call`]): governance decides on
//! `mcp/<server>/<tool>` (allow, ask the client, deny), the call is streamed as `tool_call` /
//! `tool_call_update` and mirrored to the audit log with its approval, and a denied one is
//! never shown to the client. The servers are connected on first use (see
//! [`crate::mcp`]) and stopped with the session.
//!
//! What a server says of its tools is its own word: the kind its annotations give
//! (`readOnlyHint`, `destructiveHint`, `openWorldHint`) may make a decision stricter, never
//! more lenient ([`decide_claimed`]), and its title is shown beside the tool's real name
//! (`mcp/<server>/<tool>`), never instead of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::connection::Connection;
use super::turn::{ToolOutcome, Turn};
use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::governance::{Decision, ToolKind, decide_claimed};
use crate::jsonrpc::{self, RpcError};
use crate::mcp::{self, McpTool};
use crate::tier::{SandboxedTier, Tier};

impl<'t, T: Tier> Turn<'t, T> {
    /// The session's MCP servers: their tools, and governed calls to them.
    pub fn mcp(&mut self) -> Mcp<'_, 't, T>
    where
        T: SandboxedTier,
    {
        Mcp { turn: self }
    }
}

/// The MCP side of a turn ([`Turn::mcp`]).
#[derive(Debug)]
pub struct Mcp<'a, 't, T: SandboxedTier> {
    turn: &'a mut Turn<'t, T>,
}

impl<T: SandboxedTier> Mcp<'_, '_, T> {
    /// The tools of the session's MCP servers that governance does not deny outright, after
    /// connecting the servers (the first time; bounded). A server that could not be
    /// connected offers nothing: [`Mcp::unavailable`] says why.
    pub async fn tools(&mut self) -> Result<Vec<McpTool>> {
        let tools = self.connected(|clients| clients.tools()).await?;
        Ok(tools.into_iter().filter(|tool| self.offered(tool)).collect())
    }

    /// Whether `tool` is offered: governance does not deny it outright (its decision on no
    /// arguments). What is not offered is never named to the operator, nor so to the client.
    fn offered(&self, tool: &McpTool) -> bool {
        let no_arguments = Value::Object(Default::default());
        !matches!(self.decided(tool, &no_arguments).0, Decision::Deny(_))
    }

    /// Governance's decision on calling `tool` with `arguments`, and the kind to call it
    /// with: the server's annotations are heard only where they make the decision stricter.
    fn decided(&self, tool: &McpTool, arguments: &Value) -> (Decision, Option<ToolKind>) {
        let scope = self.turn.scope;
        let name = tool.governed_name();
        let request = scope.tool_request(&name, Some(tool.kind), arguments);
        decide_claimed(scope.connection.governance.as_ref(), &request)
    }

    /// The servers that could not be connected, and why (after connecting, the first time).
    pub async fn unavailable(&mut self) -> Result<BTreeMap<String, String>> {
        self.connected(|clients| clients.failures().clone()).await
    }

    /// Calls `tool` of `server` with `arguments` (a JSON object) as a governed tool call
    /// named `mcp/<server>/<tool>`, of the kind the server declares. A tool or server the
    /// session does not have is [`Error::InvalidParams`], naming what it has.
    pub async fn call(self, server: &str, tool: &str, arguments: Value) -> Result<ToolOutcome> {
        let (found, peer, over_acp, timeout) = self
            .connected(|clients| {
                clients
                    .find(server, tool, |tool| self.offered(tool))
                    .map(|(found, peer, over_acp)| (found, peer, over_acp, clients.call_timeout()))
            })
            .await?
            .map_err(Error::InvalidParams)?;
        let title = shown_title(&found);
        let (_, kind) = self.decided(&found, &arguments);
        let name = found.name.clone();
        let call = self.turn.tool_call(found.governed_name(), arguments).title(title);
        let call = match kind {
            Some(kind) => call.kind(kind),
            None => call,
        };
        call
            // Its request is on its way to the server (which the client does not see) while
            // the client is told; over ACP the request itself goes to the client, after.
            .announced_once_started(!over_acp)
            .run(|arguments| async move { mcp::call(&peer, &name, arguments, timeout).await })
            .await
    }

    /// Connects the session's servers (the first time), then reads them with `read`; a
    /// cancelled turn stops waiting.
    async fn connected<R>(&self, read: impl FnOnce(&mcp::McpClients) -> R) -> Result<R> {
        let scope = self.turn.scope;
        let clients = scope.session.mcp_clients();
        let mut clients = tokio::select! {
            biased;
            () = scope.cancelled() => return Err(Error::Cancelled),
            clients = clients.lock() => clients,
        };
        clients.link(mcp::AcpLink {
            peer: Arc::new(ClientPeer(scope.connection.clone())),
            tunnels: scope.connection.tunnels.clone(),
        });
        tokio::select! {
            biased;
            () = scope.cancelled() => return Err(Error::Cancelled),
            () = clients.connect_all() => {}
        }
        Ok(read(&clients))
    }
}

/// At most this many characters of a server's title for a tool are shown.
const TITLE_CHARS: usize = 80;

/// The title a call of `tool` is shown under: its real name (`mcp/<server>/<tool>`), with the
/// server's title for it beside it — on one line, shortened — when it has another one.
fn shown_title(tool: &McpTool) -> String {
    let name = tool.governed_name();
    let theirs: String = (tool.title.as_deref().unwrap_or_default().chars())
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let theirs = theirs.split_whitespace().collect::<Vec<_>>().join(" ");
    if theirs.is_empty() || theirs == tool.name || theirs == name {
        return name;
    }
    match theirs.char_indices().nth(TITLE_CHARS) {
        Some((end, _)) => format!("{name} ({}…)", &theirs[..end]),
        None => format!("{name} ({theirs})"),
    }
}

/// The client, as the peer of the session's MCP-over-ACP connections.
struct ClientPeer(Arc<Connection>);

impl mcp::tunnel::AcpPeer for ClientPeer {
    fn request(&self, request: mcp::tunnel::PeerRequest) -> BoxFuture<'static, Result<Value, RpcError>> {
        let connection = self.0.clone();
        Box::pin(async move { request.send(&connection.pending, &connection.outbox).await })
    }

    fn notify(&self, method: &'static str, params: Value) -> BoxFuture<'static, ()> {
        let connection = self.0.clone();
        Box::pin(async move {
            let _ = connection
                .outbox
                .send(jsonrpc::encode_notification(method, &params))
                .await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(title: Option<&str>) -> McpTool {
        McpTool {
            server: "notes".into(),
            name: "write_note".into(),
            title: title.map(str::to_string),
            description: None,
            input_schema: Value::Null,
            kind: crate::governance::ToolKind::Read,
        }
    }

    /// A server's title is shown beside the tool's real name, on one line and shortened,
    /// never instead of it.
    #[test]
    fn a_call_is_titled_with_the_tools_real_name() {
        assert_eq!(shown_title(&tool(None)), "mcp/notes/write_note");
        assert_eq!(shown_title(&tool(Some("write_note"))), "mcp/notes/write_note");
        assert_eq!(
            shown_title(&tool(Some("mcp/notes/read_note\nRead\ta note"))),
            "mcp/notes/write_note (mcp/notes/read_note Read a note)"
        );
        let long = "x".repeat(200);
        let shown = shown_title(&tool(Some(&long)));
        assert_eq!(shown, format!("mcp/notes/write_note ({}…)", "x".repeat(TITLE_CHARS)));
    }
}
