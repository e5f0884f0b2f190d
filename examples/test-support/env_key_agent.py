"""A fake ACP agent (test support) with one `env_var` auth method, `key`, that reads
AGENTACP_TEST_AUTH_KEY from its own environment at `authenticate`, as Codex reads
OPENAI_API_KEY: `session/new` needs it to have worked (else -32000), and a prompt ends its
turn at once."""

import json
import os
import sys

VAR = "AGENTACP_TEST_AUTH_KEY"


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


authenticated = False
for line in sys.stdin:
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if id is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": 1, "agentCapabilities": {},
            "agentInfo": {"name": "env-key-agent", "version": "0"},
            "authMethods": [
                {"id": "login", "name": "Log in"},
                {"id": "key", "name": "Use " + VAR, "type": "env_var", "vars": [{"name": VAR}]},
            ]}})
    elif method == "authenticate":
        if os.environ.get(VAR):
            authenticated = True
            send({"jsonrpc": "2.0", "id": id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": VAR + " is not set"}})
    elif method == "session/new":
        if authenticated:
            send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
        else:
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "Authentication required"}})
    elif method == "session/prompt":
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
    else:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no " + str(method)}})
