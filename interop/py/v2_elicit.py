"""The official Python SDK's experimental v2 client (PyPI `agent-client-protocol` 1.0.0rc3,
`acp.experimental.v2`; run from interop/py/.venv-v2) answering an agentacp server's
elicitations (`elicitation/create`, `elicitation/complete`), for interop/tests/v2_sdk.rs.

    python v2_elicit.py OUT CWD PROMPT...

It speaks ACP v2 over its own stdin and stdout (the test serves its agent on them): it
advertises both elicitation modes, accepts a form with content and a URL without, and keeps
the completions it is told of. It prompts each PROMPT in one session, each turn read to its
idle state, then writes one JSON object to the file OUT: {"asked": [the params of each
elicitation/create], "completed": [each elicitationId completed], "said": [the text of each
agent message]}. Any failure or a wait over 30 s is written to stderr and exits 2.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from acp.experimental.v2 import PROTOCOL_VERSION, connect_to_agent, schema
from acp.stdio import stdio_streams

TIMEOUT = 30.0


def dump(model: Any) -> Any:
    """The JSON of an SDK model as it was on the wire (aliases, unset fields left out)."""
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if model is None or isinstance(model, (str, int, float, bool, list, dict)):
        return model
    return str(model)  # a URL


class Elicited:
    """The `acp.experimental.v2.Client`: answers elicitations, reads each turn's updates."""

    def __init__(self) -> None:
        self.asked: list[Any] = []
        self.completed: list[str] = []
        self.said: list[str] = []
        self.idle = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        update = dump(update)
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk" and update.get("content", {}).get("type") == "text":
            self.said.append(update["content"]["text"])
        elif kind == "state_update" and update.get("state") == "idle":
            self.idle.set()

    async def request_permission(self, session_id: str, **_: Any) -> schema.RequestPermissionResponse:
        return schema.RequestPermissionResponse(outcome=schema.CancelledPermissionOutcome())

    async def create_elicitation(self, message: str, mode: str, **kwargs: Any) -> Any:
        asked = {"message": message, "mode": mode}
        wire_names = {"session_id": "sessionId", "elicitation_id": "elicitationId", "url": "url",
                      "requested_schema": "requestedSchema"}
        for name, wire_name in wire_names.items():
            if kwargs.get(name) is not None:
                asked[wire_name] = dump(kwargs[name])
        self.asked.append(asked)
        if mode == "form":
            return schema.AcceptElicitationResponse(content={"strategy": "safe", "port": 8080})
        return schema.AcceptElicitationResponse()

    async def complete_elicitation(self, elicitation_id: str, **_: Any) -> None:
        self.completed.append(elicitation_id)


async def converse(conn: Any, client: Elicited, cwd: str, prompts: list[str]) -> None:
    capabilities = schema.ClientCapabilities(
        elicitation=schema.ElicitationCapabilities(
            form=schema.ElicitationFormCapabilities(), url=schema.ElicitationUrlCapabilities()
        )
    )
    await asyncio.wait_for(
        conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            info=schema.Implementation(name="agentacp-interop-py-elicit", version="0.0.0"),
            capabilities=capabilities,
        ),
        TIMEOUT,
    )
    session = await asyncio.wait_for(conn.new_session(cwd=cwd), TIMEOUT)
    for text in prompts:
        client.idle.clear()
        await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[schema.TextContentBlock(text=text)]), TIMEOUT
        )
        await asyncio.wait_for(client.idle.wait(), TIMEOUT)


async def main() -> int:
    if len(sys.argv) < 4:
        print("usage: v2_elicit.py OUT CWD PROMPT...", file=sys.stderr)
        return 2
    out, cwd, prompts = sys.argv[1], sys.argv[2], sys.argv[3:]
    client = Elicited()
    try:
        reader, writer = await stdio_streams()
        conn = connect_to_agent(client, writer, reader)
        await converse(conn, client, cwd, prompts)
    except Exception as error:  # noqa: BLE001 - every failure is reported the same way
        data = getattr(error, "data", None)
        detail = f": {json.dumps(data)}" if data is not None else ""
        print(f"v2_elicit.py: {type(error).__name__}: {error}{detail}", file=sys.stderr)
        return 2
    with open(out, "w", encoding="utf-8") as file:
        json.dump({"asked": client.asked, "completed": client.completed, "said": client.said}, file)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
