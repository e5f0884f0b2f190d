//! Our client's session calls (issue #16) against an agent written with the official Rust SDK
//! (`src/bin/sdk-session-agent.rs`): `session/list` page by page, `resume`, `close`,
//! `delete`, `set_mode`, `set_config_option`, the kept modes / config options / commands, and
//! an extension method each way. Bounded; the agent is reaped.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentacp::client::{
    AgentCommand, BoxFuture, Client, ClientError, ClientOptions, ExtensionHandler, HandlerResult, LIST_PAGES_MAX,
    Update, config_value,
};
use agentacp::wire::default as wire;
use serde_json::{Value, json};

const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Answers `_sdk/ask` with what it asked, `_meta` included.
struct Echo(Arc<Mutex<Vec<Value>>>);

impl ExtensionHandler for Echo {
    fn request(&self, method: &str, params: Value) -> BoxFuture<HandlerResult> {
        self.0
            .lock()
            .unwrap()
            .push(json!({"method": method, "params": params.clone()}));
        Box::pin(async move { Ok(json!({"yes": true, "_meta": params["_meta"].clone()})) })
    }
}

async fn connect(root: &std::path::Path, options: ClientOptions) -> Client {
    let command = AgentCommand::new(env!("CARGO_BIN_EXE_sdk-session-agent")).current_dir(root);
    Client::connect(command, options.with_workspace_root(root))
        .await
        .unwrap()
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    (tmp, root)
}

