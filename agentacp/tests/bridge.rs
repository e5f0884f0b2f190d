//! The bridge runtime against a fake downstream agent, in process: the editor is a duplex
//! pipe, the agent a small Python script. Capability narrowing both ways, ids and `_meta`
//! preserved, undeclared client methods refused, the agent going away, the editor going away;
//! governance of every tool call update (never announced, renamed, run without asking,
//! re-announced, replayed, unreadable) and the runtime contract the bridge shares with the
//! server (end of input, duplicate ids, frames over the limit, requests before `initialize`).

use std::path::Path;
use std::time::Duration;

use agentacp::audit::MemorySink;
use agentacp::bridge::BridgeOptions;
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
def raw(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
def update(session, upd):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": upd}})
def say(session, text):
    update(session, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
def call(session, id, **fields):
    update(session, dict(sessionUpdate="tool_call", toolCallId=id, **fields))
def change(session, id, **fields):
    update(session, dict(sessionUpdate="tool_call_update", toolCallId=id, **fields))
def secret(name):
    return {"secret": name + "-output"}
def answers(id, count):
    got = []
    for line in sys.stdin:
        answer = json.loads(line)
        if answer.get("id") == id and "method" not in answer:
            answer.pop("jsonrpc", None)
            got.append(answer)
            if len(got) == count:
                break
    return got
def ask(id, method, params):
    send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    return answers(id, 1)[0]
OPTIONS = [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
           {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]
def script(s, name):
    if name == "unannounced":
        change(s, "ghost", title="delete-repo", status="completed", rawOutput=secret("ghost"))
    elif name == "renamed":
        call(s, "c1", title="read-file", kind="read", status="in_progress", _meta={"aip44": {"tool": "read-file"}})
        change(s, "c1", title="delete-repo", status="in_progress")
        change(s, "c1", status="completed", rawOutput={"ok": "c1-output"})
        call(s, "c2", title="read-file", kind="read")
        change(s, "c2", _meta={"aip44": {"tool": "delete-repo"}, "trace": 2}, rawOutput={"ok": "c2-output"})
        call(s, "c3", name="read-file", title="Read lib.rs", kind="read")
        change(s, "c3", name="delete-repo", status="completed", rawOutput={"ok": "c3-output"})
        call(s, "c4", title="read-file", kind="read")
        change(s, "c4", kind="delete", status="completed", rawOutput={"ok": "c4-output"})
        call(s, "c5", title="read-file", kind="read")
        change(s, "c5", status="completed", rawOutput={"ok": "c5-output"})
    elif name == "disagree":
        # The readings of one call disagree: the strictest decides.
        call(s, "m1", title="delete-repo", kind="read", status="in_progress", _meta={"aip44": {"tool": "read-file"}})
        change(s, "m1", status="completed", rawOutput=secret("m1"))
        call(s, "m2", name="read-file", title="delete-repo", kind="read", status="in_progress")
        change(s, "m2", status="completed", rawOutput=secret("m2"))
        call(s, "m3", title="read-file", kind="read", status="in_progress")
        change(s, "m3", status="completed", rawOutput={"ok": "m3-output"})
    elif name == "described":
        # A proper name beside a title that only describes the call: decided by the name.
        call(s, "t1", name="read-file", title="Read /w/lib.rs", kind="read", status="in_progress")
        change(s, "t1", status="completed", rawOutput={"ok": "t1-output"})
        call(s, "t2", title="Read lib.rs", kind="read", status="in_progress", _meta={"aip44": {"tool": "read-file"}})
        change(s, "t2", status="completed", rawOutput={"ok": "t2-output"})
        # A title that is a name governance knows still counts: here it asks, unasked.
        call(s, "t3", name="read-file", title="write-file", kind="read", status="in_progress")
        change(s, "t3", status="completed", rawOutput=secret("t3"))
    elif name == "reasked":
        # Permission requests that would rename a decided call: the editor sees it as decided.
        call(s, "p1", name="read-file", title="Read a.txt", kind="read", status="pending")
        answer = ask("perm-p1", "session/request_permission", {"sessionId": s, "toolCall": {"toolCallId": "p1", "title": "Read b.txt"}, "options": OPTIONS})
        change(s, "p1", status="completed", rawOutput={"ok": "p1-output"})
        say(s, "p1: " + json.dumps(answer, sort_keys=True))
        call(s, "p2", title="write-file", kind="edit", status="pending")
        answer = ask("perm-p2", "session/request_permission", {"sessionId": s, "toolCall": {"toolCallId": "p2", "title": "read-file", "kind": "read"}, "options": OPTIONS})
        if answer.get("result", {}).get("outcome", {}).get("optionId") == "allow":
            change(s, "p2", status="completed", rawOutput={"ok": "p2-output"})
        else:
            change(s, "p2", status="failed")
        say(s, "p2: " + json.dumps(answer, sort_keys=True))
    elif name == "unasked":
        call(s, "c6", title="write-file", kind="edit", status="pending")
        change(s, "c6", status="completed", rawOutput=secret("c6"))
        # A write the agent reports as a read: its word on the kind approves nothing.
        call(s, "c7", title="write-file", kind="read", status="pending")
        change(s, "c7", status="completed", rawOutput=secret("c7"))
    elif name == "asked":
        call(s, "c8", title="write-file", kind="edit", status="pending", content=[{"type": "content", "content": {"type": "text", "text": "preview"}}])
        answer = ask("perm-8", "session/request_permission", {"sessionId": s, "toolCall": {"toolCallId": "c8"}, "options": OPTIONS})
        if answer.get("result", {}).get("outcome", {}).get("optionId") == "allow":
            change(s, "c8", status="completed", rawOutput={"ok": "c8-output"})
        else:
            change(s, "c8", status="failed")
        say(s, "permission: " + json.dumps(answer, sort_keys=True))
    elif name == "mismatch":
        call(s, "c9", title="read-file", kind="read", status="pending")
        answer = ask("perm-9", "session/request_permission", {"sessionId": s, "toolCall": {"toolCallId": "c9", "title": "delete-repo"}, "options": OPTIONS})
        say(s, "permission: " + json.dumps(answer, sort_keys=True))
        change(s, "c9", status="completed", rawOutput=secret("c9"))
    elif name == "reannounced":
        call(s, "c10", title="read-file", kind="read")
        call(s, "c10", title="delete-repo", rawOutput={"ok": "c10-output"})
        call(s, "c11", title="delete-repo")
        call(s, "c11", title="read-file", kind="read", status="completed", rawOutput=secret("c11"))
    elif name == "unreadable":
        line = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":%s}}'
        raw(line % (s, '{"sessionUpdate":"agent_message_chunk","sessionUpdate":"tool_call","toolCallId":"d1","title":"delete-repo","rawOutput":{"secret":"d1-output"}}'))
        raw(line % (s, '{"sessionUpdate":"tool\\u005fcall","toolCallId":"d2","title":"delete-repo","rawOutput":{"secret":"d2-output"}}'))
        raw(line % (s, '{"sessionUpdate":"tool_call","title":"delete-repo","rawOutput":{"secret":"d3-output"}}'))
        raw(line % (s, '{"sessionUpdate":"tool_call","toolCallId":"d4","title":"delete-repo","kind":"read","title":"read-file","rawOutput":{"secret":"d4-output"}}'))
        send({"jsonrpc": "2.0", "id": "d5", "method": "session/update", "params": {"sessionId": s,
              "update": {"sessionUpdate": "tool_call", "toolCallId": "d5", "title": "delete-repo", "rawOutput": secret("d5")}}})
        send({"jsonrpc": "2.0", "method": "session/request_permission", "params": {"sessionId": s,
              "toolCall": {"toolCallId": "d6", "title": "delete-repo", "rawInput": secret("d6")}, "options": OPTIONS}})
    elif name == "after-load":
        change(s, "r3", status="completed", rawOutput=secret("r3-live"))
    elif name == "reserved-id":
        # Ids from 2**52 up are the bridge's own: a cancel of one, and a request with one.
        send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 2**52 + 1}})
        answer = ask(2**52, "fs/read_text_file", {"sessionId": s, "path": "/w/a.txt"})
        say(s, "answer: " + json.dumps(answer, sort_keys=True))
    elif name == "key-twice":
        # A read the bridge would see as one path, and an editor that keeps the first key as another.
        raw('{"jsonrpc":"2.0","id":"twice","method":"fs/read_text_file","params":{"sessionId":"%s","path":"/etc/passwd","path":"/w/a.txt"}}' % s)
        say(s, "answer: " + json.dumps(answers("twice", 1)[0], sort_keys=True))
    elif name == "dup-ask":
        for _ in range(2):
            send({"jsonrpc": "2.0", "id": "agent-dup", "method": "fs/read_text_file", "params": {"sessionId": s, "path": "/w/a.txt"}})
        say(s, "asked twice")
        got = answers("agent-dup", 2)
        say(s, json.dumps(sorted(got, key=lambda a: json.dumps(a, sort_keys=True)), sort_keys=True))
    say(s, "done")
