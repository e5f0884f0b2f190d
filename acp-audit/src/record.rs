//! What gets audited ([`AuditEvent`] and its parts), the AIP-44 mirrors built from lifecycle
//! transitions and tool calls, and the written [`AuditRecord`].

use serde_json::{Map, Value, json};

use super::canonical::{canonical_object_without, sha256_hex};
use super::depth::bound_record;

/// The `$schema` tag of every record.
pub const SCHEMA_TAG: &str = "agentgovernance/v1";
/// The `doctype` of every record.
pub const DOCTYPE: &str = "audit-event";
/// The `prevHash` of the first record of a chain.
pub const GENESIS: &str = "GENESIS";
/// The only hash algorithm this crate writes and verifies.
pub const HASH_ALG: &str = "sha256";

/// Who acted: `actor` of the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// A stable principal id (1–256 characters), e.g. `operator:echo`.
    pub id: String,
    /// The principal's role (at most 64 characters), e.g. `operator`.
    pub role: Option<String>,
}

/// What was acted on: `subject` of the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The kind of thing (at most 32 characters), e.g. `session` or `tool-call`.
    pub kind: String,
    /// Its id (at most 256 characters); written as `ref`.
    pub reference: Option<String>,
    /// A workspace path it concerns (at most 1024 characters).
    pub path: Option<String>,
}

/// The governance policy that decided: `policy` of the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRef {
    /// The policy's slug (`^[a-z][a-z0-9-]*[a-z0-9]$`, 2–64 characters); written as `ref`.
    pub reference: String,
    /// `allow`, `deny`, `require-approval` or `escalate`.
    pub decision: Option<String>,
}

/// One thing to audit. [`AuditLog::record`](super::AuditLog::record) adds the chain fields
/// (`seq`, `ts`, `prevHash`, `hash`, `hashAlg`) and the constant `$schema` and `doctype`.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// Who acted.
    pub actor: Actor,
    /// The action class, e.g. `tool.call` (`^[a-z][a-z0-9._-]*[a-z0-9]$`, at most 128 characters).
    pub action: String,
    /// What was acted on.
    pub subject: Subject,
    /// The input, a JSON object.
    pub input: Option<Value>,
    /// The output, a JSON object.
    pub output: Option<Value>,
    /// The deciding policy.
    pub policy: Option<PolicyRef>,
    /// Free-form details; AIP-44 mirrors live under `metadata.aip44`.
    pub metadata: Option<Map<String, Value>>,
}

/// An operator lifecycle state (AIP-9), each transition into which is audited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lifecycle {
    /// The session was created (`session/new` answered).
    Invoked,
    /// The operator is working on a turn.
    Running,
    /// Waiting for a permission decision.
    Suspended,
    /// The permission decision arrived.
    Resumed,
    /// The turn ended normally.
    Completed,
    /// The turn was cancelled or failed.
    Interrupted,
}

impl Lifecycle {
    /// Every state, in lifecycle order.
    pub const ALL: [Lifecycle; 6] = [
        Lifecycle::Invoked,
        Lifecycle::Running,
        Lifecycle::Suspended,
        Lifecycle::Resumed,
        Lifecycle::Completed,
        Lifecycle::Interrupted,
    ];

    /// The state's name: `invoked`, `running`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Invoked => "invoked",
            Lifecycle::Running => "running",
            Lifecycle::Suspended => "suspended",
            Lifecycle::Resumed => "resumed",
            Lifecycle::Completed => "completed",
            Lifecycle::Interrupted => "interrupted",
        }
    }
}

/// How a tool call ended, for its audit record.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcomeRecord {
    /// The tool's result.
    Result(Value),
    /// Why there is no result (tool failure, rejection or denial).
    Error(String),
}

/// Who let a tool call run, or stopped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Governance allowed it without asking anyone.
    Auto,
    /// Someone approved it (e.g. the client user through `session/request_permission`).
    ApprovedBy(String),
    /// Someone rejected it; a permission request that timed out or was cancelled is a
    /// rejection with reason `timeout` or `cancelled`.
    RejectedBy {
        /// Who rejected it.
        who: String,
        /// Why.
        reason: String,
    },
    /// Governance denied it outright (the tool call was never sent to the client).
    Denied {
        /// Why.
        reason: String,
    },
}

impl Approval {
    /// The AIP-44 `approval` value: `"auto"`, `{"approvedBy"}`, `{"rejectedBy","reason"}` or
    /// `{"deniedBy":"governance","reason"}`.
    pub fn to_value(&self) -> Value {
        match self {
            Approval::Auto => json!("auto"),
            Approval::ApprovedBy(who) => json!({"approvedBy": who}),
            Approval::RejectedBy { who, reason } => json!({"rejectedBy": who, "reason": reason}),
            Approval::Denied { reason } => json!({"deniedBy": "governance", "reason": reason}),
        }
    }
}

