//! The client face of ACP v2: what a side that speaks v1 inside (our `Client`, a bridge's
//! agent face) sends to an agent that speaks v2, and what it receives from one.
//!
//! [`ClientFace`] translates whole JSON-RPC messages ([`Value`]s), keeping what one message
//! needs of an earlier one: the requests we sent (so that each answer is read as what it
//! answers), each session's prompt in flight, its messages and its tool calls. Going to the
//! agent ([`ClientFace::to_agent`]):
//! - `initialize` takes the v2 shape (`info` required, `capabilities`; `fs` and `terminal`
//!   dropped); when falling back to v1 is allowed, the v1 fields go along too, so that a v1
//!   agent that answers `1` knows our capabilities;
//! - `authenticate` / `logout` become `auth/login` / `auth/logout`;
//! - `session/load` becomes `session/resume` with `replayFrom: {"type": "start"}`, and its
//!   answer a load's; MCP servers get their `type` (`sse` ones, gone from v2, are left out);
//! - `session/set_mode` becomes `session/set_config_option` of the session's option of
//!   category `mode`, or is answered here with an error that says why.
//!
//! Coming from the agent ([`ClientFace::from_agent`]):
//! - the answer to `session/prompt` only acknowledges, and is swallowed; the idle
//!   `state_update` carrying the stop reason answers the v1 prompt instead (`running` and
//!   `requires_action` have no v1 form);
//! - whole-message upserts (`agent_message` …) become chunks of what is new (content a v1
//!   peer has already been shown cannot be taken back); chunks keep their `messageId`; the
//!   acknowledgement of the user's message during a live prompt is swallowed (a v1 client
//!   is not sent back its own prompt);
//! - the first `tool_call_update` of a call becomes `tool_call`; `tool_call_content_chunk`
//!   becomes a `tool_call_update` with the content so far; `plan_update` becomes `plan`;
//!   diffs and terminal references become text; agent-owned terminal updates, which a v1
//!   peer has no place for, are dropped;
//! - `session/request_permission` gets a v1 `toolCall` from its subject (a call not yet
//!   announced is announced first); its answer has the same shape in both versions;
//! - `initialize`'s answer gets v1's `agentCapabilities` (the v2 baseline: load, list,
//!   resume, close), `agentInfo` and `authMethods` (`methodId` → `id`); config options
//!   `configId` → `id`, and a select option of category `mode` also shows as v1 `modes`.
//!
//! What a v1 peer cannot be told is logged at `debug`, never an error: the connection goes on.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::connection::dialect::{Dialect, Inbound, Seam};
use crate::jsonrpc::outbox::{Outbox, Rewrite};
use crate::sync::lock;

/// The JSON-RPC code of a method the peer does not have.
const METHOD_NOT_FOUND: i64 = -32601;
/// The JSON-RPC code of an internal error.
const INTERNAL_ERROR: i64 = -32603;
/// The stop reasons v1 has; any other ends a v1 prompt with an error.
const V1_STOP_REASONS: [&str; 5] = ["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"];
/// The tool kinds v1 has; any other is `other`.
const V1_TOOL_KINDS: [&str; 10] = [
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
];
/// A tool call status after which no content is appended (its content is forgotten).
const FINISHED: [&str; 3] = ["completed", "failed", "cancelled"];

/// What becomes of a message our side sends to a v2 agent.
#[derive(Debug, Clone, PartialEq)]
pub enum ToAgent {
    /// Send this message (translated).
    Send(Value),
    /// Send nothing; this is the answer to our own request (one v2 has no counterpart for).
    Answer(Value),
    /// Send nothing (a notification v2 has no counterpart for).
    Drop,
}

/// Which version the agent chose at `initialize`, as the face knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `initialize` not answered yet.
    Asking,
    /// The agent speaks v2: everything is translated.
    V2,
    /// The agent answered `1` and falling back was allowed: nothing is translated.
    V1,
}

/// What one of our requests was, to read its answer.
#[derive(Debug, Clone)]
enum Sent {
    Initialize,
    /// `session/prompt` of this session.
    Prompt(String),
    /// An answer that carries `configOptions` (`session/new`, `resume`, `load`,
    /// `set_config_option`), for this session when the request named it.
    Configs(Option<String>),
    /// `session/set_mode`, sent as `session/set_config_option`: answered `{}`.
    SetMode,
}

