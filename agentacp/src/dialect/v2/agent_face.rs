//! The agent face of ACP v2: what a server (speaking v1 inside) receives from a v2 client,
//! and what it sends to one.
//!
//! From the client ([`Dialect::incoming`]):
//! - `initialize` as v1 reads it ([`shapes::initialize_params_to_v1`]: no `fs`, no
//!   `terminal`); `auth/login` / `auth/logout` → `authenticate` / `logout`;
//! - `session/resume` with `replayFrom: {"type": "start"}` → `session/load`, without it →
//!   `session/resume`; MCP server configs as v1's; `session/set_config_option` of the option
//!   that stands for v1 modes → `session/set_mode`;
//! - the v1 methods v2 removed (`session/load`, `session/set_mode`, `authenticate`,
//!   `logout`) are refused, as unknown methods;
//! - a batch (a JSON array) is taken entry by entry and answered as one array
//!   (`batch.rs`); an empty batch is answered `-32600`.
//!
//! To the client ([`Rewrite::rewrite`]):
//! - the answer to `initialize` in v2's shape ([`shapes::initialize_result_to_v2`]);
//! - `session/prompt` is acknowledged as soon as the runtime takes it (the internal
//!   [`PROMPT_ACCEPTED`](crate::connection::dialect::PROMPT_ACCEPTED) notice, which never reaches the wire) with the user's message and a
//!   `running` state; the runtime's answer at the end of the turn becomes an `idle`
//!   `state_update` with its stop reason (`error`, with the error in `_meta`, when the turn
//!   failed); a permission request of the turn's is preceded by `requires_action`, and its
//!   answer followed at once by `running` again (said by the face as it reads the answer);
//! - message chunks get a `messageId` (one per message: consecutive chunks of one kind in a
//!   turn); `tool_call` → the first `tool_call_update`; diffs in v2's shape; `plan` →
//!   `plan_update`; `current_mode_update` → `config_option_update` of the `mode` option;
//!   config options and command inputs renamed; setup answers lose `modes` (the `mode`
//!   option stands for them);
//! - a resumed session's current state (`idle`, or `running` while a turn runs) is sent
//!   before the answer to `session/resume`, after any replay;
//! - anything else (unknown update kinds included) goes as it is.
//!
//! Its state is per connection, behind one lock: the client's requests whose answers are
//! translated, our permission requests, each session's message and turn.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use super::{batch, shapes};
use crate::connection::dialect::{Dialect, Inbound};
use crate::jsonrpc::outbox::Rewrite;
use crate::jsonrpc::{Id, RpcError, Unreadable, codes};
use crate::sync::lock;

/// The agent face of one v2 connection.
pub struct AgentFace {
    state: Mutex<State>,
}

impl Default for AgentFace {
    fn default() -> Self {
        AgentFace::new()
    }
}

impl AgentFace {
    /// A connection's face, with its message ids made unique to it.
    pub fn new() -> AgentFace {
        let mut bytes = [0u8; 4];
        // A fixed prefix when the system has no randomness: ids stay unique per connection.
        let _ = getrandom::fill(&mut bytes);
        AgentFace {
            state: Mutex::new(State {
                prefix: format!("msg_{:08x}", u32::from_be_bytes(bytes)),
                ..State::default()
            }),
        }
    }
}

/// What the answer to one of the client's requests is translated as.
enum Asked {
    Initialize,
    /// A prompt: its session, its content (for the `user_message`), whether acknowledged.
    Prompt {
        session: String,
        prompt: Value,
        acked: bool,
    },
    /// `session/new`, `session/resume` (`session/load` when replaying): a setup answer.
    Setup {
        session: Option<String>,
        replay: bool,
    },
    SetConfig {
        session: String,
    },
    /// `session/set_config_option` of the mode option, carried out as `session/set_mode`.
    SetMode {
        session: String,
        mode: Value,
    },
}

#[derive(Default)]
struct State {
    prefix: String,
    next_message: u64,
    asked: HashMap<Id, Asked>,
    /// Our permission requests in flight, by id: the session each is for.
    permissions: HashMap<Id, String>,
    sessions: HashMap<String, SessionState>,
    /// The client's batches whose answers are not all sent yet.
    batches: batch::Batches,
}

#[derive(Default)]
struct SessionState {
    /// The message the last chunk belonged to: its kind and id.
    message: Option<(String, String)>,
    /// The request id of the prompt running, once acknowledged.
    turn: Option<Id>,
    /// The session's config options in v2, the `mode` option first when it has modes.
    options: Option<Vec<Value>>,
    /// Whether the `mode` option stands for v1 modes.
    has_modes: bool,
    /// How many messages the session's history holds so far, when this connection knows (it
    /// created the session, or replayed its history): its ids are then `msg_<n>`, the same
    /// on every connection that replays it. `None`: ids unique to this connection.
    messages: Option<u64>,
    /// While a replay from a message runs: that message's id, until it comes (what comes
    /// before it is left out).
    replay_from: Option<String>,
}

