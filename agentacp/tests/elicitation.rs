//! Elicitation (`elicitation/create`, `elicitation/complete`): a server's turn asking the user
//! (`Turn::elicit`), answered by a raw client in process (every answer, a timeout, a hostile
//! answer, a client that offers no elicitation) and by our own `Client` over WebSocket through
//! its `ElicitationHandler` (default decline); a bridge governing an agent's question (allow,
//! deny, a mode it does not pass). Each asserts the audit records, and that the chain verifies.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::bridge::BridgeOptions;
use agentacp::client::{
    AgentCommand, Client, ClientOptions, DeclineAll, ElicitationHandler, ElicitationOutcome, PromptEvent,
};
use agentacp::prelude::*;
use agentacp::server::{Elicitation, SessionContext};
use agentacp::websocket::Dial;
use common::listening::{ALICE, Listening, tokens};
use common::{Pipe, WAIT, texts};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Asks what the prompt's text names and says what came back:
/// `form` (a form with a required choice and an integer), `url` (a URL interaction, completed
/// when accepted, then completed again), `tool` (a form tied to a tool call).
#[acp_operator(manifest = "tests/operators/test-remote/ACP.md")]
struct Asker;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "strategy": {"type": "string", "enum": ["safe", "bold"]},
            "port": {"type": "integer"},
        },
        "required": ["strategy"],
    })
}

fn said(result: std::result::Result<ElicitationOutcome, agentacp::server::ElicitationError>) -> String {
    match result {
        Ok(ElicitationOutcome::Accept(content)) => format!("accept {}", Value::Object(content)),
        Ok(ElicitationOutcome::Decline) => "decline".into(),
        Ok(ElicitationOutcome::Cancel) => "cancel".into(),
        Err(error) => format!("error: {error}"),
    }
}

impl AskerServer for Asker {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let text = serde_json::to_value(&request.prompt)?[0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let form = Elicitation::form("How careful should I be?", schema());
        let answer = match text.as_str() {
            "url" => {
                let url = Elicitation::url("Sign in to continue", "oauth-1", "https://example.com/oauth?e=oauth-1");
                let answer = turn.elicit(url).await;
                if matches!(answer, Ok(ElicitationOutcome::Accept(_))) {
                    let first = turn.complete_elicitation("oauth-1").await;
                    let again = turn.complete_elicitation("oauth-1").await;
                    turn.message(format!("completed {first:?}; again: {}", again.unwrap_err()))
                        .await?;
                }
                answer
            }
            "tool" => turn.elicit(form.for_tool_call("call_9")).await,
            "bad-schema" => turn.elicit(Elicitation::form("?", json!({"type": "object"}))).await,
            _ => turn.elicit(form).await,
        };
        turn.message(said(answer)).await?;
        Ok(wire::StopReason::EndTurn)
    }

    remote_no_ops!();
}

// ---- a raw client in process ------------------------------------------------------------------

struct Raw {
    pipe: Pipe,
    audit: MemorySink,
    _root: tempfile::TempDir,
    session: String,
}

/// Serves [`Asker`] (permission timeout `timeout`) to a raw client that offers
/// `capabilities`, with one session open.
async fn raw(capabilities: Value, timeout: Duration) -> Raw {
    let root = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let options = agentacp::server::ServerOptions {
        workspace_root: Some(root.path().to_path_buf()),
        audit: Some(AuditLog::with_sink(Box::new(audit.clone()))),
        store: Some(Arc::new(agentacp::server::MemoryStore::default())),
        permission_timeout: timeout,
        ..agentacp::server::ServerOptions::default()
    };
    let mut pipe = Pipe::serve(Asker, options);
    let params = json!({"protocolVersion": 1, "clientInfo": {"name": "raw", "version": "1"},
        "clientCapabilities": capabilities});
    pipe.call("initialize", params).await;
    let cwd = root.path().canonicalize().unwrap().display().to_string();
    let (_, answer) = pipe.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    let session = answer["result"]["sessionId"].as_str().unwrap().to_string();
    Raw {
        pipe,
        audit,
        _root: root,
        session,
    }
}

