//! Issue #18, MCP at the sandboxed tier: our client drives `examples/sandboxed-server`, giving
//! it a real MCP server written with `rmcp` (`src/bin/mcp-test-server.rs`) in `session/new`.
//! The server's tools are listed (a denied one is not), called as governed tool calls
//! (allowed, asked and approved, asked and rejected, denied, failing), streamed as
//! `tool_call` updates and audited; the MCP server is stopped with the agent. MCP-over-ACP
//! between our client and our server, and through a sandboxed bridge (governed there). Every
//! wait is bounded.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentacp::audit::{AuditLog, FsyncPolicy};
use agentacp::bridge::BridgeOptions;
use agentacp::bridge::listen::BridgeListener;
use agentacp::client::{
    AgentCommand, Client, ClientError, ClientOptions, Direction, PermissionDecision, PromptEvent, Update,
};
use agentacp::prelude::*;
use agentacp::server::websocket::ListenOptions;
use agentacp::websocket::Dial;
use agentacp::wire::default as wire;
use interop::audit::{audit_records, check_audit_log};
use interop::notes_mcp::Notes;
use interop::websocket::{WsServer, non_loopback_ipv4, test_token};
use interop::{AgentDirs, example_binary};
use serde_json::{Value, json};

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(60);

/// The MCP server of these tests, as `mcpServers` names it: `notes`, started with `args`,
/// with `NOTE_SECRET` in its environment.
fn notes_server(args: &[&str]) -> Value {
    json!([{
        "name": "notes",
        "command": env!("CARGO_BIN_EXE_mcp-test-server"),
        "args": args,
        "env": [{"name": "NOTE_SECRET", "value": "s3cret"}],
    }])
}

/// The sandboxed example, started by our client; permission requests go to `decide` and are
/// counted by the tool's title.
async fn connect(
    dirs: &AgentDirs,
    decide: fn(&wire::RequestPermissionRequest) -> PermissionDecision,
) -> (Client, Arc<Mutex<Vec<String>>>) {
    connect_with(dirs, decide, |options| options).await
}

/// [`connect`], with more of the client's options set by `more`.
async fn connect_with(
    dirs: &AgentDirs,
    decide: fn(&wire::RequestPermissionRequest) -> PermissionDecision,
    more: impl FnOnce(ClientOptions) -> ClientOptions,
) -> (Client, Arc<Mutex<Vec<String>>>) {
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = asked.clone();
    let mut command = AgentCommand::new(example_binary("sandboxed-server"));
    for (key, value) in dirs.env() {
        command = command.env(key, value);
    }
    let options = more(ClientOptions::default())
        .with_workspace_root(dirs.workspace_root.clone())
        .with_permission(move |request: wire::RequestPermissionRequest| {
            seen.lock()
                .unwrap()
                .push(request.tool_call.title.clone().unwrap_or_default());
            let decision = decide(&request);
            async move { decision }
        });
    let client = tokio::time::timeout(WAIT, Client::connect(command, options))
        .await
        .expect("started in time")
        .expect("started");
    (client, asked)
}

/// A session in `project` with these `mcpServers` (bounded; it must be accepted).
async fn session_with(client: &Client, project: &Path, servers: Value) -> wire::SessionId {
    tokio::time::timeout(WAIT, client.new_session_with_mcp_servers(project, servers))
        .await
        .expect("session/new answered in time")
        .expect("session/new accepted")
}

/// A prompt's text messages and its tool-call updates (as JSON).
async fn prompt(client: &Client, session: &wire::SessionId, text: &str) -> (Vec<String>, Vec<Value>) {
    let mut turn = tokio::time::timeout(WAIT, client.prompt_text(session, text))
        .await
        .expect("prompted in time")
        .expect("prompted");
    let (mut texts, mut calls) = (Vec::new(), Vec::new());
    loop {
        match tokio::time::timeout(WAIT, turn.next()).await.expect("an event in time") {
            Some(Ok(PromptEvent::Update(update))) => match &update {
                Update::ToolCall(call) => calls.push(serde_json::to_value(call).unwrap()),
                Update::ToolCallUpdate(call) => calls.push(serde_json::to_value(call).unwrap()),
                other => texts.extend(other.text().map(str::to_string)),
            },
            Some(Ok(PromptEvent::Stop(reason))) => {
                assert_eq!(reason, wire::StopReason::EndTurn, "{text}");
                return (texts, calls);
            }
            Some(Ok(other)) => panic!("unexpected event {other:?}"),
            Some(Err(error)) => panic!("`{text}` failed: {error}"),
            None => panic!("`{text}` ended without a stop reason"),
        }
    }
}

/// A prompt whose call of `echo` holds until it is cancelled (a minute at most).
async fn held_echo(client: &Client, session: &wire::SessionId) -> agentacp::client::PromptStream {
    tokio::time::timeout(
        WAIT,
        client.prompt_text(session, r#"/mcp call notes echo {"text":"held","hold":true}"#),
    )
    .await
    .expect("prompted in time")
    .expect("prompted")
}

/// Approves every request except one to write `keep-out.txt`.
fn approve_but_keep_out(request: &wire::RequestPermissionRequest) -> PermissionDecision {
    let input = request.tool_call.raw_input.clone().unwrap_or_default();
    if input["name"] == "keep-out.txt" {
        PermissionDecision::Reject
    } else {
        PermissionDecision::Approve
    }
}

/// A question the editor holds: a permission request for `echo` whose `text` is a path
/// ending in `held-question`. The editor writes that file, the agent's sign that the question
/// is being asked, and never answers it; `None` for every other request.
fn held_question(request: &wire::RequestPermissionRequest) -> Option<()> {
    let input = request.tool_call.raw_input.clone().unwrap_or_default();
    let path = input["text"].as_str().filter(|text| text.ends_with("/held-question"))?;
    std::fs::write(path, "asked").expect("the held question's marker is written");
    Some(())
}

/// The processes whose command line holds `tag`.
fn processes_tagged(tag: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // A zombie (state Z) is not running; it is its parent's to reap.
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'));
            (!zombie && String::from_utf8_lossy(&cmdline).contains(tag)).then_some(pid)
        })
        .collect()
}

fn tool_records(audit: &Path, tool: &str) -> Vec<Value> {
    audit_records(audit)
        .into_iter()
        .filter(|r| r["metadata"]["aip44"]["tool"] == tool)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_are_listed_governed_streamed_audited_and_the_server_is_stopped() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    std::fs::write(project.join("hello.txt"), "hello from a note").unwrap();
    let (client, asked) = connect(&dirs, approve_but_keep_out).await;
    let tag = format!("mcp-test-{}-{}", std::process::id(), line!());
    let session = session_with(&client, &project, notes_server(&["--tag", &tag])).await;

    // Listed: the tools the operator may use, with the kind their annotations give; `env`
    // (not in OPERATOR.md's list) is denied, so not listed.
    let (listed, _) = prompt(&client, &session, "/mcp tools").await;
    assert_eq!(
        listed,
        [
            "mcp/notes/echo (other)",
            "mcp/notes/fail (other)",
            "mcp/notes/read_note (read)",
            "mcp/notes/write_note (delete)",
        ]
    );
    assert!(!processes_tagged(&tag).is_empty(), "the MCP server runs");

    // Read-only: runs without asking, streamed as a tool call.
    let (said, calls) = prompt(&client, &session, r#"/mcp call notes read_note {"name":"hello.txt"}"#).await;
    assert_eq!(said, ["completed: hello from a note"]);
    assert_eq!(calls.first().unwrap()["title"], "mcp/notes/read_note", "{calls:?}");
    assert_eq!(calls.first().unwrap()["kind"], "read", "{calls:?}");
    assert_eq!(calls.last().unwrap()["status"], "completed", "{calls:?}");

    // May change something: asked, approved, run (in the session's folder).
    let (said, _) = prompt(
        &client,
        &session,
        r#"/mcp call notes write_note {"name":"new.txt","text":"written"}"#,
    )
    .await;
    assert_eq!(said, ["completed: wrote 7 bytes to new.txt"]);
    assert_eq!(std::fs::read_to_string(project.join("new.txt")).unwrap(), "written");

    // Asked and rejected: not run.
    let (said, calls) = prompt(
        &client,
        &session,
        r#"/mcp call notes write_note {"name":"keep-out.txt","text":"no"}"#,
    )
    .await;
    assert!(said[0].starts_with("rejected:"), "{said:?}");
    assert_eq!(calls.last().unwrap()["status"], "failed", "{calls:?}");
    assert!(!project.join("keep-out.txt").exists());

    // Denied: never shown to the client, never asked.
    let (said, calls) = prompt(&client, &session, r#"/mcp call notes env {"name":"NOTE_SECRET"}"#).await;
    assert!(
        said[0].starts_with("denied:") && said[0].contains("tool list"),
        "{said:?}"
    );
    assert!(calls.is_empty(), "a denied call reached the client: {calls:?}");

    // A tool error: failed, with the tool's message.
    let (said, _) = prompt(&client, &session, "/mcp call notes fail {}").await;
    assert_eq!(said, ["failed: this tool always fails"]);

    // Unknown tool: named, with what the server offers; not the denied `env`.
    let (said, calls) = prompt(&client, &session, "/mcp call notes nope {}").await;
    assert!(
        said[0].contains("has no tool `nope`") && said[0].contains("`read_note`"),
        "{said:?}"
    );
    assert!(!said[0].contains("`env`"), "a denied tool was named: {said:?}");
    assert!(calls.is_empty());

    assert_eq!(
        *asked.lock().unwrap(),
        ["mcp/notes/write_note", "mcp/notes/write_note", "mcp/notes/fail"],
        "asked for what may change something, never for the read or the denied call"
    );
    let exit = tokio::time::timeout(WAIT, client.close())
        .await
        .expect("closed in time");
    assert!(
        exit.is_some_and(|status| status.success()),
        "the agent exits 0: {exit:?}"
    );

    // The MCP server went with the agent.
    gone(&tag, "the MCP server outlived the agent").await;

    // Audited: each call with its approval; the chain verifies.
    let read = tool_records(&dirs.audit_log, "mcp/notes/read_note");
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0]["metadata"]["aip44"]["approval"], "auto", "{read:?}");
    let writes = tool_records(&dirs.audit_log, "mcp/notes/write_note");
    assert_eq!(writes.len(), 2, "{writes:?}");
    let denied = tool_records(&dirs.audit_log, "mcp/notes/env");
    assert_eq!(denied.len(), 1, "{denied:?}");
    check_audit_log(&dirs.audit_log, |_| true);
}

/// A hostile MCP server (issue 44, item 8): its `write_note` writes, but is annotated
/// `readOnlyHint: true` and titled `mcp/notes/read_note`. The manifest's governance decides —
/// `on-mutate`, and no policy allows `write_note` — so the call is asked (here, rejected) and
/// does not run; the client sees the tool's real name first, the server's title only beside
/// it, and no `read` kind. Before, it ran without asking, shown as `mcp/notes/read_note`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_servers_annotations_only_make_a_call_stricter_and_its_title_never_replaces_the_tools_name() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let (client, asked) = connect(&dirs, |_| PermissionDecision::Reject).await;
    let session = session_with(&client, &project, notes_server(&["--impostor"])).await;
    let (said, calls) = prompt(
        &client,
        &session,
        r#"/mcp call notes write_note {"name":"x.txt","text":"written"}"#,
    )
    .await;
    assert!(said[0].starts_with("rejected:"), "{said:?}");
    assert!(!project.join("x.txt").exists(), "the write ran");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let announced = calls.first().unwrap_or_else(|| panic!("{said:?}"));
    for title in [&asked[0], &announced["title"].as_str().unwrap().to_string()] {
        assert!(
            title.starts_with("mcp/notes/write_note (") && title.contains("read_note"),
            "{title}"
        );
    }
    assert_ne!(announced["kind"], "read", "{announced}");
    tokio::time::timeout(WAIT, client.close())
        .await
        .expect("closed in time");
    let records = tool_records(&dirs.audit_log, "mcp/notes/write_note");
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(
        records[0]["metadata"]["aip44"]["approval"]["rejectedBy"].is_string(),
        "{records:?}"
    );
}

