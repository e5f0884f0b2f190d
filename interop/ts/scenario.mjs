#!/usr/bin/env node
// Drives an agentacp example server with the official ACP TypeScript SDK client
// (@agentclientprotocol/sdk, pinned in package.json) over the server's stdio, or over a
// WebSocket to a server started with `--listen` (docs/remote.md). The steps are the same
// either way; only the transport (and the authentication it needs) differs.
//
//   node scenario.mjs AGENT_BINARY [--governed]
//   node scenario.mjs --ws=ws://HOST:PORT/acp [--auth=header|authenticate] [--stream=ndjson|sdk] [--governed]
//   node scenario.mjs --http=http://HOST:PORT/acp [--auth=header|authenticate] [--governed]
//
// Environment: SCENARIO_CWD (a directory inside AGENTACP_WORKSPACE_ROOT, used as the
// session cwd), SCENARIO_OUTSIDE (an absolute directory outside that root),
// SCENARIO_AGENT_NAME (expected agentInfo.name; default: the binary's file name, or
// governed-server over a WebSocket), SCENARIO_TIMEOUT_MS (per await; default 30000),
// SCENARIO_TRACE=1 (every wire message to stderr as it crosses). Everything else, including
// AGENTACP_*, is passed through to the server.
//
// Over a WebSocket: SCENARIO_TOKEN is the bearer token. `--auth=header` (the default) sends it
// as `Authorization: Bearer` on the upgrade; `--auth=authenticate` connects without it, checks
// that `session/new` is refused -32000 before `authenticate`, then authenticates with
// `{"methodId": "bearer", "_meta": {"agentacp": {"token": ...}}}`. `--stream=ndjson` (the
// default) runs the SDK's `ndJsonStream` over Web streams built on a `ws` WebSocket (each line
// one text message); `--stream=sdk` uses the SDK's own `createWebSocketStream` (one JSON text
// message each, no newline). First, with the `ws` client alone: a wrong token on the upgrade
// is refused 401 and an `Origin: https://evil.example` 403.
//
// Over Streamable HTTP (issue #47): the SDK's `createHttpStream`
// (`@agentclientprotocol/sdk/experimental/http-client`: `initialize` POSTed and answered
// 200 with `Acp-Connection-Id`, every other message POSTed and answered 202, the server's
// messages read from the connection's and each session's SSE stream, DELETE at the end).
// `--auth=header` gives it `Authorization: Bearer` for every request; `--auth=authenticate`
// none, and authenticates as above. First, with `fetch` alone: an `initialize` POST with a
// wrong token is refused 401, one with `Origin: https://evil.example` 403. At the end
// (`http-exchanges`) every request the SDK made must have been answered as the RFD says:
// `initialize` 200, other POSTs 202, GETs 200 with `text/event-stream`, the DELETE 202.
//
// Prints one line per step, `ok <step>` or `FAIL <step>: <why>`, followed on failure
// by indented lines with the wire messages seen during that step, and exits 0 only if
// every step passed. The contract checked is docs/design/runtime.md.

import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { Readable, Writable } from "node:stream";
import {
  PROTOCOL_VERSION,
  RequestError,
  client,
  methods,
  ndJsonStream,
} from "@agentclientprotocol/sdk";
// `ws` (and the SDK's WebSocket adapter) are loaded only for a run over a WebSocket, so the
// stdio scenarios run without them.
let WebSocket;
let createWebSocketStream;

const TIMEOUT_MS = Number(process.env.SCENARIO_TIMEOUT_MS ?? 30000);
const TRACE = Boolean(process.env.SCENARIO_TRACE);
const STREAM_COUNT = 1000;
const STREAM_SIZE = 64;

// ---------------------------------------------------------------- arguments

const USAGE =
  "usage: node scenario.mjs AGENT_BINARY [--governed]\n" +
  "       node scenario.mjs --ws=URL [--auth=header|authenticate] [--stream=ndjson|sdk] [--governed]\n" +
  "       node scenario.mjs --http=URL [--auth=header|authenticate] [--governed]";
const args = process.argv.slice(2);
const options = Object.fromEntries(
  args
    .filter((a) => a.startsWith("--"))
    .map((a) => {
      const eq = a.indexOf("=");
      return eq < 0 ? [a.slice(2), true] : [a.slice(2, eq), a.slice(eq + 1)];
    }),
);
const governed = options.governed === true;
const wsUrl = typeof options.ws === "string" ? options.ws : undefined;
const httpUrl = typeof options.http === "string" ? options.http : undefined;
const remote = wsUrl ?? httpUrl;
const wsAuth = options.auth ?? "header";
const wsStream = options.stream ?? "ndjson";
const positional = args.filter((a) => !a.startsWith("--"));
const known = wsUrl
  ? ["governed", "ws", "auth", "stream"]
  : httpUrl
    ? ["governed", "http", "auth"]
    : ["governed"];
if (
  positional.length !== (remote ? 0 : 1) ||
  Object.keys(options).some((k) => !known.includes(k)) ||
  !["header", "authenticate"].includes(wsAuth) ||
  !["ndjson", "sdk"].includes(wsStream)
) {
  console.error(USAGE);
  process.exit(2);
}
const binary = positional[0];
const expectedName =
  process.env.SCENARIO_AGENT_NAME ??
  (remote ? "governed-server" : basename(binary).replace(/\.exe$/i, ""));
const sessionCwd = process.env.SCENARIO_CWD;
const outsideCwd = process.env.SCENARIO_OUTSIDE;
const token = process.env.SCENARIO_TOKEN;

// ---------------------------------------------------------------- reporting

let failures = 0;

function ok(step, detail) {
  console.log(detail === undefined ? `ok ${step}` : `ok ${step} ${detail}`);
}

function fail(step, why, seen = []) {
  failures += 1;
  console.log(`FAIL ${step}: ${why}`);
  for (const line of summarizeWire(seen)) console.log(`    ${line}`);
}

class StepFailure extends Error {}

// `why` may be a function, so that a message is only built when the check fails.
function check(condition, why) {
  if (!condition) throw new StepFailure(typeof why === "function" ? why() : why);
}

