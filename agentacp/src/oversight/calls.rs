//! The tool calls a side that receives them follows — a client of its agent, a bridge of the
//! agent behind it: governance's decision on each (by every name, never by the kind the
//! agent claims), the approval it was given, and its write-ahead record once it ends (the
//! AIP-44 tool-call mirror), with who approved it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::decide::{KindFrom, decide};
use super::facts::{ReportsToolCall, ToolFacts};
use super::record::write_ahead;
use crate::audit::{Approval, AuditEvent, AuditLog, ToolCallMirror, ToolOutcomeRecord};
use crate::governance::{Decision, Governance, ToolKind, ToolRequest};
use crate::sync::lock;

/// The tool name governance and the audit log know a terminal by.
pub const TERMINAL_TOOL: &str = "terminal/create";

/// A tool call seen in a session, until it ends.
#[derive(Debug, Default)]
struct Tracked {
    tool: String,
    /// Every explicit name it went by ([`ToolFacts::names`]): the audit classifies a call by
    /// all of them.
    names: Vec<String>,
    /// Every title it went by ([`ToolFacts::titles`]).
    titles: Vec<String>,
    /// The title it was shown under (the last one reported).
    title: Option<String>,
    kind: Option<ToolKind>,
    arguments: Value,
    /// The answer to its permission request, if it had one.
    approval: Option<Approval>,
    /// Its permission request went to the user and is not answered yet.
    asked: bool,
    /// The agent reported it (a `tool_call` update), as opposed to a call this side runs.
    reported: bool,
    /// A call this side ran was linked to it as the same call (see [`Oversight::call_ended`]).
    linked: bool,
    /// Its approval let a call this side runs go ahead already: an approval is for one call.
    spent: bool,
}

/// A client's or a bridge's governance binding and audit log, and the tool calls in flight.
pub(crate) struct Oversight {
    governance: Option<Arc<dyn Governance>>,
    audit: AuditLog,
    operator: String,
    calls: Mutex<HashMap<(String, String), Tracked>>,
}

impl Oversight {
    pub(crate) fn new(governance: Option<Arc<dyn Governance>>, audit: AuditLog, operator: String) -> Self {
        Oversight {
            governance,
            audit,
            operator,
            calls: Mutex::default(),
        }
    }

    /// Governance's decision on a permission request: without a binding, always ask.
    ///
    /// The `kind` the agent reports is its own word, and a client must not approve on it: an
    /// agent that labels `rm -rf ~` as `read` would otherwise pass an `on-mutate` workspace
    /// unasked. So governance sees no kind here (an unknown kind counts as changing
    /// something); it decides by what the client's own documents say of the tool's name —
    /// the operator's tool list, policies, autonomy — and of every name the call goes by
    /// (its `name` and `_meta.aip44.tool`, and its `title` where that is a name governance
    /// knows or the call has no other: [`ToolFacts::readings`]): the strictest decision wins.
    pub(crate) fn decide(&self, session: &str, facts: &ToolFacts) -> Decision {
        self.strictest(session, facts, None)
    }

    /// Governance's decision on a tool call the agent runs or announced, as [`decide`]
    /// (every name, the strictest), its reported `kind` also heard — which may only make the
    /// decision stricter ([`decide_claimed`]). For classifying what already happens — what
    /// a bridge shows the editor, how an unasked call is audited — never for approving
    /// anything.
    ///
    /// [`decide`]: Oversight::decide
    pub(crate) fn classify(&self, session: &str, facts: &ToolFacts) -> Decision {
        self.strictest(session, facts, facts.kind)
    }

    /// The strictest decision over every name of the call, each without a kind and with
    /// `kind` (a peer's claim).
    fn strictest(&self, session: &str, facts: &ToolFacts, kind: Option<ToolKind>) -> Decision {
        let Some(governance) = &self.governance else {
            return Decision::Ask;
        };
        let arguments = facts.arguments.clone().unwrap_or(Value::Null);
        let request = ToolRequest {
            operator: &self.operator,
            session,
            tool: "",
            kind,
            arguments: &arguments,
            principal: None,
        };
        let names = facts.readings(governance.as_ref());
        decide(governance.as_ref(), &request, names, KindFrom::Peer)
    }

