"""A tiny scripted ACP v2 agent for the kit's own tests (`tests/v2.rs`).

Run as `python3 -S v2_agent.py MODE`. MODE "" is a correct v2 agent (for the suite's rules);
every other mode is wrong in one way, for the check that must catch it:

- `v1-only`: answers initialize with protocolVersion 1, whatever was asked;
- `v1-ending`: ends the turn in the session/prompt answer ({"stopReason": "end_turn"}) and
  sends no state_update, as a v1 agent does;
- `no-message-id`: its agent_message_chunk has no messageId;
- `v1-tool-call`: announces its tool call with v1's `tool_call` update;
- `bad-frame`: its agent_message_chunk's text content has no `text` (only the schema says so);
- `no-logout`: auth/logout is an unknown method;
- `list-ignores-cwd`: session/list also lists a session of another folder whatever `cwd` asks;
- `close-refused`: session/close is an unknown method;
- `delete-keeps`: session/delete is answered but the session stays listed;
- `config-ignored`: session/set_config_option answers without changing the value;
- `batch-first-only`: a batch gets an answer for its first request only;
- `answers-cancel-request`: $/cancel_request is answered (-32601, id null);
- `bad-plan`: its plan_update's plan has no planId;
- `elicit-hang`: after its elicitation is answered, the turn never ends;
- `relative-cwd`: session/new takes a relative cwd;
- `prompt-any-session`: a prompt for a session it never made is taken;
- `manifest`: answers initialize as the JSON of the second argument says (`info`, `_meta`,
  and `delete`: whether it advertises session/delete), with a manifest's prompt and MCP
  markers (`prompt: {}`, `mcp: {stdio: {}}`) and no auth methods; it confines sessions to
  AGENTACP_WORKSPACE_ROOT (after resolving `..` and symlinks), as an AIP-44 operator does,
  unless the JSON says `"confined": false`.

It advertises one auth method (login and logout always succeed), session/delete, and a
`mode` config option (ask, code). A prompt containing /forever runs until session/cancel; any
other prompt is echoed, with a plan, an agent-owned terminal, a tool call that streams content
and asks permission and, when the client offers form elicitation, an elicitation first. A
batch (a JSON array line) is answered as one array. Only `manifest` reads the environment.
"""

import json
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else ""
AS = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
SESSIONS = {}  # session id -> the texts prompted, for a replay
RUNNING = {}  # session id -> the id of the turn's user message, while /forever runs
PENDING = {}  # request id of ours -> (kind, session)
COUNTER = [0]
CWDS = {}  # session id -> cwd
MODES = {}  # session id -> the current mode
ELICIT = [False]  # the client offers form elicitation
OUT = [None]  # a list collecting a batch's answers, while one is read


def send(message):
    message["jsonrpc"] = "2.0"
    if OUT[0] is not None and "method" not in message:
        OUT[0].append(message)
        return
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def next_id(prefix):
    COUNTER[0] += 1
    return "%s-%d" % (prefix, COUNTER[0])


def update(session, body):
    send({"method": "session/update", "params": {"sessionId": session, "update": body}})


def state(session, name, **extra):
    body = {"sessionUpdate": "state_update", "state": name}
    body.update(extra)
    update(session, body)


def chunk(text):
    body = {"sessionUpdate": "agent_message_chunk", "messageId": next_id("agent"),
            "content": {"type": "text", "text": text}}
    if MODE == "no-message-id":
        del body["messageId"]
    if MODE == "bad-frame":
        del body["content"]["text"]
    return body


def initialize(request):
    params = request["params"]
    version = 1 if MODE == "v1-only" else min(params.get("protocolVersion", 2), 2)
    if version == 1:
        return {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "v2-test", "version": "0"}}
    ELICIT[0] = "form" in ((params.get("capabilities") or {}).get("elicitation") or {})
    if MODE == "manifest":
        session = {"prompt": {}, "mcp": {"stdio": {}}}
        if AS.get("delete"):
            session["delete"] = {}
        return {"protocolVersion": 2, "info": AS["info"], "capabilities": {"session": session},
                "_meta": AS["_meta"]}
    return {"protocolVersion": 2, "info": {"name": "v2-test-agent", "version": "0.1.0"},
            "capabilities": {"session": {"delete": {}}},
            "authMethods": [{"methodId": "conform-login", "type": "agent", "name": "Log in"}]}


