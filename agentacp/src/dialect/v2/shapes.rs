//! The v1 shapes that v2 changed, and their v2 form (and, for what a v2 client sends, the
//! way back): pure functions on JSON values, each for one shape.

use serde_json::{Map, Value, json};

/// `initialize`'s params from a v2 client, as the runtime reads v1's: `info` → `clientInfo`,
/// `capabilities` → `clientCapabilities` (v2 has no `fs` or `terminal`, so the client is
/// one without them; boolean config options are part of v2, so they are taken).
pub fn initialize_params_to_v1(params: &Value) -> Value {
    let mut capabilities = Map::new();
    if let Some(elicitation) = params
        .pointer("/capabilities/elicitation")
        .filter(|value| value.is_object())
    {
        capabilities.insert("elicitation".into(), elicitation.clone());
    }
    capabilities.insert("session".into(), json!({"configOptions": {"boolean": {}}}));
    let mut v1 = json!({
        "protocolVersion": crate::connection::dialect::RUNTIME_VERSION,
        "clientCapabilities": capabilities,
    });
    if let Some(info) = params.get("info").filter(|info| info.is_object()) {
        v1["clientInfo"] = info.clone();
    }
    if let Some(meta) = params.get("_meta").filter(|meta| meta.is_object()) {
        v1["_meta"] = meta.clone();
    }
    v1
}

/// A support marker: v1's `true` (or an object) becomes `{}`-like presence; `false`,
/// `null` or absence is no marker.
fn marker(value: Option<&Value>) -> Option<Value> {
    match value? {
        Value::Bool(true) => Some(json!({})),
        Value::Object(object) => Some(Value::Object(object.clone())),
        _ => None,
    }
}

/// Inserts `key` into `object` when `value` is a marker.
fn put(object: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        object.insert(key.into(), value);
    }
}

/// `initialize`'s answer in v2: `info` (required; `agentInfo`'s), `capabilities` with the
/// session group (prompt and MCP markers as objects, `delete`, `additionalDirectories`),
/// `authMethods` with `methodId` and `type: "agent"`. `loadSession`, `list`, `resume` and
/// `close` markers go: v2's baseline has them. MCP-over-ACP (`mcpCapabilities.acp`) is
/// `mcp.acp`, alpha.3's unstable marker (its `mcp/*` messages and `"type": "acp"` server
/// configs are v1's, and pass as they are).
pub fn initialize_result_to_v2(v1: &Value, version: u16) -> Value {
    let caps = &v1["agentCapabilities"];
    let mut prompt = Map::new();
    for marker_name in ["image", "audio", "embeddedContext"] {
        put(
            &mut prompt,
            marker_name,
            marker(caps["promptCapabilities"].get(marker_name)),
        );
    }
    let mut mcp = Map::new();
    mcp.insert("stdio".into(), json!({}));
    put(&mut mcp, "http", marker(caps["mcpCapabilities"].get("http")));
    put(&mut mcp, "acp", marker(caps["mcpCapabilities"].get("acp")));
    let mut session = Map::new();
    session.insert("prompt".into(), Value::Object(prompt));
    session.insert("mcp".into(), Value::Object(mcp));
    for marker_name in ["delete", "additionalDirectories"] {
        put(
            &mut session,
            marker_name,
            marker(caps["sessionCapabilities"].get(marker_name)),
        );
    }
    let info = match v1.get("agentInfo") {
        Some(Value::Object(info)) => Value::Object(info.clone()),
        _ => json!({"name": "agent", "version": "0"}),
    };
    let mut v2 = json!({
        "protocolVersion": version,
        "info": info,
        "capabilities": {"session": session},
    });
    if let Some(methods) = v1["authMethods"].as_array().filter(|methods| !methods.is_empty()) {
        v2["authMethods"] = methods.iter().map(auth_method_to_v2).collect();
    }
    if let Some(meta) = v1.get("_meta").filter(|meta| meta.is_object()) {
        v2["_meta"] = meta.clone();
    }
    v2
}

