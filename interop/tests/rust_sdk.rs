//! The official Rust SDK's client (`agent-client-protocol` 5) drives our example servers,
//! `echo-server` (tier basic) and `governed-server` (tier governance-aware), over stdio, and
//! checks the contract of docs/design/runtime.md as a real client sees it.

use std::path::PathBuf;

use agent_client_protocol::UntypedMessage;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommandInput, CloseSessionRequest, ListSessionsRequest, NewSessionRequest,
    PermissionOptionKind, ResumeSessionRequest, SessionConfigKind, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigOptionValue, SessionConfigSelectOptions, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionModeRequest, StopReason,
};
use interop::audit::{check_audit_log, find_tool_record};
use interop::sdk::{Event, Options, PermissionPolicy, Phase, RequestTag, SdkClient};
use interop::{AgentDirs, AgentProcess, StderrMode, example_binary, explained, stream_chunk};
use serde_json::{Value, json};

const ECHO: &str = "echo-server";
const GOVERNED: &str = "governed-server";

async fn spawn(example: &str, dirs: &AgentDirs) -> SdkClient {
    SdkClient::spawn(&example_binary(example), dirs).await
}

/// The events about `session` that arrived while `tag` was outstanding.
fn during<'a>(events: &'a [Event], session: &str, tag: &RequestTag) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.session_id() == Some(session))
        .filter(|e| match e {
            Event::Update { phase, .. } | Event::Permission { phase, .. } | Event::Editor { phase, .. } => {
                phase.is_before(tag)
            }
            Event::Response { .. } => false,
        })
        .collect()
}

/// The text of every `agent_message_chunk` among `events`.
fn message_texts(events: &[&Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.update_kind() == Some("agent_message_chunk"))
        .filter_map(|e| e.chunk_text().map(str::to_string))
        .collect()
}

fn describe(events: &[&Event]) -> String {
    events.iter().map(|e| format!("  {}\n", e.describe())).collect()
}

/// Nothing about a session may arrive before its `session/new` response.
fn assert_nothing_before_session_new(client: &SdkClient) {
    let early: Vec<Event> = client
        .events()
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                Event::Update {
                    phase: Phase::NoRequest,
                    ..
                } | Event::Permission {
                    phase: Phase::NoRequest,
                    ..
                }
            )
        })
        .collect();
    if !early.is_empty() {
        client.fail(format!(
            "{} message(s) arrived for a session before its session/new response: {:?}",
            early.len(),
            early.iter().map(Event::describe).collect::<Vec<_>>()
        ));
    }
}