function describeError(error) {
  if (error instanceof RequestError || (error && typeof error.code === "number")) {
    const data = error.data === undefined ? "" : ` data=${clip(JSON.stringify(error.data), 300)}`;
    return `JSON-RPC error ${error.code} ${JSON.stringify(error.message)}${data}`;
  }
  if (error instanceof Error && error.message === "ACP connection closed") {
    return "the connection closed before the answer (the server exited or closed its stdout; see its stderr)";
  }
  return String(error?.stack ?? error);
}

function clip(text, max) {
  text = String(text);
  return text.length > max ? `${text.slice(0, max)}...(${text.length} chars)` : text;
}

// ---------------------------------------------------------------- wire tap
//
// The SDK parses and validates messages; this tap records them as they cross the
// stream (after JSON decoding, before the SDK sees them) so that failures can show
// what the server actually sent and wire order can be checked independently of the
// SDK's dispatch.

const wire = []; // { dir: "<-" | "->", msg, t }

function record(dir, msg) {
  wire.push({ dir, msg, t: Date.now() });
  if (TRACE) process.stderr.write(`${dir} ${JSON.stringify(msg)}\n`);
}

function tapped(stream) {
  const incoming = new TransformStream({
    transform(msg, controller) {
      record("<-", msg);
      controller.enqueue(msg);
    },
  });
  const outgoing = new TransformStream({
    transform(msg, controller) {
      record("->", msg);
      controller.enqueue(msg);
    },
  });
  void outgoing.readable.pipeTo(stream.writable).catch(() => {});
  return { readable: stream.readable.pipeThrough(incoming), writable: outgoing.writable };
}

function summarizeWire(entries) {
  if (entries.length === 0) return [];
  const lines = [];
  const show = (e) => `${e.dir} ${clip(JSON.stringify(e.msg), 400)}`;
  if (entries.length <= 12) {
    for (const e of entries) lines.push(show(e));
  } else {
    for (const e of entries.slice(0, 6)) lines.push(show(e));
    lines.push(`... ${entries.length - 12} more messages ...`);
    for (const e of entries.slice(-6)) lines.push(show(e));
  }
  return lines;
}

// Messages of one prompt turn on the wire: the outgoing session/prompt request sent at
// or after `mark`, the session/update notifications received before its response, and
// the response itself.
function turnOnWire(mark, sessionId) {
  const entries = wire.slice(mark);
  const request = entries.find(
    (e) => e.dir === "->" && e.msg.method === methods.agent.session.prompt,
  );
  if (!request) return { request: undefined, updatesBefore: [], response: undefined, after: [] };
  const start = entries.indexOf(request);
  const updatesBefore = [];
  let response;
  let i = start + 1;
  for (; i < entries.length; i++) {
    const e = entries[i];
    if (e.dir !== "<-") continue;
    if (e.msg.method === undefined && e.msg.id === request.msg.id) {
      response = e;
      break;
    }
    if (e.msg.method === methods.client.session.update && e.msg.params?.sessionId === sessionId) {
      updatesBefore.push(e.msg.params.update);
    }
  }
  const after = entries
    .slice(i + 1)
    .filter(
      (e) =>
        e.dir === "<-" &&
        e.msg.method === methods.client.session.update &&
        e.msg.params?.sessionId === sessionId,
    )
    .map((e) => e.msg.params.update);
  return { request, updatesBefore, response, after };
}

// ---------------------------------------------------------------- timeouts

function withTimeout(promise, what, ms = TIMEOUT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new StepFailure(`timed out after ${ms} ms waiting for ${what}`)),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Lets the SDK finish dispatching messages it has already read (its notification
// handlers run a few microtasks after the line is decoded).
const settle = () => new Promise((resolve) => setImmediate(resolve));

// ---------------------------------------------------------------- client side
//
// What the SDK hands to our client handlers, in arrival order: session/update
// notifications and session/request_permission requests.

const events = []; // { kind: "update", sessionId, update } | { kind: "permission", params, answer }
const waiters = new Set();
let permissionPolicy = { kind: "unexpected" }; // set per step

function notifyWaiters() {
  for (const waiter of [...waiters]) {
    if (waiter.predicate()) {
      waiters.delete(waiter);
      waiter.resolve();
    }
  }
}

function waitFor(predicate, what) {
  if (predicate()) return Promise.resolve();
  let waiter;
  const promise = new Promise((resolve) => {
    waiter = { predicate, resolve };
    waiters.add(waiter);
  });
  return withTimeout(promise, what).finally(() => waiters.delete(waiter));
}

function answerPermission(params) {
  const options = params.options ?? [];
  if (permissionPolicy.kind === "select") {
    const option = options.find((o) => o.kind === permissionPolicy.optionKind);
    if (option) return { outcome: { outcome: "selected", optionId: option.optionId } };
  }
  // Unexpected request, or no option of the wanted kind: decline without choosing.
  return { outcome: { outcome: "cancelled" } };
}

// The stand-in editor's answers to fs/* and terminal/*: a buffer's text names its file,
// every command exits 0 and prints what it was asked to run. Each request is an event.
function editorRequest(method, answer) {
  return ({ params }) => {
    events.push({ kind: "editor", method, params });
    notifyWaiters();
    return answer(params);
  };
}

const app = client({ name: "agentacp-interop-ts" })
  .onRequest(
    methods.client.fs.readTextFile,
    editorRequest("fs/read_text_file", (p) => ({ content: `editor buffer of ${p.path}` })),
  )
  .onRequest(methods.client.fs.writeTextFile, editorRequest("fs/write_text_file", () => ({})))
  .onRequest(methods.client.terminal.create, editorRequest("terminal/create", () => ({ terminalId: "ts-1" })))
  .onRequest(methods.client.terminal.waitForExit, editorRequest("terminal/wait_for_exit", () => ({ exitCode: 0 })))
  .onRequest(
    methods.client.terminal.output,
    editorRequest("terminal/output", (p) => ({ output: `ran in ${p.terminalId}`, truncated: false })),
  )
  .onRequest(methods.client.terminal.release, editorRequest("terminal/release", () => ({})))
  .onRequest(methods.client.terminal.kill, editorRequest("terminal/kill", () => ({})))
  .onNotification(methods.client.session.update, ({ params }) => {
    events.push({ kind: "update", sessionId: params.sessionId, update: params.update });
    notifyWaiters();
  })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    const answer = answerPermission(params);
    events.push({ kind: "permission", params, answer });
    notifyWaiters();
    return answer;
  });

