"""The official Python ACP SDK's client side (PyPI `agent-client-protocol`, pinned in
requirements.txt; import name `acp`) drives one of our agents over its stdio, or a server
listening on a WebSocket, for interop/tests/py_sdk.rs. Written against the SDK's public
client API only: `acp.spawn_agent_process` (which starts the agent and gives a
`ClientSideConnection`), an `acp.Client` implementation for `session/update` and
`session/request_permission`, and the connection's stream observers
(`acp.connection.StreamEvent`), which see every JSON-RPC message in wire order.

    python client.py SCENARIO AGENT [ARG...]

SCENARIO is `basic` (echo-server), `governed` (governed-server) or `bridge` (the governance
bridge in front of governed-server). When AGENT is a `ws://` URL (a server started with
`--listen`, docs/remote.md), the SDK's own WebSocket transport (`acp.ws.create_websocket_stream`,
on PyPI `websockets`) connects to it instead, without a token on the upgrade; after
`initialize`, a `session/new` must be refused (step `before_auth`) until `authenticate` with
`methodId` `bearer` and the token of `SCENARIO_TOKEN` in `_meta.agentacp.token` (step
`authenticate`); before that, `websockets` alone tries a wrong token (`refused_wrong_token`)
and a foreign origin (`refused_origin`): `{"step": NAME, "status": <the HTTP status>}`.
When AGENT is an `http://` URL, the SDK's own Streamable HTTP transport
(`acp.http.create_http_stream`, on PyPI `httpx`) connects to it with `Authorization: Bearer`
and the token of `SCENARIO_TOKEN` on every request; before that, `httpx` alone POSTs an
`initialize` with a wrong token (`refused_wrong_token`) and one with a foreign origin
(`refused_origin`); after the steps, `resume` (`session/resume` of the session: `ok`, `error`
or `failure`) and `after_resume` (a prompt); at the end (`http_exchanges`) every request the SDK made is listed as
`{"method", "status", "type", "session", "rpc", "version"}` in `exchanges`. It speaks HTTP/2
only (h2c, prior knowledge), through an `httpx` client given to the SDK.
The agent's environment gets every `AGENTACP_*` variable of this one. `SCENARIO_CWD` is the
sessions' cwd (inside the workspace root), `SCENARIO_OUTSIDE` a folder outside it,
`SCENARIO_TRANSCRIPT` (optional) a file that receives every wire message, one JSON line each:
`{"dir": "in"|"out", "message": ...}`.

This script judges nothing: it prints one JSON line per step on stdout and the Rust test
asserts on them. A step line is `{"step": NAME, ...}`:
- `initialize`: `result` (the response's `result` as it was on the wire), `sdk` (the same, read
  by the SDK into its `InitializeResponse` and dumped again);
- `new_session` / `new_session_outside`: `sessionId`, or `error` (`{code, message}`);
- a prompt step: `prompt` (its text), `stopReason` or `error`, `events` (every
  `session/update` and `session/request_permission` that arrived while the prompt was the
  latest one sent, in wire order: `{"kind": "update", "update": ...}` or `{"kind":
  "permission", "toolCall": ..., "options": ..., "answer": <the result this client sent>}`,
  each with `phase`: `before` or `after` the prompt's response), `sdkUpdates` and
  `sdkPermissions` (how many the SDK handed to this client's handlers during the step);
- `exit` (last, once the SDK closed the agent's stdin and waited for it, or closed the
  WebSocket): `returncode` (`null` over a WebSocket);
  `late`, every event that arrived after the response of the prompt it belongs to; `early`,
  every event that arrived before any prompt was sent.
A step that fails in this script prints `{"step": NAME, "crash": "..."}` and the script exits
1. Every wait is bounded by TIMEOUT.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from typing import Any

import acp
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

# The bound on every wait for the agent (a response, an update, its exit).
TIMEOUT = 30.0
# The name this client gives in `initialize`: servers and the bridge audit approvals as
# `client:<name>`.
CLIENT_NAME = "agentacp-interop-py"


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


# What an event read while a prompt is on its way out is attributed to, until the SDK reports
# that request (with its id) as sent.
ANNOUNCED = "(announced)"


class Wire:
    """Stream observer: every message in wire order, session/update and
    session/request_permission attributed to the latest session/prompt sent.

    The SDK reports a request as sent only once its transport's `send` returned: over
    Streamable HTTP that is the POST's `202`, which may come after the agent's first updates
    for it arrived on the SSE stream. So the scenario announces each prompt (and each
    resume) before it sends it, and what arrives in between is attributed to the announced
    prompt."""

    def __init__(self, transcript: Any) -> None:
        self.transcript = transcript
        self.responses: dict[Any, dict[str, Any]] = {}
        self.method_of: dict[Any, str] = {}  # our request id -> method
        self.current_prompt: Any = None
        self.answered_prompts: set[Any] = set()
        self.events: list[dict[str, Any]] = []  # every attributed event, in wire order
        self.permission_events: dict[Any, dict[str, Any]] = {}  # their request id -> event

    def __call__(self, event: StreamEvent) -> None:
        message = event.message
        incoming = event.direction == StreamDirection.INCOMING
        if self.transcript:
            self.transcript.write(json.dumps({"dir": "in" if incoming else "out", "message": message}) + "\n")
            self.transcript.flush()
        method = message.get("method")
        if not incoming:
            if method is not None and "id" in message:
                self.method_of[message["id"]] = method
                if method == "session/prompt":
                    self.current_prompt = message["id"]
                    for event in self.events:
                        if event["prompt"] == ANNOUNCED:
                            event["prompt"] = message["id"]
                    if message["id"] in self.responses:
                        self.answered_prompts.add(message["id"])
                elif method in ("session/load", "session/resume"):
                    # What such a request brings (a replay, the slash commands) belongs to no
                    # prompt.
                    self.current_prompt = None
            elif method is None and message.get("id") in self.permission_events:
                answer = message.get("result", {"error": message.get("error")})
                self.permission_events[message["id"]]["answer"] = answer
            return
        if method is None:
            if "id" in message:
                self.responses[message["id"]] = message
                if self.method_of.get(message["id"]) == "session/prompt":
                    self.answered_prompts.add(message["id"])
            return
        params = message.get("params") or {}
        if method == "session/update":
            recorded = {"kind": "update", "update": params.get("update")}
        elif method == "session/request_permission":
            recorded = {"kind": "permission", "toolCall": params.get("toolCall"), "options": params.get("options")}
            self.permission_events[message.get("id")] = recorded
        else:
            return
        recorded["sessionId"] = params.get("sessionId")
        recorded["prompt"] = self.current_prompt
        if self.current_prompt is None:
            recorded["phase"] = "none"
        elif self.current_prompt in self.answered_prompts:
            recorded["phase"] = "after"
        else:
            recorded["phase"] = "before"
        self.events.append(recorded)

    def counts(self) -> tuple[int, int]:
        """The updates and permission requests carried so far."""
        return sum(1 for e in self.events if e["kind"] == "update"), len(self.permission_events)

    def announce_prompt(self) -> None:
        """A `session/prompt` is about to be sent: what arrives from now on is its."""
        self.current_prompt = ANNOUNCED

    def announce_replay(self) -> None:
        """A `session/load` or `session/resume` is about to be sent: what arrives from now on
        belongs to no prompt."""
        self.current_prompt = None

    def last_request(self, method: str) -> Any:
        return next((rid for rid, m in reversed(self.method_of.items()) if m == method), None)


class InteropClient:
    """The editor side (`acp.Client`): records what the SDK hands it, answers permission
    requests by option kind (`allow_once`, `reject_once`, ...) or `cancelled`."""

    def __init__(self) -> None:
        self.policy = "cancelled"
        self.updates = 0
        self.permissions = 0
        # Set by the first agent_message_chunk once armed (see `arm_first_chunk`).
        self.first_chunk: asyncio.Event | None = None
        # Notified after each update or permission request the SDK hands over (see `caught_up`).
        self.handed = asyncio.Condition()

    async def caught_up(self, wire: "Wire") -> None:
        """Waits until the SDK has handed this client every update and permission request the
        wire has carried so far: the SDK dispatches them in tasks of its own, so one read before
        a prompt (an `available_commands_update` after `session/new`, say) may reach the client
        only after that prompt started, and be counted against it."""

        def done() -> bool:
            updates, permissions = wire.counts()
            return self.updates >= updates and self.permissions >= permissions

        # The last check of `done` must come after the last suspension: the caller reads the
        # counts right after this returns, and `asyncio.wait_for` suspends even when the
        # condition already holds, which lets the wire record one more message whose SDK task
        # has not yet run.
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        async with self.handed:
            while not done():
                remaining = deadline - asyncio.get_running_loop().time()
                try:
                    await asyncio.wait_for(self.handed.wait(), max(remaining, 0))
                except asyncio.TimeoutError:
                    # One the SDK never handed over shows up in the next step's counts.
                    updates, permissions = wire.counts()
                    print(
                        f"client.py: after {TIMEOUT} s the SDK had handed over {self.updates} updates and"
                        f" {self.permissions} permission requests; the wire carried {updates} and {permissions}",
                        file=sys.stderr,
                        flush=True,
                    )
                    return

    async def _handed_one(self) -> None:
        async with self.handed:
            self.handed.notify_all()

    def arm_first_chunk(self) -> asyncio.Event:
        self.first_chunk = asyncio.Event()
        return self.first_chunk

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates += 1
        if self.first_chunk is not None and getattr(update, "session_update", None) == "agent_message_chunk":
            self.first_chunk.set()
        await self._handed_one()

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions += 1
        await self._handed_one()
        if self.policy != "cancelled":
            for option in options:
                if option.kind == self.policy:
                    return RequestPermissionResponse(
                        outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                    )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


def error_of(error: acp.RequestError) -> dict[str, Any]:
    return {"code": error.code, "message": str(error), "data": error.data}


class Scenario:
    def __init__(self, conn: Any, client: InteropClient, wire: Wire) -> None:
        self.conn = conn
        self.client = client
        self.wire = wire
        self.cwd = os.environ["SCENARIO_CWD"]
        self.outside = os.environ.get("SCENARIO_OUTSIDE", "/")

    async def initialize(self) -> None:
        response = await asyncio.wait_for(
            self.conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name=CLIENT_NAME, version="0.1.0"),
            ),
            TIMEOUT,
        )
        raw = self.wire.responses.get(self.wire.last_request("initialize"), {})
        emit(
            {
                "step": "initialize",
                "result": raw.get("result"),
                "sdk": response.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        )

    async def authenticate(self, token: str) -> None:
        try:
            # The SDK puts keyword arguments into the request's `_meta`.
            await asyncio.wait_for(self.conn.authenticate(method_id="bearer", agentacp={"token": token}), TIMEOUT)
        except acp.RequestError as error:
            emit({"step": "authenticate", "error": error_of(error)})
            return
        emit({"step": "authenticate", "ok": True})

    async def resume(self, step: str, session_id: str) -> None:
        """`session/resume` of `session_id`: `ok`, or `error` (a JSON-RPC error) or `failure`
        (the transport's, e.g. an HTTP status it did not expect)."""
        try:
            self.wire.announce_replay()
            await asyncio.wait_for(self.conn.resume_session(session_id=session_id, cwd=self.cwd), TIMEOUT)
        except acp.RequestError as error:
            emit({"step": step, "error": error_of(error)})
            return
        except Exception as error:  # noqa: BLE001 - reported to the test, which fails
            emit({"step": step, "failure": f"{type(error).__name__}: {error}"})
            return
        emit({"step": step, "ok": True})

    async def new_session(self, step: str, cwd: str) -> str | None:
        try:
            response = await asyncio.wait_for(self.conn.new_session(cwd=cwd, mcp_servers=[]), TIMEOUT)
        except acp.RequestError as error:
            emit({"step": step, "error": error_of(error)})
            return None
        emit({"step": step, "sessionId": response.session_id})
        return response.session_id

    async def prompt(self, step: str, session_id: str, text: str, policy: str = "cancelled") -> None:
        await self.finish(step, text, await self.start(session_id, text, policy))

    async def start(self, session_id: str, text: str, policy: str) -> tuple[asyncio.Task[Any], int, int, int]:
        await self.client.caught_up(self.wire)
        self.client.policy = policy
        mark = (len(self.wire.events), self.client.updates, self.client.permissions)
        self.wire.announce_prompt()
        task = asyncio.ensure_future(
            self.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])
        )
        return (task, *mark)

    async def finish(self, step: str, text: str, started: tuple[asyncio.Task[Any], int, int, int]) -> None:
        task, events, updates, permissions = started
        line: dict[str, Any] = {"step": step, "prompt": text}
        try:
            response = await asyncio.wait_for(task, TIMEOUT)
            line["stopReason"] = response.stop_reason
        except acp.RequestError as error:
            line["error"] = error_of(error)
        # Every message the wire carried so far has reached the client through the SDK.
        await self.client.caught_up(self.wire)
        prompt_id = self.wire.last_request("session/prompt")
        window = self.wire.events[events:]
        line["events"] = [e for e in window if e["prompt"] == prompt_id]
        # What arrived in this window but is not this prompt's (a session's
        # `available_commands_update` read just before the request went out) is counted on
        # neither side.
        other = [e for e in window if e["prompt"] != prompt_id]
        line["sdkUpdates"] = self.client.updates - updates - sum(e["kind"] == "update" for e in other)
        line["sdkPermissions"] = self.client.permissions - permissions - sum(e["kind"] == "permission" for e in other)
        emit(line)

    async def cancel_forever(self, session_id: str) -> None:
        """`/forever`, `session/cancel` once its first chunk arrived, then a prompt on the same
        session."""
        first = self.client.arm_first_chunk()
        started = await self.start(session_id, "/forever", "cancelled")
        await asyncio.wait_for(first.wait(), TIMEOUT)
        self.client.first_chunk = None
        await asyncio.wait_for(self.conn.cancel(session_id=session_id), TIMEOUT)
        await self.finish("forever", "/forever", started)
        await self.prompt("after_cancel", session_id, "still here after cancel")