def mode_option(session):
    return {"configId": "mode", "name": "Mode", "category": "mode", "type": "select",
            "currentValue": MODES[session],
            "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}]}


def refused_cwd(cwd):
    """Why `cwd` is refused, or None."""
    if not (isinstance(cwd, str) and (os.path.isabs(cwd) or MODE == "relative-cwd")):
        return "cwd must be an absolute path"
    root = os.environ.get("AGENTACP_WORKSPACE_ROOT")
    if MODE == "manifest" and AS.get("confined", True) and root:
        real, root = os.path.realpath(cwd), os.path.realpath(root)
        if os.path.commonpath([real, root]) != root:
            return "cwd is outside the workspace root"
    return None


def new_session(request):
    why = refused_cwd(request["params"].get("cwd"))
    if why is not None:
        return None, {"code": -32602, "message": why}
    session = next_id("session")
    SESSIONS[session] = []
    CWDS[session] = request["params"]["cwd"]
    MODES[session] = "ask"
    return {"sessionId": session, "configOptions": [mode_option(session)]}, None


def list_sessions(request):
    cwd = request["params"].get("cwd")
    listed = [{"sessionId": s, "cwd": c} for s, c in CWDS.items() if cwd is None or c == cwd]
    if MODE == "list-ignores-cwd":
        listed.append({"sessionId": "elsewhere", "cwd": "/elsewhere"})
    return {"sessions": listed}


def set_config_option(request):
    params = request["params"]
    session = params["sessionId"]
    if session not in MODES or params.get("configId") != "mode":
        return None, {"code": -32602, "message": "no such session or option"}
    if MODE != "config-ignored":
        MODES[session] = params.get("value")
    return {"configOptions": [mode_option(session)]}, None


def prompt(request):
    params = request["params"]
    session = params["sessionId"]
    if MODE == "prompt-any-session":
        SESSIONS.setdefault(session, [])
    if session not in SESSIONS:
        return None, {"code": -32002, "message": "no such session"}
    text = " ".join(block.get("text", "") for block in params["prompt"])
    SESSIONS[session].append(text)
    user = next_id("user")
    if MODE == "v1-ending":
        update(session, chunk(text))
        return {"stopReason": "end_turn"}, None
    send({"id": request["id"], "result": {"messageId": user}})
    update(session, {"sessionUpdate": "user_message", "messageId": user,
                     "content": [{"type": "text", "text": text}]})
    state(session, "running")
    if "/forever" in text:
        RUNNING[session] = user
        update(session, chunk("waiting"))
        return "sent", None
    update(session, chunk("echo: " + text))
    plan = {"type": "items", "planId": "plan-1",
            "entries": [{"content": "echo", "priority": "high", "status": "in_progress"}]}
    if MODE == "bad-plan":
        del plan["planId"]
    update(session, {"sessionUpdate": "plan_update", "plan": plan})
    update(session, {"sessionUpdate": "terminal_update", "terminalId": "term-1", "command": "echo"})
    update(session, {"sessionUpdate": "terminal_output_chunk", "terminalId": "term-1", "data": "ZWNobwo="})
    update(session, {"sessionUpdate": "terminal_update", "terminalId": "term-1",
                     "exitStatus": {"exitCode": 0, "signal": None}})
    if ELICIT[0]:
        state(session, "requires_action")
        asked = next_id("elicit")
        PENDING[asked] = ("elicitation", session)
        send({"id": asked, "method": "elicitation/create", "params": {
            "sessionId": session, "mode": "form", "message": "Your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}})
        return "sent", None
    ask_permission(session)
    return "sent", None


def ask_permission(session):
    call = next_id("call")
    if MODE == "v1-tool-call":
        update(session, {"sessionUpdate": "tool_call", "toolCallId": call, "title": "write"})
    else:
        update(session, {"sessionUpdate": "tool_call_update", "toolCallId": call, "title": "write",
                         "status": "pending"})
    update(session, {"sessionUpdate": "tool_call_content_chunk", "toolCallId": call,
                     "content": {"type": "content", "content": {"type": "text", "text": "writing"}}})
    state(session, "requires_action")
    asked = next_id("perm")
    PENDING[asked] = ("permission", session)
    send({"id": asked, "method": "session/request_permission", "params": {
        "sessionId": session, "title": "Allow write?",
        "subject": {"type": "tool_call", "toolCall": {"toolCallId": call}},
        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}})


def permission_answered(answer):
    kind, session = PENDING.pop(answer.get("id"), (None, None))
    if kind == "elicitation":
        if MODE != "elicit-hang":
            state(session, "running")
            ask_permission(session)
        return
    if kind is None:
        return
    state(session, "running")
    update(session, chunk(" done"))
    state(session, "idle", stopReason="end_turn")


def resume(request):
    params = request["params"]
    session = params["sessionId"]
    if session not in SESSIONS:
        return None, {"code": -32002, "message": "no such session"}
    if (params.get("replayFrom") or {}).get("type") == "start":
        for text in SESSIONS[session]:
            update(session, {"sessionUpdate": "user_message", "messageId": next_id("user"),
                             "content": [{"type": "text", "text": text}]})
    return {}, None


def handle(request):
    method = request.get("method")
    if method == "initialize":
        return initialize(request), None
    if method == "auth/login" or (method == "auth/logout" and MODE != "no-logout"):
        return {}, None
    if method == "session/new":
        return new_session(request)
    if method == "session/list":
        return list_sessions(request), None
    if method == "session/close" and MODE != "close-refused":
        return {}, None
    if method == "session/delete":
        if MODE != "delete-keeps":
            CWDS.pop(request["params"]["sessionId"], None)
        return {}, None
    if method == "session/set_config_option":
        return set_config_option(request)
    if method == "session/prompt":
        return prompt(request)
    if method == "session/resume":
        return resume(request)
    return None, {"code": -32601, "message": "unknown method %s" % method}


def notified(message):
    if message.get("method") == "session/cancel":
        session = message.get("params", {}).get("sessionId")
        if RUNNING.pop(session, None) is not None:
            state(session, "idle", stopReason="cancelled")
    if message.get("method") == "$/cancel_request" and MODE == "answers-cancel-request":
        send({"id": None, "error": {"code": -32601, "message": "unknown method $/cancel_request"}})


def take(message):
    if not isinstance(message, dict):
        send({"id": None, "error": {"code": -32600, "message": "not a request"}})
    elif "method" not in message:
        permission_answered(message)
    elif "id" not in message:
        notified(message)
    else:
        result, error = handle(message)
        if result == "sent":
            return
        if error is not None:
            send({"id": message["id"], "error": error})
        else:
            send({"id": message["id"], "result": result})


def take_batch(entries):
    OUT[0] = []
    for entry in entries:
        take(entry)
    answers, OUT[0] = OUT[0], None
    if MODE == "batch-first-only":
        answers = answers[:1]
    if answers:
        sys.stdout.write(json.dumps(answers) + "\n")
        sys.stdout.flush()


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if isinstance(message, list):
            take_batch(message)
        else:
            take(message)


main()
