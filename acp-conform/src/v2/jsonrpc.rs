//! v2's JSON-RPC framing rules: a batch on stdio is answered entry by entry, and
//! `$/cancel_request` is a notification (never answered) that leaves the request it names
//! answered once.

use std::time::Instant;

use serde_json::{Value, json};

use super::wire::Wire;
use super::with_session;
use crate::checks::{QUIET, still_serves};
use crate::{Context, Outcome, trim};

/// JSON-RPC's "Invalid Request".
const INVALID_REQUEST: i64 = -32600;

/// The batch the kit sends: two requests for a method no agent has (a string and a numeric
/// id), a notification and an entry that is not a request.
fn batch() -> Value {
    json!([
        {"jsonrpc": "2.0", "id": "batch-1", "method": "conform/no-such-method", "params": {}},
        {"jsonrpc": "2.0", "method": "conform/no-such-notification", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "conform/no-such-method", "params": {}},
        7,
    ])
}

/// Whether `message` is an answer (no `method`) whose id is `id`.
fn answers(message: &Value, id: &Value) -> bool {
    message.get("method").is_none() && message.get("id") == Some(id)
}

pub(super) fn batch_check(context: &Context) -> Result<Outcome, String> {
    if context.remote() {
        return Ok(Outcome::Skip(
            "v2 asks for batches on stdio; the agent is reached over --connect".into(),
        ));
    }
    let (mut wire, _, _) = with_session(context)?;
    wire.peer.send_raw(&batch().to_string())?;
    let expected = [json!("batch-1"), json!(2), Value::Null];
    let mut seen: Vec<Value> = Vec::new();
    let deadline = Instant::now() + context.config.timeout;
    while !expected.iter().all(|id| seen.iter().any(|m| answers(m, id))) {
        let message = wire.recv_until(deadline).map_err(|why| {
            let missing: Vec<String> = expected
                .iter()
                .filter(|id| !seen.iter().any(|m| answers(m, id)))
                .map(Value::to_string)
                .collect();
            let got: Vec<String> = seen.iter().map(|m| trim(&m.to_string())).collect();
            let got = match got.as_slice() {
                [] => "nothing".to_string(),
                got => got.join(" | "),
            };
            format!(
                "a batch of 4 entries: no answer for id {} ({why}); the agent answered {got}",
                missing.join(", ")
            )
        })?;
        if message.get("method").is_none() {
            seen.push(message);
        }
    }
    let invalid = seen
        .iter()
        .find(|m| answers(m, &Value::Null))
        .cloned()
        .unwrap_or_default();
    if crate::driver::error_code(&invalid) != Some(INVALID_REQUEST) {
        return Err(format!(
            "the batch entry 7 (not a request) was not answered -32600 with id null: {}",
            trim(&invalid.to_string())
        ));
    }
    if let Some(twice) = expected
        .iter()
        .find(|id| seen.iter().filter(|m| answers(m, id)).count() > 1)
    {
        return Err(format!("the batch entry with id {twice} was answered twice"));
    }
    no_answer_within_quiet(
        &mut wire,
        "an answer the kit did not ask for, after the batch's (to its notification, or an entry's second)",
    )?;
    still_serves(context, &mut wire.peer, "a batch")?;
    Ok(Outcome::Pass)
}

/// Fails, saying `what`, if an answer (to anything: the kit has nothing outstanding) arrives
/// within [`QUIET`].
fn no_answer_within_quiet(wire: &mut Wire<'_>, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + QUIET;
    while let Ok(message) = wire.recv_within(deadline.saturating_duration_since(Instant::now())) {
        if message.get("method").is_none() {
            return Err(format!("{what}: {}", trim(&message.to_string())));
        }
    }
    Ok(())
}

pub(super) fn cancel_request(context: &Context) -> Result<Outcome, String> {
    let (mut wire, _, _) = with_session(context)?;
    let cancel = |id: Value| json!({"requestId": id});
    wire.notify("$/cancel_request", cancel(json!("conform-never-sent")))?;
    let id = json!("cancel-me");
    wire.request(id.clone(), "session/list", json!({}))?;
    wire.notify("$/cancel_request", cancel(id.clone()))?;
    // The cancelled request is answered once: its result, or an error (-32800 when the
    // cancellation took).
    wire.until_response(&id)
        .map_err(|e| format!("a request cancelled with $/cancel_request must still be answered: {e}"))?;
    no_answer_within_quiet(
        &mut wire,
        "an answer the kit did not ask for (to a $/cancel_request, or the cancelled request's second)",
    )?;
    still_serves(context, &mut wire.peer, "$/cancel_request")?;
    Ok(Outcome::Pass)
}
