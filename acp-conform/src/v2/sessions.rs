//! v2's session methods beyond `session/new` and `session/prompt`: `session/list` and
//! `session/close` (the baseline an agent commits to by advertising `capabilities.session`),
//! `session/delete` (when `capabilities.session.delete` is advertised) and
//! `session/set_config_option` (when the session offers config options).

use std::path::Path;

use serde_json::{Value, json};

use super::wire::Wire;
use super::with_session;
use crate::checks::{refused_for_auth, still_serves};
use crate::{Context, Outcome, trim};

/// Why a baseline check does not apply: the agent does not advertise `capabilities.session`.
fn without_baseline(init: &Value, method: &str) -> Option<Outcome> {
    (!init["capabilities"]["session"].is_object()).then(|| {
        Outcome::Skip(format!(
            "the agent does not advertise capabilities.session, whose baseline holds {method}"
        ))
    })
}

/// The result of `response` (to `method`); a refusal fails, naming the baseline when it
/// says the method does not exist.
fn served<'r>(context: &Context, method: &str, response: &'r Value) -> Result<&'r Value, String> {
    refused_for_auth(context, method, response)?;
    if let Some(result) = response.get("result").filter(|r| r.is_object()) {
        return Ok(result);
    }
    let why = trim(&response.to_string());
    match crate::driver::error_code(response) {
        Some(super::METHOD_NOT_FOUND) => Err(format!(
            "{method} is not served ({why}): advertising capabilities.session commits a v2 agent to session/new, list, resume, close, prompt, cancel and update"
        )),
        _ => Err(format!("{method} failed: {why}")),
    }
}

/// Whether two absolute paths name the same folder (a trailing `/` aside).
fn same_folder(a: &str, b: &Path) -> bool {
    Path::new(a).components().eq(b.components())
}

/// `session/list` with `cwd` = the workspace root: the sessions listed.
fn list_in_root(context: &Context, wire: &mut Wire<'_>) -> Result<Vec<Value>, String> {
    let (_, response) = wire.call(json!("list"), "session/list", json!({"cwd": context.agent_root()}))?;
    let result = served(context, "session/list", &response)?;
    match result["sessions"].as_array() {
        Some(sessions) => Ok(sessions.clone()),
        None => Err(format!(
            "the session/list answer has no sessions list: {}",
            trim(&result.to_string())
        )),
    }
}

pub(super) fn list(context: &Context) -> Result<Outcome, String> {
    let (mut wire, init, _) = with_session(context)?;
    if let Some(skip) = without_baseline(&init, "session/list") {
        return Ok(skip);
    }
    let root = context.agent_root();
    for entry in list_in_root(context, &mut wire)? {
        let cwd = entry["cwd"].as_str().filter(|cwd| Path::new(cwd).is_absolute());
        if !entry["sessionId"].is_string() || cwd.is_none() {
            return Err(format!(
                "a listed session lacks a sessionId or an absolute cwd: {}",
                trim(&entry.to_string())
            ));
        }
        if !cwd.is_some_and(|cwd| same_folder(cwd, &root)) {
            return Err(format!(
                "session/list with cwd {} listed a session of another folder: {}",
                root.display(),
                trim(&entry.to_string())
            ));
        }
    }
    Ok(Outcome::Pass)
}

pub(super) fn close(context: &Context) -> Result<Outcome, String> {
    let (mut wire, init, session) = with_session(context)?;
    if let Some(skip) = without_baseline(&init, "session/close") {
        return Ok(skip);
    }
    let (_, response) = wire.call(json!("close"), "session/close", json!({"sessionId": session}))?;
    served(context, "session/close", &response)?;
    still_serves(context, &mut wire.peer, "session/close")?;
    Ok(Outcome::Pass)
}

