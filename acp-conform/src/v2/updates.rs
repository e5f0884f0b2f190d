//! What v2 added to a turn, judged when the agent sends it: `plan_update`, agent-owned
//! terminals (`terminal_update`, `terminal_output_chunk`), `tool_call_content_chunk`, and
//! elicitation (`elicitation/create`, which the kit declines).

use std::collections::HashSet;

use serde_json::{Value, json};

use super::wire::{Turn, Wire, run_turn};
use crate::{Context, Outcome, trim};

/// The update kinds [`shapes`] judges.
const SHAPED: [&str; 4] = [
    "plan_update",
    "terminal_update",
    "terminal_output_chunk",
    "tool_call_content_chunk",
];

/// The kit's prompts for a run that looks for what a turn may send: `--tool-prompt`s, else
/// one plain prompt.
fn prompts(context: &Context) -> Vec<String> {
    match context.config.tool_prompts.as_slice() {
        [] => vec!["hello, conform".to_string()],
        given => given.to_vec(),
    }
}

/// Runs each of [`prompts`] as a turn of `session`.
fn turns(context: &Context, wire: &mut Wire<'_>, session: &str) -> Result<Vec<Turn>, String> {
    let prompts = prompts(context);
    let run = |(n, prompt): (usize, &String)| run_turn(wire, session, prompt, json!(20 + n));
    prompts.iter().enumerate().map(run).collect()
}

/// Whether `text` is base64 (the standard alphabet, padded).
fn is_base64(text: &str) -> bool {
    let body = text.trim_end_matches('=');
    text.len().is_multiple_of(4)
        && text.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// Whether `value` is a non-empty string.
fn id(value: &Value) -> bool {
    value.as_str().is_some_and(|s| !s.is_empty())
}

/// What is wrong with `update` (one of [`SHAPED`]), if anything; `created`: the tool calls
/// created so far in the session.
fn shape_error(update: &Value, created: &HashSet<String>) -> Option<&'static str> {
    let absent_or = |value: &Value, ok: fn(&Value) -> bool| value.is_null() || ok(value);
    match update["sessionUpdate"].as_str()? {
        "plan_update" => {
            let plan = &update["plan"];
            if !(plan["type"].is_string() && id(&plan["planId"])) {
                return Some("a plan_update's plan needs a type and a planId");
            }
            let entry_ok = |e: &Value| e["content"].is_string() && e["priority"].is_string() && e["status"].is_string();
            let entries = plan["entries"].as_array();
            (plan["type"] == "items" && !entries.is_some_and(|entries| entries.iter().all(entry_ok)))
                .then_some("an items plan needs entries, each with content, priority and status")
        }
        "terminal_update" => {
            if !id(&update["terminalId"]) {
                return Some("a terminal_update needs a terminalId");
            }
            let output_ok = absent_or(&update["output"], |o| o["data"].as_str().is_some_and(is_base64));
            let exit_ok = absent_or(&update["exitStatus"], |e| {
                e.is_object()
                    && (e["exitCode"].is_null() || e["exitCode"].is_u64())
                    && (e["signal"].is_null() || e["signal"].is_string())
            });
            (!(output_ok && exit_ok)).then_some(
                "a terminal_update's output needs base64 data, its exitStatus an exitCode (a non-negative integer or null) and a signal (a string or null)",
            )
        }
        "terminal_output_chunk" => (!(id(&update["terminalId"]) && update["data"].as_str().is_some_and(is_base64)))
            .then_some("a terminal_output_chunk needs a terminalId and base64 data"),
        "tool_call_content_chunk" => {
            let call = update["toolCallId"].as_str().unwrap_or_default();
            if !update["content"]["type"].is_string() {
                Some("a tool_call_content_chunk needs a content item with a type")
            } else {
                (!created.contains(call)).then_some("a tool_call_content_chunk for a call no tool_call_update created")
            }
        }
        _ => None,
    }
}

pub(super) fn shapes(context: &Context) -> Result<Outcome, String> {
    let (mut wire, _, session) = super::with_session(context)?;
    let mut created = HashSet::new();
    let mut judged = 0;
    for turn in turns(context, &mut wire, &session)? {
        for message in &turn.messages {
            let update = &message["params"]["update"];
            if update["sessionUpdate"] == "tool_call_update"
                && let Some(call) = update["toolCallId"].as_str()
            {
                created.insert(call.to_string());
            }
            if !update["sessionUpdate"].as_str().is_some_and(|k| SHAPED.contains(&k)) {
                continue;
            }
            judged += 1;
            if let Some(wrong) = shape_error(update, &created) {
                return Err(format!("{wrong}: {}", trim(&update.to_string())));
            }
        }
    }
    if judged == 0 {
        return Ok(Outcome::Skip(format!(
            "the turns sent none of {} (give a --tool-prompt that leads to one)",
            SHAPED.join(", ")
        )));
    }
    Ok(Outcome::Pass)
}

