//! Issue #48: one server endpoint serving ACP v1 and v2 (schema-v2.0.0-alpha.3), each
//! connection in the version its client asked for. Raw v2 frames over in-memory stdio pipes
//! and over WebSocket, against the runtime's test operators; every frame the server sends on
//! a v2 connection is checked against the alpha.3 JSON schema (test data, read when present).

use std::sync::{Arc, OnceLock};

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::prelude::*;
use agentacp::server::{FileStore, MemoryStore, ServerOptions, SessionContext};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

mod common;

use common::listening::{ALICE, Listening, tokens};
use common::{Pipe, WAIT};

#[acp_operator(manifest = "tests/operators/test-operator/ACP.md")]
struct Tester;

impl TesterServer for Tester {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let text = match request.prompt.first() {
            Some(wire::ContentBlock::Text(text)) => text.text.clone(),
            _ => String::new(),
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["/stream", count] => {
                for index in 0..count.parse::<u32>().unwrap_or(0) {
                    turn.message(index.to_string()).await?;
                }
            }
            ["/forever"] => loop {
                turn.message("tick").await?;
                tokio::task::yield_now().await;
            },
            ["/write"] => {
                let outcome = turn
                    .tool_call("write", json!({"n": 1}))
                    .kind(ToolKind::Edit)
                    .run(|arguments| async move { Ok::<_, String>(json!({"echo": arguments})) })
                    .await?;
                turn.message(format!("{outcome:?}")).await?;
            }
            ["/plan"] => {
                let entry = wire::PlanEntry::new(
                    "typed".into(),
                    wire::PlanEntryPriority::High,
                    wire::PlanEntryStatus::Pending,
                );
                turn.update(&wire::OperatorUpdate::Plan(wire::Plan::new(vec![entry])))
                    .await?;
            }
            ["/editor-read", path] => {
                let read = turn.editor().read_text_file(path).await;
                let text = match read {
                    Ok(text) => format!("ok: {text}"),
                    Err(error) => format!("error: {error}"),
                };
                turn.message(text).await?;
            }
            ["/fail"] => return Err(Error::msg("boom")),
            _ => turn.message(text).await?,
        }
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }
}

scripted_remote!();

/// A sandboxed operator whose prompt names the tools of its session's MCP servers.
#[acp_operator(manifest = "tests/operators/test-v2-mcp/ACP.md")]
struct McpTester;

impl McpTesterServer for McpTester {
    async fn prompt(&self, turn: &mut Turn<'_, Sandboxed>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        let tools = turn.mcp().tools().await?;
        let names: Vec<String> = tools.iter().map(|tool| tool.governed_name()).collect();
        turn.message(names.join(",")).await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }
}

/// The alpha.3 schema's checks of what an agent sends: the whole message (`Agent`), and its
/// params or result against their own definition (the message's union also takes any
/// extension's params, so it alone would take a v1 frame). `None` (the checks are skipped)
/// when the test data is not on this machine.
struct Checks {
    agent: jsonschema::Validator,
    defs: std::collections::HashMap<&'static str, jsonschema::Validator>,
}

/// The definitions the params or result of each method of an agent's are checked against.
const DEFINITIONS: &[&str] = &[
    "UpdateSessionNotification",
    "RequestPermissionRequest",
    "InitializeResponse",
    "NewSessionResponse",
    "ResumeSessionResponse",
    "PromptResponse",
    "SetSessionConfigOptionResponse",
    "ListSessionsResponse",
    "LoginAuthResponse",
    "LogoutAuthResponse",
    "Error",
];

fn checks() -> Option<&'static Checks> {
    static CHECKS: OnceLock<Option<Checks>> = OnceLock::new();
    CHECKS
        .get_or_init(|| {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/upstream/acp-schemas-v2/272bf799f35a258c6a4107a0410ed361e83683d3/schema.json"
            );
            let Ok(text) = std::fs::read_to_string(path) else {
                eprintln!("skipping the schema checks: {path} is not here");
                return None;
            };
            let mut schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
            let agent = schema["anyOf"]
                .as_array()
                .and_then(|sides| sides.iter().find(|side| side["title"] == "Agent"))
                .expect("the schema has the agent's messages")
                .clone();
            schema["anyOf"] = json!([agent]);
            let agent = jsonschema::validator_for(&schema).expect("the schema compiles");
            let defs = DEFINITIONS
                .iter()
                .map(|name| {
                    let one = json!({"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": format!("#/$defs/{name}")});
                    (*name, jsonschema::validator_for(&one).expect("the definition compiles"))
                })
                .collect();
            Some(Checks { agent, defs })
        })
        .as_ref()
}

/// What `message` must match beside the whole-message check: the definition of its params
/// (a notification or request of the agent's) or of its result (`answering`: the method of
/// the request it answers), and the part checked.
fn definition<'a>(message: &'a Value, answering: Option<&str>) -> Option<(&'static str, &'a Value)> {
    if let Some(error) = message.get("error") {
        return Some(("Error", error));
    }
    let name = match (message["method"].as_str(), answering) {
        (Some("session/update"), _) => "UpdateSessionNotification",
        (Some("session/request_permission"), _) => "RequestPermissionRequest",
        (Some(_), _) => return None,
        (None, Some("initialize")) => "InitializeResponse",
        (None, Some("session/new")) => "NewSessionResponse",
        (None, Some("session/resume")) => "ResumeSessionResponse",
        (None, Some("session/prompt")) => "PromptResponse",
        (None, Some("session/set_config_option")) => "SetSessionConfigOptionResponse",
        (None, Some("session/list")) => "ListSessionsResponse",
        (None, Some("auth/login")) => "LoginAuthResponse",
        (None, Some("auth/logout")) => "LogoutAuthResponse",
        (None, _) => return None,
    };
    let part = if message.get("method").is_some() {
        &message["params"]
    } else {
        &message["result"]
    };
    Some((name, part))
}

