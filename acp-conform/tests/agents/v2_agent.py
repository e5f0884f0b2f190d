"""A tiny scripted ACP v2 agent for the kit's own tests (`tests/v2.rs`).

Run as `python3 -S v2_agent.py MODE`. MODE "" is a correct v2 agent (for the suite's rules);
every other mode is wrong in one way, for the check that must catch it:

- `v1-only`: answers initialize with protocolVersion 1, whatever was asked;
- `v1-ending`: ends the turn in the session/prompt answer ({"stopReason": "end_turn"}) and
  sends no state_update, as a v1 agent does;
- `no-message-id`: its agent_message_chunk has no messageId;
- `v1-tool-call`: announces its tool call with v1's `tool_call` update;
- `bad-frame`: its agent_message_chunk's text content has no `text` (only the schema says so).

A prompt containing /forever runs until session/cancel; any other prompt is echoed, with one
tool call that asks permission. Nothing is read from the environment.
"""

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else ""
SESSIONS = {}  # session id -> the texts prompted, for a replay
RUNNING = {}  # session id -> the id of the turn's user message, while /forever runs
PENDING = {}  # permission request id -> (session, message id, text)
COUNTER = [0]


def send(message):
    message["jsonrpc"] = "2.0"
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
    version = 1 if MODE == "v1-only" else min(request["params"].get("protocolVersion", 2), 2)
    if version == 1:
        return {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "v2-test", "version": "0"}}
    return {"protocolVersion": 2, "info": {"name": "v2-test-agent", "version": "0.1.0"},
            "capabilities": {"session": {}}}


def prompt(request):
    params = request["params"]
    session = params["sessionId"]
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
    call = next_id("call")
    if MODE == "v1-tool-call":
        update(session, {"sessionUpdate": "tool_call", "toolCallId": call, "title": "write"})
    else:
        update(session, {"sessionUpdate": "tool_call_update", "toolCallId": call, "title": "write",
                         "status": "pending"})
    state(session, "requires_action")
    asked = next_id("perm")
    PENDING[asked] = session
    send({"id": asked, "method": "session/request_permission", "params": {
        "sessionId": session, "title": "Allow write?",
        "subject": {"type": "tool_call", "toolCall": {"toolCallId": call}},
        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}})
    return "sent", None


def permission_answered(answer):
    session = PENDING.pop(answer.get("id"), None)
    if session is None:
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
    if method == "session/new":
        session = next_id("session")
        SESSIONS[session] = []
        return {"sessionId": session}, None
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


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "method" not in message:
            permission_answered(message)
        elif "id" not in message:
            notified(message)
        else:
            result, error = handle(message)
            if result == "sent":
                continue
            if error is not None:
                send({"id": message["id"], "error": error})
            else:
                send({"id": message["id"], "result": result})


main()