impl Raw {
    /// Prompts `text`; returns the server's `elicitation/create` request.
    async fn ask(&mut self, text: &str) -> (i64, Value) {
        let id = self.pipe.prompt(&self.session, text).await;
        loop {
            let message = self.pipe.next().await;
            if message["method"] == "elicitation/create" {
                return (id, message);
            }
            assert!(message["id"] != id, "the prompt ended without asking: {message}");
        }
    }

    /// Answers `request` with `result`; returns what the turn said and everything sent on the
    /// way to the prompt's end.
    async fn answer(&mut self, prompt: i64, request: &Value, result: Value) -> (Vec<String>, Vec<Value>) {
        self.pipe.answer(request, result).await;
        let (seen, _) = self.pipe.until_answer(prompt).await;
        (texts(&seen), seen)
    }

    /// The elicitation records (`elicitation.*`); the chain verifies.
    fn records(&self) -> Vec<Value> {
        agentacp::audit::verify(self.audit.contents().as_bytes()).expect("the chain verifies");
        (self.audit.lines().iter())
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|record| record["action"].as_str().is_some_and(|a| a.starts_with("elicitation.")))
            .collect()
    }
}

const FORM: fn() -> Value = || json!({"elicitation": {"form": {}}});

#[tokio::test]
async fn an_accepted_form_reaches_the_turn_with_its_records() {
    let mut client = raw(FORM(), WAIT).await;
    let (prompt, request) = client.ask("form").await;
    let params = &request["params"];
    assert_eq!(params["mode"], "form");
    assert_eq!(params["sessionId"], client.session.as_str());
    assert_eq!(params["requestedSchema"], schema());
    let content = json!({"strategy": "bold", "port": 8080});
    let (said, _) = client
        .answer(prompt, &request, json!({"action": "accept", "content": content}))
        .await;
    assert_eq!(said, [format!("accept {content}")]);
    let records = client.records();
    let actions: Vec<&str> = records.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["elicitation.create", "elicitation.answer"]);
    assert_eq!(records[0]["input"]["message"], "How careful should I be?");
    assert_eq!(records[0]["input"]["from"], "operator");
    assert_eq!(records[0]["metadata"]["aip44"]["session"], client.session.as_str());
    assert_eq!(
        records[1]["subject"], records[0]["subject"],
        "one question, one subject"
    );
    assert_eq!(records[1]["output"]["content"], content);
    assert_eq!(records[1]["output"]["answeredBy"], "client:raw");
    client.pipe.finish().await;
}

#[tokio::test]
async fn decline_and_cancel_reach_the_turn_and_a_tool_call_scope_is_sent() {
    let mut client = raw(FORM(), WAIT).await;
    let (prompt, request) = client.ask("tool").await;
    assert_eq!(request["params"]["toolCallId"], "call_9");
    let (said, _) = client.answer(prompt, &request, json!({"action": "decline"})).await;
    assert_eq!(said, ["decline"]);
    // Content beside a cancel means nothing.
    let (prompt, request) = client.ask("form").await;
    let (said, _) = client
        .answer(prompt, &request, json!({"action": "cancel", "content": {"x": 1}}))
        .await;
    assert_eq!(said, ["cancel"]);
    let outputs: Vec<Value> = (client.records().iter())
        .filter(|r| r["action"] == "elicitation.answer")
        .map(|r| r["output"]["action"].clone())
        .collect();
    assert_eq!(outputs, ["decline", "cancel"]);
    client.pipe.finish().await;
}

