# A scripted raw ACP v2 agent (schema v2.0.0-alpha.3) for tests/v2_client.rs and
# tests/v2_bridge.rs. argv[1] is what it answers to `initialize`: `v2`, `v1` (a v1-only agent:
# it answers protocolVersion 1 and speaks v1), `v1-sessions` (the same, advertising and answering
# `session/list`, `session/resume` and `session/close`) or `v3` (a version nobody speaks); argv[2]
# a file every frame it receives is appended to (one JSON line each), so a test can check them.
#
# In v1 mode, `hello` announces a `write-file` tool call, asks permission for it (v1 shapes),
# completes or fails it on the answer, says "done" and ends the turn.
#
# Prompts (v2): `hello` streams a message (a chunk, then the whole message), a plan, and a tool call
# that asks permission (subject tool_call) and completes or fails on the answer; `wait` runs
# until `session/cancel`, then ends `cancelled`. `session/resume` with replayFrom start
# replays one exchange and a finished tool call before answering.
import json, sys

mode = sys.argv[1]
v1 = mode in ("v1", "v1-sessions")
seen_file = sys.argv[2]
next_id = 100
pending = []  # messages read while waiting for something else

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

def read():
    if pending:
        return pending.pop(0)
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    msg = json.loads(line)
    with open(seen_file, "a") as f:
        f.write(json.dumps(msg) + "\n")
    return msg

def update(session, u):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": u}})

def state(session, s, reason=None):
    u = {"sessionUpdate": "state_update", "state": s}
    if reason:
        u["stopReason"] = reason
    update(session, u)

def text(t):
    return {"type": "text", "text": t}

MODE_OPTION = {"configId": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "ask",
               "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}]}

def wait_for(predicate):
    """Reads until a message matches; the others are kept for later."""
    kept = []
    while True:
        msg = read()
        if predicate(msg):
            pending.extend(kept)
            return msg
        kept.append(msg)

def hello(session, id):
    global next_id
    update(session, {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": text("Hel")})
    update(session, {"sessionUpdate": "agent_message", "messageId": "m1", "content": [text("Hel"), text("lo")]})
    update(session, {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p1",
            "entries": [{"content": "write the file", "priority": "high", "status": "in_progress"}]}})
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "write-file",
            "kind": "edit", "status": "pending", "rawInput": {"path": "/w/notes.txt"}})
    update(session, {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1",
            "content": {"type": "content", "content": text("about to write")}})
    state(session, "requires_action")
    next_id += 1
    ask = next_id
    send({"jsonrpc": "2.0", "id": ask, "method": "session/request_permission", "params": {
        "sessionId": session, "title": "Write notes.txt?",
        "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c1", "status": "pending"}},
        "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}})
    answer = wait_for(lambda m: m.get("id") == ask and "method" not in m)
    outcome = answer.get("result", {}).get("outcome", {})
    approved = outcome.get("outcome") == "selected" and outcome.get("optionId") == "yes"
    state(session, "running")
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "c1",
            "status": "completed" if approved else "failed", "rawOutput": {"approved": approved}})
    state(session, "idle", "end_turn")

def wait(session, id):
    wait_for(lambda m: m.get("method") == "session/cancel")
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "w1", "title": "Waiting", "status": "cancelled"})
    state(session, "idle", "cancelled")

def v1_hello(session):
    global next_id
    update(session, {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "write-file", "kind": "edit", "status": "pending"})
    next_id += 1
    ask = next_id
    send({"jsonrpc": "2.0", "id": ask, "method": "session/request_permission", "params": {
        "sessionId": session, "toolCall": {"toolCallId": "c1"},
        "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}})
    answer = wait_for(lambda m: m.get("id") == ask and "method" not in m)
    outcome = answer.get("result", {}).get("outcome", {})
    approved = outcome.get("outcome") == "selected" and outcome.get("optionId") == "yes"
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "c1",
            "status": "completed" if approved else "failed", "rawOutput": {"approved": approved}})
    update(session, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}})

def replay(session):
    update(session, {"sessionUpdate": "user_message", "messageId": "u0", "content": [text("earlier question")]})
    update(session, {"sessionUpdate": "agent_message", "messageId": "a0", "content": [text("earlier answer")]})
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "old", "title": "Old read", "kind": "read", "status": "completed"})

prompts = 0
while True:
    msg = read()
    method, id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None:
        continue
    def answer(result):
        send({"jsonrpc": "2.0", "id": id, "result": result})
    if method == "initialize":
        if v1:
            capabilities = {"loadSession": True}
            if mode == "v1-sessions":
                capabilities["sessionCapabilities"] = {"list": {}, "resume": {}, "close": {}}
            answer({"protocolVersion": 1, "agentCapabilities": capabilities, "agentInfo": {"name": "v1-only", "version": "0"}})
        elif mode == "v3":
            answer({"protocolVersion": 3, "info": {"name": "future", "version": "0"}})
        else:
            answer({"protocolVersion": 2, "info": {"name": "scripted-v2", "version": "0.1"},
                    "capabilities": {"session": {"prompt": {"image": {}}, "mcp": {"http": {}, "stdio": {}}}},
                    "authMethods": [{"type": "agent", "methodId": "login", "name": "Log in"}]})
    elif method in ("auth/login", "auth/logout", "authenticate"):
        answer({})
    elif method == "session/new":
        answer({"sessionId": "s1", "configOptions": [MODE_OPTION]})
    elif method == "session/resume":
        if (params.get("replayFrom") or {}).get("type") == "start":
            replay(params["sessionId"])
        answer({"configOptions": [MODE_OPTION]})
    elif method == "session/load":  # a v1 agent's
        answer({})
    elif method == "session/set_config_option":
        MODE_OPTION["currentValue"] = params["value"]
        answer({"configOptions": [MODE_OPTION]})
    elif method == "session/prompt":
        session = params["sessionId"]
        words = " ".join(b.get("text", "") for b in params["prompt"])
        if v1:
            if words == "hello":
                v1_hello(session)
            send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
            continue
        prompts += 1
        # The SDKs' v2 draft puts the user message id in the answer: tolerated.
        answer({"messageId": "u%d" % prompts})
        update(session, {"sessionUpdate": "user_message", "messageId": "u%d" % prompts, "content": params["prompt"]})
        state(session, "running")
        if words == "wait":
            wait(session, id)
        else:
            hello(session, id)
    elif method == "session/list" and mode == "v1-sessions":
        answer({"sessions": [{"sessionId": "s1", "cwd": params.get("cwd") or "/w"}]})
    elif method == "session/close" and mode == "v1-sessions":
        answer({})
    elif method == "session/cancel":
        pass
    elif id is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no " + method}})
