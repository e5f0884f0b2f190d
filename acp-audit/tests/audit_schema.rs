//! Every kind of record the audit log writes is a valid AIP-7 `audit-event`: checked against
//! `$defs/auditEvent` of the published GOVERNANCE schema (from `../shared`; skipped when absent).

use test_support as common;

use acp_audit::{
    Actor, Approval, AuditEvent, AuditLog, Lifecycle, MemorySink, PolicyRef, Subject, ToolCallMirror, ToolOutcomeRecord,
};
use serde_json::{Value, json};

/// Validators for `$defs/auditEvent` and for the whole schema (one of the four doctypes),
/// with `format` (date-time) asserted.
fn validators() -> Option<(jsonschema::Validator, jsonschema::Validator)> {
    let Some(shared) = common::shared() else {
        eprintln!("skipped: ../shared is absent");
        return None;
    };
    let text = std::fs::read_to_string(shared.join("upstream/aip-7/GOVERNANCE.schema.json")).unwrap();
    let whole: Value = serde_json::from_str(&text).unwrap();
    let mut audit_event = whole.clone();
    let root = audit_event.as_object_mut().unwrap();
    root.shift_remove("oneOf");
    root.insert("$ref".into(), json!("#/$defs/auditEvent"));
    let build = |schema: &Value| {
        jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .unwrap()
    };
    Some((build(&audit_event), build(&whole)))
}

fn mirror(outcome: ToolOutcomeRecord, approval: Approval) -> AuditEvent {
    AuditEvent::tool_call(ToolCallMirror {
        operator: "governed-server".into(),
        session: "sess-0001".into(),
        tool_call_id: "call-1".into(),
        tool: "write-file".into(),
        arguments: json!({"path": "notes.txt", "content": "hello\n"}),
        outcome,
        approval,
    })
}

/// One event of every kind the runtime writes.
fn every_kind() -> Vec<(String, AuditEvent)> {
    let mut events = Vec::new();
    for state in Lifecycle::ALL {
        events.push((
            format!("lifecycle {}", state.as_str()),
            AuditEvent::lifecycle("echo", "sess-0001", state, None),
        ));
    }
    events.push((
        "lifecycle completed with detail".into(),
        AuditEvent::lifecycle(
            "echo",
            "sess-0001",
            Lifecycle::Completed,
            Some(json!({"stopReason": "end_turn"})),
        ),
    ));
    events.push((
        "lifecycle interrupted with a non-object detail".into(),
        AuditEvent::lifecycle(
            "echo",
            "sess-0001",
            Lifecycle::Interrupted,
            Some(json!("client went away")),
        ),
    ));
    let result = || ToolOutcomeRecord::Result(json!({"bytes": 6}));
    let error = |e: &str| ToolOutcomeRecord::Error(e.into());
    let approvals = [
        ("auto", Approval::Auto),
        ("approved", Approval::ApprovedBy("client".into())),
        (
            "rejected",
            Approval::RejectedBy {
                who: "client".into(),
                reason: "user said no".into(),
            },
        ),
        (
            "timed out",
            Approval::RejectedBy {
                who: "client".into(),
                reason: "timeout".into(),
            },
        ),
        (
            "cancelled",
            Approval::RejectedBy {
                who: "client".into(),
                reason: "cancelled".into(),
            },
        ),
        (
            "denied",
            Approval::Denied {
                reason: "delete-repo is not in the operator's tool list".into(),
            },
        ),
    ];
    for (name, approval) in approvals {
        events.push((
            format!("tool call {name} with a result"),
            mirror(result(), approval.clone()),
        ));
        events.push((
            format!("tool call {name} with an error"),
            mirror(error("it failed"), approval),
        ));
    }
    events.push((
        "tool call with a non-object result".into(),
        mirror(ToolOutcomeRecord::Result(json!(["a", 1])), Approval::Auto),
    ));
    let mut note = AuditEvent::new(
        Actor {
            id: "host:governance".into(),
            role: None,
        },
        "policy.resolved",
        Subject {
            kind: "workspace".into(),
            reference: None,
            path: Some("src/lib.rs".into()),
        },
    );
    note.policy = Some(PolicyRef {
        reference: "default-policy".into(),
        decision: Some("require-approval".into()),
    });
    note.output = Some(json!({"$redacted": true, "reason": "secret"}));
    events.push(("a general event with policy and path".into(), note));
    events
}

#[test]
fn every_record_kind_is_a_valid_aip7_audit_event() {
    let Some((audit_event, whole)) = validators() else {
        return;
    };
    let sink = MemorySink::new();
    let log = AuditLog::with_sink(Box::new(sink.clone()));
    let kinds = every_kind();
    for (name, event) in &kinds {
        let record = log.record(event.clone()).unwrap();
        let errors: Vec<String> = audit_event.iter_errors(&record.value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:?}\n{}", record.value);
        assert!(
            whole.is_valid(&record.value),
            "{name}: not valid against the whole AIP-7 schema"
        );
    }
    // And exactly what was validated is what was written: a chain that verifies.
    let summary = acp_audit::verify(sink.contents().as_bytes()).unwrap();
    assert_eq!(summary.records, kinds.len() as u64);
}

#[test]
fn the_validator_rejects_a_mirror_outside_metadata() {
    // The closed schema is why the AIP-44 fields live under metadata.aip44: at the top level
    // they would be rejected. (Also shows the validator is really checking.)
    let Some((audit_event, _)) = validators() else { return };
    let sink = MemorySink::new();
    let record =
        AuditLog::with_sink(Box::new(sink)).record(mirror(ToolOutcomeRecord::Error("x".into()), Approval::Auto));
    let mut value = record.unwrap().value;
    assert!(audit_event.is_valid(&value));
    value
        .as_object_mut()
        .unwrap()
        .insert("audit-event-kind".into(), json!("tool-call"));
    assert!(!audit_event.is_valid(&value));
    value.as_object_mut().unwrap().shift_remove("audit-event-kind");
    value["ts"] = json!("yesterday");
    assert!(!audit_event.is_valid(&value), "date-time format is asserted");
}