#[tokio::test]
async fn a_mode_the_client_did_not_advertise_is_a_clear_error_and_nothing_is_sent() {
    // `{}` advertises no mode; `form: null` neither.
    for capabilities in [
        json!({}),
        json!({"elicitation": {}}),
        json!({"elicitation": {"form": null, "url": {}}}),
    ] {
        let mut client = raw(capabilities, WAIT).await;
        let prompt = client.pipe.prompt(&client.session.clone(), "form").await;
        let (seen, _) = client.pipe.until_answer(prompt).await;
        assert!(seen.iter().all(|m| m["method"] != "elicitation/create"), "{seen:?}");
        assert_eq!(
            texts(&seen),
            [
                "error: the client does not offer form-mode elicitation (it did not advertise `elicitation.form` in its `clientCapabilities`)"
            ]
        );
        assert!(client.records().is_empty(), "nothing asked, nothing recorded");
        client.pipe.finish().await;
    }
}

#[tokio::test]
async fn a_question_that_breaks_the_senders_rules_is_not_sent() {
    let mut client = raw(FORM(), WAIT).await;
    let prompt = client.pipe.prompt(&client.session.clone(), "bad-schema").await;
    let (seen, _) = client.pipe.until_answer(prompt).await;
    assert!(seen.iter().all(|m| m["method"] != "elicitation/create"));
    assert_eq!(
        texts(&seen),
        ["error: the elicitation was not sent: the requested schema must have `properties` (an object)"]
    );
    client.pipe.finish().await;
}

#[tokio::test]
async fn an_unanswered_question_times_out_is_withdrawn_and_recorded() {
    let mut client = raw(FORM(), Duration::from_millis(300)).await;
    let (prompt, request) = client.ask("form").await;
    let (seen, _) = client.pipe.until_answer(prompt).await;
    let withdrawn = seen
        .iter()
        .any(|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == request["id"]);
    assert!(withdrawn, "the question is withdrawn: {seen:?}");
    assert_eq!(
        texts(&seen),
        ["error: the client did not answer the elicitation in time"]
    );
    let answer = client.records().pop().unwrap();
    assert_eq!(answer["output"]["answeredBy"], "agentacp");
    assert!(answer["output"]["error"].as_str().unwrap().contains("in time"));
    client.pipe.finish().await;
}

#[tokio::test]
async fn a_hostile_answer_is_refused_with_a_sentence_and_the_session_goes_on() {
    let mut client = raw(FORM(), WAIT).await;
    let hostile = [
        (
            json!({"action": "accept", "content": {"strategy": "bold", "port": "80"}}),
            "error: the client's answer to the elicitation was refused: property `port` must be an integer, not a string",
        ),
        (
            json!({"action": "accept", "content": {"port": 80}}),
            "error: the client's answer to the elicitation was refused: the required property `strategy` is missing",
        ),
        (
            json!({"action": "accept"}),
            "error: the client's answer to the elicitation was refused: the required property `strategy` is missing",
        ),
        (
            json!({"action": "accept", "content": ["bold"]}),
            "error: the client's answer to the elicitation was refused: its `content` is not an object",
        ),
        (
            json!("accept"),
            "error: the client's answer to the elicitation was refused: it has no `action`",
        ),
        (
            json!({"action": "shrug"}),
            "error: the client's answer to the elicitation was refused: its `action` is `shrug`, not `accept`, `decline` or `cancel`",
        ),
    ];
    for (answer, expected) in hostile {
        let (prompt, request) = client.ask("form").await;
        let (said, _) = client.answer(prompt, &request, answer).await;
        assert_eq!(said, [expected]);
    }
    // An error answer is the client's refusal.
    let (prompt, request) = client.ask("form").await;
    let error = json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32602, "message": "no forms here"}});
    client.pipe.send(error).await;
    let (seen, _) = client.pipe.until_answer(prompt).await;
    assert_eq!(
        texts(&seen),
        ["error: the client refused the elicitation: no forms here (-32602)"]
    );
    let errors = (client.records().iter())
        .filter(|r| r["action"] == "elicitation.answer" && r["output"]["error"].is_string())
        .count();
    assert_eq!(errors, 7, "every refused answer is recorded");
    client.pipe.finish().await;
}

