//! The bridge between protocol versions, in process (the editor a duplex pipe, the agent the
//! scripted agent of `tests/fake/v2_agent.py`): a v1 editor in front of a v2 agent, and a v2
//! editor in front of a v1 agent, each with a governed tool call asked of the editor and
//! audited as a v1 bridge audits it. The v2 frames either side receives are checked against
//! the alpha.3 schema. Every wait is bounded.

use std::time::Duration;

use agentacp::audit::MemorySink;
use agentacp::bridge::BridgeOptions;
use agentacp::client::{AgentCommand, Protocol};
use agentacp::prelude::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

#[path = "v2/support.rs"]
mod support;

use support::Agent;

/// The governed bridge of tests/bridge.rs: `read-file` runs, `write-file` asks the editor,
/// anything else is hidden and refused; `loadSession` passes.
#[acp_operator(manifest = "tests/operators/test-bridge-governed/ACP.md")]
struct GovernedBridge {
    agent: AgentCommand,
}

impl GovernedBridgeBridge for GovernedBridge {
    fn downstream(&self) -> AgentCommand {
        self.agent.clone()
    }
}

/// Every wait on the bridge is bounded.
const WAIT: Duration = Duration::from_secs(20);

/// The editor's end of the bridge.
struct Editor {
    to_bridge: Option<DuplexStream>,
    from_bridge: Lines<BufReader<DuplexStream>>,
    task: tokio::task::JoinHandle<agentacp::Result<()>>,
}

impl Editor {
    /// The governed bridge over `agent`, auditing into the returned sink.
    fn start(agent: &Agent, options: BridgeOptions) -> (Editor, MemorySink) {
        let sink = MemorySink::new();
        let options = BridgeOptions {
            audit: Some(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone()))),
            ..options
        };
        let (editor_side, bridge_in) = tokio::io::duplex(1 << 16);
        let (bridge_out, editor_in) = tokio::io::duplex(1 << 16);
        let bridge = GovernedBridge { agent: agent.command() };
        let task = tokio::spawn(agentacp::bridge::bridge(bridge, options, bridge_in, bridge_out));
        let editor = Editor {
            to_bridge: Some(editor_side),
            from_bridge: BufReader::new(editor_in).lines(),
            task,
        };
        (editor, sink)
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.to_bridge.as_mut().unwrap().write_all(&line).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.from_bridge.next_line())
            .await
            .expect("the bridge answers in time")
            .unwrap()
            .expect("the bridge is still connected");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends request `id` and reads up to its answer (see [`Editor::until`]).
    async fn call(&mut self, id: i64, method: &str, params: Value, option: &str) -> Vec<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.until(|m| m["id"] == id && m.get("method").is_none(), option).await
    }

    /// Reads up to the message `done` accepts, answering permission requests on the way with
    /// `option`; everything read, in order.
    async fn until(&mut self, done: impl Fn(&Value) -> bool, option: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next().await;
            if message["method"] == "session/request_permission" {
                let answer = json!({"outcome": {"outcome": "selected", "optionId": option}});
                self.send(json!({"jsonrpc": "2.0", "id": message["id"], "result": answer}))
                    .await;
            }
            let done = done(&message);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// Closes the editor's side; the bridge ends without an error.
    async fn close(mut self) {
        self.to_bridge.take();
        while tokio::time::timeout(WAIT, self.from_bridge.next_line())
            .await
            .unwrap()
            .unwrap()
            .is_some()
        {}
        tokio::time::timeout(WAIT, self.task).await.unwrap().unwrap().unwrap();
    }
}

/// The audit records; the chain verifies.
fn audited(sink: &MemorySink) -> Vec<Value> {
    agentacp::audit::verify(sink.contents().as_bytes()).expect("the chain verifies");
    sink.lines()
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The `tool.call` record of `id`.
fn tool_record(records: &[Value], id: &str) -> Value {
    records
        .iter()
        .find(|r| r["action"] == "tool.call" && r["subject"]["ref"] == id)
        .unwrap_or_else(|| panic!("no tool.call record for {id}: {records:#?}"))
        .clone()
}

/// The `session/update`s among `messages`.
fn updates(messages: &[Value]) -> Vec<&Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .collect()
}

