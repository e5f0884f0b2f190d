//! The official Python SDK's client side (PyPI `agent-client-protocol`, pinned in
//! `interop/py/requirements.txt`) drives `echo-server` (tier basic), `governed-server` (tier
//! governance-aware) and the governance bridge in front of `governed-server`, over stdio,
//! through `interop/py/client.py`. The script only reports (one JSON line per step: what the
//! SDK returned, and every `session/update` / `session/request_permission` in wire order with
//! its phase relative to the prompt's response, seen by the SDK's stream observers); every
//! assertion is here.
//!
//! `governed_server_over_websocket_with_the_python_sdk`: the same governed scenario through the
//! SDK's own WebSocket transport to `governed-server --listen` (docs/remote.md), without a token
//! on the upgrade: refused `-32000` until `authenticate`; a wrong token and a foreign `Origin`
//! refused `401` and `403` first; the audit log names the token's identity in every record.
//!
//! `governed_server_over_streamable_http_with_the_python_sdk` (issue #47): the same through the
//! SDK's Streamable HTTP transport (`acp.http.create_http_stream`) with the token in the header,
//! plus a `session/resume` (which the SDK sends without `Acp-Session-Id`) and a list of every
//! HTTP request it made and how it was answered.
//!
//! Skipped, saying so, without a Python that can `import acp` (see
//! [`interop::python_with_acp`]). On failure: the script's output, the wire transcript (both
//! directions) and the agent's stderr.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use interop::audit::{check_audit_log, check_identity_in_audit_log};
use interop::websocket::{WsServer, test_token};
use interop::{AgentDirs, ScriptOutput, example_binary, explained, run_script, shorten, stream_chunk};
use serde_json::{Value, json};

/// The whole scenario must finish within this; each of the script's waits times out after
/// 30 s.
const DEADLINE: Duration = Duration::from_secs(240);

/// The `clientInfo.name` the script gives (audited as `client:<name>`).
const CLIENT: &str = "client:agentacp-interop-py";

/// The identity `governed-server` gives the token in the WebSocket and HTTP tests.
const IDENTITY: &str = "py-editor";

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("py/client.py")
}

/// What `client.py` reported, with everything needed to explain a failure.
struct Run {
    steps: Vec<Value>,
    report: String,
}

impl Run {
    fn fail(&self, message: impl std::fmt::Display) -> ! {
        panic!("{message}\n{}", self.report)
    }

    fn check(&self, ok: bool, message: impl std::fmt::Display) {
        if !ok {
            self.fail(message);
        }
    }

    /// The line of step `name`.
    fn step(&self, name: &str) -> &Value {
        self.steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| self.fail(format!("no `{name}` step was reported")))
    }

    /// Step `name`, a prompt answered with `stop_reason`, whose events all arrived before that
    /// response and were all handed to this client by the SDK.
    fn prompt(&self, name: &str, stop_reason: &str) -> &[Value] {
        let step = self.step(name);
        self.check(
            step["stopReason"] == stop_reason,
            format!("{name}: want stopReason {stop_reason}, got {step}"),
        );
        let events = step["events"].as_array().map(Vec::as_slice).unwrap_or_default();
        if let Some(late) = events.iter().find(|e| e["phase"] != "before") {
            self.fail(format!("{name}: an event arrived after the prompt's response: {late}"));
        }
        let count = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
        self.check(
            step["sdkUpdates"] == count("update") && step["sdkPermissions"] == count("permission"),
            format!(
                "{name}: the SDK handed the client {} updates and {} permission requests, the wire \
                 had {} and {}",
                step["sdkUpdates"],
                step["sdkPermissions"],
                count("update"),
                count("permission")
            ),
        );
        events
    }
}

/// The text of each `agent_message_chunk` among `events`.
fn texts(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|e| e["update"]["content"]["text"].as_str())
        .collect()
}

/// The `tool_call` / `tool_call_update` updates and permission requests among `events`.
fn tool_events(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| {
            e["kind"] == "permission"
                || e["update"]["sessionUpdate"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("tool_call"))
        })
        .collect()
}

/// A tool event's field (`toolCallId`, `status`, `title`), from the update or the permission
/// request's `toolCall`.
fn tool_field<'a>(event: &'a Value, key: &str) -> &'a Value {
    if event["kind"] == "permission" {
        &event["toolCall"][key]
    } else {
        &event["update"][key]
    }
}