sessions = 0
waiting = {}
for line in sys.stdin:
    msg = json.loads(line)
    method, id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1,
              "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True}},
              "agentInfo": {"name": "fake-agent", "version": "1"},
              "_meta": {"received": params.get("clientCapabilities"), "kept": "yes"}}})
    elif method == "authenticate":
        send({"jsonrpc": "2.0", "id": id, "result": {"_meta": {"received": params}}})
    elif method == "session/new":
        sessions += 1
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s%d" % sessions}})
    elif method == "session/load":
        s = params["sessionId"]
        call(s, "r1", title="delete-repo", rawOutput=secret("r1"))
        change(s, "r1", status="completed", rawOutput=secret("r1-later"))
        change(s, "r2", title="read-file", status="completed", rawOutput=secret("r2"))
        call(s, "r3", title="read-file", kind="read", status="completed", rawOutput={"ok": "r3-output"})
        change(s, "r3", title="delete-repo", rawOutput=secret("r3"))
        update(s, {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "replayed"}})
        send({"jsonrpc": "2.0", "id": id, "result": {}})
    elif method == "session/cancel":
        s = params.get("sessionId")
        if s in waiting:
            send({"jsonrpc": "2.0", "id": waiting.pop(s), "result": {"stopReason": "cancelled"}})
    elif method == "session/prompt":
        s = params["sessionId"]
        text = params["prompt"][0]["text"]
        if text == "crash":
            sys.stderr.write("fake agent: giving up\n")
            sys.stderr.flush()
            sys.exit(3)
        if text == "wait":
            waiting[s] = id
            continue
        if text.startswith("script:"):
            script(s, text[len("script:"):])
            send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
            continue
        if text == "ask":
            read = ask("agent-1", "fs/read_text_file", {"sessionId": s, "path": "/w/a.txt"})
            term = ask("agent-2", "terminal/create", {"sessionId": s, "command": "ls"})
            text = json.dumps([read, term], sort_keys=True)
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": s,
              "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
              "_meta": {"trace": 7}}})
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
"#;

/// A governance-aware bridge (tests/operators/test-bridge-governed): `read-file` runs,
/// `write-file` asks the editor, every other tool is denied (`delete-*` also by a policy, so
/// it is a name governance knows); `loadSession` passes.
#[acp_operator(manifest = "tests/operators/test-bridge-governed/ACP.md")]
struct GovernedBridge {
    agent: AgentCommand,
}

impl GovernedBridgeBridge for GovernedBridge {
    fn downstream(&self) -> AgentCommand {
        self.agent.clone()
    }
}

/// Every wait on the bridge is bounded: a broken bridge fails the test, it does not hang it.
const WAIT: Duration = Duration::from_secs(20);

struct Editor {
    /// `None` once the editor closed its side (end of input for the bridge).
    to_bridge: Option<DuplexStream>,
    from_bridge: Lines<BufReader<DuplexStream>>,
}

impl Editor {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        let to_bridge = self.to_bridge.as_mut().expect("the editor's side is open");
        to_bridge.write_all(bytes).await.unwrap();
    }

    /// Closes the editor's writing side only: the bridge reads end of input, the editor still
    /// reads what the bridge writes.
    fn close_input(&mut self) {
        self.to_bridge.take();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.from_bridge.next_line())
            .await
            .expect("the bridge answers in time")
            .unwrap()
            .expect("the bridge is still connected");
        serde_json::from_str(&line).unwrap()
    }

    /// The next line, or `None` when the bridge closed its output.
    async fn next_or_end(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(WAIT, self.from_bridge.next_line())
            .await
            .expect("the bridge writes or closes in time")
            .unwrap()?;
        Some(serde_json::from_str(&line).unwrap())
    }

    /// Messages up to and including the answer to `id`.
    async fn until_answer(&mut self, id: Value) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next().await;
            let done = message["id"] == id && message.get("method").is_none();
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    async fn prompt(&mut self, id: Value, session: &str, text: &str) -> Vec<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id.clone(), "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}))
            .await;
        self.until_answer(id).await
    }
}

/// Starts `bridge` over the fake agent; returns the editor's end and the bridge's task.
fn start_bridge<B: agentacp::bridge::BridgeOperator>(
    bridge: B,
    options: BridgeOptions,
) -> (Editor, tokio::task::JoinHandle<agentacp::Result<()>>) {
    let (editor_side, bridge_in) = tokio::io::duplex(1 << 16);
    let (bridge_out, editor_in) = tokio::io::duplex(1 << 16);
    let task = tokio::spawn(agentacp::bridge::bridge(bridge, options, bridge_in, bridge_out));
    let editor = Editor {
        to_bridge: Some(editor_side),
        from_bridge: BufReader::new(editor_in).lines(),
    };
    (editor, task)
}

