//! Our client asking for ACP v2, against a scripted raw v2 agent (`tests/fake/v2_agent.py`):
//! a whole turn with a permission request, audited; cancel; `session/load` as a resume with
//! replay; modes as a config option; negotiation (v2 only, v2 falling back to v1, a version
//! nobody speaks). Every frame the client sends is checked against the alpha.3 schema (test
//! data in `../shared`). Every wait is bounded.

use std::future::Future;
use std::time::Duration;

use agentacp::client::{Client, ClientError, ClientOptions, PermissionDecision, Protocol, Update};
use agentacp::wire::default as wire;
use serde_json::{Value, json};

#[path = "v2/support.rs"]
mod support;

use support::Agent;

/// The bound on each test's body.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test finished within its bound")
}

fn v2_options() -> ClientOptions {
    ClientOptions::default().with_protocol(Protocol::V2)
}

fn texts(updates: &[Update]) -> Vec<String> {
    updates.iter().filter_map(|u| u.text().map(str::to_string)).collect()
}

fn audited(sink: &agentacp::audit::MemorySink) -> Vec<Value> {
    agentacp::audit::verify(sink.contents().as_bytes()).expect("the chain verifies");
    sink.lines()
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A whole v2 turn, read as v1's events: the message (chunk, then the rest of the whole
/// message), the plan, the tool call created by its first update, its content chunk, the
/// permission request answered by our handler, and the stop reason from the idle update; the
/// tool call is audited with its approval; modes come from the mode config option.
#[tokio::test]
async fn a_v2_turn_with_a_permission_request_reads_as_v1_and_is_audited() {
    bounded(async {
        let agent = Agent::new("v2");
        let sink = agentacp::audit::MemorySink::new();
        let options = v2_options()
            .with_audit(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone())))
            .with_permission(|request: wire::RequestPermissionRequest| async move {
                assert_eq!(request.tool_call.tool_call_id.as_str(), "c1");
                PermissionDecision::Approve
            });
        let client = Client::connect(agent.command(), options).await.unwrap();
        assert_eq!(client.protocol_version(), 2);
        assert_eq!(
            client.initialize_response().agent_info.as_ref().unwrap().name,
            "scripted-v2"
        );
        assert!(
            client
                .initialize_response()
                .agent_capabilities
                .prompt_capabilities
                .image
        );
        client.authenticate(&wire::AuthMethodId::from("login")).await.unwrap();
        let session = client.new_session(&agent.workspace).await.unwrap();
        let state = client.session_state(&session).unwrap();
        assert_eq!(state.modes.as_ref().map(|m| m.current_mode_id.as_str()), Some("ask"));
        client
            .set_mode(&session, &wire::SessionModeId::from("code"))
            .await
            .unwrap();

        let (updates, stop) = client
            .prompt_text(&session, "hello")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn);
        assert_eq!(texts(&updates), ["Hel", "lo"], "{updates:#?}");
        let chunked = updates.iter().any(
            |u| matches!(u, Update::ToolCallUpdate(c) if c.content.as_ref().is_some_and(|content| content.len() == 1)),
        );
        assert!(chunked, "the content chunk reads as the call's content: {updates:#?}");
        assert!(
            !updates.iter().any(|u| matches!(u, Update::UserMessageChunk(_))),
            "our prompt is not echoed"
        );
        assert!(
            updates
                .iter()
                .any(|u| matches!(u, Update::Plan(p) if p.entries.len() == 1))
        );
        let created = updates
            .iter()
            .position(|u| matches!(u, Update::ToolCall(c) if c.tool_call_id.as_str() == "c1"));
        let completed = updates
            .iter()
            .position(|u| matches!(u, Update::ToolCallUpdate(c) if c.status == Some(wire::ToolCallStatus::Completed)));
        assert!(created.unwrap() < completed.unwrap(), "{updates:#?}");
        // Closing ends the agent's input: it exits by itself (it was kept open, and the agent
        // stopped by a signal after the exit grace, while the reader's seam held the writer).
        let status = client.close().await;
        assert!(
            status.is_some_and(|status| status.success()),
            "the agent exits on end of input: {status:?}"
        );

        let records = audited(&sink);
        let call = records
            .iter()
            .find(|r| r["metadata"]["aip44"]["approval"].is_object())
            .unwrap_or_else(|| panic!("the tool call is audited: {records:#?}"));
        assert_eq!(call["metadata"]["aip44"]["approval"]["approvedBy"], "user", "{call}");
        assert_eq!(call["metadata"]["aip44"]["session"], session.as_str());
        let frames = agent.frames();
        let methods: Vec<&str> = frames.iter().filter_map(|f| f["method"].as_str()).collect();
        assert_eq!(
            methods,
            [
                "initialize",
                "auth/login",
                "session/new",
                "session/set_config_option",
                "session/prompt"
            ]
        );
        assert_eq!(frames[0]["params"]["info"]["name"], "agentacp");
        assert_eq!(
            frames[3]["params"],
            json!({"sessionId": "s1", "configId": "mode", "type": "id", "value": "code"})
        );
        agent.check_frames();
    })
    .await;
}

