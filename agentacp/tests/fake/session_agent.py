# A fake ACP agent for the client's session calls (tests/client_sessions.rs and the example
# client's tests): `full` offers session list/resume/close/delete, modes, config options,
# slash commands and extension methods; `bare` offers none of them. Every method it receives
# is appended to the file named by argv[2] (so a test can see what was never sent).
import json, sys

mode = sys.argv[1]
seen_file = sys.argv[2]
full = mode == "full"

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

def update(session, u):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": u}})

def say(session, text):
    update(session, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

MODES = [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code", "description": "Writes code"}]
COMMANDS = [{"name": "review", "description": "Review a change"},
            {"name": "plan", "description": "Plan the work", "input": {"hint": "what to plan"}}]

def config(model, think):
    return [{"id": "model", "name": "Model", "type": "select", "currentValue": model,
             "options": [{"value": "fast", "name": "Fast"}, {"value": "smart", "name": "Smart"}]},
            {"id": "think", "name": "Think", "type": "boolean", "currentValue": think}]

# Five sessions, two per page.
SESSIONS = [{"sessionId": "old-%d" % n, "cwd": "/w", "title": "Session %d" % n} for n in range(5)]
model, think, current = "fast", False, "ask"
waiting = None  # the id and session of a `/wait` prompt

for line in sys.stdin:
    msg = json.loads(line)
    method, id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None:
        continue  # an answer to one of our requests, read where it is awaited
    with open(seen_file, "a") as f:
        f.write(method + "\n")
    def answer(result):
        send({"jsonrpc": "2.0", "id": id, "result": result})
    if method == "initialize":
        caps = {"loadSession": True}
        if full:
            caps["sessionCapabilities"] = {"list": {}, "resume": {}, "close": {}, "delete": {}}
        answer({"protocolVersion": 1, "agentCapabilities": caps, "agentInfo": {"name": "fake-sessions", "version": "0"}})
    elif method == "session/new":
        if not full:
            answer({"sessionId": "s1"})
            continue
        # The commands first: the client keeps them for the session whose answer follows.
        update("s1", {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS})
        answer({"sessionId": "s1", "modes": {"currentModeId": current, "availableModes": MODES},
                "configOptions": config(model, think), "_meta": {"fake": {"opened": 1}}})
    elif method == "session/list":
        start = int(params.get("cursor") or 0)
        cwd = params.get("cwd")
        if cwd and cwd.endswith("circle"):
            answer({"sessions": [], "nextCursor": "0"})
            continue
        page = [dict(s, cwd=cwd or s["cwd"]) for s in SESSIONS[start:start + 2]]
        result = {"sessions": page, "_meta": {"page": start // 2}}
        if start + 2 < len(SESSIONS):
            result["nextCursor"] = str(start + 2)
        answer(result)
    elif method == "session/resume":
        current = "code"
        answer({"modes": {"currentModeId": current, "availableModes": MODES},
                "configOptions": config(model, think), "_meta": {"resumed": params["sessionId"]}})
    elif method in ("session/close", "session/delete"):
        # A `gone-*` session is one the agent does not know (-32002); a `broken-*` one fails.
        session = params.get("sessionId", "")
        if session.startswith("gone-"):
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32002, "message": "Resource not found",
                                                      "data": {"sessionId": session}}})
        elif session.startswith("broken-"):
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "the store failed"}})
        else:
            answer({})
    elif method == "session/set_mode":
        current = params["modeId"]
        answer({"_meta": {"mode": current}})
    elif method == "session/set_config_option":
        if params["configId"] == "model":
            model = params["value"]
        else:
            think = params["value"]
        answer({"configOptions": config(model, think), "_meta": {"asked": params.get("_meta")}})
    elif method == "session/cancel":
        if waiting is not None:
            send({"jsonrpc": "2.0", "id": waiting, "result": {"stopReason": "cancelled"}})
            waiting = None
    elif method == "session/prompt":
        session = params["sessionId"]
        text = params["prompt"][0].get("text", "")
        if text == "/wait":
            say(session, "waiting")
            waiting = id
            continue
        if text == "/switch":
            # The agent changes mode and options by itself, and offers other commands.
            current, model = "code", "smart"
            update(session, {"sessionUpdate": "current_mode_update", "currentModeId": current})
            update(session, {"sessionUpdate": "config_option_update", "configOptions": config(model, think)})
            update(session, {"sessionUpdate": "available_commands_update",
                             "availableCommands": [{"name": "test", "description": "Run the tests"}]})
        elif text == "/ext":
            # An extension request to the client, and an extension notification.
            send({"jsonrpc": "2.0", "method": "_fake/notice", "params": {"n": 1, "_meta": {"trace": "n1"}}})
            send({"jsonrpc": "2.0", "id": "ext-1", "method": "_fake/ask",
                  "params": {"question": "ready?", "_meta": {"trace": "t1"}}})
            for answer_line in sys.stdin:
                reply = json.loads(answer_line)
                if reply.get("id") == "ext-1" and "method" not in reply:
                    break
            reply.pop("jsonrpc", None)
            reply.pop("id", None)
            say(session, json.dumps(reply, sort_keys=True))
        else:
            say(session, "prompted: " + text)
        answer({"stopReason": "end_turn"})
    elif method.startswith("_fake/echo"):
        answer({"echo": params})
    elif method.startswith("_") and id is None:
        pass  # an extension notification: recorded above
    elif id is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found: " + method}})