/// MCP-over-ACP: our client provides the notes server itself (rmcp's server side, on the ACP
/// connection); the sandboxed example reaches it through `mcp/connect` and `mcp/message`, and
/// uses it like any MCP server: listed (a denied tool is not), called, asked, denied, audited.
/// Closing the session sends `mcp/disconnect`; a client resuming it is reached again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_the_client_provides_over_acp_is_listed_called_governed_and_audited() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    std::fs::write(project.join("hello.txt"), "hello over ACP").unwrap();
    let (folder, resumed_folder) = (project.clone(), project.clone());
    let methods: Arc<Mutex<Vec<String>>> = Arc::default();
    let tap = mcp_tap(methods.clone());
    let (client, asked) = connect_with(&dirs, approve_but_keep_out, move |options| {
        options
            .with_mcp_over_acp("notes", move || Notes { folder: folder.clone() })
            .with_wire_tap(tap)
    })
    .await;
    assert!(
        client.takes_mcp_over_acp(),
        "the sandboxed example advertises mcpCapabilities.acp"
    );
    let session = session_with(&client, &project, json!([])).await;

    let (listed, _) = prompt(&client, &session, "/mcp tools").await;
    assert_eq!(
        listed,
        [
            "mcp/notes/echo (other)",
            "mcp/notes/fail (other)",
            "mcp/notes/read_note (read)",
            "mcp/notes/write_note (delete)",
        ]
    );
    let (said, calls) = prompt(&client, &session, r#"/mcp call notes read_note {"name":"hello.txt"}"#).await;
    assert_eq!(said, ["completed: hello over ACP"]);
    assert_eq!(calls.last().unwrap()["status"], "completed", "{calls:?}");
    let (said, _) = prompt(
        &client,
        &session,
        r#"/mcp call notes write_note {"name":"new.txt","text":"over ACP"}"#,
    )
    .await;
    assert_eq!(said, ["completed: wrote 8 bytes to new.txt"]);
    assert_eq!(std::fs::read_to_string(project.join("new.txt")).unwrap(), "over ACP");
    let (said, calls) = prompt(&client, &session, r#"/mcp call notes env {"name":"HOME"}"#).await;
    assert!(said[0].starts_with("denied:"), "{said:?}");
    assert!(calls.is_empty(), "a denied call reached the client: {calls:?}");
    assert_eq!(*asked.lock().unwrap(), ["mcp/notes/write_note"]);

    tokio::time::timeout(WAIT, client.close_session(&session))
        .await
        .unwrap()
        .unwrap();
    client.close().await;
    let methods = methods.lock().unwrap().clone();
    let first = |wanted: &str| methods.iter().position(|m| m.starts_with(wanted));
    let connect = first("FromAgent mcp/connect").expect("the agent connected over ACP");
    let initialize = first("FromAgent mcp/message initialize").expect("MCP initialize over ACP");
    let call = first("FromAgent mcp/message tools/call").expect("a tool call over ACP");
    let disconnect = first("FromAgent mcp/disconnect").expect("the agent disconnected at session/close");
    assert!(
        connect < initialize && initialize < call && call < disconnect,
        "{methods:?}"
    );
    assert_eq!(
        methods.iter().filter(|m| m.as_str() == "FromAgent mcp/connect").count(),
        1,
        "one connection for the session: {methods:?}"
    );

    // A resumed session lists the client's server again, and reaches it on a new connection.
    let (client, _) = connect_with(&dirs, approve_but_keep_out, move |options| {
        options.with_mcp_over_acp("notes", move || Notes {
            folder: resumed_folder.clone(),
        })
    })
    .await;
    tokio::time::timeout(WAIT, client.resume_session(&session, &project))
        .await
        .expect("session/resume answered in time")
        .expect("session/resume accepted");
    let (said, _) = prompt(&client, &session, r#"/mcp call notes read_note {"name":"new.txt"}"#).await;
    assert_eq!(said, ["completed: over ACP"]);
    client.close().await;

    let read = tool_records(&dirs.audit_log, "mcp/notes/read_note");
    assert_eq!(read.len(), 2, "one before the close, one after the resume: {read:?}");
    assert_eq!(read[0]["metadata"]["aip44"]["approval"], "auto", "{read:?}");
    assert_eq!(tool_records(&dirs.audit_log, "mcp/notes/write_note").len(), 1);
    check_audit_log(&dirs.audit_log, |_| true);
}

/// A turn cancelled while the client's MCP server over ACP runs a tool: the agent's MCP side
/// cancels the call, and the cancellation reaches the tool although its MCP id never crossed
/// (the agent cancels the `mcp/message` carrying it with `$/cancel_request`; the client tells
/// its server under the id the server got, and answers the `mcp/message` with `-32800`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_turn_cancels_the_tool_running_on_the_clients_mcp_server_over_acp() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let folder = project.clone();
    let lines: Arc<Mutex<Vec<(Direction, Value)>>> = Arc::default();
    let called = Arc::new(tokio::sync::Notify::new());
    let tap = {
        let (lines, called) = (lines.clone(), called.clone());
        move |direction: Direction, line: &[u8]| {
            let message: Value = serde_json::from_slice(line).unwrap_or_default();
            if message["method"] == "mcp/message" && message["params"]["method"] == "tools/call" {
                called.notify_one();
            }
            lines.lock().unwrap().push((direction, message));
        }
    };
    let (client, _) = connect_with(&dirs, approve_but_keep_out, move |options| {
        options
            .with_mcp_over_acp("notes", move || Notes { folder: folder.clone() })
            .with_wire_tap(tap)
    })
    .await;
    let session = session_with(&client, &project, json!([])).await;
    let mut turn = held_echo(&client, &session).await;
    let holding = project.join("echo-holding");
    let cancelling = async {
        tokio::time::timeout(WAIT, called.notified())
            .await
            .expect("the call reached the client");
        // Read by the client is not yet running in the tool: a cancel in between ends the
        // call before the tool starts (nothing for it to see). Cancel once the tool holds it.
        let deadline = Instant::now() + WAIT;
        while !holding.exists() {
            assert!(Instant::now() < deadline, "the call never reached the tool");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        client.cancel(&session).await.expect("session/cancel sent");
    };
    let ending = async {
        loop {
            match tokio::time::timeout(WAIT, turn.next()).await.expect("an event in time") {
                Some(Ok(PromptEvent::Stop(reason))) => return reason,
                Some(Ok(_)) => {}
                other => panic!("the turn ended without a stop reason: {other:?}"),
            }
        }
    };
    let ((), stop) = tokio::join!(cancelling, ending);
    assert_eq!(stop, wire::StopReason::Cancelled);

    // The tool saw its call cancelled; the `mcp/message` was cancelled by its ACP id, and
    // answered `-32800`.
    let cancelled = project.join("echo-cancelled");
    let answered_cancelled = |lines: &[(Direction, Value)]| {
        let call = lines.iter().find(|(direction, message)| {
            matches!(direction, Direction::FromAgent) && message["params"]["method"] == "tools/call"
        });
        let id = &call.expect("the call is on the wire").1["id"];
        let cancel = lines.iter().any(|(direction, message)| {
            matches!(direction, Direction::FromAgent)
                && message["method"] == "$/cancel_request"
                && message["params"]["requestId"] == *id
        });
        let answer = lines.iter().any(|(direction, message)| {
            matches!(direction, Direction::ToAgent) && message["id"] == *id && message["error"]["code"] == -32800
        });
        cancel && answer
    };
    let deadline = Instant::now() + WAIT;
    while !(cancelled.exists() && answered_cancelled(&lines.lock().unwrap())) {
        assert!(
            Instant::now() < deadline,
            "the tool's cancellation or the `-32800` answer never came: {:?}",
            lines.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(std::fs::read_to_string(&cancelled).unwrap(), "held");
    client.close().await;
}

/// Answers every permission request `allow-always`.
fn allow_always(_: &wire::RequestPermissionRequest) -> PermissionDecision {
    PermissionDecision::Select("allow-always".into())
}

/// A call run without asking is announced once its MCP request is on its way, not with its
/// outcome: a call that runs long is shown `in_progress` while it runs.
#[tokio::test]
async fn a_long_mcp_call_run_without_asking_is_announced_while_it_runs() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let (client, asked) = connect(&dirs, allow_always).await;
    let session = session_with(&client, &project, notes_server(&[])).await;
    // Asked once, `allow-always`: from then on `echo` runs without asking.
    let (said, calls) = prompt(&client, &session, r#"/mcp call notes echo {"text":"hi"}"#).await;
    assert_eq!(said, ["completed: hi"]);
    let statuses: Vec<&Value> = calls.iter().map(|call| &call["status"]).collect();
    assert_eq!(statuses, ["pending", "in_progress", "completed"], "{calls:?}");
    let (said, calls) = prompt(&client, &session, r#"/mcp call notes echo {"text":"again"}"#).await;
    assert_eq!(said, ["completed: again"]);
    let statuses: Vec<&Value> = calls.iter().map(|call| &call["status"]).collect();
    assert_eq!(statuses, ["in_progress", "completed"], "{calls:?}");
    assert_eq!(asked.lock().unwrap().len(), 1, "asked once");

    // Held until cancelled: the client hears of it while it runs.
    let mut turn = held_echo(&client, &session).await;
    loop {
        match tokio::time::timeout(WAIT, turn.next())
            .await
            .expect("the running call is announced in time")
        {
            Some(Ok(PromptEvent::Update(Update::ToolCall(call)))) => {
                assert_eq!(call.status, Some(wire::ToolCallStatus::InProgress), "{call:?}");
                break;
            }
            Some(Ok(PromptEvent::Update(_))) => {}
            other => panic!("the turn ended before its call was announced: {other:?}"),
        }
    }
    client.cancel(&session).await.expect("session/cancel sent");
    loop {
        match tokio::time::timeout(WAIT, turn.next()).await.expect("an event in time") {
            Some(Ok(PromptEvent::Stop(reason))) => {
                assert_eq!(reason, wire::StopReason::Cancelled);
                break;
            }
            Some(Ok(_)) => {}
            other => panic!("the turn ended without a stop reason: {other:?}"),
        }
    }
    client.close().await;
}

/// Waits (bounded) until no process's command line holds `tag`.
async fn gone(tag: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_tagged(tag).is_empty() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_close_stops_that_sessions_mcp_server_and_no_other() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let (client, _) = connect(&dirs, |_| PermissionDecision::Approve).await;
    let tags = [1, 2].map(|n| format!("mcp-close-{}-{n}", std::process::id()));
    let mut sessions = Vec::new();
    for tag in &tags {
        let session = session_with(&client, &project, notes_server(&["--tag", tag])).await;
        // The server starts on first use.
        let (listed, _) = prompt(&client, &session, "/mcp tools").await;
        assert_eq!(listed.len(), 4, "{listed:?}");
        assert!(!processes_tagged(tag).is_empty(), "{tag} runs");
        sessions.push(session);
    }
    tokio::time::timeout(WAIT, client.close_session(&sessions[0]))
        .await
        .unwrap()
        .unwrap();
    gone(&tags[0], "the closed session's MCP server outlived session/close").await;
    assert!(
        !processes_tagged(&tags[1]).is_empty(),
        "the other session's MCP server was stopped too"
    );
    let (said, _) = prompt(&client, &sessions[1], r#"/mcp call notes echo {"text":"still here"}"#).await;
    assert_eq!(said, ["completed: still here"]);
    client.close().await;
    gone(&tags[1], "the MCP server outlived the agent").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_with_its_stderr() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let (client, _) = connect(&dirs, |_| PermissionDecision::Approve).await;
    let session = session_with(&client, &project, notes_server(&["--exit-at-start"])).await;
    let (said, _) = prompt(&client, &session, "/mcp tools").await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("unavailable: notes: MCP initialize failed: it exited (exit status: 3)")
            && said[0].contains("exiting at start, as asked"),
        "{said:?}"
    );
    let (said, _) = prompt(&client, &session, "/mcp call notes echo {\"text\":\"x\"}").await;
    assert!(said[0].contains("could not be connected"), "{said:?}");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_new_refuses_malformed_or_unoffered_mcp_servers() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let (client, _) = connect(&dirs, |_| PermissionDecision::Approve).await;
    for (servers, expected) in [
        // Caught by the typed parameters of `session/new`, before the MCP check.
        (json!([{"command": "/bin/true"}]), "McpServer"),
        (
            json!([{"type": "sse", "name": "events", "url": "http://127.0.0.1:1/sse", "headers": []}]),
            "`mcpCapabilities.sse` is not advertised",
        ),
    ] {
        let error = tokio::time::timeout(WAIT, client.new_session_with_mcp_servers(&project, servers.clone()))
            .await
            .unwrap()
            .unwrap_err();
        match &error {
            ClientError::Rpc { error, .. } => {
                assert_eq!(error.code, -32602, "{servers}: {error:?}");
                assert!(error.message.contains(expected), "{servers}: {}", error.message);
            }
            other => panic!("{servers}: expected an error answer, got {other:?}"),
        }
    }
    client.close().await;
}

/// Whether this kernel can enforce the example's SANDBOX.md (Landlock and a network namespace
/// of its own); says so on stderr when not — the example then refuses to start, by design —
/// or fails the test under CI (`test_support::skip_unless_required`).
fn sandbox_enforceable() -> bool {
    let kernel = agentacp::sandbox::KernelSupport::probe();
    let enforceable = kernel.landlock_abi > 0 && kernel.network_namespace;
    if !enforceable {
        test_support::skip_unless_required(&format!(
            "this kernel cannot enforce the example's sandbox ({kernel:?})"
        ));
    }
    enforceable
}

/// The variables of process `pid` (`/proc/PID/environ`), by name.
fn environment_of(pid: u32) -> Vec<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let mut names: Vec<String> = environ
        .split(|byte| *byte == 0)
        .filter_map(|entry| {
            std::str::from_utf8(entry)
                .ok()?
                .split_once('=')
                .map(|(name, _)| name.to_string())
        })
        .collect();
    names.sort();
    names
}

/// The local sandbox, end to end: `initialize` reports what is enforced; the operator's own
/// command (`/run`, a governed tool call) reads inside the workspace but not outside it and
/// sees only `PATH`; the stdio MCP server runs in a network namespace of its own, with
/// `no_new_privs`, and an environment of `PATH` and what the client gave it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_commands_and_its_mcp_servers_run_in_the_sandbox() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    std::fs::write(project.join("inside.txt"), "inside").unwrap();
    let secret = dirs.outside().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    let (client, asked) = connect(&dirs, |_| PermissionDecision::Approve).await;

    let enforced = &client.initialize_response().meta.as_ref().expect("_meta")["aip44"]["sandbox_enforcement"];
    assert_eq!(enforced["files"]["mechanism"], "landlock", "{enforced}");
    assert_eq!(
        enforced["files"]["mounts"],
        json!([{"path": dirs.workspace_root, "mode": "read-write"}]),
        "the mount narrowed to AGENTACP_WORKSPACE_ROOT: {enforced}"
    );
    assert_eq!(enforced["network"], "namespace", "{enforced}");
    assert_eq!(enforced["gaps"], json!([]), "{enforced}");

    let tag = format!("mcp-sandbox-{}", std::process::id());
    let session = session_with(&client, &project, notes_server(&["--tag", &tag])).await;

    let (said, calls) = prompt(&client, &session, "/run cat inside.txt").await;
    assert_eq!(said, ["completed: inside"]);
    assert_eq!(calls.first().unwrap()["kind"], "execute", "{calls:?}");
    let (said, _) = prompt(&client, &session, &format!("/run cat {}", secret.display())).await;
    assert!(
        // Denied by Landlock, or not there at all in the program's own root.
        said[0].starts_with("failed: exited with exit status: 1")
            && (said[0].contains("Permission denied") || said[0].contains("No such file or directory")),
        "{said:?}"
    );
    let (said, _) = prompt(&client, &session, "/run printenv HOME").await;
    assert!(
        said[0].starts_with("failed: exited with exit status: 1"),
        "HOME is not passed: {said:?}"
    );
    let (said, _) = prompt(&client, &session, "/run printenv PATH").await;
    assert!(said[0].starts_with("completed: /"), "{said:?}");
    assert_eq!(
        asked.lock().unwrap().len(),
        4,
        "each run is asked for (on-mutate, execute)"
    );

    // The MCP server, started on first use.
    let (said, _) = prompt(&client, &session, r#"/mcp call notes echo {"text":"confined"}"#).await;
    assert_eq!(said, ["completed: confined"]);
    let pids = processes_tagged(&tag);
    let [pid] = pids[..] else {
        panic!("one MCP server: {pids:?}")
    };
    let namespace = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_ne!(
        namespace(&pid.to_string()),
        namespace("self"),
        "a network namespace of its own"
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.lines().any(|line| line == "NoNewPrivs:\t1"), "{status}");
    assert_eq!(environment_of(pid), ["NOTE_SECRET", "PATH"]);

    client.close().await;
    gone(&tag, "the MCP server outlived the agent").await;
    let runs = tool_records(&dirs.audit_log, "run");
    assert_eq!(runs.len(), 4, "{runs:?}");
    check_audit_log(&dirs.audit_log, |_| true);
}

/// `mcp-test-server --http`: the same tools over streamable HTTP, in `folder`; killed when
/// dropped. Returns it and its URL.
async fn http_notes_server(folder: &Path) -> (tokio::process::Child, String) {
    notes_server_at(folder, &["--http", "127.0.0.1:0"]).await
}

/// `mcp-test-server` started with `args` (`--http`, `--https`) in `folder`, and its URL.
async fn notes_server_at(folder: &Path, args: &[&str]) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-test-server"))
        .args(args)
        .current_dir(folder)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start mcp-test-server --http");
    let stdout = server.stdout.take().expect("its stdout");
    let mut url = String::new();
    tokio::time::timeout(WAIT, tokio::io::BufReader::new(stdout).read_line(&mut url))
        .await
        .expect("its URL in time")
        .expect("its URL");
    (server, url.trim().to_string())
}

/// An MCP server over streamable HTTP (rmcp's server, reached with rmcp's client): listed,
/// called as governed tool calls, audited; the client's headers are accepted; an unreachable
/// URL is reported as unavailable at once, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_mcp_server_is_listed_called_governed_and_audited() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    std::fs::write(project.join("hello.txt"), "hello over http").unwrap();
    let (_server, url) = http_notes_server(&project).await;
    let (client, asked) = connect(&dirs, approve_but_keep_out).await;
    let servers = json!([
        {"type": "http", "name": "notes", "url": url, "headers": [{"name": "X-Request-Source", "value": "interop"}]},
        {"type": "http", "name": "gone", "url": "http://127.0.0.1:1/mcp", "headers": []},
    ]);
    let session = session_with(&client, &project, servers).await;

    let started = Instant::now();
    let (listed, _) = prompt(&client, &session, "/mcp tools").await;
    assert_eq!(
        &listed[..4],
        [
            "mcp/notes/echo (other)",
            "mcp/notes/fail (other)",
            "mcp/notes/read_note (read)",
            "mcp/notes/write_note (delete)",
        ]
    );
    assert_eq!(listed.len(), 5, "{listed:?}");
    assert!(
        listed[4].starts_with("unavailable: gone: MCP initialize over HTTP at `http://127.0.0.1:1/mcp` failed"),
        "{listed:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "an unreachable server is not waited on for the whole connect limit"
    );

    let (said, calls) = prompt(&client, &session, r#"/mcp call notes read_note {"name":"hello.txt"}"#).await;
    assert_eq!(said, ["completed: hello over http"]);
    assert_eq!(calls.last().unwrap()["status"], "completed", "{calls:?}");
    let (said, _) = prompt(
        &client,
        &session,
        r#"/mcp call notes write_note {"name":"keep-out.txt","text":"no"}"#,
    )
    .await;
    assert!(said[0].starts_with("rejected:"), "{said:?}");
    assert_eq!(*asked.lock().unwrap(), ["mcp/notes/write_note"]);
    client.close().await;
    assert_eq!(tool_records(&dirs.audit_log, "mcp/notes/read_note").len(), 1);
    check_audit_log(&dirs.audit_log, |_| true);
}

/// An MCP server over `https://` (rmcp's server behind TLS, a self-signed certificate for
/// `localhost`): reached and called when the agent trusts the certificate (`SSL_CERT_FILE`),
/// reported unavailable when it does not — the certificate is checked, not waved through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_mcp_server_is_reached_when_its_certificate_is_trusted_and_refused_otherwise() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    std::fs::write(project.join("hello.txt"), "hello over https").unwrap();
    let cert = dirs.state_dir.join("mcp-server-cert.pem");
    let (_server, url) = notes_server_at(&project, &["--https", "127.0.0.1:0", cert.to_str().unwrap()]).await;
    assert!(url.starts_with("https://localhost:"), "{url}");
    let servers = json!([{"type": "http", "name": "notes", "url": url, "headers": []}]);
    for trusted in [true, false] {
        let mut command = AgentCommand::new(example_binary("sandboxed-server"));
        for (key, value) in dirs.env() {
            command = command.env(key, value);
        }
        if trusted {
            command = command.env("SSL_CERT_FILE", &cert);
        }
        let options = ClientOptions::default().with_workspace_root(dirs.workspace_root.clone());
        let client = tokio::time::timeout(WAIT, Client::connect(command, options))
            .await
            .expect("started in time")
            .expect("started");
        let session = session_with(&client, &project, servers.clone()).await;
        let (said, _) = prompt(&client, &session, r#"/mcp call notes read_note {"name":"hello.txt"}"#).await;
        if trusted {
            assert_eq!(said, ["completed: hello over https"]);
        } else {
            assert!(
                said[0].contains("the MCP server `notes` could not be connected"),
                "{said:?}"
            );
            assert!(
                !said[0].starts_with("completed"),
                "an untrusted certificate was accepted: {said:?}"
            );
        }
        client.close().await;
    }
}

/// The reference MCP server from npm (`@modelcontextprotocol/server-everything`, installed in
/// `interop/mcp-npm` by `.ci/run`), or `None` (the test skips, saying so) without it or Node.
fn everything_server() -> Option<std::path::PathBuf> {
    let package =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp-npm/node_modules/@modelcontextprotocol/server-everything");
    let found = package.join("dist/index.js").is_file()
        && std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success());
    if !found {
        interop::skip_without_peer(
            "the npm MCP server is not installed (npm ci --prefix interop/mcp-npm) or node is absent",
        );
    }
    found.then_some(package)
}

/// Copies the folder `from` into `to` (files and folders; symbolic links as they are).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&source, &target);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source).unwrap(), &target).unwrap();
        } else {
            std::fs::copy(&source, &target).unwrap();
        }
    }
}