#[tokio::test]
async fn an_accepted_url_interaction_is_completed_once() {
    let mut client = raw(json!({"elicitation": {"url": {}}}), WAIT).await;
    let (prompt, request) = client.ask("url").await;
    let params = &request["params"];
    assert_eq!(
        (params["mode"].as_str(), params["elicitationId"].as_str()),
        (Some("url"), Some("oauth-1"))
    );
    assert!(params.get("requestedSchema").is_none());
    let (said, seen) = client.answer(prompt, &request, json!({"action": "accept"})).await;
    let completions: Vec<&Value> = seen.iter().filter(|m| m["method"] == "elicitation/complete").collect();
    assert_eq!(completions.len(), 1, "{seen:?}");
    assert_eq!(completions[0]["params"], json!({"elicitationId": "oauth-1"}));
    assert!(completions[0].get("id").is_none(), "a notification");
    assert_eq!(
        said,
        [
            "completed Ok(()); again: `oauth-1` is not an outstanding URL elicitation of this connection (never asked, declined, or completed already)",
            "accept {}"
        ]
    );
    let actions: Vec<Value> = client.records().iter().map(|r| r["action"].clone()).collect();
    assert_eq!(
        actions,
        ["elicitation.create", "elicitation.answer", "elicitation.complete"]
    );
    // The id is free again: the same interaction may be asked anew.
    let (prompt, request) = client.ask("url").await;
    let (said, _) = client.answer(prompt, &request, json!({"action": "decline"})).await;
    assert_eq!(said, ["decline"]);
    client.pipe.finish().await;
}

// ---- our own client, over WebSocket -------------------------------------------------------------

/// Accepts every form with `{"strategy": "safe"}`; counts completions.
struct Careful;

impl ElicitationHandler for Careful {
    fn answer(&self, request: wire::CreateElicitationRequest) -> agentacp::client::BoxFuture<ElicitationOutcome> {
        assert_eq!(request.message, "How careful should I be?");
        let content = json!({"strategy": "safe"}).as_object().unwrap().clone();
        Box::pin(async move { ElicitationOutcome::Accept(content) })
    }
}

/// Answers a form with content that does not fit it.
struct Sloppy;

impl ElicitationHandler for Sloppy {
    fn answer(&self, _: wire::CreateElicitationRequest) -> agentacp::client::BoxFuture<ElicitationOutcome> {
        let content = json!({"strategy": "reckless"}).as_object().unwrap().clone();
        Box::pin(async move { ElicitationOutcome::Accept(content) })
    }
}

/// Connects our client to `server` with `options`, prompts `text` in a new session; the
/// prompt's texts.
async fn our_client(server: &Listening, options: ClientOptions, text: &str) -> Vec<String> {
    let url = format!("ws://{}/acp", server.addr);
    let options = options.with_workspace_root(server.cwd());
    let client = tokio::time::timeout(WAIT, Client::connect_websocket(Dial::new(url).token(ALICE), options))
        .await
        .unwrap()
        .unwrap();
    let session = client.new_session(server.cwd().as_ref()).await.unwrap();
    let mut turn = client.prompt_text(&session, text).await.unwrap();
    let mut said = Vec::new();
    while let Some(event) = tokio::time::timeout(WAIT, turn.next()).await.unwrap() {
        match event.unwrap() {
            PromptEvent::Update(update) => said.extend(update.text().map(str::to_string)),
            PromptEvent::Stop(_) => break,
            _ => {}
        }
    }
    client.close().await;
    said
}