    /// Governance's decision on the agent's `elicitation/create` (`params`) in `session`: the
    /// tool [`ELICITATION_TOOL`](crate::spec::ELICITATION_TOOL) with the question as its
    /// arguments; without a binding, ask (see [`gate`](super::elicitation::gate)).
    pub(crate) fn decide_elicitation(&self, session: &str, params: &Value) -> Decision {
        let Some(governance) = &self.governance else {
            return Decision::Ask;
        };
        let request = ToolRequest {
            operator: &self.operator,
            session,
            tool: crate::spec::ELICITATION_TOOL,
            kind: None,
            arguments: params,
            principal: None,
        };
        decide(
            governance.as_ref(),
            &request,
            [crate::spec::ELICITATION_TOOL],
            KindFrom::Peer,
        )
    }

    /// Writes `event` ahead in this side's log; the error means nothing may be sent.
    pub(crate) fn record_ahead(&self, event: AuditEvent) -> Result<(), String> {
        write_ahead(&self.audit, None, event)
    }

    /// This side's operator id, for its records.
    pub(crate) fn operator(&self) -> &str {
        &self.operator
    }

    /// Whether a governance binding decides here (without one, every request is asked).
    #[cfg(feature = "mcp")]
    pub(crate) fn governed(&self) -> bool {
        self.governance.is_some()
    }

    /// The approval a permission request of this session already gave a call of the same
    /// tool with the same arguments that has not ended — the agent asked about the call it is
    /// now making, and the answer stands — used up by this call: a second call on it is asked
    /// again. Only an answer counts (`approvedBy`), never `auto`: that is governance judging
    /// the kind the agent reported, which approves nothing.
    pub(crate) fn take_approval(&self, session: &str, facts: &ToolFacts) -> Option<Approval> {
        let mut calls = lock(&self.calls);
        calls.iter_mut().find_map(|((call_session, _), tracked)| {
            let same = call_session == session
                && Some(&tracked.tool) == facts.tool.as_ref()
                && Some(&tracked.arguments) == facts.arguments.as_ref();
            match &tracked.approval {
                Some(approval @ Approval::ApprovedBy(_)) if same && !tracked.spent => {
                    tracked.spent = true;
                    Some(approval.clone())
                }
                _ => None,
            }
        })
    }

    /// Remembers how a permission request was answered, for the tool call's record.
    pub(crate) fn permission_answered(&self, session: &str, facts: &ToolFacts, approval: Approval) {
        let mut calls = lock(&self.calls);
        let tracked = calls.entry((session.to_string(), facts.id.clone())).or_default();
        merge(tracked, facts);
        tracked.approval = Some(approval);
        tracked.asked = false;
    }

    /// Remembers the approval a call this side ran was given, for the tool call the agent
    /// reported for it: its record says so, and it approves no other call
    /// ([`take_approval`](Oversight::take_approval)).
    pub(crate) fn approved_with_a_call(&self, session: &str, facts: &ToolFacts, approval: Approval) {
        self.permission_answered(session, facts, approval);
        if let Some(tracked) = lock(&self.calls).get_mut(&(session.to_string(), facts.id.clone())) {
            tracked.spent = true;
        }
    }

    /// Remembers that a tool call's permission request went to the user: if its turn ends
    /// before the answer, the call was rejected (fail closed), not run unasked.
    pub(crate) fn permission_asked(&self, session: &str, facts: &ToolFacts) {
        let mut calls = lock(&self.calls);
        let tracked = calls.entry((session.to_string(), facts.id.clone())).or_default();
        merge(tracked, facts);
        tracked.asked = true;
    }

    /// Follows a tool call through the updates; writes its record when it ends (`completed`
    /// or `failed`). Called before the update is handed to the application.
    pub(crate) fn observe(&self, session: &str, update: &impl ReportsToolCall) -> Result<(), String> {
        let Some(facts) = update.tool_call().as_ref().and_then(ToolFacts::of) else {
            return Ok(());
        };
        let key = (session.to_string(), facts.id.clone());
        let ended = {
            let mut calls = lock(&self.calls);
            let tracked = calls.entry(key.clone()).or_default();
            merge(tracked, &facts);
            tracked.reported = true;
            match facts.status.as_deref() {
                Some("completed" | "failed") => calls.remove(&key),
                _ => None,
            }
        };
        let Some(tracked) = ended else { return Ok(()) };
        let outcome = match facts.status.as_deref() {
            Some("completed") => ToolOutcomeRecord::Result(facts.output.unwrap_or(Value::Null)),
            _ => ToolOutcomeRecord::Error(match facts.output {
                Some(Value::String(text)) => text,
                // `{"error": "…"}`, the shape our servers report a failure in: its message.
                Some(Value::Object(object)) if object.get("error").is_some_and(Value::is_string) => {
                    object["error"].as_str().unwrap_or_default().to_string()
                }
                Some(other) => other.to_string(),
                None => "failed".to_string(),
            }),
        };
        self.record(session, &facts.id, tracked, outcome, None)
    }

