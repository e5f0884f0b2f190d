"""A small ACP protocol v2 agent written only with the official Python SDK's experimental v2
API (PyPI `agent-client-protocol` 1.0.0rc3, `acp.experimental.v2`; pinned in
requirements-v2.txt, run from interop/py/.venv-v2), for interop/tests/v2_sdk.rs: the same
agent as interop/src/bin/sdk-v2-agent.rs (read its header for what a turn sends).

    python v2_agent.py          v2 over its stdin/stdout
    python v2_agent.py --both   v1 and v2 on the same stdio through the SDK's
                                `acp.experimental.AgentProtocolRouter`: an `initialize` asking
                                for v1 gets a minimal v1 agent (`v1 echo: TEXT`, end_turn)
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from typing import Any

import acp
from acp import schema as v1
from acp.experimental import AgentProtocolRouter
from acp.experimental.v2 import run_agent, schema

NAME = "sdk-v2-agent-py"


class Session:
    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.history: list[Any] = []
        self.cancelled = asyncio.Event()


class V2Agent:
    """The v2 agent; `on_connect` hands it the connection to the client."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, Session] = {}
        self.ids = itertools.count()
        self.turns: set[asyncio.Task[None]] = set()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def next(self, prefix: str) -> str:
        return f"{prefix}-{next(self.ids)}"

    async def emit(self, session_id: str, update: Any) -> None:
        if update.session_update != "state_update" and session_id in self.sessions:
            self.sessions[session_id].history.append(update)
        await self.conn.session_update(session_id=session_id, update=update)

    async def initialize(self, protocol_version: int, info: Any, **_: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=2,
            info=schema.Implementation(name=NAME, version="0.1.0"),
            capabilities=schema.AgentCapabilities(session=schema.SessionCapabilities()),
        )

    async def new_session(self, cwd: str, **_: Any) -> schema.NewSessionResponse:
        if not os.path.isabs(cwd):
            raise acp.RequestError.invalid_params({"cwd": cwd})
        session_id = self.next("py-v2-session")
        self.sessions[session_id] = Session(cwd)
        # The idle snapshot goes out after the answer.
        asyncio.get_running_loop().call_soon(self.spawn, self.emit(session_id, schema.IdleSessionStateUpdate()))
        return schema.NewSessionResponse(session_id=session_id)

    def spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self.turns.add(task)
        task.add_done_callback(self.turns.discard)

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> schema.PromptResponse:
        if session_id not in self.sessions:
            raise acp.RequestError.invalid_params({"sessionId": session_id})
        message_id = self.next("user-message")
        asyncio.get_running_loop().call_soon(self.spawn, self.run_turn(session_id, message_id, prompt))
        return schema.PromptResponse(message_id=message_id)

    async def cancel_session(self, session_id: str, **_: Any) -> None:
        if session_id in self.sessions:
            self.sessions[session_id].cancelled.set()

    async def resume_session(self, session_id: str, cwd: str, replay_from: Any = None, **_: Any) -> Any:
        session = self.sessions.get(session_id)
        if session is None:
            raise acp.RequestError.invalid_params({"sessionId": session_id})
        if replay_from is not None and replay_from.type == "start":
            for update in list(session.history):
                await self.conn.session_update(session_id=session_id, update=update)
        await self.emit(session_id, schema.IdleSessionStateUpdate())
        return schema.ResumeSessionResponse()

    async def list_sessions(self, cwd: str | None = None, **_: Any) -> schema.ListSessionsResponse:
        """The sessions of this connection (those in `cwd` when it is given): v2's baseline."""
        return schema.ListSessionsResponse(
            sessions=[
                schema.SessionInfo(session_id=session_id, cwd=session.cwd)
                for session_id, session in self.sessions.items()
                if cwd is None or session.cwd == cwd
            ]
        )

    async def close_session(self, session_id: str, **_: Any) -> Any:
        return schema.CloseSessionResponse()

    def chunk(self, text: str, message_id: str) -> Any:
        return schema.AgentMessageChunk(message_id=message_id, content=schema.TextContentBlock(text=text))

    async def run_turn(self, session_id: str, message_id: str, prompt: list[Any]) -> None:
        session = self.sessions[session_id]
        text = next((block.text for block in prompt if getattr(block, "type", None) == "text"), "")
        await self.emit(session_id, schema.UserMessageUpdate(message_id=message_id, content=prompt))
        await self.emit(session_id, schema.RunningSessionStateUpdate())
        if "/wait" in text:
            session.cancelled.clear()
            await self.emit(session_id, self.chunk("waiting", self.next("agent-message")))
            await session.cancelled.wait()
            stop_reason = "cancelled"
        else:
            stop_reason = await self.echo_turn(session_id, text)
        await self.emit(session_id, schema.IdleSessionStateUpdate(stop_reason=stop_reason))

    async def echo_turn(self, session_id: str, text: str) -> str:
        message_id = self.next("agent-message")
        for i, word in enumerate(f"echo: {text}".split()):
            await self.emit(session_id, self.chunk(word if i == 0 else f" {word}", message_id))
        call = self.next("call")
        await self.emit(
            session_id,
            schema.SessionToolCallUpdate(tool_call_id=call, title="write-file", kind="edit", status="pending"),
        )
        await self.emit(session_id, schema.RequiresActionSessionStateUpdate())
        answer = await self.conn.request_permission(
            session_id=session_id,
            title="write-file",
            subject=schema.ToolCallPermissionSubjectVariant(tool_call=schema.ToolCallUpdate(tool_call_id=call)),
            options=[
                schema.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
            ],
        )
        approved = answer.outcome.outcome == "selected" and answer.outcome.option_id == "allow"
        await self.emit(session_id, schema.RunningSessionStateUpdate())
        status = "completed" if approved else "failed"
        await self.emit(session_id, schema.SessionToolCallUpdate(tool_call_id=call, status=status))
        await self.emit(session_id, self.chunk(" approved" if approved else " rejected", message_id))
        return "end_turn"


class V1Agent:
    """The v1 half of `--both`."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.sessions = itertools.count()

    async def initialize(self, protocol_version: int, **_: Any) -> v1.InitializeResponse:
        return v1.InitializeResponse(
            protocol_version=1, agent_info=v1.Implementation(name=NAME, version="0.1.0")
        )

    async def new_session(self, cwd: str, **_: Any) -> v1.NewSessionResponse:
        return v1.NewSessionResponse(session_id=f"py-v1-session-{next(self.sessions)}")

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> v1.PromptResponse:
        text = next((block.text for block in prompt if getattr(block, "type", None) == "text"), "")
        chunk = v1.AgentMessageChunk(content=v1.TextContentBlock(text=f"v1 echo: {text}"))
        await self.conn.session_update(session_id=session_id, update=chunk)
        return v1.PromptResponse(stop_reason="end_turn")


def v2_agent(conn: Any) -> V2Agent:
    agent = V2Agent()
    agent.on_connect(conn)
    return agent


async def main() -> None:
    if "--both" in sys.argv[1:]:
        await AgentProtocolRouter(v1=V1Agent, v2=v2_agent).run()
    else:
        await run_agent(V2Agent())


if __name__ == "__main__":
    asyncio.run(main())
