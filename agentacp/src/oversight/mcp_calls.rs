//! The agent's calls to MCP servers offered over ACP (MCP-over-ACP, `docs/mcp.md`), as the side
//! that offers them governs them: a client for its own servers, a bridge for the editor's.
//!
//! `mcp/message` names a connection, not a session, so [`AcpMcpServers`] follows each server
//! from the session request that listed it (`{"type": "acp", "name", "serverId"}` in
//! `mcpServers`) through `mcp/connect`'s answer (its `connectionId`), and [`AcpMcpServers::read`]
//! tells what an `mcp/message` request asks: a `tools/call` of a tool governance knows as
//! `mcp/<server>/<tool>` (decided like a permission request: by name, never by the kind the
//! agent reports), a `tools/list` (whose answer lists only the tools governance does not
//! deny), or anything else (passed as it is).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::calls::Oversight;
use super::facts::ToolFacts;
use crate::governance::Decision;
use crate::methods::mcp_over_acp::{connection_id_of, governed_name, server_id_of};
use crate::sync::lock;

/// One MCP server offered over ACP.
#[derive(Debug)]
struct Offered {
    name: String,
    /// The session that listed it, once known (`session/new` tells it with its answer).
    session: Option<String>,
}

/// The MCP servers offered over ACP on one connection, and their open MCP connections.
#[derive(Debug, Default)]
pub(crate) struct AcpMcpServers {
    servers: Mutex<HashMap<String, Offered>>,
    /// `connectionId` → `serverId`.
    connections: Mutex<HashMap<String, String>>,
}

/// What an `mcp/message` request asks, as governance sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum McpMessage {
    /// `tools/call`.
    Call(McpCall),
    /// `tools/list` of the server `server`.
    List { server: String },
    /// Anything else (`initialize`, `ping`, resources, prompts, ...): not a tool call.
    Other,
}

/// A `tools/call` on an MCP server offered over ACP.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct McpCall {
    /// The session that listed the server, when known.
    pub(crate) session: Option<String>,
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) arguments: Value,
    /// The id its permission request and audit record give it (`mcp-<n>`).
    pub(crate) id: String,
}

impl McpCall {
    /// A call of `tool` on `server` (listed for `session`, when known), with the next id.
    pub(crate) fn new(session: Option<String>, server: String, tool: String, arguments: Value) -> McpCall {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        McpCall {
            session,
            server,
            tool,
            arguments,
            id: format!("mcp-{}", CALLS.fetch_add(1, Ordering::Relaxed) + 1),
        }
    }

    /// The tool's governed name (`mcp/<server>/<tool>`).
    pub(crate) fn tool_name(&self) -> String {
        governed_name(&self.server, &self.tool)
    }

    /// What governance and audit read of it (no kind: the agent's word is not taken).
    pub(crate) fn facts(&self) -> ToolFacts {
        ToolFacts {
            id: self.id.clone(),
            tool: Some(self.tool_name()),
            arguments: Some(self.arguments.clone()),
            ..ToolFacts::default()
        }
    }

    /// The session to ask in and audit under (`-` when the server's session is not known).
    pub(crate) fn session_or_dash(&self) -> &str {
        self.session.as_deref().unwrap_or("-")
    }

    /// The permission request that asks about this call in `session`.
    pub(crate) fn permission_request(&self, session: &str) -> Value {
        let tool_call = json!({
            "toolCallId": self.id,
            "title": format!("Call `{}` on the MCP server `{}`", self.tool, self.server),
            "kind": "other",
            "rawInput": self.arguments,
            "_meta": {"aip44": {"tool": self.tool_name()}},
        });
        super::question::ask_once(session, tool_call)
    }
}

impl AcpMcpServers {
    /// Records the `"type": "acp"` entries of a session request's `mcpServers`, for `session`
    /// when the request names it (`session/load`, `session/resume`); returns their server ids.
    pub(crate) fn offered(&self, params: &Value) -> Vec<String> {
        let session = params.get("sessionId").and_then(Value::as_str);
        let mut ids = Vec::new();
        let mut servers = lock(&self.servers);
        for entry in params.get("mcpServers").and_then(Value::as_array).into_iter().flatten() {
            if entry.get("type").and_then(Value::as_str) != Some("acp") {
                continue;
            }
            let (Some(id), Some(name)) = (server_id_of(entry), entry.get("name").and_then(Value::as_str)) else {
                continue;
            };
            servers.insert(
                id.to_string(),
                Offered {
                    name: name.to_string(),
                    session: session.map(str::to_string),
                },
            );
            ids.push(id.to_string());
        }
        ids
    }

    /// The session the servers `ids` were listed for, now known (`session/new`'s answer).
    pub(crate) fn session_created(&self, ids: &[String], session: &str) {
        let mut servers = lock(&self.servers);
        for id in ids {
            if let Some(offered) = servers.get_mut(id) {
                offered.session = Some(session.to_string());
            }
        }
    }

    /// The name of the offered server `server_id`.
    pub(crate) fn name_of(&self, server_id: &str) -> Option<String> {
        lock(&self.servers).get(server_id).map(|offered| offered.name.clone())
    }