/// What is kept of one session.
#[derive(Debug, Default)]
struct Session {
    /// The id of the v1 prompt in flight, answered by the idle `state_update`.
    prompt: Option<Value>,
    /// The content shown so far of each message (by `messageId`).
    messages: HashMap<String, Vec<Value>>,
    /// The tool calls announced: the content so far of each unfinished one.
    calls: HashMap<String, Vec<Value>>,
    /// The `configId` of the session's select option of category `mode`.
    mode_option: Option<String>,
}

/// The translation between a side that speaks ACP v1 inside and an agent that speaks v2
/// (see the module's documentation). One per connection.
#[derive(Debug)]
pub struct ClientFace {
    phase: Phase,
    fallback: bool,
    sent: HashMap<String, Sent>,
    /// Prompts answered already (by their idle update) whose acknowledgement is to come.
    answered: HashSet<String>,
    sessions: HashMap<String, Session>,
}

impl ClientFace {
    /// A face for a connection that asks for v2; `fallback` allows v1 when the agent answers
    /// `1` (then nothing is translated).
    pub fn new(fallback: bool) -> ClientFace {
        ClientFace {
            phase: Phase::Asking,
            fallback,
            sent: HashMap::new(),
            answered: HashSet::new(),
            sessions: HashMap::new(),
        }
    }

    /// Whether the agent answered `1` and the connection goes on in v1, untranslated.
    pub fn fell_back(&self) -> bool {
        self.phase == Phase::V1
    }

    /// A message of our side's (v1), as it goes to the agent.
    pub fn to_agent(&mut self, message: Value) -> ToAgent {
        if self.phase == Phase::V1 {
            return ToAgent::Send(message);
        }
        match (message.get("method").and_then(Value::as_str), message.get("id")) {
            (Some(method), Some(id)) => {
                let (method, id) = (method.to_string(), id.clone());
                self.request(&method, id, message)
            }
            _ => ToAgent::Send(message),
        }
    }

    /// One of our requests: renamed and reshaped where v2 differs, remembered for its answer.
    fn request(&mut self, method: &str, id: Value, mut message: Value) -> ToAgent {
        let params = message.get_mut("params").map(Value::take).unwrap_or(Value::Null);
        let session = params.get("sessionId").and_then(Value::as_str).map(str::to_string);
        let (method, params, sent) = match method {
            "initialize" => (
                "initialize",
                initialize_request(params, self.fallback),
                Some(Sent::Initialize),
            ),
            "authenticate" => ("auth/login", params, None),
            "logout" => ("auth/logout", params, None),
            "session/new" => ("session/new", with_mcp_servers(params), Some(Sent::Configs(None))),
            "session/resume" => ("session/resume", with_mcp_servers(params), Some(Sent::Configs(session))),
            "session/load" => {
                let mut params = with_mcp_servers(params);
                params["replayFrom"] = json!({ "type": "start" });
                ("session/resume", params, Some(Sent::Configs(session)))
            }
            "session/set_config_option" => (
                "session/set_config_option",
                with_value_type(params),
                Some(Sent::Configs(session)),
            ),
            "session/prompt" => {
                let session = session.unwrap_or_default();
                self.sessions.entry(session.clone()).or_default().prompt = Some(id.clone());
                ("session/prompt", params, Some(Sent::Prompt(session)))
            }
            "session/set_mode" => match self.set_mode(&params) {
                Ok(params) => ("session/set_config_option", params, Some(Sent::SetMode)),
                Err(message) => return ToAgent::Answer(error_answer(&id, METHOD_NOT_FOUND, &message)),
            },
            other => {
                message["params"] = params;
                message["method"] = Value::from(other);
                return ToAgent::Send(message);
            }
        };
        if let Some(sent) = sent {
            self.sent.insert(id.to_string(), sent);
        }
        message["method"] = Value::from(method);
        message["params"] = params;
        ToAgent::Send(message)
    }

