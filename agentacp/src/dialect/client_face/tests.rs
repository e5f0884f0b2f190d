//! The client face's translations, message by message.

use serde_json::{Value, json};

use super::{ClientFace, ToAgent};

/// A face past `initialize` (the agent answered 2).
fn v2_face() -> ClientFace {
    let mut face = ClientFace::new(false);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2}});
    assert!(matches!(face.to_agent(init), ToAgent::Send(_)));
    let answer =
        json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "info": {"name": "a", "version": "1"}}});
    face.from_agent(answer);
    face
}

fn sent(face: &mut ClientFace, message: Value) -> Value {
    match face.to_agent(message) {
        ToAgent::Send(message) => message,
        other => panic!("not sent: {other:?}"),
    }
}

fn update(session: &str, update: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}})
}

/// The `update`s of the v1 notifications among `messages`.
fn updates(messages: &[Value]) -> Vec<Value> {
    messages.iter().map(|m| m["params"]["update"].clone()).collect()
}

fn prompt(face: &mut ClientFace, id: i64) {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}});
    assert_eq!(sent(face, request.clone()), request, "a prompt goes as it is");
}

/// The v2 turn answers the v1 prompt: the acknowledgement and the user message echo are
/// swallowed, `running` has no v1 form, the idle update's stop reason is the answer.
#[test]
fn a_v2_turn_ends_the_v1_prompt_with_the_idle_stop_reason() {
    let mut face = v2_face();
    prompt(&mut face, 7);
    let ack = json!({"jsonrpc": "2.0", "id": 7, "result": {"messageId": "u1"}});
    assert_eq!(face.from_agent(ack), Vec::<Value>::new());
    let echo = update(
        "s",
        json!({"sessionUpdate": "user_message", "messageId": "u1", "content": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(face.from_agent(echo), Vec::<Value>::new());
    assert_eq!(
        face.from_agent(update(
            "s",
            json!({"sessionUpdate": "state_update", "state": "running"})
        )),
        Vec::<Value>::new()
    );
    let chunk = update(
        "s",
        json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": "ok"}}),
    );
    assert_eq!(face.from_agent(chunk.clone()), vec![chunk]);
    let idle = update(
        "s",
        json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}),
    );
    assert_eq!(
        face.from_agent(idle),
        vec![json!({"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}})]
    );
    // After the turn a user message is history again (no prompt in flight).
    let replayed = update(
        "s",
        json!({"sessionUpdate": "user_message_chunk", "messageId": "u2", "content": {"type": "text", "text": "x"}}),
    );
    assert_eq!(face.from_agent(replayed).len(), 1);
}

/// An idle update before the acknowledgement answers the prompt; the late acknowledgement is
/// swallowed. A stop reason v1 lacks ends the prompt with an error that names it.
#[test]
fn late_acknowledgements_are_swallowed_and_unknown_stop_reasons_are_errors() {
    let mut face = v2_face();
    prompt(&mut face, 3);
    let idle = update(
        "s",
        json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}),
    );
    assert_eq!(face.from_agent(idle)[0]["result"]["stopReason"], "cancelled");
    assert_eq!(
        face.from_agent(json!({"jsonrpc": "2.0", "id": 3, "result": {}})),
        Vec::<Value>::new()
    );
    prompt(&mut face, 4);
    let idle = update(
        "s",
        json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "error"}),
    );
    let answer = &face.from_agent(idle)[0];
    assert_eq!(answer["id"], 4);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stop reason `error`"),
        "{answer}"
    );
    // A refused prompt is an error answer as it is, and no longer in flight.
    prompt(&mut face, 5);
    let refused = json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32602, "message": "no"}});
    assert_eq!(face.from_agent(refused.clone()), vec![refused]);
    let idle = update(
        "s",
        json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}),
    );
    assert_eq!(face.from_agent(idle), Vec::<Value>::new());
}