/// Fails unless `message` is one an alpha.3 agent may send (`answering`: the method of the
/// request it answers, for an answer).
fn assert_v2_answering(message: &Value, answering: Option<&str>) {
    let Some(checks) = checks() else { return };
    let mut errors: Vec<String> = checks
        .agent
        .iter_errors(message)
        .map(|error| error.to_string())
        .collect();
    if let Some((name, part)) = definition(message, answering) {
        errors.extend(
            checks.defs[name]
                .iter_errors(part)
                .map(|error| format!("{name}: {error}")),
        );
    }
    assert!(
        errors.is_empty(),
        "not an alpha.3 agent message: {message}\n{errors:#?}"
    );
}

/// [`assert_v2_answering`] for a message that is not an answer (or whose request is unknown).
fn assert_v2(message: &Value) {
    assert_v2_answering(message, None);
}

/// The kind of each message: a session update's, a request's method, or `answer`.
fn kinds(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m["method"].as_str() {
            Some("session/update") => {
                let update = &m["params"]["update"];
                match update["sessionUpdate"].as_str() {
                    Some("state_update") => format!("state:{}", update["state"].as_str().unwrap_or("?")),
                    other => other.unwrap_or("?").to_string(),
                }
            }
            Some(method) => method.to_string(),
            None => "answer".to_string(),
        })
        .collect()
}

/// A client end over in-memory pipes, reading every frame through [`assert_v2`] while it
/// speaks v2.
struct Peer {
    pipe: Pipe,
    v2: bool,
    /// The method of each request sent, by id: what its answer is checked against.
    sent: std::collections::HashMap<i64, String>,
}

impl Peer {
    fn new(pipe: Pipe) -> Peer {
        Peer {
            pipe,
            v2: false,
            sent: Default::default(),
        }
    }

    async fn next(&mut self) -> Value {
        let message = self.pipe.next().await;
        // A batch's answer: each entry is checked.
        for message in message.as_array().map_or(std::slice::from_ref(&message), Vec::as_slice) {
            let answering = message["id"].as_i64().and_then(|id| self.sent.get(&id));
            if self.v2 && message.get("method").is_none() {
                assert_v2_answering(message, answering.map(String::as_str));
            } else if self.v2 {
                assert_v2(message);
            }
        }
        message
    }

    /// Sends a request; returns its id.
    async fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.pipe.request(method, params).await;
        self.sent.insert(id, method.to_string());
        id
    }

    /// Sends a request; returns (what came before its answer, the answer).
    async fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.request(method, params).await;
        self.until_answer(id).await
    }

    async fn until_answer(&mut self, id: i64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                return (before, message);
            }
            before.push(message);
        }
    }

    /// Reads until `session`'s turn is idle again: the messages, the idle update last.
    async fn until_idle(&mut self) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next().await;
            let idle = message["params"]["update"]["state"] == "idle";
            seen.push(message);
            if idle {
                return seen;
            }
        }
    }

    /// `initialize` asking for `version` (in that version's shape); the answer's result.
    async fn initialize(&mut self, version: u64) -> Value {
        let params = if version >= 2 {
            json!({"protocolVersion": version, "info": {"name": "v2-test", "version": "1"}, "capabilities": {}})
        } else {
            json!({"protocolVersion": version, "clientInfo": {"name": "v1-test", "version": "1"}})
        };
        let (_, answer) = self.call("initialize", params).await;
        self.v2 = answer["result"]["protocolVersion"] == 2;
        answer["result"].clone()
    }

    async fn new_session(&mut self, cwd: &str) -> String {
        // `mcpServers`: required by v1, optional in v2.
        let params = if self.v2 {
            json!({"cwd": cwd})
        } else {
            json!({"cwd": cwd, "mcpServers": []})
        };
        let (_, answer) = self.call("session/new", params).await;
        answer["result"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string()
    }

    async fn prompt(&mut self, session: &str, text: &str) -> i64 {
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        self.request("session/prompt", params).await
    }
}

/// A server on in-memory pipes serving `versions`, with its workspace root and audit.
struct Setup {
    options: ServerOptions,
    root: tempfile::TempDir,
    audit: MemorySink,
}

fn setup(versions: &[u16]) -> Setup {
    let root = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let options = ServerOptions {
        workspace_root: Some(root.path().to_path_buf()),
        audit: Some(AuditLog::with_sink(Box::new(audit.clone()))),
        store: Some(Arc::new(MemoryStore::default())),
        permission_timeout: WAIT,
        protocol_versions: Some(versions.to_vec()),
        ..ServerOptions::default()
    };
    Setup { options, root, audit }
}

impl Setup {
    fn cwd(&self) -> String {
        self.root.path().canonicalize().unwrap().display().to_string()
    }

    fn start(&self) -> Peer {
        Peer::new(Pipe::serve(Tester, self.options.clone()))
    }

    /// Started, initialized as a v2 client, with one session.
    async fn ready(&self) -> (Peer, String) {
        let mut peer = self.start();
        assert_eq!(peer.initialize(2).await["protocolVersion"], 2);
        let session = peer.new_session(&self.cwd()).await;
        (peer, session)
    }
}

