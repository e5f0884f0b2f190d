"""A protocol v2 client written only with the official Python SDK's experimental v2 API
(PyPI `agent-client-protocol` 1.0.0rc3, `acp.experimental.v2`; pinned in
requirements-v2.txt, run from interop/py/.venv-v2), for interop/tests/v2_sdk.rs: the same
conversation, printed as the same JSON lines, as interop/src/bin/sdk-v2-client.rs (read its
header for the steps and the line format).

    python v2_client.py [--prompt=TEXT] [--cancel-prompt=TEXT] [--cwd=DIR] [--no-resume] [--no-replay] -- PROGRAM [ARGS...]

It spawns PROGRAM (with the SDK's `acp.stdio.spawn_stdio_transport`) and drives it over its
stdio with `acp.experimental.v2.connect_to_agent`: `initialize` (protocol 2), `session/new`,
turn 1 (updates until an idle state that follows a non-idle one; a permission request is
answered with its first allow_once, else allow_always option), turn 2 cancelled
(`session/cancel` after its first agent_message_chunk), `session/resume` with
`replayFrom: {type: "start"}` (without it: `--no-replay`). Any protocol error or a wait over 30 s prints
{"step":"error",...} and exits 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from acp.experimental.v2 import PROTOCOL_VERSION, connect_to_agent, schema
from acp.stdio import spawn_stdio_transport

TIMEOUT = 30.0


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def dump(model: Any) -> Any:
    """The JSON of an SDK model as it was on the wire (aliases, unset fields left out)."""
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return model


class Recorder:
    """The `acp.experimental.v2.Client`: queues session updates, allows permission requests."""

    def __init__(self) -> None:
        self.updates: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.turn: Any = 0

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        await self.updates.put((session_id, update))

    async def request_permission(
        self, session_id: str, title: str, options: list[Any], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        chosen = next((o for o in options if o.kind == "allow_once"), None) or next(
            (o for o in options if o.kind == "allow_always"), None
        )
        if chosen is None:
            outcome: Any = schema.CancelledPermissionOutcome()
        else:
            outcome = schema.SelectedPermissionOutcomeVariant(option_id=chosen.option_id)
        request = {"sessionId": session_id, "title": title, "options": [dump(o) for o in options]}
        if kwargs.get("subject") is not None:
            request["subject"] = dump(kwargs["subject"])
        emit({"step": "permission", "turn": self.turn, "request": request, "answer": dump(outcome)})
        return schema.RequestPermissionResponse(outcome=outcome)

    def drain(self) -> list[tuple[str, Any]]:
        drained = []
        while not self.updates.empty():
            drained.append(self.updates.get_nowait())
        return drained

    async def next(self, session_id: str) -> dict[str, Any]:
        while True:
            try:
                sid, update = await asyncio.wait_for(self.updates.get(), TIMEOUT)
            except asyncio.TimeoutError:
                raise RuntimeError("no session/update within 30 s") from None
            if sid == session_id:
                return dump(update)


async def run_turn(conn: Any, recorder: Recorder, session_id: str, number: int, text: str, cancel: bool) -> None:
    recorder.drain()
    recorder.turn = number
    ack = await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=[schema.TextContentBlock(text=text)]), TIMEOUT
    )
    emit({"step": "prompt", "turn": number, "result": dump(ack)})
    active = cancelled = False
    while True:
        update = await recorder.next(session_id)
        emit({"step": "update", "turn": number, "update": update})
        kind = update.get("sessionUpdate")
        if kind == "state_update":
            if update.get("state") == "idle" and active:
                emit({"step": "idle", "turn": number, "stopReason": update.get("stopReason")})
                return
            if update.get("state") != "idle":
                active = True
        elif kind == "agent_message_chunk" and cancel and not cancelled:
            await conn.cancel_session(session_id=session_id)
            emit({"step": "cancel", "turn": number})
            cancelled = True


async def converse(conn: Any, recorder: Recorder, options: dict[str, Any]) -> None:
    initialized = await asyncio.wait_for(
        conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            info=schema.Implementation(name="sdk-v2-client-py", version="0.1.0"),
        ),
        TIMEOUT,
    )
    emit({"step": "initialize", "result": dump(initialized)})
    session = await asyncio.wait_for(conn.new_session(cwd=options["cwd"], mcp_servers=[]), TIMEOUT)
    emit({"step": "session/new", "sessionId": session.session_id, "result": dump(session)})
    sid = session.session_id
    await run_turn(conn, recorder, sid, 1, options["prompt"], False)
    await run_turn(conn, recorder, sid, 2, options["cancel_prompt"], True)
    if options["resume"]:
        recorder.drain()
        recorder.turn = "resume"
        answer = await asyncio.wait_for(
            conn.resume_session(
                session_id=sid,
                cwd=options["cwd"],
                replay_from=schema.ReplayFromStartVariant() if options["replay"] else None,
            ),
            TIMEOUT,
        )
        # The SDK may hand over the replayed updates a little after the answer: the replay
        # ends with the idle snapshot the agent sends before answering.
        replayed = recorder.drain()
        while not any(dump(u).get("sessionUpdate") == "state_update" for _, u in replayed):
            try:
                replayed.append(await asyncio.wait_for(recorder.updates.get(), TIMEOUT))
            except asyncio.TimeoutError:
                break
        for update_sid, update in replayed:
            if update_sid == sid:
                emit({"step": "update", "turn": "resume", "update": dump(update)})
        emit({"step": "resume", "replay": options["replay"], "result": dump(answer)})
    emit({"step": "done"})


def parse_options(argv: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {
        "prompt": "hello",
        "cancel_prompt": "/wait",
        "cwd": os.getcwd(),
        "resume": True,
        "replay": True,
        "program": [],
    }
    if "--" in argv:
        split = argv.index("--")
        argv, options["program"] = argv[:split], argv[split + 1 :]
    for flag in argv:
        name, _, value = flag.partition("=")
        if name == "--prompt":
            options["prompt"] = value
        elif name == "--cancel-prompt":
            options["cancel_prompt"] = value
        elif name == "--cwd":
            options["cwd"] = value
        elif name == "--no-resume":
            options["resume"] = False
        elif name == "--no-replay":
            options["replay"] = False
        else:
            raise RuntimeError(f"unknown argument {flag}")
    if not options["program"]:
        raise RuntimeError(
            "usage: v2_client.py [--prompt=TEXT] [--cancel-prompt=TEXT] [--cwd=DIR] [--no-resume] [--no-replay] -- PROGRAM [ARGS...]"
        )
    return options


async def main() -> int:
    try:
        options = parse_options(sys.argv[1:])
        recorder = Recorder()
        program, *args = options["program"]
        # The agent gets this process's whole environment (the SDK's default is a trimmed one).
        async with spawn_stdio_transport(program, *args, env=dict(os.environ)) as (reader, writer, _process):
            conn = connect_to_agent(recorder, writer, reader)
            await converse(conn, recorder, options)
        return 0
    except Exception as error:  # noqa: BLE001 - every failure becomes the transcript's error line
        data = getattr(error, "data", None)
        detail = f": {json.dumps(data)}" if data is not None else ""
        emit({"step": "error", "message": f"{type(error).__name__}: {error}{detail}"})
        return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