fn client_records(sink: &MemorySink) -> Vec<Value> {
    agentacp::audit::verify(sink.contents().as_bytes()).expect("the chain verifies");
    (sink.lines().iter())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn our_client_answers_through_its_handler_declines_by_default_and_offers_nothing_without_one() {
    let server = Listening::start(Asker, |listen| listen.tokens(tokens())).await;
    let sink = MemorySink::new();
    let audited = ClientOptions::default().with_audit(AuditLog::with_sink(Box::new(sink.clone())));
    let said = our_client(&server, audited.with_elicitation(Careful), "form").await;
    assert_eq!(said, [r#"accept {"strategy":"safe"}"#]);
    let records = client_records(&sink);
    let actions: Vec<&str> = records.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["elicitation.create", "elicitation.answer"]);
    assert_eq!(records[0]["input"]["from"], "agent");
    assert_eq!(
        records[0]["input"]["decision"], "ask",
        "no governance binding: the user is asked"
    );
    assert_eq!(records[1]["output"]["answeredBy"], "user");
    // The default handler declines; without one, nothing is offered and the turn is told so.
    let said = our_client(&server, ClientOptions::default().with_elicitation(DeclineAll), "form").await;
    assert_eq!(said, ["decline"]);
    let said = our_client(&server, ClientOptions::default(), "form").await;
    assert_eq!(
        said,
        [
            "error: the client does not offer form-mode elicitation (it did not advertise `elicitation.form` in its `clientCapabilities`)"
        ]
    );
    // Content that does not fit what was asked is declined by the client, and recorded so.
    let sink = MemorySink::new();
    let audited = ClientOptions::default().with_audit(AuditLog::with_sink(Box::new(sink.clone())));
    let said = our_client(&server, audited.with_elicitation(Sloppy), "form").await;
    assert_eq!(said, ["decline"]);
    let answer = client_records(&sink).pop().unwrap();
    assert_eq!(answer["output"]["answeredBy"], "agentacp");
    assert!(
        answer["output"]["reason"]
            .as_str()
            .unwrap()
            .contains("not one of its choices"),
        "{answer}"
    );
    // The server recorded each question it sent (three) and its answer.
    let asked = server
        .audited()
        .iter()
        .filter(|r| r["action"] == "elicitation.create")
        .count();
    assert_eq!(asked, 3);
    server.shut_down().await;
}

// ---- a bridge -----------------------------------------------------------------------------------

/// The governed bridge of the bridge tests, its manifest declaring form-mode elicitation
/// (`metadata.agentacp.elicitation.form`), over an agent that asks the editor a question
/// at each prompt and says what came back.
#[acp_operator(manifest = "tests/operators/test-bridge-elicit/ACP.md")]
struct ElicitingBridge {
    agent: AgentCommand,
}

impl ElicitingBridgeBridge for ElicitingBridge {
    fn downstream(&self) -> AgentCommand {
        self.agent.clone()
    }
}

/// A fake agent in Python: answers `initialize` (keeping its `clientCapabilities` in `caps`)
/// and `session/new` (session `s1`); at `session/prompt` runs `on_prompt` (Python, indented
/// by eight spaces, with `mode` the prompt's text, `ask(id, question)` for the answer to an
/// `elicitation/create` and `say(obj)` to report), then ends the turn.
fn python_agent(dir: &std::path::Path, on_prompt: &str) -> AgentCommand {
    let script = format!(
        r#"
import json, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
def ask(mid, question):
    send({{"jsonrpc": "2.0", "id": mid, "method": "elicitation/create", "params": question}})
    answer = json.loads(sys.stdin.readline())
    return answer.get("result", answer.get("error"))
def say(obj):
    send({{"jsonrpc": "2.0", "method": "session/update", "params": {{"sessionId": "s1",
          "update": {{"sessionUpdate": "agent_message_chunk", "content": {{"type": "text", "text": json.dumps(obj)}}}}}}}})
caps = {{}}
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        caps = msg["params"].get("clientCapabilities", {{}})
        send({{"jsonrpc": "2.0", "id": mid, "result": {{"protocolVersion": 1, "agentCapabilities": {{}}}}}})
    elif method == "session/new":
        send({{"jsonrpc": "2.0", "id": mid, "result": {{"sessionId": "s1"}}}})
    elif method == "session/prompt":
        mode = msg["params"]["prompt"][0]["text"]
{on_prompt}
        send({{"jsonrpc": "2.0", "id": mid, "result": {{"stopReason": "end_turn"}}}})
"#
    );
    std::fs::write(dir.join("agent.py"), script).unwrap();
    AgentCommand::new("python3").arg(dir.join("agent.py")).current_dir(dir)
}

/// Asks the editor one question in the prompt's mode.
const ASKING: &str = r#"
        question = {"sessionId": "s1", "mode": mode, "message": "Pick one"}
        if mode == "url":
            question.update({"elicitationId": "e1", "url": "https://example.com/e1"})
        else:
            question["requestedSchema"] = {"type": "object", "properties": {"pick": {"type": "boolean"}}}
        say({"offered": caps.get("elicitation"), "answer": ask(900, question)})"#;

async fn send_line(to: &mut tokio::io::DuplexStream, message: &Value) {
    to.write_all(format!("{message}\n").as_bytes()).await.unwrap();
}

/// Denies `elicitation/create`, asks about the rest.
struct NoQuestions;

impl Governance for NoQuestions {
    fn decide(&self, request: &ToolRequest<'_>) -> Decision {
        match request.tool {
            "elicitation/create" => Decision::Deny("no questions in this workspace".into()),
            _ => Decision::Ask,
        }
    }
}

/// Runs the bridge over the asking agent (with `governance`, if any), initializes it offering
/// form-mode elicitation, opens a session and prompts `mode`; answers a question the editor is
/// passed with `answer`. Returns what the agent said it was offered and answered, whether
/// the editor was asked, and the bridge's records.
async fn bridged(mode: &str, governance: Option<Arc<dyn Governance>>, answer: Value) -> (Value, bool, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let agent = python_agent(dir.path(), ASKING);
    let sink = MemorySink::new();
    let options = BridgeOptions {
        audit: Some(AuditLog::with_sink(Box::new(sink.clone()))),
        governance,
        ..BridgeOptions::default()
    };
    let (mut to_bridge, bridge_in) = tokio::io::duplex(1 << 16);
    let (bridge_out, from_bridge) = tokio::io::duplex(1 << 16);
    let task = tokio::spawn(agentacp::bridge::bridge(
        ElicitingBridge { agent },
        options,
        bridge_in,
        bridge_out,
    ));
    let mut lines = BufReader::new(from_bridge).lines();
    let cwd = dir.path().canonicalize().unwrap().display().to_string();
    let capabilities = json!({"elicitation": {"form": {}, "url": {}}});
    let script = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": capabilities}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": mode}]}}),
    ];
    let mut asked = false;
    let mut said = Value::Null;
    for message in script {
        let id = message["id"].clone();
        send_line(&mut to_bridge, &message).await;
        loop {
            let line = tokio::time::timeout(WAIT, lines.next_line())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["method"] == "elicitation/create" {
                asked = true;
                send_line(
                    &mut to_bridge,
                    &json!({"jsonrpc": "2.0", "id": message["id"], "result": answer}),
                )
                .await;
            } else if message["method"] == "session/update" {
                said = serde_json::from_str(message["params"]["update"]["content"]["text"].as_str().unwrap()).unwrap();
            } else if message["id"] == id {
                break;
            }
        }
    }
    drop(to_bridge);
    let _ = tokio::time::timeout(WAIT, task).await;
    agentacp::audit::verify(sink.contents().as_bytes()).expect("the chain verifies");
    let records = (sink.lines().iter())
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|r| r["action"].as_str().is_some_and(|a| a.starts_with("elicitation.")))
        .collect();
    (said, asked, records)
}