fn fake_agent(dir: &Path) -> AgentCommand {
    std::fs::write(dir.join("agent.py"), AGENT).unwrap();
    AgentCommand::new("python3").arg(dir.join("agent.py")).current_dir(dir)
}

/// The basic bridge over the fake agent, auditing nothing.
fn start(dir: &Path) -> (Editor, tokio::task::JoinHandle<agentacp::Result<()>>) {
    start_with(dir, BridgeOptions::default())
}

fn start_with(dir: &Path, options: BridgeOptions) -> (Editor, tokio::task::JoinHandle<agentacp::Result<()>>) {
    let options = BridgeOptions {
        audit: Some(options.audit.unwrap_or_else(agentacp::audit::AuditLog::off)),
        ..options
    };
    start_bridge(TestBridge { agent: fake_agent(dir) }, options)
}

/// The governed bridge over the fake agent, auditing into the returned sink.
fn start_governed(
    dir: &Path,
    options: BridgeOptions,
) -> (Editor, tokio::task::JoinHandle<agentacp::Result<()>>, MemorySink) {
    let sink = MemorySink::new();
    let options = BridgeOptions {
        audit: Some(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone()))),
        ..options
    };
    let (editor, task) = start_bridge(GovernedBridge { agent: fake_agent(dir) }, options);
    (editor, task, sink)
}

/// The audit records so far; the chain verifies.
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

async fn initialize(editor: &mut Editor) -> Value {
    editor
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1,
            "clientInfo": {"name": "test-editor", "version": "1"},
            "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}}}),
        )
        .await;
    editor.next().await
}

async fn new_session(editor: &mut Editor, id: &str) -> String {
    editor
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}))
        .await;
    let answer = editor.next().await;
    answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {answer}"))
        .to_string()
}

async fn initialize_and_open(editor: &mut Editor) -> Value {
    let init = initialize(editor).await;
    assert_eq!(new_session(editor, "new-1").await, "s1");
    init
}

/// What the editor was shown of tool calls: every `tool_call` / `tool_call_update` and
/// permission request, as text, for `contains` checks.
fn shown_tool_calls(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| {
            let kind = m["params"]["update"]["sessionUpdate"].as_str().unwrap_or("");
            kind.starts_with("tool_call") || m["method"] == "session/request_permission"
        })
        .map(Value::to_string)
        .collect()
}

fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str().map(str::to_string))
        .collect()
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

/// The bearer token an editor authenticates to the bridge with is the bridge's: it never
/// reaches the agent (issue 44, item 9), whatever else `authenticate` carries does. Before,
/// `_meta.agentacp.token` was forwarded as it was.
#[tokio::test]
async fn the_editors_bearer_token_never_reaches_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task) = start(dir.path());
    initialize(&mut editor).await;
    let params = json!({"methodId": "bearer",
        "_meta": {"agentacp": {"token": "bridge-secret", "kept": 1}, "other": {"token": "theirs"}}});
    editor
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "authenticate", "params": params}))
        .await;
    let answer = editor.next().await;
    let received = &answer["result"]["_meta"]["received"];
    assert_eq!(
        *received,
        json!({"methodId": "bearer", "_meta": {"agentacp": {"kept": 1}, "other": {"token": "theirs"}}}),
        "{answer}"
    );
    // A key given twice: the agent's parser might keep the `_meta` the bridge's would not.
    let twice = r#"{"jsonrpc":"2.0","id":3,"method":"authenticate","params":{"methodId":"bearer","_meta":{"agentacp":{"token":"bridge-secret"}},"_meta":{}}}"#;
    editor.send_raw(format!("{twice}\n").as_bytes()).await;
    let answer = editor.next().await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert!(!answer.to_string().contains("bridge-secret"), "{answer}");
    drop(editor);
    assert!(task.await.unwrap().is_ok());
}

// ---- governance of tool calls (issue 23, item 6) ------------------------------------------------

/// Runs `script:NAME` in a fresh governed session: the messages the editor saw up to the
/// prompt's answer, and the audit records.
async fn governed_script(name: &str) -> (Vec<Value>, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task, sink) = start_governed(dir.path(), BridgeOptions::default());
    initialize_and_open(&mut editor).await;
    let seen = editor.prompt(json!(10), "s1", &format!("script:{name}")).await;
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn", "{seen:#?}");
    assert!(texts(&seen).contains(&"done".to_string()), "{seen:#?}");
    editor.close_input();
    assert!(editor.next_or_end().await.is_none(), "nothing more after the answers");
    assert!(tokio::time::timeout(WAIT, task).await.unwrap().unwrap().is_ok());
    (seen, audited(&sink))
}

fn assert_no_secret(seen: &[Value]) {
    for message in seen {
        let text = message.to_string();
        assert!(
            !text.contains("secret") && !text.contains("delete-repo"),
            "the editor was shown what governance denies: {text}"
        );
    }
}

fn assert_violation(records: &[Value], id: &str) {
    let record = tool_record(records, id);
    let approval = &record["metadata"]["aip44"]["approval"];
    assert_eq!(approval["deniedBy"], "governance", "{record}");
    assert!(
        approval["reason"].as_str().unwrap().contains("policy violation"),
        "{record}"
    );
}

/// The editor saw `id` announced and then, instead of what governance hid, only `failed`.
fn assert_closed_as_failed(seen: &[Value], id: &str) {
    let updates: Vec<&Value> = seen
        .iter()
        .filter(|m| m["params"]["update"]["toolCallId"] == id)
        .map(|m| &m["params"]["update"])
        .collect();
    let last = updates
        .last()
        .unwrap_or_else(|| panic!("{id} was never shown: {seen:#?}"));
    assert_eq!(last["status"], "failed", "{updates:#?}");
    assert!(
        last.get("rawOutput").is_none() && last.get("content").is_none(),
        "{last}"
    );
}

#[tokio::test]
async fn an_update_for_a_tool_call_never_announced_never_reaches_the_editor() {
    let (seen, records) = governed_script("unannounced").await;
    assert_no_secret(&seen);
    assert!(shown_tool_calls(&seen).is_empty(), "{seen:#?}");
    assert_violation(&records, "ghost");
}