/// The AIP-44 tool-call mirror: everything the audit record of one tool call says.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallMirror {
    /// The operator's id (AIP-9).
    pub operator: String,
    /// The ACP session id.
    pub session: String,
    /// The ACP `toolCallId` (the record's `subject.ref`).
    pub tool_call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments, as given.
    pub arguments: Value,
    /// Its result or error. A call that was denied or rejected never ran: give an `Error`.
    pub outcome: ToolOutcomeRecord,
    /// Who allowed or stopped it.
    pub approval: Approval,
}

fn operator_actor(operator: &str) -> Actor {
    Actor {
        id: format!("operator:{operator}"),
        role: Some("operator".into()),
    }
}

impl AuditEvent {
    /// An event with no input, output, policy or metadata.
    pub fn new(actor: Actor, action: impl Into<String>, subject: Subject) -> Self {
        AuditEvent {
            actor,
            action: action.into(),
            subject,
            input: None,
            output: None,
            policy: None,
            metadata: None,
        }
    }

    /// The record of a lifecycle transition of `operator` in `session`: action
    /// `operator.<state>`, subject the session, `metadata.aip44` the AIP-44 mirror
    /// (`audit-event-kind: lifecycle`). `detail` (e.g. `{"stopReason": "end_turn"}`) becomes
    /// the `output`; a value that is not an object is wrapped as `{"detail": value}`.
    pub fn lifecycle(operator: &str, session: &str, state: Lifecycle, detail: Option<Value>) -> Self {
        let mut aip44 = Map::new();
        aip44.insert("audit-event-kind".into(), json!("lifecycle"));
        aip44.insert("operator".into(), json!(operator));
        aip44.insert("session".into(), json!(session));
        aip44.insert("state".into(), json!(state.as_str()));
        let output = detail.map(|detail| match detail {
            Value::Object(_) => detail,
            other => json!({"detail": other}),
        });
        AuditEvent {
            actor: operator_actor(operator),
            action: format!("operator.{}", state.as_str()),
            subject: Subject {
                kind: "session".into(),
                reference: Some(session.into()),
                path: None,
            },
            input: None,
            output,
            policy: None,
            metadata: Some(Map::from_iter([("aip44".to_string(), Value::Object(aip44))])),
        }
    }

    /// The record of one tool call: action `tool.call`, subject the tool call, `input`
    /// `{tool, arguments}`, `output` `{result}` or `{error}`, and the AIP-44 mirror verbatim
    /// under `metadata.aip44` (`audit-event-kind: tool-call`, `operator`, `session`, `tool`,
    /// `arguments`, `result` or `error`, `approval`).
    pub fn tool_call(mirror: ToolCallMirror) -> Self {
        let ToolCallMirror {
            operator,
            session,
            tool_call_id,
            tool,
            arguments,
            outcome,
            approval,
        } = mirror;
        let (outcome_key, outcome_value) = match outcome {
            ToolOutcomeRecord::Result(result) => ("result", result),
            ToolOutcomeRecord::Error(error) => ("error", Value::String(error)),
        };
        let mut aip44 = Map::new();
        aip44.insert("audit-event-kind".into(), json!("tool-call"));
        aip44.insert("operator".into(), json!(operator));
        aip44.insert("session".into(), json!(session));
        aip44.insert("tool".into(), json!(tool));
        aip44.insert("arguments".into(), arguments.clone());
        aip44.insert(outcome_key.into(), outcome_value.clone());
        aip44.insert("approval".into(), approval.to_value());
        AuditEvent {
            actor: operator_actor(&operator),
            action: "tool.call".into(),
            subject: Subject {
                kind: "tool-call".into(),
                reference: Some(tool_call_id),
                path: None,
            },
            input: Some(json!({"tool": tool, "arguments": arguments})),
            output: Some(Value::Object(Map::from_iter([(
                outcome_key.to_string(),
                outcome_value,
            )]))),
            policy: None,
            metadata: Some(Map::from_iter([("aip44".to_string(), Value::Object(aip44))])),
        }
    }