/// The kind of the option the client chose in answer to a permission event (`cancelled` for
/// that outcome).
fn answer_kind(event: &Value) -> String {
    let answer = &event["answer"]["outcome"];
    if answer["outcome"] == "cancelled" {
        return "cancelled".into();
    }
    event["options"]
        .as_array()
        .and_then(|options| options.iter().find(|o| o["optionId"] == answer["optionId"]))
        .and_then(|o| o["kind"].as_str())
        .unwrap_or("(no answer)")
        .to_string()
}

/// The Python that can `import acp`, or `None` having said why the test skips (before
/// anything is built).
fn python() -> Option<PathBuf> {
    match interop::python_with_acp() {
        Ok(python) => Some(python),
        Err(why) => {
            interop::skip_without_peer(&why);
            None
        }
    }
}

/// Runs `PYTHON client.py SCENARIO AGENT` with the `AGENTACP_*` variables `env`, and checks
/// what every scenario ends with: exit 0 on stdin EOF (when AGENT is a program), no update
/// outside its turn. AGENT may be the `ws://` URL of `server`, whose stderr is then reported.
fn run(
    python: &Path,
    scenario: &str,
    agent: &OsStr,
    env: &[(&str, OsString)],
    cwd: &Path,
    outside: &Path,
    server: Option<&WsServer>,
) -> Run {
    let transcript = tempfile::NamedTempFile::new().expect("a temporary transcript file");
    let mut command = Command::new(python);
    command
        .arg(client_script())
        .arg(scenario)
        .arg(agent)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("SCENARIO_CWD", cwd)
        .env("SCENARIO_OUTSIDE", outside)
        .env("SCENARIO_TRANSCRIPT", transcript.path())
        .env("PYTHONUNBUFFERED", "1");
    let ScriptOutput { status, stdout, stderr } = run_script(&mut command, DEADLINE);
    let wire = std::fs::read_to_string(transcript.path()).unwrap_or_default();
    let mut report = format!(
        "{} client.py {scenario} {}\n--- steps (stdout)\n",
        python.display(),
        agent.to_string_lossy()
    );
    for line in stdout.lines() {
        let _ = writeln!(report, "{}", shorten(line, 2000));
    }
    report.push_str("--- wire transcript (in: from the agent, out: from the Python SDK)\n");
    for line in wire.lines() {
        let _ = writeln!(report, "{}", shorten(line, 600));
    }
    let _ = write!(report, "--- stderr (the script's and the agent's)\n{stderr}---");
    if let Some(server) = server {
        let _ = write!(report, "\n--- server stderr\n{}---", server.stderr_text());
    }
    let steps = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect::<Vec<_>>();
    let run = Run { steps, report };
    match status {
        None => run.fail(format!("client.py did not finish within {DEADLINE:?}")),
        Some(status) if !status.success() => run.fail(format!("client.py failed ({status})")),
        Some(_) => {}
    }
    // The agent went away cleanly: exit 0 on stdin EOF, and no update outside its turn.
    let exit = run.step("exit");
    let want = if server.is_some() { Value::Null } else { json!(0) };
    run.check(
        exit["returncode"] == want,
        format!("the agent did not exit 0 on stdin EOF: {exit}"),
    );
    run.check(
        exit["late"].as_array().is_some_and(Vec::is_empty),
        format!("updates arrived after their prompt's response: {}", exit["late"]),
    );
    // Outside a turn, only the slash commands a server announces after `session/new` may come.
    let early = exit["early"].as_array().map(|early| {
        early
            .iter()
            .filter(|event| event["update"]["sessionUpdate"] != "available_commands_update")
            .count()
    });
    run.check(
        early == Some(0),
        format!("updates arrived before any prompt: {}", exit["early"]),
    );
    run
}

/// `initialize` as the SDK saw it: protocol version 1, `agentInfo.name`, the tier, and (for a
/// server) exactly the capabilities its manifest advertises.
fn check_initialize(run: &Run, name: &str, tier: &str, example: Option<&str>) {
    let init = run.step("initialize");
    let result = &init["result"];
    run.check(result["protocolVersion"] == 1, format!("protocolVersion: {init}"));
    run.check(result["agentInfo"]["name"] == name, format!("agentInfo.name: {init}"));
    run.check(
        init["sdk"]["agentInfo"]["name"] == name && init["sdk"]["protocolVersion"] == 1,
        format!("the SDK read the initialize response differently: {init}"),
    );
    run.check(result["_meta"]["aip44"]["tier"] == tier, format!("tier: {init}"));
    if let Some(example) = example {
        let want = &explained(example)["initializeResponse"]["agentCapabilities"];
        run.check(
            &result["agentCapabilities"] == want,
            format!("agentCapabilities differ from `scaffold-aip explain`'s {want}: {init}"),
        );
    }
}

