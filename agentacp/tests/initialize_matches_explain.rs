//! The typed hand-off from `#[acp_operator]` to the runtime: for a server, a client and a
//! bridge (each with bindings, capabilities and a tier of its own), the `initialize` message
//! the runtime builds from the generated spec's typed constants is exactly the one
//! `scaffold-aip explain` reports for the same manifest.

use std::path::Path;

use acp_manifest::explain::explain;
use acp_manifest::manifest::check_file;
use agentacp::bridge::BridgeOperator;
use agentacp::client::{AgentCommand, ClientContext, ClientOperator, fs};
use agentacp::jsonrpc::RpcError;
use agentacp::prelude::*;
use agentacp::server::Operator;
use agentacp::spec::{OperatorKind, OperatorSpec};

mod common;

/// A governed server that lets its operator read, write and run commands in the editor.
#[acp_operator(manifest = "tests/operators/test-operator/ACP.md")]
struct Server;
ok_server!(ServerServer for Server, GovernanceAware);

/// A server that declares every optional session method (`metadata.agentacp.sessions`).
#[acp_operator(manifest = "tests/operators/test-sessions/ACP.md")]
struct Archivist;
ok_server!(ArchivistServer for Archivist, GovernanceAware);

/// A sandboxed server with operator and sandbox bindings (the sandbox without an id).
#[acp_operator(manifest = "../tests/ui/pass/sandboxed/ACP.md")]
struct Boxed;
ok_server!(BoxedServer for Boxed, Sandboxed);

/// A governed client offering file writes and terminals.
#[acp_operator(manifest = "tests/operators/handoff-client/ACP.md")]
struct Client;

impl ClientClient for Client {
    async fn write_text_file(
        &self,
        context: &ClientContext,
        request: wire::WriteTextFileRequest,
    ) -> Result<wire::WriteTextFileResponse, RpcError> {
        fs::write_text_file(context, &request).await
    }

    agentacp::builtin_terminal_methods!();
}

/// A governed bridge: agent capabilities up, client capabilities down.
#[acp_operator(manifest = "tests/operators/test-bridge-governed/ACP.md")]
struct Bridge;

impl BridgeBridge for Bridge {
    fn downstream(&self) -> AgentCommand {
        AgentCommand::new("true")
    }
}

/// Explain's view of the manifest at `path` (relative to this crate).
fn explained(path: &str) -> acp_manifest::explain::Explanation {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let checked = check_file(&path).expect("the manifest is readable");
    explain(&checked).expect("the manifest checks clean")
}

fn assert_agrees(spec: &OperatorSpec, manifest: &str) {
    let explanation = explained(manifest);
    assert_eq!(
        spec.initialize_result(),
        explanation.initialize_response,
        "{manifest}: initialize result"
    );
    assert_eq!(
        spec.initialize_params(),
        explanation.initialize_request,
        "{manifest}: initialize params"
    );
    assert_eq!(
        (spec.acp_rev, spec.protocol_version),
        (explanation.acp_rev.as_str(), explanation.protocol_version)
    );
    assert_eq!(spec.kind.as_str(), explanation.kind.as_str(), "{manifest}");
    assert_eq!(spec.tier, explanation.tier.as_str(), "{manifest}");
}

#[test]
fn a_servers_initialize_result_is_the_one_explain_reports() {
    assert_agrees(Server::spec(), "tests/operators/test-operator/ACP.md");
    assert_agrees(Boxed::spec(), "../tests/ui/pass/sandboxed/ACP.md");
    assert_agrees(Archivist::spec(), "tests/operators/test-sessions/ACP.md");
    assert_eq!(
        Archivist::spec().initialize_result()["agentCapabilities"]["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}, "delete": {}})
    );
    let spec = Boxed::spec();
    assert_eq!(spec.kind, OperatorKind::Server);
    assert!(spec.load_session(), "sandboxed turns on loadSession");
    assert!(spec.initialize_params().is_null(), "a server sends no initialize");
    let meta = &spec.initialize_result()["_meta"]["aip44"];
    // The bound SANDBOX.md has no `id`, so only the operator is named.
    assert_eq!(
        (meta.get("operator"), meta.get("sandbox")),
        (Some(&json!("echo")), None),
        "{meta}"
    );
}

#[test]
fn a_clients_initialize_params_are_the_ones_explain_reports() {
    assert_agrees(Client::spec(), "tests/operators/handoff-client/ACP.md");
    let spec = Client::spec();
    assert_eq!(spec.kind, OperatorKind::Client);
    assert!(spec.initialize_result().is_null(), "a client answers no initialize");
    let params = spec.initialize_params();
    assert_eq!(
        params["clientCapabilities"],
        json!({"fs": {"readTextFile": false, "writeTextFile": true}, "terminal": true})
    );
    assert_eq!(params["clientInfo"]["version"], "0.2.0");
    assert_eq!(params["_meta"]["aip44"]["operator"], "tester");
}

#[test]
fn a_bridges_initialize_both_ways_is_what_explain_reports() {
    assert_agrees(Bridge::spec(), "tests/operators/test-bridge-governed/ACP.md");
    let spec = Bridge::spec();
    assert_eq!(spec.kind, OperatorKind::Bridge);
    assert!(spec.initialize_result()["agentCapabilities"]["loadSession"] == true);
    assert!(spec.initialize_params()["clientCapabilities"]["fs"]["readTextFile"] == true);
}
