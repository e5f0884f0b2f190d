//! Issue #48: our client (`agentacp::client`, asking for ACP v2) driving the official SDKs' v2
//! agents (`src/bin/sdk-v2-agent.rs`, `ts/v2-agent.mjs`, `py/v2_agent.py`; see v2_sdk.rs):
//! a turn whose tool call asks permission (approved by our handler, audited), a turn cancelled
//! by `session/cancel`, and `session/load` (sent as `session/resume` with replay). With
//! `--both` (v1 and v2 through the SDK's router), a client asking for v2 or v1 gets v2. And
//! the official Rust SDK's v1 client reaching the Rust SDK's v2 agent through our governance
//! bridge (`examples/bridge`, `AGENTACP_BRIDGE_AGENT_PROTOCOL=2`), its audit log verified.
//!
//! The TypeScript agent skips without `node` or `interop/ts/node_modules`, the Python one
//! without `interop/py/.venv-v2`.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use agentacp::client::{AgentCommand, Client, ClientOptions, PermissionDecision, PromptEvent, Protocol, Update};
use agentacp::wire::default as wire;
use interop::sdk::{Options, PermissionPolicy, SdkClient};
use interop::{AgentDirs, AgentProcess, StderrMode, example_binary};

/// The bound on one agent's whole conversation (Node and Python start slowly when loaded).
const DEADLINE: Duration = Duration::from_secs(120);

#[path = "common/v2_peers.rs"]
mod v2_peers;

use v2_peers::{Sdk, agent_command};

/// Our client's command for `command`, run in `dir`.
fn agent(command: &[OsString], dir: &Path) -> AgentCommand {
    command[1..]
        .iter()
        .fold(AgentCommand::new(&command[0]), |agent, arg| agent.arg(arg))
        .current_dir(dir)
}

fn text(updates: &[Update]) -> String {
    updates.iter().filter_map(Update::text).collect()
}

/// Our v2 client against `sdk`'s v2 agent: a permission turn, a cancelled turn, a load.
async fn drive(sdk: Sdk) {
    let command = match agent_command(sdk, false) {
        Ok(command) => command,
        Err(why) => return interop::skip_without_peer(&why),
    };
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    let sink = agentacp::audit::MemorySink::new();
    let options = ClientOptions::default()
        .with_protocol(Protocol::V2)
        .with_audit(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone())))
        .with_permission(|_| async { PermissionDecision::Approve });
    let conversation = async {
        let client = Client::connect(agent(&command, &cwd), options).await.unwrap();
        assert_eq!(client.protocol_version(), 2, "{sdk:?}");
        let session = client.new_session(&cwd).await.unwrap();
        let (updates, stop) = client
            .prompt_text(&session, "hello")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn, "{sdk:?}: {updates:#?}");
        assert_eq!(text(&updates), "echo: hello approved", "{sdk:?}: {updates:#?}");
        assert!(
            updates.iter().any(|u| matches!(u, Update::ToolCall(_))),
            "{sdk:?}: the first tool_call_update reads as a tool call: {updates:#?}"
        );
        assert!(
            !updates.iter().any(|u| matches!(u, Update::UserMessageChunk(_))),
            "{sdk:?}"
        );

        // Cancelled once the agent is at it (it says "waiting"): an SDK agent drops a cancel
        // that comes before it took the prompt.
        let mut turn = client.prompt_text(&session, "/wait").await.unwrap();
        while let Some(event) = turn.next().await {
            if matches!(event.unwrap(), PromptEvent::Update(update) if update.text() == Some("waiting")) {
                break;
            }
        }
        turn.cancel().await.unwrap();
        let (_, stop) = turn.collect().await.unwrap();
        assert_eq!(stop, wire::StopReason::Cancelled, "{sdk:?}");

        let replayed = client
            .load_session(&session, &cwd)
            .await
            .unwrap()
            .replayed()
            .await
            .unwrap();
        assert!(text(&replayed).contains("echo: hello"), "{sdk:?}: {replayed:#?}");
        client.close().await;
    };
    tokio::time::timeout(DEADLINE, conversation)
        .await
        .expect("the conversation ends in time");
    let records = sink.lines();
    assert!(
        records.iter().any(|r| r.contains("\"approvedBy\":\"user\"")),
        "{sdk:?}: the tool call is audited with its approval: {records:#?}"
    );
}

#[tokio::test]
async fn our_v2_client_drives_the_rust_sdk_v2_agent() {
    drive(Sdk::Rust).await;
}

