#!/usr/bin/env node
// The official ACP TypeScript SDK's client (@agentclientprotocol/sdk, pinned in package.json)
// answering an agentacp server's elicitations (`elicitation/create`, `elicitation/complete`)
// over a WebSocket: it advertises both modes, accepts a form with content and a URL without,
// and keeps the completions it is told of.
//
//   node elicit.mjs WS_URL TOKEN CWD PROMPT...
//
// Prompts each PROMPT in one session, then prints one JSON line: {"asked": [the params of
// each elicitation/create], "completed": [each elicitationId completed], "said": [the text
// of each agent message]}. Exits 2 (saying why on stderr) when anything fails or takes over
// 30 s.

import { PROTOCOL_VERSION, client, methods } from "@agentclientprotocol/sdk";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";

const [url, token, cwd, ...prompts] = process.argv.slice(2);
setTimeout(() => {
  console.error("elicit.mjs: no end within 30 s");
  process.exit(2);
}, 30000).unref();

const asked = [];
const completed = [];
const said = [];
const app = client({ name: "agentacp-interop-ts-elicit" })
  .onRequest(methods.client.elicitation.create, ({ params }) => {
    asked.push(params);
    return params.mode === "form"
      ? { action: "accept", content: { strategy: "safe", port: 8080 } }
      : { action: "accept" };
  })
  .onNotification(methods.client.elicitation.complete, ({ params }) => {
    completed.push(params.elicitationId);
  })
  .onNotification(methods.client.session.update, ({ params }) => {
    const update = params.update;
    if (update.sessionUpdate === "agent_message_chunk" && update.content?.type === "text") {
      said.push(update.content.text);
    }
  });

try {
  const stream = createWebSocketStream(url, { WebSocket, headers: { Authorization: `Bearer ${token}` } });
  const connection = app.connect(stream);
  const agent = connection.agent;
  await agent.request(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: { elicitation: { form: {}, url: {} } },
    clientInfo: { name: "agentacp-interop-ts-elicit", version: "0.0.0" },
  });
  const { sessionId } = await agent.request(methods.agent.session.new, { cwd, mcpServers: [] });
  for (const text of prompts) {
    await agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
  }
  // The SDK runs notification handlers a few microtasks after the line that carried them, so
  // the last turn's message may follow its answer: wait for one message per prompt.
  while (said.length < prompts.length) await new Promise((resolve) => setImmediate(resolve));
  console.log(JSON.stringify({ asked, completed, said }));
  connection.close();
  process.exit(0);
} catch (error) {
  console.error(`elicit.mjs: ${error?.message ?? error}${error?.data ? ` (${JSON.stringify(error.data)})` : ""}`);
  process.exit(2);
}
