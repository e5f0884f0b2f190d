//! The approval question: how a permission request is answered. A side that is asked
//! (`session/request_permission`) answers through a [`PermissionHandler`] (the default,
//! [`RejectAll`], approves nothing) when governance does not decide alone; [`outcome`] turns
//! a [`PermissionDecision`] into the request's answer and [`approves`] reads whether an answer
//! approves.

use crate::wire::default as wire;

/// The answer to one permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionDecision {
    /// Approve once: the request's `allow_once` option (or `allow_always` when it offers no
    /// `allow_once`). A request offering neither is rejected.
    Approve,
    /// Reject: the request's `reject_once` option (or `reject_always`; or the `cancelled`
    /// outcome when it offers neither).
    Reject,
    /// Select this option, which must be one of the request's (else the request is rejected).
    Select(wire::PermissionOptionId),
}

/// A boxed future, as [`PermissionHandler::decide`] returns it.
pub type BoxFuture<T> = crate::future::BoxFuture<'static, T>;

/// Decides permission requests — usually by asking the user. Each call is bounded by the
/// client's `ClientOptions::permission_timeout`; running out of time, or the turn being
/// cancelled, counts as [`PermissionDecision::Reject`].
///
/// Any `Fn(RequestPermissionRequest) -> impl Future<Output = PermissionDecision>` is one.
pub trait PermissionHandler: Send + Sync + 'static {
    /// The decision for one request.
    fn decide(&self, request: wire::RequestPermissionRequest) -> BoxFuture<PermissionDecision>;
}

impl<F, Fut> PermissionHandler for F
where
    F: Fn(wire::RequestPermissionRequest) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = PermissionDecision> + Send + 'static,
{
    fn decide(&self, request: wire::RequestPermissionRequest) -> BoxFuture<PermissionDecision> {
        Box::pin(self(request))
    }
}

/// The default handler: rejects every request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RejectAll;

impl PermissionHandler for RejectAll {
    fn decide(&self, _: wire::RequestPermissionRequest) -> BoxFuture<PermissionDecision> {
        Box::pin(async { PermissionDecision::Reject })
    }
}

fn option_of(
    request: &wire::RequestPermissionRequest,
    kinds: [wire::PermissionOptionKind; 2],
) -> Option<wire::PermissionOptionId> {
    kinds.iter().find_map(|kind| {
        request
            .options
            .iter()
            .find(|option| option.kind == *kind)
            .map(|option| option.option_id.clone())
    })
}

/// The outcome to answer with.
pub(crate) fn outcome(
    request: &wire::RequestPermissionRequest,
    decision: &PermissionDecision,
) -> wire::RequestPermissionOutcome {
    use wire::PermissionOptionKind as Kind;
    let reject = || match option_of(request, [Kind::RejectOnce, Kind::RejectAlways]) {
        Some(id) => wire::RequestPermissionOutcome::Selected(wire::SelectedPermissionOutcome::new(id)),
        None => wire::RequestPermissionOutcome::Cancelled,
    };
    let chosen = match decision {
        PermissionDecision::Reject => None,
        PermissionDecision::Approve => option_of(request, [Kind::AllowOnce, Kind::AllowAlways]),
        PermissionDecision::Select(id) => request
            .options
            .iter()
            .any(|option| option.option_id == *id)
            .then(|| id.clone()),
    };
    match chosen {
        Some(id) => wire::RequestPermissionOutcome::Selected(wire::SelectedPermissionOutcome::new(id)),
        None => reject(),
    }
}

/// Whether `outcome` selects one of the request's allow options.
pub(crate) fn approves(request: &wire::RequestPermissionRequest, outcome: &wire::RequestPermissionOutcome) -> bool {
    use wire::PermissionOptionKind as Kind;
    match outcome {
        wire::RequestPermissionOutcome::Selected(selected) => request.options.iter().any(|option| {
            option.option_id == selected.option_id && matches!(option.kind, Kind::AllowOnce | Kind::AllowAlways)
        }),
        _ => false,
    }
}

