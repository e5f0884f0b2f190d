//! The server runtime, driven in process over an in-memory pipe: ordering, errors, cancel,
//! frame limits, governance and audit, session load, end of input. Each test names the
//! guarantee of `docs/design/runtime.md` it checks.

use std::sync::Arc;
use std::time::Duration;

use agentacp::audit::{AuditEvent, AuditLog, AuditSink, FsyncPolicy, Lifecycle, MemorySink};
use agentacp::prelude::*;
use agentacp::server::{self, FileStore, MemoryStore, SessionStore};
use serde_json::Value;

mod common;

use common::{Pipe, WAIT, texts};

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
            ["/tool", name] => {
                let kind = if *name == "read" {
                    ToolKind::Read
                } else {
                    ToolKind::Edit
                };
                let outcome = turn
                    .tool_call(*name, json!({"n": 1}))
                    .kind(kind)
                    .run(|arguments| async move { Ok::<_, String>(json!({"echo": arguments})) })
                    .await?;
                turn.message(format!("{outcome:?}")).await?;
            }
            ["/raw-tool-call", kind] => {
                // Bypassing `turn.tool_call` through the JSON escape hatch (the typed
                // `Turn::update` cannot name one): must be refused, whatever the tier.
                let update = json!({"sessionUpdate": kind, "toolCallId": "sneaky", "title": "format-disk",
                    "status": "completed", "rawOutput": {"done": true}});
                turn.update_json(update).await?;
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
                report(turn, read).await?;
            }
            ["/editor-write", path, content] => {
                let written = turn.editor().write_text_file(path, content).await;
                report(turn, written.map(|()| "written".to_string())).await?;
            }
            ["/editor-run", command, timeout_ms] => {
                let command = server::TerminalCommand::new(*command)
                    .arg("--flag")
                    .timeout(Duration::from_millis(timeout_ms.parse().unwrap_or(10_000)));
                let ran = turn.editor().run_command(&command).await;
                let ran = ran.map(|run| format!("{:?} {:?} {}", run.exit_code, run.signal, run.output));
                report(turn, ran).await?;
            }
            ["/tool-forever"] => {
                turn.tool_call("read", json!({}))
                    .kind(ToolKind::Read)
                    .run(|_| std::future::pending::<std::result::Result<Value, String>>())
                    .await?;
            }
            ["/fail"] => return Err(Error::msg("boom")),
            ["/panic"] => panic!("a deliberate panic in operator code"),
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

/// Streams what an editor call gave (`ok: …`) or why it failed (`error: …`); a cancel ends
/// the turn.
async fn report(turn: &mut Turn<'_, GovernanceAware>, outcome: Result<String>) -> Result<()> {
    match outcome {
        Ok(text) => turn.message(format!("ok: {text}")).await,
        Err(Error::Cancelled) => Err(Error::Cancelled),
        Err(error) => turn.message(format!("error: {error}")).await,
    }
}

/// The same operator, but its manifest declares none of the editor's methods.
#[acp_operator(manifest = "tests/operators/test-operator-no-editor/ACP.md")]
struct Bystander;

impl BystanderServer for Bystander {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let read = turn.editor().read_text_file("notes.txt").await;
        report(turn, read).await?;
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

/// The client end of an in-process connection, with the workspace root it serves.
struct Client {
    pipe: Pipe,
    root: tempfile::TempDir,
}

impl std::ops::Deref for Client {
    type Target = Pipe;
    fn deref(&self) -> &Pipe {
        &self.pipe
    }
}

impl std::ops::DerefMut for Client {
    fn deref_mut(&mut self) -> &mut Pipe {
        &mut self.pipe
    }
}

struct Setup {
    options: ServerOptions,
    root: tempfile::TempDir,
    audit: MemorySink,
}

fn setup() -> Setup {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("project")).unwrap();
    let audit = MemorySink::new();
    let options = ServerOptions {
        workspace_root: Some(root.path().to_path_buf()),
        audit: Some(AuditLog::with_sink(Box::new(audit.clone()))),
        store: Some(Arc::new(MemoryStore::default())),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    };
    Setup { options, root, audit }
}

impl Setup {
    /// Started, initialized, with one session.
    async fn ready(self) -> (Client, String) {
        let mut client = self.start();
        client.initialize().await;
        let session = client.new_session().await;
        (client, session)
    }

    fn start(self) -> Client {
        self.start_with(Tester)
    }

    fn start_with(self, operator: impl server::Operator) -> Client {
        Client {
            pipe: Pipe::serve(operator, self.options),
            root: self.root,
        }
    }
}

impl Client {
    async fn initialize(&mut self) -> Value {
        self.initialize_offering(json!({})).await
    }

    /// `initialize` with these `clientCapabilities`.
    async fn initialize_offering(&mut self, capabilities: Value) -> Value {
        let params = json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"},
            "clientCapabilities": capabilities});
        self.call("initialize", params).await.1
    }

    /// Reads until the server's request for `method`, which it returns.
    async fn until_request(&mut self, method: &str) -> Value {
        loop {
            let message = self.next().await;
            if message["method"] == method && message.get("id").is_some() {
                return message;
            }
        }
    }

    fn project(&self) -> String {
        self.root.path().join("project").to_string_lossy().into_owned()
    }

    /// Sends `session/load` of `session` (in the project folder); its request id.
    async fn start_load(&mut self, session: &str) -> i64 {
        let cwd = self.project();
        let params = json!({"sessionId": session, "cwd": cwd, "mcpServers": []});
        self.request("session/load", params).await
    }

    async fn new_session(&mut self) -> String {
        let cwd = self.project();
        let (_, answer) = self.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
        answer["result"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string()
    }

    async fn cancel(&mut self, session: &str) {
        self.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}))
            .await;
    }

    async fn finish(self) {
        self.pipe.finish().await
    }
}