fn error_code(error: &interop::sdk::SdkError) -> i32 {
    i32::from(error.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_advertises_exactly_the_manifest_capabilities() {
    for example in [ECHO, GOVERNED] {
        let expected = explained(example);
        let dirs = AgentDirs::new();
        let client = spawn(example, &dirs).await;
        let pending = client.start(
            None,
            agent_client_protocol::v1::schema::InitializeRequest::new(
                agent_client_protocol::schema::ProtocolVersion::V1,
            ),
        );
        let id = pending.tag.wire_id.clone();
        let typed = pending.ok().await;
        // The exact JSON on the wire, not the SDK's re-serialisation (which adds defaults).
        let wire = client.transcript().responses_to(&id);
        let [response] = wire.as_slice() else {
            client.fail(format!(
                "{example}: expected one response to initialize, saw {}",
                wire.len()
            ));
        };
        let result = &response["result"];
        let want = &expected["initializeResponse"];
        if result["agentCapabilities"] != want["agentCapabilities"] {
            client.fail(format!(
                "{example}: agentCapabilities differ from `scaffold-aip explain`\n  wire:    {}\n  explain: {}",
                result["agentCapabilities"], want["agentCapabilities"]
            ));
        }
        // The SDK reads them as the same capabilities too.
        let from_explain: AgentCapabilities =
            serde_json::from_value(want["agentCapabilities"].clone()).expect("explain's JSON");
        assert_eq!(typed.agent_capabilities, from_explain, "{example}");
        assert_eq!(
            result["protocolVersion"], want["protocolVersion"],
            "{example}: protocolVersion"
        );
        assert_eq!(
            result["agentInfo"]["name"], want["agentInfo"]["name"],
            "{example}: agentInfo.name (the manifest id); response {response}"
        );
        assert_eq!(
            result["agentInfo"]["version"], want["agentInfo"]["version"],
            "{example}: agentInfo.version; response {response}"
        );
        for key in ["acp_rev", "tier"] {
            assert_eq!(
                result["_meta"]["aip44"][key], want["_meta"]["aip44"][key],
                "{example}: _meta.aip44.{key}; response {response}"
            );
        }
        let status = client.shutdown().await;
        assert!(status.success(), "{example} exited with {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_of_1000_chunks_arrives_whole_in_order_before_the_response() {
    let dirs = AgentDirs::new();
    let client = spawn(ECHO, &dirs).await;
    client.initialize().await;
    let session = client.new_session(&dirs.project("p")).await;
    let prompt = client.prompt(&session, "/stream 1000 64");
    let tag = prompt.tag.clone();
    let response = prompt.ok().await;
    if response.stop_reason != StopReason::EndTurn {
        client.fail(format!("stopReason {:?}, want end_turn", response.stop_reason));
    }
    let events = client.events();
    let chunks: Vec<&Event> = events
        .iter()
        .filter(|e| e.session_id() == Some(session.as_str()))
        .filter(|e| e.update_kind() == Some("agent_message_chunk"))
        .collect();
    if chunks.len() != 1000 {
        client.fail(format!("{} chunks arrived, want 1000", chunks.len()));
    }
    for (i, chunk) in chunks.iter().enumerate() {
        let want = stream_chunk(i, 64);
        if chunk.chunk_text() != Some(want.as_str()) {
            client.fail(format!(
                "chunk {i} is {:?}, want {want:?} (chunks out of order or malformed)",
                chunk.chunk_text()
            ));
        }
        if let Event::Update { phase, .. } = chunk
            && !phase.is_before(&tag)
        {
            client.fail(format!(
                "chunk {i} arrived {phase:?}, not before the session/prompt response"
            ));
        }
    }
    assert_nothing_before_session_new(&client);
    let status = client.shutdown().await;
    assert!(status.success(), "echo-server exited with {status}");
}

/// A `tool_call` / `tool_call_update` field.
fn tool_field<'a>(event: &'a Event, key: &str) -> Option<&'a Value> {
    match event {
        Event::Update { update, .. } => update.get(key),
        Event::Permission { params, .. } => params["toolCall"].get(key),
        Event::Editor { .. } | Event::Response { .. } => None,
    }
}

fn is_tool_update(event: &Event) -> bool {
    matches!(event.update_kind(), Some("tool_call" | "tool_call_update"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_tool_call_is_pending_then_asks_then_completes() {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let client = spawn(GOVERNED, &dirs).await;
    client.set_permission_policy(PermissionPolicy::Select(PermissionOptionKind::AllowOnce));
    client.initialize().await;
    let session = client.new_session(&cwd).await;
    let prompt = client.prompt(
        &session,
        r#"/tool write-file {"path":"notes.txt","content":"approved by interop"}"#,
    );
    let tag = prompt.tag.clone();
    let response = prompt.ok().await;
    let events = client.events();
    let turn = during(&events, &session, &tag);
    let seen = describe(&turn);

    let call = turn
        .iter()
        .position(|e| e.update_kind() == Some("tool_call"))
        .unwrap_or_else(|| client.fail(format!("no tool_call update during the turn:\n{seen}")));
    let ask = turn
        .iter()
        .position(|e| matches!(e, Event::Permission { .. }))
        .unwrap_or_else(|| client.fail(format!("no session/request_permission:\n{seen}")));
    let done = turn
        .iter()
        .position(|e| {
            e.update_kind() == Some("tool_call_update") && tool_field(e, "status") == Some(&json!("completed"))
        })
        .unwrap_or_else(|| client.fail(format!("no tool_call_update with status completed:\n{seen}")));
    let id = tool_field(turn[call], "toolCallId").cloned();
    if tool_field(turn[call], "status") != Some(&json!("pending")) {
        client.fail(format!("the tool_call is not `pending`:\n{seen}"));
    }
    if !(call < ask && ask < done) {
        client.fail(format!(
            "want tool_call (pending), then request_permission, then completed; got positions {call}, {ask}, {done}:\n{seen}"
        ));
    }
    if tool_field(turn[ask], "toolCallId").cloned() != id || tool_field(turn[done], "toolCallId").cloned() != id {
        client.fail(format!("the toolCallIds do not match:\n{seen}"));
    }
    // Nothing ran before the answer.
    if turn[..ask]
        .iter()
        .any(|e| tool_field(e, "status").is_some_and(|s| s == "completed" || s == "in_progress"))
    {
        client.fail(format!("the tool ran before permission was granted:\n{seen}"));
    }
    let texts = message_texts(&turn);
    if !texts.iter().any(|t| t.starts_with("completed: ")) {
        client.fail(format!("no `completed: …` message:\n{seen}"));
    }
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let written = std::fs::read_to_string(cwd.join("notes.txt")).unwrap_or_default();
    assert_eq!(
        written, "approved by interop",
        "the approved write-file did not write the file in the session's cwd"
    );
    assert_nothing_before_session_new(&client);
    let status = client.shutdown().await;
    assert!(status.success(), "governed-server exited with {status}");
    check_audit_log(&dirs.audit_log, |records| {
        find_tool_record(records, "write-file").is_some()
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_tool_call_is_reported_rejected_and_does_not_run() {
    // `reject_once`, and the `cancelled` outcome, which must count as a rejection.
    for (policy, want_answer) in [
        (PermissionPolicy::Select(PermissionOptionKind::RejectOnce), "RejectOnce"),
        (PermissionPolicy::Cancel, "cancelled"),
    ] {
        let dirs = AgentDirs::new();
        let cwd = dirs.project("p");
        let client = spawn(GOVERNED, &dirs).await;
        client.set_permission_policy(policy.clone());
        client.initialize().await;
        let session = client.new_session(&cwd).await;
        let prompt = client.prompt(
            &session,
            r#"/tool write-file {"path":"notes.txt","content":"must not be written"}"#,
        );
        let tag = prompt.tag.clone();
        let response = prompt.ok().await;
        let events = client.events();
        let turn = during(&events, &session, &tag);
        let seen = describe(&turn);
        let Some(Event::Permission { answer, .. }) = turn.iter().find(|e| matches!(e, Event::Permission { .. })) else {
            client.fail(format!("{policy:?}: no session/request_permission:\n{seen}"));
        };
        if !answer.contains(want_answer) {
            client.fail(format!(
                "{policy:?}: the client could not answer as asked ({answer}):\n{seen}"
            ));
        }
        if turn
            .iter()
            .any(|e| tool_field(e, "status") == Some(&json!("completed")))
        {
            client.fail(format!(
                "{policy:?}: a rejected tool call was reported completed:\n{seen}"
            ));
        }
        let texts = message_texts(&turn);
        if !texts.iter().any(|t| t.trim() == "rejected") {
            client.fail(format!(
                "{policy:?}: the outcome was not reported as `rejected`:\n{seen}"
            ));
        }
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        assert!(
            !cwd.join("notes.txt").exists(),
            "{policy:?}: a rejected write-file wrote the file"
        );
        let status = client.shutdown().await;
        assert!(status.success(), "governed-server exited with {status}");
        check_audit_log(&dirs.audit_log, |records| {
            find_tool_record(records, "write-file").is_some()
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_paths_are_confined_to_the_session_cwd() {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let outside = dirs.outside();
    std::os::unix::fs::symlink(&outside, cwd.join("link")).expect("create a symlink");
    let client = spawn(GOVERNED, &dirs).await;
    // Approve everything: confinement must hold even when the user says yes.
    client.set_permission_policy(PermissionPolicy::Select(PermissionOptionKind::AllowOnce));
    client.initialize().await;
    let session = client.new_session(&cwd).await;
    let escapes = [
        "../escape-1.txt".to_string(),
        outside.join("escape-2.txt").display().to_string(),
        "link/escape-3.txt".to_string(),
    ];
    for path in &escapes {
        let command = format!("/tool write-file {}", json!({"path": path, "content": "escaped"}));
        let prompt = client.prompt(&session, &command);
        let tag = prompt.tag.clone();
        assert_eq!(prompt.ok().await.stop_reason, StopReason::EndTurn);
        let events = client.events();
        let turn = during(&events, &session, &tag);
        if !message_texts(&turn).iter().any(|t| t.starts_with("failed: ")) {
            client.fail(format!(
                "write-file to {path:?} was not reported `failed: …`:\n{}",
                describe(&turn)
            ));
        }
    }
    let prompt = client.prompt(&session, r#"/tool read-file {"path":"/etc/hostname"}"#);
    let tag = prompt.tag.clone();
    prompt.ok().await;
    let events = client.events();
    let turn = during(&events, &session, &tag);
    if !message_texts(&turn).iter().any(|t| t.starts_with("failed: ")) {
        client.fail(format!(
            "read-file of /etc/hostname was not refused:\n{}",
            describe(&turn)
        ));
    }
    let leaked: Vec<_> = std::fs::read_dir(&outside).expect("list the outside folder").collect();
    assert!(
        leaked.is_empty(),
        "files were written outside the session's cwd: {leaked:?}"
    );
    assert!(
        !dirs.workspace_root.join("escape-1.txt").exists(),
        "`../` escaped the session's cwd"
    );
    let status = client.shutdown().await;
    assert!(status.success(), "governed-server exited with {status}");
    check_audit_log(&dirs.audit_log, |records| {
        find_tool_record(records, "write-file").is_some()
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_permission_request_times_out_as_rejected() {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let mut env = dirs.env();
    env.push(("AGENTACP_PERMISSION_TIMEOUT_MS", "300".into()));
    let process = AgentProcess::spawn_with_env(&example_binary(GOVERNED), &env, StderrMode::Capture);
    let client = SdkClient::connect(process, Options::default()).await;
    client.set_permission_policy(PermissionPolicy::Hold);
    client.initialize().await;
    let session = client.new_session(&cwd).await;
    let prompt = client.prompt(
        &session,
        r#"/tool write-file {"path":"late.txt","content":"must not be written"}"#,
    );
    let tag = prompt.tag.clone();
    // The server's own timer ends the wait (fail closed), not this client.
    let response = prompt.ok().await;
    let events = client.events();
    let turn = during(&events, &session, &tag);
    let seen = describe(&turn);
    assert_eq!(client.held_permissions(), 1, "{seen}");
    if !message_texts(&turn).iter().any(|t| t.trim() == "rejected") {
        client.fail(format!(
            "a timed-out permission request was not reported `rejected`:\n{seen}"
        ));
    }
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert!(
        !cwd.join("late.txt").exists(),
        "the tool ran although nobody approved it"
    );
    let status = client.shutdown().await;
    assert!(status.success(), "governed-server exited with {status}");
    check_audit_log(&dirs.audit_log, |records| {
        find_tool_record(records, "write-file").is_some()
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_with_a_permission_request_pending_exits_0() {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let client = spawn(GOVERNED, &dirs).await;
    client.set_permission_policy(PermissionPolicy::Hold);
    client.initialize().await;
    let session = client.new_session(&cwd).await;
    let _prompt = client.prompt(
        &session,
        r#"/tool write-file {"path":"eof.txt","content":"must not be written"}"#,
    );
    client
        .wait_until("session/request_permission", |events| {
            events.iter().any(|e| matches!(e, Event::Permission { .. }))
        })
        .await;
    // The client goes away while the server waits for it.
    let status = client.shutdown().await;
    assert!(
        status.success(),
        "governed-server exited with {status} on EOF with a pending permission request"
    );
    assert!(
        !cwd.join("eof.txt").exists(),
        "the tool ran although nobody approved it"
    );
    check_audit_log(&dirs.audit_log, |_| true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_tool_sends_no_tool_call_and_is_audited() {
    let dirs = AgentDirs::new();
    let client = spawn(GOVERNED, &dirs).await;
    // Approve anything asked: a denied tool must not even ask.
    client.set_permission_policy(PermissionPolicy::Select(PermissionOptionKind::AllowOnce));
    client.initialize().await;
    let session = client.new_session(&dirs.project("p")).await;
    let prompt = client.prompt(&session, "/tool delete-repo {}");
    let tag = prompt.tag.clone();
    let response = prompt.ok().await;
    let events = client.events();
    let turn = during(&events, &session, &tag);
    let seen = describe(&turn);
    if let Some(leak) = events
        .iter()
        .find(|e| is_tool_update(e) || matches!(e, Event::Permission { .. }))
    {
        client.fail(format!("a denied tool was emitted on the wire: {}", leak.describe()));
    }
    let texts = message_texts(&turn);
    if !texts.iter().any(|t| t.starts_with("denied")) {
        client.fail(format!("the message does not say `denied…`:\n{seen}"));
    }
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let status = client.shutdown().await;
    assert!(status.success(), "governed-server exited with {status}");
    check_audit_log(&dirs.audit_log, |records| {
        find_tool_record(records, "delete-repo").is_some_and(|record| {
            let approval = &record["metadata"]["aip44"]["approval"];
            approval.get("deniedBy").is_some_and(|by| !by.is_null())
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_mid_stream_answers_cancelled_once_and_the_session_stays_usable() {
    for example in [ECHO, GOVERNED] {
        let dirs = AgentDirs::new();
        let client = spawn(example, &dirs).await;
        client.initialize().await;
        let session = client.new_session(&dirs.project("p")).await;
        let forever = client.prompt(&session, "/forever");
        let tag = forever.tag.clone();
        let first = {
            let session = session.clone();
            move |events: &[Event]| {
                events
                    .iter()
                    .any(|e| e.session_id() == Some(session.as_str()) && e.update_kind() == Some("agent_message_chunk"))
            }
        };
        client.wait_until("the first chunk of /forever", first).await;
        client.cancel(&session);
        let response = forever.ok().await;
        if response.stop_reason != StopReason::Cancelled {
            client.fail(format!(
                "{example}: the cancelled prompt answered {:?}, want cancelled",
                response.stop_reason
            ));
        }

        // The same session serves a new prompt; its response also bounds the wait for a
        // second answer to the cancelled prompt.
        let again = client.prompt(&session, "hello again");
        let again_tag = again.tag.clone();
        let response = again.ok().await;
        assert_eq!(response.stop_reason, StopReason::EndTurn, "{example}");
        let events = client.events();
        let texts = message_texts(&during(&events, &session, &again_tag));
        if texts.concat() != "hello again" {
            client.fail(format!(
                "{example}: the prompt after cancel echoed {texts:?}, want \"hello again\""
            ));
        }
        let answers = client.transcript().responses_to(&tag.wire_id);
        if answers.len() != 1 {
            client.fail(format!(
                "{example}: the cancelled prompt was answered {} times: {answers:?}",
                answers.len()
            ));
        }
        // The turn is over when it is answered: no more ticks after the response.
        let late: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::Update { phase: Phase::AfterResponse(t), .. } if *t == tag))
            .collect();
        if !late.is_empty() {
            client.fail(format!(
                "{example}: updates of the cancelled turn arrived after its response:\n{}",
                describe(&late)
            ));
        }
        let status = client.shutdown().await;
        assert!(status.success(), "{example} exited with {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_permission_is_pending_abandons_it_and_rejects_the_tool() {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let client = spawn(GOVERNED, &dirs).await;
    client.set_permission_policy(PermissionPolicy::Hold);
    client.initialize().await;
    let session = client.new_session(&cwd).await;
    let prompt = client.prompt(
        &session,
        r#"/tool write-file {"path":"held.txt","content":"must not be written"}"#,
    );
    client
        .wait_until("session/request_permission", |events| {
            events.iter().any(|e| matches!(e, Event::Permission { .. }))
        })
        .await;
    client.cancel(&session);
    // The permission request is never answered: the prompt must resolve anyway.
    let response = prompt.ok().await;
    if response.stop_reason != StopReason::Cancelled {
        client.fail(format!(
            "the prompt answered {:?} after session/cancel, want cancelled",
            response.stop_reason
        ));
    }
    assert_eq!(client.held_permissions(), 1);
    assert!(
        !cwd.join("held.txt").exists(),
        "the tool ran although its permission request was abandoned"
    );
    let again = client.prompt(&session, "still here");
    assert_eq!(again.ok().await.stop_reason, StopReason::EndTurn);
    let status = client.shutdown().await;
    assert!(status.success(), "governed-server exited with {status}");
    check_audit_log(&dirs.audit_log, |_| true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_session_after_restart_replays_history_before_its_response() {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let binary = example_binary(GOVERNED);

    let first = SdkClient::spawn(&binary, &dirs).await;
    first.initialize().await;
    let session = first.new_session(&cwd).await;
    let response = first.prompt(&session, "hello").ok().await;
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let status = first.shutdown().await;
    assert!(status.success(), "governed-server exited with {status} on stdin EOF");

    let second = SdkClient::spawn(&binary, &dirs).await;
    second.initialize().await;
    let load = second.load_session(&session, &cwd);
    let tag = load.tag.clone();
    load.ok().await;
    let events = second.events();
    let replay = during(&events, &session, &tag);
    let seen = describe(&replay);
    let user = replay
        .iter()
        .position(|e| e.update_kind() == Some("user_message_chunk") && e.chunk_text() == Some("hello"));
    let agent = replay
        .iter()
        .position(|e| e.update_kind() == Some("agent_message_chunk") && e.chunk_text() == Some("hello"));
    match (user, agent) {
        (Some(u), Some(a)) if u < a => {}
        _ => second.fail(format!(
            "want user_message_chunk \"hello\" then agent_message_chunk \"hello\" before the \
             session/load response; replayed:\n{seen}"
        )),
    }
    // The loaded session takes new prompts.
    let again = second.prompt(&session, "after load");
    assert_eq!(again.ok().await.stop_reason, StopReason::EndTurn);
    let status = second.shutdown().await;
    assert!(status.success(), "governed-server exited with {status}");
    check_audit_log(&dirs.audit_log, |_| true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwd_outside_the_workspace_root_or_relative_is_invalid_params() {
    for example in [ECHO, GOVERNED] {
        let dirs = AgentDirs::new();
        let outside = dirs.outside();
        let link = dirs.workspace_root.join("escape");
        std::os::unix::fs::symlink(&outside, &link).expect("create a symlink");
        let client = spawn(example, &dirs).await;
        client.initialize().await;
        let cases: [(&str, PathBuf); 4] = [
            ("a folder outside the root", outside.clone()),
            ("a relative path", PathBuf::from("p")),
            (
                "an absolute path leaving the root through `..`",
                dirs.workspace_root.join("..").join("outside"),
            ),
            ("a symlink inside the root pointing outside it", link.clone()),
        ];
        for (what, cwd) in cases {
            let result = client.start(None, NewSessionRequest::new(&cwd)).response().await;
            match result {
                Err(error) if error_code(&error) == -32602 => {}
                Err(error) => client.fail(format!(
                    "{example}: session/new with {what} ({}) answered error {} {:?}, want -32602",
                    cwd.display(),
                    error_code(&error),
                    error.message
                )),
                Ok(ok) => client.fail(format!(
                    "{example}: session/new with {what} ({}) succeeded ({ok:?}), want -32602",
                    cwd.display()
                )),
            }
        }
        // The root itself is fine.
        client.new_session(&dirs.workspace_root).await;
        if example == GOVERNED {
            let session = client.new_session(&dirs.project("p")).await;
            let result = client.load_session(&session, &outside).response().await;
            match result {
                Err(error) if error_code(&error) == -32602 => {}
                other => client.fail(format!(
                    "session/load with a cwd outside the root answered {other:?}, want -32602"
                )),
            }
        }
        let status = client.shutdown().await;
        assert!(status.success(), "{example} exited with {status}");
    }
}

/// The editor requests among `events`, as (method, params).
fn editor_requests(events: &[&Event]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Editor { method, params, .. } => Some((method.clone(), params.clone())),
            _ => None,
        })
        .collect()
}

/// Issue #13, servers that use the editor: the official SDK's client, offering its files and
/// terminal at `initialize`, serves governed-server's `turn.editor()` calls — a read (allowed
/// without asking), a write and a command (each asked first) — inside the session's folder,
/// every request answered while the turn is open, and each call in the audit log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_client_serves_a_servers_editor_reads_writes_and_commands() {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let client = spawn(GOVERNED, &dirs).await;
    client.set_permission_policy(PermissionPolicy::Select(PermissionOptionKind::AllowOnce));
    client.initialize_as_editor().await;
    let session = client.new_session(&cwd).await;
    let mut turns = Vec::new();
    for text in [
        "/editor-read notes.txt",
        "/editor-write out.txt hello there",
        "/editor-run cargo test",
    ] {
        let prompt = client.prompt(&session, text);
        let tag = prompt.tag.clone();
        assert_eq!(prompt.ok().await.stop_reason, StopReason::EndTurn, "{text}");
        let events = client.events();
        let turn: Vec<Event> = during(&events, &session, &tag).into_iter().cloned().collect();
        turns.push(turn);
    }
    let [read, write, run] = [0, 1, 2].map(|i| turns[i].iter().collect::<Vec<&Event>>());

    let requests = editor_requests(&read);
    let path = cwd.join("notes.txt").to_string_lossy().into_owned();
    assert_eq!(requests.len(), 1, "{}", describe(&read));
    assert_eq!(requests[0].0, "fs/read_text_file");
    assert_eq!(requests[0].1["path"], path.as_str(), "{}", describe(&read));
    assert!(
        !read.iter().any(|e| matches!(e, Event::Permission { .. })),
        "a read is not asked"
    );
    assert_eq!(message_texts(&read), [format!("editor buffer of {path}")]);
    assert!(
        read.iter()
            .any(|e| tool_field(e, "name") == Some(&json!("fs/read_text_file")))
    );

    assert!(
        write.iter().any(|e| matches!(e, Event::Permission { .. })),
        "a write is asked first"
    );
    let requests = editor_requests(&write);
    assert_eq!(requests.len(), 1, "{}", describe(&write));
    assert_eq!(requests[0].1["content"], "hello there");
    assert_eq!(message_texts(&write), ["wrote 11 bytes"]);

    let methods: Vec<String> = editor_requests(&run).into_iter().map(|(method, _)| method).collect();
    assert_eq!(
        methods,
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ],
        "{}",
        describe(&run)
    );
    let create = &editor_requests(&run)[0].1;
    assert_eq!(
        (&create["command"], &create["args"]),
        (&json!("cargo"), &json!(["test"]))
    );
    assert_eq!(message_texts(&run), ["exit 0: ran in the editor's terminal"]);

    let status = client.shutdown().await;
    assert!(status.success(), "governed-server exited with {status}");
    check_audit_log(&dirs.audit_log, |records| {
        ["fs/read_text_file", "fs/write_text_file", "terminal/create"]
            .iter()
            .all(|tool| find_tool_record(records, tool).is_some())
    });
}

/// An editor that does not offer its files gets no `fs/*` request: the operator is told why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_asks_nothing_of_an_editor_that_did_not_offer_it() {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let client = spawn(GOVERNED, &dirs).await;
    client.initialize().await;
    let session = client.new_session(&cwd).await;
    let prompt = client.prompt(&session, "/editor-read notes.txt");
    let tag = prompt.tag.clone();
    assert_eq!(prompt.ok().await.stop_reason, StopReason::EndTurn);
    let events = client.events();
    let turn = during(&events, &session, &tag);
    assert!(editor_requests(&turn).is_empty(), "{}", describe(&turn));
    let texts = message_texts(&turn);
    assert!(
        texts.len() == 1 && texts[0].contains("does not offer `fs/read_text_file`"),
        "{texts:?}"
    );
    let status = client.shutdown().await;
    assert!(status.success(), "governed-server exited with {status}");
}

/// The current value of the `select` option `id` among `options`.
fn select_value(options: &[SessionConfigOption], id: &str) -> Option<String> {
    options
        .iter()
        .find(|o| o.id.to_string() == id)
        .and_then(|o| match &o.kind {
            SessionConfigKind::Select(select) => Some(select.current_value.to_string()),
            _ => None,
        })
}

/// The `available_commands_update`s about `session`, as the SDK decoded them.
fn command_updates(events: &[Event], session: &str) -> Vec<Vec<(String, Option<String>)>> {
    events
        .iter()
        .filter(|e| e.session_id() == Some(session) && e.update_kind() == Some("available_commands_update"))
        .filter_map(|e| match e {
            Event::Update { update, .. } => serde_json::from_value::<SessionUpdate>(update.clone()).ok(),
            _ => None,
        })
        .filter_map(|update| match update {
            SessionUpdate::AvailableCommandsUpdate(update) => Some(
                update
                    .available_commands
                    .into_iter()
                    .map(|command| {
                        let hint = match command.input {
                            Some(AvailableCommandInput::Unstructured(input)) => Some(input.hint),
                            _ => None,
                        };
                        (command.name, hint)
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// A prompt's message text (the SDK's events while it was outstanding), checked `end_turn`.
async fn say(client: &SdkClient, session: &str, text: &str) -> (Vec<Event>, String) {
    let pending = client.prompt(session, text);
    let tag = pending.tag.clone();
    assert_eq!(pending.ok().await.stop_reason, StopReason::EndTurn, "{text}");
    let events = client.events();
    let turn: Vec<Event> = during(&events, session, &tag).into_iter().cloned().collect();
    let said = message_texts(&turn.iter().collect::<Vec<_>>()).concat();
    (turn, said)
}

/// Issue #16: governed-server's session surface (`metadata.agentacp`) through the SDK's own
/// types: `modes` and `configOptions` decoded from `session/new`, the `available_commands_update`
/// after it, `session/set_mode` and `session/set_config_option` (and what they refuse), the
/// `/summary` command, a `current_mode_update` the operator sends, the `_governed/status`
/// extension request through the SDK's untyped requests, and `session/list`, `close` and
/// `resume`, which keeps the mode and the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_drives_modes_config_options_commands_extensions_and_session_methods() {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let client = spawn(GOVERNED, &dirs).await;
    let initialized = client.initialize().await;
    let offered = &initialized.agent_capabilities.session_capabilities;
    assert!(
        offered.list.is_some() && offered.resume.is_some() && offered.close.is_some(),
        "{offered:?}"
    );

    let opened = client.start(None, NewSessionRequest::new(&cwd)).ok().await;
    let session = opened.session_id.to_string();
    let modes = opened.modes.expect("the SDK decodes `modes`");
    assert_eq!(modes.current_mode_id.to_string(), "ask");
    let ids: Vec<String> = modes.available_modes.iter().map(|m| m.id.to_string()).collect();
    assert_eq!(ids, ["ask", "code"]);
    let options = opened.config_options.expect("the SDK decodes `configOptions`");
    let [model] = options.as_slice() else {
        client.fail(format!("expected one config option, got {options:?}"));
    };
    assert_eq!(model.id.to_string(), "model");
    assert_eq!(model.category, Some(SessionConfigOptionCategory::Model));
    let SessionConfigKind::Select(select) = &model.kind else {
        client.fail(format!("the model option is not a select: {model:?}"));
    };
    assert_eq!(select.current_value.to_string(), "fast");
    let SessionConfigSelectOptions::Ungrouped(values) = &select.options else {
        client.fail(format!("grouped model values: {select:?}"));
    };
    let values: Vec<String> = values.iter().map(|v| v.value.to_string()).collect();
    assert_eq!(values, ["fast", "deep"]);
    client
        .wait_until("the available_commands_update after session/new", |events| {
            command_updates(events, &session).len() == 1
        })
        .await;
    assert_eq!(
        command_updates(&client.events(), &session)[0],
        [("summary".to_string(), Some("what to focus on".to_string()))]
    );

    // Mode and model, set through the SDK's requests; the next echo shows them.
    client
        .start(Some(&session), SetSessionModeRequest::new(session.clone(), "code"))
        .ok()
        .await;
    let refused = client
        .start(Some(&session), SetSessionModeRequest::new(session.clone(), "yolo"))
        .response()
        .await
        .expect_err("an undeclared mode is refused");
    assert_eq!(error_code(&refused), -32602, "{refused:?}");
    let set = client
        .start(
            Some(&session),
            SetSessionConfigOptionRequest::new(session.clone(), "model", SessionConfigOptionValue::value_id("deep")),
        )
        .ok()
        .await;
    assert_eq!(select_value(&set.config_options, "model").as_deref(), Some("deep"));
    let refused = client
        .start(
            Some(&session),
            SetSessionConfigOptionRequest::new(session.clone(), "model", SessionConfigOptionValue::value_id("huge")),
        )
        .response()
        .await
        .expect_err("an undeclared value is refused");
    assert_eq!(error_code(&refused), -32602, "{refused:?}");
    assert_eq!(say(&client, &session, "hello").await.1, "[code, deep] hello");

    // The declared slash command, and the operator switching the mode itself.
    let (_, summary) = say(&client, &session, "/summary the sdk").await;
    assert_eq!(
        summary,
        "summary: 1 earlier prompt in this session; mode code, model deep; focus: the sdk"
    );
    let (turn, said) = say(&client, &session, "/mode ask").await;
    let switches: Vec<SessionUpdate> = turn
        .iter()
        .filter(|e| e.update_kind() == Some("current_mode_update"))
        .filter_map(|e| match e {
            Event::Update { update, .. } => serde_json::from_value(update.clone()).ok(),
            _ => None,
        })
        .collect();
    assert!(
        matches!(switches.as_slice(), [SessionUpdate::CurrentModeUpdate(u)] if u.current_mode_id.to_string() == "ask"),
        "{switches:?}"
    );
    assert_eq!(said, "mode ask");

    // The extension request, through the SDK's untyped requests; an undeclared one.
    let status = client
        .start(
            None,
            UntypedMessage::new("_governed/status", json!({"sessionId": session})).expect("params"),
        )
        .ok()
        .await;
    assert_eq!(
        status,
        json!({"sessionId": session, "mode": "ask", "model": "deep", "prompts": 3})
    );
    let unknown = client
        .start(None, UntypedMessage::new("_governed/nope", json!({})).expect("params"))
        .response()
        .await
        .expect_err("an undeclared extension method");
    assert_eq!(error_code(&unknown), -32601, "{unknown:?}");

    // session/list, close, resume.
    let listed = client
        .start(None, ListSessionsRequest::new().cwd(cwd.clone()))
        .ok()
        .await;
    let listed: Vec<String> = listed.sessions.iter().map(|s| s.session_id.to_string()).collect();
    assert_eq!(listed, [session.as_str()]);
    client
        .start(Some(&session), CloseSessionRequest::new(session.clone()))
        .ok()
        .await;
    let resumed = client
        .start(Some(&session), ResumeSessionRequest::new(session.clone(), &cwd))
        .ok()
        .await;
    assert_eq!(
        resumed.modes.map(|m| m.current_mode_id.to_string()).as_deref(),
        Some("ask")
    );
    assert_eq!(
        select_value(resumed.config_options.as_deref().unwrap_or_default(), "model").as_deref(),
        Some("deep")
    );
    client
        .wait_until("the available_commands_update after session/resume", |events| {
            command_updates(events, &session).len() == 2
        })
        .await;
    assert_eq!(say(&client, &session, "hello").await.1, "[ask, deep] hello");
    let status = client.shutdown().await;
    assert!(status.success(), "governed-server exited with {status}");
    check_audit_log(&dirs.audit_log, |_| true);
}