// ---------------------------------------------------------------- helpers for turns

const isChunk = (u) => u?.sessionUpdate === "agent_message_chunk";
const chunkText = (u) => (u?.content?.type === "text" ? u.content.text : undefined);
const messageText = (updates) => updates.filter(isChunk).map((u) => chunkText(u) ?? "").join("");

// Runs one prompt turn and returns what the SDK delivered and what crossed the wire.
async function promptTurn(agent, sessionId, text, { onStarted } = {}) {
  const mark = wire.length;
  const eventMark = events.length;
  const pending = agent.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text }],
  });
  pending.catch(() => {}); // awaited below; do not let an early rejection go unhandled
  if (onStarted) await onStarted(eventMark);
  const response = await withTimeout(pending, `the session/prompt response to ${JSON.stringify(text)}`);
  const sdkUpdatesAtResolve = events
    .slice(eventMark)
    .filter((e) => e.kind === "update" && e.sessionId === sessionId).length;
  await settle();
  const turnEvents = events.slice(eventMark);
  const updates = turnEvents
    .filter((e) => e.kind === "update" && e.sessionId === sessionId)
    .map((e) => e.update);
  return {
    response,
    updates,
    turnEvents,
    sdkUpdatesAtResolve,
    wire: turnOnWire(mark, sessionId),
    mark,
  };
}

// Checks shared by every turn: the SDK accepted every update the server sent before
// the response (an update rejected by the SDK's schema validation would be missing).
function checkDelivered(turn) {
  const onWire = turn.wire.updatesBefore;
  check(turn.wire.response !== undefined, "no session/prompt response found on the wire");
  if (turn.updates.length >= onWire.length) return;
  // The SDK delivers in order, so align the two lists to name the updates it dropped.
  const key = (u) => canonical([u?.sessionUpdate, u?.content, u?.toolCallId, u?.status]);
  const dropped = [];
  let j = 0;
  for (const u of onWire) {
    if (j < turn.updates.length && key(u) === key(turn.updates[j])) j += 1;
    else dropped.push(u);
  }
  throw new StepFailure(
    `the server sent ${onWire.length} session/update notifications before the response, ` +
      `but the SDK delivered only ${turn.updates.length} to the client handler; the SDK's ` +
      `schema validation rejected (stderr: "Error handling notification"): ` +
      dropped
        .slice(0, 3)
        .map((u) => clip(JSON.stringify(u), 300))
        .join(" ; ") +
      (dropped.length > 3 ? ` ; ... ${dropped.length - 3} more` : ""),
  );
}

// JSON with sorted object keys (the SDK's parsed objects do not keep the wire's key order).
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

async function step(name, body) {
  const mark = wire.length;
  try {
    const detail = await body();
    ok(name, detail);
    return true;
  } catch (error) {
    const why = error instanceof StepFailure ? error.message : describeError(error);
    fail(name, why, wire.slice(mark));
    return false;
  }
}

function notRun(name, why) {
  fail(name, `not run: ${why}`);
}

// ---------------------------------------------------------------- the scenario

async function main() {
  if (!sessionCwd) console.error("scenario: SCENARIO_CWD is not set");
  if (!outsideCwd) console.error("scenario: SCENARIO_OUTSIDE is not set");
  if (wsUrl) return mainWebSocket();
  if (httpUrl) return mainHttp();

  const child = spawn(binary, [], { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  const spawned = await new Promise((resolve) => {
    child.once("spawn", () => resolve(null));
    child.once("error", (error) => resolve(error));
  });
  if (spawned) {
    fail("spawn", `cannot start ${binary}: ${spawned.message}`);
    return;
  }
  child.stdin.on("error", () => {}); // EPIPE if the server dies; reported by the steps

  const stream = tapped(ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));
  const connection = app.connect(stream);
  const agent = connection.agent;

  try {
    await runSteps(agent);
  } finally {
    await shutdown(child, exited);
    connection.close();
  }
}

// `afterInitialize(response)` runs between `initialize` and `session/new` (authentication).
async function runSteps(agent, { afterInitialize } = {}) {
  // initialize
  let initializeResponse;
  const initialized = await step("initialize", async () => {
    const response = await withTimeout(
      agent.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        // A governed server gets an editor offering its files and terminal (the editor-*
        // steps); the echo server an editor offering nothing.
        clientCapabilities: {
          fs: { readTextFile: governed, writeTextFile: governed },
          terminal: governed,
        },
        clientInfo: { name: "agentacp-interop-ts", version: "0.0.0" },
      }),
      "the initialize response",
    );
    check(
      response.protocolVersion === 1,
      `protocolVersion is ${JSON.stringify(response.protocolVersion)}, expected 1`,
    );
    check(
      response.agentInfo?.name === expectedName,
      `agentInfo.name is ${JSON.stringify(response.agentInfo?.name)}, expected ${JSON.stringify(expectedName)}` +
        ` (agentInfo: ${JSON.stringify(response.agentInfo)})`,
    );
    initializeResponse = response;
    return `(agentInfo ${JSON.stringify(response.agentInfo)}) agentCapabilities=${JSON.stringify(response.agentCapabilities)}`;
  });
  if (initialized && afterInitialize) await afterInitialize(initializeResponse);
  if (!initialized) {
    const rest = ["session/new", "stream", "cancel", "after-cancel"];
    if (governed) rest.push("tool-approved", "tool-rejected", "tool-denied", "tool-read", ...EDITOR_STEPS, ...SURFACE_STEPS);
    rest.push("cwd-outside");
    for (const name of rest) notRun(name, "initialize failed");
    return;
  }

  // session/new
  let sessionId;
  await step("session/new", async () => {
    check(sessionCwd, "SCENARIO_CWD is not set");
    const response = await withTimeout(
      agent.request(methods.agent.session.new, { cwd: sessionCwd, mcpServers: [] }),
      "the session/new response",
    );
    check(
      typeof response.sessionId === "string" && response.sessionId.length > 0,
      `no sessionId in ${JSON.stringify(response)}`,
    );
    sessionId = response.sessionId;
    if (governed) {
      // metadata.agentacp: the modes and the model option in the answer, the slash
      // commands in an available_commands_update right after it.
      const modes = response.modes;
      check(modes?.currentModeId === "ask", `modes ${JSON.stringify(modes)}, expected current "ask"`);
      const modeIds = (modes.availableModes ?? []).map((m) => m.id);
      check(canonical(modeIds) === canonical(["ask", "code"]), `available modes ${JSON.stringify(modeIds)}`);
      const model = (response.configOptions ?? []).find((o) => o.id === "model");
      check(
        model?.type === "select" && model.category === "model" && model.currentValue === "fast",
        `the model option is ${JSON.stringify(model)}`,
      );
      const values = (model.options ?? []).map((o) => o.value);
      check(canonical(values) === canonical(["fast", "deep"]), `model values ${JSON.stringify(values)}`);
      await waitFor(() => commandUpdates(sessionId).length === 1, "the available_commands_update after session/new");
      const [summary] = commandUpdates(sessionId)[0].availableCommands ?? [];
      check(
        summary?.name === "summary" && summary.input?.hint === "what to focus on",
        `the announced commands are ${JSON.stringify(commandUpdates(sessionId)[0])}`,
      );
    }
    return `(sessionId ${JSON.stringify(sessionId)})`;
  });

  if (sessionId === undefined) {
    for (const name of ["stream", "cancel", "after-cancel"]) notRun(name, "no session");
    if (governed) {
      for (const name of ["tool-approved", "tool-rejected", "tool-denied", "tool-read", ...EDITOR_STEPS, ...SURFACE_STEPS]) {
        notRun(name, "no session");
      }
    }
  } else {
    await sessionSteps(agent, sessionId);
  }

  // a cwd outside the workspace root
  await step("cwd-outside", async () => {
    check(outsideCwd, "SCENARIO_OUTSIDE is not set");
    let response;
    try {
      response = await withTimeout(
        agent.request(methods.agent.session.new, { cwd: outsideCwd, mcpServers: [] }),
        "the session/new response",
      );
    } catch (error) {
      if (error instanceof StepFailure) throw error;
      check(error?.code === -32602, `expected error -32602, got ${describeError(error)}`);
      return `(${describeError(error)})`;
    }
    throw new StepFailure(
      `session/new with cwd ${JSON.stringify(outsideCwd)} succeeded: ${JSON.stringify(response)}`,
    );
  });
}

