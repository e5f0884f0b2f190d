"""A small ACP agent for acp-conform's tests, correct unless told to be wrong in one way.

python3 mutant.py INIT.json [MUTANT]: INIT.json is the initialize result to answer with; MUTANT
is one of answer-notification, update-after-response, ignore-cancel, accept-dotdot,
extra-capability, stdout-noise, break-chain, accept-busy, ignore-frame-limit, ignore-sigterm (or nothing: a
correct agent).
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


def audit(action, session):
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
              "action": action, "subject": {"kind": "session", "ref": session}, "prevHash": prev}
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    record["hash"] = hashlib.sha256(canonical.encode()).hexdigest()
    with open(AUDIT, "a") as log:
        log.write(json.dumps(record) + "\n")


def inside(cwd):
    if MUTANT == "accept-dotdot" and ".." in cwd.split(os.sep):
        return True
    real = os.path.realpath(cwd)
    return real == ROOT or real.startswith(ROOT + os.sep)


def handle(message):
    """Handles one message; returns False on EOF."""
    global initialized
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
            return error(id, -32602, "unknown session")
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
