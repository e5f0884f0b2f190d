//! Remote ACP from the client's side (issue #17): our [`Client`] dialing a server operator
//! served over WebSocket, with the token on the upgrade or in `authenticate`, or refused; a
//! bridge whose downstream is that remote server; and a bridge served over WebSocket in front
//! of it. Every server runs in process on 127.0.0.1, port 0; every wait is bounded.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentacp::audit::AuditLog;
use agentacp::auth::{Identity, TokenStore};
use agentacp::bridge::BridgeOptions;
use agentacp::bridge::listen::BridgeListener;
use agentacp::client::{AgentCommand, AuthPolicy, Client, ClientError, ClientOptions, Direction, PromptEvent};
use agentacp::prelude::*;
use agentacp::server::MemoryStore;
use agentacp::server::websocket::{ListenOptions, Listener};
use agentacp::websocket::{Dial, TlsFiles, client_config};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(20);

/// The one token the servers accept.
const TOKEN: &str = "secret";

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .expect("finished within its bound")
}

/// Says each word of the prompt back, one message each.
#[acp_operator(manifest = "tests/operators/remote/ACP.md")]
struct Remote;

impl RemoteServer for Remote {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, request: wire::PromptRequest) -> Result<wire::StopReason> {
        let text = match request.prompt.first() {
            Some(wire::ContentBlock::Text(text)) => text.text.clone(),
            _ => String::new(),
        };
        for word in text.split_whitespace() {
            turn.message(word.to_string()).await?;
        }
        Ok(wire::StopReason::EndTurn)
    }

    async fn authenticate(&self, _request: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
        Ok(wire::AuthenticateResponse::default())
    }
}

/// A basic bridge (only `fs.readTextFile` passes); these tests always give it a remote
/// downstream, so its command is never started.
#[acp_operator(manifest = "../tests/ui/pass/bridge/ACP.md")]
struct TestBridge;

impl TestBridgeBridge for TestBridge {
    fn downstream(&self) -> AgentCommand {
        AgentCommand::new("/nonexistent/agent-that-must-not-be-started")
    }
}

/// [`Remote`] served over WebSocket, with tokens (only [`TOKEN`]).
struct Server {
    url: String,
    root: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<agentacp::Result<()>>,
}

impl Server {
    async fn start() -> Server {
        Server::start_with(None).await
    }