    /// `session` closed: its listings are forgotten; returns the connections open on them.
    #[cfg(feature = "mcp")]
    pub(crate) fn session_closed(&self, session: &str) -> Vec<String> {
        let mut servers = lock(&self.servers);
        servers.retain(|_, offered| offered.session.as_deref() != Some(session));
        let mut connections = lock(&self.connections);
        let gone: Vec<String> = (connections.iter())
            .filter(|(_, server_id)| !servers.contains_key(*server_id))
            .map(|(connection, _)| connection.clone())
            .collect();
        for connection in &gone {
            connections.remove(connection);
        }
        gone
    }

    /// `mcp/connect` of `server_id` was answered with `connection_id`.
    pub(crate) fn connected(&self, server_id: &str, connection_id: &str) {
        lock(&self.connections).insert(connection_id.to_string(), server_id.to_string());
    }

    /// `mcp/disconnect` of `connection_id`.
    pub(crate) fn disconnected(&self, connection_id: &str) {
        lock(&self.connections).remove(connection_id);
    }

    /// What the `mcp/message` request with `params` asks. A `tools/call` or `tools/list` on a
    /// connection this side did not see open still names its server by the connection id, so
    /// governance decides on something (and denies what it does not know).
    pub(crate) fn read(&self, params: &Value) -> McpMessage {
        let method = params.get("method").and_then(Value::as_str);
        if !matches!(method, Some("tools/call" | "tools/list")) {
            return McpMessage::Other;
        }
        let connection = connection_id_of(params).unwrap_or("");
        let (server, session) = {
            let server_id = lock(&self.connections).get(connection).cloned();
            let servers = lock(&self.servers);
            match server_id.as_deref().and_then(|id| servers.get(id)) {
                Some(offered) => (offered.name.clone(), offered.session.clone()),
                None => (format!("unknown-connection:{connection}"), None),
            }
        };
        if method == Some("tools/list") {
            return McpMessage::List { server };
        }
        let inner = params.get("params").unwrap_or(&Value::Null);
        McpMessage::Call(McpCall::new(
            session,
            server,
            inner.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
            inner.get("arguments").cloned().unwrap_or_else(|| json!({})),
        ))
    }
}

/// Removes from a `tools/list` result of `server` the tools governance denies; `true` when
/// any was removed.
pub(crate) fn keep_allowed(result: &mut Value, server: &str, oversight: &Oversight) -> bool {
    keep_listed(result, |tool| {
        let facts = ToolFacts {
            tool: Some(governed_name(server, tool)),
            ..ToolFacts::default()
        };
        !matches!(oversight.decide("-", &facts), Decision::Deny(_))
    })
}

/// Removes from a `tools/list` result the tools `keep` refuses (by their name on the server);
/// `true` when any was removed.
fn keep_listed(result: &mut Value, keep: impl Fn(&str) -> bool) -> bool {
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
        return false;
    };
    let before = tools.len();
    tools.retain(|tool| tool.get("name").and_then(Value::as_str).is_some_and(&keep));
    tools.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers() -> AcpMcpServers {
        let servers = AcpMcpServers::default();
        let ids = servers.offered(&json!({
            "cwd": "/w",
            "mcpServers": [
                {"type": "acp", "name": "notes", "serverId": "n-1"},
                {"type": "http", "name": "web", "url": "http://x", "headers": []},
                {"name": "stdio", "command": "x", "args": [], "env": []},
            ],
        }));
        assert_eq!(ids, vec!["n-1".to_string()]);
        servers
    }

    #[test]
    fn a_call_is_known_by_server_and_session_once_connected() {
        let servers = servers();
        servers.session_created(&["n-1".into()], "s1");
        servers.connected("n-1", "c1");
        let read = servers.read(&json!({
            "connectionId": "c1", "method": "tools/call",
            "params": {"name": "write", "arguments": {"text": "hi"}},
        }));
        let McpMessage::Call(call) = read else {
            panic!("a call: {read:?}")
        };
        assert_eq!(call.tool_name(), "mcp/notes/write");
        assert_eq!(call.session.as_deref(), Some("s1"));
        assert_eq!(call.arguments, json!({"text": "hi"}));
        let request = call.permission_request("s1");
        assert_eq!(request["toolCall"]["_meta"]["aip44"]["tool"], "mcp/notes/write");
        assert_eq!(
            servers.read(&json!({"connectionId": "c1", "method": "tools/list"})),
            McpMessage::List { server: "notes".into() }
        );
        assert_eq!(
            servers.read(&json!({"connectionId": "c1", "method": "initialize"})),
            McpMessage::Other
        );
    }

    #[test]
    fn a_call_on_a_connection_never_opened_is_named_by_it() {
        let servers = servers();
        servers.connected("n-1", "c1");
        servers.disconnected("c1");
        let McpMessage::Call(call) = servers.read(&json!({
            "connectionId": "c1", "method": "tools/call", "params": {"name": "write"},
        })) else {
            panic!("a call")
        };
        assert_eq!(call.tool_name(), "mcp/unknown-connection:c1/write");
        assert_eq!(call.session, None);
    }

    #[test]
    fn listing_keeps_what_governance_keeps() {
        let mut result = json!({"tools": [{"name": "read"}, {"name": "write"}, {"title": "nameless"}]});
        assert!(keep_listed(&mut result, |name| name == "read"));
        assert_eq!(result, json!({"tools": [{"name": "read"}]}));
        assert!(!keep_listed(&mut result, |_| true));
    }
}
