#!/usr/bin/env node
// A small ACP protocol v2 agent written only with the official TypeScript SDK
// (@agentclientprotocol/sdk, pinned in package.json; its `experimental/v2` `agent()` app API),
// for interop/tests/v2_sdk.rs: the same agent as interop/src/bin/sdk-v2-agent.rs.
//
//   node v2-agent.mjs          v2 over its stdin/stdout
//   node v2-agent.mjs --both   v1 and v2 on the same stdio through the SDK's
//                              `agentProtocolRouter()`: an `initialize` asking for v1 gets a
//                              minimal v1 agent (`v1 echo: TEXT`, end_turn)
//
// Each prompt is acknowledged with the id of the user message it inserts (`messageId`), then
// the turn runs as updates: the `user_message`, `state_update` running, and
// - for a text containing `/wait`: the chunk `waiting`, then nothing until `session/cancel`;
//   idle `cancelled`;
// - for any other text: the words of `echo: TEXT` as `agent_message_chunk`s of one message
//   id, a `tool_call_update` that creates the tool call `write-file` (pending),
//   requires_action, `session/request_permission` (`allow` allow_once, `reject` reject_once)
//   with the tool call as its subject, running, the tool call completed (or failed) and the
//   chunk ` approved` (or ` rejected`); idle `end_turn`.
//
// `session/resume` with `replayFrom: {type: "start"}` replays every update of the session
// except state updates, then sends an idle snapshot, then answers. `session/list` lists the
// sessions of this connection (those in `cwd` when it is given), as v2's baseline asks.
// `session/new` with a relative `cwd` is refused (-32602).

