//! `scaffold-aip conform --protocol 2` judges this example a conformant ACP v2 agent (served
//! with `AGENTACP_PROTOCOL_VERSIONS=1,2`): its tool calls created by their first update, its
//! permission requests titled and naming them, its history replayed by `session/resume`
//! (issue #48). Over stdio, WebSocket and Streamable HTTP.

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

/// The v2 suite against `config`'s agent, with the example's manifest, driven to a tool call
/// that runs unasked and one that asks: nothing fails; it advertises no authMethods and no
/// session/delete, its turns send no plan, terminal or elicitation, and batches are not
/// tried over `--connect`.
fn passes(config: Config) {
    let remote = config.connect.is_some();
    let config = Config {
        protocol: 2,
        schema: schema(),
        tool_prompts: vec![
            r#"/tool read-file {"path": "conform.txt"}"#.into(),
            r#"/tool write-file {"path": "conform.txt", "content": "hi"}"#.into(),
        ],
        ..config
    }
    .with_manifest(&Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md"))
    .expect("the manifest reads");
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    let mut skips = vec!["v2.auth-login", "v2.auth-logout", "v2.session-delete"];
    if remote {
        skips.push("v2.batch");
    }
    skips.extend(["v2.update-shapes", "v2.elicitation"]);
    if schema().is_none() {
        skips.push("v2.schema");
    }
    assert_eq!(skipped(&verdicts), skips, "{verdicts:#?}");
}

#[test]
fn the_example_passes_the_v2_suite_over_stdio() {
    let mut config = Config::new(vec![env!("CARGO_BIN_EXE_governed-server").into()]);
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
        Path::new(env!("CARGO_BIN_EXE_governed-server")),
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
