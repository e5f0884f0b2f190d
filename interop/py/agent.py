"""A small ACP agent written only with the official Python SDK (PyPI
`agent-client-protocol`, pinned in requirements.txt; import name `acp`), for
interop/tests/client_drives_sdk_agents.rs: our client drives it over its stdio, like the same
agent written with the Rust SDK (interop/src/bin/sdk-agent.rs) and the TypeScript SDK
(interop/ts/agent.mjs).

    python agent.py                       over its stdin/stdout
    python agent.py --listen HOST:PORT    served by the SDK's own Streamable HTTP server
                                          (`acp.http.asgi.create_asgi_app`, under uvicorn)
                                          at http://HOST:PORT/acp, one agent per
                                          connection; for interop/tests/http_servers.rs

What it does with a prompt's text:
- `/permission`: a `tool_call` (pending, kind edit, title write-file), then
  `session/request_permission` with `allow` (allow_once) and `reject` (reject_once); on `allow`
  a `tool_call_update` completed and the chunk `approved`, else failed and `rejected`;
  end_turn;
- `/read PATH`: `fs/read_text_file` of PATH (when the client offers it), then the chunk
  `read: CONTENT`, or `error: CODE MESSAGE` when the client answered an error; end_turn;
- `/wait`: the chunk `waiting`, then nothing until `session/cancel`; cancelled;
- anything else: the words of `echo: TEXT` as chunks (every word but the first with its
  leading space); end_turn.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from typing import Any

import acp
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    PermissionOption,
    ToolCallUpdate,
)


class SdkAgent:
    """The agent; the SDK calls its methods (see `acp.Agent`)."""

    def __init__(self) -> None:
        self._client: Any = None
        self._reads_offered = False
        self._sessions = itertools.count()
        self._tool_calls = itertools.count()
        # Per session, the event that ends its running turn (set by `session/cancel`).
        self._cancels: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> acp.InitializeResponse:
        fs = client_capabilities.fs if client_capabilities else None
        self._reads_offered = bool(fs and fs.read_text_file)
        return acp.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="sdk-agent-py", version="0.1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> acp.NewSessionResponse:
        return acp.NewSessionResponse(session_id=f"py-session-{next(self._sessions)}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if event := self._cancels.get(session_id):
            event.set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> acp.PromptResponse:
        text = next((block.text for block in prompt if getattr(block, "type", None) == "text"), "")
        if text == "/wait":
            cancelled = self._cancels[session_id] = asyncio.Event()
            await self._say(session_id, "waiting")
            await cancelled.wait()
            return acp.PromptResponse(stop_reason="cancelled")
        if text == "/permission":
            await self._permission(session_id)
        elif text.startswith("/read "):
            await self._read(session_id, text[len("/read ") :].strip())
        else:
            for i, word in enumerate(f"echo: {text}".split()):
                await self._say(session_id, word if i == 0 else f" {word}")
        return acp.PromptResponse(stop_reason="end_turn")

    async def _say(self, session_id: str, text: str) -> None:
        await self._client.session_update(session_id=session_id, update=acp.update_agent_message_text(text))

    async def _permission(self, session_id: str) -> None:
        tool_call_id = f"call-{next(self._tool_calls)}"
        await self._client.session_update(
            session_id=session_id,
            update=acp.start_tool_call(tool_call_id, "write-file", kind="edit", status="pending"),
        )
        answer = await self._client.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id=tool_call_id, title="write-file"),
            options=[
                PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
            ],
        )
        approved = isinstance(answer.outcome, AllowedOutcome) and answer.outcome.option_id == "allow"
        await self._client.session_update(
            session_id=session_id,
            update=acp.update_tool_call(tool_call_id, status="completed" if approved else "failed"),
        )
        await self._say(session_id, "approved" if approved else "rejected")

    async def _read(self, session_id: str, path: str) -> None:
        if not self._reads_offered:
            await self._say(session_id, "error: the client does not offer fs/read_text_file")
            return
        try:
            file = await self._client.read_text_file(session_id=session_id, path=path)
            text = f"read: {file.content}"
        except acp.RequestError as error:
            text = f"error: {error.code} {error}"
        await self._say(session_id, text)


async def listen(address: str) -> None:
    """The SDK's ASGI app (a fresh `SdkAgent` per connection) at `/acp` only, under uvicorn
    (HTTP/1.1; PyPI `uvicorn`, pinned in requirements.txt)."""
    import uvicorn
    from acp.http.asgi import create_asgi_app

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        sys.exit(f"agent.py: --listen wants HOST:PORT, not {address!r}")
    app = create_asgi_app(lambda conn: SdkAgent())

    async def only_acp(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("path") != "/acp":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"not found: the endpoint is /acp\n"})
            return
        await app(scope, receive, send)

    print(f"sdk-agent-py: listening on http://{address}/acp", file=sys.stderr, flush=True)
    config = uvicorn.Config(only_acp, host=host, port=int(port), log_level="warning", lifespan="off")
    await uvicorn.Server(config).serve()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--listen":
        asyncio.run(listen(sys.argv[2]))
    elif len(sys.argv) == 1:
        asyncio.run(acp.run_agent(SdkAgent()))
    else:
        sys.exit("usage: python agent.py [--listen HOST:PORT]")