impl State {
    fn session(&mut self, id: &str) -> &mut SessionState {
        self.sessions.entry(id.to_string()).or_default()
    }

    /// A new message's id: its place in the session's history when that is known, else one
    /// unique to this connection.
    fn new_message_id(&mut self, session: &str) -> String {
        if let Some(count) = self.sessions.get_mut(session).and_then(|state| state.messages.as_mut()) {
            *count += 1;
            return format!("msg_{count}");
        }
        self.next_message += 1;
        format!("{}_{}", self.prefix, self.next_message)
    }
}

impl Dialect for AgentFace {
    fn version(&self) -> u16 {
        crate::wire::rev_272bf799_v2::PROTOCOL_VERSION
    }

    fn incoming(&self, line: Vec<u8>, out: &mut Vec<Inbound>) {
        let value: Value = match serde_json::from_slice(&line) {
            Ok(value) => value,
            // The runtime answers what it cannot read.
            Err(_) => return out.push(Inbound::Line(line)),
        };
        let mut state = lock(&self.state);
        match value {
            Value::Array(entries) if entries.is_empty() => {
                out.push(refused(
                    Id::Null,
                    codes::INVALID_REQUEST,
                    "an empty batch is not a request".into(),
                ));
            }
            Value::Array(entries) => {
                let batch = batch::read(entries, out, |entry, out| state.take_from_client(entry, out));
                out.extend(state.batches.opened(batch).map(Inbound::Say));
            }
            Value::Object(_) if !needs_translating(&value) => out.push(Inbound::Line(line)),
            value => state.take_from_client(value, out),
        }
    }
}

impl Rewrite for AgentFace {
    fn rewrite(&self, line: Vec<u8>, out: &mut Vec<Vec<u8>>) {
        let Err(line) = self.chunk_fast(line, out) else { return };
        let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(&line) else {
            return out.push(line);
        };
        let from = out.len();
        let mut state = lock(&self.state);
        state.send_to_client(message, line, &mut Lines(out));
        // The answers to a batch's entries go out together.
        state.batches.collect(out, from);
    }
}

impl AgentFace {
    /// The most frequent line: a chunk the runtime streams that continues the message the
    /// session's last chunk began. Its `messageId` is spliced into its bytes, the rest of them
    /// kept as they are (no JSON tree, no second serialisation); `Err` gives any other line
    /// back for the full translation, which also starts each new message. The line is the
    /// runtime's own JSON, so the output is JSON too: one member more, first in an object that
    /// has members already.
    fn chunk_fast(&self, line: Vec<u8>, out: &mut Vec<Vec<u8>>) -> Result<(), Vec<u8>> {
        let Some(chunk) = RuntimeChunk::read(&line) else {
            return Err(line);
        };
        let mut rewritten = Vec::with_capacity(line.len() + MESSAGE_ID_ROOM);
        rewritten.extend_from_slice(&line[..chunk.members]);
        rewritten.extend_from_slice(br#""messageId":"#);
        let written = match lock(&self.state).current_message(chunk.session, chunk.kind) {
            Some(id) => serde_json::to_writer(&mut rewritten, id).is_ok(),
            None => false,
        };
        if !written {
            return Err(line);
        }
        rewritten.push(b',');
        rewritten.extend_from_slice(&line[chunk.members..]);
        out.push(rewritten);
        Ok(())
    }
}

/// A message chunk as the runtime writes it (`Connection::send_update_unrecorded`, the
/// update's `sessionUpdate` first), read without parsing it: where its `messageId` goes.
struct RuntimeChunk<'a> {
    session: &'a str,
    kind: &'a str,
    /// Where the update object's members begin (just after its `{`).
    members: usize,
}