/// An auth method descriptor: `id` → `methodId`, with its `type` (v1's, else `agent`: the
/// protocol-driven `auth/login`).
fn auth_method_to_v2(method: &Value) -> Value {
    let mut method = method.as_object().cloned().unwrap_or_default();
    if let Some(id) = method.remove("id") {
        method.insert("methodId".into(), id);
    }
    method.entry("type").or_insert_with(|| json!("agent"));
    Value::Object(method)
}

/// An MCP server config from a v2 client, as v1 reads it: `stdio` ones lose their `type`
/// and get the `args` and `env` v1 requires; others are as they are.
pub fn mcp_server_to_v1(server: &mut Value) {
    let Some(object) = server.as_object_mut() else { return };
    if object.get("type").and_then(Value::as_str) == Some("stdio") {
        object.remove("type");
        object.entry("args").or_insert_with(|| json!([]));
        object.entry("env").or_insert_with(|| json!([]));
    } else if object.get("type").and_then(Value::as_str) == Some("http") {
        object.entry("headers").or_insert_with(|| json!([]));
    }
}

/// The session config options of a v1 answer or update in v2: `id` → `configId`, a select
/// group's `group` → `groupId`.
pub fn config_options_to_v2(options: &mut Value) {
    let Some(options) = options.as_array_mut() else { return };
    for option in options {
        let Some(option) = option.as_object_mut() else { continue };
        if let Some(id) = option.remove("id") {
            option.insert("configId".into(), id);
        }
        for group in items_mut(option, "options") {
            if let Some(group) = group.as_object_mut()
                && let Some(id) = group.remove("group")
            {
                group.insert("groupId".into(), id);
            }
        }
    }
}

/// The config option of category `mode` that stands for a session's v1 `modes` in v2
/// (`configId: "mode"`); `None` for a session without modes.
pub fn mode_option(modes: &Value) -> Option<Value> {
    let current = modes.get("currentModeId")?.clone();
    let options: Vec<Value> = modes
        .get("availableModes")?
        .as_array()?
        .iter()
        .map(|mode| {
            let mut option = json!({"value": mode["id"], "name": mode["name"]});
            if let Some(description) = mode.get("description").filter(|value| value.is_string()) {
                option["description"] = description.clone();
            }
            option
        })
        .collect();
    Some(json!({
        "configId": MODE_OPTION,
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": current,
        "options": options,
    }))
}

/// The `configId` of the option that stands for v1 modes.
pub const MODE_OPTION: &str = "mode";

/// The items of the array `object[key]`; none when it is missing or not an array.
fn items_mut<'a>(object: &'a mut Map<String, Value>, key: &str) -> impl Iterator<Item = &'a mut Value> {
    object.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten()
}

/// The commands of an `available_commands_update` in v2: an `input` gets `type: "text"`.
pub fn commands_to_v2(update: &mut Map<String, Value>) {
    for command in items_mut(update, "availableCommands") {
        if let Some(input) = command.get_mut("input").and_then(Value::as_object_mut) {
            input.entry("type").or_insert_with(|| json!("text"));
        }
    }
}

/// A tool call (`tool_call` or `tool_call_update` fields) in v2: its diffs take the v2 shape.
pub fn tool_call_to_v2(call: &mut Map<String, Value>) {
    for item in items_mut(call, "content") {
        if item.get("type").and_then(Value::as_str) == Some("diff") {
            *item = diff_to_v2(item);
        }
    }
}

/// A v1 diff (`path`, `oldText`, `newText`) as v2's: one change (`add` when there was no old
/// text, else `modify`) and the change as a `git_patch`.
pub fn diff_to_v2(diff: &Value) -> Value {
    let path = diff["path"].as_str().unwrap_or_default();
    let old = diff.get("oldText").and_then(Value::as_str);
    let new = diff["newText"].as_str().unwrap_or_default();
    let operation = if old.is_some() { "modify" } else { "add" };
    let mut v2 = json!({
        "type": "diff",
        "changes": [{"operation": operation, "path": path, "fileType": "text"}],
        "patch": {"format": "git_patch", "text": git_patch(path, old, new)},
    });
    if let Some(meta) = diff.get("_meta").filter(|meta| meta.is_object()) {
        v2["_meta"] = meta.clone();
    }
    v2
}