fn kinds(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m["method"].as_str() {
            Some("session/update") => m["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or("?")
                .to_string(),
            Some(method) => method.to_string(),
            None => "answer".to_string(),
        })
        .collect()
}

fn audit_actions(sink: &MemorySink) -> Vec<String> {
    sink.lines()
        .iter()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["action"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn initialize_answers_the_manifest_capabilities_once() {
    let mut client = setup().start();
    let answer = client.initialize().await;
    let result = &answer["result"];
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentCapabilities"]["loadSession"], true);
    assert_eq!(result["agentInfo"]["name"], "test-operator");
    assert_eq!(result["_meta"]["aip44"]["tier"], "governance-aware");
    assert!(
        result["_meta"]["aip44"]["acp_rev"]
            .as_str()
            .unwrap()
            .starts_with("0fc18323")
    );
    let (_, again) = client.call("initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(again["error"]["code"], -32600);
    client.finish().await;
}

#[tokio::test]
async fn requests_before_initialize_are_invalid_and_notifications_never_answered() {
    let mut client = setup().start();
    let (_, early) = client.call("session/new", json!({"cwd": "/", "mcpServers": []})).await;
    assert_eq!(early["error"]["code"], -32600, "{early}");
    client.initialize().await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "_vendor/unknown", "params": {}}))
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}}))
        .await;
    // The next line is the answer to the next request: the notifications got none.
    let id = client.request("no/such/method", json!({})).await;
    let answer = client.next().await;
    assert_eq!(answer["id"], id);
    assert_eq!(answer["error"]["code"], -32601);
    // A stdio-only manifest has no `authenticate` method.
    let (_, authenticate) = client.call("authenticate", json!({"methodId": "x"})).await;
    assert_eq!(authenticate["error"]["code"], -32601, "{authenticate}");
    client.finish().await;
}

#[tokio::test]
async fn unreadable_lines_get_parse_or_invalid_request_errors_and_the_connection_goes_on() {
    let mut client = setup().start();
    client.send_raw(b"{not json\n").await;
    let parse = client.next().await;
    assert_eq!(parse["error"]["code"], -32700);
    assert_eq!(parse["id"], Value::Null);
    client.send_raw(b"[1,2]\n").await;
    assert_eq!(client.next().await["error"]["code"], -32600);
    client.send_raw(b"{\"id\":3,\"method\":\"initialize\"}\n").await;
    let no_version = client.next().await;
    assert_eq!(
        (no_version["id"].clone(), no_version["error"]["code"].clone()),
        (json!(3), json!(-32600))
    );
    assert_eq!(client.initialize().await["result"]["protocolVersion"], 1);
    client.finish().await;
}

#[tokio::test]
async fn every_update_of_a_turn_arrives_in_order_before_its_answer() {
    let (mut client, session) = setup().ready().await;
    let id = client.prompt(&session, "/stream 2000").await;
    let (before, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let expected: Vec<String> = (0..2000).map(|i| i.to_string()).collect();
    assert_eq!(texts(&before), expected);
    assert!(before.iter().all(|m| m["params"]["sessionId"] == session.as_str()));
    client.finish().await;
}

/// The messages the runtime answers itself are decoded through the pinned revision's
/// generated enums: params its types refuse are `-32602`, naming what is wrong, although the
/// runtime reads only `cwd` (before, a `session/new` without `mcpServers`, or with one that is
/// not a list, opened a session).
#[tokio::test]
async fn runtime_answered_requests_are_checked_against_the_pinned_revisions_types() {
    let mut client = setup().start();
    client.initialize().await;
    let cwd = client.project();
    for params in [
        json!({"cwd": cwd}),
        json!({"cwd": cwd, "mcpServers": {"not": "a list"}}),
        json!({"cwd": cwd, "mcpServers": [{"name": "no command"}]}),
    ] {
        let (_, answer) = client.call("session/new", params.clone()).await;
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("session/new"),
            "{answer}"
        );
    }
    let session = client.new_session().await;
    let (_, answer) = client.call("session/close", json!({"sessionId": 7})).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let (_, answer) = client.call("session/close", json!({ "sessionId": session })).await;
    assert!(answer.get("result").is_some(), "{answer}");
    client.finish().await;
}

#[tokio::test]
async fn session_cwd_must_be_absolute_and_inside_the_root() {
    let mut client = setup().start();
    client.initialize().await;
    let outside = tempfile::tempdir().unwrap();
    for cwd in [
        outside.path().to_str().unwrap().to_string(),
        "project".to_string(),
        "/no/such/dir".to_string(),
    ] {
        let (_, answer) = client.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
        assert_eq!(answer["error"]["code"], -32602, "{cwd}: {answer}");
    }
    let id = client.prompt("sess_unknown", "hi").await;
    let (_, answer) = client.until_answer(id).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    client.finish().await;
}

