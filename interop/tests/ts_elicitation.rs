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

const TOKEN: &str = "ts-elicitation-token-0123456789";

#[path = "common/asker.rs"]
mod asker;
use asker::Asker;

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
    asker::check_form_then_url(&seen, &sink);
}
