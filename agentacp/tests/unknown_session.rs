//! Issue #45: every request that names a session the agent does not have (never made,
//! closed, deleted) is answered `-32002` "Resource not found" with the id in
//! `data.sessionId`, as ACP says; a `sessionId` of the wrong type stays `-32602`. A client
//! such as the TypeScript SDK takes the `-32002` to a second `session/close` as done.

use std::sync::Arc;

use agentacp::prelude::*;
use agentacp::server::MemoryStore;
use serde_json::Value;

mod common;

use common::{Pipe, WAIT};

// `Keeper`: every method that names a session, declared and answered (tests/common).
keeper_operator!();

/// One connection, initialized, in `root`.
async fn connect(root: &std::path::Path) -> Pipe {
    let options = ServerOptions {
        workspace_root: Some(root.to_path_buf()),
        store: Some(Arc::new(MemoryStore::default())),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    };
    let mut pipe = Pipe::serve(Keeper, options);
    let params =
        json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"}, "clientCapabilities": {}});
    let (_, answer) = pipe.call("initialize", params).await;
    assert!(answer.get("result").is_some(), "{answer}");
    pipe
}

/// The params of `method` naming `session`, otherwise valid.
fn params(method: &str, session: &str, cwd: &std::path::Path) -> Value {
    match method {
        "session/prompt" => json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        "session/load" | "session/resume" => json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        "session/set_mode" => json!({"sessionId": session, "modeId": "code"}),
        "session/set_config_option" => json!({"sessionId": session, "configId": "model", "value": "deep"}),
        _ => json!({"sessionId": session}),
    }
}

/// Every method that names a session.
const METHODS: [&str; 8] = [
    "session/prompt",
    "session/close",
    "session/delete",
    "session/resume",
    "session/load",
    "session/set_mode",
    "session/set_config_option",
    "_test/echo",
];

/// Asserts that `answer` is the unknown-session answer for `session`.
fn assert_not_found(answer: &Value, session: &str, what: &str) {
    assert_eq!(answer["error"]["code"], -32002, "{what}: {answer}");
    assert_eq!(answer["error"]["data"]["sessionId"], session, "{what}: {answer}");
}

#[tokio::test]
async fn every_method_naming_an_unknown_session_is_answered_resource_not_found() {
    let root = tempfile::tempdir().unwrap();
    let mut pipe = connect(root.path()).await;
    for method in METHODS {
        let (_, answer) = pipe.call(method, params(method, "sess_never_made", root.path())).await;
        assert_not_found(&answer, "sess_never_made", method);
    }
    // A closed session is unknown to the methods that look only at the open ones, and a
    // second close gets the same answer.
    let (_, made) = pipe
        .call("session/new", json!({"cwd": root.path(), "mcpServers": []}))
        .await;
    let session = made["result"]["sessionId"].as_str().expect("a session id").to_string();
    let (_, closed) = pipe.call("session/close", json!({"sessionId": session})).await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    for method in [
        "session/prompt",
        "session/close",
        "session/set_mode",
        "session/set_config_option",
    ] {
        let (_, answer) = pipe.call(method, params(method, &session, root.path())).await;
        assert_not_found(&answer, &session, &format!("{method} after close"));
    }
    // Deleted, it is unknown to every method.
    let (_, deleted) = pipe.call("session/delete", json!({"sessionId": session})).await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    for method in METHODS {
        let (_, answer) = pipe.call(method, params(method, &session, root.path())).await;
        assert_not_found(&answer, &session, &format!("{method} after delete"));
    }
    // Bad params are still bad params: a `sessionId` that is not a string, or none (an
    // extension request need not name a session).
    for method in METHODS {
        for bad in [json!({"sessionId": 7}), json!({})] {
            if method.starts_with('_') && bad == json!({}) {
                continue;
            }
            let (_, answer) = pipe.call(method, bad.clone()).await;
            assert_eq!(answer["error"]["code"], -32602, "{method} {bad}: {answer}");
        }
    }
    pipe.finish().await;
}