fn texts(messages: &[Value]) -> Vec<String> {
    updates(messages)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_string))
        .collect()
}

/// A v1 editor (Zed today) in front of a v2 agent: the editor speaks v1 throughout; the
/// turn, the permission request asked of it, the load with its replay read as v1's; the
/// tool call is governed and audited as with a v1 agent; the agent got only v2 frames.
#[tokio::test]
async fn a_v1_editor_drives_a_v2_agent_through_the_bridge() {
    let agent = Agent::new("v2");
    let (mut editor, sink) = Editor::start(&agent, BridgeOptions::default().agent_protocol(Protocol::V2));
    let init = editor
        .call(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientInfo": {"name": "test-editor", "version": "1"},
            "clientCapabilities": {"fs": {"readTextFile": true}}}),
            "",
        )
        .await;
    let result = &init[0]["result"];
    assert_eq!(result["protocolVersion"], 1, "{result}");
    assert_eq!(result["agentCapabilities"]["loadSession"], true, "{result}");
    assert_eq!(
        result["_meta"]["aip44"]["downstream"]["name"], "scripted-v2",
        "{result}"
    );
    let opened = editor
        .call(2, "session/new", json!({"cwd": "/w", "mcpServers": []}), "")
        .await;
    assert_eq!(opened.last().unwrap()["result"]["sessionId"], "s1");

    let prompt = json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "hello"}]});
    let turn = editor.call(3, "session/prompt", prompt, "yes").await;
    assert_eq!(
        turn.last().unwrap()["result"],
        json!({"stopReason": "end_turn"}),
        "{turn:#?}"
    );
    assert_eq!(texts(&turn), ["Hel", "lo"], "{turn:#?}");
    let kinds: Vec<&str> = updates(&turn)
        .iter()
        .filter_map(|u| u["sessionUpdate"].as_str())
        .collect();
    assert!(
        !kinds.contains(&"state_update") && !kinds.contains(&"user_message"),
        "{kinds:?}"
    );
    assert!(kinds.contains(&"plan") && kinds.contains(&"tool_call"), "{kinds:?}");
    let permission = turn
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .unwrap();
    assert_eq!(permission["params"]["toolCall"]["toolCallId"], "c1", "{permission}");
    assert!(updates(&turn).iter().any(|u| u["status"] == "completed"), "{turn:#?}");

    let load = json!({"sessionId": "old", "cwd": "/w", "mcpServers": []});
    let replayed = editor.call(4, "session/load", load, "").await;
    assert!(replayed.last().unwrap().get("result").is_some(), "{replayed:#?}");
    assert_eq!(
        texts(&replayed),
        ["earlier question", "earlier answer"],
        "{replayed:#?}"
    );
    assert!(
        !replayed.iter().any(|m| m.to_string().contains("Old read")),
        "a replayed tool call governance denies stays hidden: {replayed:#?}"
    );
    editor.close().await;

    let records = audited(&sink);
    let call = tool_record(&records, "c1");
    assert_eq!(
        call["metadata"]["aip44"]["approval"]["approvedBy"], "client:test-editor",
        "{call}"
    );
    let methods: Vec<String> = agent
        .frames()
        .iter()
        .filter_map(|f| f["method"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        methods,
        ["initialize", "session/new", "session/prompt", "session/resume"]
    );
    agent.check_frames();
}

