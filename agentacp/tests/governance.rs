//! Governance fidelity (issue #13), driven over raw JSON-RPC like `tests/server.rs`: the
//! policies the operator lists (`governance.policies`, resolved through the workspace registry
//! at build time) decide tool calls, the operator's `memory` and `skills` reach operator code,
//! and `operator-context` memory outlives the session.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::governance::MemoryKind;
use agentacp::prelude::*;
use agentacp::server::{self, MemoryStore};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(10);

#[acp_operator(manifest = "tests/operators/test-policies/ACP.md")]
struct PolicyTester;

impl PolicyTesterServer for PolicyTester {
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
            ["/tool", name] => {
                let outcome = turn
                    .tool_call(*name, json!({}))
                    .kind(ToolKind::Edit)
                    .run(|_| async move { Ok::<_, String>(json!({"done": true})) })
                    .await?;
                turn.message(format!("{outcome:?}")).await?;
            }
            ["/remember", note] => {
                turn.session().memory().append(json!({"note": note}));
                let refused = turn.session().memory().redact(0, "test").is_err();
                turn.message(format!("remembered; redaction refused: {refused}"))
                    .await?;
            }
            ["/recall"] => {
                let entries = Value::Array(turn.session().memory().entries());
                turn.message(entries.to_string()).await?;
            }
            ["/profile"] => {
                let profile = turn.session().operator();
                let memory = profile.memory.as_ref().expect("the operator has memory");
                let skills: Vec<&str> = profile.skills.iter().map(|skill| skill.id.as_str()).collect();
                let persisted = memory.kind == MemoryKind::OperatorContext && turn.session().memory().is_persisted();
                turn.message(format!(
                    "{} {} {} {persisted}",
                    memory.policy.as_str(),
                    skills.join(","),
                    profile.policies.join(",")
                ))
                .await?;
            }
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

struct Client {
    writer: DuplexStream,
    lines: Lines<BufReader<DuplexStream>>,
    server: JoinHandle<agentacp::Result<()>>,
    next_id: i64,
}

/// A server on an in-memory pipe, its workspace root and state folder under `dir`.
fn start(dir: &Path, audit: &MemorySink) -> Client {
    std::fs::create_dir_all(dir.join("project")).unwrap();
    let options = ServerOptions {
        workspace_root: Some(dir.to_path_buf()),
        state_dir: Some(dir.join("state")),
        audit: Some(AuditLog::with_sink(Box::new(audit.clone()))),
        store: Some(Arc::new(MemoryStore::default())),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    };
    let (writer, server_read) = tokio::io::duplex(1 << 16);
    let (server_write, read) = tokio::io::duplex(1 << 16);
    let server = tokio::spawn(server::serve(PolicyTester, options, server_read, server_write));
    Client {
        writer,
        lines: BufReader::new(read).lines(),
        server,
        next_id: 0,
    }
}

impl Client {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("the server answered in time")
            .unwrap()
            .expect("the server is still writing");
        serde_json::from_str(&line).unwrap()
    }

    async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Messages up to the answer to `id`; a permission request on the way is answered with
    /// `permission` (and kept in the list).
    async fn until_answer(&mut self, id: i64, permission: Option<&str>) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                return (before, message);
            }
            if message["method"] == "session/request_permission" {
                let option = permission.expect("no permission request was expected");
                let answer = json!({"outcome": {"outcome": "selected", "optionId": option}});
                self.send(json!({"jsonrpc": "2.0", "id": message["id"].clone(), "result": answer}))
                    .await;
            }
            before.push(message);
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.until_answer(id, None).await.1
    }

    /// Initialized, with one session in `dir/project`.
    async fn session(&mut self, dir: &Path) -> String {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientInfo": {"name": "test"}}),
        )
        .await;
        let cwd = dir.join("project").to_string_lossy().into_owned();
        let answer = self.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
        answer["result"]["sessionId"].as_str().unwrap().to_string()
    }

    async fn prompt(&mut self, session: &str, text: &str, permission: Option<&str>) -> Vec<Value> {
        let id = self
            .request(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
            )
            .await;
        let (before, answer) = self.until_answer(id, permission).await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        before
    }

    async fn finish(self) {
        drop(self.writer);
        tokio::time::timeout(WAIT, self.server)
            .await
            .expect("serve returned after end of input")
            .unwrap()
            .unwrap();
    }
}

fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str().map(str::to_string))
        .collect()
}

fn methods_and_updates(messages: &[Value]) -> Vec<String> {
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

/// `policy:no-deletes` (from the operator's list, through the workspace registry) denies
/// `delete-file` although the operator is autonomous: nothing reaches the client and the
/// denial, naming the policy, is audited. `policy:ask-tests` asks for `run-tests`, every time
/// (no `always` options). A tool no policy matches runs unasked.
#[tokio::test]
async fn policies_from_the_operators_list_deny_and_ask() {
    let dir = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let mut client = start(dir.path(), &audit);
    let session = client.session(dir.path()).await;

    let denied = client.prompt(&session, "/tool delete-file", None).await;
    assert_eq!(methods_and_updates(&denied), ["agent_message_chunk"], "{denied:?}");
    let text = &texts(&denied)[0];
    assert!(text.starts_with("Denied(") && text.contains("no-deletes"), "{text}");
    assert!(
        audit.contents().contains("no-deletes"),
        "the denial names the policy in the audit log"
    );

    let asked = client.prompt(&session, "/tool run-tests", Some("allow-once")).await;
    let kinds = methods_and_updates(&asked);
    assert_eq!(kinds[..2], ["tool_call", "session/request_permission"], "{kinds:?}");
    let options: Vec<&str> = asked[1]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|option| option["kind"].as_str())
        .collect();
    assert_eq!(
        options,
        ["allow_once", "reject_once"],
        "a require-approval policy asks every time"
    );
    assert!(texts(&asked).last().unwrap().starts_with("Completed("), "{asked:?}");

    let rejected = client.prompt(&session, "/tool run-tests", Some("reject-once")).await;
    assert!(
        texts(&rejected).last().unwrap().starts_with("Rejected("),
        "{rejected:?}"
    );

    let allowed = client.prompt(&session, "/tool write-file", None).await;
    assert!(
        !methods_and_updates(&allowed).contains(&"session/request_permission".to_string()),
        "autonomous, and no policy matches: {allowed:?}"
    );
    client.finish().await;
}

/// `memory: {kind: operator-context, policy: append-only}` and the skills reach operator code
/// typed; what one session appends is kept when the connection ends and read back by the next
/// session of a new server; `session/close` keeps it too; the append-only policy refuses
/// redaction.
#[tokio::test]
async fn operator_memory_survives_the_end_of_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let memory_file = dir.path().join("state/memory/operator.jsonl");

    let mut client = start(dir.path(), &audit);
    let session = client.session(dir.path()).await;
    let profile = client.prompt(&session, "/profile", None).await;
    assert_eq!(
        texts(&profile),
        ["append-only review,lint policy:no-deletes,policy:ask-tests true"]
    );
    let remembered = client.prompt(&session, "/remember first", None).await;
    assert_eq!(texts(&remembered), ["remembered; redaction refused: true"]);
    client.finish().await;
    let kept = std::fs::read_to_string(&memory_file).unwrap();
    assert_eq!(kept, "{\"note\":\"first\"}\n");
    assert!(
        audit.contents().contains("\"action\":\"memory.write\""),
        "the memory write is audited"
    );

    // A new process, a new session: the memory is back.
    let mut client = start(dir.path(), &audit);
    let session = client.session(dir.path()).await;
    let recalled = client.prompt(&session, "/recall", None).await;
    assert_eq!(texts(&recalled), [r#"[{"note":"first"}]"#]);
    client.prompt(&session, "/remember second", None).await;
    let closed = client.call("session/close", json!({"sessionId": session})).await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let kept = std::fs::read_to_string(&memory_file).unwrap();
    assert_eq!(kept, "{\"note\":\"first\"}\n{\"note\":\"second\"}\n");
    let gone = client
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "/recall"}]}),
        )
        .await;
    assert_eq!(gone["error"]["code"], -32602, "a closed session is gone: {gone}");
    client.finish().await;
}