#[tokio::test]
async fn initialize_answers_in_the_v2_shape() {
    let setup = setup(&[1, 2]);
    let mut peer = setup.start();
    let result = peer.initialize(2).await;
    assert_eq!(result["info"]["name"], "test-operator", "{result}");
    assert!(result["capabilities"]["session"]["prompt"].is_object(), "{result}");
    assert_eq!(result["capabilities"]["session"]["mcp"]["stdio"], json!({}), "{result}");
    assert!(
        result.get("agentCapabilities").is_none() && result.get("agentInfo").is_none(),
        "{result}"
    );
    assert!(
        result.get("authMethods").is_none(),
        "stdio: no authentication: {result}"
    );
    peer.pipe.finish().await;
}

#[tokio::test]
async fn a_prompt_is_acknowledged_at_once_and_its_turn_reported_as_state_updates() {
    let setup = setup(&[1, 2]);
    let (mut peer, session) = setup.ready().await;
    let id = peer.prompt(&session, "/stream 3").await;
    let ack = peer.next().await;
    assert_eq!(ack["id"], id, "the acknowledgement comes first: {ack}");
    let user_message = ack["result"]["messageId"]
        .as_str()
        .expect("the user message's id")
        .to_string();
    let turn = peer.until_idle().await;
    assert_eq!(
        kinds(&turn),
        [
            "user_message",
            "state:running",
            "agent_message_chunk",
            "agent_message_chunk",
            "agent_message_chunk",
            "state:idle"
        ]
    );
    assert_eq!(turn[0]["params"]["update"]["messageId"], user_message.as_str());
    assert_eq!(turn[0]["params"]["update"]["content"][0]["text"], "/stream 3");
    let reply: Vec<&Value> = turn[2..5].iter().map(|m| &m["params"]["update"]["messageId"]).collect();
    assert!(reply.iter().all(|id| *id == reply[0]), "one message, one id: {reply:?}");
    assert_ne!(reply[0], &json!(user_message));
    assert_eq!(turn[5]["params"]["update"]["stopReason"], "end_turn");
    // The next turn's reply is a message of its own.
    peer.prompt(&session, "again").await;
    peer.next().await;
    let next = peer.until_idle().await;
    assert_ne!(next[2]["params"]["update"]["messageId"], *reply[0]);
    peer.pipe.finish().await;
}

#[tokio::test]
async fn a_cancelled_turn_ends_idle_with_stop_reason_cancelled() {
    let setup = setup(&[2]);
    let (mut peer, session) = setup.ready().await;
    peer.prompt(&session, "/forever").await;
    while peer.next().await["params"]["update"]["sessionUpdate"] != "agent_message_chunk" {}
    peer.pipe
        .send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}))
        .await;
    let rest = peer.until_idle().await;
    assert_eq!(rest.last().unwrap()["params"]["update"]["stopReason"], "cancelled");
    peer.pipe.finish().await;
}

#[tokio::test]
async fn a_failed_turn_ends_idle_with_the_error() {
    let setup = setup(&[2]);
    let (mut peer, session) = setup.ready().await;
    peer.prompt(&session, "/fail").await;
    peer.next().await;
    let turn = peer.until_idle().await;
    let idle = &turn.last().unwrap()["params"]["update"];
    assert_eq!(idle["stopReason"], "error", "{idle}");
    assert!(
        idle["_meta"]["agentacp"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("boom"),
        "{idle}"
    );
    peer.pipe.finish().await;
}

#[tokio::test]
async fn a_permission_request_has_a_title_and_a_subject_and_the_turn_requires_action_meanwhile() {
    let setup = setup(&[1, 2]);
    let (mut peer, session) = setup.ready().await;
    peer.prompt(&session, "/write").await;
    peer.next().await;
    let mut seen = Vec::new();
    let request = loop {
        let message = peer.next().await;
        if message["method"] == "session/request_permission" {
            break message;
        }
        seen.push(message);
    };
    assert_eq!(
        kinds(&seen),
        [
            "user_message",
            "state:running",
            "tool_call_update",
            "state:requires_action"
        ]
    );
    let call = &seen[2]["params"]["update"];
    assert_eq!(
        (&call["status"], &call["kind"]),
        (&json!("pending"), &json!("edit")),
        "{call}"
    );
    let params = &request["params"];
    assert_eq!(params["title"], "Allow write?", "{params}");
    assert_eq!(params["subject"]["type"], "tool_call");
    assert_eq!(params["subject"]["toolCall"]["toolCallId"], call["toolCallId"]);
    assert!(params.get("toolCall").is_none(), "{params}");
    let answer = json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}});
    peer.pipe.answer(&request, answer).await;
    let rest = peer.until_idle().await;
    assert_eq!(
        kinds(&rest),
        [
            "state:running",
            "tool_call_update",
            "tool_call_update",
            "agent_message_chunk",
            "state:idle"
        ]
    );
    // Governance and audit are v1's: the approval is recorded with the client's name.
    let records: Vec<Value> = setup
        .audit
        .lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = records
        .iter()
        .find(|r| r["action"] == "tool.call")
        .expect("the call is audited");
    assert_eq!(call["metadata"]["aip44"]["approval"]["approvedBy"], "client:v2-test");
    peer.pipe.finish().await;
}

#[tokio::test]
async fn a_plan_becomes_a_plan_update() {
    let setup = setup(&[2]);
    let (mut peer, session) = setup.ready().await;
    peer.prompt(&session, "/plan").await;
    peer.next().await;
    let turn = peer.until_idle().await;
    let plan = turn
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "plan_update")
        .unwrap();
    assert_eq!(plan["params"]["update"]["plan"]["type"], "items");
    assert_eq!(plan["params"]["update"]["plan"]["entries"][0]["content"], "typed");
    peer.pipe.finish().await;
}