/// The option ids of the permission requests a server asks its client.
pub(crate) mod option_ids {
    /// Approve this call.
    pub(crate) const ALLOW_ONCE: &str = "allow-once";
    /// Approve this tool for the rest of the session.
    pub(crate) const ALLOW_ALWAYS: &str = "allow-always";
    /// Reject this call.
    pub(crate) const REJECT_ONCE: &str = "reject-once";
    /// Reject this tool for the rest of the session.
    pub(crate) const REJECT_ALWAYS: &str = "reject-always";
}

/// The options of a permission request a server asks: allow once and reject, and — when
/// governance lets the user answer for the rest of the session (`may_remember`) — always
/// allow and always reject.
pub(crate) fn options(may_remember: bool) -> Vec<serde_json::Value> {
    use option_ids::*;
    use serde_json::json;
    let mut options = vec![json!({"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"})];
    if may_remember {
        options.push(json!({"optionId": ALLOW_ALWAYS, "name": "Always allow", "kind": "allow_always"}));
    }
    options.push(json!({"optionId": REJECT_ONCE, "name": "Reject", "kind": "reject_once"}));
    if may_remember {
        options.push(json!({"optionId": REJECT_ALWAYS, "name": "Always reject", "kind": "reject_always"}));
    }
    options
}

/// How the client answered a permission request of [`options`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// `allow-once`.
    AllowOnce,
    /// `allow-always` (read only where it was offered).
    AllowAlways,
    /// `reject-once`.
    RejectOnce,
    /// `reject-always` (read only where it was offered).
    RejectAlways,
    /// The `cancelled` outcome.
    Cancelled,
    /// Anything else: the answer as it came.
    Unreadable(serde_json::Value),
}

/// Reads the answer (`result`) to a permission request of [`options`]`(may_remember)`: an
/// `always` option is read only where it was offered.
pub(crate) fn read_answer(result: &str, may_remember: bool) -> Answer {
    use option_ids::*;
    let value: serde_json::Value = serde_json::from_str(result).unwrap_or(serde_json::Value::Null);
    let outcome = &value["outcome"];
    match (outcome["outcome"].as_str(), outcome["optionId"].as_str()) {
        (Some("selected"), Some(ALLOW_ONCE)) => Answer::AllowOnce,
        (Some("selected"), Some(REJECT_ONCE)) => Answer::RejectOnce,
        (Some("selected"), Some(ALLOW_ALWAYS)) if may_remember => Answer::AllowAlways,
        (Some("selected"), Some(REJECT_ALWAYS)) if may_remember => Answer::RejectAlways,
        (Some("cancelled"), _) => Answer::Cancelled,
        _ => Answer::Unreadable(value),
    }
}

/// The permission request a client or a bridge asks about a call it runs itself — a
/// terminal, an MCP tool offered over ACP — in `session`: `tool_call` described, one call to
/// allow or reject.
pub(crate) fn ask_once(session: &str, tool_call: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "sessionId": session,
        "toolCall": tool_call,
        "options": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::{Answer, options, read_answer};

    /// The `always` options are offered, and read, only where the user may answer for the
    /// session; anything else is unreadable, which the asker counts as a rejection.
    #[test]
    fn an_always_answer_is_read_only_where_it_was_offered() {
        let ids = |may_remember| {
            (options(may_remember).iter())
                .map(|option| option["optionId"].as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(true),
            ["allow-once", "allow-always", "reject-once", "reject-always"]
        );
        assert_eq!(ids(false), ["allow-once", "reject-once"]);
        let selected = |id: &str| format!(r#"{{"outcome": {{"outcome": "selected", "optionId": "{id}"}}}}"#);
        assert_eq!(read_answer(&selected("allow-once"), false), Answer::AllowOnce);
        assert_eq!(read_answer(&selected("allow-always"), true), Answer::AllowAlways);
        assert!(matches!(
            read_answer(&selected("allow-always"), false),
            Answer::Unreadable(_)
        ));
        assert_eq!(read_answer(&selected("reject-always"), true), Answer::RejectAlways);
        assert_eq!(
            read_answer(r#"{"outcome": {"outcome": "cancelled"}}"#, true),
            Answer::Cancelled
        );
        assert!(matches!(
            read_answer("not json", true),
            Answer::Unreadable(serde_json::Value::Null)
        ));
    }
}