    /// With `tls`, served over `wss://` (the URL names `localhost`, the certificate's name).
    async fn start_with(tls: Option<TlsFiles>) -> Server {
        let root = tempfile::tempdir().unwrap();
        let mut listen = ListenOptions::new("127.0.0.1:0".parse().unwrap())
            .tokens(TokenStore::single(Identity::new("alice").unwrap(), TOKEN));
        listen.drain = Duration::from_secs(2);
        let scheme = if tls.is_some() {
            "wss://localhost"
        } else {
            "ws://127.0.0.1"
        };
        listen.tls = tls;
        let listener = Listener::bind(listen).await.unwrap();
        let url = format!("{scheme}:{}/acp", listener.local_addr().unwrap().port());
        let options = ServerOptions {
            workspace_root: Some(root.path().to_path_buf()),
            state_dir: Some(root.path().join(".state")),
            audit: Some(AuditLog::off()),
            store: Some(Arc::new(MemoryStore::default())),
            ..ServerOptions::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(listener.serve(Remote, options, async {
            let _ = stopped.await;
        }));
        Server {
            url,
            root,
            stop: Some(stop),
            task,
        }
    }

    fn root(&self) -> PathBuf {
        self.root.path().canonicalize().unwrap()
    }

    fn client_options(&self) -> ClientOptions {
        ClientOptions::default().with_workspace_root(self.root())
    }

    /// Stops accepting, ends every connection, and waits for the drain; the workspace, kept
    /// for whoever still needs it.
    async fn stop(mut self) -> tempfile::TempDir {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        bounded(&mut self.task).await.unwrap().unwrap();
        self.root
    }
}

/// A prompt's text updates and its stop reason.
async fn prompt(client: &Client, session: &wire::SessionId, text: &str) -> (Vec<String>, wire::StopReason) {
    let mut turn = bounded(client.prompt_text(session, text)).await.unwrap();
    let mut texts = Vec::new();
    loop {
        match bounded(turn.next()).await {
            Some(Ok(PromptEvent::Update(update))) => texts.extend(update.text().map(str::to_string)),
            Some(Ok(PromptEvent::Stop(reason))) => return (texts, reason),
            Some(Ok(other)) => panic!("unexpected event {other:?}"),
            Some(Err(error)) => panic!("the prompt failed: {error}"),
            None => panic!("the prompt ended without a stop reason"),
        }
    }
}

fn rpc_code(error: &ClientError) -> Option<i32> {
    match error {
        ClientError::Rpc { error, .. } => Some(error.code),
        _ => None,
    }
}

// ---- the client over WebSocket ------------------------------------------------------------------

#[tokio::test]
async fn a_client_with_a_token_on_the_upgrade_drives_initialize_session_and_a_streamed_prompt() {
    let server = Server::start().await;
    let tapped: Arc<Mutex<Vec<(Direction, String)>>> = Arc::default();
    let tap = Arc::clone(&tapped);
    let options = server.client_options().with_wire_tap(move |direction, line| {
        tap.lock()
            .unwrap()
            .push((direction, String::from_utf8_lossy(line).to_string()))
    });
    let client = bounded(Client::connect_websocket(Dial::new(&server.url).token(TOKEN), options))
        .await
        .unwrap();
    assert_eq!(client.pid(), None, "a remote agent has no pid");
    assert_eq!(client.workspace_root(), server.root());
    let info = client.initialize_response().agent_info.as_ref().expect("agentInfo");
    assert_eq!(info.name, "remote");
    let session = bounded(client.new_session(&server.root())).await.unwrap();
    let (texts, stop) = prompt(&client, &session, "one two three four").await;
    assert_eq!(texts, ["one", "two", "three", "four"]);
    assert_eq!(stop, wire::StopReason::EndTurn);
    // The session goes on: a second turn over the same connection.
    let (texts, _) = prompt(&client, &session, "again").await;
    assert_eq!(texts, ["again"]);
    {
        let tapped = tapped.lock().unwrap();
        assert!(
            tapped
                .iter()
                .any(|(d, l)| *d == Direction::ToAgent && l.contains("session/prompt"))
        );
        assert!(
            tapped
                .iter()
                .any(|(d, l)| *d == Direction::FromAgent && l.contains("\"three\""))
        );
    }
    assert_eq!(bounded(client.close()).await, None);
    server.stop().await;
}

#[tokio::test]
async fn without_a_token_on_the_upgrade_only_initialize_is_served_until_authenticate_with_the_token() {
    let server = Server::start().await;
    let client = bounded(Client::connect_websocket(
        Dial::new(&server.url),
        server.client_options(),
    ))
    .await
    .unwrap();
    assert!(
        client
            .auth_methods()
            .iter()
            .any(|m| m.id.as_str() == agentacp::auth::BEARER),
        "the server advertises bearer: {:?}",
        client.auth_methods()
    );
    let refused = bounded(client.new_session(&server.root())).await.unwrap_err();
    assert_eq!(rpc_code(&refused), Some(-32000), "{refused}");
    let wrong = bounded(client.authenticate_with_token("not-the-token"))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&wrong), Some(-32000), "{wrong}");
    let still = bounded(client.new_session(&server.root())).await.unwrap_err();
    assert_eq!(rpc_code(&still), Some(-32000), "{still}");
    bounded(client.authenticate_with_token(TOKEN)).await.unwrap();
    let session = bounded(client.new_session(&server.root())).await.unwrap();
    let (texts, _) = prompt(&client, &session, "in").await;
    assert_eq!(texts, ["in"]);
    bounded(client.close()).await;
    server.stop().await;
}

#[tokio::test]
async fn auth_policy_token_authenticates_at_connect() {
    let server = Server::start().await;
    let options = server.client_options().with_auth(AuthPolicy::Token(TOKEN.into()));
    let client = bounded(Client::connect_websocket(Dial::new(&server.url), options))
        .await
        .unwrap();
    let session = bounded(client.new_session(&server.root())).await.unwrap();
    let (texts, _) = prompt(&client, &session, "hi").await;
    assert_eq!(texts, ["hi"]);
    bounded(client.close()).await;
    // A token the server does not accept fails the connect.
    let options = server.client_options().with_auth(AuthPolicy::Token("nope".into()));
    let error = bounded(Client::connect_websocket(Dial::new(&server.url), options))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&error), Some(-32000), "{error}");
    server.stop().await;
}

