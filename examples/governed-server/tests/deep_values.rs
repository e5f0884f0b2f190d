//! Issue #44: tool arguments nested deeper than JSON readers read (serde_json stops at 128
//! levels) are audited so that the log still verifies and the server still restarts on it.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use agentacp::audit::{DEEP_JSON_KEY, parse_record, verify_file};
use serde_json::Value;
use stdio_peer::{Scratch, StdioPeer};

/// How deep the arguments nest: around serde_json's limit, and far past it.
const DEPTHS: [usize; 10] = [100, 120, 124, 125, 126, 127, 128, 129, 1_000, 100_000];

/// `{"path":[[…"x"…]]}`, an object nesting `levels` levels.
fn nested_arguments(levels: usize) -> String {
    let (open, close) = ("[".repeat(levels - 1), "]".repeat(levels - 1));
    format!(r#"{{"path":{open}"x"{close}}}"#)
}

/// `value` with every `{"$deepJson": TEXT}` placeholder replaced by the value TEXT holds.
fn restored(value: &Value) -> Value {
    match value {
        Value::Object(members) if members.len() == 1 && members.contains_key(DEEP_JSON_KEY) => {
            let text = members[DEEP_JSON_KEY].as_str().expect("the placeholder holds text");
            restored(&serde_json::from_str(text).expect("the placeholder's text is JSON"))
        }
        Value::Object(members) => Value::Object(members.iter().map(|(k, v)| (k.clone(), restored(v))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(restored).collect()),
        other => other.clone(),
    }
}

fn governed_server(scratch: &Scratch) -> StdioPeer {
    let audit = scratch.path().join("audit.jsonl");
    StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_governed-server")),
        &[],
        &[
            ("AGENTACP_WORKSPACE_ROOT", scratch.path()),
            ("AGENTACP_STATE_DIR", scratch.path()),
            ("AGENTACP_AUDIT_LOG", &audit),
        ],
    )
}

#[test]
fn deeply_nested_tool_arguments_are_audited_readably_and_the_server_restarts_on_its_log() {
    let scratch = Scratch::new("governed-deep-values");
    let audit = scratch.path().join("audit.jsonl");
    let mut records_before = 0;
    for run in 0..2 {
        let mut server = governed_server(&scratch);
        let (_, session) = server.open_session(scratch.path());
        server.recv(); // available_commands_update
        for (n, levels) in DEPTHS.into_iter().enumerate() {
            let text = format!("/tool delete-repo {}", nested_arguments(levels));
            let turn = server.prompt(2 + n as u64, &session, &text);
            let answer = turn.last().expect("answered");
            assert_eq!(answer["result"]["stopReason"], "end_turn", "{run}, {levels}: {answer}");
        }
        // A frame that itself nests 100,000 levels: a clear error, and the server goes on.
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        server.send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":99,"method":"session/prompt","params":{{"sessionId":{session},"prompt":[{{"type":"text","text":"hi","_meta":{{"deep":{deep}}}}}]}}}}"#
        ));
        let refused = server.until_answer(99).pop().expect("answered");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("recursion limit"), "{refused}");
        let turn = server.prompt(100, &session, "still here");
        assert_eq!(turn.last().expect("answered")["result"]["stopReason"], "end_turn");
        assert!(
            server.finish().success(),
            "{run}: a closed stdin ends the server cleanly"
        );

        // The log verifies (and the next run's start verifies it again before appending).
        let summary = verify_file(&audit).unwrap_or_else(|e| panic!("{run}: the chain verifies: {e}"));
        assert!(summary.records > records_before, "{run}: appended after a restart");
        records_before = summary.records;
    }

    // Every denial is recorded, with arguments as the example read them (it reads up to
    // serde_json's limit of 127 levels and takes `{}` beyond), nothing of them lost.
    let text = std::fs::read_to_string(&audit).unwrap();
    let calls: Vec<Value> = text
        .lines()
        .map(|line| parse_record(line).expect("every record reads"))
        .filter(|record| record["action"] == "tool.call")
        .collect();
    assert_eq!(calls.len(), 2 * DEPTHS.len());
    for (call, levels) in calls.iter().zip(DEPTHS.iter().chain(&DEPTHS)) {
        assert!(
            serde_json::from_str::<Value>(&call.to_string()).is_ok(),
            "{levels}: any reader reads it"
        );
        assert_eq!(call["metadata"]["aip44"]["approval"]["deniedBy"], "governance");
        let sent = serde_json::from_str::<Value>(&nested_arguments(*levels)).unwrap_or_else(|_| serde_json::json!({}));
        assert_eq!(restored(&call["input"]["arguments"]), sent, "{levels}");
        assert_eq!(restored(&call["metadata"]["aip44"]["arguments"]), sent, "{levels}");
    }
}

/// How many levels the JSON `value` nests (0 for a scalar).
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// An allowed call (`read-file`, which runs without asking) with arguments as deep as the
/// server reads them is announced in `tool_call` updates any JSON reader reads (the client's
/// reader here is serde_json's, which stops at 128 levels), the arguments whole: what nests
/// past the bound is kept as JSON text. Before, a call with arguments 125 levels deep was
/// announced in a frame 128 levels deep, which the client could not read.
#[test]
fn an_allowed_calls_deep_arguments_reach_the_client_readably() {
    let scratch = Scratch::new("governed-deep-raw-input");
    let mut server = governed_server(&scratch);
    let (_, session) = server.open_session(scratch.path());
    server.recv(); // available_commands_update
    for (n, levels) in DEPTHS.into_iter().enumerate() {
        let text = format!("/tool read-file {}", nested_arguments(levels));
        // Every frame is parsed with serde_json's default limit (or the peer panics).
        let turn = server.prompt(2 + n as u64, &session, &text);
        let answer = turn.last().expect("answered");
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{levels}: {answer}");
        for frame in &turn {
            assert!(depth(frame) <= agentacp::audit::MAX_WRITE_DEPTH, "{levels}");
        }
        // The example reads arguments up to serde_json's limit and takes `{}` beyond.
        let Ok(sent) = serde_json::from_str::<Value>(&nested_arguments(levels)) else {
            continue;
        };
        let call = turn
            .iter()
            .find(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
            .unwrap_or_else(|| panic!("{levels}: the call is announced: {turn:?}"));
        assert_eq!(restored(&call["params"]["update"]["rawInput"]), sent, "{levels}");
    }
    assert!(server.finish().success());
}