async function sessionSteps(agent, sessionId) {
  // /stream: many chunks, in order, all before the response.
  await step("stream", async () => {
    const turn = await promptTurn(agent, sessionId, `/stream ${STREAM_COUNT} ${STREAM_SIZE}`);
    checkDelivered(turn);
    check(
      turn.response.stopReason === "end_turn",
      `stopReason ${JSON.stringify(turn.response.stopReason)}, expected "end_turn"`,
    );
    const onWire = turn.wire.updatesBefore;
    check(
      turn.wire.after.length === 0,
      `${turn.wire.after.length} session/update notifications arrived after the session/prompt response`,
    );
    check(
      turn.sdkUpdatesAtResolve === turn.updates.length,
      `the SDK resolved the prompt after delivering ${turn.sdkUpdatesAtResolve} of ` +
        `${turn.updates.length} updates (the rest were dispatched after the response)`,
    );
    const chunks = turn.updates.filter(isChunk);
    check(
      chunks.length === STREAM_COUNT,
      `${chunks.length} agent_message_chunk updates (${onWire.length} session/update on the wire ` +
        `before the response), expected ${STREAM_COUNT}`,
    );
    for (let i = 0; i < chunks.length; i++) {
      const text = chunkText(chunks[i]);
      const prefix = String(i).padStart(8, "0");
      check(
        typeof text === "string" && text.startsWith(prefix),
        () => `chunk ${i} is ${clip(JSON.stringify(chunks[i]), 200)}, expected text starting with ${prefix}`,
      );
      check(
        Buffer.byteLength(text, "utf8") === STREAM_SIZE,
        () => `chunk ${i} has ${Buffer.byteLength(text, "utf8")} bytes, expected ${STREAM_SIZE}: ${JSON.stringify(text)}`,
      );
    }
    const ms = turn.wire.response.t - turn.wire.request.t;
    return `(${chunks.length} chunks in order before the response, ${ms} ms)`;
  });

  // /forever, cancelled after the first chunk.
  const cancelled = await step("cancel", async () => {
    let firstChunkMs;
    const started = Date.now();
    const turn = await promptTurn(agent, sessionId, "/forever", {
      onStarted: async (eventMark) => {
        await waitFor(
          () =>
            events
              .slice(eventMark)
              .some((e) => e.kind === "update" && e.sessionId === sessionId && isChunk(e.update)),
          "the first agent_message_chunk of /forever",
        );
        firstChunkMs = Date.now() - started;
        await agent.notify(methods.agent.session.cancel, { sessionId });
      },
    });
    checkDelivered(turn);
    check(
      turn.response.stopReason === "cancelled",
      `stopReason ${JSON.stringify(turn.response.stopReason)}, expected "cancelled"`,
    );
    const responses = wire
      .slice(turn.mark)
      .filter((e) => e.dir === "<-" && e.msg.method === undefined && e.msg.id === turn.wire.request.msg.id);
    check(responses.length === 1, `${responses.length} responses to the cancelled session/prompt`);
    check(
      turn.wire.after.length === 0,
      () =>
        `${turn.wire.after.length} session/update notifications arrived after the "cancelled" ` +
        `response: ${clip(JSON.stringify(turn.wire.after.slice(0, 3)), 300)}`,
    );
    return `(first chunk after ${firstChunkMs} ms, ${turn.updates.length} updates before "cancelled")`;
  });

  await step("after-cancel", async () => {
    const turn = await promptTurn(agent, sessionId, "hi");
    checkDelivered(turn);
    check(
      turn.response.stopReason === "end_turn",
      `stopReason ${JSON.stringify(turn.response.stopReason)}, expected "end_turn"`,
    );
    const text = messageText(turn.updates);
    check(
      text === "hi",
      `the turn's agent_message_chunk text is ${clip(JSON.stringify(text), 200)}, expected "hi"` +
        ` (updates: ${clip(JSON.stringify(turn.updates), 300)})`,
    );
    return cancelled ? "(echo \"hi\", end_turn)" : "(echo \"hi\", end_turn, though the cancel step failed)";
  });

  if (governed) await governedSteps(agent, sessionId);
}