#[tokio::test]
async fn resume_with_replay_from_the_start_replays_the_history_with_message_ids() {
    let state = tempfile::tempdir().unwrap();
    let mut setup = setup(&[1, 2]);
    setup.options.store = Some(Arc::new(FileStore::open(state.path()).unwrap()));
    let (mut peer, session) = setup.ready().await;
    peer.prompt(&session, "hello").await;
    peer.next().await;
    peer.until_idle().await;
    peer.pipe.finish().await;

    setup.options.store = Some(Arc::new(FileStore::open(state.path()).unwrap()));
    let mut peer = setup.start();
    peer.initialize(2).await;
    let params = json!({"sessionId": session, "cwd": setup.cwd(), "replayFrom": {"type": "start"}});
    let (replayed, answer) = peer.call("session/resume", params).await;
    assert!(answer["result"].is_object(), "{answer}");
    // The history, then the session's state, then the answer.
    assert_eq!(
        kinds(&replayed),
        ["user_message_chunk", "agent_message_chunk", "state:idle"]
    );
    let ids: Vec<&Value> = replayed.iter().map(|m| &m["params"]["update"]["messageId"]).collect();
    assert!(ids[0].is_string() && ids[1].is_string() && ids[0] != ids[1], "{ids:?}");
    // Resumed without replay: only the state, and the session takes prompts.
    let mut other = setup.start();
    other.initialize(2).await;
    let params = json!({"sessionId": session, "cwd": setup.cwd()});
    let (replayed, answer) = other.call("session/resume", params).await;
    assert!(answer["result"].is_object(), "{answer}");
    assert_eq!(kinds(&replayed), ["state:idle"], "only the state, nothing replayed");
    other.prompt(&session, "again").await;
    other.next().await;
    assert_eq!(
        other.until_idle().await.last().unwrap()["params"]["update"]["stopReason"],
        "end_turn"
    );
    peer.pipe.finish().await;
    other.pipe.finish().await;
}

/// The message ids of `messages` (updates), one per message, in order.
fn message_ids(messages: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for message in messages {
        if let Some(id) = message["params"]["update"]["messageId"].as_str()
            && ids.last().map(String::as_str) != Some(id)
        {
            ids.push(id.to_string());
        }
    }
    ids
}

/// A client that resumes `session` on a new connection, replaying from `from`: what came
/// before the answer, and the answer.
async fn replayed(setup: &Setup, session: &str, from: Value) -> (Vec<Value>, Value) {
    let mut peer = setup.start();
    peer.initialize(2).await;
    let params = json!({"sessionId": session, "cwd": setup.cwd(), "replayFrom": from});
    let seen = peer.call("session/resume", params).await;
    peer.pipe.finish().await;
    seen
}

/// Message ids are the messages' places in the session's history: a replay on another
/// connection gives each message the id it had live, and a replay can begin at a message
/// (`_agentacp_message`, inclusive); a message the history does not have is an error.
#[tokio::test]
async fn message_ids_are_stable_across_connections_and_a_replay_can_begin_at_a_message() {
    let setup = setup(&[1, 2]);
    let (mut peer, session) = setup.ready().await;
    let mut live = Vec::new();
    peer.prompt(&session, "hello").await;
    live.extend(peer.until_idle().await);
    peer.prompt(&session, "/write").await;
    loop {
        let message = peer.next().await;
        if message["method"] == "session/request_permission" {
            let answer = json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}});
            peer.pipe.answer(&message, answer).await;
            break;
        }
        live.push(message);
    }
    live.extend(peer.until_idle().await);
    peer.pipe.finish().await;
    let live = message_ids(&live);
    assert_eq!(live, ["msg_1", "msg_2", "msg_3", "msg_4"]);

    let (all, answer) = replayed(&setup, &session, json!({"type": "start"})).await;
    assert!(answer["result"].is_object(), "{answer}");
    assert_eq!(message_ids(&all), live, "the same ids on another connection");

    let from = json!({"type": "_agentacp_message", "messageId": "msg_3"});
    let (part, answer) = replayed(&setup, &session, from).await;
    assert!(answer["result"].is_object(), "{answer}");
    assert_eq!(message_ids(&part), ["msg_3", "msg_4"]);
    assert_eq!(
        kinds(&part).first().map(String::as_str),
        Some("user_message_chunk"),
        "from the message on: {part:?}"
    );
    assert!(kinds(&part).contains(&"tool_call_update".to_string()), "{part:?}");

    let from = json!({"type": "_agentacp_message", "messageId": "msg_9"});
    let (none, answer) = replayed(&setup, &session, from).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(none.is_empty(), "nothing replayed: {none:?}");
    let (_, answer) = replayed(&setup, &session, json!({"type": "_elsewhere"})).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");

    // Resumed without a replay, the session goes on numbering where its history is.
    let mut peer = setup.start();
    peer.initialize(2).await;
    let params = json!({"sessionId": session, "cwd": setup.cwd()});
    let (_, answer) = peer.call("session/resume", params).await;
    assert!(answer["result"].is_object(), "{answer}");
    peer.prompt(&session, "again").await;
    let more = message_ids(&peer.until_idle().await);
    peer.pipe.finish().await;
    assert_eq!(more, ["msg_5", "msg_6"]);
    let (all, _) = replayed(&setup, &session, json!({"type": "start"})).await;
    assert_eq!(
        message_ids(&all),
        ["msg_1", "msg_2", "msg_3", "msg_4", "msg_5", "msg_6"]
    );
}

