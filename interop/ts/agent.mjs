#!/usr/bin/env node
// A small ACP agent written only with the official TypeScript SDK
// (@agentclientprotocol/sdk, pinned in package.json; its `agent()` app API), for
// interop/tests/client_drives_sdk_agents.rs: our client drives it over its stdio, like the
// same agent written with the Rust SDK (interop/src/bin/sdk-agent.rs) and the Python SDK
// (interop/py/agent.py).
//
//   node agent.mjs                        over its stdin/stdout
//   node agent.mjs --listen HOST:PORT     served by the SDK's own Streamable HTTP server
//                                         (`experimental/server`, on node:http) at
//                                         http://HOST:PORT/acp, one agent per connection;
//                                         for interop/tests/http_servers.rs
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

import { createServer } from "node:http";
import { Readable, Writable } from "node:stream";
import { PROTOCOL_VERSION, agent, methods, ndJsonStream } from "@agentclientprotocol/sdk";

function say(client, sessionId, text) {
  return client.notify(methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });
}

async function permission(state, client, sessionId) {
  const toolCallId = `call-${state.toolCalls++}`;
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

async function read(state, client, sessionId, path) {
  if (!state.readsOffered) {
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

// One agent, with state of its own: whether its client offers file reads, how many sessions
// and tool calls it made, and per session the function that ends its running turn (called
// by `session/cancel`).
function createAgent() {
  const state = { readsOffered: false, sessions: 0, toolCalls: 0, cancels: new Map() };
  const waitForCancel = (sessionId) => new Promise((resolve) => state.cancels.set(sessionId, resolve));
  return agent({ name: "sdk-agent-ts" })
    .onRequest(methods.agent.initialize, ({ params }) => {
      state.readsOffered = params.clientCapabilities?.fs?.readTextFile === true;
      return {
        protocolVersion: PROTOCOL_VERSION,
        agentCapabilities: {},
        agentInfo: { name: "sdk-agent-ts", version: "0.1.0" },
      };
    })
    .onRequest(methods.agent.session.new, () => ({ sessionId: `ts-session-${state.sessions++}` }))
    .onNotification(methods.agent.session.cancel, ({ params }) => {
      const end = state.cancels.get(params.sessionId);
      state.cancels.delete(params.sessionId);
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
        await permission(state, client, sessionId);
      } else if (text.startsWith("/read ")) {
        await read(state, client, sessionId, text.slice("/read ".length).trim());
      } else {
        const words = `echo: ${text}`.split(/\s+/).filter((word) => word !== "");
        for (const [i, word] of words.entries()) {
          await say(client, sessionId, i === 0 ? word : ` ${word}`);
        }
      }
      return { stopReason: "end_turn" };
    });
}

// `--listen HOST:PORT`: the SDK's `AcpServer` behind node:http, at /acp only; WebSocket
// upgrades are not served (the tests dial Streamable HTTP).
async function listen(address) {
  const colon = address.lastIndexOf(":");
  const [host, port] = [address.slice(0, colon), Number(address.slice(colon + 1))];
  if (colon < 0 || !Number.isInteger(port)) {
    console.error(`agent.mjs: --listen wants HOST:PORT, not ${JSON.stringify(address)}`);
    process.exit(2);
  }
  const { AcpServer } = await import("@agentclientprotocol/sdk/experimental/server");
  const { createNodeHttpHandler } = await import("@agentclientprotocol/sdk/experimental/node");
  const handle = createNodeHttpHandler(new AcpServer({ createAgent }));
  const server = createServer((req, res) => {
    if (new URL(req.url ?? "/", "http://localhost").pathname !== "/acp") {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("not found: the endpoint is /acp\n");
      return;
    }
    handle(req, res);
  });
  server.listen(port, host, () => console.error(`sdk-agent-ts: listening on http://${address}/acp`));
}

const flag = process.argv.indexOf("--listen");
if (flag >= 0) {
  await listen(process.argv[flag + 1] ?? "");
} else {
  const connection = createAgent().connect(
    ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
  );
  await connection.closed;
  process.exit(0);
}