/// A free TCP port on the loopback (bound, then released for the server to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A real, third-party MCP server (Node, from npm): over stdio it runs inside the sandbox —
/// from the workspace, since the sandbox lets it read nothing else of the machine — and over
/// streamable HTTP (started by the test). Under the name `notes`, the example's OPERATOR.md
/// allows its `echo`: listed and called; its other tools are denied, so not listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_npm_mcp_server_works_over_stdio_in_the_sandbox_and_over_http() {
    let Some(package) = everything_server() else {
        return;
    };
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let installed = project.join("mcp-npm");
    copy_tree(&package.join("../../"), &installed.join("node_modules"));
    let script = installed.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");

    let port = free_port();
    let mut http = tokio::process::Command::new("node")
        .arg(package.join("dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the npm server over HTTP");
    // Ready once it says it listens (bounded).
    {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(http.stderr.take().unwrap()).lines();
        let listening = tokio::time::timeout(WAIT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("listening") {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(listening, Ok(true), "the npm server did not start over HTTP");
    }

    let (client, _) = connect(&dirs, |_| PermissionDecision::Approve).await;
    for (how, servers) in [
        (
            "stdio",
            json!([{"name": "notes", "command": "node", "args": [script, "stdio"], "env": []}]),
        ),
        (
            "http",
            json!([{"type": "http", "name": "notes", "url": format!("http://127.0.0.1:{port}/mcp"), "headers": []}]),
        ),
    ] {
        let session = session_with(&client, &project, servers).await;
        let (listed, _) = prompt(&client, &session, "/mcp tools").await;
        assert_eq!(listed, ["mcp/notes/echo (read)"], "{how}");
        let (said, calls) = prompt(
            &client,
            &session,
            r#"/mcp call notes echo {"message":"from the sandbox"}"#,
        )
        .await;
        assert_eq!(said, ["completed: Echo: from the sandbox"], "{how}");
        assert_eq!(calls.last().unwrap()["status"], "completed", "{how}: {calls:?}");
        let (said, _) = prompt(&client, &session, "/mcp call notes get-env {}").await;
        assert!(said[0].starts_with("denied:"), "{how}: {said:?}");
    }
    client.close().await;
    assert_eq!(tool_records(&dirs.audit_log, "mcp/notes/echo").len(), 2);
    check_audit_log(&dirs.audit_log, |_| true);
}

/// An agent that does not advertise `mcpCapabilities.acp` (the governance-aware example) is
/// not offered the client's MCP-over-ACP servers: `session/new` goes out without them, and the
/// session opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_mcp_servers_over_acp_are_left_out_for_an_agent_without_it() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let sent: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = sent.clone();
    let mut command = AgentCommand::new(example_binary("governed-server"));
    for (key, value) in dirs.env() {
        command = command.env(key, value);
    }
    let folder = project.clone();
    let options = ClientOptions::default()
        .with_workspace_root(dirs.workspace_root.clone())
        .with_mcp_over_acp("notes", move || Notes { folder: folder.clone() })
        .with_wire_tap(move |direction, line| {
            let message: Value = serde_json::from_slice(line).unwrap_or_default();
            if direction == Direction::ToAgent && message["method"] == "session/new" {
                seen.lock().unwrap().push(message["params"]["mcpServers"].clone());
            }
        });
    let client = tokio::time::timeout(WAIT, Client::connect(command, options))
        .await
        .expect("started in time")
        .expect("started");
    assert!(!client.takes_mcp_over_acp());
    session_with(&client, &project, json!([])).await;
    assert_eq!(*sent.lock().unwrap(), [json!([])]);
    client.close().await;
}

// ---- MCP-over-ACP through a bridge ------------------------------------------------------------

/// A sandboxed bridge (tests/operators/mcp-bridge): of the editor's MCP server `notes`, the
/// agent may use `read_note`, `write_note`, `echo` and `roots`, each asked of the editor.
#[acp_operator(manifest = "tests/operators/mcp-bridge/ACP.md")]
struct McpBridge {
    agent: AgentCommand,
}

impl McpBridgeBridge for McpBridge {
    fn downstream(&self) -> AgentCommand {
        self.agent.clone()
    }
}

/// [`McpBridge`] whose agent keeps the network (tests/operators/mcp-bridge-open: egress to a
/// named host, best effort), so it can reach the bridge's loopback HTTP endpoint.
#[acp_operator(manifest = "tests/operators/mcp-bridge-open/ACP.md")]
struct OpenMcpBridge {
    agent: AgentCommand,
}

impl OpenMcpBridgeBridge for OpenMcpBridge {
    fn downstream(&self) -> AgentCommand {
        self.agent.clone()
    }
}

/// A bridge served over WebSocket on loopback in front of `agent`, auditing to `audit`.
struct BridgeInFront {
    url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<agentacp::Result<()>>,
}

impl BridgeInFront {
    async fn start(agent: AgentCommand, audit: &Path) -> BridgeInFront {
        BridgeInFront::start_with(agent, audit, BridgeOptions::default()).await
    }

    /// [`BridgeInFront::start`] with these `options` (but the audit log).
    async fn start_with(agent: AgentCommand, audit: &Path, options: BridgeOptions) -> BridgeInFront {
        BridgeInFront::serve(McpBridge { agent }, audit, options).await
    }

    /// `bridge` served with these `options` (but the audit log, `audit`).
    async fn serve(
        bridge: impl agentacp::bridge::BridgeOperator + agentacp::server::OffersWebSocket,
        audit: &Path,
        options: BridgeOptions,
    ) -> BridgeInFront {
        let listen = ListenOptions::new("127.0.0.1:0".parse().unwrap());
        let listener = BridgeListener::bind(listen).await.expect("the bridge listens");
        let url = format!("ws://{}/acp", listener.local_addr().unwrap());
        let options = BridgeOptions {
            audit: Some(AuditLog::open(audit, FsyncPolicy::Never).unwrap()),
            ..options
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(listener.serve(bridge, options, async {
            let _ = stopped.await;
        }));
        BridgeInFront { url, stop, task }
    }

    /// Our client as the editor, through the bridge; permission requests go to `decide` and
    /// are counted by their title.
    async fn editor(
        &self,
        options: ClientOptions,
        decide: fn(&wire::RequestPermissionRequest) -> PermissionDecision,
    ) -> (Client, Arc<Mutex<Vec<String>>>) {
        let asked: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = asked.clone();
        let options = options.with_permission(move |request: wire::RequestPermissionRequest| {
            seen.lock()
                .unwrap()
                .push(request.tool_call.title.clone().unwrap_or_default());
            let held = held_question(&request);
            let decision = decide(&request);
            async move {
                match held {
                    // Never answered: only the asker's cancel ends it (our client drops it).
                    Some(()) => std::future::pending().await,
                    None => decision,
                }
            }
        });
        let client = tokio::time::timeout(WAIT, Client::connect_websocket(Dial::new(&self.url), options))
            .await
            .expect("connected in time")
            .expect("connected");
        (client, asked)
    }

    /// [`BridgeInFront::editor`], offering the MCP server `notes` (on `project`) over ACP;
    /// its MCP-over-ACP messages are tapped ([`mcp_tap`]) into the third value.
    async fn notes_editor(
        &self,
        dirs: &AgentDirs,
        project: &Path,
        decide: fn(&wire::RequestPermissionRequest) -> PermissionDecision,
    ) -> (Client, Arc<Mutex<Vec<String>>>, Arc<Mutex<Vec<String>>>) {
        let folder = project.to_path_buf();
        let methods: Arc<Mutex<Vec<String>>> = Arc::default();
        let options = ClientOptions::default()
            .with_workspace_root(dirs.workspace_root.clone())
            .with_mcp_over_acp("notes", move || Notes { folder: folder.clone() })
            .with_wire_tap(mcp_tap(methods.clone()));
        let (client, asked) = self.editor(options, decide).await;
        (client, asked, methods)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the bridge stopped in time")
            .unwrap()
            .expect("the bridge stopped cleanly");
    }
}

/// The editor's MCP messages over ACP, as `Direction method inner-method`, and its
/// cancellations (`Direction $/cancel_request`).
fn mcp_tap(seen: Arc<Mutex<Vec<String>>>) -> impl Fn(Direction, &[u8]) + Send + Sync + 'static {
    move |direction, line| {
        let message: Value = serde_json::from_slice(line).unwrap_or_default();
        let method = message["method"].as_str();
        if let Some(method) = method.filter(|m| m.starts_with("mcp/") || *m == "$/cancel_request") {
            let inner = message["params"]["method"].as_str().unwrap_or_default();
            let name = message["params"]["params"]["name"].as_str().unwrap_or_default();
            seen.lock()
                .unwrap()
                .push(format!("{direction:?} {method} {inner} {name}").trim_end().to_string());
        }
    }
}

/// The editor's MCP servers over ACP pass a sandboxed bridge, governed by it. The agent is a
/// server of this runtime with `examples/sandboxed-server`'s commands and governance
/// (`nested-agent`), whose own sandbox is best effort: a required one cannot be nested in the
/// bridge's (see the next test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editors_mcp_servers_over_acp_pass_a_sandboxed_bridge_governed_by_it() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    std::fs::write(project.join("hello.txt"), "hello through the bridge").unwrap();
    let bridge_audit = dirs.state_dir.join("bridge.jsonl");
    let mut agent = AgentCommand::new(env!("CARGO_BIN_EXE_nested-agent"));
    for (key, value) in dirs.env() {
        agent = agent.env(key, value);
    }
    let bridge = BridgeInFront::start(agent, &bridge_audit).await;
    let (client, asked, methods) = bridge.notes_editor(&dirs, &project, approve_but_keep_out).await;
    assert!(
        client.takes_mcp_over_acp(),
        "the sandboxed bridge advertises mcpCapabilities.acp when its agent does"
    );
    let session = session_with(&client, &project, json!([])).await;

    // `fail` is the bridge's to deny: the agent never sees it listed.
    let (listed, _) = prompt(&client, &session, "/mcp tools").await;
    assert_eq!(
        listed,
        [
            "mcp/notes/echo (other)",
            "mcp/notes/read_note (read)",
            "mcp/notes/write_note (delete)",
        ]
    );
    // The agent reads without asking; the bridge asks the editor, and then shows the result.
    let (said, calls) = prompt(&client, &session, r#"/mcp call notes read_note {"name":"hello.txt"}"#).await;
    assert_eq!(said, ["completed: hello through the bridge"]);
    assert_eq!(calls.last().unwrap()["status"], "completed", "{calls:?}");
    // The agent asks to write; the bridge does not ask a second time for the same call.
    let (said, _) = prompt(
        &client,
        &session,
        r#"/mcp call notes write_note {"name":"new.txt","text":"bridged"}"#,
    )
    .await;
    assert_eq!(said, ["completed: wrote 7 bytes to new.txt"]);
    assert_eq!(std::fs::read_to_string(project.join("new.txt")).unwrap(), "bridged");
    let (said, _) = prompt(
        &client,
        &session,
        r#"/mcp call notes write_note {"name":"keep-out.txt","text":"no"}"#,
    )
    .await;
    assert!(said[0].starts_with("rejected"), "{said:?}");
    assert!(!project.join("keep-out.txt").exists());
    assert_eq!(
        *asked.lock().unwrap(),
        [
            "Call `read_note` on the MCP server `notes`",
            "mcp/notes/write_note",
            "mcp/notes/write_note"
        ]
    );
    client.close().await;
    bridge.stop().await;

    let methods = methods.lock().unwrap().clone();
    let calls: Vec<&String> = methods.iter().filter(|m| m.contains("tools/call")).collect();
    assert_eq!(
        calls,
        [
            "FromAgent mcp/message tools/call read_note",
            "FromAgent mcp/message tools/call write_note"
        ],
        "{methods:?}"
    );
    // The bridge's audit: each call over ACP with its approval, the chain whole.
    let records = |tool: &str| tool_records(&bridge_audit, tool);
    let read = records("mcp/notes/read_note");
    assert!(
        read.iter()
            .any(|r| r["metadata"]["aip44"]["approval"]["approvedBy"] == "client:agentacp"),
        "{read:?}"
    );
    // The agent reported the read as its tool call, and the bridge passed it over ACP: of the
    // two records of that one call, the bridge's own names the agent's report.
    let linked: Vec<&Value> = read
        .iter()
        .filter(|r| r["metadata"]["agentacp"]["reportedAs"].is_string())
        .collect();
    assert_eq!(linked.len(), 1, "{read:?}");
    let report = &linked[0]["metadata"]["agentacp"]["reportedAs"];
    assert!(
        read.iter().any(|r| r["subject"]["ref"] == *report),
        "the report it names is recorded: {read:?}"
    );
    let writes = records("mcp/notes/write_note");
    assert!(
        writes
            .iter()
            .any(|r| r["metadata"]["aip44"]["approval"]["rejectedBy"].is_string()),
        "{writes:?}"
    );
    check_audit_log(&bridge_audit, |_| true);
    check_audit_log(&dirs.audit_log, |_| true);
}

/// A server whose SANDBOX.md requires enforcement (`examples/sandboxed-server`) does not start
/// as a sandboxed bridge's agent: confined by the bridge's Landlock, it may not mount, so its
/// own programs could get no root of their own, and it refuses to start, naming the gaps
/// (`chmod`, `utime`, `xattr`, `chown`); the editor gets that error, not a server running
/// less confined than it declares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_sandbox_cannot_be_nested_in_a_sandboxed_bridge_and_says_why() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let bridge_audit = dirs.state_dir.join("bridge.jsonl");
    let mut agent = AgentCommand::new(example_binary("sandboxed-server"));
    for (key, value) in dirs.env() {
        agent = agent.env(key, value);
    }
    let bridge = BridgeInFront::start(agent, &bridge_audit).await;
    let options = ClientOptions::default().with_workspace_root(dirs.workspace_root.clone());
    let connected = tokio::time::timeout(WAIT, Client::connect_websocket(Dial::new(&bridge.url), options))
        .await
        .expect("answered in time");
    let error = match connected {
        Ok(client) => {
            let project = dirs.project("p");
            let opened = tokio::time::timeout(WAIT, client.new_session_with_mcp_servers(&project, json!([])))
                .await
                .expect("session/new answered in time");
            client.close().await;
            opened
                .expect_err("a required sandbox nested in another does not start")
                .to_string()
        }
        Err(error) => error.to_string(),
    };
    bridge.stop().await;
    assert!(
        error.contains("sandbox cannot be enforced") && error.contains("Refusing to run unconfined"),
        "{error}"
    );
    for gap in ["(chmod)", "(utime)", "(xattr)", "(chown)"] {
        assert!(error.contains(gap), "{gap}: {error}");
    }
    assert!(error.contains("this runtime is itself confined"), "{error}");
}