#[tokio::test]
async fn the_v1_methods_v2_removed_are_unknown_on_a_v2_connection() {
    let setup = setup(&[1, 2]);
    let (mut peer, session) = setup.ready().await;
    for (method, instead) in [("session/load", "session/resume"), ("authenticate", "auth/login")] {
        let params = json!({"sessionId": session, "cwd": setup.cwd(), "mcpServers": [], "methodId": "x"});
        let (_, answer) = peer.call(method, params).await;
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(instead),
            "{answer}"
        );
    }
    peer.pipe.finish().await;
}

/// v2 has no `fs/*`: the operator's editor calls fail as they do for a v1 client that offers
/// no file system.
#[tokio::test]
async fn the_editor_is_absent_on_v2_as_for_a_v1_client_without_it() {
    let setup = setup(&[1, 2]);
    let mut said = Vec::new();
    for version in [1, 2] {
        let mut peer = setup.start();
        peer.initialize(version).await;
        let session = peer.new_session(&setup.cwd()).await;
        let id = peer.prompt(&session, "/editor-read notes.txt").await;
        let seen = if version == 2 {
            peer.until_idle().await
        } else {
            peer.until_answer(id).await.0
        };
        let text = seen
            .iter()
            .find_map(|m| m["params"]["update"]["content"]["text"].as_str())
            .unwrap()
            .to_string();
        said.push(text);
        peer.pipe.finish().await;
    }
    assert!(said[0].starts_with("error:"), "{said:?}");
    assert_eq!(said[0], said[1]);
}

#[tokio::test]
async fn a_client_asking_for_another_version_gets_the_latest_served_and_v1_stays_v1() {
    let setup = setup(&[1, 2]);
    let mut peer = setup.start();
    assert_eq!(peer.initialize(3).await["protocolVersion"], 2);
    peer.pipe.finish().await;
    let mut peer = setup.start();
    let result = peer.initialize(1).await;
    assert_eq!(result["protocolVersion"], 1);
    assert!(result["agentCapabilities"].is_object(), "v1's shape: {result}");
    let session = peer.new_session(&setup.cwd()).await;
    let id = peer.prompt(&session, "hi").await;
    let (updates, answer) = peer.until_answer(id).await;
    assert_eq!(
        answer["result"]["stopReason"], "end_turn",
        "v1: the answer ends the turn"
    );
    assert_eq!(kinds(&updates), ["agent_message_chunk"]);
    peer.pipe.finish().await;
    // Served v1 only (the default): a v2 client gets v1.
    let setup = self::setup(&[1]);
    let mut peer = setup.start();
    assert_eq!(peer.initialize(2).await["protocolVersion"], 1);
    peer.pipe.finish().await;
}

/// A batch is answered as one array, its entries' answers in their order (a refused entry's
/// too); other messages are not held back meanwhile; a batch of notifications only is not
/// answered; an empty batch is one error.
#[tokio::test]
async fn a_batch_is_answered_as_one_array() {
    let setup = setup(&[2]);
    let (mut peer, session) = setup.ready().await;
    peer.pipe.send_raw(b"[]\n").await;
    let empty = peer.next().await;
    assert_eq!(
        (&empty["error"]["code"], &empty["id"]),
        (&json!(-32600), &Value::Null),
        "{empty}"
    );
    let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "/stream 3"}]});
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": prompt},
        7,
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "not-this-one"}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": {"sessionId": session}},
        {"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}},
    ]);
    peer.sent.insert(1, "session/prompt".into());
    peer.sent.insert(3, "session/list".into());
    peer.pipe.send(batch).await;
    let mut before = Vec::new();
    let answers = loop {
        let message = peer.next().await;
        if message.is_array() {
            break message;
        }
        assert!(message.get("method").is_some(), "no answer on its own: {message}");
        before.push(message);
    };
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert!(answers[0]["result"]["messageId"].is_string(), "{answers:?}");
    assert_eq!(
        (&answers[1]["id"], &answers[1]["error"]["code"]),
        (&Value::Null, &json!(-32600))
    );
    assert_eq!(
        (&answers[2]["id"], &answers[2]["error"]["code"]),
        (&json!(2), &json!(-32601))
    );
    assert_eq!(answers[3]["result"]["sessions"][0]["sessionId"], session.as_str());
    // The turn went on meanwhile and ends as any turn.
    before.extend(peer.until_idle().await);
    assert_eq!(
        kinds(&before)
            .iter()
            .filter(|kind| *kind == "agent_message_chunk")
            .count(),
        3
    );
    // Notifications only: no answer; the next line is the next request's answer.
    let cancel = json!([{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}]);
    peer.pipe.send(cancel).await;
    let (seen, answer) = peer.call("session/list", json!({})).await;
    assert!(seen.is_empty() && answer.is_object(), "{seen:?} {answer}");
    peer.pipe.finish().await;
}

/// `running` goes out as soon as the permission answer is read, before anything the runtime
/// sends after it: here before the answer to a request sent right behind the permission's.
#[tokio::test]
async fn running_is_said_when_the_permission_answer_is_read() {
    let setup = setup(&[2]);
    let (mut peer, session) = setup.ready().await;
    peer.prompt(&session, "/write").await;
    let request = loop {
        let message = peer.next().await;
        if message["method"] == "session/request_permission" {
            break message;
        }
    };
    let answer = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}});
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}});
    peer.sent.insert(1, "session/list".into());
    peer.pipe.send_raw(format!("{answer}\n{list}\n").as_bytes()).await;
    let (before, _) = peer.until_answer(1).await;
    assert_eq!(
        kinds(&before).first().map(String::as_str),
        Some("state:running"),
        "{before:?}"
    );
    let rest = peer.until_idle().await;
    assert!(
        !kinds(&rest).contains(&"state:running".to_string()),
        "said once: {rest:?}"
    );
    peer.pipe.finish().await;
}