    /// The same tool call as the one the agent reported under `tool_call_id` (whose own
    /// record has that `subject.ref`): for a call a client or bridge ran or passed itself, such
    /// as an MCP call over ACP, that the agent also reported as a `tool_call`. Written as
    /// `metadata.agentacp.reportedAs`, beside the AIP-44 mirror, so a reader counts the call once.
    #[must_use]
    pub fn reported_as(mut self, tool_call_id: impl Into<String>) -> Self {
        let metadata = self.metadata.get_or_insert_with(Map::new);
        let ours = metadata.entry("agentacp").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(ours) = ours {
            ours.insert("reportedAs".into(), Value::String(tool_call_id.into()));
        }
        self
    }

    /// Checks what the AIP-7 `auditEvent` schema says about the caller-supplied fields, so that
    /// every written record validates.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let chars = |s: &str| s.chars().count();
        let too_long = |what: &str, s: &str, max: usize| {
            (chars(s) > max).then(|| format!("{what} is {} characters long; at most {max} are allowed", chars(s)))
        };
        if !is_action(&self.action) {
            return Err(format!(
                "action `{}` does not match ^[a-z][a-z0-9._-]*[a-z0-9]$",
                self.action
            ));
        }
        if self.actor.id.is_empty() {
            return Err("actor.id is empty".into());
        }
        let mut checks = vec![
            too_long("action", &self.action, 128),
            too_long("actor.id", &self.actor.id, 256),
            too_long("subject.kind", &self.subject.kind, 32),
        ];
        if let Some(role) = &self.actor.role {
            checks.push(too_long("actor.role", role, 64));
        }
        if let Some(reference) = &self.subject.reference {
            checks.push(too_long("subject.ref", reference, 256));
        }
        if let Some(path) = &self.subject.path {
            checks.push(too_long("subject.path", path, 1024));
        }
        if let Some(problem) = checks.into_iter().flatten().next() {
            return Err(problem);
        }
        for (what, value) in [("input", &self.input), ("output", &self.output)] {
            if value.as_ref().is_some_and(|v| !v.is_object()) {
                return Err(format!("{what} must be a JSON object"));
            }
        }
        if let Some(policy) = &self.policy {
            if !is_slug(&policy.reference) {
                return Err(format!(
                    "policy.ref `{}` is not a slug (^[a-z][a-z0-9-]*[a-z0-9]$, 2-64 characters)",
                    policy.reference
                ));
            }
            if let Some(decision) = &policy.decision
                && !["allow", "deny", "require-approval", "escalate"].contains(&decision.as_str())
            {
                return Err(format!(
                    "policy.decision `{decision}` is not one of allow, deny, require-approval, escalate"
                ));
            }
        }
        Ok(())
    }
}

/// `^[a-z][a-z0-9._-]*[a-z0-9]$`
fn is_action(s: &str) -> bool {
    let bytes = s.as_bytes();
    match bytes {
        [first, middle @ .., last] => {
            first.is_ascii_lowercase()
                && middle
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b".-_".contains(b))
                && (last.is_ascii_lowercase() || last.is_ascii_digit())
        }
        _ => false,
    }
}

/// `^[a-z][a-z0-9-]*[a-z0-9]$`, at most 64 characters.
fn is_slug(s: &str) -> bool {
    is_action(s) && !s.contains(['.', '_']) && s.len() <= 64
}

/// A record as written: the full JSON object (chain fields included) and its hash.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// Its position in the chain, from 0.
    pub seq: u64,
    /// Its `hash` (lowercase hex SHA-256).
    pub hash: String,
    /// The whole record, as written on its line.
    pub value: Value,
}

