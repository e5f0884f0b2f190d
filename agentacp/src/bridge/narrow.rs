//! What each side of a bridge sees of the other's capabilities, and which methods that lets
//! through.
//!
//! The rule, the same both ways (`agentCapabilities` up, `clientCapabilities` down), walking
//! the method table's [`CAPABILITIES`](crate::methods::CAPABILITIES):
//! - a capability passes when the manifest can declare it, declares it, and the peer advertises
//!   it (a flag `true`, an object present); a flag that does not pass becomes `false`, an
//!   object that does not pass is removed whole (with its `_meta`);
//! - an object that only holds capabilities (`fs`, `promptCapabilities`,
//!   `sessionCapabilities`, `auth`, ...) stays, narrowed the same way inside;
//! - any other key (a capability of another revision, an unstable one like
//!   `sessionCapabilities.fork` or `mcpCapabilities.acp`) is not governed by the bridge and is
//!   removed (`mcpCapabilities.acp` is put back at a sandboxed bridge: `relay/mcp.rs`);
//! - `_meta` passes unchanged wherever it is, except the keys of `clientCapabilities._meta` the
//!   table knows to advertise a client ability ([`CLIENT_META`](crate::methods::CLIENT_META),
//!   `terminal-auth`): removed when the capability they depend on did not pass.
//!
//! A method a capability offers passes only when that capability passed ([`Passed`]).
//!
//! An editor that speaks ACP protocol version 2 is owed v2's baseline session methods
//! (`session/list`, `session/resume`, `session/close`: [`V2_SESSION_BASELINE`]) whatever the
//! manifest declares: for it they count as declared ([`with_v2_baseline`]), so they pass when
//! the agent advertises them, and are refused with the reason otherwise.

use serde_json::{Map, Value, json};

use crate::methods::{CLIENT_META, Capability, Side, Signal};

/// The capabilities of one side that passed the bridge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Passed(Vec<Capability>);

impl Passed {
    /// Whether `capability` passed.
    pub(super) fn has(&self, capability: Capability) -> bool {
        self.0.contains(&capability)
    }
}

/// The session capabilities whose methods are v2's baseline: `capabilities.session` of a v2
/// agent promises them, so a bridge that answers a v2 editor offers them.
pub(super) const V2_SESSION_BASELINE: [Capability; 3] = [
    Capability::SESSION_LIST,
    Capability::SESSION_RESUME,
    Capability::SESSION_CLOSE,
];

/// `declared` (the manifest's agent capabilities) with v2's baseline session capabilities
/// declared too: what a bridge lets through to an editor that speaks v2.
pub(super) fn with_v2_baseline(declared: &Value) -> Value {
    let mut declared = declared.clone();
    if !declared.is_object() {
        declared = json!({});
    }
    for capability in V2_SESSION_BASELINE {
        let mut at = &mut declared;
        for key in capability.path {
            if !at.get(*key).is_some_and(Value::is_object) {
                at[*key] = json!({});
            }
            at = &mut at[*key];
        }
    }
    declared
}

/// Whether `value` switches `capability` on.
fn is_on(capability: Capability, value: Option<&Value>) -> bool {
    match (capability.signal, value) {
        (Signal::Flag, Some(Value::Bool(on))) => *on,
        (Signal::Presence, Some(value)) => value.is_object(),
        _ => false,
    }
}

fn lookup<'a>(root: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(root, |value, key| value.get(key))
}

/// Narrows `advertised`, the capabilities `side` advertises (`agentCapabilities` or
/// `clientCapabilities`), to what `declared` (the manifest's, in the same shape) lets through;
/// returns what passed.
pub(super) fn narrow(side: Side, advertised: &mut Map<String, Value>, declared: &Value) -> Passed {
    let mut passed = Passed::default();
    walk(side, &mut Vec::new(), advertised, declared, &mut passed);
    if side == Side::Client
        && let Some(Value::Object(meta)) = advertised.get_mut("_meta")
    {
        for (key, capability) in CLIENT_META {
            if !passed.has(*capability) {
                meta.remove(*key);
            }
        }
    }
    passed
}