/// The first `tool_call_update` announces the call (v1 `tool_call`), later ones update it;
/// patches close open enums and clear lists; content chunks give v1 the content so far.
#[test]
fn tool_calls_are_created_by_their_first_update_and_chunks_accumulate() {
    let mut face = v2_face();
    let first = update(
        "s",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "kind": "_custom", "status": "pending"}),
    );
    assert_eq!(
        updates(&face.from_agent(first)),
        [
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "c1", "kind": "other", "status": "pending"})
        ]
    );
    let text = json!({"type": "content", "content": {"type": "text", "text": "a"}});
    let chunk = update(
        "s",
        json!({"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1", "content": text}),
    );
    let terminal = update(
        "s",
        json!({"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1", "content": {"type": "terminal", "terminalId": "t"}}),
    );
    face.from_agent(chunk);
    let both = updates(&face.from_agent(terminal));
    assert_eq!(both[0]["sessionUpdate"], "tool_call_update");
    assert_eq!(both[0]["content"][0], text);
    assert_eq!(both[0]["content"][1]["content"]["text"], "[terminal t]");
    let end = update(
        "s",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "cancelled", "content": null, "title": null}),
    );
    assert_eq!(
        updates(&face.from_agent(end)),
        [json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed", "content": []})]
    );
    let diff = json!({"type": "diff", "changes": [{"operation": "move", "oldPath": "/a", "path": "/b"}]});
    let with_diff = update(
        "s",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "c2", "title": "Move", "content": [diff]}),
    );
    assert_eq!(
        updates(&face.from_agent(with_diff))[0]["content"][0]["content"]["text"],
        "move /a -> /b"
    );
}

/// Whole-message upserts show a v1 peer what is new as chunks; a replacement is shown after
/// what was shown; omitted content changes nothing.
#[test]
fn message_upserts_become_the_chunks_not_yet_shown() {
    let mut face = v2_face();
    let block = |t: &str| json!({"type": "text", "text": t});
    let whole = |content: Value| {
        update(
            "s",
            json!({"sessionUpdate": "agent_message", "messageId": "m", "content": content}),
        )
    };
    let texts = |messages: Vec<Value>| -> Vec<Value> {
        updates(&messages)
            .iter()
            .map(|u| u["content"]["text"].clone())
            .collect()
    };
    assert_eq!(texts(face.from_agent(whole(json!([block("A")])))), ["A"]);
    let chunk = update(
        "s",
        json!({"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": block("B")}),
    );
    assert_eq!(texts(face.from_agent(chunk)), ["B"]);
    assert_eq!(
        texts(face.from_agent(whole(json!([block("A"), block("B"), block("C")])))),
        ["C"]
    );
    assert_eq!(texts(face.from_agent(whole(json!([block("D")])))), ["D"]);
    let unchanged = update("s", json!({"sessionUpdate": "agent_thought", "messageId": "m"}));
    assert_eq!(face.from_agent(unchanged), Vec::<Value>::new());
    let thought = update(
        "s",
        json!({"sessionUpdate": "agent_thought", "messageId": "t", "content": [block("hm")]}),
    );
    let thought = updates(&face.from_agent(thought));
    assert_eq!(thought[0]["sessionUpdate"], "agent_thought_chunk");
    assert_eq!(thought[0]["messageId"], "t");
}

/// Plans, commands and agent-owned terminals.
#[test]
fn plans_commands_and_terminal_updates() {
    let mut face = v2_face();
    let plan = update(
        "s",
        json!({"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p",
        "entries": [{"content": "x", "priority": "high", "status": "cancelled"}]}}),
    );
    assert_eq!(
        updates(&face.from_agent(plan)),
        [json!({"sessionUpdate": "plan", "entries": [{"content": "x", "priority": "high", "status": "completed"}]})]
    );
    let commands = update(
        "s",
        json!({"sessionUpdate": "available_commands_update", "availableCommands": [
        {"name": "a", "description": "A", "input": {"type": "text", "hint": "h"}},
        {"name": "b", "description": "B", "input": {"type": "_form"}}]}),
    );
    let commands = updates(&face.from_agent(commands));
    assert_eq!(commands[0]["availableCommands"][0]["input"], json!({"hint": "h"}));
    assert!(commands[0]["availableCommands"][1].get("input").is_none());
    let terminal = update(
        "s",
        json!({"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": "aGk="}),
    );
    assert_eq!(face.from_agent(terminal), Vec::<Value>::new());
}

