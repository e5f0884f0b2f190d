//! The official Rust SDK client (`agent-client-protocol` 5) ↔ our governance bridge
//! (`examples/bridge`, `kind: bridge`) ↔ our governed server (`examples/governed-server`):
//! a whole session crosses the bridge, the bridge's governance hides and refuses what its
//! manifest does not allow, and both audit logs verify. And the bridge fed one `initialize`
//! and then end of input, as `printf … | governance-bridge` does; and `governance-bridge
//! --listen` driven by our client over WebSocket and over Streamable HTTP.

use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use agentacp::audit::verify_file;
use agentacp::client::{Client, ClientOptions, PermissionDecision, Update};
use agentacp::websocket::Dial;
use agentacp::wire::default as wire;
use interop::raw::{Next, RawClient};
use interop::sdk::{Event, Options, PermissionPolicy, SdkClient};
use interop::{AgentDirs, AgentProcess, StderrMode, example_binary};
use serde_json::{Value, json};

#[path = "common/turns.rs"]
mod turns;
use turns::{chunks, prompt};

/// Starts the bridge (which starts the governed server beside it) with its audit log at
/// `bridge_audit` and the server's at `dirs.audit_log`.
async fn bridged(dirs: &AgentDirs, bridge_audit: &Path) -> SdkClient {
    SdkClient::connect(bridge_process(dirs, bridge_audit), Options::default()).await
}

fn bridge_process(dirs: &AgentDirs, bridge_audit: &Path) -> AgentProcess {
    let bridge = example_binary("governance-bridge");
    let server = example_binary("governed-server");
    assert_eq!(
        bridge.parent(),
        server.parent(),
        "the bridge starts the governed server from its own folder"
    );
    let env = dirs.bridge_env(bridge_audit);
    AgentProcess::spawn_with_env(&bridge, &env, StderrMode::Capture)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_of_input_right_after_initialize_still_gets_the_answer_of_the_agent_behind() {
    let dirs = AgentDirs::new();
    let bridge_audit = dirs.state_dir.join("bridge-audit.jsonl");
    let mut client = RawClient::new(bridge_process(&dirs, &bridge_audit));
    client
        .send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
        .await;
    client.close_stdin().await;
    let answer = client.recv().await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["result"]["agentInfo"]["name"], "governance-bridge", "{answer}");
    assert_eq!(
        answer["result"]["_meta"]["aip44"]["downstream"]["name"], "governed-server",
        "the answer is the agent's, through the bridge: {answer}"
    );
    match client.next_line(std::time::Duration::from_secs(30)).await {
        Next::Eof => {}
        other => client.fail(format!("expected the end of output, got {other:?}")),
    }
    let status = client.expect_exit().await;
    assert!(status.success(), "the bridge exits 0: {status:?}");
    verify_file(&bridge_audit).expect("the bridge's audit log verifies");
}

fn tool_updates<'a>(events: &'a [Event], tool: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| match e {
            Event::Update { update, .. } => update["title"] == tool || update["name"] == tool,
            Event::Permission { params, .. } => params["toolCall"]["title"] == tool,
            Event::Editor { .. } | Event::Response { .. } => false,
        })
        .collect()
}

/// `/forever`, cancelled once its first tick arrived: the prompt ends `cancelled`.
async fn cancel_forever(client: &SdkClient, session: &str) {
    let forever = client.prompt(session, "/forever");
    client
        .wait_until("a tick", |events| {
            events
                .iter()
                .any(|e| e.chunk_text().is_some_and(|t| t.starts_with("tick")))
        })
        .await;
    client.cancel(session);
    assert_eq!(forever.ok().await.stop_reason, StopReason::Cancelled);
}