/// The `rewritten` passage record of call `id`: what the agent tried to change of it.
fn rewritten(records: &[Value], id: &str) -> String {
    records
        .iter()
        .find(|r| r["metadata"]["aip44"]["toolCallId"] == id && r["metadata"]["aip44"]["rewritten"].is_string())
        .map(|r| r["metadata"]["aip44"]["rewritten"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no rewritten record for {id}: {records:#?}"))
}

/// Once decided, a call stays what it was decided as (issue 44, item 7): an update that
/// renames it — by title, `_meta.aip44.tool` or `name` — or changes its kind passes without
/// that change, which is audited; the editor never sees the call as anything else, and its
/// record says what the editor was shown. Before, a retitled call with a `_meta.aip44.tool`
/// was shown as `delete-repo`.
#[tokio::test]
async fn an_update_cannot_change_what_a_decided_call_is() {
    let (seen, records) = governed_script("renamed").await;
    assert_no_secret(&seen);
    for (id, change, title) in [
        ("c1", "title \"read-file\" → \"delete-repo\"", "read-file"),
        ("c2", "_meta.aip44.tool (none) → \"delete-repo\"", "read-file"),
        ("c3", "name \"read-file\" → \"delete-repo\"", "Read lib.rs"),
        ("c4", "kind \"read\" → \"delete\"", "read-file"),
    ] {
        let output = format!("{id}-output");
        assert!(
            shown_tool_calls(&seen).iter().any(|m| m.contains(&output)),
            "{id} ran as what it was decided as: {seen:#?}"
        );
        let reason = rewritten(&records, id);
        assert!(
            reason.contains(change) && reason.contains("policy violation"),
            "{reason}"
        );
        let record = tool_record(&records, id);
        assert_eq!(record["metadata"]["aip44"]["approval"], "auto", "{record}");
        assert_eq!(
            record["metadata"]["agentacp"]["shown"],
            json!({"title": title, "kind": "read"}),
            "{record}"
        );
    }
    // The rest of an update passes: `_meta` other than the tool's name, the status.
    let c2 = seen
        .iter()
        .find(|m| m["params"]["update"]["toolCallId"] == "c2" && m["params"]["update"]["rawOutput"].is_object())
        .unwrap_or_else(|| panic!("{seen:#?}"));
    assert_eq!(
        c2["params"]["update"]["_meta"],
        json!({"aip44": {}, "trace": 2}),
        "{c2}"
    );
    // The allowed call that stayed what it was passes whole, and nothing is rewritten.
    let c5 = shown_tool_calls(&seen)
        .into_iter()
        .filter(|m| m.contains("c5-output"))
        .count();
    assert_eq!(c5, 1, "{seen:#?}");
    assert_eq!(tool_record(&records, "c5")["metadata"]["aip44"]["approval"], "auto");
    assert!(
        !records
            .iter()
            .any(|r| r["metadata"]["aip44"]["toolCallId"] == "c5" && r["metadata"]["aip44"]["rewritten"].is_string()),
        "{records:#?}"
    );
}

/// A call whose readings disagree is governed on the strictest (issue 44, item 7): titled
/// `delete-repo` but named `read-file` (by `_meta.aip44.tool` or `name`), it is denied — never
/// shown, audited as denied. Before, it ran as `read-file`, shown as `delete-repo`.
#[tokio::test]
async fn a_call_is_governed_on_the_strictest_of_its_names() {
    let (seen, records) = governed_script("disagree").await;
    assert_no_secret(&seen);
    for id in ["m1", "m2"] {
        assert!(
            !seen.iter().any(|m| m["params"]["update"]["toolCallId"] == id),
            "{seen:#?}"
        );
        let record = tool_record(&records, id);
        let approval = &record["metadata"]["aip44"]["approval"];
        assert_eq!(approval["deniedBy"], "governance", "{record}");
        assert!(approval["reason"].as_str().unwrap().contains("delete-repo"), "{record}");
    }
    assert!(
        shown_tool_calls(&seen).iter().any(|m| m.contains("m3-output")),
        "{seen:#?}"
    );
    assert_eq!(tool_record(&records, "m3")["metadata"]["aip44"]["approval"], "auto");
}

/// A call with a proper name (`name`, `_meta.aip44.tool`) and a title that only describes it
/// — as real agents title their calls (`Read /path/…`) — is decided by its name: the title
/// is not a name governance knows, so it neither loosens nor denies anything. A title that
/// is such a name (`write-file`) still takes part. Before, the descriptive title was decided
/// as a tool of its own, unlisted, and the call was denied.
#[tokio::test]
async fn a_descriptive_title_beside_a_proper_name_is_decided_by_the_name() {
    let (seen, records) = governed_script("described").await;
    assert_no_secret(&seen);
    for (id, title) in [("t1", "Read /w/lib.rs"), ("t2", "Read lib.rs")] {
        assert!(
            shown_tool_calls(&seen)
                .iter()
                .any(|m| m.contains(&format!("{id}-output"))),
            "{id} ran, shown: {seen:#?}"
        );
        let record = tool_record(&records, id);
        assert_eq!(record["metadata"]["aip44"]["tool"], "read-file", "{record}");
        assert_eq!(record["metadata"]["aip44"]["approval"], "auto", "{record}");
        assert_eq!(record["metadata"]["agentacp"]["shown"]["title"], title, "{record}");
    }
    assert!(
        !seen.iter().any(|m| m["params"]["update"]["toolCallId"] == "t3"),
        "{seen:#?}"
    );
    assert_violation(&records, "t3");
}

/// A permission request cannot rename a decided call either (issue 44, item 7): the editor
/// is asked about the call as it was decided (title, kind), the attempt is audited like an
/// update's, and the call's record says what the editor was shown. Before, the request passed
/// as sent, and the call took the request's title and kind from then on.
#[tokio::test]
async fn a_permission_request_shows_the_editor_the_call_as_it_was_decided() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task, sink) = start_governed(dir.path(), BridgeOptions::default());
    initialize_and_open(&mut editor).await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": 11, "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "script:reasked"}]}}))
        .await;
    let mut seen = Vec::new();
    let permission = loop {
        let message = editor.next().await;
        if message["method"] == "session/request_permission" {
            break message;
        }
        seen.push(message);
    };
    // p1 (a read, allowed) was answered by the bridge; p2 is asked as what it was announced.
    let tool_call = &permission["params"]["toolCall"];
    assert_eq!(
        *tool_call,
        json!({"toolCallId": "p2", "title": "write-file", "kind": "edit"}),
        "{permission}"
    );
    editor
        .send(json!({"jsonrpc": "2.0", "id": permission["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}))
        .await;
    seen.extend(editor.until_answer(json!(11)).await);
    for id in ["p1", "p2"] {
        assert!(
            shown_tool_calls(&seen)
                .iter()
                .any(|m| m.contains(&format!("{id}-output"))),
            "{id} ran, shown: {seen:#?}"
        );
    }
    editor.close_input();
    assert!(editor.next_or_end().await.is_none());
    assert!(tokio::time::timeout(WAIT, task).await.unwrap().unwrap().is_ok());
    let records = audited(&sink);
    for (id, change, shown) in [
        (
            "p1",
            r#"title "Read a.txt" → "Read b.txt""#,
            json!({"title": "Read a.txt", "kind": "read"}),
        ),
        (
            "p2",
            r#"title "write-file" → "read-file""#,
            json!({"title": "write-file", "kind": "edit"}),
        ),
    ] {
        let reason = rewritten(&records, id);
        assert!(
            reason.contains(change) && reason.contains("policy violation"),
            "{reason}"
        );
        let record = tool_record(&records, id);
        assert_eq!(record["metadata"]["agentacp"]["shown"], shown, "{record}");
    }
    assert_eq!(
        tool_record(&records, "p2")["metadata"]["aip44"]["approval"]["approvedBy"],
        "client:test-editor"
    );
}

#[tokio::test]
async fn a_call_that_needs_approval_shows_no_result_unless_the_editor_approved_it() {
    let (seen, records) = governed_script("unasked").await;
    assert_no_secret(&seen);
    // c6 asks for approval it never requested; c7 is a write reported as a read (issue 44,
    // item 7: before, it ran unasked and was audited `auto`).
    for id in ["c6", "c7"] {
        assert_closed_as_failed(&seen, id);
        assert_violation(&records, id);
    }

    // The same kind of call, asked for and approved by the editor, passes with its result.
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task, sink) = start_governed(dir.path(), BridgeOptions::default());
    initialize_and_open(&mut editor).await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": 11, "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "script:asked"}]}}))
        .await;
    let mut seen = Vec::new();
    let permission = loop {
        let message = editor.next().await;
        if message["method"] == "session/request_permission" {
            break message;
        }
        seen.push(message);
    };
    // The pending call and its preview were shown while the editor decides.
    assert_eq!(shown_tool_calls(&seen).len(), 1, "{seen:#?}");
    editor
        .send(json!({"jsonrpc": "2.0", "id": permission["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}))
        .await;
    let seen = editor.until_answer(json!(11)).await;
    assert!(
        shown_tool_calls(&seen).iter().any(|m| m.contains("c8-output")),
        "{seen:#?}"
    );
    editor.close_input();
    assert!(editor.next_or_end().await.is_none());
    assert!(tokio::time::timeout(WAIT, task).await.unwrap().unwrap().is_ok());
    let records = audited(&sink);
    assert_eq!(
        tool_record(&records, "c8")["metadata"]["aip44"]["approval"]["approvedBy"],
        "client:test-editor"
    );
}

#[tokio::test]
async fn a_permission_request_is_decided_on_the_call_as_the_editor_would_show_it() {
    // c9 was announced as `read-file`; the permission request renames it `delete-repo`.
    let (seen, records) = governed_script("mismatch").await;
    assert_no_secret(&seen);
    let said = texts(&seen);
    let answer = said
        .iter()
        .find(|t| t.starts_with("permission: "))
        .expect("the agent got an answer");
    assert!(
        answer.contains("\"optionId\": \"reject\""),
        "the bridge refused it: {answer}"
    );
    assert_closed_as_failed(&seen, "c9");
    let record = tool_record(&records, "c9");
    assert_eq!(
        record["metadata"]["aip44"]["approval"]["deniedBy"], "governance",
        "{record}"
    );
}

#[tokio::test]
async fn a_reannounced_tool_call_is_decided_again_and_a_hidden_one_stays_hidden() {
    let (seen, records) = governed_script("reannounced").await;
    assert_no_secret(&seen);
    // Announced again under another name, c10 is shown as it was decided, and the rename
    // audited.
    let again: Vec<&Value> = seen
        .iter()
        .filter(|m| m["params"]["update"]["toolCallId"] == "c10")
        .map(|m| &m["params"]["update"])
        .collect();
    assert_eq!(again.len(), 2, "{seen:#?}");
    assert_eq!(again[1]["title"], "read-file", "{again:#?}");
    assert_eq!(again[1]["kind"], "read", "{again:#?}");
    assert_eq!(again[1]["rawOutput"]["ok"], "c10-output", "{again:#?}");
    assert!(rewritten(&records, "c10").contains("delete-repo"));
    assert!(
        !seen.iter().any(|m| m["params"]["update"]["toolCallId"] == "c11"),
        "{seen:#?}"
    );
    assert_eq!(
        tool_record(&records, "c11")["metadata"]["aip44"]["approval"]["deniedBy"],
        "governance"
    );
}

#[tokio::test]
async fn updates_the_bridge_cannot_read_unambiguously_never_reach_the_editor() {
    // Duplicate `sessionUpdate` keys, an escaped `tool\u005fcall`, a call without an id,
    // duplicate `title`s, `session/update` sent as a request, `session/request_permission`
    // sent as a notification.
    let (seen, records) = governed_script("unreadable").await;
    assert_no_secret(&seen);
    assert!(shown_tool_calls(&seen).is_empty(), "{seen:#?}");
    let dropped = records
        .iter()
        .filter(|r| r["metadata"]["aip44"]["dropped"].is_string())
        .count();
    assert!(dropped >= 5, "each drop is audited: {records:#?}");
}

#[tokio::test]
async fn replayed_history_never_shows_a_denied_tool() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task, sink) = start_governed(dir.path(), BridgeOptions::default());
    initialize_and_open(&mut editor).await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": 20, "method": "session/load",
            "params": {"sessionId": "s1", "cwd": "/w", "mcpServers": []}}))
        .await;
    let seen = editor.until_answer(json!(20)).await;
    assert_no_secret(&seen);
    // The allowed call of the history is replayed as it was; the rest is history too.
    let shown = shown_tool_calls(&seen);
    assert_eq!(shown.len(), 1, "{seen:#?}");
    assert!(shown[0].contains("r3-output"), "{shown:?}");
    assert!(texts(&seen).contains(&"replayed".to_string()), "{seen:#?}");
    // A live update for a call of the history is an update for a call never announced.
    let live = editor.prompt(json!(21), "s1", "script:after-load").await;
    assert_no_secret(&live);
    assert!(shown_tool_calls(&live).is_empty(), "{live:#?}");
    editor.close_input();
    assert!(editor.next_or_end().await.is_none());
    assert!(tokio::time::timeout(WAIT, task).await.unwrap().unwrap().is_ok());
    let records = audited(&sink);
    // Replayed calls are not live ones: no tool.call record for them, but each drop is audited.
    assert!(
        !records.iter().any(|r| r["action"] == "tool.call"
            && r["subject"]["ref"].as_str().unwrap().starts_with("r")
            && r["subject"]["ref"] != "r3"),
        "{records:#?}"
    );
    let dropped: Vec<&Value> = records
        .iter()
        .filter(|r| r["metadata"]["aip44"]["dropped"].is_string())
        .collect();
    assert_eq!(dropped.len(), 4, "{dropped:#?}");
    assert_violation(&records, "r3");
}

