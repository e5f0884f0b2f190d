//! The one method table ([`acp_methods`], re-exported whole) and what the runtime adds to it:
//! a set of client capabilities to and from its `clientCapabilities` JSON.

use serde_json::{Map, Value};

pub use acp_methods::*;

/// `clientCapabilities` as sent in `initialize`: every capability of the table, `true` when
/// `methods` has it.
pub fn client_capabilities_json(methods: ClientMethods) -> Value {
    let mut root = Map::new();
    for capability in ClientCapability::ALL {
        let (last, parents) = capability.path().split_last().expect("a capability has a path");
        let mut object = &mut root;
        for key in parents {
            object = object
                .entry(*key)
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("the table's paths nest");
        }
        object.insert((*last).to_string(), Value::Bool(methods.has(capability)));
    }
    Value::Object(root)
}

/// The set a `clientCapabilities` JSON value offers: a capability absent or not `true` is not
/// offered (ACP: an omitted capability is unsupported).
pub fn offered_in(client_capabilities: Option<&Value>) -> ClientMethods {
    ClientMethods::from_paths(|path| {
        let pointer: String = path.iter().map(|key| format!("/{key}")).collect();
        client_capabilities
            .and_then(|value| value.pointer(&pointer))
            .and_then(Value::as_bool)
            == Some(true)
    })
}

/// The elicitation modes a `clientCapabilities` JSON value offers: a mode is on only when its
/// object is present (`elicitation.form: {}`); `{}`, `null` or a missing key offer nothing.
pub fn elicitation_offered_in(client_capabilities: Option<&Value>) -> ElicitationModes {
    let on = |mode: &str| {
        client_capabilities
            .and_then(|value| value.get("elicitation"))
            .and_then(|value| value.get(mode))
            .is_some_and(Value::is_object)
    };
    ElicitationModes {
        form: on("form"),
        url: on("url"),
    }
}

/// `clientCapabilities.elicitation` for `modes`: an object with one empty object per mode, or
/// `None` when no mode is offered (the key is then left out).
pub fn elicitation_json(modes: ElicitationModes) -> Option<Value> {
    let mut object = Map::new();
    for (mode, on) in [("form", modes.form), ("url", modes.url)] {
        if on {
            object.insert(mode.into(), Value::Object(Map::new()));
        }
    }
    modes.any().then_some(Value::Object(object))
}

#[cfg(test)]
mod tests {
    /// Each offered session method is an empty object on the wire, and the key is left out
    /// when none is; reading it back gives the same set.
    #[test]
    fn session_capabilities_are_objects_on_the_wire() {
        let agent = AgentCapabilities {
            session_capabilities: SessionCapabilities {
                list: true,
                close: true,
                ..SessionCapabilities::default()
            },
            ..AgentCapabilities::NONE
        };
        let json = serde_json::to_value(agent).unwrap();
        assert_eq!(json["sessionCapabilities"], json!({"list": {}, "close": {}}));
        assert_eq!(serde_json::from_value::<AgentCapabilities>(json).unwrap(), agent);
        let none = serde_json::to_value(AgentCapabilities::NONE).unwrap();
        assert!(none.get("sessionCapabilities").is_none(), "{none}");
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn client_capabilities_round_trip_through_their_json() {
        let methods = ClientMethods {
            read_text_file: true,
            terminal: true,
            ..ClientMethods::NONE
        };
        let json = client_capabilities_json(methods);
        assert_eq!(
            json,
            json!({"fs": {"readTextFile": true, "writeTextFile": false}, "terminal": true})
        );
        assert_eq!(offered_in(Some(&json)), methods);
        assert_eq!(offered_in(None), ClientMethods::NONE);
        assert_eq!(
            offered_in(Some(&json!({"fs": {"readTextFile": "yes"}, "terminal": 1}))),
            ClientMethods::NONE,
            "only `true` offers"
        );
    }
}

/// MCP-over-ACP (the upstream RFD; the pinned revision's table does not have it, see
/// `docs/mcp.md`): its methods, and how their params name servers, connections and tools.
pub mod mcp_over_acp {
    use serde_json::Value;

    /// `mcp/connect`: open a connection to the MCP server `serverId`.
    pub const CONNECT: &str = "mcp/connect";
    /// `mcp/message`: one MCP message on a connection, either way.
    pub const MESSAGE: &str = "mcp/message";
    /// `mcp/disconnect`: close a connection.
    pub const DISCONNECT: &str = "mcp/disconnect";

    /// Whether `method` is one of MCP-over-ACP's.
    pub fn is_mcp_over_acp(method: &str) -> bool {
        matches!(method, CONNECT | MESSAGE | DISCONNECT)
    }

    /// Whether an `mcp/message` sent as a notification carries an MCP notification
    /// (`notifications/…`). Anything else — a `tools/call` without an id — would skip what
    /// governs requests, so it is dropped.
    pub fn is_inner_notification(method: &str) -> bool {
        method.starts_with("notifications/")
    }

    /// The name governance, the client and the audit log know an MCP tool by (listed in
    /// OPERATOR.md as `{kind: mcp, server, allow}`).
    pub fn governed_name(server: &str, tool: &str) -> String {
        format!("mcp/{server}/{tool}")
    }

    /// The `serverId` of `mcp/connect` params or of an `mcpServers` entry (also read as `id` or
    /// `acpId`, the RFD's first spellings).
    pub fn server_id_of(params: &Value) -> Option<&str> {
        ["serverId", "acpId", "id"]
            .iter()
            .find_map(|key| params.get(key).and_then(Value::as_str))
    }

    /// The `connectionId` of `mcp/connect`'s result or of `mcp/disconnect`'s params.
    pub fn connection_id_of(value: &Value) -> Option<&str> {
        value.get("connectionId").and_then(Value::as_str)
    }
}
