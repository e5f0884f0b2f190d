//! The client's session calls (issue #16): `session/list` (paged), `resume`, `close`,
//! `delete`, `set_mode`, `set_config_option`, the kept modes / config options / commands, and
//! extension methods both ways — against a fake agent (`tests/fake/session_agent.py`) that
//! writes down every method it receives. Every wait is bounded.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentacp::client::{
    AgentCommand, Client, ClientError, ClientOptions, ExtensionHandler, HandlerResult, LIST_PAGES_MAX, PromptEvent,
    Update, config_value,
};
use agentacp::jsonrpc::{RpcError, codes};
use agentacp::wire::default as wire;
use serde_json::{Value, json};

const TEST_TIMEOUT: Duration = Duration::from_secs(60);

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test finished within its bound")
}

/// The fake agent in a temporary workspace.
struct Fake {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Fake {
    fn new() -> Fake {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        Fake { _tmp: tmp, root }
    }

    fn command(&self, mode: &str) -> AgentCommand {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake/session_agent.py");
        AgentCommand::new("python3")
            .arg(script)
            .arg(mode)
            .arg(self.root.join("seen.log"))
            .current_dir(&self.root)
    }

    async fn connect(&self, mode: &str, options: ClientOptions) -> Client {
        Client::connect(self.command(mode), options.with_workspace_root(&self.root))
            .await
            .unwrap()
    }