#[tokio::test]
async fn a_bridge_passes_a_declared_elicitation_to_the_editor_and_records_both_ways() {
    let answer = json!({"action": "accept", "content": {"pick": true}});
    let (said, asked, records) = bridged("form", None, answer.clone()).await;
    assert!(asked, "the editor is asked");
    assert_eq!(
        said["offered"],
        json!({"form": {}}),
        "only the declared mode passes down"
    );
    assert_eq!(said["answer"], answer);
    assert_eq!(records[0]["action"], "elicitation.create");
    assert_eq!(records[0]["input"]["from"], "agent");
    assert_eq!(records[1]["output"]["content"], json!({"pick": true}));
    // An answer that does not fit is not passed on.
    let (said, _, records) = bridged("form", None, json!({"action": "accept", "content": {"pick": "yes"}})).await;
    assert_eq!(
        said["answer"]["message"],
        "the editor's answer to `elicitation/create` was not passed on: property `pick` must be a boolean, not a string"
    );
    assert!(records[1]["output"]["error"].is_string());
}

#[tokio::test]
async fn a_bridge_declines_a_denied_elicitation_and_refuses_a_mode_it_does_not_pass() {
    let governance: Arc<dyn Governance> = Arc::new(NoQuestions);
    let (said, asked, records) = bridged("form", Some(governance), json!({"action": "accept"})).await;
    assert!(!asked, "the editor never sees a denied question");
    assert_eq!(said["answer"], json!({"action": "decline"}));
    assert_eq!(records[0]["input"]["decision"], "deny: no questions in this workspace");
    assert_eq!(records[1]["output"]["answeredBy"], "governance");
    assert_eq!(records[1]["output"]["reason"], "no questions in this workspace");
    // URL mode is not declared by the bridge's manifest: refused, `-32602`.
    let (said, asked, _) = bridged("url", None, json!({"action": "accept"})).await;
    assert!(!asked);
    assert_eq!(said["answer"]["code"], -32602);
    assert!(
        said["answer"]["message"]
            .as_str()
            .unwrap()
            .contains("`elicitation.url`"),
        "{said}"
    );
}

