//! Issue #44: a hostile agent behind the bridge reports tool calls whose `rawInput` nests
//! deeper than JSON readers read (serde_json stops at 128 levels); the bridge's audit log
//! still verifies, any JSON reader reads every record, and the bridge restarts on the log.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use agentacp::audit::{DEEP_JSON_KEY, parse_record, verify_file};
use serde_json::{Value, json};
use stdio_peer::{Scratch, StdioPeer};

/// How deep the `rawInput`s nest: around serde_json's limit, and far past it.
const DEPTHS: [usize; 10] = [100, 120, 122, 123, 124, 125, 126, 127, 1_000, 100_000];

/// The hostile agent: to the prompt `deep N` it reports a `delete-repo` call (which the
/// bridge's governance denies: the editor never sees it, the denial is audited), to `read N`
/// a `read-file` call (allowed: forwarded to the editor), whose `rawInput` nests `N` levels
/// (`{"path":[[…"x"…]]}`), written as text, then ends the turn.
const HOSTILE_AGENT: &str = r#"
import json, sys
def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "initialize":
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1, "agentCapabilities": {}}}))
    elif method == "session/new":
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}}))
    elif method == "session/prompt":
        word, n = params["prompt"][0]["text"].split()
        n = int(n)
        tool, kind, prefix = ("read-file", "read", "r") if word == "read" else ("delete-repo", "delete", "c")
        deep = '{"path":' + "[" * (n - 1) + '"x"' + "]" * (n - 1) + "}"
        call = '{"sessionUpdate":"tool_call","toolCallId":"%s%d","title":"%s","kind":"%s","status":"completed","rawInput":%s}' % (prefix, n, tool, kind, deep)
        send('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":%s}}' % call)
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}))
"#;

/// The bridge before the hostile agent, writing its log to `audit`, with session `s1` open.
fn bridge_with_a_session(scratch: &Scratch, audit: &std::path::Path) -> (StdioPeer, Value) {
    let mut bridge = StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_governance-bridge")),
        &["--", "python3", "-c", HOSTILE_AGENT],
        &[("AGENTACP_AUDIT_LOG", audit)],
    );
    bridge.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}));
    assert_eq!(bridge.until_answer(1).pop().unwrap()["result"]["protocolVersion"], 1);
    let cwd = scratch.path().to_str().unwrap();
    bridge.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}));
    let session = bridge.until_answer(2).pop().unwrap()["result"]["sessionId"].clone();
    assert_eq!(session, "s1");
    (bridge, session)
}

/// An allowed call's `rawInput`, however deep the agent nests it, reaches the editor in a
/// frame any JSON reader reads (the editor's reader here is serde_json's, which stops at 128
/// levels), nothing of it lost: what nests past the bound is kept as JSON text. Before, the
/// bridge passed the frame on as it came, and the editor could not read it.
#[test]
fn an_allowed_calls_deep_raw_input_reaches_the_editor_readably() {
    let scratch = Scratch::new("bridge-deep-forwarded");
    let audit = scratch.path().join("bridge.jsonl");
    let (mut bridge, session) = bridge_with_a_session(&scratch, &audit);
    for (n, levels) in DEPTHS.into_iter().enumerate() {
        // Every frame is parsed by the peer with serde_json's default limit (or it panics).
        let turn = bridge.prompt(3 + n as u64, &session, &format!("read {levels}"));
        assert_eq!(turn.last().unwrap()["result"]["stopReason"], "end_turn", "{levels}");
        let call = turn
            .iter()
            .find(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
            .unwrap_or_else(|| panic!("{levels}: the editor saw the call: {turn:?}"));
        assert_eq!(call["params"]["update"]["toolCallId"], format!("r{levels}"));
        let raw_input = call["params"]["update"]["rawInput"].to_string();
        assert_eq!(
            raw_input.matches('[').count(),
            levels - 1,
            "{levels}: all of it is kept"
        );
        assert!(raw_input.contains(DEEP_JSON_KEY), "{levels}: {raw_input:.200}");
    }
    assert!(bridge.finish().success());
    verify_file(&audit).unwrap_or_else(|e| panic!("the chain verifies: {e}"));
}

#[test]
fn a_hostile_agents_deeply_nested_raw_input_is_audited_readably_and_the_bridge_restarts() {
    let scratch = Scratch::new("bridge-deep-values");
    let audit = scratch.path().join("bridge.jsonl");
    let mut records_before = 0;
    for run in 0..2 {
        let (mut bridge, session) = bridge_with_a_session(&scratch, &audit);
        for (n, levels) in DEPTHS.into_iter().enumerate() {
            let turn = bridge.prompt(3 + n as u64, &session, &format!("deep {levels}"));
            let answer = turn.last().expect("answered");
            assert_eq!(answer["result"]["stopReason"], "end_turn", "{run}, {levels}: {answer}");
        }
        let status = bridge.finish();
        assert!(status.success(), "{run}: {status:?}");
        let summary = verify_file(&audit).unwrap_or_else(|e| panic!("{run}: the chain verifies: {e}"));
        assert!(summary.records > records_before, "{run}: appended after a restart");
        records_before = summary.records;
    }
    // Every record reads with any JSON reader; every call is recorded (the bridge reads an
    // update nesting past serde_json's limit with its deep part kept as JSON text).
    let text = std::fs::read_to_string(&audit).unwrap();
    let records: Vec<Value> = text.lines().map(|line| parse_record(line).unwrap()).collect();
    for record in &records {
        assert!(serde_json::from_str::<Value>(&record.to_string()).is_ok(), "{record}");
    }
    let calls: Vec<&str> = records
        .iter()
        .filter(|r| r["action"] == "tool.call")
        .filter_map(|r| r["subject"]["ref"].as_str())
        .collect();
    // Nothing of the arguments is lost: both copies (`input` and the AIP-44 mirror) hold every
    // level, those past the bound as JSON text.
    for record in records.iter().filter(|r| r["action"] == "tool.call") {
        let levels: usize = record["subject"]["ref"].as_str().unwrap()[1..].parse().unwrap();
        let brackets = record.to_string().matches('[').count();
        assert_eq!(brackets, 2 * (levels - 1), "{levels}");
        assert_eq!(record["metadata"]["aip44"]["approval"]["deniedBy"], "governance");
    }
    let all: Vec<String> = DEPTHS.iter().map(|n| format!("c{n}")).collect();
    assert_eq!(calls, [&all[..], &all[..]].concat());
}
