//! The governed server as an editor runs it: a subprocess spoken to over stdio.

#[path = "../../test-support/stdio_peer.rs"]
mod stdio_peer;

use serde_json::Value;
use stdio_peer::{Scratch, StdioPeer};

/// The governed server started as `program` `args` (the server, or a shell that runs it) with
/// its workspace and state in `scratch` and its audit log there; returns it and the log's path.
fn start_in(scratch: &Scratch, program: &str, args: &[&str]) -> (StdioPeer, std::path::PathBuf) {
    let audit = scratch.path().join("audit.jsonl");
    let server = StdioPeer::spawn(
        std::path::Path::new(program),
        args,
        &[
            ("AGENTACP_WORKSPACE_ROOT", scratch.path()),
            ("AGENTACP_STATE_DIR", scratch.path()),
            ("AGENTACP_AUDIT_LOG", &audit),
        ],
    );
    (server, audit)
}

#[test]
fn an_unlisted_tool_is_denied_unseen_and_audited() {
    let scratch = Scratch::new("governed-server-test");
    let (mut server, audit) = start_in(&scratch, env!("CARGO_BIN_EXE_governed-server"), &[]);
    let (initialized, session) = server.open_session(scratch.path());
    assert_eq!(initialized["agentCapabilities"]["loadSession"], true, "{initialized}");
    // The declared slash commands follow the session/new answer, before any prompt.
    let commands = server.recv();
    assert_eq!(
        commands["params"]["update"]["sessionUpdate"], "available_commands_update",
        "{commands}"
    );
    assert_eq!(
        initialized["_meta"]["aip44"]["tier"], "governance-aware",
        "{initialized}"
    );

    let turn = server.prompt(2, &session, "/tool format-disk {}");
    let kinds: Vec<&str> = turn
        .iter()
        .filter_map(|message| message["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["agent_message_chunk"],
        "no tool call reaches the client: {turn:?}"
    );
    assert!(server.finish().success(), "a closed stdin ends the server cleanly");

    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .expect("the audit log is written")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each record is JSON"))
        .collect();
    let denied = records
        .iter()
        .find(|record| record["action"] == "tool.call")
        .expect("the denied call is recorded");
    assert_eq!(denied["metadata"]["aip44"]["tool"], "format-disk");
    assert_eq!(
        denied["metadata"]["aip44"]["approval"]["deniedBy"], "governance",
        "{denied}"
    );
}

/// Issue #45.5: the manifest's relative `audit.ref` was resolved when the example was built,
/// so the binary wrote into the checkout whatever its environment said. Run with a cleared
/// environment (as an ACP client starts it), it writes the log in the user's state folder,
/// `$XDG_STATE_HOME/agentacp/<id>/audit/…`, and says where at start-up (`info`).
#[test]
fn the_audit_log_is_in_the_users_state_folder_not_where_it_was_built() {
    let scratch = Scratch::new("governed-server-state");
    let state_home = scratch.path().join("state-home");
    let set = |name: &str, value: &std::path::Path| format!("{name}={}", value.display());
    let (home, state, root) = (
        set("HOME", scratch.path()),
        set("XDG_STATE_HOME", &state_home),
        set("AGENTACP_WORKSPACE_ROOT", scratch.path()),
    );
    let binary = env!("CARGO_BIN_EXE_governed-server");
    let args = ["-i", &home, &state, &root, "AGENTACP_LOG=info", binary];
    let mut server = StdioPeer::spawn(std::path::Path::new("/usr/bin/env"), &args, &[]);
    let (_, session) = server.open_session(scratch.path());
    server.prompt(2, &session, "/tool format-disk {}");
    server.close_stdin();
    assert!(server.wait_exit().success());
    let stderr = server.stderr_to_end();

    let log = state_home.join("agentacp/governed-server/audit/governed-server.jsonl");
    let text = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}\n{stderr}", log.display()));
    let records: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect();
    assert!(
        records
            .iter()
            .any(|record| record["metadata"]["aip44"]["tool"] == "format-disk"),
        "{text}"
    );
    agentacp::audit::verify_file(&log).expect("the log verifies");
    assert!(
        stderr.contains("writing the audit log") && stderr.contains(&log.display().to_string()),
        "{stderr}"
    );
}