impl AuditRecord {
    /// Builds the record of `event` at `seq`, linked to `prev_hash`, stamped `ts`; a value
    /// nested deeper than [`MAX_WRITE_DEPTH`](super::MAX_WRITE_DEPTH) allows is kept as its JSON
    /// text (see [`DEEP_JSON_KEY`](super::DEEP_JSON_KEY)).
    pub(crate) fn build(event: AuditEvent, seq: u64, ts: String, prev_hash: &str) -> AuditRecord {
        let AuditEvent {
            actor,
            action,
            subject,
            input,
            output,
            policy,
            metadata,
        } = event;
        let mut record = Map::new();
        record.insert("$schema".into(), json!(SCHEMA_TAG));
        record.insert("doctype".into(), json!(DOCTYPE));
        record.insert("seq".into(), json!(seq));
        record.insert("ts".into(), json!(ts));
        let mut actor_value = Map::new();
        actor_value.insert("id".into(), json!(actor.id));
        if let Some(role) = actor.role {
            actor_value.insert("role".into(), json!(role));
        }
        record.insert("actor".into(), Value::Object(actor_value));
        record.insert("action".into(), json!(action));
        let mut subject_value = Map::new();
        subject_value.insert("kind".into(), json!(subject.kind));
        if let Some(reference) = subject.reference {
            subject_value.insert("ref".into(), json!(reference));
        }
        if let Some(path) = subject.path {
            subject_value.insert("path".into(), json!(path));
        }
        record.insert("subject".into(), Value::Object(subject_value));
        if let Some(input) = input {
            record.insert("input".into(), input);
        }
        if let Some(output) = output {
            record.insert("output".into(), output);
        }
        if let Some(policy) = policy {
            let mut policy_value = Map::new();
            policy_value.insert("ref".into(), json!(policy.reference));
            if let Some(decision) = policy.decision {
                policy_value.insert("decision".into(), json!(decision));
            }
            record.insert("policy".into(), Value::Object(policy_value));
        }
        if let Some(metadata) = metadata {
            record.insert("metadata".into(), Value::Object(metadata));
        }
        record.insert("prevHash".into(), json!(prev_hash));
        record.insert("hashAlg".into(), json!(HASH_ALG));
        // What came from elsewhere may nest deeper than a reader reads: kept as text past the bound.
        bound_record(&mut record);
        let hash = sha256_hex(&canonical_object_without(&record, "hash"));
        // `hash` is written between prevHash and hashAlg, for readability (order is not hashed).
        record.shift_insert(record.len() - 1, "hash".into(), json!(hash));
        AuditRecord {
            seq,
            hash,
            value: Value::Object(record),
        }
    }