#[tokio::test]
async fn a_wrong_token_on_the_upgrade_is_a_permission_denied_error_naming_401() {
    let server = Server::start().await;
    let error = bounded(Client::connect_websocket(
        Dial::new(&server.url).token("wrong"),
        server.client_options(),
    ))
    .await
    .unwrap_err();
    match &error {
        ClientError::Spawn(io) => {
            assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied, "{io}");
            assert!(io.to_string().contains("401"), "{io}");
        }
        other => panic!("expected a refused connection, got {other:?}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn a_remote_agent_going_away_fails_requests_saying_the_connection_ended() {
    let server = Server::start().await;
    let client = bounded(Client::connect_websocket(
        Dial::new(&server.url).token(TOKEN),
        server.client_options(),
    ))
    .await
    .unwrap();
    let root = server.root();
    let _workspace = server.stop().await;
    // The next request fails at once (no request timeout), naming the WebSocket.
    let error = bounded(async {
        loop {
            match client.new_session(&root).await {
                Err(error) => break error,
                // The close may still be on its way.
                Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await;
    match &error {
        ClientError::AgentExited { stderr, .. } => {
            assert!(stderr.iter().any(|line| line.contains("WebSocket")), "{error}");
        }
        ClientError::Closed => panic!("the client did not close: {error}"),
        other => panic!("expected the agent gone, got {other:?}"),
    }
    bounded(client.close()).await;
}

// ---- wss:// ------------------------------------------------------------------------------------

/// A self-signed certificate for `localhost`, written as PEM files into `dir`; its DER form is
/// what a client that trusts it adds to its roots.
fn self_signed(dir: &std::path::Path) -> (TlsFiles, rustls::pki_types::CertificateDer<'static>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let files = TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&files.cert, certified.cert.pem()).unwrap();
    std::fs::write(&files.key, certified.signing_key.serialize_pem()).unwrap();
    (files, certified.cert.der().clone())
}

#[tokio::test]
async fn over_wss_a_client_that_trusts_the_certificate_drives_a_streamed_prompt() {
    let certs = tempfile::tempdir().unwrap();
    let (files, cert) = self_signed(certs.path());
    let server = Server::start_with(Some(files)).await;
    assert!(server.url.starts_with("wss://localhost:"), "{}", server.url);
    let mut dial = Dial::new(&server.url).token(TOKEN);
    dial.tls = Some(client_config(&[cert]).unwrap());
    let client = bounded(Client::connect_websocket(dial, server.client_options()))
        .await
        .unwrap();
    let session = bounded(client.new_session(&server.root())).await.unwrap();
    let (texts, stop) = prompt(&client, &session, "over tls").await;
    assert_eq!(texts, ["over", "tls"]);
    assert_eq!(stop, wire::StopReason::EndTurn);
    assert_eq!(bounded(client.close()).await, None);
    server.stop().await;
}

#[tokio::test]
async fn over_wss_an_untrusted_certificate_or_a_plain_ws_client_is_refused_and_the_server_stays_up() {
    let certs = tempfile::tempdir().unwrap();
    let (files, cert) = self_signed(certs.path());
    let server = Server::start_with(Some(files)).await;
    // The webpki roots alone do not trust a self-signed certificate.
    let error = bounded(Client::connect_websocket(
        Dial::new(&server.url).token(TOKEN),
        server.client_options(),
    ))
    .await
    .unwrap_err();
    match &error {
        ClientError::Spawn(io) => assert!(io.to_string().to_lowercase().contains("certificate"), "{io}"),
        other => panic!("expected a refused connection, got {other:?}"),
    }
    // Plain ws:// to a TLS listener: the upgrade cannot succeed.
    let plain = server.url.replace("wss://", "ws://");
    let error = bounded(Client::connect_websocket(
        Dial::new(&plain).token(TOKEN),
        server.client_options(),
    ))
    .await
    .unwrap_err();
    assert!(matches!(error, ClientError::Spawn(_)), "{error:?}");
    // The listener still serves a client that trusts it.
    let mut dial = Dial::new(&server.url).token(TOKEN);
    dial.tls = Some(client_config(&[cert]).unwrap());
    let client = bounded(Client::connect_websocket(dial, server.client_options()))
        .await
        .unwrap();
    let session = bounded(client.new_session(&server.root())).await.unwrap();
    assert_eq!(prompt(&client, &session, "still").await.0, ["still"]);
    bounded(client.close()).await;
    server.stop().await;
}

#[tokio::test]
async fn a_listener_refuses_to_start_with_a_certificate_file_that_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles {
        cert: dir.path().join("cert.pem"),
        key: dir.path().join("key.pem"),
    };
    std::fs::write(&files.cert, "not a certificate\n").unwrap();
    std::fs::write(&files.key, "not a key\n").unwrap();
    let mut listen = ListenOptions::new("127.0.0.1:0".parse().unwrap())
        .tokens(TokenStore::single(Identity::new("alice").unwrap(), TOKEN));
    listen.tls = Some(files);
    let error = Listener::bind(listen)
        .await
        .err()
        .expect("a bad certificate is refused");
    let message = error.to_string();
    assert!(message.contains("key.pem") || message.contains("cert.pem"), "{message}");
}

// ---- bridges ------------------------------------------------------------------------------------

/// Raw JSON-RPC lines to and from a bridge run over in-memory pipes (the editor's stdio).
struct Editor {
    writer: tokio::io::DuplexStream,
    lines: tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
}

impl Editor {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        bounded(self.writer.write_all(&line)).await.unwrap();
    }

    /// The messages up to and including the answer to `id`.
    async fn until_answer(&mut self, id: i64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let line = bounded(self.lines.next_line())
                .await
                .unwrap()
                .expect("the bridge answered before closing");
            let message: Value = serde_json::from_str(&line).unwrap();
            let done = message.get("id") == Some(&json!(id)) && message.get("method").is_none();
            seen.push(message);
            if done {
                return seen;
            }
        }
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": wire::PROTOCOL_VERSION, "clientCapabilities": {},
        "clientInfo": {"name": "test-editor", "version": "0"}}})
}