/// The answer of a scripted MCP server to the MCP request `request` (`mcp/message` params).
fn mcp_answer(request: &Value) -> Value {
    match request["method"].as_str() {
        Some("initialize") => json!({"protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "notes", "version": "1"}}),
        Some("tools/list") => json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
        other => panic!("an MCP request the script does not answer: {other:?}"),
    }
}

/// MCP-over-ACP on v2: advertised as alpha.3's `mcp.acp`; a `"type": "acp"` server in
/// `session/new` is reached as on v1 (`mcp/connect`, then MCP in `mcp/message`s) and its
/// tools offered to the operator.
#[tokio::test]
async fn mcp_over_acp_is_advertised_and_routed_on_v2() {
    let setup = setup(&[2]);
    let mut peer = Peer::new(Pipe::serve(McpTester, setup.options.clone()));
    let result = peer.initialize(2).await;
    assert_eq!(result["capabilities"]["session"]["mcp"]["acp"], json!({}), "{result}");
    let server = json!({"type": "acp", "name": "notes", "serverId": "notes-1"});
    let params = json!({"cwd": setup.cwd(), "mcpServers": [server]});
    let (_, answer) = peer.call("session/new", params).await;
    let session = answer["result"]["sessionId"].as_str().expect("a session").to_string();
    peer.prompt(&session, "tools").await;
    let mut methods = Vec::new();
    let turn = loop {
        let message = peer.next().await;
        let Some(method) = message["method"].as_str() else {
            continue;
        };
        match method {
            "mcp/connect" => {
                assert_eq!(message["params"]["serverId"], "notes-1", "{message}");
                peer.pipe.answer(&message, json!({"connectionId": "c-1"})).await;
            }
            "mcp/message" if message.get("id").is_some() => {
                assert_eq!(message["params"]["connectionId"], "c-1", "{message}");
                peer.pipe.answer(&message, mcp_answer(&message["params"])).await;
            }
            "session/update" if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" => {
                break message;
            }
            _ => {}
        }
        methods.push(format!(
            "{method} {}",
            message["params"]["method"].as_str().unwrap_or("")
        ));
    };
    assert_eq!(
        turn["params"]["update"]["content"]["text"], "mcp/notes/echo",
        "{methods:?}"
    );
    assert_eq!(
        methods.iter().filter(|m| m.starts_with("mcp/")).collect::<Vec<_>>(),
        [
            "mcp/connect ",
            "mcp/message initialize",
            "mcp/message notifications/initialized",
            "mcp/message tools/list"
        ],
        "{methods:?}"
    );
    peer.until_idle().await;
    peer.pipe.finish().await;
}

/// A WebSocket client dialed with tungstenite.
struct Socket {
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    next_id: i64,
    v2: bool,
}

impl Socket {
    async fn connect(server: &Listening, token: Option<&str>) -> Socket {
        let mut request = format!("ws://{}/acp", server.addr).into_client_request().unwrap();
        if let Some(token) = token {
            request
                .headers_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
            .await
            .expect("the upgrade was answered in time")
            .unwrap();
        Socket {
            ws,
            next_id: 0,
            v2: false,
        }
    }

    async fn next(&mut self) -> Value {
        loop {
            let frame = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("the server sent in time")
                .expect("the connection is open")
                .unwrap();
            if let Message::Text(text) = frame {
                let message: Value = serde_json::from_str(&text).unwrap();
                if self.v2 {
                    assert_v2(&message);
                }
                return message;
            }
        }
    }

    async fn send(&mut self, message: Value) {
        self.ws.send(Message::text(message.to_string())).await.unwrap();
    }

    async fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                if self.v2 {
                    assert_v2_answering(&message, Some(method));
                }
                return (before, message);
            }
            before.push(message);
        }
    }
}