fn walk(side: Side, path: &mut Vec<String>, object: &mut Map<String, Value>, declared: &Value, passed: &mut Passed) {
    let keys: Vec<String> = object.keys().filter(|key| *key != "_meta").cloned().collect();
    for key in keys {
        path.push(key.clone());
        let (capability, holds) = {
            let names: Vec<&str> = path.iter().map(String::as_str).collect();
            (Capability::at(side, &names), Capability::holds(side, &names))
        };
        match capability {
            Some(capability)
                if capability.declarable
                    && is_on(capability, lookup(declared, path))
                    && is_on(capability, object.get(&key)) =>
            {
                passed.0.push(capability);
                // An object capability may hold others (`elicitation.form`).
                if let Some(Value::Object(inner)) = object.get_mut(&key) {
                    walk(side, path, inner, declared, passed);
                }
            }
            Some(capability) => match capability.signal {
                Signal::Flag => {
                    object.insert(key.clone(), Value::Bool(false));
                }
                Signal::Presence => {
                    object.remove(&key);
                }
            },
            None if holds => match object.get_mut(&key) {
                Some(Value::Object(inner)) => walk(side, path, inner, declared, passed),
                _ => {
                    object.remove(&key);
                }
            },
            None => {
                object.remove(&key);
            }
        }
        path.pop();
    }
}

/// What the editor does not get of what the agent advertised, and why: one
/// `{"capability": "agentCapabilities.<path>", "reason": ...}` for each capability `advertised`
/// switches on that `given` (the agent capabilities as they reach the editor) does not; the
/// bridge sends it as `_meta.agentacp.narrowed` of its `initialize` answer.
pub(super) fn narrowed(advertised: &Value, given: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(advertised) = advertised.as_object() {
        narrowed_in(&mut Vec::new(), advertised, given, &mut out);
    }
    out
}

fn narrowed_in(path: &mut Vec<String>, advertised: &Map<String, Value>, given: &Value, out: &mut Vec<Value>) {
    for (key, value) in advertised.iter().filter(|(key, _)| *key != "_meta") {
        path.push(key.clone());
        let names: Vec<&str> = path.iter().map(String::as_str).collect();
        let holds = Capability::holds(Side::Agent, &names);
        let inner = value.as_object();
        match Capability::at(Side::Agent, &names) {
            Some(capability) if is_on(capability, Some(value)) => {
                if !is_on(capability, lookup(given, path)) {
                    out.push(json!({"capability": capability_name(&names), "reason": why_narrowed(capability)}));
                } else if let Some(inner) = inner {
                    narrowed_in(path, inner, given, out);
                }
            }
            Some(_) => {}
            None if holds => {
                if let Some(inner) = inner {
                    narrowed_in(path, inner, given, out);
                }
            }
            // A key the method table does not know: on unless `false` or `null`.
            None if !matches!(value, Value::Bool(false) | Value::Null) && lookup(given, path).is_none() => {
                let reason = if names == ["mcpCapabilities", "acp"] {
                    "MCP-over-ACP passes a bridge only at tier `sandboxed` (built with feature `mcp`), where the bridge governs the agent's calls of the editor's MCP tools"
                } else {
                    "the bridge does not know this capability (it is not in the method table of the bridge's ACP revision), so it cannot govern what it offers"
                };
                out.push(json!({"capability": capability_name(&names), "reason": reason}));
            }
            None => {}
        }
        path.pop();
    }
}

fn capability_name(path: &[&str]) -> String {
    format!("agentCapabilities.{}", path.join("."))
}