/// An agent that uses the client's MCP server `notes` over ACP on its own: it lists the tools,
/// sends a `write_note` call as a notification (no id, so nothing would govern it), then calls
/// `fail` (which governance denies) and `echo` (which governance asks about), and says what it
/// was answered: the tool names, then each call's error. With the argument `cancel`, after the
/// tool names it calls `echo` instead, cancels that call at once (`$/cancel_request`), and says
/// the answer's error code and message; with `cancel-write-at-once`, the same with a
/// `write_note` of `cancelled.txt` whose cancel goes in the same write as the call. With
/// `approved-twice`, it reports an `echo` call, asks the client's permission for it, then
/// makes that call twice and says each answer.
const UNRULY_AGENT: &str = r#"
import json, sys
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
def ask(id, method, params):
    send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    for line in sys.stdin:
        m = json.loads(line)
        if m.get("id") == id and "method" not in m:
            return m
servers = []
for line in sys.stdin:
    m = json.loads(line)
    method, id = m.get("method"), m.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1,
              "agentCapabilities": {"mcpCapabilities": {"acp": True}}, "authMethods": []}})
    elif method == "session/new":
        servers = [s for s in m["params"]["mcpServers"] if s.get("type") == "acp"]
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        connection = ask(100, "mcp/connect", {"serverId": servers[0]["serverId"]})["result"]["connectionId"]
        def mcp(id, method, params):
            return ask(id, "mcp/message", {"connectionId": connection, "method": method, "params": params})
        mcp(110, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "unruly", "version": "0"}})
        send({"jsonrpc": "2.0", "method": "mcp/message", "params": {"connectionId": connection,
              "method": "notifications/initialized"}})
        tools = mcp(111, "tools/list", {}).get("result", {}).get("tools", [])
        # A call without an id, which would skip what governs requests.
        send({"jsonrpc": "2.0", "method": "mcp/message", "params": {"connectionId": connection,
              "method": "tools/call", "params": {"name": "write_note",
              "arguments": {"name": "sneaky.txt", "text": "unasked"}}}})
        text = " ".join(sorted(t["name"] for t in tools))
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
              "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
        calls = [("fail", {}), ("echo", {"text": "unasked"})]
        if sys.argv[1:] in (["cancel"], ["cancel-write-at-once"]):
            # An asked call, cancelled at once: only the answer's code and message are said.
            calls, text = [], None
            call = {"jsonrpc": "2.0", "id": 120, "method": "mcp/message", "params": {"connectionId": connection,
                    "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "cancel me"}}}}
            cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 120}}
            if sys.argv[1:] == ["cancel"]:
                send(call)
                send(cancel)
            else:
                call["params"]["params"] = {"name": "write_note", "arguments": {"name": "cancelled.txt", "text": "x"}}
                sys.stdout.write(json.dumps(call) + "\n" + json.dumps(cancel) + "\n"); sys.stdout.flush()
            for line in sys.stdin:
                a = json.loads(line)
                if a.get("id") == 120 and "method" not in a:
                    text = "%s %s" % (a.get("error", {}).get("code"), a.get("error", {}).get("message", "no error"))
                    break
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
                  "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
        if sys.argv[1:] == ["approved-twice"]:
            # Reports the call `echo` and asks about it, then makes it twice: only the first
            # runs on that answer. Says "ok" or the error of each.
            calls, args = [], {"text": "twice"}
            reported = {"toolCallId": "t0", "title": "echo", "rawInput": args,
                        "_meta": {"aip44": {"tool": "mcp/notes/echo"}}}
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
                  "update": dict(reported, sessionUpdate="tool_call", status="pending")}})
            ask(140, "session/request_permission", {"sessionId": "s1", "toolCall": reported, "options": [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]})
            results = []
            for n in range(2):
                answer = mcp(141 + n, "tools/call", {"name": "echo", "arguments": args})
                results.append(answer.get("error", {}).get("message", "ok"))
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
                  "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": " | ".join(results)}}}})
        for n, (tool, args) in enumerate(calls):
            answer = ask(101 + n, "mcp/message", {"connectionId": connection, "method": "tools/call",
                                                  "params": {"name": tool, "arguments": args}})
            text = answer.get("error", {}).get("message", "no error")
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
                  "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
    elif id is not None and method:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_answers_the_agents_mcp_calls_over_acp_that_governance_denies_or_the_editor_rejects() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let bridge_audit = dirs.state_dir.join("bridge.jsonl");
    let agent = sandboxed_python().args(["-c", UNRULY_AGENT]);
    let bridge = BridgeInFront::start(agent, &bridge_audit).await;
    let (client, asked, methods) = bridge
        .notes_editor(&dirs, &project, |_| PermissionDecision::Reject)
        .await;
    let session = session_with(&client, &project, json!([])).await;
    let (said, _) = prompt(&client, &session, "call them").await;
    assert_eq!(said[0], "echo read_note roots write_note", "`fail` is not listed");
    assert!(said[1].contains("`mcp/notes/fail` is denied by governance"), "{said:?}");
    assert!(
        said[2].contains("`mcp/notes/echo` was not approved by the client"),
        "{said:?}"
    );
    assert_eq!(*asked.lock().unwrap(), ["Call `echo` on the MCP server `notes`"]);
    client.close().await;
    bridge.stop().await;
    assert!(
        !project.join("sneaky.txt").exists(),
        "a call sent as a notification ran"
    );
    let methods = methods.lock().unwrap().clone();
    assert!(methods.iter().any(|m| m == "FromAgent mcp/connect"), "{methods:?}");
    assert!(
        !methods.iter().any(|m| m.contains("tools/call")),
        "a refused call reached the editor: {methods:?}"
    );
    let fail = tool_records(&bridge_audit, "mcp/notes/fail");
    assert_eq!(fail.len(), 1, "{fail:?}");
    assert_eq!(
        fail[0]["metadata"]["aip44"]["approval"]["deniedBy"], "governance",
        "{fail:?}"
    );
    let echo = tool_records(&bridge_audit, "mcp/notes/echo");
    assert_eq!(echo.len(), 1, "{echo:?}");
    assert!(
        echo[0]["metadata"]["aip44"]["approval"]["rejectedBy"].is_string(),
        "{echo:?}"
    );
    check_audit_log(&bridge_audit, |_| true);
}

