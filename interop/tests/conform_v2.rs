//! `scaffold-aip conform --protocol 2` against the official SDKs' v2 agents (`v2_peers`): the
//! controls that the kit's v2 suite judges what the SDKs implement conformant (issue #48). A
//! peer that is missing skips the test (fails it under AGENTACP_REQUIRE_PEERS=1).

#[path = "common/v2_peers.rs"]
mod v2_peers;

use std::path::{Path, PathBuf};

use acp_conform::{Config, Outcome, Verdict, failed, skipped};
use v2_peers::{Sdk, agent_command};

/// The alpha.3 schema (test data beside the repository), when it is on this machine.
fn schema() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/upstream/acp-schemas-v2/272bf799f35a258c6a4107a0410ed361e83683d3/schema.json");
    path.is_file().then_some(path)
}

/// The v2 suite against `sdk`'s agent (`/wait` keeps its turn running until cancelled);
/// `None` when the peer cannot run here.
fn suite(sdk: Sdk) -> Option<Vec<Verdict>> {
    let command = match agent_command(sdk, false) {
        Ok(command) => command,
        Err(why) => {
            interop::skip_without_peer(&why);
            return None;
        }
    };
    let config = Config {
        protocol: 2,
        schema: schema(),
        long_prompt: "/wait".into(),
        ..Config::new(command)
    };
    Some(acp_conform::run(config).expect("the suite runs"))
}

/// What the SDK agents do not exercise: without a manifest there is no workspace root to
/// confine to; they advertise no authMethods, no session/delete, no config options, and their
/// turns send no plan, terminal, tool call content or elicitation.
fn expected_skips() -> Vec<&'static str> {
    let mut skips = vec![
        "v2.manifest-capabilities",
        "v2.manifest-info",
        "v2.manifest-meta-aip44",
        "v2.auth-login",
        "v2.auth-logout",
        "v2.cwd-dotdot",
        "v2.cwd-symlink",
        "v2.session-delete",
        "v2.set-config-option",
        "v2.update-shapes",
        "v2.elicitation",
    ];
    if schema().is_none() {
        skips.push("v2.schema");
    }
    skips
}

/// The verdict of `id`'s failure.
fn failure<'v>(verdicts: &'v [Verdict], id: &str) -> &'v str {
    match &verdicts.iter().find(|v| v.id == id).expect("it ran").outcome {
        Outcome::Fail(why) => why,
        other => panic!("{id}: {other:?}"),
    }
}

/// None of the SDKs (Rust 5.0.0, TypeScript and Python 1.0.0rc3) takes a JSON-RPC batch on
/// stdio, which v2 asks of both sides: the Rust and TypeScript SDKs refuse the whole array
/// with one -32600 (id null, "batches are not supported"), the Python SDK answers nothing.
/// The kit reports exactly that (`v2.batch`).
fn batch_refused(verdicts: &[Verdict]) {
    let why = failure(verdicts, "v2.batch");
    assert!(
        why.starts_with("a batch of 4 entries: no answer for id \"batch-1\", 2"),
        "{why}"
    );
}

#[test]
fn the_rust_sdk_v2_agent_passes_the_v2_suite_but_batches() {
    let Some(verdicts) = suite(Sdk::Rust) else { return };
    assert_eq!(failed(&verdicts), vec!["v2.batch"], "{verdicts:#?}");
    batch_refused(&verdicts);
    assert!(failure(&verdicts, "v2.batch").contains("\"code\":-32600"));
    assert_eq!(skipped(&verdicts), expected_skips(), "{verdicts:#?}");
}

#[test]
fn the_typescript_sdk_v2_agent_passes_the_v2_suite_but_batches() {
    let Some(verdicts) = suite(Sdk::TypeScript) else { return };
    assert_eq!(failed(&verdicts), vec!["v2.batch"], "{verdicts:#?}");
    batch_refused(&verdicts);
    assert!(failure(&verdicts, "v2.batch").contains("\"code\":-32600"));
    assert_eq!(skipped(&verdicts), expected_skips(), "{verdicts:#?}");
}

/// The Python SDK (1.0.0rc3, `acp.experimental.v2`) refuses an `initialize` asking for a
/// version it does not serve (-32602, "expectedProtocolVersion": 2) instead of answering with
/// its latest, as the spec's negotiation says, and answers no batch: the kit reports exactly
/// that, and passes the rest.
#[test]
fn the_python_sdk_v2_agent_passes_the_v2_suite_but_version_negotiation_and_batches() {
    let Some(verdicts) = suite(Sdk::Python) else { return };
    assert_eq!(failed(&verdicts), vec!["v2.version-newer", "v2.batch"], "{verdicts:#?}");
    assert!(
        failure(&verdicts, "v2.version-newer").contains("\"receivedProtocolVersion\":3"),
        "{verdicts:#?}"
    );
    batch_refused(&verdicts);
    assert!(failure(&verdicts, "v2.batch").ends_with("the agent answered nothing"));
    assert_eq!(skipped(&verdicts), expected_skips(), "{verdicts:#?}");
}