/// Why a capability the agent advertised did not pass.
fn why_narrowed(capability: Capability) -> String {
    if !capability.declarable {
        return "the bridge does not govern it: an ACP.md manifest cannot declare it".to_string();
    }
    let key = capability.path.join(".");
    if capability == Capability::MCP_HTTP || capability == Capability::MCP_SSE {
        return format!(
            "the agent would reach an MCP server over HTTP or SSE directly, past the bridge, so the bridge could not govern or audit its tool calls (the bridge's manifest does not declare `{key}`)"
        );
    }
    let declared = match capability.path {
        ["sessionCapabilities", name] => format!("metadata.agentacp.sessions.{name}"),
        _ => format!("metadata.aip44.capabilities.agent.{key}"),
    };
    format!("the bridge's manifest does not declare it (`{declared}`), so its governance does not cover it")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        serde_json::from_value(value).expect("a JSON object")
    }

    #[test]
    fn agent_capabilities_keep_meta_and_lose_what_the_manifest_cannot_declare() {
        let mut theirs = object(json!({
            "loadSession": true,
            "promptCapabilities": {"image": true, "audio": true, "_meta": {"v": {"on": true}}},
            "mcpCapabilities": {"http": true, "acp": true},
            "sessionCapabilities": {"list": {}, "close": {"_meta": {"x": true}}, "fork": {}, "_meta": {"s": true}},
            "auth": {"logout": {}},
            "unstableThing": true,
            "_meta": {"claudeCode": {"promptQueueing": true}, "flag": true},
        }));
        let declared =
            json!({"loadSession": true, "promptCapabilities": {"image": true}, "mcpCapabilities": {"http": false}});
        let passed = narrow(Side::Agent, &mut theirs, &declared);
        assert_eq!(
            Value::Object(theirs),
            json!({
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "_meta": {"v": {"on": true}}},
                "mcpCapabilities": {"http": false},
                "sessionCapabilities": {"_meta": {"s": true}},
                "auth": {},
                "_meta": {"claudeCode": {"promptQueueing": true}, "flag": true},
            })
        );
        assert!(passed.has(Capability::LOAD_SESSION) && passed.has(Capability::PROMPT_IMAGE));
        assert!(!passed.has(Capability::SESSION_LIST) && !passed.has(Capability::MCP_HTTP));
    }

    /// Issue #48: for a v2 editor, v2's baseline session capabilities count as declared (the
    /// manifest's own declarations kept, `delete` still the manifest's to give): what the agent
    /// advertises of them passes.
    #[test]
    fn a_v2_editor_is_owed_the_baseline_session_capabilities() {
        let declared = with_v2_baseline(&json!({"loadSession": true, "sessionCapabilities": {"close": {}}}));
        assert_eq!(
            declared,
            json!({"loadSession": true, "sessionCapabilities": {"close": {}, "list": {}, "resume": {}}})
        );
        let mut theirs = object(json!({"sessionCapabilities": {"list": {}, "delete": {}}}));
        let passed = narrow(Side::Agent, &mut theirs, &declared);
        assert!(passed.has(Capability::SESSION_LIST));
        assert!(!passed.has(Capability::SESSION_RESUME) && !passed.has(Capability::SESSION_DELETE));
        assert_eq!(Value::Object(theirs), json!({"sessionCapabilities": {"list": {}}}));
    }

    /// `metadata.agentacp.sessions` makes `sessionCapabilities.*` declarable: what the manifest
    /// declares and the agent offers passes (with its `_meta`), the rest is narrowed away.
    #[test]
    fn declared_session_capabilities_pass_when_the_agent_offers_them() {
        let mut theirs = object(json!({
            "sessionCapabilities": {"list": {}, "close": {"_meta": {"x": true}}, "delete": {}},
        }));
        let declared = json!({"sessionCapabilities": {"list": {}, "close": {}, "resume": {}}});
        let passed = narrow(Side::Agent, &mut theirs, &declared);
        assert_eq!(
            Value::Object(theirs),
            json!({"sessionCapabilities": {"list": {}, "close": {"_meta": {"x": true}}}})
        );
        assert!(passed.has(Capability::SESSION_LIST) && passed.has(Capability::SESSION_CLOSE));
        assert!(!passed.has(Capability::SESSION_RESUME) && !passed.has(Capability::SESSION_DELETE));
    }

    /// Issue #45.7: what the agent advertised and the editor does not get is named, with why.
    #[test]
    fn what_was_narrowed_is_named_with_its_reason() {
        let advertised = object(json!({
            "loadSession": true,
            "promptCapabilities": {"image": true, "audio": true, "embeddedContext": false},
            "mcpCapabilities": {"http": true, "sse": false, "acp": true},
            "sessionCapabilities": {"list": {}, "delete": {}, "fork": {}},
            "auth": {"logout": {}},
            "unstableThing": true,
            "_meta": {"claudeCode": {"promptQueueing": true}},
        }));
        let declared = json!({
            "loadSession": true,
            "promptCapabilities": {"image": true},
            "sessionCapabilities": {"list": {}},
        });
        let mut given = advertised.clone();
        narrow(Side::Agent, &mut given, &declared);
        // Put back after narrowing (a sandboxed bridge's MCP-over-ACP): not narrowed.
        given.insert("mcpCapabilities".into(), json!({"http": false, "acp": true}));
        let narrowed = narrowed(&Value::Object(advertised), &Value::Object(given));
        let names: Vec<&str> = narrowed.iter().map(|n| n["capability"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "agentCapabilities.promptCapabilities.audio",
                "agentCapabilities.mcpCapabilities.http",
                "agentCapabilities.sessionCapabilities.delete",
                "agentCapabilities.sessionCapabilities.fork",
                "agentCapabilities.auth.logout",
                "agentCapabilities.unstableThing",
            ]
        );
        let reason = |name: &str| narrowed[names.iter().position(|n| *n == name).unwrap()]["reason"].clone();
        let audio = reason("agentCapabilities.promptCapabilities.audio");
        assert!(
            audio
                .as_str()
                .unwrap()
                .contains("metadata.aip44.capabilities.agent.promptCapabilities.audio")
        );
        let delete = reason("agentCapabilities.sessionCapabilities.delete");
        assert!(delete.as_str().unwrap().contains("metadata.agentacp.sessions.delete"));
        let http = reason("agentCapabilities.mcpCapabilities.http");
        assert!(http.as_str().unwrap().contains("directly, past the bridge"), "{http}");
        let logout = reason("agentCapabilities.auth.logout");
        assert!(logout.as_str().unwrap().contains("cannot declare it"), "{logout}");
    }

    #[test]
    fn client_meta_tied_to_a_capability_that_did_not_pass_is_removed() {
        let advertised = json!({
            "fs": {"readTextFile": true, "writeTextFile": true},
            "terminal": true,
            "auth": {"terminal": true},
            "elicitation": {"form": {}},
            "session": {"notices": {}},
            "_meta": {"terminal-auth": true, "other": {"x": 1}},
        });
        let mut theirs = object(advertised.clone());
        let declared = json!({"fs": {"readTextFile": true}});
        let passed = narrow(Side::Client, &mut theirs, &declared);
        assert_eq!(
            Value::Object(theirs),
            json!({
                "fs": {"readTextFile": true, "writeTextFile": false},
                "terminal": false,
                "auth": {"terminal": false},
                "session": {},
                "_meta": {"other": {"x": 1}},
            })
        );
        assert!(passed.has(Capability::READ_TEXT_FILE) && !passed.has(Capability::TERMINAL));
        // With the terminal declared, its `_meta` key passes.
        let mut theirs = object(advertised);
        narrow(Side::Client, &mut theirs, &json!({"terminal": true}));
        assert_eq!(theirs["terminal"], true);
        assert_eq!(theirs["_meta"], json!({"terminal-auth": true, "other": {"x": 1}}));
    }
}