async function governedSteps(agent, sessionId) {
  const writeArgs = JSON.stringify({ path: "notes.txt", content: "x" });

  // Approve a tool that asks: tool_call(pending) → request_permission → completed.
  await step("tool-approved", async () => {
    permissionPolicy = { kind: "select", optionKind: "allow_once" };
    const turn = await promptTurn(agent, sessionId, `/tool write-file ${writeArgs}`);
    checkDelivered(turn);
    checkPermissionTurn(turn, "allow_once");
    const text = messageText(turn.updates);
    check(
      text.startsWith("completed:"),
      `the reply message is ${clip(JSON.stringify(text), 300)}, expected "completed: ..."`,
    );
    check(turn.response.stopReason === "end_turn", `stopReason ${JSON.stringify(turn.response.stopReason)}`);
    const written = join(sessionCwd, "notes.txt");
    check(existsSync(written), `${written} does not exist after an approved write-file`);
    const content = readFileSync(written, "utf8");
    check(content === "x", `${written} contains ${JSON.stringify(content)}, expected "x"`);
    return `(${clip(JSON.stringify(text), 120)})`;
  });

  // The same, rejected.
  await step("tool-rejected", async () => {
    permissionPolicy = { kind: "select", optionKind: "reject_once" };
    const turn = await promptTurn(agent, sessionId, `/tool write-file ${writeArgs}`);
    checkDelivered(turn);
    checkPermissionTurn(turn, "reject_once");
    const text = messageText(turn.updates);
    check(text === "rejected", `the reply message is ${clip(JSON.stringify(text), 300)}, expected "rejected"`);
    check(turn.response.stopReason === "end_turn", `stopReason ${JSON.stringify(turn.response.stopReason)}`);
    return "(rejected)";
  });

  // A tool outside the operator's list: denied by governance, never announced.
  await step("tool-denied", async () => {
    permissionPolicy = { kind: "unexpected" };
    const turn = await promptTurn(agent, sessionId, "/tool delete-repo {}");
    checkDelivered(turn);
    const toolUpdates = turn.updates.filter(
      (u) => u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update",
    );
    check(toolUpdates.length === 0, `tool updates were sent: ${clip(JSON.stringify(toolUpdates), 300)}`);
    const asked = turn.turnEvents.filter((e) => e.kind === "permission");
    check(asked.length === 0, `a permission request was sent: ${clip(JSON.stringify(asked[0]?.params), 300)}`);
    const text = messageText(turn.updates);
    check(text.startsWith("denied:"), `the reply message is ${clip(JSON.stringify(text), 300)}, expected "denied: ..."`);
    check(turn.response.stopReason === "end_turn", `stopReason ${JSON.stringify(turn.response.stopReason)}`);
    return `(${clip(JSON.stringify(text), 120)})`;
  });

  // A read tool: allowed without asking.
  await step("tool-read", async () => {
    permissionPolicy = { kind: "unexpected" };
    const turn = await promptTurn(
      agent,
      sessionId,
      `/tool read-file ${JSON.stringify({ path: "notes.txt" })}`,
    );
    checkDelivered(turn);
    const asked = turn.turnEvents.filter((e) => e.kind === "permission");
    check(asked.length === 0, `a permission request was sent: ${clip(JSON.stringify(asked[0]?.params), 300)}`);
    const text = messageText(turn.updates);
    check(
      text.startsWith("completed:"),
      `the reply message is ${clip(JSON.stringify(text), 300)}, expected "completed: ..."`,
    );
    check(turn.response.stopReason === "end_turn", `stopReason ${JSON.stringify(turn.response.stopReason)}`);
    return `(${clip(JSON.stringify(text), 120)})`;
  });

  await editorSteps(agent, sessionId);
  permissionPolicy = { kind: "unexpected" };
  await surfaceSteps(agent, sessionId);
}

// The available_commands_update notifications the SDK delivered for `sessionId`.
function commandUpdates(sessionId) {
  return events
    .filter((e) => e.kind === "update" && e.sessionId === sessionId)
    .map((e) => e.update)
    .filter((u) => u.sessionUpdate === "available_commands_update");
}

// The message text of one prompt turn, checked delivered and ended `end_turn`.
async function echoTurn(agent, sessionId, text) {
  const turn = await promptTurn(agent, sessionId, text);
  checkDelivered(turn);
  check(turn.response.stopReason === "end_turn", `stopReason ${JSON.stringify(turn.response.stopReason)}`);
  return { turn, text: messageText(turn.updates) };
}

// An SDK request expected to fail with JSON-RPC error `code`.
async function expectError(agent, method, params, code) {
  let response;
  try {
    response = await withTimeout(agent.request(method, params), `the ${method} response`);
  } catch (error) {
    if (error instanceof StepFailure) throw error;
    check(error?.code === code, `${method}: expected error ${code}, got ${describeError(error)}`);
    return;
  }
  throw new StepFailure(`${method} ${JSON.stringify(params)} succeeded: ${JSON.stringify(response)}`);
}

const SURFACE_STEPS = [
  "set-mode",
  "set-config-option",
  "slash-command",
  "mode-update",
  "extension",
  "session-list",
  "session-close",
  "session-close-twice",
  "session-resume",
];

