//! `--manifest` on v2: the agent is the one the manifest describes. The manifest is read as
//! for v1 ([`crate::Config::with_manifest`], `scaffold-aip explain`'s `initialize` answer),
//! and each part compared as v1 compares it ([`crate::checks::compare_to_manifest`]); only
//! where v2 moved a part does the kit say where: `info` is v1's `agentInfo`, and the session
//! capabilities are v1's agent capabilities as v2 marks them.

use serde_json::{Map, Value, json};

use super::wire::Wire;
use crate::checks::{as_is, compare_to_manifest, without_reports};
use crate::{Context, Outcome};

/// The agent's v2 `initialize` answer and the manifest's (v1) one; `None` without
/// `--manifest`.
fn answers(context: &Context) -> Result<Option<(Value, &Value)>, String> {
    let Some(expected) = &context.config.expected_initialize else {
        return Ok(None);
    };
    let mut wire = Wire::open(context)?;
    Ok(Some((super::start(context, &mut wire)?, expected)))
}

/// A v1 support flag (`true`, or an object) as v2's marker (an object).
fn marker(v1: &Value) -> Option<Value> {
    match v1 {
        Value::Bool(true) => Some(json!({})),
        Value::Object(_) => Some(v1.clone()),
        _ => None,
    }
}

/// v1's effective agent capabilities as v2's `capabilities.session` (v2 Initialization):
/// prompt and MCP markers as objects (stdio always: v1 agents take stdio MCP servers),
/// `delete` and `additionalDirectories` kept; `loadSession`, `list`, `resume` and `close` are
/// v2's baseline and have no marker.
fn session_capabilities(v1: &Value) -> Value {
    let mut prompt = Map::new();
    for name in ["image", "audio", "embeddedContext"] {
        if let Some(m) = marker(&v1["promptCapabilities"][name]) {
            prompt.insert(name.into(), m);
        }
    }
    let mut mcp = Map::from_iter([("stdio".to_string(), json!({}))]);
    if let Some(m) = marker(&v1["mcpCapabilities"]["http"]) {
        mcp.insert("http".into(), m);
    }
    let mut session = Map::from_iter([
        ("prompt".to_string(), Value::Object(prompt)),
        ("mcp".to_string(), Value::Object(mcp)),
    ]);
    for name in ["delete", "additionalDirectories"] {
        if let Some(m) = marker(&v1["sessionCapabilities"][name]) {
            session.insert(name.into(), m);
        }
    }
    Value::Object(session)
}

/// Skipped without `--manifest`.
fn no_manifest() -> Outcome {
    Outcome::Skip("no --manifest".into())
}

pub(super) fn capabilities(context: &Context) -> Result<Outcome, String> {
    let Some((result, expected)) = answers(context)? else {
        return Ok(no_manifest());
    };
    let want = session_capabilities(&expected["agentCapabilities"]);
    let got = result["capabilities"]["session"].clone();
    compare_to_manifest(context, "/capabilities/session", &want, got, true, as_is)
}

pub(super) fn info(context: &Context) -> Result<Outcome, String> {
    let Some((result, expected)) = answers(context)? else {
        return Ok(no_manifest());
    };
    compare_to_manifest(
        context,
        "/info",
        &expected["agentInfo"],
        result["info"].clone(),
        false,
        as_is,
    )
}

pub(super) fn meta(context: &Context) -> Result<Outcome, String> {
    let Some((result, expected)) = answers(context)? else {
        return Ok(no_manifest());
    };
    let want = &expected["_meta"]["aip44"];
    compare_to_manifest(
        context,
        "/_meta/aip44",
        want,
        result["_meta"]["aip44"].clone(),
        false,
        without_reports,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_capabilities_become_v2_session_markers() {
        let v1 = json!({
            "loadSession": true,
            "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": true, "sse": false},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
        });
        assert_eq!(
            session_capabilities(&v1),
            json!({
                "prompt": {"image": {}, "embeddedContext": {}},
                "mcp": {"stdio": {}, "http": {}},
                "delete": {},
            })
        );
        assert_eq!(
            session_capabilities(&json!({})),
            json!({"prompt": {}, "mcp": {"stdio": {}}})
        );
    }
}