    /// Records a call this side decided itself — a `terminal/create`, an MCP tool call over
    /// ACP — and its answer (`approval` when given; else the one remembered by
    /// `permission_answered`). When the agent reported the same call as a tool call of its
    /// own (same session, tool and arguments; reported, not ended, and not linked yet), the
    /// record names that report (`reportedAs`), so the call is not counted twice.
    pub(crate) fn call_ended(
        &self,
        session: &str,
        facts: &ToolFacts,
        approval: Option<Approval>,
        answer: &Result<Value, crate::jsonrpc::RpcError>,
    ) {
        let (mut tracked, reported_as) = {
            let mut calls = lock(&self.calls);
            let mut tracked = calls
                .remove(&(session.to_string(), facts.id.clone()))
                .unwrap_or_default();
            merge(&mut tracked, facts);
            let report = calls.iter_mut().find(|((call_session, _), report)| {
                call_session == session
                    && report.reported
                    && !report.linked
                    && report.tool == tracked.tool
                    && report.arguments == tracked.arguments
            });
            let reported_as = report.map(|((_, id), report)| {
                report.linked = true;
                id.clone()
            });
            (tracked, reported_as)
        };
        if approval.is_some() {
            tracked.approval = approval;
        }
        let outcome = match answer {
            Ok(result) => ToolOutcomeRecord::Result(result.clone()),
            Err(error) => ToolOutcomeRecord::Error(error.message.clone()),
        };
        if let Err(error) = self.record(session, &facts.id, tracked, outcome, reported_as) {
            tracing::error!(%error, "writing a call's audit record failed");
        }
    }

    /// At the end of a turn: records the tool calls that never ended, as errors.
    pub(crate) fn turn_ended(&self, session: &str) {
        let unfinished: Vec<(String, Tracked)> = {
            let mut calls = lock(&self.calls);
            let ids: Vec<(String, String)> = calls.keys().filter(|(s, _)| s == session).cloned().collect();
            ids.into_iter()
                .filter_map(|key| calls.remove(&key).map(|tracked| (key.1, tracked)))
                .collect()
        };
        for (id, mut tracked) in unfinished {
            if tracked.asked && tracked.approval.is_none() {
                tracked.approval = Some(Approval::RejectedBy {
                    who: "agentacp".into(),
                    reason: "cancelled: the turn ended while its permission request was unanswered".into(),
                });
            }
            let outcome = ToolOutcomeRecord::Error("the turn ended before the tool call did".into());
            if let Err(error) = self.record(session, &id, tracked, outcome, None) {
                tracing::error!(%error, "writing a tool call's audit record failed");
            }
        }
    }

    fn record(
        &self,
        session: &str,
        id: &str,
        tracked: Tracked,
        outcome: ToolOutcomeRecord,
        reported_as: Option<String>,
    ) -> Result<(), String> {
        if self.audit.is_off() {
            return Ok(());
        }
        let shown = shown(&tracked);
        let approval = match tracked.approval {
            Some(approval) => approval,
            None => self.unasked(session, &tracked),
        };
        let mirror = ToolCallMirror {
            operator: self.operator.clone(),
            session: session.to_string(),
            tool_call_id: id.to_string(),
            tool: tracked.tool,
            arguments: tracked.arguments,
            outcome,
            approval,
        };
        let mut event = AuditEvent::tool_call(mirror);
        if let Some(shown) = shown {
            let metadata = event.metadata.get_or_insert_with(Default::default);
            let ours = metadata.entry("agentacp").or_insert_with(|| json!({}));
            if let Value::Object(ours) = ours {
                ours.insert("shown".into(), shown);
            }
        }
        let event = match reported_as {
            Some(report) => event.reported_as(report),
            None => event,
        };
        write_ahead(&self.audit, None, event)
    }