fn texts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.update_kind() == Some("agent_message_chunk"))
        .filter_map(|e| e.chunk_text().map(str::to_string))
        .collect()
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON record"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_session_crosses_the_bridge_and_both_audit_logs_verify() {
    let dirs = AgentDirs::new();
    let bridge_audit = dirs.state_dir.join("bridge-audit.jsonl");
    let cwd = dirs.project("p");
    std::fs::write(cwd.join("notes.txt"), "hello from the workspace").unwrap();
    let client = bridged(&dirs, &bridge_audit).await;

    // initialize: the bridge's identity, the server's capabilities within the manifest's.
    let init = client.initialize().await;
    let init = serde_json::to_value(&init).unwrap();
    assert_eq!(init["agentInfo"]["name"], "governance-bridge", "{init}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    assert_eq!(init["_meta"]["aip44"]["tier"], "governance-aware", "{init}");
    assert_eq!(
        init["_meta"]["aip44"]["downstream"]["name"], "governed-server",
        "{init}"
    );

    let session = client.new_session(&cwd).await;
    let reply = client.prompt(&session, "hello through the bridge").ok().await;
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert!(
        texts(&client.events()).iter().any(|t| t == "hello through the bridge"),
        "{}",
        client.diagnostics()
    );

    // Reading: allowed by both governances, nobody asked.
    let read = client
        .prompt(&session, r#"/tool read-file {"path":"notes.txt"}"#)
        .ok()
        .await;
    assert_eq!(read.stop_reason, StopReason::EndTurn);
    let events = client.events();
    let read_updates = tool_updates(&events, "read-file");
    assert!(
        read_updates.iter().any(|e| e.update_kind() == Some("tool_call")),
        "the editor sees the allowed tool call:\n{}",
        client.diagnostics()
    );
    assert!(!read_updates.iter().any(|e| matches!(e, Event::Permission { .. })));

    // Writing: the bridge asks the editor (approved here), the server runs it.
    client.set_permission_policy(PermissionPolicy::Select(PermissionOptionKind::AllowOnce));
    let write = client
        .prompt(
            &session,
            r#"/tool write-file {"path":"out.txt","content":"via bridge"}"#,
        )
        .ok()
        .await;
    assert_eq!(write.stop_reason, StopReason::EndTurn);
    let events = client.events();
    assert!(
        tool_updates(&events, "write-file")
            .iter()
            .any(|e| matches!(e, Event::Permission { .. })),
        "the editor was asked:\n{}",
        client.diagnostics()
    );
    assert_eq!(std::fs::read_to_string(cwd.join("out.txt")).unwrap(), "via bridge");

    // Running tests: the server would ask, but the bridge's manifest does not list the tool:
    // the editor never sees it, and the bridge refuses the permission itself.
    let tests = client.prompt(&session, r#"/tool run-tests {}"#).ok().await;
    assert_eq!(tests.stop_reason, StopReason::EndTurn);
    let events = client.events();
    assert!(
        tool_updates(&events, "run-tests").is_empty(),
        "a denied tool never reaches the editor:\n{}",
        client.diagnostics()
    );
    assert!(
        texts(&events).iter().any(|t| t.starts_with("rejected")),
        "the server reports the refusal:\n{}",
        client.diagnostics()
    );

    // Cancel crosses the bridge.
    cancel_forever(&client, &session).await;

    // session/load replays the history through the bridge: passed on, not audited again.
    let tool_records = |path: &Path| {
        records(path)
            .iter()
            .filter(|r| r["metadata"]["aip44"]["audit-event-kind"] == "tool-call")
            .count()
    };
    let before = tool_records(&bridge_audit);
    let seen = client.events().len();
    client.load_session(&session, &cwd).ok().await;
    let replayed = client.events().len() - seen;
    assert!(
        replayed > 0,
        "the history crossed the bridge:\n{}",
        client.diagnostics()
    );
    assert_eq!(
        tool_records(&bridge_audit),
        before,
        "replayed tool calls are not live ones"
    );

    // The editor goes away: the bridge stops the server and exits 0.
    let status = client.shutdown().await;
    assert!(status.success(), "the bridge exits 0: {status:?}");

    let summary = verify_file(&bridge_audit).expect("the bridge's audit log verifies");
    let server_summary = verify_file(&dirs.audit_log).expect("the server's audit log verifies");
    assert!(server_summary.records > 0);
    let records = records(&bridge_audit);
    assert_eq!(summary.records as usize, records.len());
    let mirror = |tool: &str| -> Value {
        records
            .iter()
            .find(|r| r["metadata"]["aip44"]["audit-event-kind"] == "tool-call" && r["metadata"]["aip44"]["tool"] == tool)
            .unwrap_or_else(|| panic!("no tool-call record for {tool} in {}", bridge_audit.display()))["metadata"]["aip44"]
            .clone()
    };
    assert_eq!(mirror("read-file")["approval"], json!("auto"));
    // Named like a server names it: `client:` and the editor's clientInfo name.
    assert_eq!(
        mirror("write-file")["approval"]["approvedBy"],
        format!("client:{}", SdkClient::NAME)
    );
    assert_eq!(mirror("run-tests")["approval"]["deniedBy"], "governance");
    let actions: Vec<&str> = records.iter().filter_map(|r| r["action"].as_str()).collect();
    for action in [
        "acp.initialize",
        "acp.session.new",
        "acp.session.prompt",
        "acp.session.cancel",
        "operator.invoked",
        "operator.completed",
        "operator.interrupted",
        "acp.session.request_permission",
    ] {
        assert!(actions.contains(&action), "no `{action}` record: {actions:?}");
    }
    // Ordering is preserved: every record's seq follows the previous.
    assert!(
        records
            .windows(2)
            .all(|w| w[1]["seq"].as_u64() == w[0]["seq"].as_u64().map(|s| s + 1))
    );
}

/// Issue #17: an editor that speaks only stdio — the official Rust SDK client — reaches a
/// remote agent through the bridge: `governance-bridge` (`AGENTACP_BRIDGE_CONNECT`, the token in
/// `AGENTACP_TOKEN`) dials `governed-server --listen` over WebSocket. The prompt, a governed
/// write approved by the editor, and a cancel cross; the bridge's audit log verifies, and every
/// record of the remote server names the bridge's identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_rust_sdk_client_reaches_a_remote_agent_through_the_bridge() {
    const IDENTITY: &str = "bridge-on-laptop";
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let token = interop::websocket::test_token();
    let mut server_env = dirs.env();
    server_env.push(("AGENTACP_TOKEN", token.clone().into()));
    server_env.push(("AGENTACP_TOKEN_IDENTITY", IDENTITY.into()));
    let server = interop::websocket::WsServer::start(&example_binary("governed-server"), &server_env);

    let bridge_audit = dirs.state_dir.join("bridge-audit.jsonl");
    let mut env = dirs.bridge_env(&bridge_audit);
    env.push(("AGENTACP_BRIDGE_CONNECT", server.url().into()));
    env.push(("AGENTACP_TOKEN", token.into()));
    let bridge = AgentProcess::spawn_with_env(&example_binary("governance-bridge"), &env, StderrMode::Capture);
    let client = SdkClient::connect(bridge, Options::default()).await;

    let init = serde_json::to_value(client.initialize().await).unwrap();
    assert_eq!(init["agentInfo"]["name"], "governance-bridge", "{init}");
    assert_eq!(
        init["_meta"]["aip44"]["downstream"]["name"], "governed-server",
        "{init}"
    );
    let session = client.new_session(&cwd).await;
    let reply = client.prompt(&session, "hello from afar").ok().await;
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert!(
        texts(&client.events()).iter().any(|t| t.contains("hello from afar")),
        "{}",
        client.diagnostics()
    );
    client.set_permission_policy(PermissionPolicy::Select(PermissionOptionKind::AllowOnce));
    let write = client
        .prompt(
            &session,
            r#"/tool write-file {"path":"remote.txt","content":"over the wire"}"#,
        )
        .ok()
        .await;
    assert_eq!(write.stop_reason, StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(cwd.join("remote.txt")).unwrap(),
        "over the wire"
    );
    cancel_forever(&client, &session).await;
    let status = client.shutdown().await;
    assert!(status.success(), "the bridge exits 0: {status:?}");
    verify_file(&bridge_audit).expect("the bridge's audit log verifies");
    interop::audit::check_identity_in_audit_log(&dirs.audit_log, IDENTITY);
}

/// Issue #19: the bridge, with the governed server behind it, passes `scaffold-aip conform`
/// with its manifest, the audit emit path included: `read-file` and `write-file` reach the
/// editor (one asked), `run-tests` is one the bridge's governance denies.
#[test]
fn the_bridge_passes_the_conformance_suite_with_its_manifest() {
    let dirs = AgentDirs::new();
    let bridge_audit = dirs.state_dir.join("bridge-audit.jsonl");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/bridge/ACP.md");
    let bridge = example_binary("governance-bridge");
    assert_eq!(bridge.parent(), example_binary("governed-server").parent());
    let mut config = acp_conform::Config {
        audit_log: Some(acp_conform::AuditSource::File(bridge_audit.clone())),
        tool_prompts: vec![
            r#"/tool read-file {"path": "conform.txt"}"#.into(),
            r#"/tool write-file {"path": "conform.txt", "content": "hi"}"#.into(),
            "/tool run-tests {}".into(),
        ],
        ..acp_conform::Config::new(vec![bridge.into()])
    }
    .with_manifest(&manifest)
    .expect("the manifest explains");
    // The logs of both (the kit gives the workspace root and the state folder).
    config.launch.env.extend(
        dirs.bridge_env(&bridge_audit)
            .into_iter()
            .filter(|(name, _)| name.contains("AUDIT"))
            .map(|(name, value)| (name.into(), value)),
    );
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(acp_conform::failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    assert!(
        verdicts.iter().all(|v| v.outcome == acp_conform::Outcome::Pass),
        "every check applies to the bridge: {verdicts:#?}"
    );
}

/// Issue #45.7: behind the shipped bridge, governed-server lost `session/list`, `resume` and
/// `close`, and nothing said what the bridge had narrowed. Its manifest declares them now:
/// they pass (and are audited); `initialize`'s `_meta.agentacp.narrowed` names what the
/// editor does not get of the agent's capabilities, and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_the_example_bridge_sessions_are_listed_closed_and_resumed() {
    let dirs = AgentDirs::new();
    let bridge_audit = dirs.state_dir.join("bridge-audit.jsonl");
    let cwd = dirs.project("p");
    let mut client = RawClient::new(bridge_process(&dirs, &bridge_audit));
    let init = client.initialize(json!(1)).await;
    let capabilities = &init["result"]["agentCapabilities"];
    assert_eq!(
        capabilities["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}}),
        "{init}"
    );
    assert_eq!(
        capabilities["promptCapabilities"]["image"], false,
        "the server offers no images: {init}"
    );
    let narrowed = init["result"]["_meta"]["agentacp"]["narrowed"]
        .as_array()
        .unwrap_or_else(|| client.fail(format!("no _meta.agentacp.narrowed: {init}")))
        .clone();
    // governed-server offers nothing this bridge does not pass: nothing narrowed.
    assert_eq!(narrowed, Vec::<Value>::new(), "{init}");

    let session = client.new_session(json!(2), &cwd).await;
    let listed = client.request(json!(3), "session/list", json!({"cwd": cwd})).await;
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| client.fail(format!("session/list failed: {listed}")))
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [session.as_str()], "{listed}");
    let closed = client
        .request(json!(4), "session/close", json!({"sessionId": session}))
        .await;
    assert!(closed.get("result").is_some(), "session/close failed: {closed}");
    let resumed = client
        .request(
            json!(5),
            "session/resume",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(resumed.get("result").is_some(), "session/resume failed: {resumed}");
    let prompted = client
        .request(
            json!(6),
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello again"}]}),
        )
        .await;
    assert_eq!(prompted["result"]["stopReason"], "end_turn", "{prompted}");
    client.close_stdin().await;
    assert!(client.expect_exit().await.success());
    let actions: Vec<String> = records(&bridge_audit)
        .iter()
        .filter_map(|r| r["action"].as_str().map(str::to_string))
        .collect();
    for action in ["acp.session.list", "acp.session.close", "acp.session.resume"] {
        assert!(actions.iter().any(|a| a == action), "{action} not audited: {actions:?}");
    }
    verify_file(&bridge_audit).expect("the bridge's audit log verifies");
}

/// Issue #47: `governance-bridge --listen` serves editors over WebSocket and over Streamable
/// HTTP on its one listener, each connection a bridge in front of its own governed server
/// (over stdio). Our client (`Client::connect_remote`: `connect_websocket` for `ws://`,
/// `connect_http` for `http://`), with the bridge's token, has one conversation over each: a
/// prompt's streamed chunks, a write the bridge asks the editor about (approved), `run-tests`
/// the bridge's governance denies without asking, and `close`. The bridge exits 0 at SIGTERM,
/// its audit log verifies, every record names the token's identity, and the sign-in is
/// audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_reaches_a_listening_bridge_over_websocket_and_streamable_http() {
    const IDENTITY: &str = "editor-afar";
    for scheme in ["ws", "http"] {
        let dirs = AgentDirs::new();
        let bridge_audit = dirs.state_dir.join("bridge-audit.jsonl");
        let token = interop::websocket::test_token();
        let mut env = dirs.bridge_env(&bridge_audit);
        env.push(("AGENTACP_TOKEN", token.clone().into()));
        env.push(("AGENTACP_TOKEN_IDENTITY", IDENTITY.into()));
        let mut bridge = interop::websocket::WsServer::start(&example_binary("governance-bridge"), &env);
        let dial = Dial::new(format!("{scheme}://127.0.0.1:{}/acp", bridge.port)).token(token);
        let context = |bridge: &interop::websocket::WsServer| {
            format!("over {scheme}://\n--- bridge stderr\n{}", bridge.stderr_text())
        };
        tokio::time::timeout(TURNS_WAIT, through_a_listening_bridge(dial, &dirs))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the conversation did not end within {TURNS_WAIT:?} {}",
                    context(&bridge)
                )
            });
        // SIGTERM: the bridge drains, ends its governed server, and exits 0.
        bridge.terminate();
        let status = bridge.wait_exit(TURNS_WAIT);
        assert!(status.is_some_and(|s| s.success()), "{status:?} {}", context(&bridge));

        verify_file(&bridge_audit).expect("the bridge's audit log verifies");
        // Every record names the identity, and its sign-in is audited (`auth.login`, as a
        // server writes it; a listening bridge wrote none).
        interop::audit::check_identity_in_audit_log(&bridge_audit, IDENTITY);
        let records = records(&bridge_audit);
        let approval = |tool: &str| -> Value {
            records
                .iter()
                .find(|r| r["metadata"]["aip44"]["audit-event-kind"] == "tool-call" && r["metadata"]["aip44"]["tool"] == tool)
                .unwrap_or_else(|| panic!("no tool-call record for {tool} over {scheme}://"))["metadata"]["aip44"]
                ["approval"]
                .clone()
        };
        assert!(
            approval("write-file")["approvedBy"]
                .as_str()
                .is_some_and(|by| by.starts_with("client:")),
            "{}",
            approval("write-file")
        );
        assert_eq!(approval("run-tests")["deniedBy"], "governance");
    }
}