/// A permission request gets v1's `toolCall` from its subject; a call not yet announced is
/// announced first; the answer goes back as it is.
#[test]
fn permission_requests_take_the_v1_shape() {
    let mut face = v2_face();
    let options = json!([{"optionId": "y", "name": "Yes", "kind": "allow_once"}]);
    let request = json!({"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": {
        "sessionId": "s", "title": "Run it?", "options": options,
        "subject": {"type": "command", "command": "ls", "cwd": "/w"}}});
    let out = face.from_agent(request);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0]["params"]["update"]["sessionUpdate"], "tool_call");
    assert_eq!(out[0]["params"]["update"]["title"], "Run it?");
    let call = &out[1]["params"]["toolCall"];
    assert_eq!(call["toolCallId"], "permission-9");
    assert_eq!(call["kind"], "execute");
    assert_eq!(call["rawInput"], json!({"command": "ls", "cwd": "/w"}));
    assert_eq!(out[1]["params"]["options"], options);
    assert_eq!(out[1]["id"], 9);
    face.from_agent(update(
        "s",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": "Edit"}),
    ));
    let known = json!({"jsonrpc": "2.0", "id": 10, "method": "session/request_permission", "params": {
        "sessionId": "s", "title": "Edit?", "options": options,
        "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c", "kind": "edit"}}}});
    let out = face.from_agent(known);
    assert_eq!(out.len(), 1, "a known call is not announced again");
    assert_eq!(out[0]["params"]["toolCall"], json!({"toolCallId": "c", "kind": "edit"}));
    let answer = json!({"jsonrpc": "2.0", "id": 10, "result": {"outcome": {"outcome": "selected", "optionId": "y"}}});
    assert_eq!(sent(&mut face, answer.clone()), answer);
}

/// A v2 agent's MCP-over-ACP marker (`mcp.acp`) is v1's `mcpCapabilities.acp`.
#[test]
fn mcp_over_acp_is_read_from_a_v2_agent() {
    let mut face = ClientFace::new(false);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2,
        "clientInfo": {"name": "c", "version": "1"}}});
    sent(&mut face, init);
    let answer = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "info": {"name": "a", "version": "2"},
        "capabilities": {"session": {"mcp": {"stdio": {}, "acp": {}}}}}});
    let v1 = &face.from_agent(answer)[0]["result"];
    assert_eq!(
        v1["agentCapabilities"]["mcpCapabilities"],
        json!({"http": false, "sse": false, "acp": true})
    );
}

/// `initialize` both ways, and authentication.
#[test]
fn initialize_and_auth_take_the_other_shape() {
    let mut face = ClientFace::new(false);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2,
        "clientCapabilities": {"fs": {"readTextFile": true}, "terminal": true}, "clientInfo": {"name": "c", "version": "1"}}});
    let v2 = sent(&mut face, init);
    assert_eq!(
        v2["params"],
        json!({"protocolVersion": 2, "info": {"name": "c", "version": "1"}, "capabilities": {}})
    );
    let answer = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "info": {"name": "a", "version": "2"},
        "capabilities": {"session": {"prompt": {"image": {}}, "mcp": {"http": {}}, "delete": {}}},
        "authMethods": [{"type": "agent", "methodId": "login", "name": "Log in"}, {"type": "_sso", "methodId": "x", "name": "X"}]}});
    let v1 = &face.from_agent(answer)[0]["result"];
    assert_eq!(v1["agentInfo"], json!({"name": "a", "version": "2"}));
    assert_eq!(v1["authMethods"], json!([{"id": "login", "name": "Log in"}]));
    let caps = &v1["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(
        caps["promptCapabilities"],
        json!({"image": true, "audio": false, "embeddedContext": false})
    );
    assert_eq!(caps["mcpCapabilities"], json!({"http": true, "sse": false}));
    assert_eq!(
        caps["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}, "delete": {}})
    );
    assert_eq!(caps["auth"], json!({"logout": {}}));
    let login = sent(
        &mut face,
        json!({"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": {"methodId": "login"}}),
    );
    assert_eq!(login["method"], "auth/login");
    assert_eq!(login["params"], json!({"methodId": "login"}));
    let logout = sent(
        &mut face,
        json!({"jsonrpc": "2.0", "id": 2, "method": "logout", "params": {}}),
    );
    assert_eq!(logout["method"], "auth/logout");
}