#[tokio::test]
async fn our_v2_client_drives_the_typescript_sdk_v2_agent() {
    drive(Sdk::TypeScript).await;
}

#[tokio::test]
async fn our_v2_client_drives_the_python_sdk_v2_agent() {
    drive(Sdk::Python).await;
}

/// An SDK agent serving both versions through its router: asked for v2 or v1, it speaks v2;
/// asked for v1 (the default), v1.
#[tokio::test]
async fn a_client_asking_for_v2_or_v1_gets_v2_from_an_sdk_router() {
    let command = match agent_command(Sdk::Rust, true) {
        Ok(command) => command,
        Err(why) => return interop::skip_without_peer(&why),
    };
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    let conversation = async {
        for (protocol, version) in [(Protocol::V2OrV1, 2), (Protocol::V1, 1)] {
            let options = ClientOptions::default()
                .with_protocol(protocol)
                .with_permission(|_| async { PermissionDecision::Approve });
            let client = Client::connect(agent(&command, &cwd), options).await.unwrap();
            assert_eq!(client.protocol_version(), version);
            let session = client.new_session(&cwd).await.unwrap();
            let (updates, stop) = client
                .prompt_text(&session, "hi")
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            assert_eq!(stop, wire::StopReason::EndTurn);
            assert!(text(&updates).contains("echo: hi"), "{protocol:?}: {updates:#?}");
            client.close().await;
        }
    };
    tokio::time::timeout(DEADLINE, conversation)
        .await
        .expect("the conversation ends in time");
}

/// A v1 editor (the official Rust SDK's client) in front of a v2 agent (the Rust SDK's):
/// through the bridge asking its agent for v2, the whole turn reads as v1's, the `write-file`
/// call is asked of the editor (approved), and the bridge's audit log records it and verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_v1_client_reaches_the_sdk_v2_agent_through_the_bridge() {
    let dirs = AgentDirs::new();
    let bridge_audit = dirs.state_dir.join("bridge-audit.jsonl");
    let cwd = dirs.project("p");
    let mut env = dirs.bridge_env(&bridge_audit);
    env.push(("AGENTACP_BRIDGE_AGENT_PROTOCOL", "2".into()));
    let agent: OsString = env!("CARGO_BIN_EXE_sdk-v2-agent").into();
    let bridge = example_binary("governance-bridge");
    let process = AgentProcess::spawn_command(&bridge, &["--".into(), agent], &env, StderrMode::Capture);
    let conversation = async {
        let client = SdkClient::connect(process, Options::default()).await;
        let init = serde_json::to_value(client.initialize().await).unwrap();
        assert_eq!(init["protocolVersion"], 1, "{init}");
        assert_eq!(init["agentInfo"]["name"], "governance-bridge", "{init}");
        assert_eq!(
            init["_meta"]["aip44"]["downstream"]["name"], "sdk-v2-agent-rust",
            "{init}"
        );
        let session = client.new_session(&cwd).await;
        client.set_permission_policy(PermissionPolicy::Select(PermissionOptionKind::AllowOnce));
        let reply = client.prompt(&session, "hello").ok().await;
        assert_eq!(reply.stop_reason, StopReason::EndTurn, "{}", client.diagnostics());
        let said: String = client
            .events()
            .iter()
            .filter(|e| e.update_kind() == Some("agent_message_chunk"))
            .filter_map(|e| e.chunk_text().map(str::to_string))
            .collect();
        assert_eq!(said, "echo: hello approved", "{}", client.diagnostics());
        let kinds: Vec<String> = client
            .events()
            .iter()
            .filter_map(|e| e.update_kind().map(str::to_string))
            .collect();
        assert!(kinds.iter().any(|k| k == "tool_call"), "{kinds:?}");
        assert!(
            !kinds.iter().any(|k| k == "state_update" || k == "user_message"),
            "{kinds:?}"
        );
    };
    tokio::time::timeout(DEADLINE, conversation)
        .await
        .expect("the conversation ends in time");
    agentacp::audit::verify_file(&bridge_audit).expect("the bridge's audit log verifies");
    let text = std::fs::read_to_string(&bridge_audit).unwrap();
    let call = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|r| r["action"] == "tool.call")
        .unwrap_or_else(|| panic!("no tool.call record: {text}"));
    let approved_by = call["metadata"]["aip44"]["approval"]["approvedBy"]
        .as_str()
        .unwrap_or_default();
    assert!(approved_by.starts_with("client:"), "the editor approved it: {call}");
}
