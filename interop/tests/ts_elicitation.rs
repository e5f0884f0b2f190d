//! The official TypeScript SDK's client (`ts/elicit.mjs`) answers our server's elicitations:
//! an operator served in process over WebSocket asks a form and a URL interaction
//! (`Turn::elicit`), the SDK accepts both, the operator completes the URL one
//! (`Turn::complete_elicitation`); what each side saw is checked, and the server's audit
//! records. Skipped, saying so, without `node` or `interop/ts/node_modules`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::auth::{Identity, TokenStore};
use agentacp::prelude::*;
use agentacp::server::websocket::{ListenOptions, Listener};
use agentacp::server::{Elicitation, ElicitationOutcome, SessionContext};

const TOKEN: &str = "ts-elicitation-token-0123456789";

/// Asks what the prompt names (`form` or `url`) and says what came back.
#[acp_operator(manifest = "../agentacp/tests/operators/test-remote/ACP.md")]
struct Asker;

impl AskerServer for Asker {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let text = serde_json::to_value(&request.prompt)?[0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let question = match text.as_str() {
            "url" => Elicitation::url(
                "Sign in to continue",
                "oauth-ts",
                "https://example.com/oauth?e=oauth-ts",
            ),
            _ => {
                let schema = json!({"type": "object", "properties": {
                    "strategy": {"type": "string", "enum": ["safe", "bold"]},
                    "port": {"type": "integer"}}, "required": ["strategy"]});
                Elicitation::form("How careful should I be?", schema)
            }
        };
        let said = match turn.elicit(question).await {
            Ok(ElicitationOutcome::Accept(content)) => format!("accept {}", Value::Object(content)),
            Ok(other) => other.action().to_string(),
            Err(error) => format!("error: {error}"),
        };
        if text == "url" && said.starts_with("accept") {
            turn.complete_elicitation("oauth-ts").await?;
        }
        turn.message(said).await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(&self, _: &SessionContext, _: wire::LoadSessionRequest) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }

    async fn extension(&self, _method: &str, _params: Value) -> Result<Value> {
        Ok(json!({}))
    }

    async fn extension_notification(&self, _method: &str, _params: Value) -> Result<()> {
        Ok(())
    }

    async fn authenticate(&self, _: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
        Ok(wire::AuthenticateResponse::default())
    }
}

/// Why the TypeScript side cannot run here, if it cannot.
fn skip_reason(ts: &Path) -> Option<String> {
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => return Some("`node` is not on PATH".to_owned()),
    }
    let sdk = ts.join("node_modules/@agentclientprotocol/sdk");
    (!sdk.is_dir()).then(|| format!("{} is absent (run `npm ci --prefix interop/ts`)", sdk.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_client_answers_our_servers_elicitations() {
    let ts = Path::new(env!("CARGO_MANIFEST_DIR")).join("ts");
    if let Some(why) = skip_reason(&ts) {
        interop::skip_without_peer(&why);
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path().canonicalize().unwrap();
    let sink = MemorySink::new();
    let options = agentacp::server::ServerOptions {
        workspace_root: Some(cwd.clone()),
        state_dir: Some(cwd.join(".state")),
        audit: Some(AuditLog::with_sink(Box::new(sink.clone()))),
        ..agentacp::server::ServerOptions::default()
    };
    let listen = ListenOptions::new("127.0.0.1:0".parse().unwrap())
        .tokens(TokenStore::single(Identity::new("alice").unwrap(), TOKEN));
    let listener = Listener::bind(listen).await.unwrap();
    let url = format!("ws://127.0.0.1:{}/acp", listener.local_addr().unwrap().port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listener.serve(Asker, options, async {
        let _ = stopped.await;
    }));
    let mut node = Command::new("node");
    node.arg(ts.join("elicit.mjs"))
        .args([&url, TOKEN])
        .arg(&cwd)
        .args(["form", "url"]);
    let out = tokio::task::spawn_blocking(move || interop::run_script(&mut node, Duration::from_secs(60)))
        .await
        .unwrap();
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(20), server).await;
    assert!(
        out.status.is_some_and(|status| status.success()),
        "node elicit.mjs failed\n--- stdout\n{}--- stderr\n{}",
        out.stdout,
        out.stderr
    );
    let seen: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON line");
    let said: Vec<&str> = seen["said"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let form: Value = serde_json::from_str(said[0].strip_prefix("accept ").expect("the form accepted")).unwrap();
    assert_eq!(form, json!({"strategy": "safe", "port": 8080}));
    assert_eq!(said[1], "accept {}");
    assert_eq!(seen["completed"], json!(["oauth-ts"]));
    let asked = seen["asked"].as_array().unwrap();
    assert_eq!(
        (asked[0]["mode"].as_str(), asked[1]["mode"].as_str()),
        (Some("form"), Some("url"))
    );
    assert_eq!(asked[1]["elicitationId"], "oauth-ts");
    agentacp::audit::verify(sink.contents().as_bytes()).expect("the chain verifies");
    let actions: Vec<String> = (sink.lines().iter())
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["action"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .filter(|action| action.starts_with("elicitation."))
        .collect();
    let expected = ["create", "answer", "create", "answer", "complete"].map(|step| format!("elicitation.{step}"));
    assert_eq!(actions, expected);
}
