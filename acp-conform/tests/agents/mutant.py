"""A small ACP agent for acp-conform's tests, correct unless told to be wrong in one way.

python3 mutant.py INIT.json [MUTANT]: INIT.json is the initialize result to answer with; MUTANT
is one of answer-notification, update-after-response, ignore-cancel, accept-dotdot,
extra-capability, stdout-noise, break-chain, accept-busy, ignore-frame-limit, ignore-sigterm,
skip-audit-record, announce-denied, run-after-reject, run-unanswered,
unknown-session-invalid-params (or nothing: a correct agent); or require-auth (sessions and
prompts are refused with -32000 until `authenticate` with `conform-key`, which needs
CONFORM_TEST_KEY=k) or require-auth-prompt (only prompts are refused so).

Its tools, for the prompts `/tool read` (runs unasked), `/tool write` (asks permission) and
`/tool delete` (governance denies it).
"""
import json
import os
import queue
import sys
import threading

INIT = json.load(open(sys.argv[1]))
MUTANT = sys.argv[2] if len(sys.argv) > 2 else ""
ROOT = os.path.realpath(os.environ["AGENTACP_WORKSPACE_ROOT"])
if MUTANT == "extra-capability":
    INIT["agentCapabilities"]["promptCapabilities"]["image"] = True
if MUTANT.startswith("require-auth"):
    INIT["authMethods"] = [
        {"id": "conform-key", "name": "a key", "type": "env_var", "vars": [{"name": "CONFORM_TEST_KEY"}]},
        {"id": "login", "name": "log in", "type": "terminal", "args": ["--login"]},
    ]
authenticated = False

inbox = queue.Queue()


def read():
    for line in sys.stdin:
        inbox.put(line)
    inbox.put(None)


