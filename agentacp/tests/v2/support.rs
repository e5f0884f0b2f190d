//! What the v2 tests share: the scripted raw agent (`tests/fake/v2_agent.py`) and the check of
//! frames against the alpha.3 schema (test data in `../shared`).

#![allow(dead_code, reason = "each test file uses a part of it")]

use std::path::{Path, PathBuf};

use agentacp::client::AgentCommand;
use serde_json::{Value, json};

/// The alpha.3 schema (schema-v2.0.0-alpha.3), when `../shared` is there.
pub fn schema() -> Option<Value> {
    let path =
        test_support::shared()?.join("upstream/acp-schemas-v2/272bf799f35a258c6a4107a0410ed361e83683d3/schema.json");
    Some(serde_json::from_str(&std::fs::read_to_string(path).ok()?).expect("the schema is JSON"))
}

/// The scripted agent in one mode (`v2`, `v1`, `v3`), in a workspace of its own; it writes
/// every frame it receives to `seen`.
pub struct Agent {
    _tmp: tempfile::TempDir,
    /// The agent's working directory.
    pub workspace: PathBuf,
    seen: PathBuf,
    mode: &'static str,
}

impl Agent {
    pub fn new(mode: &'static str) -> Agent {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let workspace = base.join("w");
        std::fs::create_dir_all(&workspace).unwrap();
        Agent {
            seen: base.join("seen.jsonl"),
            workspace,
            _tmp: tmp,
            mode,
        }
    }

    pub fn command(&self) -> AgentCommand {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake/v2_agent.py");
        AgentCommand::new("python3")
            .arg(script.to_str().unwrap())
            .arg(self.mode)
            .arg(self.seen.to_str().unwrap())
            .current_dir(&self.workspace)
    }

    /// Every frame the agent received, in order.
    pub fn frames(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.seen)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// Checks every frame the agent received against the alpha.3 schema: each request's and
    /// notification's params against its method's type (a method v2 does not have fails),
    /// each answer against the permission answer or the error type.
    pub fn check_frames(&self) {
        let Some(schema) = schema() else {
            test_support::skip_unless_required("../shared/upstream/acp-schemas-v2 is absent: frames not checked");
            return;
        };
        let frames = self.frames();
        assert!(!frames.is_empty(), "the agent received frames");
        for frame in frames {
            assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
            let (definition, value) = match (frame.get("method").and_then(Value::as_str), frame.get("id")) {
                (Some(method), _) => (
                    params_type(method, &frame),
                    frame.get("params").cloned().unwrap_or(json!({})),
                ),
                (None, Some(_)) if frame.get("error").is_some() => ("Error", frame["error"].clone()),
                (None, Some(_)) => ("RequestPermissionResponse", frame["result"].clone()),
                (None, None) => panic!("not a JSON-RPC message: {frame}"),
            };
            check(&schema, definition, &value, &frame);
        }
    }
}

/// The alpha.3 type of `method`'s params (requests and notifications a client sends).
fn params_type(method: &str, frame: &Value) -> &'static str {
    match method {
        "initialize" => "InitializeRequest",
        "auth/login" => "LoginAuthRequest",
        "auth/logout" => "LogoutAuthRequest",
        "session/new" => "NewSessionRequest",
        "session/resume" => "ResumeSessionRequest",
        "session/list" => "ListSessionsRequest",
        "session/close" => "CloseSessionRequest",
        "session/delete" => "DeleteSessionRequest",
        "session/prompt" => "PromptRequest",
        "session/set_config_option" => "SetSessionConfigOptionRequest",
        "session/cancel" => "CancelSessionNotification",
        "$/cancel_request" => "CancelRequestNotification",
        other => panic!("the client sent `{other}`, which ACP v2 does not have: {frame}"),
    }
}

/// Checks `value` (of `frame`) against the alpha.3 type `definition`.
pub fn check(schema: &Value, definition: &str, value: &Value, frame: &Value) {
    let target = json!({ "$defs": schema["$defs"], "$ref": format!("#/$defs/{definition}") });
    let validator = jsonschema::validator_for(&target).unwrap();
    let errors: Vec<String> = validator.iter_errors(value).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{frame} is not a valid {definition}: {errors:?}");
}