    /// `session/set_mode`'s params as `session/set_config_option`'s, or why it cannot be.
    fn set_mode(&self, params: &Value) -> Result<Value, String> {
        let session = params.get("sessionId").and_then(Value::as_str).unwrap_or_default();
        match self.sessions.get(session).and_then(|s| s.mode_option.as_ref()) {
            Some(option) => Ok(json!({
                "sessionId": session,
                "configId": option,
                "type": "id",
                "value": params.get("modeId").cloned().unwrap_or(Value::Null),
            })),
            None => Err(format!(
                "`session/set_mode` is not part of ACP v2, which the agent speaks, and the agent gave \
                 session `{session}` no config option of category `mode` to set instead"
            )),
        }
    }

    /// A message of the agent's (v2), as our side reads it: none, one or more v1 messages.
    pub fn from_agent(&mut self, message: Value) -> Vec<Value> {
        if self.phase == Phase::V1 {
            return vec![message];
        }
        let method = message.get("method").and_then(Value::as_str).map(str::to_string);
        match (method, message.get("id").cloned()) {
            (None, Some(id)) => self.response(id, message),
            (Some(method), None) if method == "session/update" => self.update(message),
            (Some(method), Some(id)) if method == "session/request_permission" => self.permission(id, message),
            _ => vec![message],
        }
    }

    /// The answer to one of our requests.
    fn response(&mut self, id: Value, mut message: Value) -> Vec<Value> {
        let key = id.to_string();
        if self.answered.remove(&key) {
            tracing::debug!(%id, "the acknowledgement of a prompt already ended was swallowed");
            return Vec::new();
        }
        let Some(sent) = self.sent.remove(&key) else {
            return vec![message];
        };
        let Some(result) = message.get_mut("result").map(Value::take) else {
            // An error answers the v1 request as it is; a refused prompt is no longer in flight.
            if let Sent::Prompt(session) = &sent {
                self.end_prompt(session);
            }
            return vec![message];
        };
        let result = match sent {
            Sent::Prompt(_) => return Vec::new(),
            Sent::Initialize => match result.get("protocolVersion").and_then(Value::as_u64) {
                Some(2) => {
                    self.phase = Phase::V2;
                    initialize_response(result)
                }
                Some(1) if self.fallback => {
                    self.phase = Phase::V1;
                    result
                }
                // Not a version we translate: our side reads it and says so.
                _ => result,
            },
            Sent::Configs(session) => self.configs(session, result),
            Sent::SetMode => json!({}),
        };
        message["result"] = result;
        vec![message]
    }

    /// An answer carrying `configOptions`: v1's options, and `modes` from a mode option.
    fn configs(&mut self, session: Option<String>, mut result: Value) -> Value {
        let Some(session) = session.or_else(|| result.get("sessionId").and_then(Value::as_str).map(str::to_string))
        else {
            return result;
        };
        if let Some(options) = result.get_mut("configOptions").map(Value::take) {
            let (options, modes) = self.config_options(&session, options);
            result["configOptions"] = options;
            if let Some(modes) = modes {
                result["modes"] = modes;
            }
        }
        result
    }

    /// v2 config options as v1's, and v1 `modes` when one of them is the session's mode.
    fn config_options(&mut self, session: &str, options: Value) -> (Value, Option<Value>) {
        let Value::Array(options) = options else {
            return (Value::Array(Vec::new()), None);
        };
        let mode = options
            .iter()
            .find(|o| o["category"] == "mode" && o["type"] == "select");
        let modes = mode.and_then(modes_of);
        self.sessions.entry(session.to_string()).or_default().mode_option =
            mode.and_then(|o| o["configId"].as_str()).map(str::to_string);
        (Value::Array(options.into_iter().map(config_option).collect()), modes)
    }

    /// The prompt in flight of `session` is over (answered or refused).
    fn end_prompt(&mut self, session: &str) -> Option<Value> {
        let state = self.sessions.get_mut(session)?;
        state.messages.clear();
        state.prompt.take()
    }

