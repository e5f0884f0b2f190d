//! The built-in protocol-version-2 wire types (`agentacp::wire::rev_272bf799_v2`, schema
//! v2.0.0-alpha.3) read and write version-2 frames as the schema means them: open enums and
//! tagged unions keep unknown values (and still reject a malformed known one), upsert fields
//! tell absent, `null` and a value apart, and each domain has its own id type. The frames are
//! written here from the schema.

use std::any::TypeId;

use agentacp::wire::rev_272bf799_v2 as wire;
use agentacp::wire::support::Patch;
use serde_json::{Value, json};

/// `value` read as `T`, then written back.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(value: &Value) -> (T, Value) {
    let read: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{value}: {e}"));
    let written = serde_json::to_value(&read).unwrap();
    (read, written)
}

/// The `update` of a `session/update` notification's params, decoded through the module's
/// method enum the way the runtime does.
fn session_update(update: Value) -> wire::SessionUpdate {
    let params = json!({"sessionId": "s-1", "update": update});
    let raw = serde_json::value::to_raw_value(&params).unwrap();
    match wire::AgentNotification::decode("session/update", Some(&raw)).unwrap() {
        wire::AgentNotification::SessionUpdate(notification) => notification.update,
        other => panic!("decoded as {other:?}"),
    }
}

#[test]
fn the_prompt_lifecycle_arrives_as_state_updates() {
    let running = session_update(json!({"sessionUpdate": "state_update", "state": "running"}));
    assert!(matches!(
        running,
        wire::SessionUpdate::StateUpdate(wire::StateUpdate::Running(_))
    ));
    let idle = json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"});
    let wire::SessionUpdate::StateUpdate(wire::StateUpdate::Idle(idle_update)) = session_update(idle.clone()) else {
        panic!("not idle");
    };
    assert_eq!(idle_update.stop_reason, Some(wire::StopReason::EndTurn));
    let (_, written) = round_trip::<wire::SessionUpdate>(&idle);
    assert_eq!(written, idle);
    // `session/prompt` only acknowledges.
    let (_, written) = round_trip::<wire::PromptResponse>(&json!({}));
    assert_eq!(written, json!({}));
}

#[test]
fn unknown_session_updates_content_blocks_and_states_are_kept() {
    let custom = json!({"sessionUpdate": "_acme_progress", "percent": 40});
    assert_eq!(
        session_update(custom.clone()),
        wire::SessionUpdate::Other(custom.as_object().unwrap().clone())
    );
    let (_, written) = round_trip::<wire::SessionUpdate>(&custom);
    assert_eq!(written, custom, "an unknown update is forwarded as it came");

    let block = json!({"type": "_acme_widget", "widget": {"id": 7}});
    let (read, written) = round_trip::<wire::ContentBlock>(&block);
    assert!(matches!(read, wire::ContentBlock::Other(_)));
    assert_eq!(written, block);

    let chunk = json!({
        "sessionUpdate": "agent_message_chunk",
        "messageId": "m-1",
        "content": {"type": "future_block", "data": 1}
    });
    let wire::SessionUpdate::AgentMessageChunk(chunk) = session_update(chunk) else {
        panic!("not a chunk");
    };
    assert!(matches!(chunk.content, wire::ContentBlock::Other(_)));

    let state = json!({"sessionUpdate": "state_update", "state": "_acme_paused"});
    assert!(matches!(
        session_update(state),
        wire::SessionUpdate::StateUpdate(wire::StateUpdate::Other(_))
    ));
}

#[test]
fn a_malformed_known_variant_is_an_error_not_an_unknown_one() {
    // `agent_message_chunk` needs its `messageId` and `content`.
    let malformed = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}});
    assert!(serde_json::from_value::<wire::SessionUpdate>(malformed).is_err());
    let bad_text = json!({"type": "text", "text": 5});
    assert!(serde_json::from_value::<wire::ContentBlock>(bad_text).is_err());
    // A tag that is not a string is not an unknown variant either.
    assert!(serde_json::from_value::<wire::SessionUpdate>(json!({"sessionUpdate": 3})).is_err());
}