#[tokio::test]
async fn a_bridge_with_a_remote_downstream_relays_a_prompt_round_trip() {
    let server = Server::start().await;
    let options = BridgeOptions {
        audit: Some(AuditLog::off()),
        ..BridgeOptions::default()
    }
    .connect(Dial::new(&server.url).token(TOKEN));
    let (writer, bridge_in) = tokio::io::duplex(1 << 16);
    let (bridge_out, reader) = tokio::io::duplex(1 << 16);
    let bridge = tokio::spawn(agentacp::bridge::bridge(TestBridge, options, bridge_in, bridge_out));
    let mut editor = Editor {
        writer,
        lines: BufReader::new(reader).lines(),
    };
    editor.send(initialize()).await;
    let init = editor.until_answer(1).await;
    let init = init.last().unwrap();
    // The bridge answers as itself, naming the remote agent it relays to.
    assert_eq!(init["result"]["agentInfo"]["name"], "test-bridge", "{init}");
    assert_eq!(
        init["result"]["_meta"]["aip44"]["downstream"]["name"], "remote",
        "{init}"
    );
    let cwd = server.root().to_string_lossy().to_string();
    editor
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}))
        .await;
    let created = editor.until_answer(2).await;
    let session = created.last().unwrap()["result"]["sessionId"].clone();
    assert!(session.is_string(), "{created:?}");
    editor
        .send(
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": "over the bridge"}]}}),
        )
        .await;
    let turn = editor.until_answer(3).await;
    let texts: Vec<&str> = turn
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(texts, ["over", "the", "bridge"], "{turn:?}");
    assert_eq!(turn.last().unwrap()["result"]["stopReason"], "end_turn");
    // The editor closes its side: the bridge closes the connection and returns Ok.
    drop(editor);
    bounded(bridge).await.unwrap().unwrap();
    server.stop().await;
}