// ---- the runtime contract, as the server keeps it (issue 23, item 18) ---------------------------

#[tokio::test]
async fn end_of_input_still_answers_every_request_already_received() {
    let dir = tempfile::tempdir().unwrap();
    let options = BridgeOptions {
        request_timeout: Duration::from_secs(3),
        ..BridgeOptions::default()
    };
    let (mut editor, task, sink) = start_governed(dir.path(), options);
    // Everything at once, then end of input: what `printf … | governance-bridge` does.
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "wait"}]}}),
        // The agent never answers this one: the bridge does, at the request timeout.
        json!({"jsonrpc": "2.0", "id": 4, "method": "_test/ignored", "params": {}}),
    ];
    for request in requests {
        editor.send(request).await;
    }
    editor.close_input();
    let mut answers = std::collections::BTreeMap::new();
    while let Some(message) = editor.next_or_end().await {
        if message.get("method").is_none() {
            answers.insert(message["id"].as_i64().unwrap(), message);
        }
    }
    assert_eq!(
        answers.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4],
        "{answers:#?}"
    );
    assert_eq!(answers[&1]["result"]["agentInfo"]["name"], "test-bridge-governed");
    assert_eq!(answers[&2]["result"]["sessionId"], "s1");
    // A running prompt is interrupted, as a server interrupts its running turns.
    assert_eq!(answers[&3]["result"]["stopReason"], "cancelled", "{answers:#?}");
    assert_eq!(answers[&4]["error"]["code"], -32603, "{answers:#?}");
    let outcome = tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    assert!(
        outcome.is_ok(),
        "the editor leaving first ends the bridge cleanly: {outcome:?}"
    );
    let records = audited(&sink);
    assert!(
        records
            .iter()
            .any(|r| r["action"] == "operator.interrupted" && r["subject"]["ref"] == "s1"),
        "{records:#?}"
    );
}

