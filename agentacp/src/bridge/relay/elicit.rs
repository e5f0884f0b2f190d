//! The agent's elicitations through the bridge (`elicitation/create`).
//!
//! They pass only when the bridge's manifest declares the mode (`metadata.agentacp.elicitation`)
//! and the editor advertised it (`narrow.rs`, checked by `Relay::refusal` for elicitation as a
//! whole and here for the mode). Governance then decides on the tool `elicitation/create`
//! with the question as its arguments: `deny` is answered `decline` by the bridge and the
//! editor never sees it; `allow` and `ask` both go to the editor, since an elicitation is
//! itself the question to the user (nothing else could answer it). Each question is recorded
//! (`elicitation.create`, with the decision) before it goes anywhere, and the editor's answer
//! (`elicitation.answer`) before it reaches the agent; an accepted form whose content does not
//! fit the requested schema is not passed on: the agent gets an error saying why.

use serde_json::Value;
use serde_json::value::RawValue;

use super::Relay;
use crate::jsonrpc::{self, Id, RpcError, codes};
use crate::methods::Capability;
use crate::oversight::elicitation::{self, Asked, ElicitationOutcome, FORM, URL, gate};
use crate::sync::lock;
use crate::wire::default as wire;

/// The agent's `elicitation/create` (params `text`): `Some` to pass it to the editor, `None`
/// when the bridge answered it (refused, or denied: `decline`).
pub(super) async fn agent_request(relay: &Relay, id: &Id, text: &str) -> Option<Asked> {
    let refused = |code, message: String| jsonrpc::encode_error(id, &RpcError::new(code, message));
    if let Err(error) = serde_json::from_str::<wire::CreateElicitationRequest>(text) {
        let line = refused(
            codes::INVALID_PARAMS,
            format!("invalid params for `elicitation/create`: {error}"),
        );
        relay.to_agent_line(line).await;
        return None;
    }
    let params: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let mode = params.get("mode").and_then(Value::as_str).unwrap_or_default();
    let capability = match mode {
        FORM => Some(Capability::ELICITATION_FORM),
        URL => Some(Capability::ELICITATION_URL),
        _ => None,
    };
    let passed = capability
        .is_some_and(|capability| (lock(&relay.client_passed).as_ref()).is_some_and(|passed| passed.has(capability)));
    let session = params.get("sessionId").and_then(Value::as_str);
    if !passed {
        let reason = format!(
            "`{mode}`-mode elicitation is not offered: `elicitation.{mode}` is not both declared by the bridge's manifest and advertised by the editor"
        );
        relay.audit_refused(false, "elicitation/create", session, Some(id), &reason);
        relay.to_agent_line(refused(codes::INVALID_PARAMS, reason)).await;
        return None;
    }
    let decision = relay.oversight.decide_elicitation(session.unwrap_or_default(), &params);
    let key = elicitation::next_key();
    let asked = elicitation::asked(&relay.operator, &key, &params, "agent", Some(&decision.to_string()));
    if let Err(error) = relay.record(asked) {
        relay.to_agent_line(jsonrpc::encode_error(id, &error)).await;
        return None;
    }
    if let Some(reason) = gate(&decision) {
        let declined = Ok(ElicitationOutcome::Decline);
        let record = elicitation::answered(&relay.operator, &key, session, &declined, "governance", Some(&reason));
        let line = match relay.record(record) {
            Ok(()) => jsonrpc::encode_result(id, &ElicitationOutcome::Decline.to_response()),
            Err(error) => jsonrpc::encode_error(id, &error),
        };
        relay.to_agent_line(line).await;
        return None;
    }
    Some(Asked { key, params })
}

/// The editor's answer to a question it was passed: recorded; `Some(line)` replaces it when it
/// may not reach the agent as it is (an accepted form that does not fit, or no record).
pub(super) fn editor_answered(
    relay: &Relay,
    id: &Id,
    waiting: &Asked,
    outcome: &Result<Box<RawValue>, RpcError>,
) -> Option<Vec<u8>> {
    let session = waiting.params.get("sessionId").and_then(Value::as_str);
    let read = match outcome {
        Ok(result) => elicitation::read_answer(&waiting.params, result.get()),
        Err(error) => Err(format!("the editor answered with an error: {}", error.message)),
    };
    let editor = relay.editor();
    let record = elicitation::answered(&relay.operator, &waiting.key, session, &read, &editor, None);
    if let Err(error) = relay.record(record) {
        return Some(jsonrpc::encode_error(id, &error));
    }
    match (read, outcome) {
        (Err(why), Ok(_)) => {
            tracing::warn!(%id, %why, "the editor's answer to an elicitation was not passed on");
            let error = RpcError::new(
                codes::INTERNAL_ERROR,
                format!("the editor's answer to `elicitation/create` was not passed on: {why}"),
            );
            Some(jsonrpc::encode_error(id, &error))
        }
        _ => None,
    }
}
