//! The v2 JSON schema the user gives (`--schema FILE`): every frame the agent sends is checked
//! against it. The kit embeds no schema: the definitions a message's params or result must
//! match are found through the schema's own `x-method` / `x-side` annotations, so any v2
//! revision's `schema.json` works as it is.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use serde_json::{Value, json};

/// A v2 schema, compiled: the whole-message check and, lazily, one validator per definition.
pub struct Schema {
    /// The schema as read, its message union narrowed to what an agent sends.
    root: Value,
    /// The whole agent message.
    message: jsonschema::Validator,
    /// Validators of single definitions, by name, compiled when first needed.
    definitions: Mutex<HashMap<String, std::sync::Arc<jsonschema::Validator>>>,
}

/// At most this many schema errors are named for one frame.
const ERRORS_NAMED: usize = 3;

impl Schema {
    /// Reads and compiles the schema at `path`; an error says why it cannot be used.
    pub fn read(path: &Path) -> Result<Schema, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--schema {}: {e}", path.display()))?;
        let mut root: Value =
            serde_json::from_str(&text).map_err(|e| format!("--schema {}: not JSON: {e}", path.display()))?;
        if !root.get("$defs").is_some_and(Value::is_object) {
            return Err(format!("--schema {}: not an ACP schema (no $defs)", path.display()));
        }
        // The union of all messages also holds the client's (and its extension requests take
        // any params): an agent's frame is checked against the agent's side only.
        let agent_side = root["anyOf"]
            .as_array()
            .and_then(|sides| sides.iter().find(|side| side["title"] == "Agent"))
            .cloned();
        if let Some(agent_side) = agent_side {
            root["anyOf"] = json!([agent_side]);
        }
        let message = jsonschema::validator_for(&root)
            .map_err(|e| format!("--schema {}: the schema does not compile: {e}", path.display()))?;
        Ok(Schema {
            root,
            message,
            definitions: Mutex::new(HashMap::new()),
        })
    }

    /// The errors of `frame`, an agent's message (`answering`: the method of the request it
    /// answers, when it is an answer), in sentences; empty when it is valid.
    pub fn errors(&self, frame: &Value, answering: Option<&str>) -> Vec<String> {
        let mut errors: Vec<String> = self.message.iter_errors(frame).map(describe).collect();
        if let Some((name, part)) = self.definition_of(frame, answering)
            && let Some(validator) = self.validator(&name)
        {
            errors.extend(validator.iter_errors(part).map(|e| format!("{name}: {}", describe(e))));
        }
        errors.truncate(ERRORS_NAMED);
        errors
    }

    /// The definition `frame`'s params (a request or notification of the agent's) or result
    /// (an answer to `answering`) must match, named by the schema's annotations, and the part.
    fn definition_of<'f>(&self, frame: &'f Value, answering: Option<&str>) -> Option<(String, &'f Value)> {
        if let Some(error) = frame.get("error") {
            return Some(("Error".into(), error));
        }
        match (frame["method"].as_str(), answering) {
            (Some(method), _) => self
                .annotated(method, "client", &["Request", "Notification"])
                .map(|name| (name, &frame["params"])),
            (None, Some(method)) => self
                .annotated(method, "agent", &["Response"])
                .map(|name| (name, &frame["result"])),
            (None, None) => None,
        }
    }

    /// The definition annotated `x-method: method`, `x-side: side`, whose name ends in one of
    /// `endings`.
    fn annotated(&self, method: &str, side: &str, endings: &[&str]) -> Option<String> {
        let defs = self.root["$defs"].as_object()?;
        defs.iter()
            .find(|(name, def)| {
                def["x-method"] == method && def["x-side"] == side && endings.iter().any(|end| name.ends_with(end))
            })
            .map(|(name, _)| name.clone())
    }

    /// The validator of the definition `name`, compiled once; `None` when it does not compile.
    fn validator(&self, name: &str) -> Option<std::sync::Arc<jsonschema::Validator>> {
        let mut definitions = self.definitions.lock().ok()?;
        if let Some(validator) = definitions.get(name) {
            return Some(std::sync::Arc::clone(validator));
        }
        let one = json!({
            "$schema": self.root["$schema"],
            "$defs": self.root["$defs"],
            "$ref": format!("#/$defs/{name}"),
        });
        let validator = std::sync::Arc::new(jsonschema::validator_for(&one).ok()?);
        definitions.insert(name.to_string(), std::sync::Arc::clone(&validator));
        Some(validator)
    }
}

/// A schema error in a sentence: where in the frame, and what is wrong.
fn describe(error: jsonschema::ValidationError<'_>) -> String {
    let at = error.instance_path().to_string();
    let at = if at.is_empty() { "/".to_string() } else { at };
    format!("at {at}: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("schema.json");
        let text = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "anyOf": [{"title": "Agent", "type": "object", "required": ["jsonrpc"]}],
            "$defs": {
                "PromptResponse": {"type": "object", "x-method": "session/prompt", "x-side": "agent",
                    "properties": {"_meta": {"type": "object"}}},
                "UpdateSessionNotification": {"type": "object", "x-method": "session/update", "x-side": "client",
                    "required": ["sessionId"]},
                "Error": {"type": "object", "required": ["code", "message"]},
            },
        });
        std::fs::write(&path, text.to_string()).expect("written");
        Schema::read(&path).expect("the schema compiles")
    }

    #[test]
    fn frames_are_checked_against_the_definition_their_method_annotates() {
        let schema = schema();
        let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"messageId": "m"}});
        assert_eq!(schema.errors(&ok, Some("session/prompt")), Vec::<String>::new());
        let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"_meta": 3}});
        let errors = schema.errors(&bad, Some("session/prompt"));
        assert!(errors[0].starts_with("PromptResponse: at /_meta:"), "{errors:?}");
        let update = json!({"jsonrpc": "2.0", "method": "session/update", "params": {}});
        assert_eq!(schema.errors(&update, None).len(), 1);
        let error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}});
        assert_eq!(schema.errors(&error, Some("session/prompt")).len(), 1);
        // An extension's method has no definition: only the whole message is checked.
        let extension = json!({"jsonrpc": "2.0", "method": "_x/y", "params": 3});
        assert_eq!(schema.errors(&extension, None), Vec::<String>::new());
    }

    #[test]
    fn a_file_that_is_not_a_schema_is_refused_in_a_sentence() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("x.json");
        std::fs::write(&path, "{}").expect("written");
        let error = Schema::read(&path).err().expect("refused");
        assert!(error.ends_with("not an ACP schema (no $defs)"), "{error}");
        assert!(Schema::read(&dir.path().join("missing.json")).is_err());
    }
}