// Issue #16: the session surface governed-server's manifest declares in metadata.agentacp
// (modes, the model option, /summary, _governed/status, session/list, close, resume), through
// the SDK's own method names and types.
async function surfaceSteps(agent, sessionId) {
  await step("set-mode", async () => {
    const response = await withTimeout(
      agent.request(methods.agent.session.setMode, { sessionId, modeId: "code" }),
      "the session/set_mode response",
    );
    await expectError(agent, methods.agent.session.setMode, { sessionId, modeId: "yolo" }, -32602);
    const { text } = await echoTurn(agent, sessionId, "hello");
    check(text === "[code, fast] hello", `the echo is ${JSON.stringify(text)}, expected "[code, fast] hello"`);
    return `(${JSON.stringify(response)}, then ${JSON.stringify(text)})`;
  });

  await step("set-config-option", async () => {
    const response = await withTimeout(
      agent.request(methods.agent.session.setConfigOption, { sessionId, configId: "model", value: "deep" }),
      "the session/set_config_option response",
    );
    const model = (response.configOptions ?? []).find((o) => o.id === "model");
    check(model?.currentValue === "deep", `the answer's model option is ${JSON.stringify(model)}`);
    await expectError(
      agent,
      methods.agent.session.setConfigOption,
      { sessionId, configId: "model", value: "huge" },
      -32602,
    );
    const { text } = await echoTurn(agent, sessionId, "hello");
    check(text === "[code, deep] hello", `the echo is ${JSON.stringify(text)}, expected "[code, deep] hello"`);
    return `(model ${model.currentValue}, then ${JSON.stringify(text)})`;
  });

  await step("slash-command", async () => {
    const { text } = await echoTurn(agent, sessionId, "/summary typescript");
    check(
      text.startsWith("summary: ") && text.includes("mode code, model deep") && text.endsWith("focus: typescript"),
      `the /summary reply is ${JSON.stringify(text)}`,
    );
    return `(${JSON.stringify(text)})`;
  });

  await step("mode-update", async () => {
    const { turn, text } = await echoTurn(agent, sessionId, "/mode ask");
    const switches = turn.updates.filter((u) => u.sessionUpdate === "current_mode_update");
    check(
      switches.length === 1 && switches[0].currentModeId === "ask",
      `current_mode_update notifications: ${JSON.stringify(switches)}`,
    );
    check(text === "mode ask", `the reply is ${JSON.stringify(text)}`);
    return `(${JSON.stringify(switches[0])})`;
  });

  await step("extension", async () => {
    const status = await withTimeout(
      agent.request("_governed/status", { sessionId }),
      "the _governed/status response",
    );
    check(
      status?.sessionId === sessionId && status.mode === "ask" && status.model === "deep" && status.prompts > 0,
      `_governed/status answered ${JSON.stringify(status)}`,
    );
    await expectError(agent, "_governed/unknown", { sessionId }, -32601);
    return `(${JSON.stringify(status)})`;
  });

  await step("session-list", async () => {
    const response = await withTimeout(
      agent.request(methods.agent.session.list, { cwd: sessionCwd }),
      "the session/list response",
    );
    const ids = (response.sessions ?? []).map((s) => s.sessionId);
    check(ids.includes(sessionId), `session/list answered ${JSON.stringify(ids)}`);
    return `(${ids.length} session(s))`;
  });

  const closed = await step("session-close", async () => {
    const response = await withTimeout(
      agent.request(methods.agent.session.close, { sessionId }),
      "the session/close response",
    );
    return `(${JSON.stringify(response)})`;
  });

  // Issue #45: closing again through the SDK is no error. The agent answers -32002
  // "Resource not found" (with data.sessionId), which the SDK takes as a successful close.
  await step("session-close-twice", async () => {
    check(closed, "the session was not closed");
    const mark = wire.length;
    const response = await withTimeout(
      agent.request(methods.agent.session.close, { sessionId }),
      "the second session/close response",
    );
    const answers = wire
      .slice(mark)
      .filter((e) => e.dir === "<-" && e.msg.id !== undefined && e.msg.method === undefined)
      .map((e) => e.msg);
    check(
      answers.length === 1 && answers[0].error?.code === -32002 && answers[0].error?.data?.sessionId === sessionId,
      () => `the agent answered the second close with ${JSON.stringify(answers)}, not -32002 with data.sessionId`,
    );
    return `(${JSON.stringify(response)}; the agent's -32002 taken as done)`;
  });

  await step("session-resume", async () => {
    check(closed, "the session was not closed");
    const announced = commandUpdates(sessionId).length;
    const response = await withTimeout(
      agent.request(methods.agent.session.resume, { sessionId, cwd: sessionCwd }),
      "the session/resume response",
    );
    check(response.modes?.currentModeId === "ask", `the resumed modes are ${JSON.stringify(response.modes)}`);
    const model = (response.configOptions ?? []).find((o) => o.id === "model");
    check(model?.currentValue === "deep", `the resumed model option is ${JSON.stringify(model)}`);
    await waitFor(
      () => commandUpdates(sessionId).length === announced + 1,
      "the available_commands_update after session/resume",
    );
    const { text } = await echoTurn(agent, sessionId, "hello");
    check(text === "[ask, deep] hello", `the echo is ${JSON.stringify(text)}, expected "[ask, deep] hello"`);
    return `(mode ask, model deep kept; then ${JSON.stringify(text)})`;
  });
}

const EDITOR_STEPS = ["editor-read", "editor-write", "editor-run"];

// Issue #13: the server's operator uses this editor's files and terminal (turn.editor()):
// a read runs unasked, a write and a command are asked first; each request carries the
// session and a path inside the session's folder, and the operator reports the answer.
async function editorSteps(agent, sessionId) {
  const editorCalls = (turn) => turn.turnEvents.filter((e) => e.kind === "editor");
  await step("editor-read", async () => {
    permissionPolicy = { kind: "unexpected" };
    const turn = await promptTurn(agent, sessionId, "/editor-read notes.txt");
    checkDelivered(turn);
    const calls = editorCalls(turn);
    const path = join(sessionCwd, "notes.txt");
    check(calls.length === 1 && calls[0].method === "fs/read_text_file", `editor calls: ${clip(JSON.stringify(calls), 400)}`);
    check(calls[0].params.path === path && calls[0].params.sessionId === sessionId, `params ${JSON.stringify(calls[0].params)}`);
    check(!turn.turnEvents.some((e) => e.kind === "permission"), "a read was asked");
    const text = messageText(turn.updates);
    check(text === `editor buffer of ${path}`, `the reply is ${JSON.stringify(text)}`);
    return `(${clip(JSON.stringify(text), 120)})`;
  });
  await step("editor-write", async () => {
    permissionPolicy = { kind: "select", optionKind: "allow_once" };
    const turn = await promptTurn(agent, sessionId, "/editor-write out.txt from typescript");
    checkDelivered(turn);
    checkPermissionTurn(turn, "allow_once");
    const calls = editorCalls(turn);
    check(calls.length === 1 && calls[0].params.content === "from typescript", `editor calls: ${clip(JSON.stringify(calls), 400)}`);
    const text = messageText(turn.updates);
    check(text === "wrote 15 bytes", `the reply is ${JSON.stringify(text)}`);
    return `(${text})`;
  });
  await step("editor-run", async () => {
    permissionPolicy = { kind: "select", optionKind: "allow_once" };
    const turn = await promptTurn(agent, sessionId, "/editor-run make check");
    checkDelivered(turn);
    checkPermissionTurn(turn, "allow_once");
    const methodsSeen = editorCalls(turn).map((e) => e.method);
    const want = ["terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release"];
    check(canonical(methodsSeen) === canonical(want), `editor calls: ${JSON.stringify(methodsSeen)}`);
    const create = editorCalls(turn)[0].params;
    check(create.command === "make" && canonical(create.args) === canonical(["check"]) && create.cwd === sessionCwd, `terminal/create ${JSON.stringify(create)}`);
    const text = messageText(turn.updates);
    check(text === "exit 0: ran in ts-1", `the reply is ${JSON.stringify(text)}`);
    return `(${text})`;
  });
}

