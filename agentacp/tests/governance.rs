//! Governance fidelity (issue #13), driven over raw JSON-RPC like `tests/server.rs`: the
//! policies the operator lists (`governance.policies`, resolved through the workspace registry
//! at build time) decide tool calls, the operator's `memory` and `skills` reach operator code,
//! and `operator-context` memory outlives the session.

use std::path::Path;
use std::sync::Arc;

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::governance::MemoryKind;
use agentacp::prelude::*;
use agentacp::server::MemoryStore;
use serde_json::Value;

mod common;

use common::{Pipe, WAIT, texts};

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

    async fn authenticate(&self, _request: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
        Ok(wire::AuthenticateResponse::default())
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }
}

/// A server on an in-memory pipe, its workspace root and state folder under `dir`.
fn start(dir: &Path, audit: &MemorySink) -> Pipe {
    std::fs::create_dir_all(dir.join("project")).unwrap();
    let options = ServerOptions {
        workspace_root: Some(dir.to_path_buf()),
        state_dir: Some(dir.join("state")),
        audit: Some(AuditLog::with_sink(Box::new(audit.clone()))),
        store: Some(Arc::new(MemoryStore::default())),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    };
    Pipe::serve(PolicyTester, options)
}

/// Initialized, with one session in `dir/project`.
async fn open_session(pipe: &mut Pipe, dir: &Path) -> String {
    pipe.call(
        "initialize",
        json!({"protocolVersion": 1, "clientInfo": {"name": "test"}}),
    )
    .await;
    let cwd = dir.join("project").to_string_lossy().into_owned();
    let (_, answer) = pipe.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    answer["result"]["sessionId"].as_str().unwrap().to_string()
}

/// One turn to `end_turn`: the messages before its answer. A permission request on the way
/// is answered with the option `permission` (and kept in the list).
async fn turn(pipe: &mut Pipe, session: &str, text: &str, permission: Option<&str>) -> Vec<Value> {
    let id = pipe.prompt(session, text).await;
    let mut before = Vec::new();
    loop {
        let message = pipe.next().await;
        if message["id"] == id && message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            return before;
        }
        if message["method"] == "session/request_permission" {
            let option = permission.expect("no permission request was expected");
            let answer = json!({"outcome": {"outcome": "selected", "optionId": option}});
            pipe.answer(&message, answer).await;
        }
        before.push(message);
    }
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
    let session = open_session(&mut client, dir.path()).await;

    let denied = turn(&mut client, &session, "/tool delete-file", None).await;
    assert_eq!(methods_and_updates(&denied), ["agent_message_chunk"], "{denied:?}");
    let text = &texts(&denied)[0];
    assert!(text.starts_with("Denied(") && text.contains("no-deletes"), "{text}");
    assert!(
        audit.contents().contains("no-deletes"),
        "the denial names the policy in the audit log"
    );

    let asked = turn(&mut client, &session, "/tool run-tests", Some("allow-once")).await;
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

    let rejected = turn(&mut client, &session, "/tool run-tests", Some("reject-once")).await;
    assert!(
        texts(&rejected).last().unwrap().starts_with("Rejected("),
        "{rejected:?}"
    );

    let allowed = turn(&mut client, &session, "/tool write-file", None).await;
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
    let session = open_session(&mut client, dir.path()).await;
    let profile = turn(&mut client, &session, "/profile", None).await;
    assert_eq!(
        texts(&profile),
        ["append-only review,lint policy:no-deletes,policy:ask-tests true"]
    );
    let remembered = turn(&mut client, &session, "/remember first", None).await;
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
    let session = open_session(&mut client, dir.path()).await;
    let recalled = turn(&mut client, &session, "/recall", None).await;
    assert_eq!(texts(&recalled), [r#"[{"note":"first"}]"#]);
    turn(&mut client, &session, "/remember second", None).await;
    let (_, closed) = client.call("session/close", json!({"sessionId": session})).await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let kept = std::fs::read_to_string(&memory_file).unwrap();
    assert_eq!(kept, "{\"note\":\"first\"}\n{\"note\":\"second\"}\n");
    let id = client.prompt(&session, "/recall").await;
    let (_, gone) = client.until_answer(id).await;
    assert_eq!(gone["error"]["code"], -32002, "a closed session is gone: {gone}");
    client.finish().await;
}

/// One WebSocket connection to the listener at `addr`, as raw JSON-RPC.
struct Remote {
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    next_id: i64,
}

impl Remote {
    async fn connect(addr: std::net::SocketAddr) -> Remote {
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(format!("ws://{addr}/acp")))
            .await
            .expect("upgraded in time")
            .expect("upgraded");
        Remote { ws, next_id: 0 }
    }

    /// Sends a request; its answer (what comes before it is skipped).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        use futures_util::{SinkExt, StreamExt};
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let text = tokio_tungstenite::tungstenite::Message::text(request.to_string());
        self.ws.send(text).await.unwrap();
        loop {
            let message = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("answered in time")
                .expect("the connection is open")
                .unwrap();
            let Ok(text) = message.into_text() else { continue };
            let Ok(message) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            if message["id"] == self.next_id && message.get("method").is_none() {
                return message;
            }
        }
    }
}

/// The `operator-context` memory is one for the process: two connections that each opened it
/// and then append an entry keep both. Before, each connection had a memory of its own, and
/// the last one to write it replaced the other's entry.
#[tokio::test]
async fn two_connections_keep_each_others_operator_memory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("project")).unwrap();
    let options = ServerOptions {
        workspace_root: Some(dir.path().to_path_buf()),
        state_dir: Some(dir.path().join("state")),
        audit: Some(AuditLog::with_sink(Box::new(MemorySink::new()))),
        store: Some(Arc::new(MemoryStore::default())),
        ..ServerOptions::default()
    };
    let listener = agentacp::server::websocket::Listener::bind(agentacp::server::websocket::ListenOptions::new(
        "127.0.0.1:0".parse().unwrap(),
    ))
    .await
    .unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listener.serve(PolicyTester, options, async move {
        let _ = stopped.await;
    }));
    let cwd = dir.path().join("project").canonicalize().unwrap();
    let mut connections = Vec::new();
    for _ in 0..2 {
        let mut remote = Remote::connect(addr).await;
        remote.call("initialize", json!({"protocolVersion": 1})).await;
        let session = remote.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
        let session = session["result"]["sessionId"].as_str().unwrap().to_string();
        let prompt = |text: &str| json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        let recalled = remote.call("session/prompt", prompt("/recall")).await;
        assert_eq!(recalled["result"]["stopReason"], "end_turn", "{recalled}");
        connections.push((remote, session));
    }
    for (n, (remote, session)) in connections.iter_mut().enumerate() {
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": format!("/remember note-{n}")}]});
        let remembered = remote.call("session/prompt", params).await;
        assert_eq!(remembered["result"]["stopReason"], "end_turn", "{remembered}");
    }
    for (remote, session) in &mut connections {
        let closed = remote.call("session/close", json!({"sessionId": session})).await;
        assert_eq!(closed["result"], json!({}), "{closed}");
    }
    let kept = std::fs::read_to_string(dir.path().join("state/memory/operator.jsonl")).unwrap();
    assert_eq!(kept, "{\"note\":\"note-0\"}\n{\"note\":\"note-1\"}\n");
    let _ = stop.send(());
    tokio::time::timeout(WAIT * 2, server).await.unwrap().unwrap().unwrap();
}
