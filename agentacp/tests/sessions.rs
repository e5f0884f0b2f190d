//! The optional session methods a manifest declares in `metadata.agentacp.sessions`
//! (`session/list`, `resume`, `close`, `delete`): advertised exactly when declared, answered
//! by the runtime from its session store, audited; undeclared ones are `-32601`.

use std::sync::Arc;

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::prelude::*;
use agentacp::server::{MemoryStore, SessionStore};
use serde_json::Value;

mod common;

use common::{Pipe, WAIT};

/// An operator whose manifest declares every optional session method.
#[acp_operator(manifest = "tests/operators/test-sessions/ACP.md")]
struct Archivist;

/// The same operator without the declaration.
#[acp_operator(manifest = "tests/operators/test-operator-no-editor/ACP.md")]
struct Plain;

ok_server!(ArchivistServer for Archivist, GovernanceAware);
ok_server!(PlainServer for Plain, GovernanceAware);

/// One connection to `operator` over `store`, initialized.
async fn connect(
    operator: impl agentacp::server::Operator,
    root: &std::path::Path,
    store: Arc<MemoryStore>,
    audit: &MemorySink,
) -> (Pipe, Value) {
    let options = ServerOptions {
        workspace_root: Some(root.to_path_buf()),
        audit: Some(AuditLog::with_sink(Box::new(audit.clone()))),
        store: Some(store),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    };
    let mut pipe = Pipe::serve(operator, options);
    let params =
        json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"}, "clientCapabilities": {}});
    let (_, answer) = pipe.call("initialize", params).await;
    (pipe, answer)
}

async fn new_session(pipe: &mut Pipe, cwd: &std::path::Path) -> String {
    let (_, answer) = pipe.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    answer["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string()
}

fn ids(answer: &Value) -> Vec<String> {
    answer["result"]["sessions"]
        .as_array()
        .expect("a list of sessions")
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn declared_session_methods_are_advertised_answered_and_audited() {
    let root = tempfile::tempdir().unwrap();
    let (one, two) = (root.path().join("one"), root.path().join("two"));
    std::fs::create_dir(&one).unwrap();
    std::fs::create_dir(&two).unwrap();
    let store = Arc::new(MemoryStore::default());
    let audit = MemorySink::new();

    let (mut first, init) = connect(Archivist, root.path(), store.clone(), &audit).await;
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}, "delete": {}}),
        "{init}"
    );
    let a = new_session(&mut first, &one).await;
    let b = new_session(&mut first, &two).await;
    let (_, all) = first.call("session/list", json!({})).await;
    let mut listed = ids(&all);
    listed.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(listed, want, "{all}");
    let (_, in_two) = first.call("session/list", json!({"cwd": two})).await;
    assert_eq!(ids(&in_two), [b.as_str()], "{in_two}");
    assert_eq!(
        in_two["result"]["sessions"][0]["cwd"],
        json!(two.canonicalize().unwrap())
    );
    let (_, closed) = first.call("session/close", json!({"sessionId": a})).await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    first.finish().await;

    // A later connection resumes a stored session without a replay, and can prompt in it.
    let (mut second, _) = connect(Archivist, root.path(), store.clone(), &audit).await;
    let (messages, resumed) = second.call("session/resume", json!({"sessionId": a, "cwd": one})).await;
    assert_eq!(resumed["result"], json!({}), "{resumed}");
    assert!(
        messages.iter().all(|m| m["method"] != "session/update"),
        "resume replays nothing: {messages:?}"
    );
    let id = second.prompt(&a, "hi").await;
    let (_, answer) = second.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (_, elsewhere) = second.call("session/resume", json!({"sessionId": b, "cwd": one})).await;
    assert_eq!(
        elsewhere["error"]["code"], -32602,
        "resumed in another folder: {elsewhere}"
    );
    let (_, deleted) = second.call("session/delete", json!({"sessionId": a})).await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let (_, left) = second.call("session/list", json!({})).await;
    assert_eq!(ids(&left), [b.as_str()], "{left}");
    let (_, again) = second.call("session/delete", json!({"sessionId": a})).await;
    assert_eq!(again["error"]["code"], -32002, "{again}");
    second.finish().await;

    let actions: Vec<String> = audit
        .lines()
        .iter()
        .filter_map(|line| {
            serde_json::from_str::<Value>(line).ok()?["action"]
                .as_str()
                .map(str::to_string)
        })
        .filter(|action| action.starts_with("session."))
        .collect();
    assert_eq!(actions, ["session.close", "session.resume", "session.delete"]);
}

#[tokio::test]
async fn session_list_pages_through_many_sessions_and_refuses_a_cursor_it_did_not_give() {
    let root = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::default());
    for i in 0..120 {
        store.create(&format!("sess_{i:03}"), root.path()).unwrap();
    }
    let audit = MemorySink::new();
    let (mut pipe, _) = connect(Archivist, root.path(), store, &audit).await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let (_, page) = pipe.call("session/list", params).await;
        seen.extend(ids(&page));
        pages += 1;
        match page["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 120, "every session once");
    let (_, bad) = pipe.call("session/list", json!({"cursor": "page-two"})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    pipe.finish().await;
}

#[tokio::test]
async fn undeclared_session_methods_are_neither_advertised_nor_answered() {
    let root = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let (mut pipe, init) = connect(Plain, root.path(), Arc::new(MemoryStore::default()), &audit).await;
    assert!(
        init["result"]["agentCapabilities"].get("sessionCapabilities").is_none(),
        "{init}"
    );
    for method in ["session/list", "session/resume", "session/delete"] {
        let (_, answer) = pipe
            .call(method, json!({"sessionId": "sess_x", "cwd": root.path()}))
            .await;
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
    }
    pipe.finish().await;
}