/// Cancel: `session/cancel` goes as it is; the agent's idle update with `cancelled` ends the
/// v1 prompt.
#[tokio::test]
async fn a_cancelled_v2_turn_ends_cancelled() {
    bounded(async {
        let agent = Agent::new("v2");
        let client = Client::connect(agent.command(), v2_options()).await.unwrap();
        let session = client.new_session(&agent.workspace).await.unwrap();
        let turn = client.prompt_text(&session, "wait").await.unwrap();
        turn.cancel().await.unwrap();
        let (updates, stop) = turn.collect().await.unwrap();
        assert_eq!(stop, wire::StopReason::Cancelled);
        assert!(
            updates
                .iter()
                .any(|u| matches!(u, Update::ToolCall(c) if c.status == Some(wire::ToolCallStatus::Failed))),
            "a cancelled call reads as failed in v1: {updates:#?}"
        );
        client.close().await;
        agent.check_frames();
    })
    .await;
}

/// `session/load` is `session/resume` with `replayFrom: start`: the history comes as replay
/// (the user's message too), and is not audited; a plain resume replays nothing.
#[tokio::test]
async fn load_is_a_resume_with_replay_and_resume_replays_nothing() {
    bounded(async {
        let agent = Agent::new("v2");
        let sink = agentacp::audit::MemorySink::new();
        let options = v2_options().with_audit(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone())));
        let client = Client::connect(agent.command(), options).await.unwrap();
        assert!(client.initialize_response().agent_capabilities.load_session);
        let session = wire::SessionId::from("old-session");
        let replayed = client
            .load_session(&session, &agent.workspace)
            .await
            .unwrap()
            .replayed()
            .await
            .unwrap();
        assert_eq!(
            texts(&replayed),
            ["earlier question", "earlier answer"],
            "{replayed:#?}"
        );
        assert!(matches!(&replayed[0], Update::UserMessageChunk(_)));
        assert!(
            replayed
                .iter()
                .any(|u| matches!(u, Update::ToolCall(c) if c.tool_call_id.as_str() == "old"))
        );
        client.resume_session(&session, &agent.workspace).await.unwrap();
        client.close().await;
        assert!(
            sink.lines().is_empty(),
            "replayed tool calls are history: {:?}",
            sink.lines()
        );
        let frames = agent.frames();
        let resumes: Vec<&Value> = frames.iter().filter(|f| f["method"] == "session/resume").collect();
        assert_eq!(resumes[0]["params"]["replayFrom"], json!({"type": "start"}));
        assert!(resumes[1]["params"].get("replayFrom").is_none());
        agent.check_frames();
    })
    .await;
}

/// Negotiation: asked for v2 alone, an agent answering 1 ends the connection with a sentence;
/// asked for v2 or v1, it is spoken to in v1 (and knew our v1 capabilities); an agent
/// answering a version nobody speaks ends it; a client asking for v1 (the default) sends v1.
#[tokio::test]
async fn the_client_goes_on_only_in_a_version_it_asked_for() {
    bounded(async {
        let v1 = Agent::new("v1");
        let error = Client::connect(v1.command(), v2_options()).await.unwrap_err();
        assert!(
            matches!(error, ClientError::UnsupportedProtocol { agent: 1, ours: 2 }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "the agent chose ACP protocol version 1, which this client does not speak (it asked for version 2)"
        );

        let v1 = Agent::new("v1");
        let options = ClientOptions::default().with_protocol(Protocol::V2OrV1);
        let client = Client::connect(v1.command(), options).await.unwrap();
        assert_eq!(client.protocol_version(), 1);
        let session = client.new_session(&v1.workspace).await.unwrap();
        let (_, stop) = client
            .prompt_text(&session, "hi")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn);
        client.close().await;
        let frames = v1.frames();
        assert_eq!(frames[0]["params"]["protocolVersion"], 2);
        assert!(frames[0]["params"]["clientCapabilities"].is_object(), "{}", frames[0]);
        assert_eq!(frames[1]["method"], "session/new");
        assert!(frames[1]["params"]["mcpServers"].is_array());

        let v3 = Agent::new("v3");
        let options = ClientOptions::default().with_protocol(Protocol::V2OrV1);
        let error = Client::connect(v3.command(), options).await.unwrap_err();
        assert!(
            matches!(error, ClientError::UnsupportedProtocol { agent: 3, ours: 2 }),
            "{error:?}"
        );

        let v2 = Agent::new("v2");
        let error = Client::connect(v2.command(), ClientOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(error, ClientError::UnsupportedProtocol { agent: 2, ours: 1 }),
            "{error:?}"
        );
        assert_eq!(v2.frames()[0]["params"]["protocolVersion"], 1);
    })
    .await;
}