/// A bridge listening over WebSocket (tokens: only `bridge-token`) in front of the remote
/// server; its shutdown sender and task.
/// A bridge listening on WebSocket in front of `server`; the tokens `bridge-token` (identity
/// `editor`) and `other-token` (identity `other-editor`) are accepted on the upgrade.
async fn bridge_listener(
    server: &Server,
    audit: AuditLog,
) -> (String, oneshot::Sender<()>, JoinHandle<agentacp::Result<()>>) {
    // In the server's folder, which outlives the bridge (the store re-reads the file).
    let tokens = server.root.path().join("bridge-tokens");
    std::fs::write(
        &tokens,
        format!(
            "editor {}\nother-editor {}\n",
            agentacp::auth::hash_token("bridge-token"),
            agentacp::auth::hash_token("other-token")
        ),
    )
    .unwrap();
    let listen = ListenOptions::new("127.0.0.1:0".parse().unwrap()).tokens(TokenStore::from_file(&tokens).unwrap());
    let listener = BridgeListener::bind(listen).await.unwrap();
    let url = format!("ws://{}/acp", listener.local_addr().unwrap());
    let options = BridgeOptions {
        audit: Some(audit),
        ..BridgeOptions::default()
    }
    .connect(Dial::new(&server.url).token(TOKEN));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(listener.serve(TestBridge, options, async {
        let _ = stopped.await;
    }));
    (url, stop, task)
}

#[tokio::test]
async fn a_bridge_served_over_websocket_relays_each_connection_to_its_own_downstream() {
    let server = Server::start().await;
    let audit_dir = tempfile::tempdir().unwrap();
    let audit_path = audit_dir.path().join("bridge.jsonl");
    let audit = AuditLog::open(&audit_path, agentacp::audit::FsyncPolicy::Never).unwrap();
    let (url, stop, task) = bridge_listener(&server, audit).await;
    let connect = |token: &str| Client::connect_websocket(Dial::new(&url).token(token), server.client_options());
    let first = bounded(connect("bridge-token")).await.unwrap();
    let second = bounded(connect("other-token")).await.unwrap();
    for (client, word) in [(&first, "first"), (&second, "second")] {
        let session = bounded(client.new_session(&server.root())).await.unwrap();
        let (texts, stop) = prompt(client, &session, word).await;
        assert_eq!(texts, [word]);
        assert_eq!(stop, wire::StopReason::EndTurn);
    }
    bounded(first.close()).await;
    bounded(second.close()).await;
    let _ = stop.send(());
    bounded(task).await.unwrap().unwrap();
    server.stop().await;
    // The bridge's audit log verifies, and each record names the editor it was made for.
    agentacp::audit::verify_file(&audit_path).expect("the bridge's audit log verifies");
    let records: Vec<Value> = std::fs::read_to_string(&audit_path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let identities: std::collections::BTreeSet<&str> = records
        .iter()
        .map(|record| record["metadata"]["aip44"]["identity"].as_str().unwrap_or("<none>"))
        .collect();
    assert_eq!(
        identities,
        ["editor", "other-editor"].into_iter().collect(),
        "{records:#?}"
    );
}

#[tokio::test]
async fn a_bridge_served_over_websocket_refuses_connections_without_a_valid_token_on_the_upgrade() {
    let server = Server::start().await;
    let (url, stop, task) = bridge_listener(&server, AuditLog::off()).await;
    // No token, or a wrong one: the bridge has no `authenticate`, so both are refused `401`
    // at the upgrade.
    for dial in [Dial::new(&url), Dial::new(&url).token("wrong")] {
        let error = bounded(Client::connect_websocket(dial, server.client_options()))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ClientError::Spawn(io) if io.kind() == std::io::ErrorKind::PermissionDenied && io.to_string().contains("401")),
            "{error:?}"
        );
    }
    let _ = stop.send(());
    bounded(task).await.unwrap().unwrap();
    server.stop().await;
}

/// `other-editor` connected to a bridge served over WebSocket, whose audit goes to a file.
struct OtherEditor {
    server: Server,
    client: Client,
    audit_path: std::path::PathBuf,
    stop: oneshot::Sender<()>,
    task: JoinHandle<agentacp::Result<()>>,
    _audit_dir: tempfile::TempDir,
}