#[tokio::test]
async fn end_of_input_rejects_a_permission_the_editor_can_no_longer_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task, sink) = start_governed(dir.path(), BridgeOptions::default());
    initialize_and_open(&mut editor).await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "script:asked"}]}}))
        .await;
    loop {
        if editor.next().await["method"] == "session/request_permission" {
            break;
        }
    }
    editor.close_input();
    let seen = editor.until_answer(json!(5)).await;
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn", "{seen:#?}");
    let said = texts(&seen);
    assert!(
        said.iter()
            .any(|t| t.starts_with("permission: ") && t.contains("\"optionId\": \"reject\"")),
        "{said:?}"
    );
    assert!(editor.next_or_end().await.is_none());
    assert!(tokio::time::timeout(WAIT, task).await.unwrap().unwrap().is_ok());
    let records = audited(&sink);
    let approval = &tool_record(&records, "c8")["metadata"]["aip44"]["approval"];
    assert_eq!(approval["rejectedBy"], "agentacp", "{approval}");
    assert_eq!(approval["reason"], "connection closed", "{approval}");
}

#[tokio::test]
async fn a_duplicate_id_in_flight_is_refused_and_the_first_request_keeps_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task, sink) = start_governed(dir.path(), BridgeOptions::default());
    initialize_and_open(&mut editor).await;
    assert_eq!(new_session(&mut editor, "new-2").await, "s2");
    editor
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "wait"}]}}))
        .await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
            "params": {"sessionId": "s2", "prompt": [{"type": "text", "text": "hi"}]}}))
        .await;
    let refused = editor.next().await;
    assert_eq!(refused["id"], 7, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate id in flight"),
        "{refused}"
    );
    // The first keeps its answer.
    editor
        .send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}))
        .await;
    let first = editor.next().await;
    assert_eq!(
        (first["id"].clone(), first["result"]["stopReason"].clone()),
        (json!(7), json!("cancelled"))
    );
    // Answered, the id is free again.
    let again = editor.prompt(json!(7), "s2", "hi").await;
    assert_eq!(again.last().unwrap()["result"]["stopReason"], "end_turn");
    editor.close_input();
    assert!(editor.next_or_end().await.is_none());
    assert!(tokio::time::timeout(WAIT, task).await.unwrap().unwrap().is_ok());
    // The audit tells the two prompts apart: the refused one never crossed.
    let records = audited(&sink);
    let states: Vec<(String, String)> = records
        .iter()
        .filter(|r| r["metadata"]["aip44"]["audit-event-kind"] == "lifecycle")
        .filter(|r| r["action"] != "operator.invoked")
        .map(|r| {
            (
                r["action"].as_str().unwrap().to_string(),
                r["subject"]["ref"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("operator.running", "s1"),
        ("operator.interrupted", "s1"),
        ("operator.running", "s2"),
        ("operator.completed", "s2"),
    ]
    .map(|(a, s)| (a.to_string(), s.to_string()));
    assert_eq!(states, expected, "{records:#?}");
    let prompts = records.iter().filter(|r| r["action"] == "acp.session.prompt").count();
    assert_eq!(prompts, 2, "{records:#?}");
}

/// A bridge, a client and a server take their shared limits and timeouts from one place
/// (`connection::Limits`): the bridge's `exit_grace` was 1 s beside the client's 2 s, and the
/// frame limit was typed out in each.
#[test]
fn the_limits_a_bridge_shares_with_a_client_and_a_server_have_one_default() {
    let limits = agentacp::connection::Limits::DEFAULT;
    let bridge = BridgeOptions::default();
    let client = agentacp::client::ClientOptions::default();
    let server = agentacp::server::ServerOptions::default();
    let frames = [bridge.max_frame_bytes, client.max_frame_bytes, server.max_frame_bytes];
    assert_eq!(frames, [limits.max_frame_bytes; 3]);
    let writes = [bridge.write_timeout, client.write_timeout, server.write_timeout];
    assert_eq!(writes, [limits.write_timeout; 3]);
    let permissions = [
        bridge.permission_timeout,
        client.permission_timeout,
        server.permission_timeout,
    ];
    assert_eq!(permissions, [limits.permission_timeout; 3]);
    assert_eq!(
        (bridge.request_timeout, client.request_timeout),
        (limits.request_timeout, limits.request_timeout)
    );
    assert_eq!(
        (bridge.exit_grace, bridge.kill_grace),
        (client.exit_grace, client.kill_grace)
    );
    assert_eq!(
        (bridge.exit_grace, bridge.kill_grace),
        (limits.exit_grace, limits.kill_grace)
    );
    assert_eq!(bridge.shutdown_grace, server.shutdown_grace);
}

#[tokio::test]
async fn a_frame_over_the_limit_is_answered_with_its_id_or_null_and_the_next_one_served() {
    let dir = tempfile::tempdir().unwrap();
    let options = BridgeOptions {
        max_frame_bytes: 1024,
        ..BridgeOptions::default()
    };
    let (mut editor, task) = start_with(dir.path(), options);
    let pad = "a".repeat(4096);
    // No id in the first bytes: the answer goes to id null, as a server's does.
    editor
        .send(json!({"jsonrpc": "2.0", "method": "_x/big", "params": {"pad": pad}}))
        .await;
    let refused = editor.next().await;
    assert_eq!(refused["id"], Value::Null, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    editor
        .send(json!({"jsonrpc": "2.0", "id": 9, "method": "_x/big", "params": {"pad": pad}}))
        .await;
    let refused = editor.next().await;
    assert_eq!(
        (refused["id"].clone(), refused["error"]["code"].clone()),
        (json!(9), json!(-32600))
    );
    let init = initialize(&mut editor).await;
    assert_eq!(init["id"], 1, "the connection goes on: {init}");
    editor.close_input();
    assert!(editor.next_or_end().await.is_none());
    assert!(task.await.unwrap().is_ok());
}

#[tokio::test]
async fn requests_before_initialize_a_second_initialize_and_undeclared_load_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task) = start(dir.path());
    editor
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}))
        .await;
    let early = editor.next().await;
    assert_eq!(
        (early["id"].clone(), early["error"]["code"].clone()),
        (json!(1), json!(-32600)),
        "{early}"
    );
    editor
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "one"}}))
        .await;
    let bad = editor.next().await;
    assert_eq!(
        (bad["id"].clone(), bad["error"]["code"].clone()),
        (json!(2), json!(-32602)),
        "{bad}"
    );
    // A notification before initialize is not answered (the next line answers the next request).
    editor
        .send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}))
        .await;
    initialize_and_open(&mut editor).await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}}))
        .await;
    let again = editor.next().await;
    assert_eq!(
        (again["id"].clone(), again["error"]["code"].clone()),
        (json!(3), json!(-32600)),
        "{again}"
    );
    // This bridge's manifest does not offer loadSession: the bridge answers as a server would.
    editor
        .send(json!({"jsonrpc": "2.0", "id": 4, "method": "session/load",
            "params": {"sessionId": "s1", "cwd": "/w", "mcpServers": []}}))
        .await;
    let load = editor.next().await;
    assert_eq!(
        (load["id"].clone(), load["error"]["code"].clone()),
        (json!(4), json!(-32601)),
        "{load}"
    );
    editor.close_input();
    assert!(editor.next_or_end().await.is_none());
    assert!(task.await.unwrap().is_ok());
}