    /// A `session/update`: none, one or more v1 messages.
    fn update(&mut self, message: Value) -> Vec<Value> {
        let params = message["params"].clone();
        let Some(session) = params["sessionId"].as_str().map(str::to_string) else {
            return vec![message];
        };
        let update = params["update"].clone();
        let kind = update["sessionUpdate"].as_str().unwrap_or_default().to_string();
        let notify = |update: Value| {
            let mut params = params.clone();
            params["update"] = update;
            json!({ "jsonrpc": "2.0", "method": "session/update", "params": params })
        };
        match kind.as_str() {
            "user_message_chunk" | "agent_message_chunk" | "agent_thought_chunk" => {
                self.chunk(&session, &kind, update).into_iter().map(notify).collect()
            }
            "user_message" | "agent_message" | "agent_thought" => {
                self.message(&session, &kind, &update).into_iter().map(notify).collect()
            }
            "state_update" => self.state(&session, &update).into_iter().collect(),
            "tool_call_update" => vec![notify(self.tool_call(&session, &update))],
            "tool_call_content_chunk" => vec![notify(self.tool_call_chunk(&session, &update))],
            "plan_update" => plan(&update).map(notify).into_iter().collect(),
            "available_commands_update" => vec![notify(commands(update))],
            "config_option_update" => self.config_update(&session, update).into_iter().map(notify).collect(),
            "session_info_update" | "usage_update" => vec![message],
            other => {
                tracing::debug!(update = other, "a v2 update a v1 peer has no place for was dropped");
                Vec::new()
            }
        }
    }

    /// Whether `session` has a live prompt: its user message is the acknowledgement.
    fn in_prompt(&self, session: &str) -> bool {
        self.sessions.get(session).is_some_and(|s| s.prompt.is_some())
    }

    /// A message chunk: kept, and passed on (unless it acknowledges the user's prompt).
    fn chunk(&mut self, session: &str, kind: &str, update: Value) -> Option<Value> {
        if kind == "user_message_chunk" && self.in_prompt(session) {
            return None;
        }
        let id = update["messageId"].as_str().unwrap_or_default().to_string();
        let state = self.sessions.entry(session.to_string()).or_default();
        state.messages.entry(id).or_default().push(update["content"].clone());
        Some(update)
    }

    /// A whole-message upsert: the chunks a v1 peer has not been shown.
    fn message(&mut self, session: &str, kind: &str, update: &Value) -> Vec<Value> {
        if kind == "user_message" && self.in_prompt(session) {
            return Vec::new();
        }
        let Some(content) = update.get("content") else {
            return Vec::new(); // omitted: unchanged
        };
        let content = content.as_array().cloned().unwrap_or_default(); // null or []: cleared
        let id = update["messageId"].as_str().unwrap_or_default().to_string();
        let state = self.sessions.entry(session.to_string()).or_default();
        let shown = state.messages.insert(id.clone(), content.clone()).unwrap_or_default();
        let new = if content.starts_with(&shown) {
            &content[shown.len()..]
        } else {
            tracing::debug!(message = %id, "a v2 message was replaced; a v1 peer is shown the new content after the old");
            &content[..]
        };
        let chunk = format!("{kind}_chunk");
        new.iter()
            .map(|block| json!({ "sessionUpdate": chunk, "messageId": id, "content": block }))
            .collect()
    }

    /// A `state_update`: the answer to the v1 prompt when it ends foreground work.
    fn state(&mut self, session: &str, update: &Value) -> Option<Value> {
        let reason = update["stopReason"].as_str()?;
        if update["state"] != "idle" {
            return None;
        }
        let id = self.end_prompt(session)?;
        let key = id.to_string();
        self.sent.remove(&key);
        self.answered.insert(key);
        if V1_STOP_REASONS.contains(&reason) {
            Some(json!({ "jsonrpc": "2.0", "id": id, "result": { "stopReason": reason } }))
        } else {
            let why = format!("the agent ended the turn with the stop reason `{reason}`, which ACP v1 does not have");
            Some(error_answer(&id, INTERNAL_ERROR, &why))
        }
    }

    /// A `tool_call_update`: v1's `tool_call` for a call not seen before, else its update.
    fn tool_call(&mut self, session: &str, update: &Value) -> Value {
        let id = update["toolCallId"].as_str().unwrap_or_default().to_string();
        let mut fields = tool_call_fields(update);
        let state = self.sessions.entry(session.to_string()).or_default();
        let known = state.calls.contains_key(&id);
        let content = state.calls.entry(id.clone()).or_default();
        if let Some(Value::Array(items)) = fields.get("content") {
            content.clone_from(items);
        }
        if update["status"].as_str().is_some_and(|s| FINISHED.contains(&s)) {
            content.clear();
        }
        if known {
            fields.insert("sessionUpdate".into(), Value::from("tool_call_update"));
        } else {
            fields.insert("sessionUpdate".into(), Value::from("tool_call"));
            fields.entry("title").or_insert_with(|| Value::from(id));
        }
        Value::Object(fields)
    }