async def run_steps(name: str, scenario: Scenario, token: str | None = None) -> str | None:
    """Every step of scenario `name`; the session they ran in."""
    await scenario.initialize()
    if token is not None:
        # Over a WebSocket without a token on the upgrade: refused until `authenticate`.
        await scenario.new_session("before_auth", scenario.cwd)
        await scenario.authenticate(token)
    session = await scenario.new_session("new_session", scenario.cwd)
    if session is None:
        return None
    await scenario.prompt("echo", session, "hello from the python sdk")
    if name == "basic":
        await scenario.prompt("stream", session, "/stream 200 32")
    else:
        write = '/tool write-file {"path":"%s","content":"%s"}'
        await scenario.prompt(
            "write_allowed", session, write % ("approved.txt", "approved through the python sdk"), "allow_once"
        )
        await scenario.prompt("write_rejected", session, write % ("rejected.txt", "must not be written"), "reject_once")
        await scenario.prompt("read", session, '/tool read-file {"path":"approved.txt"}', "reject_once")
        # Approve anything asked: a denied tool must not even ask.
        await scenario.prompt("denied", session, "/tool delete-repo {}", "allow_once")
        if name == "bridge":
            # governed-server would ask; the bridge's manifest does not list the tool.
            await scenario.prompt("hidden", session, "/tool run-tests {}", "allow_once")
    await scenario.cancel_forever(session)
    await scenario.new_session("new_session_outside", scenario.outside)
    return session