/// The agent asks the editor about a call it reports (the editor approves), then makes that
/// MCP call twice: the first runs on the answer, unasked; the second is asked again. An
/// answer approves one call. Before, the approval stood for every identical call while the
/// report stayed open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_the_agent_got_for_an_mcp_call_lets_it_run_once_through_the_bridge() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let bridge_audit = dirs.state_dir.join("bridge.jsonl");
    let agent = sandboxed_python().args(["-c", UNRULY_AGENT, "approved-twice"]);
    let bridge = BridgeInFront::start(agent, &bridge_audit).await;
    let (client, asked, methods) = bridge
        .notes_editor(&dirs, &project, |_| PermissionDecision::Approve)
        .await;
    let session = session_with(&client, &project, json!([])).await;
    let (said, _) = prompt(&client, &session, "ask once, call twice").await;
    client.close().await;
    bridge.stop().await;
    assert_eq!(said[1], "ok | ok", "{said:?}");
    assert_eq!(
        *asked.lock().unwrap(),
        ["echo", "Call `echo` on the MCP server `notes`"],
        "the agent's question, then the bridge's for the second call"
    );
    let calls = methods
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.contains("tools/call echo"))
        .count();
    assert_eq!(calls, 2, "{methods:?}");
    check_audit_log(&bridge_audit, |_| true);
}

/// The agent cancels (`$/cancel_request`) an MCP call over ACP that the bridge holds while it
/// asks the editor: the bridge answers the call `-32800` and cancels its permission request at
/// the editor; the call never reaches the editor, and its record says the agent cancelled it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_agent_cancels_while_the_bridge_asks_about_it_is_cancelled_at_the_editor_and_never_runs() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let bridge_audit = dirs.state_dir.join("bridge.jsonl");
    let agent = sandboxed_python().args(["-c", UNRULY_AGENT, "cancel"]);
    let bridge = BridgeInFront::start(agent, &bridge_audit).await;
    // The editor answers no permission request until the test lets it.
    let release = Arc::new(tokio::sync::Notify::new());
    let lines: Arc<Mutex<Vec<(Direction, Value)>>> = Arc::default();
    let folder = project.clone();
    let tap = {
        let lines = lines.clone();
        move |direction: Direction, line: &[u8]| {
            let message = serde_json::from_slice(line).unwrap_or_default();
            lines.lock().unwrap().push((direction, message));
        }
    };
    let held = release.clone();
    let options = ClientOptions::default()
        .with_workspace_root(dirs.workspace_root.clone())
        .with_mcp_over_acp("notes", move || Notes { folder: folder.clone() })
        .with_wire_tap(tap)
        .with_permission(move |_: wire::RequestPermissionRequest| {
            let held = held.clone();
            async move {
                held.notified().await;
                PermissionDecision::Reject
            }
        });
    let client = tokio::time::timeout(WAIT, Client::connect_websocket(Dial::new(&bridge.url), options))
        .await
        .expect("connected in time")
        .expect("connected");
    let session = session_with(&client, &project, json!([])).await;
    let (said, _) = prompt(&client, &session, "call it and cancel it").await;
    assert_eq!(
        said,
        [
            "echo read_note roots write_note",
            "-32800 the MCP tool `mcp/notes/echo` was cancelled before the editor answered"
        ]
    );
    {
        let lines = lines.lock().unwrap();
        let from_bridge = |method: &str| {
            lines
                .iter()
                .filter(|(direction, message)| matches!(direction, Direction::FromAgent) && message["method"] == method)
                .map(|(_, message)| message.clone())
                .collect::<Vec<Value>>()
        };
        let asked = from_bridge("session/request_permission");
        assert_eq!(asked.len(), 1, "the editor was asked once: {asked:?}");
        let cancels = from_bridge("$/cancel_request");
        assert_eq!(
            cancels
                .iter()
                .map(|c| c["params"]["requestId"].clone())
                .collect::<Vec<_>>(),
            [asked[0]["id"].clone()],
            "the bridge cancelled its permission request, and nothing else reached the editor"
        );
        assert!(
            !from_bridge("mcp/message")
                .iter()
                .any(|m| m["params"]["method"] == "tools/call"),
            "the cancelled call reached the editor"
        );
    }
    release.notify_one();
    client.close().await;
    bridge.stop().await;
    let echo = tool_records(&bridge_audit, "mcp/notes/echo");
    assert_eq!(echo.len(), 1, "{echo:?}");
    let approval = &echo[0]["metadata"]["aip44"]["approval"];
    assert_eq!(approval["rejectedBy"], "agentacp", "{echo:?}");
    assert!(
        approval["reason"]
            .as_str()
            .is_some_and(|r| r.contains("cancelled by the agent")),
        "{echo:?}"
    );
    check_audit_log(&bridge_audit, |_| true);
}