#[tokio::test]
async fn a_duplicate_id_from_the_agent_is_refused_and_the_first_request_reaches_the_editor() {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task) = start(dir.path());
    initialize_and_open(&mut editor).await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": 8, "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "script:dup-ask"}]}}))
        .await;
    // The bridge reads the agent's messages in order: once the editor sees the chunk sent
    // after both requests, the bridge has dealt with both.
    let mut before = Vec::new();
    loop {
        let message = editor.next().await;
        let done = texts(std::slice::from_ref(&message)) == ["asked twice"];
        before.push(message);
        if done {
            break;
        }
    }
    let reads: Vec<&Value> = before.iter().filter(|m| m["method"] == "fs/read_text_file").collect();
    assert_eq!(reads.len(), 1, "{before:#?}");
    assert_eq!(reads[0]["id"], "agent-dup");
    editor
        .send(json!({"jsonrpc": "2.0", "id": "agent-dup", "result": {"content": "from the editor"}}))
        .await;
    let seen = editor.until_answer(json!(8)).await;
    assert!(
        !seen.iter().any(|m| m["method"] == "fs/read_text_file"),
        "the duplicate never reached the editor: {seen:#?}"
    );
    let said = texts(&seen);
    let got: Vec<Value> = serde_json::from_str(&said[0]).unwrap();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().any(|a| a["error"]["code"] == -32600), "{got:?}");
    assert!(
        got.iter().any(|a| a["result"]["content"] == "from the editor"),
        "{got:?}"
    );
    editor.close_input();
    assert!(editor.next_or_end().await.is_none());
    assert!(task.await.unwrap().is_ok());
}

/// The bridge numbers its own requests to the editor from 2^52. An agent that used such an
/// id could take the editor's answer to the bridge's permission question as its own, and the
/// answer to its own request could be taken as the bridge's (an approval); a cancel naming
/// one would cancel the bridge's question. The request is refused and the cancel dropped:
/// neither reaches the editor. Before, both were passed on.
#[tokio::test]
async fn an_agent_cannot_use_the_request_ids_of_the_bridges_own_requests() {
    let seen = scripted_turn("reserved-id").await;
    assert!(
        !seen
            .iter()
            .any(|m| m["method"] == "fs/read_text_file" || m["method"] == "$/cancel_request"),
        "the request or the cancel reached the editor: {seen:#?}"
    );
    let said = texts(&seen);
    assert!(
        said.iter()
            .any(|t| t.starts_with("answer: ") && t.contains("-32600") && t.contains("the bridge's own")),
        "{said:?}"
    );
}

/// A request whose params give a key twice reads differently to different parsers (the
/// bridge keeps the last `path`, an editor may keep the first): the bridge refuses it rather
/// than pass on what it did not decide on. Before, it was passed on as it was.
#[tokio::test]
async fn an_agents_request_that_gives_a_key_twice_is_refused_not_passed_on() {
    let seen = scripted_turn("key-twice").await;
    assert!(
        !seen.iter().any(|m| m["method"] == "fs/read_text_file"),
        "the request reached the editor: {seen:#?}"
    );
    let said = texts(&seen);
    assert!(
        said.iter()
            .any(|t| t.starts_with("answer: ") && t.contains("-32600") && t.contains("a key twice")),
        "{said:?}"
    );
}

/// The fake agent's `script` run in a session of the basic bridge, which then ends cleanly:
/// what the editor saw of the turn.
async fn scripted_turn(script: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let (mut editor, task) = start(dir.path());
    initialize_and_open(&mut editor).await;
    let seen = editor.prompt(json!(8), "s1", &format!("script:{script}")).await;
    editor.close_input();
    assert!(editor.next_or_end().await.is_none());
    assert!(task.await.unwrap().is_ok());
    seen
}

/// Issue #23.17, for the bridge: an editor that stops reading (but keeps its side open) got a
/// bridge that read on and answered nothing. Past the write timeout the bridge now closes the
/// connection, stops its agent, and says why.
#[tokio::test]
async fn an_editor_that_stops_reading_gets_its_connection_closed() {
    let dir = tempfile::tempdir().unwrap();
    let options = BridgeOptions {
        write_timeout: Duration::from_millis(200),
        ..BridgeOptions::default()
    };
    let (mut editor, task) = start_with(dir.path(), options);
    initialize_and_open(&mut editor).await;
    // Thousands of requests the bridge answers itself (a second `initialize`), their answers
    // far more than the pipe holds, and the editor reads none of them. Written from a task of
    // its own: once the bridge stops reading, these writes would block.
    let mut to_bridge = editor.to_bridge.take().unwrap();
    let writer = tokio::spawn(async move {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}});
        let line = format!("{request}\n");
        for _ in 0..20_000 {
            if to_bridge.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
        to_bridge
    });
    let outcome = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("the bridge stopped instead of reading on")
        .unwrap();
    let error = outcome.expect_err("an editor given up on is an error");
    assert!(error.to_string().contains("stopped reading"), "{error}");
    writer.abort();
}