#[tokio::test]
async fn every_session_call_round_trips_with_the_rust_sdk_agent() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (_tmp, root) = workspace();
        let client = connect(&root, ClientOptions::default()).await;
        let pid = client.pid().unwrap();
        let caps = &client.initialize_response().agent_capabilities.session_capabilities;
        assert!(caps.list.is_some() && caps.resume.is_some() && caps.close.is_some() && caps.delete.is_some());

        let first = client.new_session(&root).await.unwrap();
        let state = client.session_state(&first).unwrap();
        assert_eq!(state.modes.as_ref().unwrap().current_mode_id.as_str(), "ask");
        assert_eq!(state.config_options.as_ref().map(Vec::len), Some(2));
        // The commands follow the answer: they are kept once a turn has run.
        let (updates, _) = client.prompt_text(&first, "hi").await.unwrap().collect().await.unwrap();
        assert_eq!(updates.last().and_then(Update::text), Some("echo: hi"));
        let state = client.session_state(&first).unwrap();
        let names: Vec<&str> = state.commands.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["review", "plan"]);

        // Modes: set by us, then switched by the agent.
        client.set_mode(&first, &"code".into()).await.unwrap();
        assert_eq!(
            client
                .session_state(&first)
                .unwrap()
                .modes
                .unwrap()
                .current_mode_id
                .as_str(),
            "code"
        );
        client.set_mode(&first, &"ask".into()).await.unwrap();
        let (updates, _) = client
            .prompt_text(&first, "/switch")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert!(matches!(&updates[0], Update::CurrentMode(m) if m.current_mode_id.as_str() == "code"));
        assert_eq!(
            client
                .session_state(&first)
                .unwrap()
                .modes
                .unwrap()
                .current_mode_id
                .as_str(),
            "code"
        );

        // Config options, typed both ways.
        let state = client.session_state(&first).unwrap();
        let model = config_value(state.config_option("model").unwrap(), "smart").unwrap();
        let answer = client
            .set_config_option(&first, &wire::SessionConfigId("model".into()), model)
            .await
            .unwrap();
        assert!(matches!(&answer.config_options[0].kind,
            wire::SessionConfigOptionKind::Select(s) if s.current_value.as_str() == "smart"));
        let think = config_value(state.config_option("think").unwrap(), "true").unwrap();
        client
            .set_config_option(&first, &wire::SessionConfigId("think".into()), think)
            .await
            .unwrap();
        let kept = client.session_state(&first).unwrap();
        assert!(matches!(&kept.config_option("think").unwrap().kind,
            wire::SessionConfigOptionKind::Boolean(b) if b.current_value));

        // Three sessions, one per page.
        let second = client.new_session(&root).await.unwrap();
        let third = client.new_session(&root).await.unwrap();
        let page = client.list_sessions(Some(&root), None).await.unwrap();
        assert_eq!(page.sessions.len(), 1);
        assert_eq!(page.next_cursor.as_deref(), Some("1"));
        let all = client.list_all_sessions(Some(&root), LIST_PAGES_MAX).await.unwrap();
        let ids: Vec<&str> = all.iter().map(|s| s.session_id.as_str()).collect();
        assert_eq!(ids, [first.as_str(), second.as_str(), third.as_str()]);

        // Close, then resume: the agent's state comes back (mode `code`, model `smart`).
        client.close_session(&first).await.unwrap();
        assert_eq!(client.session_state(&first), None);
        let resumed = client.resume_session(&first, &root).await.unwrap();
        assert_eq!(resumed.modes.unwrap().current_mode_id.as_str(), "code");
        let state = client.session_state(&first).unwrap();
        assert_eq!(state.modes.as_ref().unwrap().current_mode_id.as_str(), "code");
        // The config values the SDK agent kept come back with the resume, and are kept here.
        assert!(matches!(&state.config_option("model").unwrap().kind,
            wire::SessionConfigOptionKind::Select(s) if s.current_value.as_str() == "smart"));
        assert!(matches!(&state.config_option("think").unwrap().kind,
            wire::SessionConfigOptionKind::Boolean(b) if b.current_value));

        // A mode, an option or a value the SDK agent did not offer is refused by our client.
        let error = client.set_mode(&first, &"yolo".into()).await.unwrap_err();
        assert!(matches!(error, ClientError::InvalidState(_)), "{error}");
        let error = client
            .set_config_option(
                &first,
                &wire::SessionConfigId("temperature".into()),
                config_value(state.config_option("model").unwrap(), "fast").unwrap(),
            )
            .await
            .unwrap_err();
        assert!(matches!(error, ClientError::InvalidState(_)), "{error}");
        assert!(config_value(state.config_option("model").unwrap(), "huge").is_err());
        assert_eq!(
            client
                .session_state(&first)
                .unwrap()
                .modes
                .unwrap()
                .current_mode_id
                .as_str(),
            "code",
            "a refused call changes nothing"
        );
        client.delete_session(&second).await.unwrap();
        let all = client.list_all_sessions(None, LIST_PAGES_MAX).await.unwrap();
        assert_eq!(all.len(), 2);

        // An extension method of the agent's; one it does not know.
        let params = json!({"n": 1, "_meta": {"trace": "ours"}});
        assert_eq!(
            client.ext_request("_sdk/echo", params.clone()).await.unwrap(),
            json!({"echo": params})
        );
        let error = client.ext_request("_sdk/nope", json!({})).await.unwrap_err();
        assert_eq!(error.rpc().map(|e| e.code), Some(-32601), "{error}");
        client.close().await;
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the agent was reaped"
        );
    })
    .await
    .expect("within the bound");
}

#[tokio::test]
async fn the_sdk_agents_extension_request_reaches_the_hook_and_without_one_is_not_found() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (_tmp, root) = workspace();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let client = connect(&root, ClientOptions::default().with_extensions(Echo(asked.clone()))).await;
        let session = client.new_session(&root).await.unwrap();
        let (updates, _) = client
            .prompt_text(&session, "/ext")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = updates.iter().find_map(Update::text).unwrap();
        let reply: Value = serde_json::from_str(text).unwrap();
        assert_eq!(reply, json!({"result": {"yes": true, "_meta": {"trace": "sdk-1"}}}));
        assert_eq!(
            *asked.lock().unwrap(),
            [json!({"method": "_sdk/ask", "params": {"question": "ready?", "_meta": {"trace": "sdk-1"}}})]
        );
        client.close().await;

        let client = connect(&root, ClientOptions::default()).await;
        let session = client.new_session(&root).await.unwrap();
        let (updates, _) = client
            .prompt_text(&session, "/ext")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = updates.iter().find_map(Update::text).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            json!({"error": {"code": -32601}})
        );
        client.close().await;
    })
    .await
    .expect("within the bound");
}