/// A client that allows v1 sends the v1 fields beside the v2 ones; an agent answering 1 is
/// then spoken to in v1, untranslated.
#[test]
fn falling_back_to_v1_leaves_everything_untranslated() {
    let mut face = ClientFace::new(true);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2,
        "clientCapabilities": {"fs": {"readTextFile": true}}, "clientInfo": {"name": "c", "version": "1"}}});
    let both = sent(&mut face, init);
    assert_eq!(both["params"]["clientCapabilities"]["fs"]["readTextFile"], true);
    assert_eq!(both["params"]["info"]["name"], "c");
    let answer = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": true}}});
    assert_eq!(face.from_agent(answer.clone()), vec![answer]);
    assert!(face.fell_back());
    let load = json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": "s", "cwd": "/w", "mcpServers": []}});
    assert_eq!(sent(&mut face, load.clone()), load);
}

/// `session/load` is a resume with replay; the answer's config options take v1's shape, a
/// mode option shows as v1 modes, and `set_mode` sets it; without one, `set_mode` is
/// answered here.
#[test]
fn load_is_a_resume_with_replay_and_modes_are_a_config_option() {
    let mut face = v2_face();
    let load = json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": "s", "cwd": "/w",
        "mcpServers": [{"name": "fs", "command": "/bin/fs", "args": [], "env": []}, {"type": "sse", "name": "old", "url": "http://x", "headers": []}]}});
    let resume = sent(&mut face, load);
    assert_eq!(resume["method"], "session/resume");
    assert_eq!(resume["params"]["replayFrom"], json!({"type": "start"}));
    assert_eq!(
        resume["params"]["mcpServers"],
        json!([{"type": "stdio", "name": "fs", "command": "/bin/fs", "args": [], "env": []}])
    );
    let mode = json!({"configId": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "ask",
        "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}]});
    let answer = face.from_agent(json!({"jsonrpc": "2.0", "id": 1, "result": {"configOptions": [mode]}}));
    let result = &answer[0]["result"];
    assert_eq!(result["configOptions"][0]["id"], "mode");
    assert!(result["configOptions"][0].get("configId").is_none());
    assert_eq!(
        result["modes"],
        json!({"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]})
    );
    let set = sent(
        &mut face,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/set_mode", "params": {"sessionId": "s", "modeId": "code"}}),
    );
    assert_eq!(set["method"], "session/set_config_option");
    assert_eq!(
        set["params"],
        json!({"sessionId": "s", "configId": "mode", "type": "id", "value": "code"})
    );
    let option = json!({"jsonrpc": "2.0", "id": 4, "method": "session/set_config_option", "params": {"sessionId": "s", "configId": "model", "value": "fast"}});
    assert_eq!(
        sent(&mut face, option)["params"]["type"],
        "id",
        "v2 names the value's type"
    );
    let answered = face.from_agent(json!({"jsonrpc": "2.0", "id": 2, "result": {"configOptions": []}}));
    assert_eq!(answered[0]["result"], json!({}));
    let other = json!({"jsonrpc": "2.0", "id": 3, "method": "session/set_mode", "params": {"sessionId": "t", "modeId": "code"}});
    let ToAgent::Answer(refused) = face.to_agent(other) else {
        panic!("answered here")
    };
    assert_eq!(refused["error"]["code"], -32601);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not part of ACP v2")
    );
}
