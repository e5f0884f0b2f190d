#!/usr/bin/env node
// A small ACP agent written only with the official TypeScript SDK
// (@agentclientprotocol/sdk, pinned in package.json; its `agent()` app API), for
// interop/tests/client_drives_sdk_agents.rs: our client drives it over its stdio, like the
// same agent written with the Rust SDK (interop/src/bin/sdk-agent.rs) and the Python SDK
// (interop/py/agent.py).
//
//   node agent.mjs
//
// What it does with a prompt's text:
// - `/permission`: a `tool_call` (pending, kind edit, title write-file), then
//   `session/request_permission` with `allow` (allow_once) and `reject` (reject_once); on
//   `allow` a `tool_call_update` completed and the chunk `approved`, else failed and
//   `rejected`; end_turn;
// - `/read PATH`: `fs/read_text_file` of PATH (when the client offers it), then the chunk
//   `read: CONTENT`, or `error: CODE MESSAGE` when the client answered an error; end_turn;
// - `/wait`: the chunk `waiting`, then nothing until `session/cancel`; cancelled;
// - anything else: the words of `echo: TEXT` as chunks (every word but the first with its
//   leading space); end_turn.

import { Readable, Writable } from "node:stream";
import { PROTOCOL_VERSION, agent, methods, ndJsonStream } from "@agentclientprotocol/sdk";

let readsOffered = false;
let sessions = 0;
let toolCalls = 0;
// Per session, the function that ends its running turn (called by `session/cancel`), and
// whether a cancel came before the turn started waiting.
const cancels = new Map();

function say(client, sessionId, text) {
  return client.notify(methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });
}

async function permission(client, sessionId) {
  const toolCallId = `call-${toolCalls++}`;
  await client.notify(methods.client.session.update, {
    sessionId,
    update: {
      sessionUpdate: "tool_call",
      toolCallId,
      title: "write-file",
      kind: "edit",
      status: "pending",
    },
  });
  const answer = await client.request(methods.client.session.requestPermission, {
    sessionId,
    toolCall: { toolCallId, title: "write-file" },
    options: [
      { optionId: "allow", name: "Allow", kind: "allow_once" },
      { optionId: "reject", name: "Reject", kind: "reject_once" },
    ],
  });
  const approved = answer.outcome.outcome === "selected" && answer.outcome.optionId === "allow";
  await client.notify(methods.client.session.update, {
    sessionId,
    update: {
      sessionUpdate: "tool_call_update",
      toolCallId,
      status: approved ? "completed" : "failed",
    },
  });
  await say(client, sessionId, approved ? "approved" : "rejected");
}

async function read(client, sessionId, path) {
  if (!readsOffered) {
    await say(client, sessionId, "error: the client does not offer fs/read_text_file");
    return;
  }
  let text;
  try {
    const file = await client.request(methods.client.fs.readTextFile, { sessionId, path });
    text = `read: ${file.content}`;
  } catch (error) {
    text = `error: ${error.code} ${error.message}`;
  }
  await say(client, sessionId, text);
}

function waitForCancel(sessionId) {
  return new Promise((resolve) => cancels.set(sessionId, resolve));
}

const app = agent({ name: "sdk-agent-ts" })
  .onRequest(methods.agent.initialize, ({ params }) => {
    readsOffered = params.clientCapabilities?.fs?.readTextFile === true;
    return {
      protocolVersion: PROTOCOL_VERSION,
      agentCapabilities: {},
      agentInfo: { name: "sdk-agent-ts", version: "0.1.0" },
    };
  })
  .onRequest(methods.agent.session.new, () => ({ sessionId: `ts-session-${sessions++}` }))
  .onNotification(methods.agent.session.cancel, ({ params }) => {
    const end = cancels.get(params.sessionId);
    cancels.delete(params.sessionId);
    end?.();
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    const { sessionId } = params;
    const text = params.prompt.find((block) => block.type === "text")?.text ?? "";
    if (text === "/wait") {
      // Registered before the chunk goes out, so a cancel sent on seeing it finds it.
      const cancelled = waitForCancel(sessionId);
      await say(client, sessionId, "waiting");
      await cancelled;
      return { stopReason: "cancelled" };
    }
    if (text === "/permission") {
      await permission(client, sessionId);
    } else if (text.startsWith("/read ")) {
      await read(client, sessionId, text.slice("/read ".length).trim());
    } else {
      const words = `echo: ${text}`.split(/\s+/).filter((word) => word !== "");
      for (const [i, word] of words.entries()) {
        await say(client, sessionId, i === 0 ? word : ` ${word}`);
      }
    }
    return { stopReason: "end_turn" };
  });

const connection = app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
process.exit(0);
