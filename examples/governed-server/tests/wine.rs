//! Issue #50: `governed-server --listen` built for Windows (`x86_64-pc-windows-gnu`) and run
//! under Wine, a bearer token in a token file (docs/remote.md), driven from Linux over
//! WebSocket and Streamable HTTP on its one endpoint: a wrong token refused, `initialize`,
//! `session/new` in a `Z:\…` folder, a prompt answered with streamed updates, a governed
//! `write-file` inside the workspace (approved when asked), then Ctrl-C while a turn streams
//! (SIGINT, which Wine delivers as `CTRL_C_EVENT`): the turn cancelled, exit code 0.
//!
//! The WebSocket side is a plain JSON-RPC peer over tokio-tungstenite, as
//! `agentacp/tests/websocket.rs`: our `Client` confines a session's `cwd` to its own (Linux)
//! workspace root, and a Windows server's `cwd` is a Windows path (`Z:\…`), which no Linux
//! folder is. The Streamable HTTP side is our `Client` (`connect_http`), which needs no `cwd`
//! to connect. The harness (`test_support::wine`) builds into `target/windows` and skips
//! without Wine, mingw-w64 or the rustup target (failing under `AGENTACP_REQUIRE_PEERS`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use agentacp::client::{Client, ClientOptions};
use agentacp::websocket::Dial;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use test_support::wine::{self, Wine};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The bound on every wait (a Windows process under Wine starts in seconds).
const WAIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "wine-listener-token-0123456789abcdef";
const IDENTITY: &str = "linux-editor";

/// The Windows server under Wine, listening on a loopback port.
struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
    stderr: Arc<Mutex<Vec<String>>>,
    _folders: tempfile::TempDir,
    /// The temporary folder (canonical).
    base: PathBuf,
}

impl Server {
    /// Starts `governed-server.exe --listen 127.0.0.1:0` with a token file naming [`IDENTITY`],
    /// its workspace root, state folder and audit log in a temporary folder.
    fn start(wine: &Wine, exe: &Path) -> Server {
        let folders = tempfile::tempdir().unwrap();
        let base = folders.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("workspace/p")).unwrap();
        let tokens = base.join("tokens");
        std::fs::write(&tokens, format!("{IDENTITY} {}\n", acp_tokens::hash_token(TOKEN))).unwrap();
        let mut child = wine
            .command(exe)
            .args(["--listen", "127.0.0.1:0"])
            .current_dir(&base)
            .env_remove("RUST_LOG")
            .env_remove("AGENTACP_TOKEN")
            .env_remove("AGENTACP_DATABASE_URL")
            .env("AGENTACP_LOG", "info")
            .env("AGENTACP_TOKENS_FILE", wine::windows_path(&tokens))
            .env("AGENTACP_WORKSPACE_ROOT", wine::windows_path(&base.join("workspace")))
            .env("AGENTACP_STATE_DIR", wine::windows_path(&base.join("state")))
            .env("AGENTACP_AUDIT_LOG", wine::windows_path(&base.join("audit.jsonl")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("wine starts");
        let (tx, rx) = mpsc::channel();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (output, kept) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("governed-server: listening on ws://") {
                    let _ = tx.send(addr.trim_end_matches("/acp").to_string());
                }
                kept.lock().unwrap().push(line);
            }
        });
        let addr = rx.recv_timeout(WAIT).unwrap_or_else(|_| {
            panic!(
                "the server did not say where it listens:\n{}",
                wine::quiet(&stderr.lock().unwrap().join("\n"))
            )
        });
        Server {
            child,
            addr,
            stderr,
            _folders: folders,
            base,
        }
    }

    /// What it wrote on stderr so far, without Wine's own lines.
    fn stderr_text(&self) -> String {
        wine::quiet(&self.stderr.lock().unwrap().join("\n"))
    }

    /// Sends SIGINT to the Wine process: Wine delivers it to the Windows program as
    /// `CTRL_C_EVENT` (SIGTERM it does not translate: the process is simply killed).
    fn interrupt(&self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -INT {}", self.child.id());
    }

    /// Waits (bounded) for the process to end.
    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running {WAIT:?} after Ctrl-C:\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A JSON-RPC peer over a WebSocket connection.
struct Peer {
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    next_id: i64,
}

impl Peer {
    /// Opens `ws://ADDR/acp`, showing `token` on the upgrade when given.
    async fn connect(addr: &str, token: Option<&str>) -> Result<Peer, tokio_tungstenite::tungstenite::Error> {
        let mut request = format!("ws://{addr}/acp").into_client_request().unwrap();
        if let Some(token) = token {
            let value = format!("Bearer {token}").parse().unwrap();
            request.headers_mut().insert("authorization", value);
        }
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
            .await
            .expect("the upgrade was answered in time")?;
        Ok(Peer { ws, next_id: 0 })
    }