/// One `diff --git` section for `path` going from `old` (`None`: a new file) to `new`.
fn git_patch(path: &str, old: Option<&str>, new: &str) -> String {
    let mut patch = format!("diff --git {path} {path}\n");
    if old.is_none() {
        patch.push_str("new file mode 100644\n");
    }
    let from = if old.is_some() { path } else { "/dev/null" };
    let diff = similar::TextDiff::from_lines(old.unwrap_or_default(), new);
    let body = diff.unified_diff().context_radius(3).header(from, path).to_string();
    patch.push_str(&body);
    patch
}

/// A v1 `plan` update's fields as v2's `plan_update` payload: one plan per session, its
/// entries replaced by each update, as in v1.
pub fn plan_to_v2(update: &Map<String, Value>) -> Value {
    json!({
        "type": "items",
        "planId": PLAN_ID,
        "entries": update.get("entries").cloned().unwrap_or_else(|| json!([])),
    })
}

/// The `planId` of a session's one plan.
pub const PLAN_ID: &str = "plan";

/// `session/request_permission`'s params in v2: the prompt's `title` (from the tool call's)
/// and the tool call as the `subject`.
pub fn permission_params_to_v2(params: &Value) -> Value {
    let mut call = params["toolCall"].as_object().cloned().unwrap_or_default();
    tool_call_to_v2(&mut call);
    let title = match call.get("title").and_then(Value::as_str) {
        Some(title) => format!("Allow {title}?"),
        None => "Allow this tool call?".to_string(),
    };
    let mut v2 = json!({
        "sessionId": params["sessionId"],
        "title": title,
        "subject": {"type": "tool_call", "toolCall": call},
        "options": params["options"],
    });
    if let Some(meta) = params.get("_meta").filter(|meta| meta.is_object()) {
        v2["_meta"] = meta.clone();
    }
    v2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_diff_becomes_a_change_and_a_git_patch() {
        let modified =
            diff_to_v2(&json!({"type": "diff", "path": "/w/a.txt", "oldText": "a\nb\n", "newText": "a\nc\n"}));
        assert_eq!(
            modified["changes"],
            json!([{"operation": "modify", "path": "/w/a.txt", "fileType": "text"}])
        );
        assert_eq!(
            modified["patch"]["text"],
            "diff --git /w/a.txt /w/a.txt\n--- /w/a.txt\n+++ /w/a.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
        );
        let added = diff_to_v2(&json!({"type": "diff", "path": "/w/n.txt", "newText": "x\n"}));
        assert_eq!(added["changes"][0]["operation"], "add");
        assert_eq!(
            added["patch"]["text"],
            "diff --git /w/n.txt /w/n.txt\nnew file mode 100644\n--- /dev/null\n+++ /w/n.txt\n@@ -0,0 +1 @@\n+x\n"
        );
    }

    #[test]
    fn modes_become_a_config_option_of_category_mode() {
        let modes = json!({"currentModeId": "ask", "availableModes": [
            {"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code", "description": "Writes code"}]});
        assert_eq!(
            mode_option(&modes).unwrap(),
            json!({"configId": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "ask",
                   "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code", "description": "Writes code"}]})
        );
        let mut options = json!([{"id": "model", "name": "Model", "type": "select", "currentValue": "a",
            "options": [{"group": "g", "name": "G", "options": []}]}]);
        config_options_to_v2(&mut options);
        assert_eq!(options[0]["configId"], "model");
        assert_eq!(options[0]["options"][0]["groupId"], "g");
    }
}