/// A v2 editor in front of a v1 agent: the editor is served v2 (the acknowledgement, state
/// updates, the tool call created by its first update, the permission request with its
/// title and subject), each frame valid alpha.3; the tool call is governed and audited as
/// a v1 editor's.
#[tokio::test]
async fn a_v2_editor_drives_a_v1_agent_through_the_bridge() {
    let agent = Agent::new("v1");
    let (mut editor, sink) = Editor::start(&agent, BridgeOptions::default().protocol_versions(&[1, 2]));
    let init = editor
        .call(
            1,
            "initialize",
            json!({"protocolVersion": 2, "info": {"name": "v2-editor", "version": "1"}, "capabilities": {}}),
            "",
        )
        .await;
    let result = &init[0]["result"];
    assert_eq!(result["protocolVersion"], 2, "{result}");
    assert!(result["info"]["name"].is_string(), "{result}");
    let opened = editor.call(2, "session/new", json!({"cwd": "/w"}), "").await;
    assert_eq!(opened.last().unwrap()["result"]["sessionId"], "s1");
    let prompt = json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "hello"}]});
    let mut turn = editor.call(3, "session/prompt", prompt, "yes").await;
    assert!(
        turn[0]["result"].is_object(),
        "the acknowledgement comes first: {turn:#?}"
    );
    // The turn ends with the idle update.
    let idle = |m: &Value| m["params"]["update"]["state"] == "idle";
    turn.extend(editor.until(idle, "yes").await);
    let idle = updates(&turn)
        .into_iter()
        .find(|u| u["state"] == "idle")
        .unwrap()
        .clone();
    assert_eq!(idle["stopReason"], "end_turn", "{turn:#?}");
    let permission = turn
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .unwrap();
    assert!(permission["params"]["title"].is_string(), "{permission}");
    assert!(
        updates(&turn)
            .iter()
            .any(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed"),
        "{turn:#?}"
    );
    assert!(
        !updates(&turn).iter().any(|u| u["sessionUpdate"] == "tool_call"),
        "v2 has no `tool_call`"
    );
    if let Some(schema) = support::schema() {
        for message in &turn {
            match message["method"].as_str() {
                Some("session/update") => {
                    support::check(&schema, "UpdateSessionNotification", &message["params"], message)
                }
                Some("session/request_permission") => {
                    support::check(&schema, "RequestPermissionRequest", &message["params"], message)
                }
                _ => {}
            }
        }
        support::check(&schema, "InitializeResponse", result, &init[0]);
    }
    editor.close().await;

    let records = audited(&sink);
    let call = tool_record(&records, "c1");
    assert_eq!(
        call["metadata"]["aip44"]["approval"]["approvedBy"], "client:v2-editor",
        "{call}"
    );
    let frames = agent.frames();
    assert_eq!(
        frames[0]["params"]["protocolVersion"], 1,
        "the v1 agent is asked in v1: {}",
        frames[0]
    );
    assert!(frames.iter().all(|f| f["method"] != "auth/login"));
}

/// Sends a v2 `initialize` (`version` 2) or a v1 one, then opens session `s1`; the
/// `initialize` answer.
async fn open(editor: &mut Editor, version: u8) -> Value {
    let params = if version == 2 {
        json!({"protocolVersion": 2, "info": {"name": "v2-editor", "version": "1"}, "capabilities": {}})
    } else {
        json!({"protocolVersion": 1, "clientInfo": {"name": "v1-editor", "version": "1"}, "clientCapabilities": {}})
    };
    let init = editor.call(1, "initialize", params, "").await;
    let opened = editor
        .call(2, "session/new", json!({"cwd": "/w", "mcpServers": []}), "")
        .await;
    assert_eq!(opened.last().unwrap()["result"]["sessionId"], "s1", "{opened:#?}");
    init[0]["result"].clone()
}

/// The methods the agent received.
fn methods_received(agent: &Agent) -> Vec<String> {
    agent
        .frames()
        .iter()
        .filter_map(|f| f["method"].as_str().map(str::to_string))
        .collect()
}