/// What the bridge's manifest says, as a client's own governance binding: of `notes`,
/// `read_note`, `write_note` and `echo`, each asked.
fn notes_governance() -> agentacp::governance::ManifestGovernance {
    let operator = json!({"tools": [{"kind": "mcp", "server": "notes", "allow": ["read_note", "write_note", "echo"]}]});
    let workspace = json!({"autonomy": {"level": 2, "defaultApproval": "always"}});
    agentacp::governance::ManifestGovernance::from_documents(Some(&operator), Some(&workspace))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_governs_and_audits_the_agents_calls_of_its_own_mcp_tools_over_acp() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let audit = dirs.state_dir.join("client.jsonl");
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = asked.clone();
    let methods: Arc<Mutex<Vec<String>>> = Arc::default();
    let folder = project.clone();
    let options = ClientOptions::default()
        .with_workspace_root(dirs.workspace_root.clone())
        .with_mcp_over_acp("notes", move || Notes { folder: folder.clone() })
        .with_governance(notes_governance())
        .with_audit(AuditLog::open(&audit, FsyncPolicy::Never).unwrap())
        .with_wire_tap(mcp_tap(methods.clone()))
        .with_permission(move |request: wire::RequestPermissionRequest| {
            seen.lock()
                .unwrap()
                .push(request.tool_call.title.clone().unwrap_or_default());
            async move { PermissionDecision::Reject }
        });
    let agent = AgentCommand::new("python3").args(["-c", UNRULY_AGENT]);
    let client = tokio::time::timeout(WAIT, Client::connect(agent, options))
        .await
        .expect("started in time")
        .expect("started");
    let session = session_with(&client, &project, json!([])).await;
    let (said, _) = prompt(&client, &session, "call them").await;
    assert_eq!(said[0], "echo read_note write_note", "`fail` is not listed");
    assert!(
        said[1].contains("`mcp/notes/fail` was not allowed by the client"),
        "{said:?}"
    );
    assert!(
        said[2].contains("`mcp/notes/echo` was not allowed by the client"),
        "{said:?}"
    );
    assert_eq!(*asked.lock().unwrap(), ["Call `echo` on the MCP server `notes`"]);
    client.close().await;
    // Every call reached the client, which answered them (and dropped the one without an id)
    // without running them.
    assert!(
        !project.join("sneaky.txt").exists(),
        "a call sent as a notification ran"
    );
    let calls: Vec<String> = methods
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.contains("tools/call"))
        .cloned()
        .collect();
    assert_eq!(
        calls,
        [
            "FromAgent mcp/message tools/call write_note",
            "FromAgent mcp/message tools/call fail",
            "FromAgent mcp/message tools/call echo"
        ]
    );
    let fail = tool_records(&audit, "mcp/notes/fail");
    assert_eq!(fail.len(), 1, "{fail:?}");
    assert_eq!(
        fail[0]["metadata"]["aip44"]["approval"]["deniedBy"], "governance",
        "{fail:?}"
    );
    let echo = tool_records(&audit, "mcp/notes/echo");
    assert_eq!(echo.len(), 1, "{echo:?}");
    assert_eq!(
        echo[0]["metadata"]["aip44"]["approval"]["rejectedBy"], "user",
        "{echo:?}"
    );
    check_audit_log(&audit, |_| true);
}

/// A client without governance runs the agent's calls of its own MCP tools without asking;
/// one the agent cancels in the same write that sends it (read together by the client, whose
/// single-threaded runtime runs the call's task only after reading the cancel) is refused
/// `-32800` and never reaches the server. Before, it was sent to the server, and the cancel
/// came behind it: the note was written.
#[tokio::test]
async fn a_call_the_agent_cancels_before_the_client_reads_it_never_reaches_the_clients_mcp_server() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let audit = dirs.state_dir.join("client.jsonl");
    let folder = project.clone();
    let options = ClientOptions::default()
        .with_workspace_root(dirs.workspace_root.clone())
        .with_mcp_over_acp("notes", move || Notes { folder: folder.clone() })
        .with_audit(AuditLog::open(&audit, FsyncPolicy::Never).unwrap());
    let agent = AgentCommand::new("python3").args(["-c", UNRULY_AGENT, "cancel-write-at-once"]);
    let client = tokio::time::timeout(WAIT, Client::connect(agent, options))
        .await
        .expect("started in time")
        .expect("started");
    let session = session_with(&client, &project, json!([])).await;
    let (said, _) = prompt(&client, &session, "write and cancel").await;
    client.close().await;
    assert!(said[1].starts_with("-32800 "), "{said:?}");
    assert!(!project.join("cancelled.txt").exists(), "the cancelled call ran");
    let writes = tool_records(&audit, "mcp/notes/write_note");
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(
        writes[0]["metadata"]["aip44"]["approval"]["rejectedBy"], "agent",
        "{writes:?}"
    );
    check_audit_log(&audit, |_| true);
}

// ---- MCP-over-ACP translated by a bridge for an agent without it --------------------------------

/// An agent that does not take MCP-over-ACP: it advertises `mcpCapabilities.http` when started
/// with `http`, nothing otherwise, and uses the servers it is given with plain MCP (over HTTP
/// with the headers given, or by starting the stdio server). It says what it was given, then
/// (HTTP) what a request without the header and one with another token get, the tools listed, and each call's text or
/// error: `read_note` of `hello.txt`, `fail`, `write_note` of `keep-out.txt`.
const PLAIN_MCP_AGENT: &str = r#"
import json, os, queue, socket, subprocess, sys, threading, time, urllib.request, urllib.error
HTTP = sys.argv[1:] == ["http"]
def wait_for(path, timeout=30):
    """Whether the file `path` appears within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
def say(text):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
          "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
class Http:
    def __init__(self, server):
        self.url = server["url"]
        self.headers = {h["name"]: h["value"] for h in server.get("headers", [])}
        self.session = None
    def post(self, message, headers):
        request = urllib.request.Request(self.url, data=json.dumps(message).encode(), method="POST",
            headers=dict(headers, **{"Content-Type": "application/json",
                                     "Accept": "application/json, text/event-stream"}))
        return urllib.request.urlopen(request, timeout=30)
    def status_without_token(self):
        codes = []
        for headers in [{}, {"Authorization": "Bearer acp_not-the-token"}]:
            try:
                self.post({"jsonrpc": "2.0", "id": 0, "method": "ping"}, headers)
                codes.append("no refusal")
            except urllib.error.HTTPError as error:
                codes.append(str(error.code))
        return " ".join(codes)
    def call(self, id, method, params):
        headers = dict(self.headers)
        if self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = "2025-06-18"
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if id is not None:
            message["id"] = id
        with self.post(message, headers) as response:
            self.session = response.headers.get("Mcp-Session-Id") or self.session
            body = response.read().decode()
        if id is None:
            return None
        if body.lstrip().startswith("{"):
            return json.loads(body)
        for line in body.splitlines():
            if line.startswith("data:") and line[5:].strip():
                m = json.loads(line[5:])
                if m.get("id") == id:
                    return m
    def start(self, id, method, params):
        """Sends a request from a thread of its own, not waiting for its answer."""
        def call():
            try:
                self.call(id, method, params)
            except Exception:
                pass  # a cancelled call's stream is left open until it times out
        threading.Thread(target=call, daemon=True).start()
class Stdio:
    """The server started by the agent; its messages read by a thread of their own, the
    requests it makes of the agent answered (`roots/list`), its notifications kept."""
    def __init__(self, server):
        env = {e["name"]: e["value"] for e in server.get("env", [])}
        self.child = subprocess.Popen([server["command"]] + server.get("args", []), env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.told, self.asked_of_us, self.answers = [], [], queue.Queue()
        # With `hold` set, a `roots/list` is left unanswered (its id kept in `held`): the
        # server is to cancel it; the ids of the cancellations it sends go to `cancelled`.
        self.hold, self.held, self.cancelled = False, None, []
        threading.Thread(target=self.read, daemon=True).start()
    def write(self, message):
        self.child.stdin.write(json.dumps(message) + "\n"); self.child.stdin.flush()
    def read(self):
        for line in self.child.stdout:
            m = json.loads(line)
            if "method" in m and "id" in m:
                self.asked_of_us.append(m["method"])
                if m["method"] == "roots/list" and self.hold:
                    self.held = m["id"]
                elif m["method"] == "roots/list":
                    self.write({"jsonrpc": "2.0", "id": m["id"], "result": {"roots": [
                        {"uri": "file:///agent-root", "name": "agent"}]}})
                else:
                    self.write({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}})
            elif "method" in m:
                self.told.append(m["method"])
                if m["method"] == "notifications/cancelled":
                    self.cancelled.append(m["params"].get("requestId"))
                self.answers.put(None)
            else:
                self.answers.put(m)
    def call(self, id, method, params):
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if id is not None:
            message["id"] = id
        self.write(message)
        while id is not None:
            m = self.answers.get(timeout=60)
            if m is not None and m.get("id") == id:
                return m
    def start(self, id, method, params):
        """Sends a request, not waiting for its answer."""
        self.write({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    def wait_told(self, method, timeout=60):
        try:
            while method not in self.told:
                self.answers.get(timeout=timeout)
            return True
        except queue.Empty:
            return False
def socket_without_token(server):
    """What the shims' socket does with a connection that sends another token, then MCP."""
    path = {e["name"]: e["value"] for e in server["env"]}["AGENTACP_MCP_SHIM_SOCKET"]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(path)
    sock.sendall(b"acp_not-the-token\n" + json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "intruder", "version": "0"}}}).encode() + b"\n")
    answer = sock.recv(65536)
    sock.close()
    return ("closed " if answer == b"" else "answered ") + path
server = None
for line in sys.stdin:
    m = json.loads(line)
    method, id = m.get("method"), m.get("id")
    if method == "initialize":
        mcp = {"http": True} if HTTP else {}
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1,
              "agentCapabilities": {"mcpCapabilities": mcp, "sessionCapabilities": {"close": {}}},
              "authMethods": []}})
    elif method == "session/new":
        server, cwd = m["params"]["mcpServers"][0], m["params"]["cwd"]
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
    elif method == "session/close":
        send({"jsonrpc": "2.0", "id": id, "result": {}})
    elif method == "session/prompt":
        if "url" in server:
            host = server["url"].split("/")[2].split(":")[0]
            say("http %s %s %s" % (server["name"], host, server["headers"][0]["value"].split(" ")[0]))
            mcp = Http(server)
            say(mcp.status_without_token())
        else:
            say("stdio %s %s" % (server["name"], sorted(e["name"] for e in server["env"])))
            say(socket_without_token(server))
            mcp = Stdio(server)
        capabilities = {} if HTTP else {"roots": {"listChanged": False}}
        mcp.call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": capabilities,
                                   "clientInfo": {"name": "plain", "version": "0"}})
        mcp.call(None, "notifications/initialized", {})
        tools = mcp.call(2, "tools/list", {}).get("result", {}).get("tools", [])
        say(" ".join(sorted(t["name"] for t in tools)))
        for n, (tool, args) in enumerate([("read_note", {"name": "hello.txt"}), ("fail", {}),
                                          ("write_note", {"name": "keep-out.txt", "text": "no"})]):
            answer = mcp.call(3 + n, "tools/call", {"name": tool, "arguments": args})
            if "error" in answer:
                say("error: " + answer["error"]["message"])
            else:
                say("result: " + answer["result"]["content"][0]["text"])
        if not HTTP:
            # The editor's server asks the agent for its roots, and tells it its tools changed.
            answer = mcp.call(6, "tools/call", {"name": "roots", "arguments": {}})
            mcp.wait_told("notifications/tools/list_changed")
            say("roots: %s; asked of the agent: %s; told: %s" % (
                answer.get("result", {}).get("content", [{}])[0].get("text", answer.get("error")),
                " ".join(mcp.asked_of_us), " ".join(mcp.told)))
            # It asks again and cancels at once: the agent is told, naming the request it got.
            mcp.hold = True
            answer = mcp.call(7, "tools/call", {"name": "roots", "arguments": {"cancel": True}})
            told = mcp.wait_told("notifications/cancelled", timeout=15)
            say("roots cancelled: %s; the held request cancelled: %s" % (
                answer.get("result", {}).get("content", [{}])[0].get("text", answer.get("error")),
                told and mcp.held is not None and mcp.cancelled == [mcp.held]))
        # Two calls it cancels: one while the bridge asks the editor about it (the editor
        # holds that question and says so with a file), one while it runs at the editor's
        # server (which says so with a file, and leaves another when it is cancelled).
        question = os.path.join(cwd, "held-question")
        mcp.start(8, "tools/call", {"name": "echo", "arguments": {"text": question}})
        asked = wait_for(question)
        mcp.call(None, "notifications/cancelled", {"requestId": 8, "reason": "changed my mind"})
        mcp.start(9, "tools/call", {"name": "echo", "arguments": {"text": "held", "hold": True}})
        running = wait_for(os.path.join(cwd, "echo-holding"))
        mcp.call(None, "notifications/cancelled", {"requestId": 9, "reason": "changed my mind"})
        cancelled = wait_for(os.path.join(cwd, "echo-cancelled"))
        say("cancelled while asked: %s; while running: %s; the run told: %s" % (asked, running, cancelled))
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
    elif id is not None and method:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