    /// A `tool_call_content_chunk`: the call's content so far, as v1 replaces it.
    fn tool_call_chunk(&mut self, session: &str, update: &Value) -> Value {
        let id = update["toolCallId"].as_str().unwrap_or_default().to_string();
        let state = self.sessions.entry(session.to_string()).or_default();
        let known = state.calls.contains_key(&id);
        let content = state.calls.entry(id.clone()).or_default();
        content.extend(tool_call_content(&update["content"]));
        let mut fields = json!({ "toolCallId": id, "content": content.clone() });
        if known {
            fields["sessionUpdate"] = Value::from("tool_call_update");
        } else {
            fields["sessionUpdate"] = Value::from("tool_call");
            fields["title"] = Value::from(id);
        }
        fields
    }

    /// A `config_option_update`: v1's, and `current_mode_update` when the mode option is in it.
    fn config_update(&mut self, session: &str, mut update: Value) -> Vec<Value> {
        let options = update.get_mut("configOptions").map(Value::take).unwrap_or(Value::Null);
        let (options, modes) = self.config_options(session, options);
        update["configOptions"] = options;
        let mut updates = vec![update];
        if let Some(current) = modes.and_then(|m| m.get("currentModeId").cloned()) {
            updates.push(json!({ "sessionUpdate": "current_mode_update", "currentModeId": current }));
        }
        updates
    }

    /// `session/request_permission`: v1's `toolCall` from the v2 subject; a call not yet
    /// announced is announced first (as v1's `tool_call`).
    fn permission(&mut self, id: Value, mut message: Value) -> Vec<Value> {
        let params = message["params"].take();
        let session = params["sessionId"].as_str().unwrap_or_default().to_string();
        let title = params["title"].clone();
        let subject = &params["subject"];
        let call = match subject["type"].as_str() {
            Some("tool_call") => subject["toolCall"].clone(),
            Some("command") => json!({
                "toolCallId": subject["toolCallId"].as_str().map_or_else(|| format!("permission-{id}"), str::to_string),
                "title": title,
                "kind": "execute",
                "rawInput": { "command": subject["command"], "cwd": subject["cwd"] },
            }),
            _ => json!({ "toolCallId": format!("permission-{id}"), "title": title }),
        };
        let mut out = Vec::new();
        let call_id = call["toolCallId"].as_str().unwrap_or_default();
        if !self
            .sessions
            .get(&session)
            .is_some_and(|s| s.calls.contains_key(call_id))
        {
            let mut announce = call.clone();
            if announce.get("title").is_none_or(Value::is_null) {
                announce["title"] = title.clone();
            }
            let update = self.tool_call(&session, &announce);
            let params = json!({ "sessionId": session, "update": update });
            out.push(json!({ "jsonrpc": "2.0", "method": "session/update", "params": params }));
        }
        let mut v1 = json!({
            "sessionId": session,
            "toolCall": Value::Object(tool_call_fields(&call)),
            "options": params["options"],
        });
        if let Some(meta) = params.get("_meta") {
            v1["_meta"] = meta.clone();
        }
        message["params"] = v1;
        out.push(message);
        out
    }
}

/// The client face as a connection's [`Dialect`]: installed on the seam of a client (or a
/// bridge's agent face) that asks an agent for v2, before `initialize` is sent.
pub struct ClientDialect {
    face: Mutex<ClientFace>,
    /// Answers to our own requests that v2 has no counterpart for, handed back to our side
    /// (see [`ClientDialect::new`]).
    loopback: mpsc::UnboundedSender<Vec<u8>>,
}