async def refused_upgrade(step: str, url: str, headers: dict[str, str]) -> None:
    """An upgrade with `headers`, through `websockets` alone: the HTTP status it got."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    try:
        socket = await asyncio.wait_for(connect(url, additional_headers=headers), TIMEOUT)
    except InvalidStatus as refused:
        emit({"step": step, "status": refused.response.status_code})
        return
    await socket.close()
    emit({"step": step, "status": 101})


async def run_websocket(name: str, url: str, client: InteropClient, wire: Wire) -> None:
    from acp.ws import create_websocket_stream

    token = os.environ["SCENARIO_TOKEN"]
    await refused_upgrade("refused_wrong_token", url, {"Authorization": "Bearer not-the-token"})
    await refused_upgrade("refused_origin", url, {"Authorization": f"Bearer {token}", "Origin": "https://evil.example"})
    transport = await asyncio.wait_for(create_websocket_stream(url), TIMEOUT)
    conn = acp.connect_to_agent(client, transport, observers=[wire])
    try:
        await run_steps(name, Scenario(conn, client, wire), token)
    finally:
        await asyncio.wait_for(conn.close(), TIMEOUT)


async def refused_initialize(step: str, url: str, headers: dict[str, str]) -> None:
    """An `initialize` POST with `headers`, through `httpx` alone: the HTTP status it got."""
    import httpx

    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        response = await http.post(url, json=initialize, headers=headers)
    emit({"step": step, "status": response.status_code})


async def run_http(name: str, url: str, client: InteropClient, wire: Wire) -> None:
    import httpx
    from acp.http import create_http_stream

    token = os.environ["SCENARIO_TOKEN"]
    bearer = {"Authorization": f"Bearer {token}"}
    await refused_initialize("refused_wrong_token", url, {"Authorization": "Bearer not-the-token"})
    await refused_initialize("refused_origin", url, {**bearer, "Origin": "https://evil.example"})
    exchanges: list[dict[str, Any]] = []

    async def record(response: httpx.Response) -> None:
        request = response.request
        rpc = None
        if request.content:
            rpc = json.loads(request.content).get("method", "(response)")
        exchanges.append(
            {
                "method": request.method,
                "status": response.status_code,
                "type": response.headers.get("content-type"),
                "session": request.headers.get("acp-session-id"),
                "rpc": rpc,
                "version": response.http_version,
            }
        )

    # As the SDK makes its own (no read timeout: the SSE streams are long-lived), but HTTP/2
    # only (h2c with prior knowledge: over http:// the SDK's own would speak HTTP/1.1), with a
    # hook that sees every answer.
    http = httpx.AsyncClient(
        http1=False, http2=True, timeout=httpx.Timeout(None), event_hooks={"response": [record]}
    )
    transport = create_http_stream(url, client=http, headers=bearer)
    conn = acp.connect_to_agent(client, transport, observers=[wire])
    try:
        scenario = Scenario(conn, client, wire)
        session = await run_steps(name, scenario)
        if session is not None:
            # The SDK sends no Acp-Session-Id with `session/resume` (only params.sessionId).
            await scenario.resume("resume", session)
            await scenario.prompt("after_resume", session, "still here after resume")
    finally:
        await asyncio.wait_for(conn.close(), TIMEOUT)
        await http.aclose()
    emit({"step": "http_exchanges", "exchanges": exchanges})


def emit_exit(wire: Wire, returncode: int | None) -> None:
    emit(
        {
            "step": "exit",
            "returncode": returncode,
            "late": [e for e in wire.events if e["phase"] == "after"],
            "early": [e for e in wire.events if e["phase"] == "none"],
        }
    )


async def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in ("basic", "governed", "bridge"):
        print(__doc__, file=sys.stderr)
        return 2
    name, command, args = argv[1], argv[2], argv[3:]
    path = os.environ.get("SCENARIO_TRANSCRIPT")
    transcript = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
    wire = Wire(transcript)
    client = InteropClient()
    env = {key: value for key, value in os.environ.items() if key.startswith("AGENTACP_")}
    status = 0
    step = "spawn"
    try:
        if command.startswith(("ws://", "wss://", "http://", "https://")):
            step = "scenario"
            run = run_websocket if command.startswith("ws") else run_http
            await run(name, command, client, wire)
            emit_exit(wire, None)
            return 0
        async with acp.spawn_agent_process(
            client,
            command,
            *args,
            env=env,
            # The agent's stderr goes to ours (the test shows it on failure); the SDK closes its
            # stdin on the way out and waits this long for it to exit before terminating it.
            transport_kwargs={"stderr": None, "shutdown_timeout": TIMEOUT},
            observers=[wire],
        ) as (conn, process):
            step = "scenario"
            await run_steps(name, Scenario(conn, client, wire))
            step = "exit"
        emit_exit(wire, process.returncode)
    except BaseException as error:  # noqa: BLE001 - reported to the test, which fails
        emit({"step": step, "crash": "".join(traceback.format_exception(error))})
        status = 1
    finally:
        if transcript:
            transcript.close()
    return status


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv)))