import { isAbsolute } from "node:path";
import { Readable, Writable } from "node:stream";
import * as v1 from "@agentclientprotocol/sdk";
import { agent, agentProtocolRouter, methods, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";

const NAME = "sdk-v2-agent-ts";

// One agent, with state of its own: per session the updates to replay and the function
// that ends its running turn (called by `session/cancel`).
function createV2Agent() {
  const sessions = new Map();
  let ids = 0;
  const next = (prefix) => `${prefix}-${ids++}`;
  const emit = (client, sessionId, update) => {
    if (update.sessionUpdate !== "state_update") sessions.get(sessionId)?.history.push(update);
    return client.notify(methods.client.session.update, { sessionId, update });
  };
  const chunk = (text, messageId) => ({
    sessionUpdate: "agent_message_chunk",
    messageId,
    content: { type: "text", text },
  });
  const state = (name, extra = {}) => ({ sessionUpdate: "state_update", state: name, ...extra });

  async function echoTurn(client, sessionId, text) {
    const messageId = next("agent-message");
    const words = `echo: ${text}`.split(/\s+/).filter((word) => word !== "");
    for (const [i, word] of words.entries()) {
      await emit(client, sessionId, chunk(i === 0 ? word : ` ${word}`, messageId));
    }
    const toolCallId = next("call");
    await emit(client, sessionId, {
      sessionUpdate: "tool_call_update",
      toolCallId,
      title: "write-file",
      kind: "edit",
      status: "pending",
    });
    await emit(client, sessionId, state("requires_action"));
    const answer = await client.request(methods.client.session.requestPermission, {
      sessionId,
      title: "write-file",
      subject: { type: "tool_call", toolCall: { toolCallId } },
      options: [
        { optionId: "allow", name: "Allow", kind: "allow_once" },
        { optionId: "reject", name: "Reject", kind: "reject_once" },
      ],
    });
    const approved = answer.outcome.outcome === "selected" && answer.outcome.optionId === "allow";
    await emit(client, sessionId, state("running"));
    await emit(client, sessionId, {
      sessionUpdate: "tool_call_update",
      toolCallId,
      status: approved ? "completed" : "failed",
    });
    await emit(client, sessionId, chunk(approved ? " approved" : " rejected", messageId));
    return "end_turn";
  }

  async function runTurn(client, sessionId, messageId, prompt) {
    const session = sessions.get(sessionId);
    const text = prompt.find((block) => block.type === "text")?.text ?? "";
    await emit(client, sessionId, { sessionUpdate: "user_message", messageId, content: prompt });
    await emit(client, sessionId, state("running"));
    let stopReason;
    if (text.includes("/wait")) {
      // Registered before the chunk goes out, so a cancel sent on seeing it finds it.
      const cancelled = new Promise((resolve) => (session.cancel = resolve));
      await emit(client, sessionId, chunk("waiting", next("agent-message")));
      await cancelled;
      stopReason = "cancelled";
    } else {
      stopReason = await echoTurn(client, sessionId, text);
    }
    await emit(client, sessionId, state("idle", { stopReason }));
  }

  return agent({ name: NAME })
    .onRequest(methods.agent.initialize, () => ({
      protocolVersion: 2,
      info: { name: NAME, version: "0.1.0" },
      capabilities: { session: {} },
    }))
    .onRequest(methods.agent.session.new, ({ params, client }) => {
      if (!isAbsolute(params.cwd)) throw new v1.RequestError(-32602, `cwd ${params.cwd} is not absolute`);
      const sessionId = next("ts-v2-session");
      sessions.set(sessionId, { history: [], cwd: params.cwd, cancel: null });
      // The idle snapshot goes out after the answer.
      setImmediate(() => emit(client, sessionId, state("idle")).catch(() => {}));
      return { sessionId };
    })
    .onRequest(methods.agent.session.prompt, ({ params, client }) => {
      if (!sessions.has(params.sessionId)) {
        throw new v1.RequestError(-32602, `unknown session ${params.sessionId}`);
      }
      const messageId = next("user-message");
      setImmediate(() =>
        runTurn(client, params.sessionId, messageId, params.prompt).catch((error) =>
          console.error(`${NAME}: turn failed: ${error?.message ?? error}`),
        ),
      );
      return { messageId };
    })
    .onNotification(methods.agent.session.cancel, ({ params }) => {
      const session = sessions.get(params.sessionId);
      session?.cancel?.();
      if (session) session.cancel = null;
    })
    .onRequest(methods.agent.session.resume, async ({ params, client }) => {
      const session = sessions.get(params.sessionId);
      if (!session) throw new v1.RequestError(-32602, `unknown session ${params.sessionId}`);
      if (params.replayFrom?.type === "start") {
        for (const update of [...session.history]) {
          await client.notify(methods.client.session.update, { sessionId: params.sessionId, update });
        }
      }
      await emit(client, params.sessionId, state("idle"));
      return {};
    })
    .onRequest(methods.agent.session.list, ({ params }) => ({
      sessions: [...sessions.entries()]
        .filter(([, session]) => params.cwd == null || session.cwd === params.cwd)
        .map(([sessionId, session]) => ({ sessionId, cwd: session.cwd })),
    }))
    .onRequest(methods.agent.session.close, () => ({}));
}

// The v1 half of `--both`.
function createV1Agent() {
  let sessions = 0;
  return v1
    .agent({ name: NAME })
    .onRequest(v1.methods.agent.initialize, () => ({
      protocolVersion: 1,
      agentCapabilities: {},
      agentInfo: { name: NAME, version: "0.1.0" },
    }))
    .onRequest(v1.methods.agent.session.new, () => ({ sessionId: `ts-v1-session-${sessions++}` }))
    .onRequest(v1.methods.agent.session.prompt, async ({ params, client }) => {
      const text = params.prompt.find((block) => block.type === "text")?.text ?? "";
      await client.notify(v1.methods.client.session.update, {
        sessionId: params.sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `v1 echo: ${text}` } },
      });
      return { stopReason: "end_turn" };
    });
}

const stream = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const both = process.argv.includes("--both");
const connector = both ? agentProtocolRouter().withV1(createV1Agent()).withV2(createV2Agent()) : createV2Agent();
const connection = connector.connect(stream);
await connection.closed;
process.exit(0);