/// What every scenario shares: a session in the cwd, an echo, `/forever` cancelled after its
/// first chunk (answered `cancelled`, the session usable after), and a cwd outside the root
/// refused with `-32602`.
fn check_common(run: &Run) {
    let session = run.step("new_session");
    run.check(
        session["sessionId"].as_str().is_some_and(|s| !s.is_empty()),
        format!("session/new: {session}"),
    );
    let echo = run.prompt("echo", "end_turn");
    run.check(
        texts(echo).concat() == "hello from the python sdk",
        format!("the echo is {:?}", texts(echo)),
    );
    let forever = run.prompt("forever", "cancelled");
    run.check(
        !texts(forever).is_empty(),
        "/forever was cancelled before its first chunk",
    );
    let after = run.prompt("after_cancel", "end_turn");
    run.check(
        texts(after).concat() == "still here after cancel",
        format!("the prompt after cancel echoed {:?}", texts(after)),
    );
    let outside = run.step("new_session_outside");
    run.check(
        outside["error"]["code"] == -32602,
        format!("session/new outside the workspace root: want -32602, got {outside}"),
    );
}

/// `write_allowed`: `tool_call` pending → permission request (same id, answered `allow_once`)
/// → `tool_call_update` completed → `completed: …`, nothing run before the answer.
/// `write_rejected`: asked, answered `reject_once`, reported `rejected`, never completed.
/// `read`: runs without asking. `denied`: no tool call on the wire, `denied…`.
fn check_governed_tools(run: &Run, cwd: &Path) {
    let allowed = run.prompt("write_allowed", "end_turn");
    let tools = tool_events(allowed);
    let seen = || format!("{tools:#?}");
    let call = tools
        .iter()
        .position(|e| e["update"]["sessionUpdate"] == "tool_call")
        .unwrap_or_else(|| run.fail(format!("write_allowed: no tool_call: {}", seen())));
    let ask = tools
        .iter()
        .position(|e| e["kind"] == "permission")
        .unwrap_or_else(|| run.fail(format!("write_allowed: no permission request: {}", seen())));
    let done = tools
        .iter()
        .position(|e| e["update"]["sessionUpdate"] == "tool_call_update" && e["update"]["status"] == "completed")
        .unwrap_or_else(|| run.fail(format!("write_allowed: no completed tool_call_update: {}", seen())));
    run.check(
        call < ask && ask < done,
        format!(
            "write_allowed: want tool_call, permission, completed; got {call}, {ask}, {done}: {}",
            seen()
        ),
    );
    run.check(
        tool_field(tools[call], "status") == "pending" && tool_field(tools[call], "title") == "write-file",
        format!("write_allowed: the tool_call is not a pending write-file: {}", seen()),
    );
    let id = tool_field(tools[call], "toolCallId");
    run.check(
        tool_field(tools[ask], "toolCallId") == id && tool_field(tools[done], "toolCallId") == id,
        format!("write_allowed: the toolCallIds differ: {}", seen()),
    );
    run.check(
        answer_kind(tools[ask]) == "allow_once",
        format!("write_allowed: the client answered {}", answer_kind(tools[ask])),
    );
    run.check(
        !tools[..ask]
            .iter()
            .any(|e| matches!(tool_field(e, "status").as_str(), Some("completed" | "in_progress"))),
        format!("write_allowed: the tool ran before the answer: {}", seen()),
    );
    run.check(
        texts(allowed).iter().any(|t| t.starts_with("completed: ")),
        format!("write_allowed: no `completed: …` message: {:?}", texts(allowed)),
    );
    run.check(
        std::fs::read_to_string(cwd.join("approved.txt")).ok().as_deref() == Some("approved through the python sdk"),
        "write_allowed: approved.txt was not written in the session's cwd",
    );

    let rejected = run.prompt("write_rejected", "end_turn");
    let tools = tool_events(rejected);
    let ask = tools
        .iter()
        .find(|e| e["kind"] == "permission")
        .unwrap_or_else(|| run.fail(format!("write_rejected: no permission request: {tools:#?}")));
    run.check(
        answer_kind(ask) == "reject_once",
        format!("write_rejected: the client answered {}", answer_kind(ask)),
    );
    run.check(
        !tools.iter().any(|e| tool_field(e, "status") == "completed"),
        format!("write_rejected: reported completed: {tools:#?}"),
    );
    run.check(
        texts(rejected).iter().any(|t| t.trim() == "rejected"),
        format!("write_rejected: not reported `rejected`: {:?}", texts(rejected)),
    );
    run.check(
        !cwd.join("rejected.txt").exists(),
        "write_rejected: the file was written",
    );

    let read = run.prompt("read", "end_turn");
    let tools = tool_events(read);
    run.check(
        tools.iter().any(|e| e["update"]["sessionUpdate"] == "tool_call"),
        format!("read: no tool_call: {tools:#?}"),
    );
    run.check(
        !tools.iter().any(|e| e["kind"] == "permission"),
        format!("read: the client was asked: {tools:#?}"),
    );
    run.check(
        texts(read)
            .iter()
            .any(|t| t.contains("approved through the python sdk")),
        format!("read: the file's text was not reported: {:?}", texts(read)),
    );

    let denied = run.prompt("denied", "end_turn");
    run.check(
        tool_events(denied).is_empty(),
        format!("denied: a denied tool reached the wire: {:#?}", tool_events(denied)),
    );
    run.check(
        texts(denied).iter().any(|t| t.starts_with("denied")),
        format!("denied: the message does not say `denied…`: {:?}", texts(denied)),
    );
}