/// One WebSocket endpoint: a v1 client (its token on the upgrade) and a v2 client (signing
/// in with `auth/login`) at once, each in its version.
#[tokio::test]
async fn a_v1_and_a_v2_client_on_one_websocket_endpoint_at_once() {
    let server = Listening::start_with_options(
        Remote,
        |listen| listen.tokens(tokens()),
        |options| ServerOptions {
            protocol_versions: Some(vec![1, 2]),
            ..options
        },
    )
    .await;
    let mut v1 = Socket::connect(&server, Some(ALICE)).await;
    let mut v2 = Socket::connect(&server, None).await;
    let (_, init) = v1.call("initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(init["result"]["protocolVersion"], 1);
    let params = json!({"protocolVersion": 2, "info": {"name": "v2-test", "version": "1"}, "capabilities": {}});
    let (_, init) = v2.call("initialize", params).await;
    v2.v2 = true;
    assert_v2_answering(&init, Some("initialize"));
    let method = &init["result"]["authMethods"][0];
    assert_eq!(
        (&method["methodId"], &method["type"]),
        (&json!("bearer"), &json!("agent")),
        "{init}"
    );
    let refused = v2.call("session/new", json!({"cwd": server.cwd()})).await.1;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    let login = json!({"methodId": "bearer", "_meta": {"agentacp": {"token": ALICE}}});
    let (_, logged_in) = v2.call("auth/login", login).await;
    assert!(logged_in["result"].is_object(), "{logged_in}");
    assert!(server.recorded("auth.login").await);

    let one = v1
        .call("session/new", json!({"cwd": server.cwd(), "mcpServers": []}))
        .await
        .1;
    let two = v2.call("session/new", json!({"cwd": server.cwd()})).await.1;
    let (one, two) = (one["result"]["sessionId"].clone(), two["result"]["sessionId"].clone());
    // Both prompts in flight at once.
    v1.send(json!({"jsonrpc": "2.0", "id": 50, "method": "session/prompt",
        "params": {"sessionId": one, "prompt": [{"type": "text", "text": "hi"}]}}))
        .await;
    v2.send(json!({"jsonrpc": "2.0", "id": 50, "method": "session/prompt",
        "params": {"sessionId": two, "prompt": [{"type": "text", "text": "hi"}]}}))
        .await;
    let ack = v2.next().await;
    assert!(ack["result"]["messageId"].is_string(), "{ack}");
    let mut turn = Vec::new();
    while turn
        .last()
        .is_none_or(|m: &Value| m["params"]["update"]["state"] != "idle")
    {
        turn.push(v2.next().await);
    }
    assert_eq!(turn.last().unwrap()["params"]["update"]["stopReason"], "end_turn");
    loop {
        let message = v1.next().await;
        if message["id"] == 50 {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
        assert_eq!(
            message["params"]["update"]["sessionUpdate"], "agent_message_chunk",
            "{message}"
        );
    }
    let (_, logged_out) = v2.call("auth/logout", json!({})).await;
    assert!(logged_out["result"].is_object(), "{logged_out}");
    server.shut_down().await;
}

#[acp_operator(manifest = "tests/operators/test-surface/ACP.md")]
struct Surfacer;

impl SurfacerServer for Surfacer {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        turn.set_mode("ask").await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }

    async fn set_mode(
        &self,
        _session: &SessionContext,
        _request: wire::SetSessionModeRequest,
    ) -> Result<wire::SetSessionModeResponse> {
        Ok(wire::SetSessionModeResponse::default())
    }

    async fn set_config_option(
        &self,
        _session: &SessionContext,
        _request: wire::SetSessionConfigOptionRequest,
    ) -> Result<wire::SetSessionConfigOptionResponse> {
        Ok(wire::SetSessionConfigOptionResponse::new(Vec::new()))
    }

    async fn extension(&self, _method: &str, _params: Value) -> Result<Value> {
        Ok(json!({}))
    }

    async fn extension_notification(&self, _method: &str, _params: Value) -> Result<()> {
        Ok(())
    }
}

/// v2 has no modes: a manifest's modes are the config option `mode` (category `mode`), set
/// with `session/set_config_option` and reported with `config_option_update`; config options
/// and command inputs take their v2 names.
#[tokio::test]
async fn modes_are_a_config_option_and_options_and_commands_take_their_v2_shape() {
    let setup = setup(&[2]);
    let mut peer = Peer::new(Pipe::serve(Surfacer, setup.options.clone()));
    peer.initialize(2).await;
    let (_, answer) = peer.call("session/new", json!({"cwd": setup.cwd()})).await;
    let result = &answer["result"];
    assert!(result.get("modes").is_none(), "{result}");
    let options = result["configOptions"].as_array().unwrap();
    let ids: Vec<&Value> = options.iter().map(|option| &option["configId"]).collect();
    assert_eq!(ids, [&json!("mode"), &json!("model"), &json!("verbose")], "{result}");
    assert_eq!(
        (&options[0]["category"], &options[0]["currentValue"]),
        (&json!("mode"), &json!("ask"))
    );
    let session = result["sessionId"].as_str().unwrap().to_string();
    let commands = peer.next().await;
    let review = &commands["params"]["update"]["availableCommands"][0];
    assert_eq!(
        review["input"],
        json!({"type": "text", "hint": "what to review"}),
        "{commands}"
    );

    let set = |config: &str, value: &str| json!({"sessionId": session, "configId": config, "value": value});
    let (_, answer) = peer.call("session/set_config_option", set("mode", "code")).await;
    assert_eq!(answer["result"]["configOptions"][0]["currentValue"], "code", "{answer}");
    let (_, answer) = peer.call("session/set_config_option", set("model", "deep")).await;
    let options = &answer["result"]["configOptions"];
    assert_eq!(
        (&options[0]["currentValue"], &options[1]["currentValue"]),
        (&json!("code"), &json!("deep")),
        "{answer}"
    );
    // The operator's own switch back to `ask` is a config option update.
    peer.prompt(&session, "hi").await;
    peer.next().await;
    let turn = peer.until_idle().await;
    let update = turn
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "config_option_update")
        .expect("the mode change is reported");
    assert_eq!(
        update["params"]["update"]["configOptions"][0]["currentValue"], "ask",
        "{update}"
    );
    assert!(!kinds(&turn).contains(&"current_mode_update".to_string()));
    peer.pipe.finish().await;
}

/// The schema check is live where the schema is: a v1 chunk (no `messageId`) and a v1
/// `initialize` answer are refused.
#[test]
fn the_schema_check_refuses_v1_frames() {
    if checks().is_none() {
        return;
    }
    let chunk = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}}});
    assert!(std::panic::catch_unwind(|| assert_v2(&chunk)).is_err());
    let mut with_id = chunk;
    with_id["params"]["update"]["messageId"] = json!("m");
    assert_v2(&with_id);
    let v1 = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {}}});
    assert!(std::panic::catch_unwind(|| assert_v2_answering(&v1, Some("initialize"))).is_err());
}

