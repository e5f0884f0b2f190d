//! Issue #20: the module `scaffold-aip regen` generates for an early revision, e1c94557 (26
//! August 2025), whose schema annotates no type with `x-method`: every method is bound to its
//! types through the schema's routing unions, and `authenticate`, `session/load` and
//! `fs/write_text_file` answer `null`.
//!
//! - The messages of that era (`tests/wire-early/e1c94557.json`, written by hand from the
//!   revision's schema, which `acp-wire-gen/tests/generator/upstream.rs` checks them against) go through
//!   the module's method enums and come back as the same JSON; those the schema refuses are
//!   refused.
//! - A server runs on the module through `#[acp_operator(wire = …)]`: it answers `initialize`
//!   with the module's revision and a prompt of that era with its stop reason.
//!
//! `scaffold-aip/tests/regen.rs` keeps the module current (`regen --check`).

mod common;

use agentacp::prelude::*;
use agentacp::server::ServerOptions;
use agentacp::wire::support::{DecodeError, RawValue, Side};
use common::Pipe;
use serde::Serialize;
use serde_json::Value;

#[path = "wire-early/rev_e1c94557.rs"]
#[rustfmt::skip] // formatted by the generator; `regen --check` compares it byte for byte
#[allow(dead_code, reason = "a whole revision's types; the tests use some")]
mod rev_e1c94557;

use rev_e1c94557 as early;

/// The corpus of the revision's messages.
fn corpus() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wire-early/e1c94557.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The re-serialised JSON of what decoded, or the error.
fn written<T: Serialize>(decoded: Result<T, DecodeError>) -> Result<Value, String> {
    let decoded = decoded.map_err(|e| e.to_string())?;
    serde_json::to_value(&decoded).map_err(|e| format!("serialize: {e}"))
}

/// `json` as the params (`result: false`) or the result of `method`, through the method enum
/// that carries it on the wire, written back.
fn round_trip(method: &str, result: bool, json: &Value) -> Result<Value, String> {
    let info = early::METHODS
        .iter()
        .find(|info| info.name == method)
        .unwrap_or_else(|| panic!("{method} is not in the module's METHODS"));
    let raw = serde_json::value::to_raw_value(json).unwrap();
    let raw: Option<&RawValue> = Some(&raw);
    let request = !info.is_notification();
    match (info.side, request, result) {
        (Side::Agent, true, false) => written(early::ClientRequest::decode(method, raw)),
        (Side::Agent, true, true) => written(early::AgentResponse::decode(method, raw)),
        (Side::Agent, false, false) => written(early::ClientNotification::decode(method, raw)),
        (Side::Client, true, false) => written(early::AgentRequest::decode(method, raw)),
        (Side::Client, true, true) => written(early::ClientResponse::decode(method, raw)),
        (Side::Client, false, false) => written(early::AgentNotification::decode(method, raw)),
        (side, _, _) => panic!("{method}: no {side:?} enum carries it (result: {result})"),
    }
}

#[test]
fn the_messages_of_the_era_round_trip_and_what_the_schema_refuses_is_refused() {
    let corpus = corpus();
    assert_eq!(corpus["rev"], early::ACP_REV);
    let cases = corpus["cases"].as_array().unwrap();
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let method = case["method"].as_str().unwrap();
        let result = match case["part"].as_str() {
            Some("params") => false,
            Some("result") => true,
            other => panic!("{name}: part {other:?}"),
        };
        let outcome = round_trip(method, result, &case["json"]);
        let accepted = case["valid"] == true || case.get("accepted").is_some();
        let expected = case.get("out").unwrap_or(&case["json"]);
        match (&outcome, accepted) {
            (Ok(out), true) if out == expected => {}
            (Ok(out), true) => failures.push(format!("{name}: wrote {out}, expected {expected}")),
            (Err(error), true) => failures.push(format!("{name}: refused ({error})")),
            (Ok(out), false) => failures.push(format!("{name}: the schema refuses it, ours read it as {out}")),
            (Err(_), false) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Every method of the revision, and every request's result, has a case.
    for info in early::METHODS {
        for result in [false, true] {
            if result && info.is_notification() {
                continue;
            }
            let part = if result { "result" } else { "params" };
            assert!(
                cases
                    .iter()
                    .any(|c| c["method"] == info.name && c["part"] == part && c["valid"] == true),
                "no valid {part} case for {}",
                info.name
            );
        }
    }
}

#[test]
fn a_result_the_schema_gives_as_null_is_a_unit_struct_written_as_null() {
    for method in ["authenticate", "session/load"] {
        let decoded = early::AgentResponse::decode(method, None).unwrap();
        assert_eq!(serde_json::to_value(&decoded).unwrap(), Value::Null, "{method}");
    }
    assert_eq!(
        early::AgentResponse::decode("authenticate", None).unwrap(),
        early::AgentResponse::Authenticate(early::AuthenticateResponse)
    );
    assert_eq!(serde_json::to_value(early::WriteTextFileResponse).unwrap(), Value::Null);
    // Tied to its request like any result.
    fn result_of<P: agentacp::wire::support::RequestParams>() -> &'static str {
        std::any::type_name::<P::Result>()
    }
    assert!(result_of::<early::WriteTextFileRequest>().ends_with("::WriteTextFileResponse"));
}