/// The tool-call records of an audit log, by tool and path: their `approval`s.
fn approval(records: &[Value], tool: &str, path: Option<&str>) -> Value {
    records
        .iter()
        .find(|r| {
            let aip44 = &r["metadata"]["aip44"];
            aip44["audit-event-kind"] == "tool-call"
                && aip44["tool"] == tool
                && path.is_none_or(|p| aip44["arguments"]["path"] == p)
        })
        .map_or(Value::Null, |r| r["metadata"]["aip44"]["approval"].clone())
}

/// The approvals the editor's answers must be audited with by whoever asked it (the server,
/// or the bridge in front of it), and the read that nobody was asked about.
fn editor_approvals(records: &[Value]) -> bool {
    approval(records, "write-file", Some("approved.txt")) == json!({"approvedBy": CLIENT})
        && approval(records, "write-file", Some("rejected.txt"))["rejectedBy"] == CLIENT
        && approval(records, "read-file", Some("approved.txt")) == json!("auto")
}

/// `delete-repo`, denied by governed-server's own governance.
fn delete_repo_denied(records: &[Value]) -> bool {
    approval(records, "delete-repo", None)["deniedBy"] == "governance"
}

#[test]
fn echo_server_with_the_python_sdk() {
    let Some(python) = python() else { return };
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let agent = example_binary("echo-server");
    let run = run(
        &python,
        "basic",
        agent.as_os_str(),
        &dirs.env(),
        &cwd,
        &dirs.outside(),
        None,
    );
    check_initialize(&run, "echo-server", "basic", Some("echo-server"));
    check_common(&run);
    // `/stream 200 32`: every chunk, in order, each before the response.
    let stream = run.prompt("stream", "end_turn");
    let chunks = texts(stream);
    let want: Vec<String> = (0..200).map(|i| stream_chunk(i, 32)).collect();
    run.check(
        chunks == want,
        format!("/stream 200 32: {} chunks, not the 200 expected in order", chunks.len()),
    );
}

#[test]
fn governed_server_with_the_python_sdk() {
    let Some(python) = python() else { return };
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let agent = example_binary("governed-server");
    let run = run(
        &python,
        "governed",
        agent.as_os_str(),
        &dirs.env(),
        &cwd,
        &dirs.outside(),
        None,
    );
    check_initialize(&run, "governed-server", "governance-aware", Some("governed-server"));
    check_common(&run);
    check_governed_tools(&run, &cwd);
    check_audit_log(&dirs.audit_log, |records| {
        editor_approvals(records) && delete_repo_denied(records)
    });
}