    async fn send(&mut self, message: Value) {
        self.ws.send(Message::text(message.to_string())).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        loop {
            match tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("the server sent in time")
            {
                Some(Ok(Message::Text(text))) => return serde_json::from_str(&text).unwrap(),
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => panic!("the connection ended"),
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Sends a request; returns what came before its answer, and the answer
    /// ([`until_answer`](Peer::until_answer)).
    async fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.request(method, params).await;
        self.until_answer(id).await
    }

    /// Sends a request; its id.
    async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// What comes before the answer to request `id`, and the answer; a permission question on
    /// the way is answered with its first `allow_once` option.
    async fn until_answer(&mut self, id: i64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                return (before, message);
            }
            if message["method"] == "session/request_permission" {
                let options = message["params"]["options"].as_array().cloned().unwrap_or_default();
                let allow = options
                    .iter()
                    .find(|option| option["kind"] == "allow_once")
                    .unwrap_or_else(|| panic!("no allow_once option: {message}"));
                let outcome = json!({"outcome": "selected", "optionId": allow["optionId"]});
                self.send(json!({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}}))
                    .await;
            }
            before.push(message);
        }
    }

    /// A prompt of one text block; the texts of the agent's message chunks, and the answer.
    async fn prompt(&mut self, session: &Value, text: &str) -> (Vec<Value>, Vec<String>, Value) {
        let prompt = json!([{"type": "text", "text": text}]);
        let (before, answer) = self
            .call("session/prompt", json!({"sessionId": session, "prompt": prompt}))
            .await;
        let said = before
            .iter()
            .filter(|message| message["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|message| message["params"]["update"]["content"]["text"].as_str())
            .map(str::to_string)
            .collect();
        (before, said, answer)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_windows_build_serves_websocket_and_streamable_http_with_a_token_under_wine() {
    let Some(wine) = Wine::start() else { return };
    let exe = wine::build_for_windows("governed-server", None);
    let mut server = Server::start(&wine, &exe);
    let addr = server.addr.clone();

    // A wrong token: refused on the upgrade. None: admitted, but no session before
    // `authenticate`.
    match Peer::connect(&addr, Some("not-the-token")).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
        Err(other) => panic!("a wrong token is refused otherwise: {other}"),
        Ok(_) => panic!("a wrong token is admitted"),
    }
    let mut anonymous = Peer::connect(&addr, None).await.expect("the upgrade without a token");
    anonymous.call("initialize", json!({"protocolVersion": 1})).await;
    let cwd = wine::windows_path(&server.base.join("workspace/p"));
    let (_, refused) = anonymous
        .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    assert!(refused["error"].is_object(), "no session without a token: {refused}");
    drop(anonymous);

    // WebSocket: a session, a streamed prompt, a governed write inside the workspace.
    let mut peer = Peer::connect(&addr, Some(TOKEN)).await.expect("the token admits");
    let (_, initialized) = peer.call("initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(
        initialized["result"]["agentInfo"]["name"], "governed-server",
        "{initialized}"
    );
    assert_eq!(initialized["result"]["authMethods"][0]["id"], "bearer", "{initialized}");
    let (_, created) = peer.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    let session = created["result"]["sessionId"].clone();
    assert!(session.is_string(), "{created}");

    let (_, said, answer) = peer.prompt(&session, "/stream 3 16").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(said.len(), 3, "three streamed updates: {said:?}");

    let write = r#"/tool write-file {"path": "notes.txt", "content": "written on Windows"}"#;
    let (before, said, answer) = peer.prompt(&session, write).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        before
            .iter()
            .any(|message| message["method"] == "session/request_permission"),
        "governance asked before the write: {before:?}"
    );
    assert_eq!(said, ["completed: {\"written\":18}"], "{before:?}");
    let written = server.base.join("workspace/p/notes.txt");
    assert_eq!(
        std::fs::read_to_string(&written).unwrap_or_else(|e| panic!("{}: {e}", written.display())),
        "written on Windows"
    );

    // Streamable HTTP on the same endpoint, through our client: a wrong token is refused, the
    // right one admitted.
    let http = format!("http://{addr}/acp");
    let refused = tokio::time::timeout(
        WAIT,
        Client::connect_http(Dial::new(http.clone()).token("not-the-token"), ClientOptions::default()),
    )
    .await
    .expect("refused in time");
    let Err(refused) = refused else {
        panic!("a wrong token is admitted over Streamable HTTP")
    };
    assert!(refused.to_string().contains("401"), "{refused}");
    let client = tokio::time::timeout(
        WAIT,
        Client::connect_http(Dial::new(http).token(TOKEN), ClientOptions::default()),
    )
    .await
    .expect("admitted in time")
    .unwrap_or_else(|e| panic!("{e}\n{}", server.stderr_text()));
    let info = client.initialize_response().agent_info.clone().expect("agentInfo");
    assert_eq!(info.name, "governed-server");
    drop(client);

    // Ctrl-C (SIGINT, which Wine turns into `CTRL_C_EVENT`) while a turn streams: the turn is
    // answered `cancelled`, the server drains and exits 0, as on Linux after SIGTERM.
    let prompt = json!([{"type": "text", "text": "/forever"}]);
    let forever = peer
        .request("session/prompt", json!({"sessionId": session, "prompt": prompt}))
        .await;
    let first = peer.next().await;
    assert_eq!(first["method"], "session/update", "the turn streams: {first}");
    server.interrupt();
    let (_, answer) = peer.until_answer(forever).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    drop(peer);
    let status = server.wait_exit();
    let stderr = server.stderr_text();
    assert!(status.success(), "exit status {status}; stderr:\n{stderr}");
    assert!(stderr.contains("draining"), "the runtime saw Ctrl-C:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // The audit log the Windows program wrote verifies here; its records name the identity.
    let log = server.base.join("audit.jsonl");
    let summary = acp_audit::verify_file(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    assert!(summary.records >= 3, "{summary:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("write-file"), "the tool call is audited:\n{text}");
    assert!(text.contains(IDENTITY), "records name the token's identity:\n{text}");
}
