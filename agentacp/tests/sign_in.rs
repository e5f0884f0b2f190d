//! Signing in over stdio with the methods a manifest declares (`metadata.agentacp.auth`): the
//! `initialize` answer lists them (a terminal one only to a client that runs it), a request
//! before sign-in is refused `-32000`, `authenticate` with the `agent` method reaches the
//! operator and signs the connection in, and a terminal sign-in stores the credential the
//! operator returns, which signs in every later connection.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::prelude::*;
use agentacp::server::{Credential, CredentialFile, sign_in_for_args};
use serde_json::Value;

mod common;

use common::{Pipe, WAIT};

/// Offers `browser` (agent) and `login` (terminal, `--login`).
#[acp_operator(manifest = "tests/operators/test-sign-in/ACP.md")]
#[derive(Clone)]
struct Gatekeeper {
    /// Where the credential goes.
    credential: PathBuf,
    /// The `methodId` of every `authenticate` the operator saw.
    seen: Arc<Mutex<Vec<String>>>,
}

impl Gatekeeper {
    fn new(dir: &Path) -> Gatekeeper {
        Gatekeeper {
            credential: dir.join("credential"),
            seen: Arc::default(),
        }
    }
}

impl GatekeeperServer for Gatekeeper {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        turn.message("ok").await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }

    async fn authenticate(&self, request: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
        self.seen.lock().unwrap().push(request.method_id.to_string());
        Ok(wire::AuthenticateResponse::default())
    }

    async fn sign_in(&self, method: &str) -> Result<Credential> {
        Ok(Credential::new(format!("token-from-{method}")))
    }

    fn credential_file(&self) -> CredentialFile {
        CredentialFile::at(&self.credential)
    }
}

/// One connection, initialized with `capabilities`: the `initialize` answer.
async fn connect(operator: Gatekeeper, root: &Path, capabilities: Value) -> (Pipe, Value) {
    let options = ServerOptions {
        workspace_root: Some(root.to_path_buf()),
        audit: Some(AuditLog::with_sink(Box::new(MemorySink::new()))),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    };
    let mut pipe = Pipe::serve(operator, options);
    let params = json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"}, "clientCapabilities": capabilities});
    let (_, answer) = pipe.call("initialize", params).await;
    (pipe, answer)
}

/// The ids of the `authMethods` of an `initialize` answer.
fn method_ids(answer: &Value) -> Vec<&str> {
    answer["result"]["authMethods"]
        .as_array()
        .expect("authMethods")
        .iter()
        .map(|method| method["id"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_client_signs_in_through_the_declared_agent_method_before_its_first_session() {
    let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let operator = Gatekeeper::new(state.path());
    let seen = operator.seen.clone();
    let (mut pipe, answer) = connect(operator, root.path(), json!({"auth": {"terminal": true}})).await;
    assert_eq!(
        answer["result"]["authMethods"],
        json!([
            {"id": "browser", "name": "Sign in with your browser", "type": "agent",
             "description": "The operator signs you in when the editor asks."},
            {"id": "login", "name": "Sign in in a terminal", "type": "terminal",
             "args": ["--login"], "env": {"TEST_SIGN_IN": "1"}},
        ])
    );
    let new_session = json!({"cwd": root.path(), "mcpServers": []});

    let (_, refused) = pipe.call("session/new", new_session.clone()).await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("sign in"),
        "{refused}"
    );
    assert_eq!(
        method_ids(&json!({"result": refused["error"]["data"]})),
        ["browser", "login"]
    );

    // The terminal method is the client's to run, and an unknown one is no method at all.
    for (method, says) in [
        ("login", "runs in a terminal"),
        ("sso", "unknown authentication method"),
    ] {
        let (_, answer) = pipe.call("authenticate", json!({"methodId": method})).await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(says), "{answer}");
    }
    assert!(seen.lock().unwrap().is_empty(), "the operator saw no refused method");

    let (_, signed_in) = pipe.call("authenticate", json!({"methodId": "browser"})).await;
    assert_eq!(signed_in["result"], json!({}), "{signed_in}");
    assert_eq!(*seen.lock().unwrap(), ["browser"]);

    let (_, session) = pipe.call("session/new", new_session).await;
    assert!(session["result"]["sessionId"].is_string(), "{session}");
    pipe.finish().await;
}

#[tokio::test]
async fn terminal_methods_are_offered_only_to_clients_that_run_them() {
    let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (capabilities, offered) in [
        (json!({}), &["browser"][..]),
        (json!({"auth": {"terminal": false}}), &["browser"]),
        (json!({"auth": {"terminal": true}}), &["browser", "login"]),
        // What the ACP registry's check sends.
        (json!({"_meta": {"terminal-auth": true}}), &["browser", "login"]),
    ] {
        let (pipe, answer) = connect(Gatekeeper::new(state.path()), root.path(), capabilities.clone()).await;
        assert_eq!(method_ids(&answer), offered, "{capabilities}");
        pipe.finish().await;
    }
}

#[tokio::test]
async fn a_terminal_sign_in_stores_the_credential_that_signs_in_later_connections() {
    let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let operator = Gatekeeper::new(state.path());
    let file = CredentialFile::at(&operator.credential);

    // Other arguments are not a sign-in: the program serves ACP as usual.
    for args in [&[][..], &["--login", "now"], &["--help"]] {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        assert!(sign_in_for_args(&operator, &args).await.is_none(), "{args:?}");
    }
    sign_in_for_args(&operator, &["--login".to_string()])
        .await
        .expect("`--login` is the terminal method's args")
        .expect("the sign-in succeeds");
    assert_eq!(
        file.load().unwrap().map(|c| c.secret().to_string()).as_deref(),
        Some("token-from-login")
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the credential is its owner's only");
    }

    let (mut pipe, _) = connect(operator.clone(), root.path(), json!({})).await;
    let (_, session) = pipe
        .call("session/new", json!({"cwd": root.path(), "mcpServers": []}))
        .await;
    assert!(session["result"]["sessionId"].is_string(), "{session}");
    assert!(operator.seen.lock().unwrap().is_empty(), "no `authenticate` was needed");
    pipe.finish().await;

    // Signed out: the next connection must sign in again.
    file.remove().unwrap();
    let (mut pipe, _) = connect(operator, root.path(), json!({})).await;
    let (_, refused) = pipe
        .call("session/new", json!({"cwd": root.path(), "mcpServers": []}))
        .await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    pipe.finish().await;
}

#[test]
fn the_initialize_result_lists_the_methods_explain_reports() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/operators/test-sign-in/ACP.md");
    let checked = acp_manifest::manifest::check_file(&path).expect("the manifest is readable");
    let explained = acp_manifest::explain::explain(&checked).expect("the manifest checks clean");
    let spec = <Gatekeeper as agentacp::server::Operator>::spec();
    assert_eq!(spec.initialize_result(), explained.initialize_response);
    // Both methods read back as what they are, with the official crate's types too.
    let ours: wire::InitializeResponse = serde_json::from_value(spec.initialize_result()).unwrap();
    assert!(
        matches!(
            &ours.auth_methods[..],
            [wire::AuthMethod::Agent(_), wire::AuthMethod::Terminal(_)]
        ),
        "{:?}",
        ours.auth_methods
    );
    let theirs: agent_client_protocol_schema::v1::InitializeResponse =
        serde_json::from_value(spec.initialize_result()).unwrap();
    let types: Vec<Value> = serde_json::to_value(&theirs.auth_methods)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|method| method["type"].clone())
        .collect();
    // The crate writes its default type, `agent`, by leaving `type` out.
    assert_eq!(types, [Value::Null, json!("terminal")]);
}