#[test]
fn open_enums_keep_unknown_values() {
    let (kind, written) = round_trip::<wire::ToolKind>(&json!("_acme_deploy"));
    assert_eq!(kind, wire::ToolKind::Unknown("_acme_deploy".into()));
    assert_eq!(written, json!("_acme_deploy"));
    let (reason, _) = round_trip::<wire::StopReason>(&json!("paused"));
    assert_eq!(reason, wire::StopReason::Other("paused".into()));
    let (status, _) = round_trip::<wire::ToolCallStatus>(&json!("cancelled"));
    assert_eq!(status, wire::ToolCallStatus::Cancelled);
    let (status, _) = round_trip::<wire::ToolCallStatus>(&json!("_acme_queued"));
    assert_eq!(status, wire::ToolCallStatus::Other("_acme_queued".into()));
}

#[test]
fn a_tool_call_update_patches_each_field_three_ways() {
    // The first update of an id creates the call.
    let create = json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "title": "Read the configuration",
        "kind": "read",
        "status": "pending"
    });
    let wire::SessionUpdate::ToolCallUpdate(created) = session_update(create.clone()) else {
        panic!("not a tool call update");
    };
    assert_eq!(created.title, Patch::Set("Read the configuration".into()));
    assert_eq!(created.kind, Patch::Set(wire::ToolKind::Read));
    assert_eq!(created.content, Patch::Unchanged);
    assert_eq!(created.raw_input, Patch::Unchanged);
    let (_, written) = round_trip::<wire::SessionUpdate>(&create);
    assert_eq!(written, create, "absent fields stay absent");

    // A later one clears the title and the locations, replaces the content, leaves the rest.
    let patch = json!({
        "toolCallId": "call-1",
        "title": null,
        "locations": null,
        "content": [{"type": "content", "content": {"type": "text", "text": "done"}}],
        "_meta": null
    });
    let (update, written) = round_trip::<wire::ToolCallUpdate>(&patch);
    assert_eq!(update.title, Patch::Clear);
    assert_eq!(update.locations, Patch::Clear);
    assert_eq!(update.meta, Patch::Clear);
    assert_eq!(update.status, Patch::Unchanged);
    assert!(matches!(&update.content, Patch::Set(items) if items.len() == 1));
    assert_eq!(written, patch, "`null` is written back as `null`, absent as absent");
}

#[test]
fn message_and_terminal_upserts_tell_absent_null_and_empty_apart() {
    let base = |content: Option<Value>| {
        let mut value = json!({"sessionUpdate": "agent_message", "messageId": "m-2"});
        if let Some(content) = content {
            value["content"] = content;
        }
        value
    };
    let content = |update: wire::SessionUpdate| match update {
        wire::SessionUpdate::AgentMessage(message) => message.content,
        other => panic!("{other:?}"),
    };
    assert_eq!(content(session_update(base(None))), Patch::Unchanged);
    assert_eq!(content(session_update(base(Some(Value::Null)))), Patch::Clear);
    assert_eq!(content(session_update(base(Some(json!([]))))), Patch::Set(Vec::new()));

    let terminal = json!({
        "sessionUpdate": "terminal_update",
        "terminalId": "term-1",
        "command": "cargo test",
        "cwd": "/workspace",
        "exitStatus": null
    });
    let wire::SessionUpdate::TerminalUpdate(update) = session_update(terminal.clone()) else {
        panic!("not a terminal update");
    };
    assert_eq!(update.command, Patch::Set("cargo test".into()));
    assert_eq!(update.exit_status, Patch::Clear);
    assert_eq!(update.output, Patch::Unchanged);
    let (_, written) = round_trip::<wire::SessionUpdate>(&terminal);
    assert_eq!(written, terminal);

    let info = json!({"sessionUpdate": "session_info_update", "_meta": null});
    let wire::SessionUpdate::SessionInfoUpdate(info) = session_update(info) else {
        panic!("not a session info update");
    };
    assert_eq!((info.meta, info.title), (Patch::Clear, Patch::Unchanged));
}