    /// Every method the agent received, in order.
    fn seen(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("seen.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

#[tokio::test]
async fn every_call_is_refused_locally_when_the_agent_does_not_offer_it() {
    bounded(async {
        let fake = Fake::new();
        let client = fake.connect("bare", ClientOptions::default()).await;
        let session = client.new_session(&fake.root).await.unwrap();
        let state = client.session_state(&session).expect("the session is known");
        assert_eq!((state.modes, state.config_options, state.commands), (None, None, None));
        let refusals = [
            ("session/list", client.list_sessions(None, None).await.map(drop)),
            ("session/list", client.list_all_sessions(None, 3).await.map(drop)),
            (
                "session/resume",
                client.resume_session(&session, &fake.root).await.map(drop),
            ),
            ("session/close", client.close_session(&session).await.map(drop)),
            ("session/delete", client.delete_session(&session).await.map(drop)),
            (
                "session/set_mode",
                client.set_mode(&session, &"code".into()).await.map(drop),
            ),
            (
                "session/set_config_option",
                client
                    .set_config_option(
                        &session,
                        &wire::SessionConfigId("model".into()),
                        wire::SetSessionConfigOptionRequestKind::ValueId(
                            wire::SetSessionConfigOptionRequestKindValueId::new("smart".into()),
                        ),
                    )
                    .await
                    .map(drop),
            ),
        ];
        for (method, outcome) in refusals {
            match outcome {
                Err(ClientError::NotOffered {
                    method: refused,
                    missing,
                }) => {
                    assert_eq!(refused, method);
                    assert!(!missing.is_empty());
                }
                other => panic!("{method}: not refused: {other:?}"),
            }
        }
        // An extension method needs its `_`.
        let error = client.ext_request("fake/echo", json!({})).await.unwrap_err();
        assert!(error.to_string().contains("start with `_`"), "{error}");
        let error = client.ext_notification("note", json!({})).await.unwrap_err();
        assert!(matches!(error, ClientError::InvalidState(_)), "{error}");
        client.close().await;
        assert_eq!(fake.seen(), ["initialize", "session/new"], "nothing else was sent");
    })
    .await;
}

#[tokio::test]
async fn session_new_keeps_modes_config_options_commands_and_meta() {
    bounded(async {
        let fake = Fake::new();
        let client = fake.connect("full", ClientOptions::default()).await;
        let session = client.new_session(&fake.root).await.unwrap();
        let state = client.session_state(&session).unwrap();
        let modes = state.modes.as_ref().expect("modes kept");
        assert_eq!(modes.current_mode_id.as_str(), "ask");
        assert_eq!(modes.available_modes.len(), 2);
        assert_eq!(state.config_options.as_ref().map(Vec::len), Some(2));
        assert!(matches!(
            &state.config_option("model").unwrap().kind,
            wire::SessionConfigOptionKind::Select(select) if select.current_value.as_str() == "fast"
        ));
        let commands: Vec<&str> = state.commands.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(commands, ["review", "plan"]);
        assert_eq!(state.command("plan").unwrap().description, "Plan the work");
        assert_eq!(json!(state.meta), json!({"fake": {"opened": 1}}));
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn list_reads_one_page_or_every_page_and_a_cursor_that_comes_back_is_an_error() {
    bounded(async {
        let fake = Fake::new();
        let client = fake.connect("full", ClientOptions::default()).await;
        let page = client.list_sessions(None, None).await.unwrap();
        assert_eq!(page.sessions.len(), 2);
        assert_eq!(page.next_cursor.as_deref(), Some("2"));
        assert_eq!(json!(page.meta), json!({"page": 0}));
        let next = client.list_sessions(None, page.next_cursor).await.unwrap();
        assert_eq!(next.sessions[0].session_id.as_str(), "old-2");
        let all = client
            .list_all_sessions(Some(&fake.root), LIST_PAGES_MAX)
            .await
            .unwrap();
        let ids: Vec<&str> = all.iter().map(|s| s.session_id.as_str()).collect();
        assert_eq!(ids, ["old-0", "old-1", "old-2", "old-3", "old-4"]);
        assert!(
            all.iter().all(|s| Path::new(&s.cwd) == fake.root),
            "the cwd filter was sent"
        );
        assert_eq!(all[4].title.as_deref(), Some("Session 4"));
        // The bound: two pages are not enough for five sessions.
        let error = client.list_all_sessions(None, 2).await.unwrap_err();
        assert!(error.to_string().contains("more than 2 pages"), "{error}");
        // An agent whose cursor goes round in a circle.
        std::fs::create_dir(fake.root.join("circle")).unwrap();
        let error = client
            .list_all_sessions(Some(&fake.root.join("circle")), LIST_PAGES_MAX)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("circle"), "{error}");
        // A cwd outside the workspace is refused here.
        assert!(client.list_sessions(Some(Path::new("/")), None).await.is_err());
        client.close().await;
        assert_eq!(
            fake.seen().iter().filter(|m| *m == "session/list").count(),
            2 + 3 + 2 + 2
        );
    })
    .await;
}

#[tokio::test]
async fn resume_close_and_delete_round_trip_and_close_cancels_a_running_turn_first() {
    bounded(async {
        let fake = Fake::new();
        let client = fake.connect("full", ClientOptions::default()).await;
        let old = wire::SessionId::from("old-3");
        let resumed = client.resume_session(&old, &fake.root).await.unwrap();
        assert_eq!(resumed.modes.as_ref().unwrap().current_mode_id.as_str(), "code");
        assert_eq!(json!(resumed.meta), json!({"resumed": "old-3"}));
        let state = client.session_state(&old).expect("the resumed session is kept");
        assert_eq!(state.modes.unwrap().current_mode_id.as_str(), "code");
        // A prompt in the resumed session works.
        let (updates, stop) = client.prompt_text(&old, "hi").await.unwrap().collect().await.unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn);
        assert_eq!(updates[0].text(), Some("prompted: hi"));

        let session = client.new_session(&fake.root).await.unwrap();
        let mut turn = client.prompt_text(&session, "/wait").await.unwrap();
        assert!(matches!(turn.next().await, Some(Ok(PromptEvent::Update(_)))));
        client.close_session(&session).await.unwrap();
        let mut last = None;
        while let Some(event) = turn.next().await {
            last = Some(event.unwrap());
        }
        assert_eq!(last, Some(PromptEvent::Stop(wire::StopReason::Cancelled)));
        assert_eq!(client.session_state(&session), None, "a closed session is forgotten");
        client.delete_session(&old).await.unwrap();
        assert_eq!(client.session_state(&old), None);
        client.close().await;
        let seen = fake.seen();
        let tail: Vec<&str> = seen[seen.len() - 4..].iter().map(String::as_str).collect();
        assert_eq!(
            tail,
            ["session/prompt", "session/cancel", "session/close", "session/delete"]
        );
    })
    .await;
}

/// Issue #45: an agent's `-32002` to `session/close` or `session/delete` (it does not know
/// the session, e.g. closed already) is done, as ACP recommends; any other error still fails.
#[tokio::test]
async fn close_and_delete_take_resource_not_found_as_done_and_fail_on_other_errors() {
    bounded(async {
        let fake = Fake::new();
        let client = fake.connect("full", ClientOptions::default()).await;
        let gone = wire::SessionId::from("gone-1");
        client
            .close_session(&gone)
            .await
            .expect("closing an unknown session is done");
        client
            .delete_session(&gone)
            .await
            .expect("deleting an unknown session is done");
        let broken = wire::SessionId::from("broken-1");
        for outcome in [
            client.close_session(&broken).await.map(drop),
            client.delete_session(&broken).await.map(drop),
        ] {
            let error = outcome.expect_err("-32603 is an error");
            assert_eq!(error.rpc().map(|e| e.code), Some(codes::INTERNAL_ERROR), "{error}");
            assert!(!error.is_resource_not_found());
        }
        client.close().await;
        let seen = fake.seen();
        assert_eq!(
            seen[seen.len() - 4..],
            ["session/close", "session/delete", "session/close", "session/delete"]
        );
    })
    .await;
}

#[tokio::test]
async fn mode_and_config_option_calls_and_updates_change_the_kept_state() {
    bounded(async {
        let fake = Fake::new();
        let client = fake.connect("full", ClientOptions::default()).await;
        let session = client.new_session(&fake.root).await.unwrap();
        // Checked here against what the agent offers: nothing sent.
        let error = client.set_mode(&session, &"fly".into()).await.unwrap_err();
        assert!(error.to_string().contains("ask, code"), "{error}");
        let model = wire::SessionConfigId("model".into());
        let state = client.session_state(&session).unwrap();
        let option = state.config_option("model").unwrap();
        assert!(
            config_value(option, "slow")
                .unwrap_err()
                .to_string()
                .contains("fast, smart")
        );
        assert!(config_value(state.config_option("think").unwrap(), "maybe").is_err());

        let answer = client.set_mode(&session, &"code".into()).await.unwrap();
        assert_eq!(json!(answer.meta), json!({"mode": "code"}));
        let current = |client: &Client| {
            let state = client.session_state(&session).unwrap();
            state.modes.unwrap().current_mode_id.0
        };
        assert_eq!(current(&client), "code");

        let mut value = config_value(option, "smart").unwrap();
        let answer = client.set_config_option(&session, &model, value.clone()).await.unwrap();
        assert!(matches!(
            &answer.config_options[0].kind,
            wire::SessionConfigOptionKind::Select(select) if select.current_value.as_str() == "smart"
        ));
        assert_eq!(
            json!(answer.meta),
            json!({"asked": null}),
            "the answer's `_meta` is kept"
        );
        let kept = client.session_state(&session).unwrap();
        assert_eq!(kept.config_options.as_ref(), Some(&answer.config_options));
        value = config_value(kept.config_option("think").unwrap(), "true").unwrap();
        client
            .set_config_option(&session, &wire::SessionConfigId("think".into()), value)
            .await
            .unwrap();
        assert!(matches!(
            &client.session_state(&session).unwrap().config_option("think").unwrap().kind,
            wire::SessionConfigOptionKind::Boolean(b) if b.current_value
        ));

        // Back to `ask`, then the agent switches by itself during a turn.
        client.set_mode(&session, &"ask".into()).await.unwrap();
        client
            .set_config_option(&session, &model, config_value(option, "fast").unwrap())
            .await
            .unwrap();
        let (updates, _) = client
            .prompt_text(&session, "/switch")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert!(matches!(&updates[0], Update::CurrentMode(m) if m.current_mode_id.as_str() == "code"));
        assert!(matches!(&updates[1], Update::ConfigOptions(c) if c.config_options.len() == 2));
        assert!(updates[1].one_line().contains("Model"), "{}", updates[1].one_line());
        let state = client.session_state(&session).unwrap();
        assert_eq!(state.modes.unwrap().current_mode_id.as_str(), "code");
        assert!(matches!(
            &state.config_options.as_ref().unwrap()[0].kind,
            wire::SessionConfigOptionKind::Select(select) if select.current_value.as_str() == "smart"
        ));
        let commands: Vec<&str> = state.commands.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(commands, ["test"], "the latest commands are kept");
        client.close().await;
    })
    .await;
}

/// Answers `_fake/ask` with its params and `_meta`; writes down the notifications it sees.
struct Extensions(Arc<Mutex<Vec<(String, Value)>>>);

impl ExtensionHandler for Extensions {
    fn request(&self, method: &str, params: Value) -> agentacp::client::BoxFuture<HandlerResult> {
        let method = method.to_string();
        Box::pin(async move {
            if method == "_fake/ask" {
                Ok(json!({"answer": "yes", "got": params, "_meta": {"trace": params["_meta"]["trace"]}}))
            } else {
                Err(RpcError::new(codes::METHOD_NOT_FOUND, method))
            }
        })
    }

    fn notification(&self, method: &str, params: Value) {
        self.0.lock().unwrap().push((method.to_string(), params));
    }
}

#[tokio::test]
async fn extension_methods_go_both_ways_with_their_meta_and_without_a_hook_are_not_found() {
    bounded(async {
        let fake = Fake::new();
        let notes = Arc::new(Mutex::new(Vec::new()));
        let options = ClientOptions::default().with_extensions(Extensions(notes.clone()));
        let client = fake.connect("full", options).await;
        let session = client.new_session(&fake.root).await.unwrap();
        let (updates, _) = client
            .prompt_text(&session, "/ext")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let reply: Value = serde_json::from_str(updates[0].text().unwrap()).unwrap();
        assert_eq!(reply["result"]["answer"], "yes", "{reply}");
        assert_eq!(reply["result"]["got"]["question"], "ready?", "{reply}");
        assert_eq!(reply["result"]["_meta"]["trace"], "t1", "{reply}");
        assert_eq!(
            *notes.lock().unwrap(),
            [("_fake/notice".to_string(), json!({"n": 1, "_meta": {"trace": "n1"}}))]
        );
        // Ours to the agent, `_meta` and all.
        let params = json!({"x": [1, 2], "_meta": {"trace": "c1"}});
        let echoed = client.ext_request("_fake/echo", params.clone()).await.unwrap();
        assert_eq!(echoed, json!({"echo": params}));
        client.ext_notification("_fake/note", json!({"n": 2})).await.unwrap();
        // An extension the agent does not know: its error, kept.
        let error = client.ext_request("_fake/unknown", json!(null)).await.unwrap_err();
        assert_eq!(error.rpc().map(|e| e.code), Some(codes::METHOD_NOT_FOUND), "{error}");
        client.close().await;
        assert!(fake.seen().contains(&"_fake/note".to_string()));

        // Without a hook: `-32601`, and the notification is ignored.
        let fake = Fake::new();
        let client = fake.connect("full", ClientOptions::default()).await;
        let session = client.new_session(&fake.root).await.unwrap();
        let (updates, _) = client
            .prompt_text(&session, "/ext")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let reply: Value = serde_json::from_str(updates[0].text().unwrap()).unwrap();
        assert_eq!(reply["error"]["code"], codes::METHOD_NOT_FOUND, "{reply}");
        client.close().await;
    })
    .await;
}