    /// The approval of a tool call the agent ran without asking: `auto` when nothing here
    /// would have stopped it; otherwise a governance denial (the agent broke the policy).
    fn unasked(&self, session: &str, tracked: &Tracked) -> Approval {
        let facts = ToolFacts {
            tool: Some(tracked.tool.clone()),
            names: tracked.names.clone(),
            titles: tracked.titles.clone(),
            kind: tracked.kind,
            arguments: Some(tracked.arguments.clone()),
            ..ToolFacts::default()
        };
        // Nothing is approved here (the agent already ran it): the record only classifies what
        // happened, and classifies it by what the agent reported — every name it gave, and
        // its kind only where that is stricter.
        match self.classify(session, &facts) {
            Decision::Allow => Approval::Auto,
            Decision::Ask if self.governance.is_none() => Approval::Auto,
            Decision::Ask => {
                tracing::warn!(tool = %tracked.tool, "the agent ran a tool without the permission governance requires");
                Approval::Denied {
                    reason: "policy violation: the agent ran it without asking for the permission governance requires"
                        .into(),
                }
            }
            Decision::Deny(reason) => {
                tracing::warn!(tool = %tracked.tool, %reason, "the agent ran a tool governance denies");
                Approval::Denied {
                    reason: format!("policy violation: the agent ran a denied tool ({reason})"),
                }
            }
        }
    }

    /// Makes the records durable (on close).
    pub(crate) fn flush(&self) {
        if let Err(error) = self.audit.flush() {
            tracing::error!(%error, "flushing the client's audit log failed");
        }
    }
}

/// What the client was shown of a call, for its record (`metadata.agentacp.shown`): its
/// title and kind as reported; `None` for a call this side named and showed no title of.
fn shown(tracked: &Tracked) -> Option<Value> {
    if tracked.title.is_none() && tracked.kind.is_none() {
        return None;
    }
    let mut shown = serde_json::Map::new();
    if let Some(title) = &tracked.title {
        shown.insert("title".into(), json!(title));
    }
    if let Some(kind) = tracked.kind {
        shown.insert("kind".into(), json!(kind));
    }
    Some(Value::Object(shown))
}