#[acp_operator(manifest = "tests/operators/early-server/ACP.md", wire = rev_e1c94557)]
struct EarlyServer;

impl EarlyServerServer for EarlyServer {
    /// Says the first text block of the prompt back, then ends the turn.
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, request: early::PromptRequest) -> Result<early::StopReason> {
        let first = request.prompt.iter().find_map(|block| match block {
            early::ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        });
        turn.message(format!("you said: {}", first.unwrap_or_default())).await?;
        Ok(early::StopReason::EndTurn)
    }
}

#[tokio::test]
async fn a_server_runs_on_the_early_module_through_wire() {
    let root = tempfile::tempdir().unwrap();
    let options = ServerOptions {
        workspace_root: Some(root.path().to_path_buf()),
        audit: Some(agentacp::audit::AuditLog::off()),
        ..ServerOptions::default()
    };
    let mut pipe = Pipe::serve(EarlyServer, options);
    let (_, answer) = pipe
        .call(
            "initialize",
            serde_json::json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}}}),
        )
        .await;
    assert_eq!(
        answer["result"]["_meta"]["aip44"]["acp_rev"],
        early::ACP_REV,
        "{answer}"
    );
    assert_eq!(answer["result"]["protocolVersion"], early::PROTOCOL_VERSION, "{answer}");
    let raw = serde_json::value::to_raw_value(&answer["result"]).unwrap();
    early::AgentResponse::decode("initialize", Some(&raw))
        .expect("the answer reads as the revision's InitializeResponse");

    let cwd = root.path().to_string_lossy().into_owned();
    let (_, answer) = pipe
        .call("session/new", serde_json::json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let session = answer["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();

    // A prompt of the era: a resource link beside the text (the revision's `resource_link`).
    let (before, answer) = pipe
        .call(
            "session/prompt",
            serde_json::json!({"sessionId": session, "prompt": [
                {"type": "resource_link", "name": "lib.rs", "uri": "file:///src/lib.rs"},
                {"type": "text", "text": "hello from August"}
            ]}),
        )
        .await;
    assert_eq!(
        answer["result"],
        serde_json::json!({"stopReason": "end_turn"}),
        "{answer}"
    );
    let raw = serde_json::value::to_raw_value(&answer["result"]).unwrap();
    assert_eq!(
        early::AgentResponse::decode("session/prompt", Some(&raw)).unwrap(),
        early::AgentResponse::SessionPrompt(early::PromptResponse::new(early::StopReason::EndTurn))
    );
    // The operator's message, read with the revision's own types.
    let said: Vec<String> = before
        .iter()
        .filter(|message| message["method"] == "session/update")
        .filter_map(|message| {
            let raw = serde_json::value::to_raw_value(&message["params"]).unwrap();
            match early::AgentNotification::decode("session/update", Some(&raw)) {
                Ok(early::AgentNotification::SessionUpdate(notification)) => match notification.update {
                    early::SessionUpdate::AgentMessageChunk(chunk) => match chunk.content {
                        early::ContentBlock::Text(text) => Some(text.text),
                        _ => None,
                    },
                    _ => None,
                },
                other => panic!("{message} does not read as the revision's session/update: {other:?}"),
            }
        })
        .collect();
    assert_eq!(said, ["you said: hello from August"]);
    pipe.finish().await;
}