/// Issue #23.16: every session held a file open for good, so at a low `RLIMIT_NOFILE` new
/// sessions failed and the tools of existing ones too. With 64 descriptors, 300 sessions open,
/// each with history on disk, and the first session's tool still reads its file.
#[test]
fn hundreds_of_sessions_fit_in_a_small_file_descriptor_limit() {
    let scratch = Scratch::new("governed-server-fds");
    std::fs::write(scratch.path().join("notes.txt"), "still readable").unwrap();
    let binary = env!("CARGO_BIN_EXE_governed-server");
    let (mut server, _) = start_in(&scratch, "/bin/sh", &["-c", "ulimit -n 64 && exec \"$0\"", binary]);
    let (_, first) = server.open_session(scratch.path());
    let cwd = scratch.path().to_str().unwrap();
    for id in 10..310u64 {
        server.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}));
        let answer = server.until_answer(id).pop().unwrap();
        let session = answer["result"]["sessionId"].clone();
        assert!(session.is_string(), "session {id}: {answer}");
        // Each one writes history (the prompt and the answer) to its own file.
        server.prompt(1000 + id, &session, "hello");
    }
    let turn = server.prompt(2, &first, r#"/tool read-file {"path":"notes.txt"}"#);
    let text = turn.iter().map(|m| m.to_string()).collect::<String>();
    assert!(text.contains("still readable"), "{text}");
    assert!(server.finish().success());
}

/// The text of the message chunks among `messages`, one string per chunk.
fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str().map(str::to_string))
        .collect()
}

/// Sends request `id` and returns its answer (only updates may come before it).
fn call(server: &mut StdioPeer, id: u64, method: &str, params: Value) -> Value {
    server.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    let mut messages = server.until_answer(id);
    let answer = messages.pop().expect("an answer");
    assert!(
        messages.iter().all(|m| m["method"] == "session/update"),
        "{method}: only updates before the answer: {messages:?}"
    );
    answer
}