pub(super) fn delete(context: &Context) -> Result<Outcome, String> {
    let (mut wire, init, session) = with_session(context)?;
    if !init["capabilities"]["session"]["delete"].is_object() {
        return Ok(Outcome::Skip(
            "the agent does not advertise capabilities.session.delete".into(),
        ));
    }
    let (_, response) = wire.call(json!("delete"), "session/delete", json!({"sessionId": session}))?;
    served(context, "session/delete", &response)?;
    let listed = list_in_root(context, &mut wire).map_err(|e| format!("after session/delete: {e}"))?;
    match listed.iter().find(|entry| entry["sessionId"] == session.as_str()) {
        Some(entry) => Err(format!(
            "session/delete was answered, but session/list still lists the session: {}",
            trim(&entry.to_string())
        )),
        None => Ok(Outcome::Pass),
    }
}

/// The values a select option offers, its groups flattened.
fn select_values(option: &Value) -> Vec<&Value> {
    let entries = option["options"].as_array().into_iter().flatten();
    entries
        .flat_map(|entry| match entry["options"].as_array() {
            Some(grouped) => grouped.iter().map(|o| &o["value"]).collect::<Vec<_>>(),
            None => vec![&entry["value"]],
        })
        .filter(|value| value.is_string())
        .collect()
}

/// The first option the kit knows how to set, as `(configId, type, value)`: a select's value
/// other than its current one (else the current one), a boolean's negation.
fn a_change(options: &[Value]) -> Option<(Value, &'static str, Value)> {
    options.iter().find_map(|option| {
        let current = &option["currentValue"];
        let value = match option["type"].as_str()? {
            "select" => {
                let values = select_values(option);
                (*values.iter().find(|v| **v != current).or(values.first())?).clone()
            }
            "boolean" => json!(!current.as_bool()?),
            _ => return None,
        };
        let kind = if value.is_boolean() { "boolean" } else { "id" };
        Some((option["configId"].clone(), kind, value))
    })
}

pub(super) fn set_config_option(context: &Context) -> Result<Outcome, String> {
    let mut wire = Wire::open(context)?;
    super::start(context, &mut wire)?;
    let (_, response) = wire.call(json!("new-session"), "session/new", super::new_session_params(context))?;
    let session = crate::checks::session_id(context, &response)?;
    let options = response["result"]["configOptions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some((config, kind, value)) = a_change(&options) else {
        return Ok(Outcome::Skip(
            "the session offers no select or boolean config option (configOptions)".into(),
        ));
    };
    let params = json!({"sessionId": session, "configId": config, "type": kind, "value": value});
    let (_, response) = wire.call(json!("set-config"), "session/set_config_option", params)?;
    let result = served(context, "session/set_config_option", &response)?;
    let Some(all) = result["configOptions"].as_array() else {
        return Err(format!(
            "the session/set_config_option answer has no configOptions (the full set is required): {}",
            trim(&result.to_string())
        ));
    };
    match all.iter().find(|option| option["configId"] == config) {
        Some(option) if option["currentValue"] == value => Ok(Outcome::Pass),
        Some(option) => Err(format!(
            "set {config} to {value}, but the answer gives it currentValue {}",
            option["currentValue"]
        )),
        None => Err(format!("set {config}, but the answer's configOptions leave it out")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_picks_another_value_of_a_select_or_flips_a_boolean() {
        let grouped = json!({"configId": "model", "type": "select", "currentValue": "a",
            "options": [{"groupId": "g", "name": "G", "options": [{"value": "a"}, {"value": "b"}]}]});
        assert_eq!(a_change(&[grouped]), Some((json!("model"), "id", json!("b"))));
        let single = json!({"configId": "mode", "type": "select", "currentValue": "a", "options": [{"value": "a"}]});
        assert_eq!(a_change(&[single]), Some((json!("mode"), "id", json!("a"))));
        let flag = json!({"configId": "fast", "type": "boolean", "currentValue": false});
        let unknown = json!({"configId": "x", "type": "_slider", "currentValue": 3});
        assert_eq!(
            a_change(&[unknown, flag]),
            Some((json!("fast"), "boolean", json!(true)))
        );
        assert_eq!(a_change(&[]), None);
    }

    #[test]
    fn folders_compare_without_a_trailing_slash() {
        assert!(same_folder("/tmp/root/", Path::new("/tmp/root")));
        assert!(!same_folder("/tmp/rooted", Path::new("/tmp/root")));
    }
}