// A turn that must announce the tool call as pending, then ask exactly once.
function checkPermissionTurn(turn, optionKind) {
  const firstAsk = turn.turnEvents.findIndex((e) => e.kind === "permission");
  if (firstAsk < 0) {
    // Tell "never asked" from "asked, but the SDK refused the request's params".
    const seen = wire.slice(turn.mark);
    const asked = seen.find(
      (e) => e.dir === "<-" && e.msg.method === methods.client.session.requestPermission,
    );
    check(asked === undefined || asked.msg.id === undefined, () => {
      const answer = seen.find(
        (e) => e.dir === "->" && e.msg.method === undefined && e.msg.id === asked.msg.id,
      );
      return (
        `the server sent ${clip(JSON.stringify(asked.msg), 400)} but the SDK answered ` +
        `${answer ? clip(JSON.stringify(answer.msg), 300) : "nothing"} without calling the client handler`
      );
    });
    throw new StepFailure("no session/request_permission request arrived");
  }
  const asks = turn.turnEvents.filter((e) => e.kind === "permission");
  check(asks.length === 1, `${asks.length} permission requests, expected 1`);
  const ask = asks[0];
  const toolCallId = ask.params.toolCall?.toolCallId;
  const announced = turn.turnEvents
    .slice(0, firstAsk)
    .find(
      (e) =>
        e.kind === "update" &&
        e.update.sessionUpdate === "tool_call" &&
        e.update.toolCallId === toolCallId,
    );
  check(
    announced !== undefined,
    `no tool_call update for toolCallId ${JSON.stringify(toolCallId)} arrived before the permission request`,
  );
  check(
    announced.update.status === "pending",
    `the tool_call update has status ${JSON.stringify(announced.update.status)}, expected "pending"`,
  );
  check(
    ask.answer.outcome.outcome === "selected",
    `no option of kind ${optionKind} was offered: ${JSON.stringify(ask.params.options)}`,
  );
}

// ---------------------------------------------------------------- over a WebSocket

// Opens a `ws` WebSocket and waits until it is open. Rejects with `{ status }` when the
// server answers the upgrade with another HTTP status, or with the socket's error.
function openSocket(url, headers, Ctor = WebSocket) {
  const socket = new Ctor(url, { headers });
  socket.on("error", () => {}); // reported through the promise below, or by the steps
  return withTimeout(
    new Promise((resolve, reject) => {
      socket.once("open", () => resolve(socket));
      socket.once("unexpected-response", (_request, response) => {
        reject(Object.assign(new Error(`HTTP ${response.statusCode}`), { status: response.statusCode }));
        response.resume();
        socket.terminate();
      });
      socket.once("error", reject);
    }),
    `the WebSocket upgrade to ${url}`,
  );
}

// The byte streams `ndJsonStream` wants, over an open `ws` socket: each line the SDK writes
// goes as one text message (with its newline); each text message received goes into the
// readable followed by a newline.
function socketByteStreams(socket) {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  let pending = "";
  const readable = new ReadableStream({
    start(controller) {
      socket.on("message", (data, isBinary) => {
        if (isBinary) return; // the server sends text only; a binary message would be a bug the steps show
        controller.enqueue(encoder.encode(`${data.toString("utf8")}\n`));
      });
      socket.on("close", () => {
        try {
          controller.close();
        } catch {}
      });
      socket.on("error", (error) => {
        try {
          controller.error(error);
        } catch {}
      });
    },
  });
  const writable = new WritableStream({
    write(chunk) {
      pending += decoder.decode(chunk, { stream: true });
      let newline;
      while ((newline = pending.indexOf("\n")) >= 0) {
        socket.send(pending.slice(0, newline + 1));
        pending = pending.slice(newline + 1);
      }
    },
    close() {
      socket.close(1000);
    },
  });
  return { readable, writable };
}

// An upgrade the server must refuse with HTTP `status`.
async function refusedUpgrade(name, headers, status) {
  await step(name, async () => {
    let socket;
    try {
      socket = await openSocket(wsUrl, headers);
    } catch (error) {
      if (error instanceof StepFailure) throw error;
      check(error.status === status, `expected HTTP ${status}, got ${error.status ?? describeError(error)}`);
      return `(HTTP ${error.status})`;
    }
    socket.terminate();
    throw new StepFailure(`the upgrade with ${JSON.stringify(headers)} was accepted`);
  });
}

async function mainWebSocket() {
  ({ WebSocket } = await import("ws"));
  ({ createWebSocketStream } = await import("@agentclientprotocol/sdk/experimental/ws-client"));
  const bearer = { Authorization: `Bearer ${token}` };
  await refusedUpgrade("refused-wrong-token", { Authorization: "Bearer not-the-token" }, 401);
  await refusedUpgrade("refused-origin", { ...bearer, Origin: "https://evil.example" }, 403);

  const headers = wsAuth === "header" ? bearer : {};
  // Every socket this script opens for the session (the SDK's own transport opens its own).
  const sockets = [];
  const Recorded = class extends WebSocket {
    constructor(...a) {
      super(...a);
      sockets.push(this);
    }
  };
  let stream;
  const connected = await step("connect", async () => {
    if (wsStream === "sdk") {
      stream = createWebSocketStream(wsUrl, { WebSocket: Recorded, headers });
      return `(the SDK's createWebSocketStream, ${wsAuth})`;
    }
    const socket = await openSocket(wsUrl, headers, Recorded);
    const bytes = socketByteStreams(socket);
    stream = ndJsonStream(bytes.writable, bytes.readable);
    return `(ndJsonStream over a ws socket, ${wsAuth})`;
  });
  if (!connected) {
    fail("scenario", "not run: no connection");
    return;
  }
  const connection = app.connect(tapped(stream));
  const agent = connection.agent;
  try {
    await runSteps(agent, { afterInitialize: wsAuth === "authenticate" ? authenticateSteps(agent) : undefined });
  } finally {
    await step("shutdown", async () => {
      const socket = sockets[0];
      check(socket !== undefined, "no WebSocket was opened");
      const closed =
        socket.readyState === WebSocket.CLOSED
          ? Promise.reject(new StepFailure("the server had closed the WebSocket before this client left"))
          : new Promise((resolve) => socket.once("close", (code) => resolve(code)));
      connection.close();
      socket.close(1000);
      const code = await withTimeout(closed, "the WebSocket to close", 10000);
      return `(closed ${code})`;
    });
  }
}