impl OtherEditor {
    async fn connect() -> OtherEditor {
        let server = Server::start().await;
        let audit_dir = tempfile::tempdir().unwrap();
        let audit_path = audit_dir.path().join("bridge.jsonl");
        let audit = AuditLog::open(&audit_path, agentacp::audit::FsyncPolicy::Never).unwrap();
        let (url, stop, task) = bridge_listener(&server, audit).await;
        let client = bounded(Client::connect_websocket(
            Dial::new(&url).token("other-token"),
            server.client_options(),
        ))
        .await
        .unwrap();
        OtherEditor {
            server,
            client,
            audit_path,
            stop,
            task,
            _audit_dir: audit_dir,
        }
    }

    /// Removes `other-editor`'s line from the bridge's token file (the store re-reads it at
    /// its next check).
    fn revoke(&self) {
        let editor_only = format!("editor {}\n", agentacp::auth::hash_token("bridge-token"));
        std::fs::write(self.server.root.path().join("bridge-tokens"), editor_only).unwrap();
    }

    /// The `auth.revoked` records so far.
    fn revocations(&self) -> Vec<Value> {
        revocations(&self.audit_path)
    }

    async fn assert_refused(&self) {
        let refused = bounded(self.client.new_session(&self.server.root())).await;
        assert!(refused.is_err(), "served after its token was revoked: {refused:?}");
    }

    /// Closes everything; the `auth.revoked` records of the log, which verifies.
    async fn end(self) -> Vec<Value> {
        bounded(self.client.close()).await;
        let _ = self.stop.send(());
        bounded(self.task).await.unwrap().unwrap();
        self.server.stop().await;
        agentacp::audit::verify_file(&self.audit_path).expect("the bridge's audit log verifies");
        revocations(&self.audit_path)
    }
}

/// The `auth.revoked` records of an audit file.
fn revocations(audit_path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(audit_path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| record["action"] == "auth.revoked")
        .collect()
}

/// Review of #18: a bridge checked the token only at the upgrade, so a connection opened with
/// a token that was later revoked went on being served for as long as it stayed open. Now
/// the editor's next message ends it, audited `auth.revoked`.
#[tokio::test]
async fn a_revoked_token_ends_the_bridged_connection_it_opened() {
    let editor = OtherEditor::connect().await;
    let session = bounded(editor.client.new_session(&editor.server.root())).await.unwrap();
    let (texts, _) = prompt(&editor.client, &session, "before").await;
    assert_eq!(texts, ["before"]);
    editor.revoke();
    editor.assert_refused().await;
    let revoked = editor.end().await;
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0]["actor"]["id"], "other-editor", "{revoked:?}");
}

/// Review of #18 (session 25): the token of a bridged connection was checked only when the
/// editor sent something, so a quiet editor (one watching a long turn) went on being served.
/// It is checked every 2 s as well: the connection ends, audited, without the editor sending
/// anything.
#[tokio::test]
async fn a_revoked_token_ends_a_quiet_bridged_connection() {
    let editor = OtherEditor::connect().await;
    bounded(editor.client.new_session(&editor.server.root())).await.unwrap();
    editor.revoke();
    bounded(async {
        while editor.revocations().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    editor.assert_refused().await;
    assert_eq!(editor.end().await.len(), 1);
}

#[tokio::test]
async fn close_closes_the_connection_at_once() {
    let server = Server::start().await;
    let options = ClientOptions {
        // The most `close` waits for the connection to end: far over what closing takes.
        exit_grace: Duration::from_secs(15),
        ..server.client_options()
    };
    let client = bounded(Client::connect_websocket(Dial::new(&server.url).token(TOKEN), options))
        .await
        .unwrap();
    let session = bounded(client.new_session(&server.root())).await.unwrap();
    let (texts, _) = prompt(&client, &session, "bye").await;
    assert_eq!(texts, ["bye"]);
    let started = std::time::Instant::now();
    assert_eq!(bounded(client.close()).await, None);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "close waited {:?}: the connection did not end when our side closed",
        started.elapsed()
    );
    server.stop().await;
}