// ---- our client against an agent that asks what it likes ---------------------------------------

/// Asks a URL interaction and completes it twice (and one it never asked), then asks a form.
const COMPLETING: &str = r#"
        url = ask(901, {"sessionId": "s1", "mode": "url", "message": "Sign in", "elicitationId": "e1", "url": "https://example.com/e1"})
        for done in ["e1", "e1", "e2"]:
            send({"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": done}})
        form = ask(902, {"sessionId": "s1", "mode": "form", "message": "Name?", "requestedSchema": {"type": "object", "properties": {}}})
        say({"offered": caps.get("elicitation"), "url": url, "form": form})"#;

/// Offers URL mode only, accepts, and keeps the ids it is told are completed.
struct Consenting(Arc<std::sync::Mutex<Vec<String>>>);

impl ElicitationHandler for Consenting {
    fn modes(&self) -> agentacp::client::ElicitationModes {
        agentacp::client::ElicitationModes { form: false, url: true }
    }

    fn answer(&self, _: wire::CreateElicitationRequest) -> agentacp::client::BoxFuture<ElicitationOutcome> {
        Box::pin(async { ElicitationOutcome::Accept(Default::default()) })
    }

    fn completed(&self, id: wire::ElicitationId) {
        self.0.lock().unwrap().push(id.to_string());
    }
}

#[tokio::test]
async fn our_client_passes_a_completion_once_and_refuses_a_mode_it_does_not_offer() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let agent = python_agent(&root, COMPLETING);
    let completed = Arc::default();
    let options = ClientOptions::default()
        .with_workspace_root(&root)
        .with_elicitation(Consenting(Arc::clone(&completed)));
    let client = tokio::time::timeout(WAIT, Client::connect(agent, options))
        .await
        .unwrap()
        .unwrap();
    let session = client.new_session(&root).await.unwrap();
    let mut turn = client.prompt_text(&session, "go").await.unwrap();
    let mut said = Value::Null;
    while let Some(event) = tokio::time::timeout(WAIT, turn.next()).await.unwrap() {
        match event.unwrap() {
            PromptEvent::Update(update) => said = serde_json::from_str(update.text().unwrap()).unwrap(),
            PromptEvent::Stop(_) => break,
            _ => {}
        }
    }
    client.close().await;
    assert_eq!(
        said["offered"],
        json!({"url": {}}),
        "only the handler's modes are advertised"
    );
    assert_eq!(said["url"], json!({"action": "accept"}));
    assert_eq!(said["form"]["code"], -32602);
    assert!(
        said["form"]["message"].as_str().unwrap().contains("`form`-mode"),
        "{said}"
    );
    assert_eq!(
        *completed.lock().unwrap(),
        ["e1"],
        "once, and never an id it did not accept"
    );
}
