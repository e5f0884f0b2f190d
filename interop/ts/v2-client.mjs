#!/usr/bin/env node
// A protocol v2 client written only with the official TypeScript SDK
// (@agentclientprotocol/sdk, pinned in package.json; its `experimental/v2` `client()` app API),
// for interop/tests/v2_sdk.rs: the same conversation, printed as the same JSON lines, as
// interop/src/bin/sdk-v2-client.rs (read its header for the steps and the line format).
//
//   node v2-client.mjs [--prompt=TEXT] [--cancel-prompt=TEXT] [--cwd=DIR] [--no-resume] [--no-replay] -- PROGRAM [ARGS…]
//
// It spawns PROGRAM and drives it over its stdio (or dials PROGRAM when it is a `ws://` or
// `http://` URL, with the bearer token in $V2_CLIENT_TOKEN): `initialize` (protocol 2), `session/new`,
// turn 1 (updates until an idle state that follows a non-idle one; a permission request is
// answered with its first allow_once, else allow_always option), turn 2 cancelled
// (`session/cancel` after its first agent_message_chunk), `session/resume` with
// `replayFrom: {type: "start"}` (without it: `--no-replay`). Any protocol error or a wait over 30 s prints
// {"step":"error",…} and exits 1.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";

const TIMEOUT_MS = 30_000;

function parseOptions(argv) {
  const options = { prompt: "hello", cancelPrompt: "/wait", cwd: process.cwd(), resume: true, replay: true, program: [] };
  const dashes = argv.indexOf("--");
  const flags = dashes < 0 ? argv : argv.slice(0, dashes);
  options.program = dashes < 0 ? [] : argv.slice(dashes + 1);
  for (const flag of flags) {
    const [name, ...rest] = flag.split("=");
    const value = rest.join("=");
    if (name === "--prompt") options.prompt = value;
    else if (name === "--cancel-prompt") options.cancelPrompt = value;
    else if (name === "--cwd") options.cwd = value;
    else if (name === "--no-resume") options.resume = false;
    else if (name === "--no-replay") options.replay = false;
    else throw new Error(`unknown argument ${flag}`);
  }
  if (options.program.length === 0) {
    throw new Error("usage: v2-client.mjs [--prompt=TEXT] [--cancel-prompt=TEXT] [--cwd=DIR] [--no-resume] [--no-replay] -- PROGRAM [ARGS…]");
  }
  return options;
}

const emit = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