def send(message):
    message["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def error(id, code, text):
    send({"id": id, "error": {"code": code, "message": text}})


def update(session, text):
    send({"method": "session/update", "params": {"sessionId": session, "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})


LIMIT = int(os.environ.get("AGENTACP_MAX_FRAME_BYTES", "4194304"))
if MUTANT == "ignore-frame-limit":
    LIMIT = 1 << 40
if MUTANT == "ignore-sigterm":
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
AUDIT = os.environ.get("AGENTACP_AUDIT_LOG")
initialized = False
busy = set()
sessions = set()
cancelled = set()


def audit(action, session, subject=None, extra=None):
    """Appends a hash-chained record to $AGENTACP_AUDIT_LOG, if set (break-chain: a wrong link)."""
    if not AUDIT:
        return
    import hashlib
    seq, prev = 0, "GENESIS"
    if os.path.exists(AUDIT):
        with open(AUDIT) as log:
            for line in log:
                record = json.loads(line)
                seq, prev = record["seq"] + 1, record["hash"]
    if MUTANT == "break-chain" and seq > 0:
        prev = "0" * 64
    record = {"$schema": "agentgovernance/v1", "doctype": "audit-event", "seq": seq,
              "ts": "2026-11-26T00:00:00.000Z", "actor": {"id": "operator:mutant", "role": "operator"},
              "action": action, "subject": subject or {"kind": "session", "ref": session}, "prevHash": prev}
    record.update(extra or {})
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    record["hash"] = hashlib.sha256(canonical.encode()).hexdigest()
    with open(AUDIT, "a") as log:
        log.write(json.dumps(record) + "\n")


calls = [0]


def audit_call(session, call, tool, approval, result=None, error=None):
    """The tool.call record of one call, with the AIP-44 mirror."""
    outcome = {"result": result} if error is None else {"error": error}
    mirror = {"audit-event-kind": "tool-call", "operator": "mutant", "session": session, "tool": tool,
              "arguments": {}, "approval": approval}
    mirror.update(outcome)
    audit("tool.call", session, {"kind": "tool-call", "ref": call},
          {"input": {"tool": tool, "arguments": {}}, "output": outcome, "metadata": {"aip44": mirror}})


def tool_update(session, call, status, kind="tool_call_update", title=None):
    update = {"sessionUpdate": kind, "toolCallId": call, "status": status}
    if title:
        update["title"] = title
    send({"method": "session/update", "params": {"sessionId": session, "update": update}})


def permission(session, call):
    """Asks the client about `call`; returns "allow", "reject" or "cancelled" (None on EOF)."""
    request = "perm-" + call
    send({"id": request, "method": "session/request_permission", "params": {
        "sessionId": session, "toolCall": {"toolCallId": call, "title": "write", "status": "pending"},
        "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}})
    while True:
        line = inbox.get()
        if line is None:
            return None
        message = json.loads(line)
        if message.get("id") == request and "method" not in message:
            outcome = (message.get("result") or {}).get("outcome") or {}
            return "allow" if outcome.get("optionId") == "yes" else "reject"
        handle(message)
        if session in cancelled:
            return "cancelled"


def run_tool(session, tool):
    """One governed tool call; returns the stop reason."""
    calls[0] += 1
    call = "call_%d" % calls[0]
    if tool == "delete":
        audit_call(session, call, tool, {"deniedBy": "governance", "reason": "not allowed"}, error="denied")
        if MUTANT == "announce-denied":
            tool_update(session, call, "pending", "tool_call", tool)
        return "end_turn"
    if tool == "read":
        if MUTANT != "skip-audit-record":
            audit_call(session, call, tool, "auto", result={"text": "hi"})
        tool_update(session, call, "in_progress", "tool_call", tool)
        tool_update(session, call, "completed")
        return "end_turn"
    tool_update(session, call, "pending", "tool_call", tool)
    answer = permission(session, call)
    if answer is None:
        sys.exit(0)
    if answer == "allow" or (answer == "reject" and MUTANT == "run-after-reject") or (
            answer == "cancelled" and MUTANT == "run-unanswered"):
        audit_call(session, call, tool, {"approvedBy": "client"}, result={"written": 2})
        tool_update(session, call, "completed")
        return "cancelled" if answer == "cancelled" else "end_turn"
    audit_call(session, call, tool, {"rejectedBy": "client", "reason": answer}, error="rejected: " + answer)
    tool_update(session, call, "failed")
    return "cancelled" if answer == "cancelled" else "end_turn"


def inside(cwd):
    if MUTANT == "accept-dotdot" and ".." in cwd.split(os.sep):
        return True
    real = os.path.realpath(cwd)
    return real == ROOT or real.startswith(ROOT + os.sep)


def handle(message):
    """Handles one message; returns False on EOF."""
    global initialized, authenticated
    method, id, params = message.get("method"), message.get("id"), message.get("params") or {}
    if not isinstance(method, str):
        return error(id if isinstance(id, (str, int)) else None, -32600, "invalid request")
    if "id" not in message:
        if MUTANT == "answer-notification":
            send({"id": None, "result": {}})
        if method == "session/cancel":
            cancelled.add(params.get("sessionId"))
        return
    if method == "initialize":
        initialized = True
        result = dict(INIT)
        result["protocolVersion"] = min(params.get("protocolVersion", 1), 1) if params.get("protocolVersion", 1) >= 1 else 1
        return send({"id": id, "result": result})
    if not initialized:
        return error(id, -32600, "not initialized")
    if method == "authenticate":
        if params.get("methodId") == "conform-key" and os.environ.get("CONFORM_TEST_KEY") == "k":
            authenticated = True
            return send({"id": id, "result": {}})
        return error(id, -32000, "authentication failed")
    walled = {"require-auth": ("session/new", "session/prompt", "session/load"),
              "require-auth-prompt": ("session/prompt",)}.get(MUTANT, ())
    if method in walled and not authenticated:
        return error(id, -32000, "Authentication required")
    if method == "session/new":
        cwd = params.get("cwd")
        if not isinstance(cwd, str):
            return error(id, -32602, "cwd must be a string")
        if not os.path.isabs(cwd) or not inside(cwd):
            return error(id, -32602, "bad cwd")
        session = "s%d" % len(sessions)
        sessions.add(session)
        audit("operator.invoked", session)
        return send({"id": id, "result": {"sessionId": session}})
    if method == "session/prompt":
        session = params.get("sessionId")
        if session not in sessions:
            if MUTANT == "unknown-session-invalid-params":
                return error(id, -32602, "unknown session")
            return error(id, -32002, "unknown session")
        if session in busy and MUTANT != "accept-busy":
            return error(id, -32602, "a prompt is running on this session")
        text = params["prompt"][0].get("text", "")
        cancelled.discard(session)
        if text == "/forever":
            busy.add(session)
            while True:
                update(session, ".")
                try:
                    line = inbox.get(timeout=0.005)
                except queue.Empty:
                    continue
                if line is None:
                    return
                if len(line.encode()) > LIMIT:
                    error(None, -32600, "frame too large")
                    continue
                handle(json.loads(line))
                if session in cancelled and MUTANT != "ignore-cancel":
                    busy.discard(session)
                    return send({"id": id, "result": {"stopReason": "cancelled"}})
        if text.startswith("/tool "):
            busy.add(session)
            reason = run_tool(session, text.split()[1])
            busy.discard(session)
            return send({"id": id, "result": {"stopReason": reason}})
        update(session, text)
        send({"id": id, "result": {"stopReason": "end_turn"}})
        if MUTANT == "update-after-response":
            update(session, "late")
        return
    return error(id, -32601, "method not found")


if MUTANT == "stdout-noise":
    print("hello from the agent")
threading.Thread(target=read, daemon=True).start()
while True:
    line = inbox.get()
    if line is None:
        sys.exit(0)
    if len(line.encode()) > LIMIT:
        error(None, -32600, "frame too large")
        continue
    try:
        message = json.loads(line)
    except ValueError:
        error(None, -32700, "parse error")
        continue
    if not isinstance(message, dict):
        error(None, -32600, "invalid request")
        continue
    handle(message)