    /// The record's line: compact JSON in the order the fields were built, with its `\n`.
    pub fn line(&self) -> String {
        let mut line = self.value.to_string();
        line.push('\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mirror(outcome: ToolOutcomeRecord, approval: Approval) -> ToolCallMirror {
        ToolCallMirror {
            operator: "echo".into(),
            session: "sess-1".into(),
            tool_call_id: "call-7".into(),
            tool: "write-file".into(),
            arguments: json!({"path": "a.txt", "content": "hi"}),
            outcome,
            approval,
        }
    }

    #[test]
    fn tool_call_mirror_fields() {
        let event = AuditEvent::tool_call(mirror(
            ToolOutcomeRecord::Result(json!({"written": 2})),
            Approval::ApprovedBy("client-user".into()),
        ));
        assert_eq!(event.action, "tool.call");
        assert_eq!(
            event.actor,
            Actor {
                id: "operator:echo".into(),
                role: Some("operator".into())
            }
        );
        assert_eq!(event.subject.kind, "tool-call");
        assert_eq!(event.subject.reference.as_deref(), Some("call-7"));
        assert_eq!(
            event.input,
            Some(json!({"tool": "write-file", "arguments": {"path": "a.txt", "content": "hi"}}))
        );
        assert_eq!(event.output, Some(json!({"result": {"written": 2}})));
        let aip44 = Value::Object(event.metadata.unwrap())["aip44"].clone();
        let keys: Vec<&str> = aip44.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "audit-event-kind",
                "operator",
                "session",
                "tool",
                "arguments",
                "result",
                "approval"
            ]
        );
        assert_eq!(aip44["audit-event-kind"], "tool-call");
        assert_eq!(aip44["operator"], "echo");
        assert_eq!(aip44["session"], "sess-1");
        assert_eq!(aip44["approval"], json!({"approvedBy": "client-user"}));
    }

    #[test]
    fn a_call_reported_by_the_agent_too_names_its_report_beside_the_mirror() {
        let plain = AuditEvent::tool_call(mirror(ToolOutcomeRecord::Result(json!(1)), Approval::Auto));
        let linked = plain.clone().reported_as("call_3");
        let metadata = linked.metadata.expect("metadata");
        assert_eq!(metadata["agentacp"], json!({"reportedAs": "call_3"}));
        assert_eq!(
            metadata["aip44"],
            plain.metadata.expect("metadata")["aip44"],
            "the AIP-44 mirror is untouched"
        );
    }

    #[test]
    fn denied_tool_call_has_an_error_and_no_result() {
        let event = AuditEvent::tool_call(mirror(
            ToolOutcomeRecord::Error("not authorized".into()),
            Approval::Denied {
                reason: "not in the operator's tool list".into(),
            },
        ));
        assert_eq!(event.output, Some(json!({"error": "not authorized"})));
        let aip44 = &event.metadata.unwrap()["aip44"];
        assert_eq!(aip44["error"], "not authorized");
        assert!(aip44.get("result").is_none());
        assert_eq!(
            aip44["approval"],
            json!({"deniedBy": "governance", "reason": "not in the operator's tool list"})
        );
    }

    #[test]
    fn approval_values() {
        assert_eq!(Approval::Auto.to_value(), json!("auto"));
        assert_eq!(
            Approval::RejectedBy {
                who: "client".into(),
                reason: "timeout".into()
            }
            .to_value(),
            json!({"rejectedBy": "client", "reason": "timeout"})
        );
    }

    #[test]
    fn lifecycle_events() {
        for state in Lifecycle::ALL {
            let event = AuditEvent::lifecycle("echo", "sess-1", state, None);
            assert_eq!(event.action, format!("operator.{}", state.as_str()));
            assert_eq!(
                event.subject,
                Subject {
                    kind: "session".into(),
                    reference: Some("sess-1".into()),
                    path: None
                }
            );
            let aip44 = &event.metadata.as_ref().unwrap()["aip44"];
            assert_eq!(
                aip44,
                &json!({"audit-event-kind": "lifecycle", "operator": "echo", "session": "sess-1", "state": state.as_str()})
            );
            assert_eq!(event.validate(), Ok(()));
        }
        let done = AuditEvent::lifecycle(
            "echo",
            "s",
            Lifecycle::Completed,
            Some(json!({"stopReason": "end_turn"})),
        );
        assert_eq!(done.output, Some(json!({"stopReason": "end_turn"})));
        let odd = AuditEvent::lifecycle("echo", "s", Lifecycle::Interrupted, Some(json!("boom")));
        assert_eq!(odd.output, Some(json!({"detail": "boom"})));
    }

    #[test]
    fn validation_rejects_what_the_schema_rejects() {
        let ok = AuditEvent::new(
            Actor {
                id: "a".into(),
                role: None,
            },
            "audit.note",
            Subject {
                kind: "k".into(),
                reference: None,
                path: None,
            },
        );
        assert_eq!(ok.validate(), Ok(()));
        let with = |f: &dyn Fn(&mut AuditEvent)| {
            let mut event = ok.clone();
            f(&mut event);
            event.validate()
        };
        for action in ["", "a", "Tool.call", "tool.", "1tool", "tool call", "tool.call-"] {
            assert!(with(&|e| e.action = action.into()).is_err(), "{action:?}");
        }
        for action in ["ab", "tool.call", "operator.invoked", "a_b-c.d9"] {
            assert_eq!(with(&|e| e.action = action.into()), Ok(()), "{action:?}");
        }
        assert!(with(&|e| e.action = format!("a{}", "b".repeat(128))).is_err());
        assert!(with(&|e| e.actor.id = String::new()).is_err());
        assert!(with(&|e| e.actor.id = "é".repeat(257)).is_err());
        assert_eq!(with(&|e| e.actor.id = "é".repeat(256)), Ok(()));
        assert!(with(&|e| e.actor.role = Some("r".repeat(65))).is_err());
        assert!(with(&|e| e.subject.kind = "k".repeat(33)).is_err());
        assert!(with(&|e| e.subject.reference = Some("r".repeat(257))).is_err());
        assert!(with(&|e| e.subject.path = Some("p".repeat(1025))).is_err());
        assert!(with(&|e| e.input = Some(json!([1]))).is_err());
        assert!(with(&|e| e.output = Some(json!("x"))).is_err());
        let policy = |r: &str, d: Option<&str>| {
            Some(PolicyRef {
                reference: r.into(),
                decision: d.map(Into::into),
            })
        };
        assert_eq!(with(&|e| e.policy = policy("prod-deploy", Some("deny"))), Ok(()));
        assert!(with(&|e| e.policy = policy("prod.deploy", None)).is_err());
        assert!(with(&|e| e.policy = policy("p", None)).is_err());
        assert!(with(&|e| e.policy = policy("prod", Some("approve"))).is_err());
    }

    #[test]
    fn hash_covers_every_field_but_itself_and_sits_before_hash_alg() {
        let event = AuditEvent::lifecycle("echo", "s", Lifecycle::Invoked, None);
        let record = AuditRecord::build(event, 0, "1970-01-01T00:00:00.000Z".into(), GENESIS);
        let map = record.value.as_object().unwrap();
        let keys: Vec<&str> = map.keys().map(String::as_str).collect();
        assert_eq!(keys[keys.len() - 3..], ["prevHash", "hash", "hashAlg"]);
        let without: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| *k != "hash")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(
            record.hash,
            sha256_hex(&super::super::canonical_json(&Value::Object(without)))
        );
        assert_eq!(map["hash"], record.hash.as_str());
        assert!(record.line().ends_with("}\n") && !record.line()[..record.line().len() - 1].contains('\n'));
    }
}
