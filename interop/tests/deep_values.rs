//! Issue #44: values nested deeper than JSON readers read (serde_json stops at 128 levels),
//! from an authenticated WebSocket client's tool arguments and from a hostile MCP server's
//! `structuredContent`: the audit log still verifies, any JSON reader reads every record, and
//! the server starts again on the log and appends to it. Every wait is bounded.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentacp::audit::{DEEP_JSON_KEY, verify_file};
use agentacp::client::{AgentCommand, Client, ClientOptions, PermissionDecision, PromptEvent};
use agentacp::websocket::Dial;
use agentacp::wire::default as wire;
use interop::audit::audit_records;
use interop::websocket::{WsServer, test_token};
use interop::{AgentDirs, example_binary};
use serde_json::{Value, json};

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(60);

/// How deep the values nest: around serde_json's limit, and far past it.
const DEPTHS: [usize; 10] = [100, 120, 123, 124, 125, 126, 127, 128, 1_000, 100_000];

/// The bound on one MCP call's turn, far below the MCP call timeout (two minutes) that an
/// answer rmcp drops unread would wait out.
const MCP_WAIT: Duration = Duration::from_secs(30);

/// The deepest `structuredContent` whose answer the runtime's MCP client reads (the answer nests
/// two levels more, and readers stop at 128): a deeper answer fails its call at once.
const MCP_READABLE: usize = 125;

/// `{"path":[[…"x"…]]}`, an object nesting `levels` levels.
fn nested(levels: usize) -> String {
    let (open, close) = ("[".repeat(levels - 1), "]".repeat(levels - 1));
    format!(r#"{{"path":{open}"x"{close}}}"#)
}

/// Runs the prompt `text` to its end (bounded); whatever the turn says, it must end.
async fn run_turn(client: &Client, session: &wire::SessionId, text: &str) {
    run_turn_within(client, session, text, WAIT).await;
}

/// Runs the prompt `text` to its end, each wait bounded by `bound`.
async fn run_turn_within(client: &Client, session: &wire::SessionId, text: &str, bound: Duration) {
    let mut turn = tokio::time::timeout(bound, client.prompt_text(session, text))
        .await
        .expect("prompted in time")
        .expect("prompted");
    loop {
        let next = tokio::time::timeout(bound, turn.next()).await;
        match next.unwrap_or_else(|_| panic!("`{}`: no event within {bound:?}", interop::shorten(text, 80))) {
            Some(Ok(PromptEvent::Stop(_))) | None => return,
            Some(Ok(_)) => {}
            Some(Err(error)) => panic!("the turn failed: {error}"),
        }
    }
}

/// The log verifies, every record reads with serde_json's default limit, and it holds more
/// records than `before`; returns how many it holds.
fn check_log(log: &Path, before: u64) -> u64 {
    let summary = verify_file(log).unwrap_or_else(|e| panic!("the chain verifies: {e}"));
    for record in audit_records(log) {
        let depth_ok = serde_json::from_str::<Value>(&record.to_string()).is_ok();
        assert!(depth_ok, "any JSON reader reads the record");
    }
    assert!(summary.records > before, "records were appended");
    summary.records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_tool_arguments_from_an_authenticated_websocket_client_keep_the_log_verifiable() {
    const IDENTITY: &str = "deep-tester";
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let token = test_token();
    let mut env = dirs.env();
    env.push(("AGENTACP_TOKEN", token.clone().into()));
    env.push(("AGENTACP_TOKEN_IDENTITY", IDENTITY.into()));
    let mut records = 0;
    for _run in 0..2 {
        let mut server = WsServer::start(&example_binary("governed-server"), &env);
        let options = ClientOptions::default().with_workspace_root(dirs.workspace_root.clone());
        let dial = Dial::new(server.url()).token(token.clone());
        let client = tokio::time::timeout(WAIT, Client::connect_websocket(dial, options))
            .await
            .expect("connected in time")
            .expect("connected");
        let session = tokio::time::timeout(WAIT, client.new_session(&project))
            .await
            .unwrap()
            .unwrap();
        for levels in DEPTHS {
            run_turn(&client, &session, &format!("/tool delete-repo {}", nested(levels))).await;
        }
        tokio::time::timeout(WAIT, client.close())
            .await
            .expect("closed in time");
        server.terminate();
        let status = server.wait_exit(WAIT).expect("the server exits");
        assert!(status.success(), "{status:?}:\n{}", server.stderr_text());
        records = check_log(&dirs.audit_log, records);
    }
    let denied: Vec<Value> = audit_records(&dirs.audit_log)
        .into_iter()
        .filter(|r| r["action"] == "tool.call")
        .collect();
    assert_eq!(denied.len(), 2 * DEPTHS.len());
    for record in denied {
        assert_eq!(record["metadata"]["aip44"]["identity"], IDENTITY, "{record}");
        assert_eq!(record["metadata"]["aip44"]["approval"]["deniedBy"], "governance");
    }
}

/// A hostile MCP server (Python): one tool, `echo`, whose `structuredContent` nests as many
/// levels as its argument `levels` says, written as text.
const HOSTILE_MCP: &str = r#"
import json, sys
def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    if id is None:
        continue
    if method == "initialize":
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": msg["params"]["protocolVersion"],
             "capabilities": {"tools": {}}, "serverInfo": {"name": "hostile", "version": "1"}}}))
    elif method == "tools/list":
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}}))
    elif method == "tools/call":
        n = int(msg["params"]["arguments"]["levels"])
        deep = '{"path":' + "[" * (n - 1) + '"x"' + "]" * (n - 1) + "}"
        send('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"deep"}],"structuredContent":%s}}' % (json.dumps(id), deep))
    else:
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {}}))
"#;