impl std::fmt::Debug for ClientDialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientDialect")
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl ClientDialect {
    /// A dialect that asks for v2 (`fallback`: v1 is spoken, untranslated, when the agent
    /// answers `1`), and where the answers to our requests that v2 has no counterpart for
    /// come out: the side's role reads them as if the agent had sent them.
    pub fn new(fallback: bool) -> (ClientDialect, mpsc::UnboundedReceiver<Vec<u8>>) {
        let (loopback, answers) = mpsc::unbounded_channel();
        let face = Mutex::new(ClientFace::new(fallback));
        (ClientDialect { face, loopback }, answers)
    }
}

/// Installs a client face on the seam of the connection written through `outbox` (before
/// `initialize` is sent; `fallback` as [`ClientDialect::new`]): the seam for the side's role,
/// and where the dialect's own answers come out.
pub fn install(outbox: &Outbox, fallback: bool) -> (Seam, mpsc::UnboundedReceiver<Vec<u8>>) {
    let (dialect, answers) = ClientDialect::new(fallback);
    let seam = Seam::new(outbox, None);
    seam.install(Arc::new(dialect));
    (seam, answers)
}

/// `message` as JSON-RPC text; `newline` ends it as the writer wants its lines.
fn line_of(message: &Value, newline: bool) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    if newline {
        line.push(b'\n');
    }
    line
}

impl Rewrite for ClientDialect {
    fn rewrite(&self, line: Vec<u8>, out: &mut Vec<Vec<u8>>) {
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            out.push(line);
            return;
        };
        match lock(&self.face).to_agent(message) {
            ToAgent::Send(message) => out.push(line_of(&message, true)),
            ToAgent::Answer(answer) => {
                if self.loopback.send(line_of(&answer, false)).is_err() {
                    tracing::debug!("an answer given for the agent was dropped: the connection is gone");
                }
            }
            ToAgent::Drop => {}
        }
    }
}

impl Dialect for ClientDialect {
    fn version(&self) -> u16 {
        if lock(&self.face).fell_back() { 1 } else { 2 }
    }

    fn incoming(&self, line: Vec<u8>, out: &mut Vec<Inbound>) {
        let messages = match serde_json::from_slice::<Value>(&line) {
            // A batch (v2 allows them): each entry on its own.
            Ok(Value::Array(batch)) => batch,
            Ok(message) => vec![message],
            Err(_) => {
                out.push(Inbound::Line(line));
                return;
            }
        };
        let mut face = lock(&self.face);
        for message in messages {
            out.extend(
                face.from_agent(message)
                    .iter()
                    .map(|m| Inbound::Line(line_of(m, false))),
            );
        }
    }
}