impl<'a> RuntimeChunk<'a> {
    /// `None` for any other line: another method or update kind, another layout, a session id
    /// or kind with escapes, or an update that has a `messageId` (or names one anywhere).
    fn read(line: &'a [u8]) -> Option<RuntimeChunk<'a>> {
        let rest = std::str::from_utf8(line.strip_prefix(UPDATE_PREFIX)?).ok()?;
        let (session, rest) = plain_string(rest)?;
        let rest = rest.strip_prefix(r#","update":{"#)?;
        let members = line.len() - rest.len();
        let (kind, rest) = plain_string(rest.strip_prefix(r#""sessionUpdate":"#)?)?;
        let chunk = CHUNKS.contains(&kind) && (rest.starts_with(',') || rest.starts_with('}'));
        (chunk && !rest.contains(r#""messageId""#)).then_some(RuntimeChunk { session, kind, members })
    }
}

/// The JSON string `text` starts with, when it has no escapes: its value, and what follows.
fn plain_string(text: &str) -> Option<(&str, &str)> {
    let (value, rest) = text.strip_prefix('"')?.split_once('"')?;
    (!value.contains('\\')).then_some((value, rest))
}

/// Room for `"messageId":"msg_…_N",` beside a chunk line's own bytes.
const MESSAGE_ID_ROOM: usize = 48;

/// How the runtime writes a `session/update` (`Connection::send_update_unrecorded`).
const UPDATE_PREFIX: &[u8] = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"#;

/// The update kinds that are chunks of a message.
const CHUNKS: &[&str] = &["user_message_chunk", "agent_message_chunk", "agent_thought_chunk"];

/// The client's methods that differ between v1 and v2 (the others pass as they are read).
const TRANSLATED: &[&str] = &[
    "initialize",
    "auth/login",
    "auth/logout",
    "session/new",
    "session/resume",
    "session/prompt",
    "session/set_config_option",
    "session/load",
    "session/set_mode",
    "authenticate",
    "logout",
];

/// Whether a message of the client's differs between v1 and v2 (else it is passed as read):
/// a request of a [`TRANSLATED`] method, or an answer to one of our requests.
fn needs_translating(message: &Value) -> bool {
    match message.get("method").and_then(Value::as_str) {
        Some(method) => TRANSLATED.contains(&method),
        None => true,
    }
}

/// A message refused before the runtime sees it.
fn refused(id: Id, code: i32, message: String) -> Inbound {
    Inbound::Refused(Box::new(Unreadable {
        id,
        error: RpcError::new(code, message),
    }))
}

/// The lines a rewrite produces.
struct Lines<'a>(&'a mut Vec<Vec<u8>>);

impl Lines<'_> {
    fn push(&mut self, value: &Value) {
        let mut line = serde_json::to_vec(value).unwrap_or_default();
        line.push(b'\n');
        self.0.push(line);
    }

    fn update(&mut self, session: &str, update: Value) {
        self.push(&json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": update}}));
    }

    fn state(&mut self, session: &str, state: &str) {
        self.update(session, json!({"sessionUpdate": "state_update", "state": state}));
    }
}

impl State {
    /// One message of the client's (an object), as the runtime reads it.
    fn take_from_client(&mut self, mut message: Value, out: &mut Vec<Inbound>) {
        let id = message
            .get("id")
            .cloned()
            .and_then(|id| serde_json::from_value::<Id>(id).ok());
        let Some(method) = message.get("method").and_then(Value::as_str).map(str::to_string) else {
            // An answer to one of our requests: a permission answer lets the turn run again.
            if let Some(session) = id.as_ref().and_then(|id| self.permissions.remove(id)) {
                self.permission_answered(&session, out);
            }
            return out.push(line_of(&message));
        };
        let Some(id) = id else {
            return out.push(line_of(&message));
        };
        let params = message.get_mut("params").map(Value::take).unwrap_or(Value::Null);
        match self.request_to_v1(&id, &method, params) {
            Ok((renamed, params)) => {
                if let Some(renamed) = renamed {
                    message["method"] = json!(renamed);
                }
                message["params"] = params;
                out.push(line_of(&message));
            }
            Err(error) => out.push(Inbound::Refused(Box::new(Unreadable { id, error }))),
        }
    }

    /// A request of the client's as the runtime's: its method (`None`: the same) and params;
    /// what its answer is translated as is noted.
    fn request_to_v1(
        &mut self,
        id: &Id,
        method: &str,
        mut params: Value,
    ) -> Result<(Option<&'static str>, Value), RpcError> {
        let session = params["sessionId"].as_str().map(str::to_string);
        let (v1_method, asked) = match method {
            "initialize" => {
                params = shapes::initialize_params_to_v1(&params);
                ("initialize", Some(Asked::Initialize))
            }
            "auth/login" => ("authenticate", None),
            "auth/logout" => ("logout", None),
            "session/new" => {
                mcp_servers_to_v1(&mut params);
                (
                    "session/new",
                    Some(Asked::Setup {
                        session: None,
                        replay: false,
                    }),
                )
            }
            "session/resume" => {
                mcp_servers_to_v1(&mut params);
                let replay = match params.as_object_mut().and_then(|params| params.remove("replayFrom")) {
                    None | Some(Value::Null) => false,
                    Some(from) => {
                        let cursor = replay_cursor(&from)?;
                        self.replaying(session.as_deref().unwrap_or_default(), cursor);
                        true
                    }
                };
                let method = if replay { "session/load" } else { "session/resume" };
                (
                    method,
                    Some(Asked::Setup {
                        session: session.clone(),
                        replay,
                    }),
                )
            }
            "session/prompt" => {
                let session = session.clone().unwrap_or_default();
                let prompt = params.get("prompt").cloned().unwrap_or(Value::Null);
                (
                    "session/prompt",
                    Some(Asked::Prompt {
                        session,
                        prompt,
                        acked: false,
                    }),
                )
            }
            "session/set_config_option" => {
                let session = session.clone().unwrap_or_default();
                let mode = params["configId"] == shapes::MODE_OPTION
                    && self.sessions.get(&session).is_some_and(|state| state.has_modes);
                if mode {
                    let value = params["value"].clone();
                    params = json!({"sessionId": session, "modeId": value});
                    ("session/set_mode", Some(Asked::SetMode { session, mode: value }))
                } else {
                    ("session/set_config_option", Some(Asked::SetConfig { session }))
                }
            }
            "session/load" | "session/set_mode" | "authenticate" | "logout" => {
                let instead = match method {
                    "session/load" => "`session/resume` with `replayFrom`",
                    "session/set_mode" => "`session/set_config_option` of the `mode` option",
                    "authenticate" => "`auth/login`",
                    _ => "`auth/logout`",
                };
                return Err(RpcError::new(
                    codes::METHOD_NOT_FOUND,
                    format!("method not found: `{method}` is not part of ACP v2 (use {instead})"),
                ));
            }
            // Everything else is the same in both versions (or the runtime refuses it).
            _ => return Ok((None, params)),
        };
        if let Some(asked) = asked {
            self.asked.insert(id.clone(), asked);
        }
        Ok((Some(v1_method), params))
    }

    /// One line of the runtime's, as the client gets it (`line` is its text, `message` its
    /// value).
    fn send_to_client(&mut self, message: Map<String, Value>, line: Vec<u8>, out: &mut Lines<'_>) {
        let method = message.get("method").and_then(Value::as_str);
        let id = message
            .get("id")
            .cloned()
            .and_then(|id| serde_json::from_value::<Id>(id).ok());
        match (method, id) {
            (Some(crate::connection::dialect::PROMPT_ACCEPTED), _) => self.prompt_accepted(&message, out),
            (Some(crate::connection::dialect::SESSION_HISTORY), _) => self.history_known(&message["params"]),
            (Some("session/update"), None) => self.update_to_v2(message, out),
            (Some("session/request_permission"), Some(id)) => {
                let params = shapes::permission_params_to_v2(&message["params"]);
                let session = params["sessionId"].as_str().unwrap_or_default().to_string();
                self.session(&session).message = None;
                if self.session(&session).turn.is_some() {
                    out.state(&session, "requires_action");
                }
                self.permissions.insert(id.clone(), session);
                out.push(
                    &json!({"jsonrpc": "2.0", "id": id, "method": "session/request_permission", "params": params}),
                );
            }
            (None, Some(id)) => match self.asked.remove(&id) {
                Some(asked) => self.answer_to_v2(id, asked, message, out),
                None => out.0.push(line),
            },
            _ => out.0.push(line),
        }
    }

    /// The runtime took prompt `requestId`: the acknowledgement (with the user message's id),
    /// the user's message, and `running`.
    fn prompt_accepted(&mut self, notice: &Map<String, Value>, out: &mut Lines<'_>) {
        let Some(id) = notice
            .get("params")
            .and_then(|params| params.get("requestId"))
            .and_then(|id| serde_json::from_value::<Id>(id.clone()).ok())
        else {
            return;
        };
        let Some(Asked::Prompt { session, prompt, acked }) = self.asked.get_mut(&id) else {
            return;
        };
        *acked = true;
        let (session, prompt) = (session.clone(), prompt.take());
        let message_id = self.new_message_id(&session);
        out.push(&json!({"jsonrpc": "2.0", "id": id, "result": {"messageId": message_id}}));
        out.update(
            &session,
            json!({"sessionUpdate": "user_message", "messageId": message_id, "content": prompt}),
        );
        out.state(&session, "running");
        let state = self.session(&session);
        state.turn = Some(id);
        state.message = None;
    }

    /// The `messageId` of a chunk of `kind` without one: the current message's when the last
    /// chunk of the session was of the same kind, else a new message's.
    fn chunk_id(&mut self, session: &str, kind: &str) -> String {
        if let Some((current, id)) = &self.session(session).message
            && current == kind
        {
            return id.clone();
        }
        let id = self.new_message_id(session);
        self.session(session).message = Some((kind.to_string(), id.clone()));
        id
    }

    /// The id of `session`'s current message when it is of `kind` (a chunk of `kind` comes
    /// next), without creating the session's state.
    fn current_message(&self, session: &str, kind: &str) -> Option<&str> {
        let state = self.sessions.get(session)?;
        match &state.message {
            // A replay still looking for its first message: each chunk goes the full way.
            Some((current, id)) if current == kind && state.replay_from.is_none() => Some(id),
            _ => None,
        }
    }

    /// The message a chunk of `kind` belongs to: the id it was `given`, else its session's
    /// current message's or a new one's ([`chunk_id`](State::chunk_id)).
    fn chunk_message(&mut self, session: &str, kind: &str, given: Option<&str>) -> String {
        match given {
            Some(id) => id.to_string(),
            None => self.chunk_id(session, kind),
        }
    }

    /// The stored history of a session resumed without a replay (the runtime's internal
    /// notice, `params`): its messages numbered as a replay numbers them, nothing sent.
    fn history_known(&mut self, params: &Value) {
        let Some(session) = params["sessionId"].as_str() else {
            return;
        };
        self.replaying(session, None);
        for update in params["updates"].as_array().into_iter().flatten() {
            match update["sessionUpdate"].as_str() {
                Some(kind) if CHUNKS.contains(&kind) => {
                    self.chunk_message(session, kind, update["messageId"].as_str());
                }
                _ => self.session(session).message = None,
            }
        }
        self.session(session).message = None;
    }

    /// Whether a chunk of message `id` is left out of a replay from a later message: `false`
    /// from that message on.
    fn skipped(&mut self, session: &str, id: &str) -> bool {
        let state = self.session(session);
        match &state.replay_from {
            Some(cursor) if cursor == id => {
                state.replay_from = None;
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// `session`'s history is about to be replayed, from `cursor`'s message (`None`: from the
    /// start): its messages are numbered from the first.
    fn replaying(&mut self, session: &str, cursor: Option<String>) {
        let state = self.session(session);
        state.messages = Some(0);
        state.message = None;
        state.replay_from = cursor;
    }

    /// A permission request of `session`'s was answered: its turn is `running` again, said
    /// at once (before the runtime takes the answer), unless it waits on another answer.
    fn permission_answered(&mut self, session: &str, out: &mut Vec<Inbound>) {
        let waiting = self.permissions.values().any(|other| other == session);
        if waiting || self.sessions.get(session).is_none_or(|state| state.turn.is_none()) {
            return;
        }
        let mut line = Vec::with_capacity(1);
        Lines(&mut line).state(session, "running");
        out.extend(line.into_iter().map(Inbound::Say));
    }

    /// One `session/update` in v2 (none, or several lines).
    fn update_to_v2(&mut self, mut message: Map<String, Value>, out: &mut Lines<'_>) {
        let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
            return out.push(&Value::Object(message));
        };
        let session = params
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let Some(update) = params.get_mut("update").and_then(Value::as_object_mut) else {
            return out.push(&Value::Object(message));
        };
        let kind = update
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let state = self.sessions.entry(session.clone()).or_default();
        match kind.as_str() {
            kind if CHUNKS.contains(&kind) => {
                let given = update.get("messageId").and_then(Value::as_str);
                let id = self.chunk_message(&session, kind, given);
                if self.skipped(&session, &id) {
                    return;
                }
                update.insert("messageId".into(), json!(id));
            }
            other => {
                state.message = None;
                match other {
                    "tool_call" | "tool_call_update" => {
                        update.insert("sessionUpdate".into(), json!("tool_call_update"));
                        shapes::tool_call_to_v2(update);
                    }
                    "plan" => {
                        let plan = shapes::plan_to_v2(update);
                        *update = Map::new();
                        update.insert("sessionUpdate".into(), json!("plan_update"));
                        update.insert("plan".into(), plan);
                    }
                    "available_commands_update" => shapes::commands_to_v2(update),
                    "config_option_update" => {
                        let mut options = update.remove("configOptions").unwrap_or(Value::Null);
                        shapes::config_options_to_v2(&mut options);
                        let options = state.merge_options(options);
                        update.insert("configOptions".into(), options);
                    }
                    "current_mode_update" => {
                        let mode = update.get("currentModeId").cloned().unwrap_or(Value::Null);
                        match state.set_mode(mode) {
                            Some(options) => {
                                *update = Map::new();
                                update.insert("sessionUpdate".into(), json!("config_option_update"));
                                update.insert("configOptions".into(), options);
                            }
                            None => return tracing::debug!("a mode update of a session without modes was dropped"),
                        }
                    }
                    _ => {}
                }
                if state.replay_from.is_some() {
                    return;
                }
            }
        }
        out.push(&Value::Object(message));
    }

    /// The runtime's answer to a request of the client's whose answer is translated.
    fn answer_to_v2(&mut self, id: Id, asked: Asked, mut message: Map<String, Value>, out: &mut Lines<'_>) {
        let Some(result) = message.get_mut("result") else {
            return self.error_to_v2(id, asked, message, out);
        };
        match asked {
            Asked::Initialize => {
                *result = shapes::initialize_result_to_v2(result, crate::wire::rev_272bf799_v2::PROTOCOL_VERSION)
            }
            Asked::Prompt { session, prompt, acked } => {
                if !acked {
                    // The runtime always sends the notice first; a prompt answered without it
                    // is acknowledged here.
                    self.asked.insert(
                        id.clone(),
                        Asked::Prompt {
                            session: session.clone(),
                            prompt,
                            acked,
                        },
                    );
                    let notice = json!({"params": {"requestId": id}});
                    self.prompt_accepted(notice.as_object().unwrap_or(&Map::new()), out);
                }
                let mut idle = json!({"sessionUpdate": "state_update", "state": "idle",
                    "stopReason": result.get("stopReason").cloned().unwrap_or(json!("end_turn"))});
                if let Some(meta) = result.get("_meta").filter(|meta| meta.is_object()) {
                    idle["_meta"] = meta.clone();
                }
                self.end_turn(&session);
                return out.update(&session, idle);
            }
            Asked::Setup {
                session: Some(session), ..
            } => {
                if let Some(cursor) = self.session(&session).replay_from.take() {
                    return out.push(&no_such_message(&id, &session, &cursor));
                }
                // A resumed session's state comes before the answer (after any replay).
                self.setup_answer(Some(&session), result);
                let running = self.sessions.get(&session).is_some_and(|state| state.turn.is_some());
                out.state(&session, if running { "running" } else { "idle" });
            }
            Asked::Setup { session: None, .. } => {
                let session = result["sessionId"].as_str().map(str::to_string);
                self.setup_answer(session.as_deref(), result);
                // A new session: its history is all on this connection.
                if let Some(session) = session {
                    self.session(&session).messages = Some(0);
                }
            }
            Asked::SetConfig { session } => {
                if let Some(options) = result.get_mut("configOptions") {
                    shapes::config_options_to_v2(options);
                    let merged = self.session(&session).merge_options(options.take());
                    *options = merged;
                }
            }
            Asked::SetMode { session, mode } => {
                let options = self.session(&session).set_mode(mode).unwrap_or_else(|| json!([]));
                *result = json!({"configOptions": options});
            }
        }
        out.push(&Value::Object(message));
    }

    /// An error answering a request whose answer is translated: a prompt that was
    /// acknowledged ends `idle` with stop reason `error`; the others go as they are.
    fn error_to_v2(&mut self, id: Id, asked: Asked, mut message: Map<String, Value>, out: &mut Lines<'_>) {
        if let Asked::Setup {
            session: Some(session),
            replay: true,
        } = &asked
        {
            // Not replayed: the session's place in its history is not known here.
            let state = self.session(session);
            (state.messages, state.replay_from) = (None, None);
        }
        match asked {
            Asked::Prompt {
                session, acked: true, ..
            } => {
                let error = message.remove("error").unwrap_or(Value::Null);
                self.end_turn(&session);
                out.update(
                    &session,
                    json!({"sessionUpdate": "state_update", "state": "idle", "stopReason": "error",
                        "_meta": {"agentacp": {"error": error}}}),
                );
            }
            Asked::Setup { replay: true, .. } if message["error"]["code"] == codes::METHOD_NOT_FOUND => {
                message["error"]["message"] = json!(
                    "this agent does not replay a session's history (its manifest does not offer `loadSession`): resume without `replayFrom`"
                );
                out.push(&json!(message));
            }
            _ => {
                drop(id);
                out.push(&Value::Object(message));
            }
        }
    }

    /// The turn of `session` ended.
    fn end_turn(&mut self, session: &str) {
        let state = self.session(session);
        state.turn = None;
        state.message = None;
    }

    /// A setup answer (`session/new`, `resume`, a load's) in v2: `modes` become the `mode`
    /// option, config options renamed; the session's options are kept for later updates.
    fn setup_answer(&mut self, session: Option<&str>, result: &mut Value) {
        let Some(object) = result.as_object_mut() else { return };
        let modes = object.remove("modes");
        let mut options = object.remove("configOptions").unwrap_or(Value::Null);
        shapes::config_options_to_v2(&mut options);
        let mut all: Vec<Value> = modes.as_ref().and_then(shapes::mode_option).into_iter().collect();
        let has_modes = !all.is_empty();
        all.extend(options.as_array().cloned().unwrap_or_default());
        if !all.is_empty() {
            object.insert("configOptions".into(), Value::Array(all.clone()));
        }
        if let Some(session) = session {
            let state = self.session(session);
            state.has_modes = has_modes;
            state.options = Some(all);
        }
    }
}

impl SessionState {
    /// The full list of options after the runtime's `options` (v2 shape), with the `mode`
    /// option kept first when the session has modes.
    fn merge_options(&mut self, options: Value) -> Value {
        let mut all: Vec<Value> = match (&self.options, self.has_modes) {
            (Some(known), true) => known.first().cloned().into_iter().collect(),
            _ => Vec::new(),
        };
        all.extend(options.as_array().cloned().unwrap_or_default());
        self.options = Some(all.clone());
        Value::Array(all)
    }

    /// The options after the mode changed to `mode`; `None` for a session without modes.
    fn set_mode(&mut self, mode: Value) -> Option<Value> {
        if !self.has_modes {
            return None;
        }
        let options = self.options.as_mut()?;
        options.first_mut()?["currentValue"] = mode;
        Some(Value::Array(options.clone()))
    }
}

/// The MCP server configs of a session request as v1's (v2 may leave them out).
fn mcp_servers_to_v1(params: &mut Value) {
    let Some(params) = params.as_object_mut() else { return };
    let servers = params.entry("mcpServers").or_insert_with(|| json!([]));
    if servers.is_null() {
        *servers = json!([]);
    }
    for server in servers.as_array_mut().into_iter().flatten() {
        shapes::mcp_server_to_v1(server);
    }
}

/// The `replayFrom` type of a replay from a message (inclusive): `{"type": "_agentacp_message",
/// "messageId": …}`, an implementation's own cursor as alpha.3 allows (`_`-prefixed).
const REPLAY_FROM_MESSAGE: &str = "_agentacp_message";

/// Where a replay begins: `None` from the start, else the id of the message it begins with;
/// any other cursor is refused.
fn replay_cursor(from: &Value) -> Result<Option<String>, RpcError> {
    match (from["type"].as_str(), from["messageId"].as_str()) {
        (Some("start"), _) => Ok(None),
        (Some(REPLAY_FROM_MESSAGE), Some(id)) => Ok(Some(id.to_string())),
        (Some(REPLAY_FROM_MESSAGE), None) => Err(RpcError::new(
            codes::INVALID_PARAMS,
            format!("a `replayFrom` of type `{REPLAY_FROM_MESSAGE}` needs the `messageId` to replay from"),
        )),
        _ => Err(RpcError::new(
            codes::INVALID_PARAMS,
            format!(
                "`replayFrom` of type {} is not one this agent knows: it replays from `start`, or from a message (type `{REPLAY_FROM_MESSAGE}` with its `messageId`)",
                from["type"]
            ),
        )),
    }
}

/// The answer to a replay from a message the session's history does not have.
fn no_such_message(id: &Id, session: &str, cursor: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INVALID_PARAMS, "message": format!(
        "message `{cursor}` is not in the history of session `{session}`: nothing was replayed (the session is open on this connection all the same)"
    )}})
}

/// A message for the runtime: a line without its newline, as frames are read.
fn line_of(message: &Value) -> Inbound {
    Inbound::Line(serde_json::to_vec(message).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(face: &AgentFace, line: &str) -> Vec<Value> {
        let mut out = Vec::new();
        face.rewrite(line.as_bytes().to_vec(), &mut out);
        out.iter().map(|line| serde_json::from_slice(line).unwrap()).collect()
    }

    /// The streamed chunk's fast path gives what the full translation gives: one id per
    /// message, a new one when the kind changes or another update comes between.
    #[test]
    fn the_fast_path_for_chunks_agrees_with_the_full_translation() {
        let (fast, full) = (AgentFace::new(), AgentFace::new());
        // Both faces number alike.
        lock(&full.state).prefix = lock(&fast.state).prefix.clone();
        let updates = [
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}"#,
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"b"}}"#,
            r#"{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"c"}}"#,
            r#"{"sessionUpdate":"usage_update","used":1,"size":2}"#,
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"d"}}"#,
            r#"{"sessionUpdate":"agent_message_chunk","messageId":"mine","content":{"type":"text","text":"e"}}"#,
        ];
        let mut ids = Vec::new();
        for update in updates {
            let runtime = format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{update}}}}}"#
            );
            let reordered = format!(
                r#"{{"method":"session/update","params":{{"update":{update},"sessionId":"s"}},"jsonrpc":"2.0"}}"#
            );
            let (one, other) = (rewritten(&fast, &runtime), rewritten(&full, &reordered));
            assert_eq!(one, other, "{update}");
            ids.push(one[0]["params"]["update"]["messageId"].clone());
        }
        assert_eq!(ids[0], ids[1]);
        assert_ne!(ids[1], ids[2]);
        assert!(ids[3].is_null());
        assert_ne!(ids[4], ids[0]);
        assert_eq!(ids[5], "mine");
    }

    /// A line as the runtime writes it: `update` of the session whose id is the JSON string
    /// `session`.
    fn runtime_line(session: &str, update: &str) -> Vec<u8> {
        format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":{session},"update":{update}}}}}"#)
            .into_bytes()
            .into_iter()
            .chain(*b"\n")
            .collect()
    }

    /// A text chunk of `kind`.
    fn chunk(kind: &str, text: &str) -> String {
        format!(r#"{{"sessionUpdate":"{kind}","content":{{"type":"text","text":"{text}"}}}}"#)
    }

    /// What the fast path makes of `line`: `None` when it gives the line back.
    fn fast(face: &AgentFace, line: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        face.chunk_fast(line.to_vec(), &mut out).ok()?;
        assert_eq!(out.len(), 1, "one chunk, one line");
        out.pop()
    }

    /// The `messageId` of the only line of `out`.
    fn message_id(out: &[Value]) -> &str {
        assert_eq!(out.len(), 1, "{out:?}");
        out[0]["params"]["update"]["messageId"].as_str().unwrap_or_default()
    }

    /// A chunk continuing a message gets the message's id spliced in first, its own bytes
    /// kept as they are, whatever its strings hold: the line stays JSON and says what the
    /// full translation says.
    #[test]
    fn a_continued_chunk_gets_its_message_id_spliced_into_its_bytes() {
        let face = AgentFace::new();
        let start = runtime_line(r#""s""#, &chunk("agent_message_chunk", "start"));
        assert!(fast(&face, &start).is_none(), "a new message goes the full way");
        let id = message_id(&rewritten(&face, std::str::from_utf8(&start).unwrap())).to_string();
        let texts = [
            "plain",
            r#"a quote \" a backslash \\ and both \\\" end\\"#,
            r#"\"messageId\":\"forged\", \"update\":{"#,
            r#"line\nbreak \t \u00e9 é 😀 \u2028 \ud83d\ude00"#,
            r#"}}{\"sessionUpdate\":\"tool_call\"}"#,
        ];
        let tails = ["", r#","_meta":{"trace":"t","nested":{"k":[1,{"a":"}"}]}}"#];
        for text in texts {
            for tail in tails {
                let update = format!(
                    r#"{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}{tail}}}"#
                );
                let line = runtime_line(r#""s""#, &update);
                let spliced = fast(&face, &line).unwrap_or_else(|| panic!("not spliced: {update}"));
                let (head, members) = line.split_at(UPDATE_PREFIX.len() + r#""s","update":{"#.len());
                let expected = [head, format!(r#""messageId":"{id}","#).as_bytes(), members].concat();
                assert_eq!(String::from_utf8_lossy(&spliced), String::from_utf8_lossy(&expected));
                let mut original: Value = serde_json::from_slice(&line).unwrap();
                original["params"]["update"]["messageId"] = json!(id);
                let read: Value = serde_json::from_slice(&spliced).expect("the spliced line is JSON");
                assert_eq!(read, original, "{update}");
            }
        }
    }

    /// What the splice does not take goes the full way, and comes out as it says: an id
    /// already there is kept, a `_meta` naming `messageId` is not mistaken for one, escaped
    /// session ids and other layouts are read as JSON, other kinds end the message.
    #[test]
    fn lines_the_splice_does_not_take_get_the_full_translation() {
        let face = AgentFace::new();
        let message = chunk("agent_message_chunk", "x");
        let start = rewritten(&face, std::str::from_utf8(&runtime_line(r#""s""#, &message)).unwrap());
        let id = message_id(&start).to_string();
        let full = |line: &[u8]| {
            assert!(fast(&face, line).is_none(), "{}", String::from_utf8_lossy(line));
            rewritten(&face, std::str::from_utf8(line).unwrap())
        };

        let own = r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"},"messageId":"mine"}"#;
        assert_eq!(message_id(&full(&runtime_line(r#""s""#, own))), "mine");
        let meta =
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"},"_meta":{"messageId":"m"}}"#;
        let out = full(&runtime_line(r#""s""#, meta));
        assert_eq!(message_id(&out), id);
        assert_eq!(out[0]["params"]["update"]["_meta"], json!({"messageId": "m"}));
        let reordered = r#"{"content":{"type":"text","text":"x"},"sessionUpdate":"agent_message_chunk"}"#;
        assert_eq!(message_id(&full(&runtime_line(r#""s""#, reordered))), id);
        let spaced = runtime_line(r#""s""#, &message)
            .iter()
            .flat_map(|&b| if b == b':' { b" : ".to_vec() } else { vec![b] })
            .collect::<Vec<u8>>();
        assert_eq!(message_id(&full(&spaced)), id);
        assert_eq!(
            message_id(&full(&runtime_line(r#""\u0073""#, &message))),
            id,
            "`s` escaped"
        );

        // Another session's chunk (no message yet), another kind, another update.
        let other = message_id(&full(&runtime_line(r#""t""#, &message))).to_string();
        let thought = message_id(&full(&runtime_line(r#""s""#, &chunk("agent_thought_chunk", "y")))).to_string();
        assert!(other != id && thought != id && thought != other);
        let usage = full(&runtime_line(
            r#""s""#,
            r#"{"sessionUpdate":"usage_update","used":1,"size":2}"#,
        ));
        assert_eq!(usage[0]["params"]["update"].get("messageId"), None);
        let tool = r#"{"sessionUpdate":"tool_call","toolCallId":"c","title":"t"}"#;
        assert_eq!(
            full(&runtime_line(r#""s""#, tool))[0]["params"]["update"]["sessionUpdate"],
            "tool_call_update"
        );
        let next = message_id(&full(&runtime_line(r#""s""#, &message))).to_string();
        assert!(next != id && next != thought, "a new message after other updates");
        assert!(
            fast(&face, &runtime_line(r#""s""#, &message)).is_some(),
            "and it goes on fast"
        );
    }

    /// Two sessions streaming at once on one connection (their turns' lines interleaved):
    /// each keeps its own message's id, and no id is used by both.
    #[test]
    fn interleaved_sessions_keep_their_own_message_ids() {
        let face = AgentFace::new();
        let mut ids: HashMap<&str, Vec<String>> = HashMap::new();
        for round in 0..6 {
            for session in ["a", "b"] {
                let kind = if session == "a" && round >= 3 {
                    "agent_thought_chunk"
                } else {
                    "agent_message_chunk"
                };
                let line = runtime_line(&format!(r#""{session}""#), &chunk(kind, "x"));
                let continued = fast(&face, &line).is_some();
                assert_eq!(
                    continued,
                    round != 0 && !(session == "a" && round == 3),
                    "{session} {round}"
                );
                let out = rewritten(&face, std::str::from_utf8(&line).unwrap());
                ids.entry(session).or_default().push(message_id(&out).to_string());
            }
        }
        let (a, b) = (&ids["a"], &ids["b"]);
        assert!(a[..3].iter().all(|id| *id == a[0]) && a[3..].iter().all(|id| *id == a[3]));
        assert_ne!(a[0], a[3]);
        assert!(b.iter().all(|id| *id == b[0]));
        assert!(a.iter().all(|id| *id != b[0]));
    }
}