#[test]
fn plans_resume_auth_and_permission_requests_have_their_v2_shapes() {
    let plan = json!({
        "sessionUpdate": "plan_update",
        "plan": {
            "type": "items",
            "planId": "plan-1",
            "entries": [{"content": "Run the tests", "priority": "high", "status": "cancelled"}]
        }
    });
    let wire::SessionUpdate::PlanUpdate(update) = session_update(plan) else {
        panic!("not a plan update");
    };
    let wire::PlanUpdateContent::Items(items) = update.plan else {
        panic!("not items");
    };
    assert_eq!(items.plan_id.as_str(), "plan-1");
    assert_eq!(items.entries[0].status, wire::PlanEntryStatus::Cancelled);

    let decode = |method: &str, params: Value| {
        let raw = serde_json::value::to_raw_value(&params).unwrap();
        wire::ClientRequest::decode(method, Some(&raw)).unwrap_or_else(|e| panic!("{method}: {e}"))
    };
    let resume = decode(
        "session/resume",
        json!({"sessionId": "s-1", "cwd": "/workspace", "replayFrom": {"type": "start"}}),
    );
    let wire::ClientRequest::SessionResume(resume) = resume else {
        panic!("not a resume");
    };
    assert!(matches!(resume.replay_from, Some(wire::ReplayFrom::Start(_))));
    assert!(matches!(
        decode("auth/login", json!({"methodId": "agent-login"})),
        wire::ClientRequest::AuthLogin(_)
    ));
    let raw = serde_json::value::to_raw_value(&json!({})).unwrap();
    assert!(
        wire::ClientRequest::decode("session/load", Some(&raw)).is_err(),
        "version 2 has no session/load"
    );

    let permission = json!({
        "sessionId": "s-1",
        "title": "Run the tests?",
        "subject": {"type": "tool_call", "toolCall": {"toolCallId": "call-1", "status": "pending"}},
        "options": [{"optionId": "allow", "name": "Allow once", "kind": "allow_once"}]
    });
    let (request, written) = round_trip::<wire::RequestPermissionRequest>(&permission);
    assert_eq!(request.title, "Run the tests?");
    let Some(wire::RequestPermissionSubject::ToolCall(subject)) = &request.subject else {
        panic!("not a tool-call subject");
    };
    assert_eq!(subject.tool_call.tool_call_id.as_str(), "call-1");
    assert_eq!(written, permission);
}

/// Each domain has its id type: a message id cannot be passed where a tool-call id is wanted
/// (the field types below are checked by the compiler), and the types are distinct.
#[test]
fn ids_are_distinct_types_per_domain() {
    fn ids(
        chunk: &wire::ContentChunk,
        call: &wire::ToolCallUpdate,
        plan: &wire::PlanItems,
        terminal: &wire::TerminalUpdate,
        notification: &wire::UpdateSessionNotification,
    ) -> [String; 5] {
        let message: &wire::MessageId = &chunk.message_id;
        let tool_call: &wire::ToolCallId = &call.tool_call_id;
        let plan_id: &wire::PlanId = &plan.plan_id;
        let terminal_id: &wire::TerminalId = &terminal.terminal_id;
        let session: &wire::SessionId = &notification.session_id;
        [
            message.to_string(),
            tool_call.to_string(),
            plan_id.to_string(),
            terminal_id.to_string(),
            session.to_string(),
        ]
    }
    let chunk: wire::ContentChunk =
        serde_json::from_value(json!({"messageId": "m", "content": {"type": "text", "text": "t"}})).unwrap();
    let call = wire::ToolCallUpdate::new("c".into());
    let plan: wire::PlanItems = serde_json::from_value(json!({"planId": "p", "entries": []})).unwrap();
    let terminal = wire::TerminalUpdate::new("t".into());
    let notification = wire::UpdateSessionNotification::new("s".into(), session_update(json!({"sessionUpdate": "_x"})));
    assert_eq!(
        ids(&chunk, &call, &plan, &terminal, &notification),
        ["m", "c", "p", "t", "s"]
    );
    let types = [
        TypeId::of::<wire::MessageId>(),
        TypeId::of::<wire::ToolCallId>(),
        TypeId::of::<wire::PlanId>(),
        TypeId::of::<wire::TerminalId>(),
        TypeId::of::<wire::SessionId>(),
        TypeId::of::<wire::PermissionOptionId>(),
        TypeId::of::<wire::AuthMethodId>(),
    ];
    let distinct: std::collections::BTreeSet<_> = types.iter().collect();
    assert_eq!(distinct.len(), types.len());
}