/// A JSON-RPC error answer to `id`.
fn error_answer(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// v1 `initialize` params in the v2 shape; with `v1_too`, the v1 fields stay beside them.
fn initialize_request(params: Value, v1_too: bool) -> Value {
    let info = match params.get("clientInfo") {
        Some(info) if info.get("name").is_some() && info.get("version").is_some() => info.clone(),
        _ => json!({ "name": "agentacp", "version": env!("CARGO_PKG_VERSION") }),
    };
    let mut capabilities = Map::new();
    let v1_capabilities = &params["clientCapabilities"];
    for kept in ["auth", "elicitation", "_meta"] {
        if let Some(value) = v1_capabilities.get(kept).filter(|v| !v.is_null()) {
            capabilities.insert(kept.into(), value.clone());
        }
    }
    let mut v2 = if v1_too { params.clone() } else { json!({}) };
    v2["protocolVersion"] = params.get("protocolVersion").cloned().unwrap_or(Value::from(2));
    v2["info"] = info;
    v2["capabilities"] = Value::Object(capabilities);
    if let Some(meta) = params.get("_meta") {
        v2["_meta"] = meta.clone();
    }
    v2
}

/// Presence of a v2 support marker (`{}` or an object: supported; absent or `null`: not).
fn marker(value: &Value) -> bool {
    value.is_object()
}

/// The v2 answer to `initialize` in the v1 shape.
fn initialize_response(result: Value) -> Value {
    let capabilities = &result["capabilities"];
    let session = &capabilities["session"];
    let prompt = &session["prompt"];
    let mcp = &session["mcp"];
    let auth_methods: Vec<Value> = result["authMethods"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(auth_method)
        .collect();
    let mut session_capabilities = Map::new();
    if marker(session) {
        for baseline in ["list", "resume", "close"] {
            session_capabilities.insert(baseline.into(), json!({}));
        }
        for extra in ["delete", "additionalDirectories"] {
            if marker(&session[extra]) {
                session_capabilities.insert(extra.into(), json!({}));
            }
        }
    }
    let mut agent = json!({
        "loadSession": marker(session),
        "promptCapabilities": {
            "image": marker(&prompt["image"]),
            "audio": marker(&prompt["audio"]),
            "embeddedContext": marker(&prompt["embeddedContext"]),
        },
        "mcpCapabilities": { "http": marker(&mcp["http"]), "sse": false },
        "sessionCapabilities": session_capabilities,
        "auth": if auth_methods.is_empty() { json!({}) } else { json!({ "logout": {} }) },
    });
    // MCP-over-ACP: alpha.3's unstable marker; its messages are v1's.
    if marker(&mcp["acp"]) {
        agent["mcpCapabilities"]["acp"] = json!(true);
    }
    if let Some(meta) = capabilities.get("_meta").filter(|m| m.is_object()) {
        agent["_meta"] = meta.clone();
    }
    let mut v1 = json!({
        "protocolVersion": result["protocolVersion"],
        "agentCapabilities": agent,
        "agentInfo": result["info"],
        "authMethods": auth_methods,
    });
    if let Some(meta) = result.get("_meta") {
        v1["_meta"] = meta.clone();
    }
    v1
}

/// A v2 auth method as v1's (`methodId` → `id`; `agent` has no `type` in v1); `None` for
/// a kind v1 does not have.
fn auth_method(method: &Value) -> Option<Value> {
    let mut v1 = method.as_object()?.clone();
    let id = v1.remove("methodId")?;
    v1.insert("id".into(), id);
    match method["type"].as_str() {
        Some("agent") => {
            v1.remove("type");
        }
        Some("terminal") => {}
        other => {
            tracing::debug!(kind = ?other, "an auth method a v1 peer does not have was left out");
            return None;
        }
    }
    Some(Value::Object(v1))
}

/// v1 MCP servers in the v2 shape: each with its `type` (`stdio` when it had none); `sse`
/// ones, removed in v2, are left out.
fn with_mcp_servers(mut params: Value) -> Value {
    let Some(Value::Array(servers)) = params.get_mut("mcpServers").map(Value::take) else {
        return params;
    };
    let servers: Vec<Value> = servers
        .into_iter()
        .filter_map(|mut server| {
            match server.get("type").and_then(Value::as_str) {
                None => server["type"] = Value::from("stdio"),
                Some("sse") => {
                    tracing::warn!(server = %server["name"], "an SSE MCP server was left out: ACP v2 has no SSE transport");
                    return None;
                }
                Some(_) => {}
            }
            Some(server)
        })
        .collect();
    params["mcpServers"] = Value::Array(servers);
    params
}

/// `session/set_config_option`'s params with the value's `type`, which v2 requires and v1
/// leaves out for a value id.
fn with_value_type(mut params: Value) -> Value {
    if params.get("type").is_none() && params.is_object() {
        params["type"] = Value::from("id");
    }
    params
}

/// A v2 config option as v1's (`configId` → `id`, a group's `groupId` → `group`).
fn config_option(mut option: Value) -> Value {
    if let Some(object) = option.as_object_mut()
        && let Some(id) = object.remove("configId")
    {
        object.insert("id".into(), id);
    }
    if let Some(Value::Array(options)) = option.get_mut("options") {
        for group in options.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(id) = group.remove("groupId") {
                group.insert("group".into(), id);
            }
        }
    }
    option
}

/// v1 `modes` from a select option of category `mode` (its flat or grouped values).
fn modes_of(option: &Value) -> Option<Value> {
    let values = option["options"].as_array()?;
    let flat = values.iter().flat_map(|value| match value.get("options") {
        Some(Value::Array(grouped)) => grouped.iter().collect::<Vec<_>>(),
        _ => vec![value],
    });
    let modes: Vec<Value> = flat
        .filter_map(|value| {
            let mut mode = json!({ "id": value.get("value")?, "name": value.get("name")? });
            if let Some(description) = value.get("description").filter(|d| d.is_string()) {
                mode["description"] = description.clone();
            }
            Some(mode)
        })
        .collect();
    Some(json!({ "currentModeId": option.get("currentValue")?, "availableModes": modes }))
}

/// A v2 tool call (an update's fields) as v1's fields: known ones only, open enums closed,
/// cleared lists empty, other cleared fields left out.
fn tool_call_fields(update: &Value) -> Map<String, Value> {
    let mut fields = Map::new();
    let Some(object) = update.as_object() else {
        return fields;
    };
    for (name, value) in object {
        let value = match (name.as_str(), value) {
            ("content", Value::Null) | ("locations", Value::Null) => json!([]),
            (_, Value::Null) => continue,
            ("toolCallId" | "title" | "locations" | "rawInput" | "rawOutput" | "_meta", value) => value.clone(),
            ("kind", Value::String(kind)) if V1_TOOL_KINDS.contains(&kind.as_str()) => value.clone(),
            ("kind", _) => Value::from("other"),
            ("status", Value::String(status)) => match status.as_str() {
                "pending" | "in_progress" | "completed" | "failed" => value.clone(),
                "cancelled" => Value::from("failed"),
                _ => continue,
            },
            ("content", Value::Array(items)) => Value::Array(items.iter().flat_map(tool_call_content).collect()),
            _ => continue,
        };
        fields.insert(name.clone(), value);
    }
    fields
}

/// A v2 tool call content item as v1's: content as it is; a diff as its patch text (or its
/// changes, one a line); a terminal reference as a line naming it; other kinds left out.
fn tool_call_content(item: &Value) -> Option<Value> {
    let text = |text: String| json!({ "type": "content", "content": { "type": "text", "text": text } });
    match item["type"].as_str()? {
        "content" => Some(item.clone()),
        "diff" => match item["patch"]["text"].as_str() {
            Some(patch) => Some(text(patch.to_string())),
            None => {
                let changes = item["changes"].as_array()?;
                let lines: Vec<String> = changes
                    .iter()
                    .map(|c| {
                        let path = c["path"].as_str().unwrap_or("?");
                        match c["oldPath"].as_str() {
                            Some(old) => format!("{} {old} -> {path}", c["operation"].as_str().unwrap_or("change")),
                            None => format!("{} {path}", c["operation"].as_str().unwrap_or("change")),
                        }
                    })
                    .collect();
                Some(text(lines.join("\n")))
            }
        },
        "terminal" => Some(text(format!(
            "[terminal {}]",
            item["terminalId"].as_str().unwrap_or("?")
        ))),
        other => {
            tracing::debug!(kind = other, "tool call content a v1 peer does not have was left out");
            None
        }
    }
}

/// `plan_update` as v1's `plan` (an `items` plan; other kinds have no v1 form).
fn plan(update: &Value) -> Option<Value> {
    let plan = &update["plan"];
    if plan["type"] != "items" {
        tracing::debug!("a plan that is not a list of items was dropped for a v1 peer");
        return None;
    }
    let entries: Vec<Value> = plan["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            let mut entry = entry.clone();
            let status = match entry["status"].as_str() {
                Some(status @ ("pending" | "in_progress" | "completed")) => status.to_string(),
                _ => "completed".to_string(),
            };
            let priority = match entry["priority"].as_str() {
                Some(priority @ ("high" | "medium" | "low")) => priority.to_string(),
                _ => "medium".to_string(),
            };
            entry["status"] = Value::from(status);
            entry["priority"] = Value::from(priority);
            entry
        })
        .collect();
    let mut v1 = json!({ "sessionUpdate": "plan", "entries": entries });
    if let Some(meta) = update.get("_meta") {
        v1["_meta"] = meta.clone();
    }
    Some(v1)
}

/// `available_commands_update` with v1's command inputs (a `text` input without its
/// `type`; other kinds left out).
fn commands(mut update: Value) -> Value {
    if let Some(Value::Array(commands)) = update.get_mut("availableCommands") {
        for command in commands.iter_mut().filter_map(Value::as_object_mut) {
            let text = command.get("input").is_some_and(|input| input["type"] == "text");
            match command.get_mut("input").and_then(Value::as_object_mut) {
                Some(input) if text => {
                    input.remove("type");
                }
                Some(_) => {
                    command.remove("input");
                }
                None => {}
            }
        }
    }
    update
}

#[cfg(test)]
mod tests;
