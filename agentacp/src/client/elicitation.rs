//! The agent's questions to the user (`elicitation/create`) and its word that a URL interaction
//! is finished (`elicitation/complete`), answered through the
//! [`ElicitationHandler`](crate::oversight::ElicitationHandler) of `ClientOptions`.
//!
//! Without a handler the client advertises no elicitation, and a question is refused
//! (`-32602`, as the spec answers a mode not advertised). With one: governance decides first
//! (`deny` declines without asking; `allow` and `ask` go to the handler, since the question is
//! the user's to answer); the question is recorded (`elicitation.create`), the handler asked
//! within the permission timeout (a timeout, the session's cancel or the agent's
//! `$/cancel_request` answer `cancel`), an accepted form's content checked against its schema
//! (one that does not fit is declined), and the answer recorded (`elicitation.answer`) before
//! it is sent.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use super::state::Shared;
use crate::jsonrpc::cancels::Cancellable;
use crate::jsonrpc::{self, Id, RpcError, codes};
use crate::oversight::elicitation::{self, ElicitationOutcome, FORM, URL, gate};
use crate::wire::default as wire;

/// Answers the agent's `elicitation/create` (see the module docs).
pub(super) async fn answer(shared: Arc<Shared>, id: Id, params: Option<Box<RawValue>>, mut cancellable: Cancellable) {
    let text = params.as_deref().map_or("null", RawValue::get);
    let line = match question(&shared, text, &mut cancellable).await {
        Ok(outcome) => jsonrpc::encode_result(&id, &outcome.to_response()),
        Err(error) => {
            tracing::debug!(%id, code = error.code, message = %error.message, "the agent's elicitation was refused");
            jsonrpc::encode_error(&id, &error)
        }
    };
    shared.send_line(line).await;
}

async fn question(shared: &Shared, text: &str, cancellable: &mut Cancellable) -> Result<ElicitationOutcome, RpcError> {
    let invalid = |why: String| RpcError::new(codes::INVALID_PARAMS, why);
    let Some(handler) = shared.options.elicitation.clone() else {
        return Err(invalid(
            "this client offers no elicitation (it advertised no `elicitation` in its `clientCapabilities`)".into(),
        ));
    };
    let request: wire::CreateElicitationRequest = serde_json::from_str(text)
        .map_err(|error| invalid(format!("invalid params for `elicitation/create`: {error}")))?;
    let params: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let mode = params.get("mode").and_then(Value::as_str).unwrap_or_default();
    let offered = handler.modes();
    if !matches!((mode, offered.form, offered.url), (FORM, true, _) | (URL, _, true)) {
        return Err(invalid(format!(
            "this client does not offer `{mode}`-mode elicitation (see its `clientCapabilities.elicitation`)"
        )));
    }
    let session = params.get("sessionId").and_then(Value::as_str);
    let oversight = &shared.oversight;
    let decision = oversight.decide_elicitation(session.unwrap_or_default(), &params);
    let key = elicitation::next_key();
    let recorded = elicitation::asked(
        oversight.operator(),
        &key,
        &params,
        "agent",
        Some(&decision.to_string()),
    );
    oversight.record_ahead(recorded).map_err(not_audited)?;
    let (given, by, reason) = match gate(&decision) {
        Some(why) => (ElicitationOutcome::Decline, "governance", Some(why)),
        None => match ask(shared, handler.answer(request), session, cancellable).await {
            // What the user gave must fit what was asked; what does not is declined.
            Ok(outcome) => match elicitation::read_answer(&params, &outcome.to_response().to_string()) {
                Ok(outcome) => (outcome, "user", None),
                Err(why) => (
                    ElicitationOutcome::Decline,
                    "agentacp",
                    Some(format!("the handler's answer does not fit: {why}")),
                ),
            },
            Err(why) => (ElicitationOutcome::Cancel, "agentacp", Some(why)),
        },
    };
    let record = elicitation::answered(
        oversight.operator(),
        &key,
        session,
        &Ok(given.clone()),
        by,
        reason.as_deref(),
    );
    oversight.record_ahead(record).map_err(not_audited)?;
    if let (ElicitationOutcome::Accept(_), Some(id)) = (&given, params.get("elicitationId").and_then(Value::as_str))
        && mode == URL
    {
        shared.elicitations.insert(id);
    }
    Ok(given)
}

/// The handler's answer, within the permission timeout; the session's cancel or the agent's
/// withdrawal ends the wait (`Err`: why, for the record; the answer is then `cancel`, no
/// choice made).
async fn ask(
    shared: &Shared,
    answer: crate::future::BoxFuture<'static, ElicitationOutcome>,
    session: Option<&str>,
    cancellable: &mut Cancellable,
) -> Result<ElicitationOutcome, String> {
    if cancellable.is_cancelled() {
        return Err("withdrawn by the agent before the user was asked".into());
    }
    let mut cancelled = shared.cancel_receiver(session.unwrap_or_default());
    cancelled.mark_unchanged();
    let timeout = shared.options.permission_timeout;
    tokio::select! {
        answer = tokio::time::timeout(timeout, answer) => answer.map_err(|_| format!("no answer within {} ms", timeout.as_millis())),
        _ = cancelled.changed() => Err("the session's turn was cancelled".into()),
        () = cancellable.cancelled() => Err("withdrawn by the agent".into()),
    }
}

fn not_audited(error: String) -> RpcError {
    RpcError::new(
        codes::INTERNAL_ERROR,
        format!("the elicitation could not be audited, so it was not answered: {error}"),
    )
}

/// The agent's `elicitation/complete`: passed to the handler once, for a URL interaction this
/// client accepted; unknown and repeated ids are ignored, as the spec asks.
pub(super) fn completed(shared: &Shared, params: Option<&RawValue>) {
    let Some(handler) = shared.options.elicitation.as_ref() else {
        return;
    };
    let text = params.map_or("null", RawValue::get);
    let Ok(notification) = serde_json::from_str::<wire::CompleteElicitationNotification>(text) else {
        tracing::debug!("an unreadable `elicitation/complete` was ignored");
        return;
    };
    let id = notification.elicitation_id;
    if !shared.elicitations.remove(id.as_str()) {
        tracing::debug!(%id, "an `elicitation/complete` of an unknown or completed id was ignored");
        return;
    }
    let oversight = &shared.oversight;
    if let Err(error) = oversight.record_ahead(elicitation::completed(oversight.operator(), None, id.as_str())) {
        tracing::error!(%error, "auditing an elicitation's completion failed; the handler was not told");
        return;
    }
    handler.completed(id);
}