/// What is wrong with an `elicitation/create` request on `session`, if anything.
fn elicitation_error(params: &Value, session: &str) -> Option<&'static str> {
    if !(params["message"].is_string() && params["mode"].is_string()) {
        return Some("an elicitation needs a message and a mode");
    }
    if params["sessionId"] != session && params["requestId"].is_null() {
        return Some("an elicitation needs a scope: this session's sessionId, or a requestId");
    }
    match params["mode"].as_str() {
        Some("form") if !params["requestedSchema"].is_object() => Some("a form elicitation needs a requestedSchema"),
        Some("url") if !(id(&params["elicitationId"]) && params["url"].is_string()) => {
            Some("a url elicitation needs an elicitationId and a url")
        }
        _ => None,
    }
}

pub(super) fn elicitation(context: &Context) -> Result<Outcome, String> {
    let mut wire = Wire::open(context)?;
    let mut params = super::init_params(super::VERSION);
    params["capabilities"]["elicitation"] = json!({"form": {}, "url": {}});
    super::initialize_with(&mut wire, params)?;
    if let Some(method) = &context.config.auth {
        super::login(&mut wire, method)?;
    }
    let (_, response) = wire.call(json!("new-session"), "session/new", super::new_session_params(context))?;
    let session = crate::checks::session_id(context, &response)?;
    let turns = turns(context, &mut wire, &session).map_err(|why| match wire.declined.last() {
        Some(declined) => format!(
            "after the kit declined the elicitation {}, {why}",
            trim(&declined["params"].to_string())
        ),
        None => why,
    })?;
    if wire.declined.is_empty() {
        return Ok(Outcome::Skip(
            "the agent sent no elicitation/create (the kit offers form and url elicitation; give a --tool-prompt that leads to one)".into(),
        ));
    }
    for declined in &wire.declined {
        if let Some(wrong) = elicitation_error(&declined["params"], &session) {
            return Err(format!("{wrong}: {}", trim(&declined.to_string())));
        }
    }
    let ids: HashSet<&str> = wire
        .declined
        .iter()
        .filter_map(|m| m["params"]["elicitationId"].as_str())
        .collect();
    let completions = turns
        .iter()
        .flat_map(|turn| &turn.messages)
        .filter(|m| m["method"] == "elicitation/complete");
    for complete in completions {
        if !complete["params"]["elicitationId"]
            .as_str()
            .is_some_and(|id| ids.contains(id))
        {
            return Err(format!(
                "elicitation/complete names no elicitation the agent created: {}",
                trim(&complete.to_string())
            ));
        }
    }
    Ok(Outcome::Pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_told_from_other_text() {
        assert!(is_base64("ZWNobwo=") && is_base64("") && is_base64("YWJj"));
        assert!(!is_base64("ZWNobwo") && !is_base64("ZW=NobwA") && !is_base64("a b="));
    }

    #[test]
    fn each_shape_rule_names_what_is_missing() {
        let created = HashSet::from(["call-1".to_string()]);
        let judge = |update: Value| shape_error(&update, &created);
        let entry = json!({"content": "c", "priority": "high", "status": "pending"});
        let plan = |plan: Value| json!({"sessionUpdate": "plan_update", "plan": plan});
        assert_eq!(
            judge(plan(json!({"type": "items", "planId": "p", "entries": [entry]}))),
            None
        );
        assert_eq!(judge(plan(json!({"type": "_markdown", "planId": "p"}))), None);
        assert!(judge(plan(json!({"type": "items", "entries": []}))).is_some());
        assert!(
            judge(plan(
                json!({"type": "items", "planId": "p", "entries": [{"content": "c"}]})
            ))
            .is_some()
        );
        let terminal = |extra: Value| {
            let mut update = json!({"sessionUpdate": "terminal_update", "terminalId": "t"});
            update
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            update
        };
        assert_eq!(
            judge(terminal(json!({"output": null, "exitStatus": {"exitCode": 0}}))),
            None
        );
        assert!(judge(terminal(json!({"output": {"data": "not base64!"}}))).is_some());
        assert!(judge(terminal(json!({"exitStatus": {"exitCode": -1}}))).is_some());
        let chunk = json!({"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": "YQ=="});
        assert_eq!(judge(chunk), None);
        let content = |call: &str| {
            json!({"sessionUpdate": "tool_call_content_chunk", "toolCallId": call,
                "content": {"type": "content", "content": {"type": "text", "text": "x"}}})
        };
        assert_eq!(judge(content("call-1")), None);
        assert!(judge(content("call-2")).is_some());
    }

    #[test]
    fn an_elicitation_needs_its_mode_fields_and_a_scope() {
        let form = json!({"sessionId": "s", "mode": "form", "message": "m", "requestedSchema": {}});
        assert_eq!(elicitation_error(&form, "s"), None);
        assert!(elicitation_error(&form, "other").is_some());
        let url = json!({"requestId": 3, "mode": "url", "message": "m", "elicitationId": "e", "url": "https://x"});
        assert_eq!(elicitation_error(&url, "s"), None);
        let no_url = json!({"sessionId": "s", "mode": "url", "message": "m", "elicitationId": "e"});
        assert!(elicitation_error(&no_url, "s").is_some());
    }
}