"#;

/// The editor (our client, offering `notes` over ACP and approving all but writes to
/// `keep-out.txt`) → the sandboxed bridge → [`PLAIN_MCP_AGENT`] started with `transport`: what
/// the agent said, the editor's permission requests, the editor's MCP-over-ACP messages, and
/// the bridge's audit log.
async fn through_a_translating_bridge(
    transport: &str,
) -> (Vec<String>, Vec<String>, Vec<String>, Vec<Value>, AgentDirs) {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    std::fs::write(project.join("hello.txt"), "hello from the editor").unwrap();
    let bridge_audit = dirs.state_dir.join("bridge.jsonl");
    let agent = sandboxed_python()
        .args(["-c", PLAIN_MCP_AGENT, transport])
        .allow_env("PATH");
    let options = BridgeOptions {
        mcp_shim: Some(env!("CARGO_BIN_EXE_mcp-shim").into()),
        ..BridgeOptions::default()
    };
    // The agent runs in the bridge's sandbox. For the loopback HTTP endpoint it must keep the
    // network; the shim reaches the bridge without it.
    let bridge = if transport == "http" {
        BridgeInFront::serve(OpenMcpBridge { agent }, &bridge_audit, options).await
    } else {
        BridgeInFront::start_with(agent, &bridge_audit, options).await
    };
    let (client, asked, methods) = bridge.notes_editor(&dirs, &project, approve_but_keep_out).await;
    assert!(
        client.takes_mcp_over_acp(),
        "a sandboxed bridge advertises mcpCapabilities.acp for an agent without it"
    );
    let session = session_with(&client, &project, json!([])).await;
    let (said, _) = prompt(&client, &session, "use the notes").await;
    // Closed, the session's server is served no more: the bridge disconnects its own MCP
    // connection to the editor's server (from a task of its own, so perhaps after the answer).
    tokio::time::timeout(WAIT, client.close_session(&session))
        .await
        .expect("closed in time")
        .expect("closed");
    let disconnected = || methods.lock().unwrap().iter().any(|m| m == "FromAgent mcp/disconnect");
    let deadline = tokio::time::Instant::now() + WAIT;
    while !disconnected() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(disconnected(), "the bridge kept its MCP connection of a closed session");
    client.close().await;
    bridge.stop().await;
    assert!(!project.join("keep-out.txt").exists(), "a rejected write ran");
    check_audit_log(&bridge_audit, |_| true);
    let records = audit_records(&bridge_audit);
    let mut asked = asked.lock().unwrap().clone();
    let mut methods = methods.lock().unwrap().clone();
    let mut said = said;
    assert_cancelled_through_translation(&mut said, &mut asked, &mut methods, &records, &project);
    (said, asked, methods, records, dirs)
}

/// The agent's last two calls, both to `echo`, which it cancels: the first while the bridge
/// asks the editor about it, the second while it runs at the editor's server. The first is
/// never run: the bridge cancels its question at the editor (which drops it) and records the
/// call rejected; the second is cancelled at the editor's server, over ACP. What they said,
/// asked and sent is then taken out, for the checks the translated calls have in common.
fn assert_cancelled_through_translation(
    said: &mut Vec<String>,
    asked: &mut Vec<String>,
    methods: &mut Vec<String>,
    records: &[Value],
    project: &Path,
) {
    assert_eq!(
        said.pop().as_deref(),
        Some("cancelled while asked: True; while running: True; the run told: True"),
        "{said:?}"
    );
    assert_eq!(std::fs::read_to_string(project.join("echo-cancelled")).unwrap(), "held");
    let echo = "Call `echo` on the MCP server `notes`";
    assert_eq!(asked.iter().filter(|title| *title == echo).count(), 2, "{asked:?}");
    asked.retain(|title| title != echo);
    // Only the second call reached the editor's server; the bridge cancelled two requests at
    // the editor: its question about the first call, and the `mcp/message` of the second.
    let echoed = "FromAgent mcp/message tools/call echo";
    assert_eq!(methods.iter().filter(|m| *m == echoed).count(), 1, "{methods:?}");
    let cancels = "FromAgent $/cancel_request";
    assert_eq!(methods.iter().filter(|m| *m == cancels).count(), 2, "{methods:?}");
    methods.retain(|m| m != echoed && m != cancels);
    let records: Vec<&Value> = records
        .iter()
        .filter(|r| r["metadata"]["aip44"]["tool"] == "mcp/notes/echo")
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    let approval = &records[0]["metadata"]["aip44"]["approval"];
    assert_eq!(approval["rejectedBy"], "agentacp", "{records:?}");
    assert_eq!(
        approval["reason"], "cancelled by the agent before the editor answered",
        "{records:?}"
    );
    assert_eq!(
        records[1]["metadata"]["aip44"]["approval"]["approvedBy"], "client:agentacp",
        "{records:?}"
    );
    assert_eq!(
        records[1]["metadata"]["aip44"]["error"], "the agent cancelled the call",
        "{records:?}"
    );
}

/// What the translated calls have in common, whichever way the agent reached the bridge: the
/// listing narrowed, the read asked and run, `fail` denied by the bridge, the write to
/// `keep-out.txt` rejected by the editor; only the read reached the editor; each audited.
fn assert_governed_through_translation(said: &[String], asked: &[String], methods: &[String], records: &[Value]) {
    assert_eq!(said.len(), 4, "{said:?}");
    assert_eq!(said[0], "echo read_note roots write_note", "`fail` is not listed");
    assert_eq!(said[1], "result: hello from the editor");
    assert!(
        said[2].starts_with("error: the MCP tool `mcp/notes/fail` is denied by governance"),
        "{said:?}"
    );
    assert!(
        said[3].starts_with("error: the MCP tool `mcp/notes/write_note` was not approved by the client"),
        "{said:?}"
    );
    assert_eq!(
        asked,
        [
            "Call `read_note` on the MCP server `notes`",
            "Call `write_note` on the MCP server `notes`"
        ]
    );
    let calls: Vec<&String> = methods.iter().filter(|m| m.contains("tools/call")).collect();
    assert_eq!(calls, ["FromAgent mcp/message tools/call read_note"], "{methods:?}");
    assert!(methods.iter().any(|m| m == "FromAgent mcp/connect"), "{methods:?}");
    let tool = |name: &str| -> Vec<&Value> {
        records
            .iter()
            .filter(|r| r["metadata"]["aip44"]["tool"] == name)
            .collect()
    };
    let read = tool("mcp/notes/read_note");
    assert!(
        read.iter()
            .any(|r| r["metadata"]["aip44"]["approval"]["approvedBy"] == "client:agentacp"),
        "{read:?}"
    );
    // Its `mcp/message` to the editor was recorded before it was sent, as a passing one is;
    // only the approved read was sent.
    let sent: Vec<usize> = (records.iter().enumerate())
        .filter(|(_, r)| r["metadata"]["aip44"]["method"] == "mcp/message")
        .filter(|(_, r)| r["metadata"]["aip44"]["mcpMethod"] == "tools/call")
        .map(|(at, _)| at)
        .collect();
    let sent_as = |name: &str| {
        sent.iter()
            .find(|at| records[**at]["metadata"]["aip44"]["mcpTool"] == name)
    };
    assert!(sent_as("mcp/notes/write_note").is_none() && sent_as("mcp/notes/fail").is_none());
    let read_sent = *sent_as("mcp/notes/read_note").expect("the read's `mcp/message` recorded");
    let read_at = (records.iter())
        .position(|r| r["metadata"]["aip44"]["tool"] == "mcp/notes/read_note")
        .unwrap();
    assert!(
        read_sent < read_at,
        "the call was recorded only after it ran: {records:?}"
    );
    let fail = tool("mcp/notes/fail");
    assert_eq!(fail.len(), 1, "{fail:?}");
    assert_eq!(fail[0]["metadata"]["aip44"]["approval"]["deniedBy"], "governance");
    let write = tool("mcp/notes/write_note");
    assert!(
        write
            .iter()
            .any(|r| r["metadata"]["aip44"]["approval"]["rejectedBy"] == "client:agentacp"),
        "{write:?}"
    );
}

/// Python, for an agent run in a bridge's sandbox: the interpreter itself (not a shim that
/// `PATH` may name, such as pyenv's) and its installation granted to read, since the sandbox
/// lets a program read only the system's folders and the mounts.
fn sandboxed_python() -> AgentCommand {
    let (program, prefix) = python();
    AgentCommand::new(program).sandbox_read(prefix)
}

/// The Python interpreter `python3` runs, and the folder it is installed in.
fn python() -> (String, String) {
    let output = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable); print(sys.base_prefix)"])
        .output()
        .expect("python3 runs");
    let text = String::from_utf8(output.stdout).unwrap();
    let mut lines = text.lines().map(str::to_string);
    (lines.next().unwrap(), lines.next().unwrap())
}

/// An agent that, asked anything, says whether it can read `argv[1]` (in the workspace) and
/// `argv[2]` (outside it), and connect to TCP port `argv[3]` on loopback.
const CONFINED_AGENT: &str = r#"
import json, socket, sys
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
def say(text):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
          "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