/// The hostile MCP server over streamable HTTP (Python's `http.server`): it prints its URL,
/// then answers each request with one server-sent event (the same answers as [`HOSTILE_MCP`])
/// and keeps the stream open, as a server with more to say would.
const HOSTILE_HTTP_MCP: &str = r#"
import http.server, json, sys, threading
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_GET(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_DELETE = do_GET
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method, id = msg.get("method"), msg.get("id")
        if id is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "initialize":
            answer = json.dumps({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "hostile", "version": "1"}}})
        elif method == "tools/list":
            answer = json.dumps({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call":
            n = int(msg["params"]["arguments"]["levels"])
            deep = '{"path":' + "[" * (n - 1) + '"x"' + "]" * (n - 1) + "}"
            answer = '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"deep"}],"structuredContent":%s}}' % (json.dumps(id), deep)
        else:
            answer = json.dumps({"jsonrpc": "2.0", "id": id, "result": {}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(("event: message\ndata: " + answer + "\n\n").encode())
        self.wfile.flush()
        if method == "tools/call":
            threading.Event().wait(600)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print("http://127.0.0.1:%d/mcp" % server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A system Python interpreter, which the sandbox the example runs its MCP servers in can
/// reach (a per-user install under the home folder is hidden from it).
fn system_python() -> Option<PathBuf> {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_mcp_servers_deep_structured_content_keeps_the_log_verifiable() {
    let Some(python) = system_python() else {
        eprintln!("skipped: no system python3 for the hostile MCP server");
        return;
    };
    let dirs = AgentDirs::new();
    let script = dirs.workspace_root.join("hostile_mcp.py");
    std::fs::write(&script, HOSTILE_MCP).unwrap();
    let servers = json!([{"name": "notes", "command": python, "args": [script], "env": []}]);
    deep_answers_fail_at_once_and_the_log_verifies(&dirs, servers).await;
}

/// The same hostile server over streamable HTTP, its answer to a call sent as a server-sent
/// event: an answer too deep for rmcp fails its call at once, as over stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_http_mcp_servers_deep_structured_content_fails_its_call_at_once() {
    use tokio::io::AsyncBufReadExt;
    let Some(python) = system_python() else {
        eprintln!("skipped: no system python3 for the hostile MCP server");
        return;
    };
    let dirs = AgentDirs::new();
    let script = dirs.workspace_root.join("hostile_http_mcp.py");
    std::fs::write(&script, HOSTILE_HTTP_MCP).unwrap();
    let mut server = tokio::process::Command::new(python)
        .arg(&script)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the hostile HTTP MCP server");
    let mut url = String::new();
    let stdout = server.stdout.take().expect("its stdout");
    tokio::time::timeout(WAIT, tokio::io::BufReader::new(stdout).read_line(&mut url))
        .await
        .expect("its URL in time")
        .expect("its URL");
    let servers = json!([{"type": "http", "name": "notes", "url": url.trim(), "headers": []}]);
    deep_answers_fail_at_once_and_the_log_verifies(&dirs, servers).await;
}

/// Runs the sandboxed example twice on one log with the hostile MCP server `servers` names
/// (`notes`), calling its `echo` at each of [`DEPTHS`], each turn bounded by [`MCP_WAIT`]: the
/// log verifies, and each call is recorded with its result or the error that it nests too deep.
async fn deep_answers_fail_at_once_and_the_log_verifies(dirs: &AgentDirs, servers: Value) {
    let project = dirs.project("p");
    let mut records = 0;
    for _run in 0..2 {
        let mut command = AgentCommand::new(example_binary("sandboxed-server"));
        for (key, value) in dirs.env() {
            command = command.env(key, value);
        }
        let options = ClientOptions::default()
            .with_workspace_root(dirs.workspace_root.clone())
            .with_permission(|_: wire::RequestPermissionRequest| async { PermissionDecision::Approve });
        let client = tokio::time::timeout(WAIT, Client::connect(command, options))
            .await
            .expect("started in time")
            .expect("started");
        let session = tokio::time::timeout(WAIT, client.new_session_with_mcp_servers(&project, servers.clone()))
            .await
            .expect("session/new answered in time")
            .expect("session/new accepted");
        for levels in DEPTHS {
            run_turn_within(
                &client,
                &session,
                &format!(r#"/mcp call notes echo {{"levels":{levels}}}"#),
                MCP_WAIT,
            )
            .await;
        }
        let status = tokio::time::timeout(WAIT, client.close())
            .await
            .expect("closed in time");
        assert!(status.is_some_and(|s| s.success()), "{status:?}");
        records = check_log(&dirs.audit_log, records);
    }
    // Every call is recorded: with its result, all of it (deep parts kept as JSON text), or,
    // where the answer nests too deep to be read, with the error that says so.
    let outputs: Vec<Value> = audit_records(&dirs.audit_log)
        .into_iter()
        .filter(|r| r["action"] == "tool.call")
        .map(|r| r["output"].clone())
        .collect();
    assert_eq!(outputs.len(), 2 * DEPTHS.len(), "{outputs:?}");
    for (output, &levels) in outputs.iter().zip(DEPTHS.iter().chain(&DEPTHS)) {
        let text = output.to_string();
        if levels <= MCP_READABLE {
            assert!(
                text.contains(r#"\"x\""#) && text.contains(DEEP_JSON_KEY),
                "{levels}: {text}"
            );
        } else {
            let error = output["error"].as_str().unwrap_or_default();
            assert!(error.contains("answer nests too deep"), "{levels}: {text}");
        }
    }
}
