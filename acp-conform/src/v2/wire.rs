//! A v2 connection as the checks see it: a [`Peer`] whose every incoming frame is checked
//! against the schema (when one is given), and a turn read to its `idle` `state_update`.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::driver::ReadError;
use crate::{Context, Peer, trim};

/// A v2 connection to the agent.
pub(crate) struct Wire<'c> {
    /// The connection.
    pub peer: Peer,
    context: &'c Context,
    /// The method of each request sent, by id, to check its answer against its definition.
    asked: HashMap<String, String>,
    /// Messages read but not yet handed out: the entries of an array line (a batch's answer).
    queued: VecDeque<Value>,
    /// The `elicitation/create` requests the kit declined, in order.
    pub declined: Vec<Value>,
}

impl<'c> Wire<'c> {
    /// A fresh agent (or connection), not yet initialized.
    pub fn open(context: &'c Context) -> Result<Wire<'c>, String> {
        Ok(Wire {
            peer: context.spawn()?,
            context,
            asked: HashMap::new(),
            queued: VecDeque::new(),
            declined: Vec::new(),
        })
    }

    /// Sends a request.
    pub fn request(&mut self, id: Value, method: &str, params: Value) -> Result<(), String> {
        self.asked.insert(id.to_string(), method.to_string());
        self.peer.request(id, method, params)
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), String> {
        self.peer.notify(method, params)
    }

    /// The next message within `within`, checked against the schema. A line that is an array
    /// (JSON-RPC's batch answer) is read as its entries, in order.
    pub fn recv_within(&mut self, within: Duration) -> Result<Value, ReadError> {
        if let Some(message) = self.queued.pop_front() {
            return Ok(message);
        }
        let junk_before = self.peer.junk.len();
        let read = self.peer.recv_within(within);
        let entries: Vec<Value> = self.peer.junk[junk_before..]
            .iter()
            .filter_map(|line| serde_json::from_str::<Vec<Value>>(line).ok())
            .flatten()
            .filter(crate::driver::is_jsonrpc)
            .collect();
        for entry in entries {
            self.observe(&entry);
            self.queued.push_back(entry);
        }
        match read {
            Ok(message) => {
                self.observe(&message);
                self.queued.push_back(message);
            }
            Err(e) if self.queued.is_empty() => return Err(e),
            Err(_) => {}
        }
        Ok(self.queued.pop_front().expect("a message was queued"))
    }

    /// Checks `message` against the schema, with the method it answers when it is an answer.
    fn observe(&self, message: &Value) {
        let answering = match message.get("method") {
            Some(_) => None,
            None => self.asked.get(&message["id"].to_string()).map(String::as_str),
        };
        self.context.v2.observe(message, answering);
    }

    /// Reads until the answer to `id` (the messages before it, and the answer); the agent's
    /// permission requests are answered (allowed) on the way.
    pub fn until_response(&mut self, id: &Value) -> Result<(Vec<Value>, Value), String> {
        let deadline = Instant::now() + self.context.config.timeout;
        let mut before = Vec::new();
        loop {
            let message = self
                .recv_until(deadline)
                .map_err(|e| format!("no answer (id {id}): {e}"))?;
            if message.get("method").is_none() && message.get("id") == Some(id) {
                return Ok((before, message));
            }
            self.answer_request(&message)?;
            before.push(message);
        }
    }

    /// Sends a request and reads until its answer ([`Wire::until_response`]).
    pub fn call(&mut self, id: Value, method: &str, params: Value) -> Result<(Vec<Value>, Value), String> {
        self.request(id.clone(), method, params)?;
        self.until_response(&id).map_err(|e| format!("{method}: {e}"))
    }

    /// The next message before `deadline`; an error names why none came.
    pub fn recv_until(&mut self, deadline: Instant) -> Result<Value, String> {
        self.recv_within(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| match e {
                ReadError::Timeout => format!("nothing within {} ms", self.context.config.timeout.as_millis()),
                ReadError::Closed => format!("the agent closed {}{}", self.peer.channel(), self.peer.stderr_hint()),
            })
    }

    /// Answers `message` when it is a request of the agent's: a permission request with the
    /// first option that allows (else the first option), an `elicitation/create` with
    /// `decline` (noted in [`Wire::declined`]).
    pub fn answer_request(&mut self, message: &Value) -> Result<(), String> {
        let result = match message["method"].as_str() {
            Some("session/request_permission") => {
                let options = message["params"]["options"].as_array().cloned().unwrap_or_default();
                let allows = |o: &&Value| o["kind"].as_str().is_some_and(|k| k.starts_with("allow"));
                let outcome = match options.iter().find(allows).or(options.first()) {
                    Some(option) => json!({"outcome": "selected", "optionId": option["optionId"]}),
                    None => json!({"outcome": "cancelled"}),
                };
                json!({"outcome": outcome})
            }
            Some("elicitation/create") => {
                self.declined.push(message.clone());
                json!({"action": "decline"})
            }
            _ => return Ok(()),
        };
        self.peer
            .send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": result}))
    }
}

/// What a prompt turn showed, read until its `idle` `state_update`.
pub(crate) struct Turn {
    /// The answer to `session/prompt` (`None`: none came before the turn ended).
    pub ack: Option<Value>,
    /// Every message of the agent's during the turn, in order (the answer aside).
    pub messages: Vec<Value>,
    /// The `idle` update that ended it.
    pub idle: Value,
}

impl Turn {
    /// The `update` objects of the turn's `session/update`s.
    pub fn updates(&self) -> impl Iterator<Item = &Value> {
        self.messages
            .iter()
            .filter(|m| m["method"] == "session/update")
            .map(|m| &m["params"]["update"])
    }
}

/// Whether `update` is a `state_update` to `state`.
pub(crate) fn is_state(update: &Value, state: &str) -> bool {
    update["sessionUpdate"] == "state_update" && update["state"] == state
}

/// Whether `message` is the `idle` `state_update` of `session`.
pub(crate) fn is_idle_of(message: &Value, session: &str) -> bool {
    message["method"] == "session/update"
        && message["params"]["sessionId"] == session
        && is_state(&message["params"]["update"], "idle")
}

/// Whether `message` is the `running` `state_update` of `session`.
pub(crate) fn is_running_of(message: &Value, session: &str) -> bool {
    message["method"] == "session/update"
        && message["params"]["sessionId"] == session
        && is_state(&message["params"]["update"], "running")
}

/// `session/prompt` params of the kit's.
pub(crate) fn prompt_params(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// Sends `text` to `session` as prompt `id` and reads the turn to its `idle` `state_update`
/// (answering permission requests), within the timeout. An `idle` before the turn started
/// (before the answer and any `running`) is the session's state before it, not its end. A refused prompt is an error, and so
/// is a turn that never reports `idle`, saying so plainly when the answer ended the turn the
/// way v1 does.
pub(crate) fn run_turn(wire: &mut Wire<'_>, session: &str, text: &str, id: Value) -> Result<Turn, String> {
    wire.request(id.clone(), "session/prompt", prompt_params(session, text))?;
    let deadline = Instant::now() + wire.context.config.timeout;
    let mut ack = None;
    let mut messages = Vec::new();
    loop {
        let message = match wire.recv_until(deadline) {
            Ok(message) => message,
            Err(why) => return Err(never_idle(ack.as_ref(), &why)),
        };
        if message.get("method").is_none() && message.get("id") == Some(&id) {
            crate::checks::refused_for_auth(wire.context, "session/prompt", &message)?;
            if message.get("result").is_none() {
                return Err(format!("the prompt was refused: {}", trim(&message.to_string())));
            }
            ack = Some(message);
            continue;
        }
        wire.answer_request(&message)?;
        if is_idle_of(&message, session) {
            if !(ack.is_some() || messages.iter().any(|m| is_running_of(m, session))) {
                continue;
            }
            let idle = message["params"]["update"].clone();
            return Ok(Turn { ack, messages, idle });
        }
        messages.push(message);
    }
}

/// Why a turn that never went `idle` fails.
fn never_idle(ack: Option<&Value>, why: &str) -> String {
    match ack.and_then(|ack| ack["result"].get("stopReason")) {
        Some(reason) => format!(
            "the session/prompt answer ended the turn as v1 does (stopReason {reason}) and no idle state_update followed ({why}): in v2 the answer only acknowledges the prompt, and the turn ends with state_update idle"
        ),
        None => format!("the turn never reported state_update idle ({why})"),
    }
}
