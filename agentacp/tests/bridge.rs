//! The bridge runtime against a fake downstream agent, in process: the editor is a duplex
//! pipe, the agent a small Python script. Capability narrowing both ways, ids and `_meta`
//! preserved, undeclared client methods refused, the agent going away, the editor going away.

use std::path::Path;
use std::time::Duration;

use agentacp::bridge::{BridgeOptions, bridge};
use agentacp::client::AgentCommand;
use agentacp::prelude::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

/// A basic bridge (tests/ui/pass/bridge/ACP.md: only `fs.readTextFile` passes).
#[acp_operator(manifest = "../tests/ui/pass/bridge/ACP.md")]
struct TestBridge {
    agent: AgentCommand,
}

impl TestBridgeBridge for TestBridge {
    fn downstream(&self) -> AgentCommand {
        self.agent.clone()
    }
}

const AGENT: &str = r#"
import json, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
def ask(id, method, params):
    send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    for line in sys.stdin:
        answer = json.loads(line)
        if answer.get("id") == id and "method" not in answer:
            answer.pop("jsonrpc", None)
            return answer
for line in sys.stdin:
    msg = json.loads(line)
    method, id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1,
              "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True}},
              "agentInfo": {"name": "fake-agent", "version": "1"},
              "_meta": {"received": params.get("clientCapabilities"), "kept": "yes"}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        text = params["prompt"][0]["text"]
        if text == "crash":
            sys.stderr.write("fake agent: giving up\n")
            sys.stderr.flush()
            sys.exit(3)
        if text == "ask":
            read = ask("agent-1", "fs/read_text_file", {"sessionId": "s1", "path": "/w/a.txt"})
            term = ask("agent-2", "terminal/create", {"sessionId": "s1", "command": "ls"})
            text = json.dumps([read, term], sort_keys=True)
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
              "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
              "_meta": {"trace": 7}}})
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
"#;

struct Editor {
    to_bridge: DuplexStream,
    from_bridge: Lines<BufReader<DuplexStream>>,
}

impl Editor {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.to_bridge.write_all(&line).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.from_bridge.next_line())
            .await
            .expect("the bridge answers in time")
            .unwrap()
            .expect("the bridge is still connected");
        serde_json::from_str(&line).unwrap()
    }
}

/// Starts the bridge over the fake agent; returns the editor's end and the bridge's task.
fn start(dir: &Path) -> (Editor, tokio::task::JoinHandle<agentacp::Result<()>>) {
    std::fs::write(dir.join("agent.py"), AGENT).unwrap();
    let agent = AgentCommand::new("python3").arg(dir.join("agent.py")).current_dir(dir);
    let (editor_side, bridge_in) = tokio::io::duplex(1 << 16);
    let (bridge_out, editor_in) = tokio::io::duplex(1 << 16);
    let options = BridgeOptions {
        audit: Some(agentacp::audit::AuditLog::off()),
        ..BridgeOptions::default()
    };
    let task = tokio::spawn(bridge(TestBridge { agent }, options, bridge_in, bridge_out));
    let editor = Editor {
        to_bridge: editor_side,
        from_bridge: BufReader::new(editor_in).lines(),
    };
    (editor, task)
}

async fn initialize_and_open(editor: &mut Editor) -> Value {
    editor
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}}}),
        )
        .await;
    let init = editor.next().await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": "new-1", "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}))
        .await;
    assert_eq!(editor.next().await["result"]["sessionId"], "s1");
    init
}

#[tokio::test]
async fn capabilities_are_narrowed_to_the_manifest_both_ways_and_meta_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task) = start(dir.path());
    let init = initialize_and_open(&mut editor).await;
    assert_eq!(init["id"], 1, "the editor's id is kept: {init}");
    let result = &init["result"];
    // Down: the editor offered fs read+write and terminal; the manifest lets only reading pass.
    assert_eq!(
        result["_meta"]["received"],
        json!({"fs": {"readTextFile": true, "writeTextFile": false}, "terminal": false}),
        "{init}"
    );
    // Up: the agent offered loadSession and images; a basic bridge declares neither.
    assert_eq!(result["agentCapabilities"]["loadSession"], false, "{init}");
    assert_eq!(
        result["agentCapabilities"]["promptCapabilities"]["image"], false,
        "{init}"
    );
    assert_eq!(
        result["_meta"]["kept"], "yes",
        "the agent's other _meta is kept: {init}"
    );
    assert_eq!(result["_meta"]["aip44"]["tier"], "basic", "{init}");
    assert_eq!(result["_meta"]["aip44"]["downstream"]["name"], "fake-agent", "{init}");
    assert_eq!(result["agentInfo"]["name"], "test-bridge", "{init}");

    editor
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}], "_meta": {"x": 1}}}))
        .await;
    let update = editor.next().await;
    assert_eq!(update["method"], "session/update");
    assert_eq!(
        update["params"]["_meta"]["trace"], 7,
        "notifications pass byte for byte: {update}"
    );
    let answer = editor.next().await;
    assert_eq!(
        (answer["id"].clone(), answer["result"]["stopReason"].clone()),
        (json!(7), json!("end_turn"))
    );

    drop(editor);
    let outcome = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .unwrap()
        .unwrap();
    assert!(
        outcome.is_ok(),
        "the editor leaving ends the bridge cleanly: {outcome:?}"
    );
}

#[tokio::test]
async fn the_agent_may_use_only_the_declared_client_methods_and_ids_pass_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task) = start(dir.path());
    initialize_and_open(&mut editor).await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": 8, "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "ask"}]}}))
        .await;
    // The declared read reaches the editor with the agent's id; the editor answers it.
    let read = editor.next().await;
    assert_eq!(
        (read["id"].clone(), read["method"].clone()),
        (json!("agent-1"), json!("fs/read_text_file")),
        "{read}"
    );
    editor
        .send(json!({"jsonrpc": "2.0", "id": "agent-1", "result": {"content": "from the editor"}}))
        .await;
    // terminal/create is not declared: the bridge refuses it; the editor never sees it.
    let update = editor.next().await;
    let reported: Value =
        serde_json::from_str(update["params"]["update"]["content"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(reported[0]["result"]["content"], "from the editor", "{reported}");
    assert_eq!(reported[1]["error"]["code"], -32601, "{reported}");
    assert_eq!(editor.next().await["result"]["stopReason"], "end_turn");
    drop(editor);
    assert!(task.await.unwrap().is_ok());
}

#[tokio::test]
async fn the_agent_going_away_fails_the_waiting_prompt_and_ends_the_bridge() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task) = start(dir.path());
    initialize_and_open(&mut editor).await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": 9, "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "crash"}]}}))
        .await;
    let answer = editor.next().await;
    assert_eq!(answer["id"], 9, "{answer}");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("went away") && message.contains("giving up"),
        "{message}"
    );
    let outcome = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .unwrap()
        .unwrap();
    let error = outcome.expect_err("the agent leaving first is an error");
    assert!(error.to_string().contains("went away"), "{error}");
}