/// A prompt the runtime refuses at once (an unknown session) is answered with the error,
/// never acknowledged.
#[tokio::test]
async fn a_refused_prompt_is_an_error_not_an_acknowledgement() {
    let setup = setup(&[2]);
    let (mut peer, _) = setup.ready().await;
    let id = peer.prompt("sess_nope", "hi").await;
    let (before, answer) = peer.until_answer(id).await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    peer.pipe.finish().await;
}

/// The next SSE event of `response` carrying a JSON-RPC message.
async fn sse_message(response: &mut reqwest::Response, buffer: &mut String) -> Value {
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let data = event.lines().find_map(|line| line.strip_prefix("data: "));
            if let Some(message) = data.and_then(|data| serde_json::from_str::<Value>(data).ok()) {
                return message;
            }
        }
        let chunk = tokio::time::timeout(WAIT, response.chunk())
            .await
            .expect("an event in time")
            .expect("the stream reads")
            .expect("the stream is open");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// Streamable HTTP on the same endpoint: a v2 client's turn, its acknowledgement and state
/// updates on the session's stream.
#[tokio::test]
async fn a_v2_turn_over_streamable_http() {
    let server = Listening::start_with_options(
        Remote,
        |listen| listen,
        |options| ServerOptions {
            protocol_versions: Some(vec![1, 2]),
            ..options
        },
    )
    .await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().timeout(WAIT * 3).build().unwrap();
    let url = format!("http://{}/acp", server.addr);
    let post = |message: Value, headers: Vec<(&'static str, String)>| {
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .body(message.to_string());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": 2, "info": {"name": "v2-http", "version": "1"}}});
    let response = post(init, vec![]).await.unwrap();
    let connection = response.headers()["acp-connection-id"].to_str().unwrap().to_string();
    let answer: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_v2_answering(&answer, Some("initialize"));
    assert_eq!(answer["result"]["protocolVersion"], 2, "{answer}");
    let stream = |session: Option<String>| {
        let mut request = http
            .get(&url)
            .header("accept", "text/event-stream")
            .header("acp-connection-id", &connection);
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        request.send()
    };
    let (mut events, mut buffer) = (stream(None).await.unwrap(), String::new());
    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": server.cwd()}});
    post(new, vec![("acp-connection-id", connection.clone())])
        .await
        .unwrap();
    let created = sse_message(&mut events, &mut buffer).await;
    assert_v2_answering(&created, Some("session/new"));
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let (mut events, mut buffer) = (stream(Some(session.clone())).await.unwrap(), String::new());
    let prompt = json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}});
    let headers = vec![
        ("acp-connection-id", connection.clone()),
        ("acp-session-id", session.clone()),
    ];
    post(prompt, headers).await.unwrap();
    let mut seen = Vec::new();
    while seen
        .last()
        .is_none_or(|m: &Value| m["params"]["update"]["state"] != "idle")
    {
        let message = sse_message(&mut events, &mut buffer).await;
        assert_v2_answering(&message, (message["id"] == 2).then_some("session/prompt"));
        seen.push(message);
    }
    assert_eq!(
        kinds(&seen),
        [
            "answer",
            "user_message",
            "state:running",
            "agent_message_chunk",
            "state:idle"
        ]
    );
    assert!(seen[0]["result"]["messageId"].is_string(), "{}", seen[0]);
    server.shut_down().await;
}

/// v2's enums are open, with one safety rule: a permission outcome the agent does not know is
/// never an approval.
#[tokio::test]
async fn an_unknown_permission_outcome_is_not_an_approval() {
    let setup = setup(&[2]);
    let (mut peer, session) = setup.ready().await;
    peer.prompt(&session, "/write").await;
    let request = loop {
        let message = peer.next().await;
        if message["method"] == "session/request_permission" {
            break message;
        }
    };
    peer.pipe
        .answer(&request, json!({"outcome": {"outcome": "_maybe"}}))
        .await;
    let rest = peer.until_idle().await;
    let said = rest
        .iter()
        .find_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .expect("the operator reports the outcome");
    assert!(!said.starts_with("Completed"), "{said}");
    let records: Vec<Value> = setup
        .audit
        .lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        records
            .iter()
            .all(|r| r["action"] != "tool.call" || r["metadata"]["aip44"]["result"].is_null()),
        "the tool did not run"
    );
    peer.pipe.finish().await;
}

/// A prompt with a content block of a type the operator's revision does not have (v2's enums
/// are open, v1's are not) is refused before it is acknowledged, as a v1 client's would be.
#[tokio::test]
async fn a_prompt_the_operators_types_refuse_is_refused_not_acknowledged() {
    let setup = setup(&[2]);
    let (mut peer, session) = setup.ready().await;
    let params = json!({"sessionId": session, "prompt": [{"type": "_sketch", "strokes": []}]});
    let id = peer.request("session/prompt", params).await;
    let (before, answer) = peer.until_answer(id).await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"].as_str().unwrap().contains("_sketch"),
        "{answer}"
    );
    peer.pipe.finish().await;
}

/// A served version the runtime does not speak stops the start-up, saying which.
#[tokio::test]
async fn a_version_the_runtime_does_not_speak_stops_the_start_up() {
    let setup = setup(&[1, 3]);
    let (_client, input) = tokio::io::duplex(64);
    let (output, _peer) = tokio::io::duplex(64);
    let error = agentacp::server::serve(Tester, setup.options.clone(), input, output)
        .await
        .expect_err("refused at start-up");
    assert!(
        error
            .to_string()
            .contains("protocol version 3 is not one the runtime speaks"),
        "{error}"
    );
}