// ---------------------------------------------------------------- over Streamable HTTP

// A raw `initialize` POST (no SDK) with `headers`, which the server must refuse with HTTP
// `status`.
async function refusedInitialize(name, headers, status) {
  await step(name, async () => {
    const initialize = { jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: PROTOCOL_VERSION } };
    const response = await withTimeout(
      fetch(httpUrl, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body: JSON.stringify(initialize),
      }),
      `the answer to an initialize POST with ${JSON.stringify(headers)}`,
    );
    await response.body?.cancel();
    check(
      response.status === status,
      `expected HTTP ${status}, got ${response.status} (Acp-Connection-Id ${response.headers.get("acp-connection-id")})`,
    );
    return `(HTTP ${response.status})`;
  });
}

// What the SDK's transport asked and was answered: `{ method, status, type, session, rpc }`
// per request, in the order the answers came.
const exchanges = [];
let deleted;
const deleteAnswered = new Promise((resolve) => {
  deleted = resolve;
});

async function recordingFetch(url, init = {}) {
  const response = await fetch(url, init);
  const headers = new Headers(init.headers);
  let rpc;
  try {
    rpc = init.body === undefined ? undefined : JSON.parse(init.body).method ?? "(response)";
  } catch {}
  const exchange = {
    method: init.method ?? "GET",
    status: response.status,
    type: response.headers.get("content-type"),
    session: headers.get("acp-session-id") ?? undefined,
    rpc,
  };
  exchanges.push(exchange);
  if (exchange.method === "DELETE") deleted(exchange);
  return response;
}

// Every request answered as the RFD says.
function checkExchanges() {
  const wrong = exchanges.filter((e) => {
    if (e.method === "POST") return e.status !== (e.rpc === "initialize" ? 200 : 202);
    if (e.method === "GET") return e.status !== 200 || !String(e.type).startsWith("text/event-stream");
    return e.status !== 202;
  });
  check(wrong.length === 0, () => `answered otherwise than the RFD says: ${clip(JSON.stringify(wrong), 1500)}`);
  const count = (method) => exchanges.filter((e) => e.method === method).length;
  const sessionStreams = exchanges.filter((e) => e.method === "GET" && e.session !== undefined).length;
  check(sessionStreams > 0, "the SDK never opened a session's stream");
  return `(${count("POST")} POST, ${count("GET")} GET of which ${sessionStreams} session streams, ${count("DELETE")} DELETE)`;
}

async function mainHttp() {
  const { createHttpStream } = await import("@agentclientprotocol/sdk/experimental/http-client");
  const bearer = { Authorization: `Bearer ${token}` };
  await refusedInitialize("refused-wrong-token", { Authorization: "Bearer not-the-token" }, 401);
  await refusedInitialize("refused-origin", { ...bearer, Origin: "https://evil.example" }, 403);

  const headers = wsAuth === "header" ? bearer : {};
  const stream = createHttpStream(httpUrl, { headers, fetch: recordingFetch });
  ok("connect", `(the SDK's createHttpStream, ${wsAuth})`);
  const connection = app.connect(tapped(stream));
  const agent = connection.agent;
  try {
    await runSteps(agent, { afterInitialize: wsAuth === "authenticate" ? authenticateSteps(agent) : undefined });
  } finally {
    // Closing the connection cancels the stream, and the SDK's transport DELETEs the connection.
    await step("shutdown", async () => {
      connection.close();
      const answer = await withTimeout(deleteAnswered, "the DELETE of the connection", 10000);
      check(answer.status === 202, `the DELETE was answered ${answer.status}`);
      return `(DELETE ${answer.status})`;
    });
    await step("http-exchanges", async () => checkExchanges());
  }
}

// Without a token on the upgrade (or on the HTTP requests): the initialize answer offers
// `bearer`; a request before `authenticate` is refused -32000; `authenticate` with the token
// in `_meta` admits us. The `afterInitialize` of `runSteps`.
function authenticateSteps(agent) {
  return async (initialized) => {
    await step("auth-required", async () => {
      const offered = (initialized.authMethods ?? []).map((m) => m.id);
      check(offered.includes("bearer"), `authMethods ${JSON.stringify(initialized.authMethods)}`);
      await expectError(agent, methods.agent.session.new, { cwd: sessionCwd, mcpServers: [] }, -32000);
      return `(authMethods ${JSON.stringify(offered)}, session/new -32000)`;
    });
    await step("authenticate", async () => {
      check(token, "SCENARIO_TOKEN is not set");
      const response = await withTimeout(
        agent.request(methods.agent.authenticate, { methodId: "bearer", _meta: { agentacp: { token } } }),
        "the authenticate response",
      );
      return `(${JSON.stringify(response)})`;
    });
  };
}

async function shutdown(child, exited) {
  await step("shutdown", async () => {
    child.stdin.end();
    let status;
    try {
      status = await withTimeout(exited, "the server to exit after stdin was closed", 10000);
    } catch (error) {
      child.kill("SIGKILL");
      await exited;
      throw error;
    }
    check(
      status.code === 0,
      `the server exited with ${status.code === null ? `signal ${status.signal}` : `code ${status.code}`}`,
    );
    return "(exit code 0 after stdin EOF)";
  });
}

main()
  .catch((error) => {
    fail("scenario", describeError(error));
  })
  .finally(() => {
    process.exitCode = failures === 0 ? 0 : 1;
    // Timed-out requests may keep the event loop alive; the child is gone by now.
    setTimeout(() => process.exit(process.exitCode), 100).unref();
  });
