//! `scaffold-aip conform --protocol 2` judges this example a conformant ACP v2 agent (served
//! with `AGENTACP_PROTOCOL_VERSIONS=1,2`) over stdio, WebSocket and Streamable HTTP, every
//! frame checked against the alpha.3 schema when the test data is on this machine (issue #48).

#[path = "../../test-support/ws_server.rs"]
mod ws_server;

use std::path::{Path, PathBuf};

use acp_conform::{Config, Connect, failed, skipped};
use ws_server::WsServer;

/// The alpha.3 schema (test data beside the repository), when it is on this machine.
fn schema() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/upstream/acp-schemas-v2/272bf799f35a258c6a4107a0410ed361e83683d3/schema.json");
    path.is_file().then_some(path)
}

/// The example's manifest.
fn manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md")
}

/// The v2 suite against `config`'s agent, with the example's manifest: nothing fails; the
/// checks that do not apply to a basic echo agent (no authMethods, no session/delete, no
/// config options, no tool calls, plans, terminals or elicitation, no replay without
/// `loadSession`; batches over `--connect`) skip.
fn passes(config: Config) {
    let remote = config.connect.is_some();
    let config = Config {
        protocol: 2,
        schema: schema(),
        ..config
    }
    .with_manifest(&manifest())
    .expect("the manifest reads");
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    let mut skips = vec![
        "v2.auth-login",
        "v2.auth-logout",
        "v2.session-delete",
        "v2.set-config-option",
        "v2.tool-calls",
        "v2.resume-replay",
    ];
    if remote {
        skips.push("v2.batch");
    }
    skips.extend(["v2.update-shapes", "v2.elicitation"]);
    if schema().is_none() {
        skips.push("v2.schema");
    }
    assert_eq!(skipped(&verdicts), skips, "{verdicts:#?}");
}

/// `--manifest` on v2 judges the agent against the manifest it is given: run with the
/// governed example's, the echo example's name and `_meta.aip44` are told apart (their
/// session capabilities are the same on v2: `loadSession` is v2's baseline).
#[test]
fn another_manifest_fails_the_v2_manifest_checks() {
    let mut config = Config {
        protocol: 2,
        only: ["v2.manifest-capabilities", "v2.manifest-info", "v2.manifest-meta-aip44"]
            .map(String::from)
            .to_vec(),
        ..Config::new(vec![env!("CARGO_BIN_EXE_echo-server").into()])
    };
    config
        .launch
        .env
        .push(("AGENTACP_PROTOCOL_VERSIONS".into(), "1,2".into()));
    let governed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../governed-server/ACP.md");
    let config = config.with_manifest(&governed).expect("the manifest reads");
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(
        failed(&verdicts),
        vec!["v2.manifest-info", "v2.manifest-meta-aip44"],
        "{verdicts:#?}"
    );
}

#[test]
fn the_example_passes_the_v2_suite_over_stdio() {
    let mut config = Config::new(vec![env!("CARGO_BIN_EXE_echo-server").into()]);
    config
        .launch
        .env
        .push(("AGENTACP_PROTOCOL_VERSIONS".into(), "1,2".into()));
    passes(config);
}

#[test]
fn the_example_passes_the_v2_suite_over_websocket_and_streamable_http() {
    let root = tempfile::tempdir().expect("a temporary workspace root");
    let server = WsServer::start(
        Path::new(env!("CARGO_BIN_EXE_echo-server")),
        &[
            ("AGENTACP_PROTOCOL_VERSIONS", "1,2".into()),
            ("AGENTACP_WORKSPACE_ROOT", root.path().into()),
            ("AGENTACP_STATE_DIR", root.path().join(".state").into()),
        ],
    );
    for url in [server.url(), format!("http://127.0.0.1:{}/acp", server.port)] {
        passes(Config {
            connect: Some(Connect {
                url,
                token: None,
                workspace_root: root.path().to_path_buf(),
            }),
            ..Config::new(Vec::new())
        });
    }
}

#[test]
fn a_v1_only_run_of_the_example_is_told_plainly_it_does_not_serve_v2() {
    // Without AGENTACP_PROTOCOL_VERSIONS the example serves v1 only.
    let config = Config {
        protocol: 2,
        ..Config::new(vec![env!("CARGO_BIN_EXE_echo-server").into()])
    };
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), vec!["v2.initialize"], "{verdicts:#?}");
    assert_eq!(skipped(&verdicts).len(), verdicts.len() - 1, "{verdicts:#?}");
}