/// The session surface `metadata.agentacp` declares: modes and the model option in the
/// session/new answer, the `/summary` command announced and answered, mode and model set by
/// the client and shown by the next echo, `/mode` switched by the operator, `_governed/status`,
/// and session/list, close and resume, which keeps the settings. Changes are audited.
#[test]
fn modes_options_the_command_the_extension_and_the_session_methods() {
    let scratch = Scratch::new("governed-server-surface");
    let (mut server, audit) = start_in(&scratch, env!("CARGO_BIN_EXE_governed-server"), &[]);
    let cwd = scratch.path().to_str().unwrap();
    let initialized = call(&mut server, 0, "initialize", serde_json::json!({"protocolVersion": 1}));
    let sessions = &initialized["result"]["agentCapabilities"]["sessionCapabilities"];
    for method in ["list", "resume", "close"] {
        assert!(sessions[method].is_object(), "{method} is offered: {initialized}");
    }
    assert!(
        sessions.get("delete").is_none(),
        "delete is not declared: {initialized}"
    );

    let opened = call(
        &mut server,
        1,
        "session/new",
        serde_json::json!({"cwd": cwd, "mcpServers": []}),
    );
    let result = &opened["result"];
    let session = result["sessionId"].as_str().expect("a session id").to_string();
    assert_eq!(result["modes"]["currentModeId"], "ask", "{opened}");
    let modes: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .expect("the declared modes")
        .iter()
        .filter_map(|mode| mode["id"].as_str())
        .collect();
    assert_eq!(modes, ["ask", "code"], "{opened}");
    let model = &result["configOptions"][0];
    assert_eq!(
        (&model["id"], &model["category"], &model["type"], &model["currentValue"]),
        (
            &Value::from("model"),
            &Value::from("model"),
            &Value::from("select"),
            &Value::from("fast")
        ),
        "{opened}"
    );
    let values: Vec<&str> = model["options"]
        .as_array()
        .expect("the model's values")
        .iter()
        .filter_map(|option| option["value"].as_str())
        .collect();
    assert_eq!(values, ["fast", "deep"], "{opened}");
    let commands = server.recv();
    assert_eq!(
        commands["params"]["update"],
        serde_json::json!({"sessionUpdate": "available_commands_update", "availableCommands": [
            {"name": "summary", "description": "Summarise the session so far", "input": {"hint": "what to focus on"}}
        ]}),
        "{commands}"
    );

    // The defaults: a plain echo.
    assert_eq!(
        texts(&server.prompt(2, &Value::from(session.as_str()), "hello")),
        ["hello"]
    );
    let status = call(
        &mut server,
        3,
        "_governed/status",
        serde_json::json!({"sessionId": session}),
    );
    assert_eq!(
        status["result"],
        serde_json::json!({"sessionId": session, "mode": "ask", "model": "fast", "prompts": 1}),
        "{status}"
    );

    // The client switches mode and model; the next echo shows both.
    let switched = call(
        &mut server,
        4,
        "session/set_mode",
        serde_json::json!({"sessionId": session, "modeId": "code"}),
    );
    assert_eq!(switched["result"], serde_json::json!({}), "{switched}");
    let set = call(
        &mut server,
        5,
        "session/set_config_option",
        serde_json::json!({"sessionId": session, "configId": "model", "value": "deep"}),
    );
    assert_eq!(set["result"]["configOptions"][0]["currentValue"], "deep", "{set}");
    let session_id = Value::from(session.as_str());
    assert_eq!(texts(&server.prompt(6, &session_id, "hello")), ["[code, deep] hello"]);
    assert_eq!(
        texts(&server.prompt(7, &session_id, "/summary the parser")),
        ["summary: 2 earlier prompts in this session; mode code, model deep; focus: the parser"]
    );

    // Undeclared modes, values and extension methods are refused by the runtime.
    let refused = [
        (
            "session/set_mode",
            serde_json::json!({"sessionId": session, "modeId": "yolo"}),
            -32602,
        ),
        (
            "session/set_config_option",
            serde_json::json!({"sessionId": session, "configId": "model", "value": "huge"}),
            -32602,
        ),
        ("_governed/other", serde_json::json!({"sessionId": session}), -32601),
        ("_governed/status", serde_json::json!({}), -32602),
        ("session/delete", serde_json::json!({"sessionId": session}), -32601),
    ];
    for (offset, (method, params, code)) in refused.into_iter().enumerate() {
        let answer = call(&mut server, 10 + offset as u64, method, params);
        assert_eq!(answer["error"]["code"], code, "{method}: {answer}");
    }

    // The operator switches the mode itself: a current_mode_update, then its report.
    let turn = server.prompt(20, &session_id, "/mode ask");
    let update = turn
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .expect("the switch is sent");
    assert_eq!(update["params"]["update"]["currentModeId"], "ask", "{update}");
    assert_eq!(texts(&turn), ["mode ask"]);
    let refused = texts(&server.prompt(21, &session_id, "/mode yolo"));
    assert!(
        refused.len() == 1 && refused[0].starts_with("mode: "),
        "the runtime refuses an undeclared mode: {refused:?}"
    );
    let status = call(
        &mut server,
        23,
        "_governed/status",
        serde_json::json!({"sessionId": session}),
    );
    assert_eq!(
        (
            &status["result"]["mode"],
            &status["result"]["model"],
            &status["result"]["prompts"]
        ),
        (&Value::from("ask"), &Value::from("deep"), &Value::from(5)),
        "{status}"
    );

    // session/list, close, resume.
    let listed = call(&mut server, 30, "session/list", serde_json::json!({"cwd": cwd}));
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .expect("the stored sessions")
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [session.as_str()], "{listed}");
    let closed = call(
        &mut server,
        31,
        "session/close",
        serde_json::json!({"sessionId": session}),
    );
    assert_eq!(closed["result"], serde_json::json!({}), "{closed}");
    let gone = call(
        &mut server,
        32,
        "session/prompt",
        serde_json::json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
    );
    assert!(gone["error"].is_object(), "a closed session takes no prompt: {gone}");
    server.send(serde_json::json!({"jsonrpc": "2.0", "id": 33, "method": "session/resume", "params": {"sessionId": session, "cwd": cwd}}));
    let resumed = server.recv();
    assert_eq!(resumed["id"], 33, "the answer comes first: {resumed}");
    assert_eq!(resumed["result"]["modes"]["currentModeId"], "ask", "{resumed}");
    assert_eq!(
        resumed["result"]["configOptions"][0]["currentValue"], "deep",
        "{resumed}"
    );
    let commands = server.recv();
    assert_eq!(
        commands["params"]["update"]["sessionUpdate"], "available_commands_update",
        "the commands are announced again: {commands}"
    );
    assert_eq!(texts(&server.prompt(34, &session_id, "hello")), ["[ask, deep] hello"]);
    assert!(server.finish().success());

    let actions: Vec<(String, Value)> = std::fs::read_to_string(&audit)
        .expect("the audit log is written")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("each record is JSON"))
        .filter(|record| record["action"].as_str().is_some_and(|a| a.starts_with("session.")))
        .map(|record| (record["action"].as_str().unwrap().to_string(), record["input"].clone()))
        .collect();
    let want = [
        (
            "session.mode",
            serde_json::json!({"from": "ask", "to": "code", "by": "client"}),
        ),
        (
            "session.config",
            serde_json::json!({"option": "model", "from": "fast", "to": "deep", "by": "client"}),
        ),
        (
            "session.mode",
            serde_json::json!({"from": "code", "to": "ask", "by": "operator"}),
        ),
    ];
    for (action, input) in want {
        assert!(
            actions.iter().any(|(a, i)| a == action && *i == input),
            "{action} {input} is audited: {actions:?}"
        );
    }
    for action in ["session.close", "session.resume"] {
        assert!(
            actions.iter().any(|(a, _)| a == action),
            "{action} is audited: {actions:?}"
        );
    }
}