/// A downstream agent with everything a real one advertises (issue #15): `_meta` booleans at
/// the top and inside capability objects, object capabilities a manifest cannot declare, and
/// an unstable one. It answers every request, reporting the methods it received so far and
/// whether the variable named by its first argument is in its environment.
const CAPABLE_AGENT: &str = r#"
import json, os, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
key = sys.argv[1]
seen = []
for line in sys.stdin:
    msg = json.loads(line)
    method, id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None:
        continue
    seen.append(method)
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1,
              "agentCapabilities": {
                  "loadSession": True,
                  "promptCapabilities": {"image": True, "_meta": {"vendor": {"nested": True}}},
                  "mcpCapabilities": {"http": True, "acp": True},
                  "sessionCapabilities": {"list": {}, "close": {}, "resume": {}, "fork": {},
                                          "_meta": {"vendor": {"inSession": True}}},
                  "auth": {"logout": {}},
                  "_meta": {"vendor": {"promptQueueing": True}, "claudeCode": {"promptQueueing": True}}},
              "agentInfo": {"name": "capable-agent", "version": "1"},
              "_meta": {"received": params.get("clientCapabilities"), "env": {key: os.environ.get(key)}}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        s = params["sessionId"]
        send({"jsonrpc": "2.0", "id": "elicit-1", "method": "elicitation/create",
              "params": {"sessionId": s, "mode": "form", "message": "token?", "requestedSchema": {"type": "object"}}})
        answer = None
        for reply in sys.stdin:
            answer = json.loads(reply)
            if answer.get("id") == "elicit-1" and "method" not in answer:
                break
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": s,
              "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": json.dumps(answer)}}}})
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
    elif id is not None:
        send({"jsonrpc": "2.0", "id": id, "result": {"seen": seen}})
"#;

fn capable_agent(dir: &Path, key: &str) -> AgentCommand {
    std::fs::write(dir.join("capable.py"), CAPABLE_AGENT).unwrap();
    AgentCommand::new("python3")
        .arg(dir.join("capable.py"))
        .arg(key)
        .current_dir(dir)
}

/// Issue #15.2 and #15.3: the basic bridge (only `fs.readTextFile` declared) in front of an
/// agent advertising object capabilities and `_meta`.
#[tokio::test]
async fn object_capabilities_are_narrowed_away_and_their_methods_refused_while_meta_passes() {
    let dir = tempfile::tempdir().unwrap();
    let sink = MemorySink::new();
    let options = BridgeOptions {
        audit: Some(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone()))),
        ..BridgeOptions::default()
    };
    let agent = capable_agent(dir.path(), "SOME_KEY");
    let (mut editor, task) = start_bridge(TestBridge { agent }, options);
    editor
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true,
                "auth": {"terminal": true}, "elicitation": {"form": {}},
                "_meta": {"terminal-auth": true, "vendor": {"keep": true}}}}}),
        )
        .await;
    let init = editor.next().await;
    let result = &init["result"];
    // Up: what the manifest cannot declare is gone, the unstable and unknown too; every
    // `_meta` (booleans included) is as the agent sent it.
    assert_eq!(
        result["agentCapabilities"],
        json!({
            "loadSession": false,
            "promptCapabilities": {"image": false, "_meta": {"vendor": {"nested": true}}},
            "mcpCapabilities": {"http": false},
            "sessionCapabilities": {"_meta": {"vendor": {"inSession": true}}},
            "auth": {},
            "_meta": {"vendor": {"promptQueueing": true}, "claudeCode": {"promptQueueing": true}},
        }),
        "{init}"
    );
    // Down: the terminal is switched off, so is the `_meta` key that depends on it; terminal
    // auth and elicitation cannot be declared; other `_meta` passes.
    assert_eq!(
        result["_meta"]["received"],
        json!({"fs": {"readTextFile": true, "writeTextFile": false}, "terminal": false,
            "auth": {"terminal": false}, "_meta": {"vendor": {"keep": true}}}),
        "{init}"
    );
    assert_eq!(new_session(&mut editor, "new-1").await, "s1");

    // The methods of what was narrowed away, and an unknown one, are refused by the bridge.
    let refused = [
        "session/list",
        "session/close",
        "session/resume",
        "logout",
        "session/fork",
    ];
    for (id, method) in refused.iter().enumerate() {
        editor
            .send(
                json!({"jsonrpc": "2.0", "id": id + 10, "method": method, "params": {"sessionId": "s1", "cwd": "/w"}}),
            )
            .await;
        let answer = editor.next().await;
        assert_eq!(
            (answer["id"].clone(), answer["error"]["code"].clone()),
            (json!(id + 10), json!(-32601)),
            "{method}: {answer}"
        );
    }
    // The agent's elicitation request is refused too: the editor never sees it.
    let turn = editor.prompt(json!(20), "s1", "elicit").await;
    assert!(!turn.iter().any(|m| m["method"] == "elicitation/create"), "{turn:?}");
    let reported: Value = serde_json::from_str(&texts(&turn)[0]).unwrap();
    assert_eq!(reported["error"]["code"], -32601, "{reported}");
    // Extension methods pass; the agent never received a refused method.
    editor
        .send(json!({"jsonrpc": "2.0", "id": 30, "method": "_vendor/seen", "params": {}}))
        .await;
    let seen = editor.next().await;
    assert_eq!(
        seen["result"]["seen"],
        json!(["initialize", "session/new", "session/prompt", "_vendor/seen"]),
        "{seen}"
    );
    // Every refusal is audited.
    let records = audited(&sink);
    for method in refused.iter().chain(&["elicitation/create"]) {
        assert!(
            records
                .iter()
                .any(|r| r["metadata"]["aip44"]["method"] == *method && r["metadata"]["aip44"]["refused"].is_string()),
            "{method} refused without an audit record: {records:#?}"
        );
    }
    drop(editor);
    assert!(task.await.unwrap().is_ok());
}

/// Issue #15.5: the agent starts with a cleared environment; a variable named in
/// `BridgeOptions::pass_env` (`AGENTACP_BRIDGE_PASS_ENV`) reaches it.
#[tokio::test]
async fn a_variable_reaches_the_agent_only_when_the_options_pass_it() {
    // A variable set in this process that the agent does not get by default (cargo sets
    // several at run time).
    let (key, value) = std::env::vars()
        .find(|(key, _)| !agentacp::client::DEFAULT_ENV_ALLOW.contains(&key.as_str()))
        .expect("a variable outside the default allow-list");
    for (options, expected) in [
        (BridgeOptions::default(), Value::Null),
        (BridgeOptions::default().pass_env(key.clone()), json!(value)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = BridgeOptions {
            audit: Some(agentacp::audit::AuditLog::off()),
            ..options
        };
        let agent = capable_agent(dir.path(), &key);
        let (mut editor, task) = start_bridge(TestBridge { agent }, options);
        let init = initialize(&mut editor).await;
        assert_eq!(init["result"]["_meta"]["env"][&key], expected, "{key}: {init}");
        drop(editor);
        assert!(task.await.unwrap().is_ok());
    }
}
