//! The bridge as an editor runs it, in front of an agent that fails to start.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use stdio_peer::StdioPeer;

#[test]
fn a_downstream_agent_that_dies_ends_the_bridge_with_its_status_and_stderr() {
    let mut bridge = StdioPeer::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_governance-bridge")),
        &["--", "sh", "-c", "echo 'model weights missing' >&2; exit 7"],
        &[],
    );
    // stdin stays open: the editor is still there, the agent is what went away.
    let status = bridge.wait_exit();
    let stderr = bridge.stderr_to_end();
    assert!(
        !status.success(),
        "the bridge ends with an error when its agent is gone: {stderr}"
    );
    assert!(stderr.contains("exit status: 7"), "{stderr}");
    assert!(stderr.contains("model weights missing"), "{stderr}");
}