function within(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within 30 s`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// The session updates in arrival order, awaited one at a time.
class Updates {
  constructor() {
    this.queue = [];
    this.waiter = null;
  }
  push(notification) {
    this.queue.push(notification);
    this.waiter?.();
    this.waiter = null;
  }
  drain() {
    return this.queue.splice(0);
  }
  async next(sessionId) {
    for (;;) {
      const index = this.queue.findIndex((n) => n.sessionId === sessionId);
      if (index >= 0) return this.queue.splice(0, index + 1).pop().update;
      this.queue.length = 0;
      await within(new Promise((resolve) => (this.waiter = resolve)), "no session/update");
    }
  }
}

function allow(params, turn) {
  const option =
    params.options.find((o) => o.kind === "allow_once") ?? params.options.find((o) => o.kind === "allow_always");
  const outcome = option ? { outcome: "selected", optionId: option.optionId } : { outcome: "cancelled" };
  emit({ step: "permission", turn: turn.current, request: params, answer: outcome });
  return { outcome };
}

async function runTurn(cx, updates, sessionId, turn, number, text, cancel) {
  updates.drain();
  turn.current = number;
  const ack = await within(
    cx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] }),
    "session/prompt was not acknowledged",
  );
  emit({ step: "prompt", turn: number, result: ack });
  let active = false;
  let cancelled = false;
  for (;;) {
    const update = await updates.next(sessionId);
    emit({ step: "update", turn: number, update });
    if (update.sessionUpdate === "state_update") {
      if (update.state === "idle" && active) {
        emit({ step: "idle", turn: number, stopReason: update.stopReason ?? null });
        return;
      }
      if (update.state !== "idle") active = true;
    } else if (update.sessionUpdate === "agent_message_chunk" && cancel && !cancelled) {
      await cx.notify(methods.agent.session.cancel, { sessionId });
      emit({ step: "cancel", turn: number });
      cancelled = true;
    }
  }
}

async function converse(cx, updates, turn, options) {
  const initialized = await within(
    cx.request(methods.agent.initialize, {
      protocolVersion: 2,
      info: { name: "sdk-v2-client-ts", version: "0.1.0" },
      capabilities: {},
    }),
    "initialize was not answered",
  );
  if (initialized.protocolVersion !== 2) {
    throw new Error(`the agent selected protocol version ${initialized.protocolVersion}`);
  }
  emit({ step: "initialize", result: initialized });
  const session = await within(
    cx.request(methods.agent.session.new, { cwd: options.cwd, mcpServers: [] }),
    "session/new was not answered",
  );
  emit({ step: "session/new", sessionId: session.sessionId, result: session });
  const { sessionId } = session;
  await runTurn(cx, updates, sessionId, turn, 1, options.prompt, false);
  await runTurn(cx, updates, sessionId, turn, 2, options.cancelPrompt, true);
  if (options.resume) {
    updates.drain();
    turn.current = "resume";
    const answer = await within(
      cx.request(methods.agent.session.resume, {
        sessionId,
        cwd: options.cwd,
        ...(options.replay ? { replayFrom: { type: "start" } } : {}),
      }),
      "session/resume was not answered",
    );
    let stated = false;
    for (const notification of updates.drain()) {
      if (notification.sessionId === sessionId) {
        emit({ step: "update", turn: "resume", update: notification.update });
        stated ||= notification.update.sessionUpdate === "state_update";
      }
    }
    emit({ step: "resume", replay: options.replay, result: answer });
    // Over Streamable HTTP the answer comes on the connection's stream and the session's
    // updates on the session's (the transport RFD): nothing orders the two, so the state
    // may follow the answer. Wait for it there (only there).
    while (!stated && /^https?:\/\//.test(options.program[0])) {
      const update = await updates.next(sessionId);
      emit({ step: "update", turn: "resume", update, afterAnswer: true });
      stated = update.sessionUpdate === "state_update";
    }
  }
  emit({ step: "done" });
}

// The agent: a `ws://` URL is dialled with the SDK's `experimental/ws-client` (on npm `ws`),
// an `http://` one with its Streamable HTTP client (`experimental/http-client`), the bearer
// token in $V2_CLIENT_TOKEN (if set) on the upgrade or every request; anything else is a
// program spawned and spoken to over its stdio. Returns the stream and how to let go of it.
async function openAgent([program, ...args]) {
  const token = process.env.V2_CLIENT_TOKEN;
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  if (/^wss?:\/\//.test(program)) {
    const { WebSocket } = await import("ws");
    const { createWebSocketStream } = await import("@agentclientprotocol/sdk/experimental/ws-client");
    return { stream: createWebSocketStream(program, { WebSocket, headers }), close: () => {} };
  }
  if (/^https?:\/\//.test(program)) {
    const { createHttpStream } = await import("@agentclientprotocol/sdk/experimental/http-client");
    return { stream: createHttpStream(program, { headers }), close: () => {} };
  }
  const child = spawn(program, args, { stdio: ["pipe", "pipe", "inherit"] });
  const spawned = await new Promise((resolve) => {
    child.once("spawn", () => resolve(null));
    child.once("error", (error) => resolve(error));
  });
  if (spawned) throw new Error(`cannot start ${program}: ${spawned.message}`);
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return {
    stream,
    close: () => {
      child.stdin.end();
      child.kill();
    },
  };
}

async function main() {
  const options = parseOptions(process.argv.slice(2));
  const updates = new Updates();
  const turn = { current: 0 };
  const app = client({ name: "sdk-v2-client-ts" })
    .onNotification(methods.client.session.update, ({ params }) => updates.push(params))
    .onRequest(methods.client.session.requestPermission, ({ params }) => allow(params, turn));
  const agent = await openAgent(options.program);
  try {
    await app.connectWith(agent.stream, (cx) => converse(cx, updates, turn, options));
  } finally {
    agent.close();
  }
}

try {
  await main();
  process.exit(0);
} catch (error) {
  const data = error?.data === undefined ? "" : `: ${JSON.stringify(error.data)}`;
  emit({ step: "error", message: `${error?.message ?? error}${data}` });
  process.exit(1);
}