/// The venv's Python, if it can import `module` too (else the test skips, saying so).
fn python_with(module: &str) -> Option<PathBuf> {
    let python = python()?;
    let imports = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|out| out.status.success());
    if !imports {
        interop::skip_without_peer(&format!(
            "{} cannot `import {module}` (pip install -r interop/py/requirements.txt)",
            python.display()
        ));
        return None;
    }
    Some(python)
}

/// A remote run of the governed scenario: `governed-server --listen` with a token of
/// [`IDENTITY`], and what the script reported reaching it at its URL with `scheme` (`ws` or
/// `http`).
struct Remote {
    dirs: AgentDirs,
    cwd: PathBuf,
    server: WsServer,
    run: Run,
}

fn run_remote(python: &Path, scheme: &str) -> Remote {
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let token = test_token();
    let mut env = dirs.env();
    env.push(("AGENTACP_TOKEN", token.clone().into()));
    env.push(("AGENTACP_TOKEN_IDENTITY", IDENTITY.into()));
    let server = WsServer::start(&example_binary("governed-server"), &env);
    let url = OsString::from(server.url().replacen("ws", scheme, 1));
    let script_env = [("SCENARIO_TOKEN", OsString::from(&token))];
    let run = run(
        python,
        "governed",
        &url,
        &script_env,
        &cwd,
        &dirs.outside(),
        Some(&server),
    );
    // Alone (`websockets` or `httpx`): a wrong token, and a browser's foreign origin.
    for (step, status) in [("refused_wrong_token", 401), ("refused_origin", 403)] {
        let line = run.step(step);
        run.check(
            line["status"] == status,
            format!("{step}: want HTTP {status}, got {line}"),
        );
    }
    Remote { dirs, cwd, server, run }
}

impl Remote {
    /// The echo, the tools and cancel as over stdio; the server outlives its client; the audit
    /// log holds the editor's approvals and names [`IDENTITY`] in every record.
    fn check_session_and_audit(mut self) {
        let run = &self.run;
        check_common(run);
        check_governed_tools(run, &self.cwd);
        run.check(self.server.is_running(), "the server exited when its client left");
        check_audit_log(&self.dirs.audit_log, |records| {
            editor_approvals(records) && delete_repo_denied(records)
        });
        check_identity_in_audit_log(&self.dirs.audit_log, IDENTITY);
    }
}

#[test]
fn governed_server_over_websocket_with_the_python_sdk() {
    let Some(python) = python_with("websockets") else {
        return;
    };
    let remote = run_remote(&python, "ws");
    let run = &remote.run;
    // The token's method is offered (with `logout`, so the capabilities are not exactly the
    // stdio ones); nothing but `authenticate` is served before it.
    check_initialize(run, "governed-server", "governance-aware", None);
    let init = run.step("initialize");
    run.check(
        init["result"]["authMethods"]
            .as_array()
            .is_some_and(|methods| methods.iter().any(|m| m["id"] == "bearer")),
        format!("initialize does not offer the `bearer` method: {init}"),
    );
    let before = run.step("before_auth");
    run.check(
        before["error"]["code"] == -32000,
        format!("session/new before authenticate: want -32000, got {before}"),
    );
    let auth = run.step("authenticate");
    run.check(
        auth["ok"] == true,
        format!("authenticate with the token in _meta: {auth}"),
    );
    remote.check_session_and_audit();
}