/// Issue #48: `session/list`, `session/resume` and `session/close` are v2's baseline, so a
/// bridge that answers a v2 editor offers them whatever its manifest declares (the governed
/// bridge declares none of them): they pass to a v1 agent that offers them, are answered,
/// audited as passages, and not reported as narrowed. A v1 editor of the same bridge is still
/// refused them (narrowed by the manifest as before).
#[tokio::test]
async fn a_v2_editor_gets_the_baseline_session_methods_the_agent_offers() {
    let agent = Agent::new("v1-sessions");
    let (mut editor, sink) = Editor::start(&agent, BridgeOptions::default().protocol_versions(&[1, 2]));
    let init = open(&mut editor, 2).await;
    assert!(init["capabilities"]["session"].is_object(), "{init}");
    assert!(
        !init.to_string().contains("sessionCapabilities.list"),
        "not narrowed for a v2 editor: {init}"
    );
    let listed = editor.call(3, "session/list", json!({}), "").await;
    let listed = &listed.last().unwrap()["result"];
    assert_eq!(listed["sessions"][0]["sessionId"], "s1", "{listed}");
    let resume = json!({"sessionId": "s1", "cwd": "/w"});
    let resumed = editor.call(4, "session/resume", resume, "").await;
    assert!(resumed.last().unwrap()["result"].is_object(), "{resumed:#?}");
    let closed = editor.call(5, "session/close", json!({"sessionId": "s1"}), "").await;
    assert_eq!(closed.last().unwrap()["result"], json!({}), "{closed:#?}");
    if let Some(schema) = support::schema() {
        support::check(&schema, "ListSessionsResponse", listed, listed);
    }
    editor.close().await;
    let methods = methods_received(&agent);
    for method in ["session/list", "session/resume", "session/close"] {
        assert!(
            methods.iter().any(|m| m == method),
            "{method} reached the agent: {methods:?}"
        );
    }
    let records = audited(&sink);
    assert!(
        records
            .iter()
            .any(|r| r["action"] == "acp.session.list" && r["metadata"]["aip44"].get("refused").is_none()),
        "{records:#?}"
    );

    let agent = Agent::new("v1-sessions");
    let (mut editor, _sink) = Editor::start(&agent, BridgeOptions::default().protocol_versions(&[1, 2]));
    let init = open(&mut editor, 1).await;
    assert_eq!(init["agentCapabilities"]["sessionCapabilities"], json!({}), "{init}");
    let listed = editor.call(3, "session/list", json!({}), "").await;
    assert_eq!(listed.last().unwrap()["error"]["code"], -32601, "{listed:#?}");
    editor.close().await;
    assert!(!methods_received(&agent).iter().any(|m| m == "session/list"));
}

/// Issue #48: a v2 editor in front of a v1 agent that does not offer `session/list` (nor
/// `resume`, `close`) is answered `-32601` in a sentence that says the method is v2's
/// baseline and the agent does not advertise it; nothing reaches the agent.
#[tokio::test]
async fn a_v2_editor_hears_why_a_v1_agent_cannot_list_its_sessions() {
    let agent = Agent::new("v1");
    let (mut editor, _sink) = Editor::start(&agent, BridgeOptions::default().protocol_versions(&[1, 2]));
    open(&mut editor, 2).await;
    let calls = [
        ("session/list", json!({}), "sessionCapabilities.list"),
        (
            "session/resume",
            json!({"sessionId": "s1", "cwd": "/w"}),
            "sessionCapabilities.resume",
        ),
        ("session/close", json!({"sessionId": "s1"}), "sessionCapabilities.close"),
    ];
    for (id, (method, params, capability)) in (3..).zip(calls) {
        let answered = editor.call(id, method, params, "").await;
        let error = &answered.last().unwrap()["error"];
        assert_eq!(error["code"], -32601, "{error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "`{method}` is one of ACP protocol version 2's baseline session methods"
            )) && message.contains(&format!("does not advertise `{capability}`")),
            "{message}"
        );
    }
    editor.close().await;
    let methods = methods_received(&agent);
    assert_eq!(methods, ["initialize", "session/new"], "{methods:?}");
}
