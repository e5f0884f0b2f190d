//! Issue #45.7: what the bridge does not pass on of its agent's capabilities is named, with
//! why, in its `initialize` answer (`_meta.agentacp.narrowed`), so a user sees it in acpx.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use serde_json::json;
use stdio_peer::{Scratch, StdioPeer};

/// A downstream agent in `sh` that advertises more than the bridge governs (as Claude's agent
/// does: MCP over HTTP and SSE), and audio and `session/delete`, which its manifest leaves
/// out.
const ADVERTISES_MORE: &str = r#"read -r line
echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true,"audio":true,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":true},"sessionCapabilities":{"list":{},"resume":{},"close":{},"delete":{}}}}}'
while read -r line; do :; done"#;

#[test]
fn initialize_names_what_the_bridge_narrowed_and_why() {
    let scratch = Scratch::new("bridge-narrowed");
    let audit = scratch.path().join("bridge.jsonl");
    let mut bridge = StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_governance-bridge")),
        &["--", "sh", "-c", ADVERTISES_MORE],
        &[("AGENTACP_AUDIT_LOG", &audit)],
    );
    bridge.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}));
    let init = bridge.recv();
    let capabilities = &init["result"]["agentCapabilities"];
    // What the manifest declares passes: images, embedded context, listing, resuming and
    // closing sessions.
    assert_eq!(
        capabilities["promptCapabilities"],
        json!({"image": true, "audio": false, "embeddedContext": true}),
        "{init}"
    );
    assert_eq!(
        capabilities["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}}),
        "{init}"
    );
    assert_eq!(
        capabilities["mcpCapabilities"],
        json!({"http": false, "sse": false}),
        "{init}"
    );
    let narrowed = init["result"]["_meta"]["agentacp"]["narrowed"]
        .as_array()
        .unwrap_or_else(|| panic!("no _meta.agentacp.narrowed: {init}"));
    let names: Vec<&str> = narrowed.iter().filter_map(|n| n["capability"].as_str()).collect();
    assert_eq!(
        names,
        [
            "agentCapabilities.promptCapabilities.audio",
            "agentCapabilities.mcpCapabilities.http",
            "agentCapabilities.mcpCapabilities.sse",
            "agentCapabilities.sessionCapabilities.delete",
        ],
        "{init}"
    );
    for entry in narrowed {
        let capability = entry["capability"].as_str().unwrap_or_default();
        let reason = entry["reason"].as_str().unwrap_or_default();
        if capability.starts_with("agentCapabilities.mcpCapabilities.") {
            assert!(reason.contains("could not govern"), "{entry}");
        } else {
            assert!(reason.contains("does not declare it"), "{entry}");
        }
    }
    bridge.close_stdin();
    assert!(bridge.wait_exit().success(), "{}", bridge.stderr_to_end());
}
