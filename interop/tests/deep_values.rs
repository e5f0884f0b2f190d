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
/// and keeps the stream open, as a server with more to say would. A call's arguments may ask
/// for more: `"as": "json"` answers it as an `application/json` body instead (no length given,
/// the connection closed after it), and `"bytes": n` answers with a text of `n` bytes instead
/// of a deep value (`-1`: a text that never ends, sent until the client hangs up).
const HOSTILE_HTTP_MCP: &str = r#"
import http.server, json, sys, threading
CHUNK = b"x" * 65536
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
        args = msg.get("params", {}).get("arguments", {}) if method == "tools/call" else {}
        size = args.get("bytes")
        if method == "initialize":
            answer = json.dumps({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "hostile", "version": "1"}}})
        elif method == "tools/list":
            answer = json.dumps({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call" and size is not None:
            answer = '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' % json.dumps(id)
        elif method == "tools/call":
            n = int(args["levels"])
            deep = '{"path":' + "[" * (n - 1) + '"x"' + "]" * (n - 1) + "}"
            answer = '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"deep"}],"structuredContent":%s}}' % (json.dumps(id), deep)
        else:
            answer = json.dumps({"jsonrpc": "2.0", "id": id, "result": {}})
        as_json = args.get("as") == "json"
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if as_json else "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            self.wfile.write((answer if as_json else "event: message\ndata: " + answer).encode())
            if size is not None:
                while size < 0:
                    self.wfile.write(CHUNK)
                self.wfile.write(b"x" * size + b'"}]}}')
            if not as_json:
                self.wfile.write(b"\n\n")
            self.wfile.flush()
        except OSError:
            return
        if method == "tools/call" and not as_json:
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

/// What the record of one call of the hostile server's `echo` must hold.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// Its result, all of it (deep parts kept as JSON text).
    Read,
    /// The error that says its answer was not read, with these words.
    Fails(&'static str),
}

/// One call of the hostile server's `echo`: its arguments and what its record must hold.
#[derive(Debug)]
struct Call {
    args: Value,
    outcome: Outcome,
}

/// A call of `echo` at each of [`DEPTHS`], with the arguments `extra` besides: an answer
/// deeper than [`MCP_READABLE`] fails its call.
fn deep_calls(extra: &Value) -> Vec<Call> {
    DEPTHS
        .iter()
        .map(|&levels| {
            let mut args = extra.clone();
            args["levels"] = levels.into();
            let outcome = if levels <= MCP_READABLE {
                Outcome::Read
            } else {
                Outcome::Fails("answer nests too deep")
            };
            Call { args, outcome }
        })
        .collect()
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
    hostile_answers_fail_at_once_and_the_log_verifies(&dirs, servers, &deep_calls(&json!({}))).await;
}

/// The most bytes of one answer of an HTTP MCP server's that are read (one server-sent
/// event, or one `application/json` body), as over stdio.
const MCP_MAX_ANSWER: i64 = 16 * 1024 * 1024;

/// The same hostile server over streamable HTTP, its answers sent as server-sent events or as
/// `application/json` bodies: an answer too deep for rmcp, or larger than [`MCP_MAX_ANSWER`]
/// (one that never ends among them, which must not be read to its end), fails its call at
/// once, as over stdio, and the session's next call is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_http_mcp_servers_deep_or_huge_answers_fail_their_calls_at_once() {
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
    let mut calls = Vec::new();
    for transport in ["sse", "json"] {
        calls.extend(deep_calls(&json!({"as": transport})));
        for bytes in [MCP_MAX_ANSWER + 1024, -1] {
            let args = json!({"as": transport, "bytes": bytes});
            calls.push(Call {
                args,
                outcome: Outcome::Fails("answer is too large"),
            });
        }
    }
    calls.push(Call {
        args: json!({"levels": 100}),
        outcome: Outcome::Read,
    });
    hostile_answers_fail_at_once_and_the_log_verifies(&dirs, servers, &calls).await;
}

/// Runs the sandboxed example twice on one log with the hostile MCP server `servers` names
/// (`notes`), making each of `calls` in one session, each turn bounded by [`MCP_WAIT`]: the
/// log verifies, and each call is recorded as its [`Outcome`] says.
async fn hostile_answers_fail_at_once_and_the_log_verifies(dirs: &AgentDirs, servers: Value, calls: &[Call]) {
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
        for call in calls {
            let text = format!("/mcp call notes echo {}", call.args);
            run_turn_within(&client, &session, &text, MCP_WAIT).await;
        }
        let status = tokio::time::timeout(WAIT, client.close())
            .await
            .expect("closed in time");
        assert!(status.is_some_and(|s| s.success()), "{status:?}");
        records = check_log(&dirs.audit_log, records);
    }
    let outputs: Vec<Value> = audit_records(&dirs.audit_log)
        .into_iter()
        .filter(|r| r["action"] == "tool.call")
        .map(|r| r["output"].clone())
        .collect();
    assert_eq!(outputs.len(), 2 * calls.len(), "{outputs:?}");
    let wrong: Vec<String> = outputs
        .iter()
        .zip(calls.iter().chain(calls))
        .filter(|(output, call)| !recorded_as_expected(output, call.outcome))
        .map(|(output, call)| format!("{}: {}", call.args, interop::shorten(&output.to_string(), 1000)))
        .collect();
    assert!(
        wrong.is_empty(),
        "calls recorded otherwise than expected:\n{}",
        wrong.join("\n")
    );
}

/// Whether a call's recorded `output` is as `outcome` says.
fn recorded_as_expected(output: &Value, outcome: Outcome) -> bool {
    match outcome {
        Outcome::Read => {
            let text = output.to_string();
            text.contains(r#"\"x\""#) && text.contains(DEEP_JSON_KEY)
        }
        Outcome::Fails(words) => output["error"].as_str().is_some_and(|error| error.contains(words)),
    }
}