inside, outside, port = sys.argv[1:4]
for line in sys.stdin:
    m = json.loads(line)
    method, id = m.get("method"), m.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1, "agentCapabilities": {},
              "authMethods": []}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        for name, path in [("inside", inside), ("outside", outside)]:
            try:
                say("%s: %s" % (name, open(path).read()))
            except OSError as error:
                say("%s: %s" % (name, type(error).__name__))
        try:
            socket.create_connection(("127.0.0.1", int(port)), timeout=5).close()
            say("tcp: connected")
        except OSError as error:
            say("tcp: %s" % type(error).__name__)
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
    elif id is not None and method:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_bridge_runs_its_agent_in_its_sandbox_and_says_so() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    std::fs::write(project.join("hello.txt"), "in the workspace").unwrap();
    let secret = dirs.state_dir.join("secret.txt");
    std::fs::write(&secret, "outside the workspace").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let agent = sandboxed_python().args([
        "-c".as_ref(),
        CONFINED_AGENT.as_ref(),
        project.join("hello.txt").as_os_str(),
        secret.as_os_str(),
        port.as_ref(),
    ]);
    // The workspace mount (`at: /tmp`) narrowed to the project.
    let options = BridgeOptions {
        workspace_root: Some(project.clone()),
        ..BridgeOptions::default()
    };
    let bridge = BridgeInFront::start_with(agent, &dirs.state_dir.join("bridge.jsonl"), options).await;
    let editor = ClientOptions::default().with_workspace_root(dirs.workspace_root.clone());
    let (client, _) = bridge.editor(editor, |_| PermissionDecision::Reject).await;
    let session = session_with(&client, &project, json!([])).await;
    let (said, _) = prompt(&client, &session, "try").await;
    let meta = serde_json::to_value(&client.initialize_response().meta).unwrap();
    client.close().await;
    bridge.stop().await;
    // Denied by Landlock, or not there at all in the agent's own root.
    assert_eq!(said[0], "inside: in the workspace", "{said:?}");
    assert!(
        ["outside: PermissionError", "outside: FileNotFoundError"].contains(&said[1].as_str()),
        "{said:?}"
    );
    assert!(said[2].starts_with("tcp: ") && said[2] != "tcp: connected", "{said:?}");
    // What is enforced, in the bridge's `initialize` answer.
    let enforced = &meta["aip44"]["sandbox_enforcement"];
    assert_eq!(
        enforced["files"]["mounts"],
        json!([{"path": project, "mode": "read-write"}]),
        "{enforced}"
    );
    assert_eq!(enforced["network"], "namespace", "{enforced}");
    assert_eq!(enforced["limits"]["memory_mb"], 1024, "{enforced}");
    // Beyond the mounts, to read and run: the program it may be given as the stdio MCP shim
    // (by default the bridge's own: here, this test), and what the agent's command grants
    // (Python's installation); to connect to Unix sockets in, the folder the shims' socket
    // will be made in (a private folder, made before the agent started).
    let shim = std::env::current_exe().unwrap();
    let granted = enforced["files"]["granted"].as_array().expect("granted");
    assert_eq!(granted.len(), 3, "{enforced}");
    assert_eq!(granted[0], json!({"path": shim, "mode": "read-only"}), "{enforced}");
    assert_eq!(
        granted[2],
        json!({"path": python().1, "mode": "read-only"}),
        "{enforced}"
    );
    assert_eq!(granted[1]["mode"], "connect-unix", "{enforced}");
    let socket_folder = granted[1]["path"].as_str().unwrap();
    assert!(
        socket_folder.contains("agentacp-mcp-"),
        "the shims' private folder: {enforced}"
    );
    // Whether this kernel confines connecting to pathname Unix sockets (Landlock ABI 9), else
    // whether the agent has a root of its own, where only the mounts' sockets exist for it.
    let confined = enforced["files"]["abi"].as_u64().unwrap() >= 9;
    let expected = match (confined, enforced["root"] == "own") {
        (true, _) => "confined",
        (false, true) => "only in the mounts",
        (false, false) => "not confined",
    };
    assert_eq!(enforced["files"]["unix_sockets"], expected, "{enforced}");
}

/// A sandboxed bridge cannot confine an agent it dials over WebSocket: a profile that requires
/// enforcement refuses to serve, naming the gap; a best-effort one serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_bridge_refuses_a_remote_agent_unless_its_profile_accepts_best_effort() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let remote = |log: &str| BridgeOptions {
        connect: Some(Dial::new("ws://127.0.0.1:9/acp")),
        audit: Some(AuditLog::open(&dirs.state_dir.join(log), FsyncPolicy::Never).unwrap()),
        ..BridgeOptions::default()
    };
    let listen = || ListenOptions::new("127.0.0.1:0".parse().unwrap());
    let agent = || AgentCommand::new("true");

    let listener = BridgeListener::bind(listen()).await.expect("the bridge listens");
    let served = listener.serve(McpBridge { agent: agent() }, remote("required.jsonl"), async {});
    let error = tokio::time::timeout(WAIT, served)
        .await
        .expect("answered in time")
        .expect_err("a required sandbox cannot take a remote agent");
    assert!(
        error
            .to_string()
            .contains("the agent is reached over WebSocket, so nothing of it is confined"),
        "{error}"
    );

    let listener = BridgeListener::bind(listen()).await.expect("the bridge listens");
    let served = listener.serve(OpenMcpBridge { agent: agent() }, remote("best-effort.jsonl"), async {});
    tokio::time::timeout(WAIT, served)
        .await
        .expect("stopped in time")
        .expect("a best-effort profile accepts the gap");
}

/// A bridge that dials its agent offers the editor MCP-over-ACP it translates (the agent does
/// not take it) only when the agent is on this machine: one on another machine could not reach
/// the bridge's loopback endpoints. The same agent, listening on every address, dialed once
/// over loopback and once over this machine's other address (which counts as remote).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_offers_translated_mcp_over_acp_only_to_an_agent_it_dials_on_this_machine() {
    let Some(address) = non_loopback_ipv4() else {
        eprintln!("skipped: this machine has no IPv4 address besides loopback");
        return;
    };
    let dirs = AgentDirs::new();
    let token = test_token();
    let mut env = dirs.env();
    env.push(("AGENTACP_TOKEN", token.clone().into()));
    let agent = WsServer::start_on(&example_binary("governed-server"), &env, Ipv4Addr::UNSPECIFIED);
    for (host, offered) in [(Ipv4Addr::LOCALHOST, true), (address, false)] {
        let options = BridgeOptions {
            connect: Some(Dial::new(format!("ws://{host}:{}/acp", agent.port)).token(token.clone())),
            ..BridgeOptions::default()
        };
        let audit = dirs.state_dir.join(format!("bridge-{host}.jsonl"));
        let bridge = BridgeInFront::serve(
            OpenMcpBridge {
                agent: AgentCommand::new("true"),
            },
            &audit,
            options,
        )
        .await;
        let options = ClientOptions::default().with_workspace_root(dirs.workspace_root.clone());
        let (client, _) = bridge.editor(options, approve_but_keep_out).await;
        let initialize = client.initialize_response();
        assert_eq!(
            initialize.agent_info.as_ref().map(|info| info.name.as_str()),
            Some("mcp-bridge-open"),
            "through the bridge"
        );
        assert_eq!(
            client.takes_mcp_over_acp(),
            offered,
            "dialing the agent at {host}: {:?}",
            initialize.agent_capabilities
        );
        client.close().await;
        bridge.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_serves_the_editors_mcp_over_acp_servers_over_http_to_an_agent_without_it() {
    let (said, asked, methods, records, _dirs) = through_a_translating_bridge("http").await;
    // The agent got an `http` server on loopback with a bearer token, and a request without
    // it or with another was refused.
    assert_eq!(said[..2], ["http notes 127.0.0.1 Bearer", "401 401"], "{said:?}");
    assert_governed_through_translation(&said[2..], &asked, &methods, &records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_serves_the_editors_mcp_over_acp_servers_through_a_stdio_shim_to_an_agent_without_http() {
    if !sandbox_enforceable() {
        return;
    }
    let (said, asked, methods, records, _dirs) = through_a_translating_bridge("stdio").await;
    // The agent got the shim, pointed at the bridge's socket; a connection to the socket
    // with another token was closed without an answer.
    assert_eq!(
        said[0], "stdio notes ['AGENTACP_MCP_SHIM_SOCKET', 'AGENTACP_MCP_SHIM_TOKEN']",
        "{said:?}"
    );
    let socket = said[1].strip_prefix("closed ").expect("closed without an answer");
    // The bridge has stopped: its socket and the socket's folder are gone.
    let socket = std::path::Path::new(socket);
    assert!(!socket.exists(), "{} is left behind", socket.display());
    assert!(!socket.parent().unwrap().exists(), "the socket's folder is left behind");
    // Then `roots`: the editor's server asked the agent (through the bridge's endpoint and
    // the shim) for its roots and got the agent's answer, and told it its tools changed.
    assert_eq!(
        said[said.len() - 2],
        "roots: file:///agent-root; asked of the agent: roots/list; told: notifications/tools/list_changed",
        "{said:?}"
    );
    // Asked again, the editor's server cancelled its request at once: the agent, which had
    // not answered, was told so, with the id of the request it got from the bridge.
    assert_eq!(
        said.last().map(String::as_str),
        Some("roots cancelled: cancelled; the held request cancelled: True"),
        "{said:?}"
    );
    let roots = "Call `roots` on the MCP server `notes`";
    assert_eq!(asked.last().map(String::as_str), Some(roots), "{asked:?}");
    let asked: Vec<String> = asked.into_iter().filter(|title| title != roots).collect();
    let methods: Vec<String> = methods
        .into_iter()
        .filter(|m| !m.ends_with("tools/call roots"))
        .collect();
    assert_governed_through_translation(&said[2..said.len() - 2], &asked, &methods, &records);
}

/// An agent with `mcpCapabilities.http` that refuses its first `session/new`, keeping the
/// server it was given for it, and accepts the next; a prompt then tries the refused
/// session's server, with its token, and says the HTTP status.
const REFUSING_AGENT: &str = r#"
import json, sys, urllib.request, urllib.error
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
refused = None
for line in sys.stdin:
    m = json.loads(line)
    method, id = m.get("method"), m.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1,
              "agentCapabilities": {"mcpCapabilities": {"http": True}}, "authMethods": []}})
    elif method == "session/new" and refused is None:
        refused = m["params"]["mcpServers"][0]
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "not now"}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        headers = {h["name"]: h["value"] for h in refused["headers"]}
        headers.update({"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "late", "version": "0"}}}).encode()
        try:
            with urllib.request.urlopen(urllib.request.Request(refused["url"], data=body,
                    method="POST", headers=headers), timeout=30) as response:
                status = str(response.status)
        except urllib.error.HTTPError as error:
            status = str(error.code)
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
              "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": status}}}})
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
    elif id is not None and method:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
"#;

/// The endpoint a translating bridge made for a session request the agent refused is served
/// no more: its token opens nothing (`404`). Before, it stayed, with its token, for as long as
/// the bridge ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_translated_server_of_a_refused_session_request_is_served_no_more() {
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let agent = sandboxed_python().args(["-c", REFUSING_AGENT]).allow_env("PATH");
    let bridge_audit = dirs.state_dir.join("bridge.jsonl");
    let bridge = BridgeInFront::serve(OpenMcpBridge { agent }, &bridge_audit, BridgeOptions::default()).await;
    let (client, _, _) = bridge.notes_editor(&dirs, &project, approve_but_keep_out).await;
    let refused = tokio::time::timeout(WAIT, client.new_session_with_mcp_servers(&project, json!([])))
        .await
        .expect("session/new answered in time");
    assert!(refused.is_err(), "the agent refuses the first session/new");
    let session = session_with(&client, &project, json!([])).await;
    let (said, _) = prompt(&client, &session, "try the refused one").await;
    assert_eq!(said, ["404"], "the refused request's server is still served");
    client.close().await;
    bridge.stop().await;
}

/// Issue #19: the sandboxed example passes `scaffold-aip conform` with its manifest. A `/run`
/// needs approval, so it is the turn the kit cancels and the call it rejects or leaves
/// unanswered. Its denied tools are MCP tools, and the kit's sessions have no MCP servers:
/// `audit.denied-not-on-wire` has nothing to judge.
#[test]
fn the_sandboxed_example_passes_the_conformance_suite_with_its_manifest() {
    if !sandbox_enforceable() {
        return;
    }
    let dirs = AgentDirs::new();
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sandboxed-server/ACP.md");
    let mut config = acp_conform::Config {
        audit_log: Some(acp_conform::AuditSource::File(dirs.audit_log.clone())),
        long_prompt: "/run sleep 30".into(),
        tool_prompts: vec!["/run true".into()],
        ..acp_conform::Config::new(vec![example_binary("sandboxed-server").into()])
    }
    .with_manifest(&manifest)
    .expect("the manifest explains");
    config
        .launch
        .env
        .push(("AGENTACP_AUDIT_LOG".into(), dirs.audit_log.clone().into()));
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(acp_conform::failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    let skipped: Vec<_> = verdicts
        .iter()
        .filter(|v| v.outcome != acp_conform::Outcome::Pass)
        .map(|v| (v.id, &v.outcome))
        .collect();
    assert_eq!(
        skipped.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec!["audit.denied-not-on-wire"],
        "{skipped:#?}"
    );
}