fn merge(tracked: &mut Tracked, facts: &ToolFacts) {
    // The first name seen stays: later updates may only retitle the call.
    if let Some(tool) = &facts.tool
        && tracked.tool.is_empty()
    {
        tracked.tool.clone_from(tool);
    }
    for (names, more) in [(&mut tracked.names, &facts.names), (&mut tracked.titles, &facts.titles)] {
        for name in more {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    if facts.title.is_some() {
        tracked.title.clone_from(&facts.title);
    }
    if facts.kind.is_some() {
        tracked.kind = facts.kind;
    }
    if let Some(arguments) = &facts.arguments {
        tracked.arguments.clone_from(arguments);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::{Oversight, ReportsToolCall, ToolFacts};
    use crate::audit::{Approval, AuditLog, MemorySink};
    use crate::governance::{Decision, Governance, ToolRequest};

    struct AlwaysAsk;

    /// A `tool_call` update the agent sent, as the client reads it.
    struct Reported(crate::wire::default::ToolCall);

    impl ReportsToolCall for Reported {
        fn tool_call(&self) -> Option<Value> {
            serde_json::to_value(&self.0).ok()
        }
    }

    impl Governance for AlwaysAsk {
        fn decide(&self, _: &ToolRequest<'_>) -> Decision {
            Decision::Ask
        }
    }

    fn approval_of_unfinished(asked: bool) -> Value {
        let sink = MemorySink::default();
        let oversight = Oversight::new(
            Some(Arc::new(AlwaysAsk)),
            AuditLog::with_sink(Box::new(sink.clone())),
            "gate".into(),
        );
        let facts = ToolFacts::of(&json!({"toolCallId": "call_1", "name": "write-file", "status": "pending"})).unwrap();
        if asked {
            oversight.permission_asked("s1", &facts);
        } else {
            let call = serde_json::from_value(json!({
                "toolCallId": "call_1", "title": "write-file", "status": "in_progress"
            }))
            .unwrap();
            oversight.observe("s1", &Reported(call)).unwrap();
        }
        oversight.turn_ended("s1");
        let records = sink.lines();
        assert_eq!(records.len(), 1, "{records:?}");
        let record: Value = serde_json::from_str(&records[0]).unwrap();
        record["metadata"]["aip44"]["approval"].clone()
    }

    /// The agent's answered permission request lets the one MCP call it asked about run
    /// without asking again, once: a second identical call is asked. A report that
    /// governance let through by the kind the agent gave it (`auto`) approves no call, nor
    /// does an approval a call this side ran was given. Before, `auto` counted, and an
    /// approval was never used up.
    #[test]
    fn an_approval_lets_one_call_run_and_auto_lets_none() {
        let oversight = Oversight::new(Some(Arc::new(AlwaysAsk)), AuditLog::off(), "gate".into());
        let facts = |id: &str, arguments: Value| ToolFacts {
            id: id.into(),
            tool: Some("mcp/notes/write_note".into()),
            arguments: Some(arguments),
            ..ToolFacts::default()
        };
        let user = || Approval::ApprovedBy("user".into());
        let taken = |session, id, a: i32| oversight.take_approval(session, &facts(id, json!({"a": a})));
        oversight.permission_answered("s1", &facts("call_1", json!({"a": 0})), Approval::Auto);
        assert_eq!(taken("s1", "mcp-1", 0), None, "auto approves nothing");
        oversight.permission_answered("s1", &facts("call_2", json!({"a": 1})), user());
        assert_eq!(taken("s2", "mcp-2", 1), None, "another session");
        assert_eq!(taken("s1", "mcp-2", 2), None, "other arguments");
        assert_eq!(taken("s1", "mcp-2", 1), Some(user()));
        assert_eq!(taken("s1", "mcp-3", 1), None, "used up");
        oversight.approved_with_a_call("s1", &facts("call_3", json!({"a": 3})), user());
        assert_eq!(taken("s1", "mcp-4", 3), None, "spent by its call");
    }

    /// An MCP call this side passed, which the agent also reported as its tool call: the
    /// call's record names the report, once; another session's or another call's does not.
    #[test]
    fn a_call_the_agent_reported_too_is_linked_to_its_report_once() {
        let sink = MemorySink::default();
        let oversight = Oversight::new(None, AuditLog::with_sink(Box::new(sink.clone())), "gate".into());
        let report = |session: &str, id: &str, status: &str| {
            let call = serde_json::from_value(json!({
                "toolCallId": id, "title": "read", "status": status,
                "rawInput": {"name": "a.txt"}, "_meta": {"aip44": {"tool": "mcp/notes/read_note"}},
            }))
            .unwrap();
            oversight.observe(session, &Reported(call)).unwrap();
        };
        let passed = |session: &str, id: &str, arguments: Value| {
            let facts = ToolFacts {
                id: id.into(),
                tool: Some("mcp/notes/read_note".into()),
                arguments: Some(arguments),
                ..ToolFacts::default()
            };
            oversight.call_ended(session, &facts, None, &Ok(json!("text")));
        };
        report("s1", "call_1", "in_progress");
        report("s2", "call_2", "in_progress");
        passed("s1", "mcp-1", json!({"name": "b.txt"}));
        passed("s1", "mcp-2", json!({"name": "a.txt"}));
        passed("s1", "mcp-3", json!({"name": "a.txt"}));
        report("s1", "call_1", "completed");
        let links: Vec<(String, Value)> = sink
            .lines()
            .iter()
            .map(|line| {
                let record: Value = serde_json::from_str(line).unwrap();
                let id = record["subject"]["ref"].as_str().unwrap().to_string();
                (id, record["metadata"]["agentacp"]["reportedAs"].clone())
            })
            .collect();
        assert_eq!(
            links,
            [
                ("mcp-1".to_string(), Value::Null),
                ("mcp-2".to_string(), json!("call_1")),
                ("mcp-3".to_string(), Value::Null),
                ("call_1".to_string(), Value::Null),
            ],
            "other arguments, a report already linked, and s2's report are not linked"
        );
    }

    /// A permission request still unanswered when the turn ends was a rejection (fail closed),
    /// not a call run without asking.
    #[test]
    fn a_call_whose_permission_request_was_never_answered_is_recorded_rejected() {
        let approval = approval_of_unfinished(true);
        assert_eq!(approval["rejectedBy"], "agentacp", "{approval}");
        let unasked = approval_of_unfinished(false);
        assert!(
            unasked["reason"].as_str().is_some_and(|r| r.contains("without asking")),
            "{unasked}"
        );
    }
}