#[tokio::test]
async fn cancel_answers_cancelled_exactly_once_and_the_session_stays_usable() {
    let (mut client, session) = setup().ready().await;
    let id = client.prompt(&session, "/forever").await;
    let first = client.next().await;
    assert_eq!(first["method"], "session/update");
    client.cancel(&session).await;
    client.cancel(&session).await;
    let (_, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    // The session takes the next prompt, and nothing more is said about the cancelled one.
    let next = client.prompt(&session, "again").await;
    let (before, answer) = client.until_answer(next).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(texts(&before).last().map(String::as_str), Some("again"));
    assert!(
        before.iter().all(|m| m["id"] != id),
        "a second answer to the cancelled prompt: {before:?}"
    );
    client.finish().await;
}

#[tokio::test]
async fn cancel_request_on_a_prompt_ends_it_like_session_cancel() {
    let (mut client, session) = setup().ready().await;
    let id = client.prompt(&session, "/forever").await;
    client.next().await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": id}}))
        .await;
    let (_, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    client.finish().await;
}

#[tokio::test]
async fn a_second_prompt_while_one_runs_is_refused() {
    let (mut client, session) = setup().ready().await;
    let first = client.prompt(&session, "/forever").await;
    client.next().await;
    let second = client.prompt(&session, "hi").await;
    let (_, refused) = client.until_answer(second).await;
    assert_eq!(refused["error"]["code"], -32602);
    client.cancel(&session).await;
    let (_, answer) = client.until_answer(first).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    client.finish().await;
}

#[tokio::test]
async fn a_duplicate_id_in_flight_is_refused_and_the_first_request_keeps_its_answer() {
    let (mut client, first_session) = setup().ready().await;
    let second_session = client.new_session().await;
    let prompt = |session: &str, text: &str| {
        json!({"jsonrpc": "2.0", "id": 77, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
    };
    client.send(prompt(&first_session, "/forever")).await;
    client.next().await;
    client.send(prompt(&second_session, "hi")).await;
    let (_, refused) = client.until_answer(77).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate id in flight"),
        "{refused}"
    );
    client.cancel(&first_session).await;
    let (_, answer) = client.until_answer(77).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    // Answered, the id is free again.
    client.send(prompt(&second_session, "hi")).await;
    let (before, answer) = client.until_answer(77).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(texts(&before), ["hi"]);
    client.finish().await;
}

#[tokio::test]
async fn a_frame_over_the_limit_is_refused_with_its_id_and_the_next_one_served() {
    let mut setup = setup();
    setup.options.max_frame_bytes = 4096;
    let (mut client, session) = setup.ready().await;
    let big = json!({"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "x".repeat(100_000)}]}});
    client.send(big).await;
    let refused = client.next().await;
    assert_eq!(
        (refused["id"].clone(), refused["error"]["code"].clone()),
        (json!(7), json!(-32600))
    );
    let id = client.prompt(&session, "small").await;
    let (before, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(texts(&before), ["small"]);
    client.finish().await;
}

#[tokio::test]
async fn operator_errors_answer_internal_error() {
    let (mut client, session) = setup().ready().await;
    let id = client.prompt(&session, "/fail").await;
    let (_, answer) = client.until_answer(id).await;
    assert_eq!(answer["error"]["code"], -32603);
    assert!(answer["error"]["message"].as_str().unwrap().contains("boom"));
    let (_, bad) = client
        .call("session/prompt", json!({"sessionId": session, "prompt": "not a list"}))
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    client.finish().await;
}

#[tokio::test]
async fn a_panic_in_operator_code_answers_internal_error_and_the_session_goes_on() {
    let (mut client, session) = setup().ready().await;
    let id = client.prompt(&session, "/panic").await;
    let (_, answer) = client.until_answer(id).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let id = client.prompt(&session, "still here").await;
    let (before, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(texts(&before), ["still here"]);
    client.finish().await;
}

#[tokio::test]
async fn a_denied_tool_never_reaches_the_wire_and_the_denial_is_audited() {
    let setup = setup();
    let audit = setup.audit.clone();
    let (mut client, session) = setup.ready().await;
    let id = client.prompt(&session, "/tool delete").await;
    let (before, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(kinds(&before), ["agent_message_chunk"], "{before:?}");
    assert!(texts(&before)[0].starts_with("Denied("), "{before:?}");
    let denial = audit
        .lines()
        .into_iter()
        .map(|l| serde_json::from_str::<Value>(&l).unwrap())
        .find(|r| r["action"] == "tool.call")
        .expect("the denial is audited");
    assert_eq!(denial["metadata"]["aip44"]["tool"], "delete");
    assert_eq!(denial["metadata"]["aip44"]["approval"]["deniedBy"], "governance");
    client.finish().await;
}

#[tokio::test]
async fn an_allowed_tool_runs_without_asking() {
    let (mut client, session) = setup().ready().await;
    let id = client.prompt(&session, "/tool read").await;
    let (before, _) = client.until_answer(id).await;
    assert_eq!(kinds(&before), ["tool_call", "tool_call_update", "agent_message_chunk"]);
    assert_eq!(before[0]["params"]["update"]["status"], "in_progress");
    assert_eq!(before[1]["params"]["update"]["status"], "completed");
    assert_eq!(before[1]["params"]["update"]["rawOutput"]["echo"]["n"], 1);
    client.finish().await;
}

/// Answers the permission request that is (or comes) next with `answer`, checking first that
/// the suspension was audited before the request reached the wire.
async fn answer_permission(client: &mut Client, audit: &MemorySink, answer: Value) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let message = client.next().await;
        if message["method"] == "session/request_permission" {
            assert!(
                audit_actions(audit).contains(&"operator.suspended".to_string()),
                "suspended is audited before the request is sent"
            );
            assert_eq!(message["params"]["toolCall"]["status"], "pending");
            let id = message["id"].clone();
            client.send(json!({"jsonrpc": "2.0", "id": id, "result": answer})).await;
            seen.push(message);
            return seen;
        }
        seen.push(message);
    }
}

#[tokio::test]
async fn approval_runs_the_tool_and_records_who_approved() {
    let setup = setup();
    let audit = setup.audit.clone();
    let (mut client, session) = setup.ready().await;
    let id = client.prompt(&session, "/tool write").await;
    let mut seen = answer_permission(
        &mut client,
        &audit,
        json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
    )
    .await;
    let (after, answer) = client.until_answer(id).await;
    seen.extend(after);
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(
        kinds(&seen),
        [
            "tool_call",
            "session/request_permission",
            "tool_call_update",
            "tool_call_update",
            "agent_message_chunk"
        ]
    );
    assert!(texts(&seen).last().unwrap().starts_with("Completed("));
    let records: Vec<Value> = audit.lines().iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let call = records.iter().find(|r| r["action"] == "tool.call").unwrap();
    assert_eq!(call["metadata"]["aip44"]["approval"]["approvedBy"], "client:test");
    assert_eq!(call["metadata"]["aip44"]["result"]["echo"]["n"], 1);
    let actions = audit_actions(&audit);
    let position = |action: &str| actions.iter().position(|a| a == action).unwrap();
    // The tool call is the turn's first step: it still runs before it suspends.
    assert!(
        position("operator.running") < position("operator.suspended"),
        "{actions:?}"
    );
    assert!(position("operator.suspended") < position("operator.resumed"));
    assert!(position("operator.resumed") < position("tool.call"));
    client.finish().await;
}

#[tokio::test]
async fn rejection_and_an_unreadable_answer_both_fail_closed() {
    for answer in [
        json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}}),
        json!({"outcome": {"outcome": "cancelled"}}),
        json!({"something": "else"}),
    ] {
        let setup = setup();
        let audit = setup.audit.clone();
        let (mut client, session) = setup.ready().await;
        let id = client.prompt(&session, "/tool write").await;
        answer_permission(&mut client, &audit, answer.clone()).await;
        let (after, _) = client.until_answer(id).await;
        assert_eq!(kinds(&after), ["tool_call_update", "agent_message_chunk"], "{answer}");
        assert_eq!(after[0]["params"]["update"]["status"], "failed");
        assert!(texts(&after)[0].starts_with("Rejected("), "{answer}: {after:?}");
        assert!(
            !audit.contents().contains("\"result\""),
            "the tool did not run: {answer}"
        );
        client.finish().await;
    }
}

#[tokio::test]
async fn a_permission_request_that_times_out_is_a_rejection() {
    let mut setup = setup();
    setup.options.permission_timeout = Duration::from_millis(50);
    let audit = setup.audit.clone();
    let (mut client, session) = setup.ready().await;
    let id = client.prompt(&session, "/tool write").await;
    // Never answer the permission request.
    let (before, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert!(kinds(&before).contains(&"session/request_permission".to_string()));
    assert!(texts(&before).last().unwrap().contains("timeout"), "{before:?}");
    assert!(audit.contents().contains(r#""reason":"timeout""#));
    client.finish().await;
}

#[tokio::test]
async fn cancelling_while_waiting_for_permission_answers_cancelled_and_audits_a_rejection() {
    let setup = setup();
    let audit = setup.audit.clone();
    let (mut client, session) = setup.ready().await;
    let id = client.prompt(&session, "/tool write").await;
    loop {
        if client.next().await["method"] == "session/request_permission" {
            break;
        }
    }
    client.cancel(&session).await;
    let (before, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    assert!(
        kinds(&before).iter().all(|k| k != "tool_call_update"),
        "the tool did not run: {before:?}"
    );
    let records: Vec<Value> = audit.lines().iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let call = records
        .iter()
        .find(|r| r["action"] == "tool.call")
        .expect("the abandoned call is audited");
    assert_eq!(call["metadata"]["aip44"]["approval"]["reason"], "cancelled");
    assert_eq!(records.last().unwrap()["action"], "operator.interrupted");
    client.finish().await;
}

struct FailingSink;

impl AuditSink for FailingSink {
    fn append(&mut self, _line: &str) -> std::io::Result<()> {
        Err(std::io::Error::other("disk full"))
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn nothing_reaches_the_wire_when_its_audit_record_cannot_be_written() {
    let mut setup = setup();
    setup.options.audit = Some(AuditLog::with_sink(Box::new(FailingSink)));
    let mut client = setup.start();
    client.initialize().await;
    // session/new audits `invoked` first: without an audit log there is no session.
    let cwd = client.project();
    let (_, answer) = client.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("disk full"));
    client.finish().await;
}

#[tokio::test]
async fn a_server_does_not_start_on_a_log_another_writer_holds_and_names_it() {
    let mut setup = setup();
    let path = setup.root.path().join("audit.jsonl");
    let _holder = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    setup.options.audit = None;
    setup.options.audit_log = Some(path.clone());
    let (_input, server_read) = tokio::io::duplex(1 << 16);
    let (server_write, _output) = tokio::io::duplex(1 << 16);
    let served = tokio::time::timeout(WAIT, server::serve(Tester, setup.options, server_read, server_write));
    let error = served.await.expect("serve returns at once").unwrap_err().to_string();
    let expected = format!(
        "the audit log {} is locked for writing by another handle in this process",
        path.display()
    );
    assert!(error.contains(&expected), "{error}");
}

#[tokio::test]
async fn a_server_starts_on_a_log_torn_by_a_crash_and_continues_its_chain() {
    let mut setup = setup();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    let event = AuditEvent::lifecycle("reviewer", "sess-1", Lifecycle::Invoked, None);
    let line = log.record(event).unwrap().line();
    drop(log);
    // A crash in the middle of the next record's write.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&line.as_bytes()[..line.len() / 2]);
    std::fs::write(&path, &bytes).unwrap();
    setup.options.audit = None;
    setup.options.audit_log = Some(path.clone());
    let (client, _session) = setup.ready().await;
    client.finish().await;
    let summary = agentacp::audit::verify_file(&path).expect("the chain goes on");
    let text = std::fs::read_to_string(&path).unwrap();
    let actions: Vec<String> = text
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["action"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        actions[..3],
        ["operator.invoked", "audit.recovered", "operator.invoked"]
    );
    assert_eq!(summary.records as usize, actions.len());
    assert!(path.with_file_name("audit.jsonl.torn-1").is_file());
}

#[tokio::test]
async fn end_of_input_interrupts_a_running_turn_and_serve_returns() {
    let setup = setup();
    let audit = setup.audit.clone();
    let (mut client, session) = setup.ready().await;
    client.prompt(&session, "/forever").await;
    client.next().await;
    client.finish().await;
    assert_eq!(
        audit_actions(&audit).last().map(String::as_str),
        Some("operator.interrupted")
    );
}

#[tokio::test]
async fn session_load_replays_history_before_answering_even_after_a_restart() {
    let state = tempfile::tempdir().unwrap();
    let mut first = setup();
    first.options.store = Some(Arc::new(FileStore::open(state.path()).unwrap()));
    let root = first.root.path().to_path_buf();
    let mut client = first.start();
    client.initialize().await;
    let session = client.new_session().await;
    let id = client.prompt(&session, "hello").await;
    client.until_answer(id).await;
    let cwd = client.project();
    // Keep the root alive across the restart.
    let Client { pipe, root: kept } = client;
    pipe.finish().await;

    let mut second = setup();
    second.root = kept;
    second.options.workspace_root = Some(root);
    second.options.store = Some(Arc::new(FileStore::open(state.path()).unwrap()));
    let mut client = second.start();
    let (_, init) = client.call("initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    let (replayed, answer) = client
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(kinds(&replayed), ["user_message_chunk", "agent_message_chunk"]);
    assert_eq!(texts(&replayed), ["hello", "hello"]);
    let (_, unknown) = client
        .call(
            "session/load",
            json!({"sessionId": "sess_nope", "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    // The loaded session takes prompts.
    let id = client.prompt(&session, "again").await;
    let (_, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.finish().await;
    let history = FileStore::open(state.path())
        .unwrap()
        .load(&session)
        .unwrap()
        .unwrap()
        .history;
    assert_eq!(history.len(), 4, "the second turn is recorded too");
}

#[test]
fn audit_events_build_the_lifecycle_record_the_runtime_writes() {
    // The runtime writes lifecycle records through this constructor; keep its shape pinned.
    let event = AuditEvent::lifecycle("op", "sess_1", agentacp::audit::Lifecycle::Suspended, None);
    let sink = MemorySink::new();
    AuditLog::with_sink(Box::new(sink.clone())).record(event).unwrap();
    let record: Value = serde_json::from_str(&sink.lines()[0]).unwrap();
    assert_eq!(record["action"], "operator.suspended");
    assert_eq!(record["subject"]["ref"], "sess_1");
}

/// Issue #23.17: after the write timeout (the client stopped reading but kept its end open),
/// the server went on reading requests and answering none. It now closes the connection:
/// `serve` returns, with an error saying why, and the client's reads see end of file.
#[tokio::test]
async fn a_client_that_stops_reading_gets_its_connection_closed() {
    let mut setup = setup();
    setup.options.write_timeout = Duration::from_millis(200);
    let (mut client, session) = setup.ready().await;
    // Far more output than the pipe holds, and nobody reads it.
    client.prompt(&session, "/stream 100000").await;
    let error = client
        .pipe
        .ended()
        .await
        .expect_err("a connection given up on is an error");
    assert!(error.to_string().contains("stopped reading"), "{error}");
    // What was queued before is readable; then end of file, not a hang.
    assert!(client.pipe.drained().await, "the client sees end of file");
}

/// Issue #23.16: a connection may not open sessions without bound.
#[tokio::test]
async fn sessions_beyond_the_limit_are_refused_with_a_clear_error() {
    let mut setup = setup();
    setup.options.max_sessions = 3;
    let (mut client, _first) = setup.ready().await;
    client.new_session().await;
    client.new_session().await;
    let cwd = client.project();
    let (_, answer) = client.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("AGENTACP_MAX_SESSIONS"),
        "{answer}"
    );
    client.finish().await;
}

/// The test operator, whose `session/load` waits until the test lets it finish.
#[acp_operator(manifest = "tests/operators/test-operator/ACP.md")]
struct SlowLoader {
    release: Arc<tokio::sync::Semaphore>,
}

impl SlowLoaderServer for SlowLoader {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        Tester.prompt(turn, request).await
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        match tokio::time::timeout(WAIT, self.release.acquire()).await {
            Ok(Ok(permit)) => permit.forget(),
            _ => return Err(Error::msg("the test never released the load")),
        }
        Ok(wire::LoadSessionResponse::default())
    }
}

/// A server whose loads wait for `release`, with `max_sessions`.
fn slow_loader(max_sessions: usize) -> (Client, Arc<tokio::sync::Semaphore>) {
    let mut setup = setup();
    setup.options.max_sessions = max_sessions;
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let client = setup.start_with(SlowLoader {
        release: release.clone(),
    });
    (client, release)
}

/// Review of #18: a session was marked loaded only when its load ended, so a prompt sent
/// meanwhile ran, and the end of the load replaced the session's entry, dropping the handle
/// that cancels that prompt (`session/cancel` then reached nothing).
#[tokio::test]
async fn a_prompt_sent_while_its_session_loads_is_refused_and_the_session_stays_cancellable() {
    let (mut client, release) = slow_loader(8);
    client.initialize().await;
    let session = client.new_session().await;
    let load = client.start_load(&session).await;
    let prompt = client.prompt(&session, "hello").await;
    let (_, refused) = client.until_answer(prompt).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("being loaded"), "{message}");
    release.add_permits(1);
    let (_, loaded) = client.until_answer(load).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let prompt = client.prompt(&session, "/forever").await;
    client.next().await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}))
        .await;
    let (_, answer) = client.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    client.finish().await;
}

/// Review of #18: a load whose request was cancelled (`$/cancel_request` aborts its task) left
/// its session marked as being loaded for good: every later prompt, close or load of it was
/// refused. Now it is as it was before the load.
#[tokio::test]
async fn a_cancelled_load_leaves_the_session_as_it_was() {
    let (mut client, _release) = slow_loader(8);
    client.initialize().await;
    let session = client.new_session().await;
    let load = client.start_load(&session).await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": load}}))
        .await;
    let (_, cancelled) = client.until_answer(load).await;
    assert_eq!(cancelled["error"]["code"], -32800, "{cancelled}");
    let prompt = client.prompt(&session, "hello").await;
    let (_, answer) = client.until_answer(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    client.finish().await;
}

/// Review of #18: the session limit was checked when a load was asked for and the session
/// counted only when the load ended, so loads side by side could open more than the limit.
#[tokio::test]
async fn loads_under_way_count_against_the_session_limit() {
    let (mut client, release) = slow_loader(2);
    client.initialize().await;
    let open = client.new_session().await;
    let mut stored = Vec::new();
    for _ in 0..2 {
        let session = client.new_session().await;
        let (_, closed) = client.call("session/close", json!({"sessionId": session})).await;
        assert!(closed.get("result").is_some(), "{closed}");
        stored.push(session);
    }
    let first = client.start_load(&stored[0]).await;
    let refused = client.start_load(&stored[1]).await;
    let (_, refused) = client.until_answer(refused).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("AGENTACP_MAX_SESSIONS"),
        "{refused}"
    );
    release.add_permits(1);
    let (_, loaded) = client.until_answer(first).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    for session in [&open, &stored[0]] {
        let id = client.prompt(session, "hello").await;
        let (_, answer) = client.until_answer(id).await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    client.finish().await;
}

/// Issue #13.1: `Turn::update` sent any value, so operator code could emit `tool_call` /
/// `tool_call_update` updates that governance never saw and audit never recorded.
#[tokio::test]
async fn an_ungoverned_tool_call_update_is_refused_and_never_sent() {
    let setup = setup();
    let audit = setup.audit.clone();
    let (mut client, session) = setup.ready().await;
    for kind in ["tool_call", "tool_call_update"] {
        let id = client.prompt(&session, &format!("/raw-tool-call {kind}")).await;
        let (before, answer) = client.until_answer(id).await;
        assert!(
            before.iter().all(|m| m["params"]["update"]["toolCallId"] != "sneaky"),
            "{kind} reached the client: {before:?}"
        );
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains("turn.tool_call"),
            "{answer}"
        );
    }
    assert!(
        !audit.contents().contains("sneaky"),
        "nothing about it was recorded as a tool call"
    );
    client.finish().await;
}

/// Issue #13.1: the typed `Turn::update` sends what `wire::OperatorUpdate` holds, tagged as
/// the revision's `SessionUpdate`.
#[tokio::test]
async fn a_typed_operator_update_reaches_the_client_as_its_session_update() {
    let setup = setup();
    let (mut client, session) = setup.ready().await;
    let id = client.prompt(&session, "/plan").await;
    let (before, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let update = &before.last().expect("one update")["params"]["update"];
    assert_eq!(update["sessionUpdate"], "plan", "{update}");
    assert_eq!(update["entries"][0]["content"], "typed", "{update}");
    assert_eq!(update["entries"][0]["priority"], "high", "{update}");
    client.finish().await;
}

/// Issue #13.3: only allow-once / reject-once were offered, so editors could not show "Always
/// allow". Both `always` options are offered where governance permits, remembered for the
/// session, honoured without asking again, and audited.
#[tokio::test]
async fn always_answers_are_offered_remembered_for_the_session_and_audited() {
    for (option, expect_run) in [("allow-always", true), ("reject-always", false)] {
        let setup = setup();
        let audit = setup.audit.clone();
        let (mut client, session) = setup.ready().await;
        let id = client.prompt(&session, "/tool write").await;
        let asked = answer_permission(
            &mut client,
            &audit,
            json!({"outcome": {"outcome": "selected", "optionId": option}}),
        )
        .await;
        let kinds_offered: Vec<&str> = asked.last().unwrap()["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|o| o["kind"].as_str())
            .collect();
        assert_eq!(
            kinds_offered,
            ["allow_once", "allow_always", "reject_once", "reject_always"]
        );
        client.until_answer(id).await;
        // The same tool again: no request this time.
        let id = client.prompt(&session, "/tool write").await;
        let (before, _) = client.until_answer(id).await;
        assert!(
            before.iter().all(|m| m["method"] != "session/request_permission"),
            "{option}: asked again: {before:?}"
        );
        let last = texts(&before).last().cloned().unwrap_or_default();
        assert_eq!(last.starts_with("Completed("), expect_run, "{option}: {last}");
        let calls: Vec<Value> = audit
            .lines()
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|r| r["action"] == "tool.call")
            .map(|r| r["metadata"]["aip44"]["approval"].clone())
            .collect();
        if expect_run {
            assert_eq!(calls[0]["approvedBy"], "client:test (allow_always)", "{calls:?}");
            assert_eq!(calls[1]["approvedBy"], "client:test (allow_always)", "{calls:?}");
        } else {
            assert!(
                calls[0]["reason"].as_str().unwrap().contains("reject_always"),
                "{calls:?}"
            );
            assert!(
                calls[1]["reason"].as_str().unwrap().contains("reject_always"),
                "{calls:?}"
            );
        }
        client.finish().await;
    }
}

/// A tool call cancelled while it ran left no `tool.call` record, though it may have done
/// something: it is recorded as `cancelled while running`, with its approval.
#[tokio::test]
async fn a_tool_call_cancelled_while_it_runs_is_still_audited() {
    let setup = setup();
    let audit = setup.audit.clone();
    let (mut client, session) = setup.ready().await;
    let id = client.prompt(&session, "/tool-forever").await;
    loop {
        let message = client.next().await;
        if message["params"]["update"]["status"] == "in_progress" {
            break;
        }
    }
    client.cancel(&session).await;
    let (_, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let records = tool_call_records(&audit);
    assert_eq!(records.len(), 1, "{records:?}");
    let record = records[0].to_string();
    assert!(record.contains("cancelled while running"), "{record}");
    client.finish().await;
}

/// Every editor capability, as an editor such as Zed offers them.
fn full_editor() -> Value {
    json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true})
}

/// Started, initialized as an editor offering its files and terminal, with one session.
async fn editor_ready(setup: Setup) -> (Client, MemorySink, String) {
    let audit = setup.audit.clone();
    let mut client = setup.start();
    client.initialize_offering(full_editor()).await;
    let session = client.new_session().await;
    (client, audit, session)
}

/// Answers the next permission request `allow-once`.
async fn allow_once(client: &mut Client, audit: &MemorySink) {
    answer_permission(
        client,
        audit,
        json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
    )
    .await;
}

/// The tool-call records of the audit log.
fn tool_call_records(sink: &MemorySink) -> Vec<Value> {
    sink.lines()
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["action"] == "tool.call")
        .collect()
}

/// Issue #13 (servers that use the editor): a read goes to the editor as `fs/read_text_file`
/// with the absolute path inside the session, as a governed tool call (a read: allowed by
/// `on-mutate` without asking), shown to the editor and audited with a summary, not the text.
#[tokio::test]
async fn an_editor_read_is_a_governed_audited_tool_call_answered_by_the_editor() {
    let (mut client, audit, session) = editor_ready(setup()).await;
    let id = client.prompt(&session, "/editor-read notes.txt").await;
    let read = client.until_request("fs/read_text_file").await;
    let expected_path = format!("{}/notes.txt", client.project());
    assert_eq!(read["params"]["path"], expected_path.as_str(), "{read}");
    assert_eq!(read["params"]["sessionId"], session.as_str(), "{read}");
    client.answer(&read, json!({"content": "unsaved buffer"})).await;
    let (after, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(texts(&after), ["ok: unsaved buffer"]);
    let records = tool_call_records(&audit);
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0].to_string();
    assert!(
        record.contains("fs/read_text_file") && record.contains("\"bytes\":14"),
        "{record}"
    );
    assert!(
        !record.contains("unsaved buffer"),
        "the file's text stays out of the log: {record}"
    );
    client.finish().await;
}

/// A write changes something: governance asks, and the write reaches the editor only after
/// the user approved it; the approval is audited.
#[tokio::test]
async fn an_editor_write_asks_first_and_is_sent_only_when_approved() {
    let (mut client, audit, session) = editor_ready(setup()).await;
    let id = client.prompt(&session, "/editor-write out.txt hello").await;
    let asked = answer_permission(
        &mut client,
        &audit,
        json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
    )
    .await;
    assert_eq!(
        asked.last().unwrap()["params"]["toolCall"]["name"],
        "fs/write_text_file"
    );
    let write = client.until_request("fs/write_text_file").await;
    assert_eq!(write["params"]["content"], "hello", "{write}");
    client.answer(&write, json!({})).await;
    let (after, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(texts(&after), ["ok: written"]);
    let record = tool_call_records(&audit)[0].to_string();
    assert!(record.contains("client:test"), "who approved is recorded: {record}");

    // Rejected: the editor never sees the write.
    let id = client.prompt(&session, "/editor-write out.txt again").await;
    answer_permission(
        &mut client,
        &audit,
        json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}}),
    )
    .await;
    let (after, _) = client.until_answer(id).await;
    assert!(
        kinds(&after).iter().all(|kind| kind != "fs/write_text_file"),
        "{after:?}"
    );
    assert!(texts(&after)[0].starts_with("error: rejected"), "{after:?}");
    client.finish().await;
}

/// A command runs in the editor's terminal only after approval, and the terminal is always
/// released; one that outlives its timeout is killed, then its output collected.
#[tokio::test]
async fn an_editor_command_is_approved_run_waited_for_and_released() {
    let (mut client, audit, session) = editor_ready(setup()).await;
    let id = client.prompt(&session, "/editor-run cargo 60000").await;
    allow_once(&mut client, &audit).await;
    let create = client.until_request("terminal/create").await;
    assert_eq!(create["params"]["command"], "cargo", "{create}");
    assert_eq!(create["params"]["args"], json!(["--flag"]), "{create}");
    assert_eq!(create["params"]["cwd"], client.project().as_str(), "{create}");
    client.answer(&create, json!({"terminalId": "term-1"})).await;
    let wait = client.until_request("terminal/wait_for_exit").await;
    assert_eq!(wait["params"]["terminalId"], "term-1");
    client.answer(&wait, json!({"exitCode": 0})).await;
    let output = client.until_request("terminal/output").await;
    client
        .answer(&output, json!({"output": "built", "truncated": false}))
        .await;
    let release = client.until_request("terminal/release").await;
    client.answer(&release, json!({})).await;
    let (after, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(texts(&after), ["ok: Some(0) None built"]);

    // Outliving its timeout: killed, output read, released.
    let id = client.prompt(&session, "/editor-run sleep 50").await;
    allow_once(&mut client, &audit).await;
    let create = client.until_request("terminal/create").await;
    client.answer(&create, json!({"terminalId": "term-2"})).await;
    let _never_answered = client.until_request("terminal/wait_for_exit").await;
    let kill = client.until_request("terminal/kill").await;
    assert_eq!(kill["params"]["terminalId"], "term-2");
    client.answer(&kill, json!({})).await;
    let output = client.until_request("terminal/output").await;
    client
        .answer(&output, json!({"output": "partial", "truncated": false}))
        .await;
    let release = client.until_request("terminal/release").await;
    client.answer(&release, json!({})).await;
    let (after, _) = client.until_answer(id).await;
    assert_eq!(texts(&after), ["ok: None Some(\"timeout\") partial"]);
    client.finish().await;
}

/// A cancelled turn kills and releases the command it was waiting for (the turn's future is
/// dropped at the cancel, so this happens from a task of its own), and the call, which may
/// have done something, is in the audit log.
#[tokio::test]
async fn a_cancel_kills_and_releases_the_editor_command() {
    let (mut client, audit, session) = editor_ready(setup()).await;
    let id = client.prompt(&session, "/editor-run server 60000").await;
    allow_once(&mut client, &audit).await;
    let create = client.until_request("terminal/create").await;
    client.answer(&create, json!({"terminalId": "term-3"})).await;
    client.until_request("terminal/wait_for_exit").await;
    client.cancel(&session).await;
    let (mut killed, mut released, mut stop_reason) = (false, false, None);
    while !(killed && released && stop_reason.is_some()) {
        let message = client.next().await;
        match message["method"].as_str() {
            Some("terminal/kill") => {
                assert!(!released, "killed before it is released");
                assert_eq!(message["params"]["terminalId"], "term-3");
                killed = true;
                client.answer(&message, json!({})).await;
            }
            Some("terminal/release") => {
                released = true;
                client.answer(&message, json!({})).await;
            }
            _ if message["id"] == id => stop_reason = Some(message["result"]["stopReason"].clone()),
            _ => {}
        }
    }
    assert_eq!(stop_reason, Some(json!("cancelled")));
    let record = tool_call_records(&audit)[0].to_string();
    assert!(
        record.contains("terminal/create") && record.contains("cancelled while running"),
        "{record}"
    );
    client.finish().await;
}

/// Nothing reaches the editor that it did not offer, that the manifest does not declare, or
/// that lies outside the session's folder; the operator gets an error naming why.
#[tokio::test]
async fn editor_calls_are_refused_locally_when_not_offered_not_declared_or_outside_the_session() {
    // Not offered: the client advertised no `fs`.
    let (mut client, session) = setup().ready().await;
    let id = client.prompt(&session, "/editor-read notes.txt").await;
    let (before, _) = client.until_answer(id).await;
    assert_eq!(
        kinds(&before),
        ["agent_message_chunk"],
        "no request, no tool call: {before:?}"
    );
    assert!(
        texts(&before)[0].contains("does not offer `fs/read_text_file`"),
        "{before:?}"
    );
    client.finish().await;

    // Outside the session's folder.
    let (mut client, _, session) = editor_ready(setup()).await;
    let id = client.prompt(&session, "/editor-read ../../etc/passwd").await;
    let (before, _) = client.until_answer(id).await;
    assert_eq!(kinds(&before), ["agent_message_chunk"], "{before:?}");
    assert!(texts(&before)[0].contains("outside the session's folder"), "{before:?}");
    client.finish().await;

    // Not declared in the manifest, although the editor offers it.
    let mut client = setup().start_with(Bystander);
    client.initialize_offering(full_editor()).await;
    let session = client.new_session().await;
    let id = client.prompt(&session, "read").await;
    let (before, _) = client.until_answer(id).await;
    assert_eq!(kinds(&before), ["agent_message_chunk"], "{before:?}");
    assert!(texts(&before)[0].contains("not declared in ACP.md"), "{before:?}");
    client.finish().await;
}

/// An editor that never answers does not hang the turn: the call fails after the editor
/// timeout, and the failure is audited.
#[tokio::test]
async fn an_editor_that_never_answers_fails_the_call_after_the_editor_timeout() {
    let mut setup = setup();
    setup.options.editor_timeout = Duration::from_millis(200);
    let (mut client, audit, session) = editor_ready(setup).await;
    let id = client.prompt(&session, "/editor-read notes.txt").await;
    let _unanswered = client.until_request("fs/read_text_file").await;
    let (after, answer) = client.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(texts(&after)[0].contains("no answer within 200 ms"), "{after:?}");
    assert!(tool_call_records(&audit)[0].to_string().contains("no answer within"));
    client.finish().await;
}
