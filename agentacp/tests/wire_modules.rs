//! Issue #14: operators of all three kinds on a `wire = path` module (what `scaffold-aip regen`
//! writes for a revision that is not built in). What they put on the wire at `initialize` must
//! come from that module's `ACP_REV` and `PROTOCOL_VERSION`: a server's answer, a client's
//! request and a bridge's answer to the editor (and its request to the agent).
//!
//! The module here is the default revision's types under another revision's name, so the
//! test needs no generated file; `ACP_REV` is the only constant that differs.

mod common;

use std::path::Path;

use agentacp::bridge::BridgeOptions;
use agentacp::client::{AgentCommand, ClientOperator, ClientOptions, Connect};
use agentacp::prelude::*;
use agentacp::server::ServerOptions;
use common::{Pipe, WAIT};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A wire module for the revision `5ca1ab1e…`, standing in for a `regen`-generated one.
mod custom_wire {
    pub use agentacp::wire::rev_0fc18323::*;

    /// Not a built-in revision: the runtime can only have it from this module.
    pub const ACP_REV: &str = "5ca1ab1e0000000000000000000000000000beef";
}

#[acp_operator(manifest = "tests/operators/wire-server/ACP.md", wire = custom_wire)]
struct WireServer;

impl WireServerServer for WireServer {
    async fn prompt(
        &self,
        _turn: &mut Turn<'_, Basic>,
        _request: custom_wire::PromptRequest,
    ) -> Result<custom_wire::StopReason> {
        Ok(custom_wire::StopReason::EndTurn)
    }
}

#[acp_operator(manifest = "tests/operators/wire-client/ACP.md", wire = custom_wire)]
struct WireClient;

impl WireClientClient for WireClient {}

#[acp_operator(manifest = "tests/operators/wire-bridge/ACP.md", wire = custom_wire)]
struct WireBridge {
    agent: AgentCommand,
}

impl WireBridgeBridge for WireBridge {
    fn downstream(&self) -> AgentCommand {
        self.agent.clone()
    }
}

/// An agent that writes the `initialize` request it receives to the file `$1`, answers it with
/// protocol version 1, then reads until its input closes.
const RECORDING_AGENT: &str = r#"
IFS= read -r line || exit 1
printf '%s\n' "$line" > "$1"
id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}\n' "$id"
cat >/dev/null
"#;

/// The recording agent, writing to `dir/initialize.json`.
fn recording_agent(dir: &Path) -> AgentCommand {
    std::fs::write(dir.join("agent.sh"), RECORDING_AGENT).unwrap();
    AgentCommand::new("/bin/sh")
        .arg(dir.join("agent.sh"))
        .arg(dir.join("initialize.json"))
}

/// The `initialize` request the recording agent received.
fn recorded(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("initialize.json")).expect("the agent recorded initialize");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `answer` (to `initialize`) names the wire module's protocol version and revision.
fn assert_speaks_the_wire_module(answer: &Value) {
    let result = &answer["result"];
    assert_eq!(
        result["protocolVersion"],
        json!(custom_wire::PROTOCOL_VERSION),
        "{answer}"
    );
    assert_eq!(result["_meta"]["aip44"]["acp_rev"], custom_wire::ACP_REV, "{answer}");
}

#[tokio::test]
async fn a_server_answers_initialize_with_its_wire_modules_revision() {
    let mut pipe = Pipe::serve(WireServer, ServerOptions::default());
    let (_, answer) = pipe
        .call("initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}))
        .await;
    assert_speaks_the_wire_module(&answer);
}

#[tokio::test]
async fn a_client_sends_its_wire_modules_protocol_version() {
    let dir = tempfile::tempdir().unwrap();
    let spec = WireClient::spec();
    assert_eq!(spec.acp_rev, custom_wire::ACP_REV);
    let client = tokio::time::timeout(
        WAIT,
        WireClient.connect(recording_agent(dir.path()), ClientOptions::default()),
    )
    .await
    .expect("the client initialized in time")
    .expect("the client initialized");
    let request = recorded(dir.path());
    assert_eq!(request["method"], "initialize", "{request}");
    assert_eq!(
        request["params"]["protocolVersion"],
        json!(custom_wire::PROTOCOL_VERSION),
        "{request}"
    );
    assert_eq!(
        request["params"]["_meta"]["aip44"]["acp_rev"],
        custom_wire::ACP_REV,
        "{request}"
    );
    assert_eq!(request["params"]["clientInfo"]["name"], "wire-client", "{request}");
    drop(client);
}

#[tokio::test]
async fn a_bridge_speaks_its_wire_modules_revision_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = WireBridge {
        agent: recording_agent(dir.path()),
    };
    let options = BridgeOptions {
        audit: Some(agentacp::audit::AuditLog::off()),
        ..BridgeOptions::default()
    };
    let (mut to_bridge, bridge_in) = tokio::io::duplex(1 << 16);
    let (bridge_out, from_bridge) = tokio::io::duplex(1 << 16);
    let task = tokio::spawn(agentacp::bridge::bridge(bridge, options, bridge_in, bridge_out));
    let mut lines = BufReader::new(from_bridge).lines();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    to_bridge.write_all(format!("{initialize}\n").as_bytes()).await.unwrap();
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("the bridge answered in time")
        .unwrap()
        .expect("the bridge answered");
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_speaks_the_wire_module(&answer);
    let downstream = recorded(dir.path());
    assert_eq!(
        downstream["params"]["protocolVersion"],
        json!(custom_wire::PROTOCOL_VERSION),
        "{downstream}"
    );
    drop(to_bridge);
    let _ = tokio::time::timeout(WAIT, task)
        .await
        .expect("the bridge stopped in time");
}