/// The bound on one conversation with a listening bridge, and on its exit.
const TURNS_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The conversation of [`our_client_reaches_a_listening_bridge_over_websocket_and_streamable_http`]
/// over `dial`.
async fn through_a_listening_bridge(dial: Dial, dirs: &AgentDirs) {
    let cwd = dirs.project("p");
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = Arc::clone(&asked);
    let options = ClientOptions::default()
        .with_workspace_root(dirs.workspace_root.clone())
        .with_permission(move |request: wire::RequestPermissionRequest| {
            let request = serde_json::to_value(&request).unwrap_or_default();
            let title = request["toolCall"]["title"].as_str().unwrap_or_default().to_string();
            record.lock().expect("lock").push(title);
            async { PermissionDecision::Approve }
        });
    let client = Client::connect_remote(dial, options)
        .await
        .unwrap_or_else(|e| panic!("connecting failed: {e}"));
    let init = serde_json::to_value(client.initialize_response()).unwrap();
    assert_eq!(init["agentInfo"]["name"], "governance-bridge", "{init}");
    assert_eq!(
        init["_meta"]["aip44"]["downstream"]["name"], "governed-server",
        "{init}"
    );
    let session = client
        .new_session(&cwd)
        .await
        .unwrap_or_else(|e| panic!("session/new failed: {e}"));

    let (updates, stop) = prompt(&client, &session, "hello through the bridge").await;
    assert_eq!(stop, wire::StopReason::EndTurn);
    assert!(
        chunks(&updates).concat().contains("hello through the bridge"),
        "{updates:#?}"
    );

    // Writing: the bridge asks the editor (approved), the server runs it.
    let (_, stop) = prompt(
        &client,
        &session,
        r#"/tool write-file {"path":"out.txt","content":"via a listening bridge"}"#,
    )
    .await;
    assert_eq!(stop, wire::StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(cwd.join("out.txt")).unwrap(),
        "via a listening bridge"
    );
    assert_eq!(*asked.lock().expect("lock"), ["write-file"]);

    // Running tests: the bridge's manifest does not list the tool; it refuses the permission
    // itself, and the editor neither sees the call nor is asked.
    let (updates, stop) = prompt(&client, &session, "/tool run-tests {}").await;
    assert_eq!(stop, wire::StopReason::EndTurn);
    assert!(
        !updates
            .iter()
            .any(|u| matches!(u, Update::ToolCall(_) | Update::ToolCallUpdate(_))),
        "a denied tool never reaches the editor: {updates:#?}"
    );
    assert!(
        chunks(&updates).iter().any(|t| t.starts_with("rejected")),
        "the server reports the refusal: {updates:#?}"
    );
    assert_eq!(*asked.lock().expect("lock"), ["write-file"]);
    client.close().await;
}