/// Issue #47: the SDK's Streamable HTTP client (`acp.http.create_http_stream`, on `httpx`)
/// with the token in `Authorization` on every request, over HTTP/2 (h2c, prior knowledge). Its `session/resume` carries the
/// session in `params.sessionId` only (the SDK sends `Acp-Session-Id` with prompt, cancel,
/// close, set_mode and set_config_option alone): served, as the official Rust server does.
#[test]
fn governed_server_over_streamable_http_with_the_python_sdk() {
    let Some(python) = python_with("httpx") else { return };
    let remote = run_remote(&python, "http");
    let run = &remote.run;
    check_initialize(run, "governed-server", "governance-aware", None);
    let resume = run.step("resume");
    run.check(
        resume["ok"] == true,
        format!("session/resume without Acp-Session-Id (params.sessionId names it): {resume}"),
    );
    let after = run.prompt("after_resume", "end_turn");
    run.check(
        texts(after).concat() == "still here after resume",
        format!("the prompt after resume echoed {:?}", texts(after)),
    );
    // Every request the SDK made was answered as the RFD says.
    let exchanges = run.step("http_exchanges")["exchanges"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let expected = |e: &Value| match e["method"].as_str() {
        Some("POST") if e["rpc"] == "initialize" => e["status"] == 200,
        Some("POST") | Some("DELETE") => e["status"] == 202,
        Some("GET") => e["status"] == 200 && e["type"].as_str().is_some_and(|t| t.starts_with("text/event-stream")),
        _ => false,
    };
    let wrong: Vec<&Value> = exchanges
        .iter()
        .filter(|e| !expected(e) || e["version"] != "HTTP/2")
        .collect();
    run.check(
        wrong.is_empty(),
        format!("answered otherwise than the RFD says, or not over HTTP/2: {wrong:?}"),
    );
    let session_streams = exchanges
        .iter()
        .filter(|e| e["method"] == "GET" && e["session"].is_string())
        .count();
    let deletes = exchanges.iter().filter(|e| e["method"] == "DELETE").count();
    run.check(
        session_streams >= 1 && deletes == 1,
        format!("{session_streams} session streams and {deletes} DELETEs: {exchanges:?}"),
    );
    remote.check_session_and_audit();
}

#[test]
fn bridge_in_front_of_governed_server_with_the_python_sdk() {
    let Some(python) = python() else { return };
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    let bridge_audit = dirs.state_dir.join("bridge-audit.jsonl");
    let bridge = example_binary("governance-bridge");
    let server = example_binary("governed-server");
    assert_eq!(
        bridge.parent(),
        server.parent(),
        "the bridge starts the governed server from its own folder"
    );
    let env = dirs.bridge_env(&bridge_audit);
    let run = run(&python, "bridge", bridge.as_os_str(), &env, &cwd, &dirs.outside(), None);
    check_initialize(&run, "governance-bridge", "governance-aware", None);
    let init = run.step("initialize");
    run.check(
        init["result"]["_meta"]["aip44"]["downstream"]["name"] == "governed-server",
        format!("the bridge does not name the agent behind it: {init}"),
    );
    check_common(&run);
    check_governed_tools(&run, &cwd);
    // governed-server would ask for run-tests; the bridge's manifest does not list it: the
    // editor never sees it, the bridge refuses the permission itself.
    let hidden = run.prompt("hidden", "end_turn");
    run.check(
        tool_events(hidden).is_empty(),
        format!("hidden: run-tests reached the editor: {:#?}", tool_events(hidden)),
    );
    run.check(
        texts(hidden).iter().any(|t| t.starts_with("rejected")),
        format!("hidden: the server does not report the refusal: {:?}", texts(hidden)),
    );
    check_audit_log(&bridge_audit, |records| {
        editor_approvals(records) && approval(records, "run-tests", None)["deniedBy"] == "governance"
    });
    // Behind the bridge, the server was answered by the bridge (on the editor's behalf).
    check_audit_log(&dirs.audit_log, |records| {
        approval(records, "write-file", Some("approved.txt"))
            .get("approvedBy")
            .is_some()
            && approval(records, "write-file", Some("rejected.txt"))
                .get("rejectedBy")
                .is_some()
            && delete_repo_denied(records)
            // The server asked about run-tests; the bridge refused it (the editor never saw it).
            && approval(records, "run-tests", None).get("rejectedBy").is_some()
    });
}

/// A negative control: a shell-script agent that sends one more update after each prompt's
/// response (a broken ordered writer). The Python side must tag the last one `after`, and the
/// check every test above makes must fail for it.
#[test]
fn an_update_after_the_prompt_response_fails_the_run() {
    let Some(python) = python() else { return };
    let dirs = AgentDirs::new();
    let cwd = dirs.project("p");
    // The Python SDK numbers its requests; the script answers numeric ids too.
    let script = dirs.late_update_agent();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(
            &python,
            "basic",
            script.as_os_str(),
            &dirs.env(),
            &cwd,
            &dirs.outside(),
            None,
        );
    }));
    let Err(panic) = outcome else {
        panic!("an agent that writes an update after its prompt's response passed the checks");
    };
    let message = panic.downcast_ref::<String>().map_or("", String::as_str);
    assert!(
        message.starts_with("updates arrived after their prompt's response") && message.contains(r#""text": "late""#),
        "the run failed for another reason:\n{message}"
    );
}
