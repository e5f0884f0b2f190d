//! The pump of a Streamable HTTP connection: the runtime's lines out as POSTs, the events of
//! the connection's streams in as lines.
//!
//! Out: each line the runtime writes is read for its `method`, `id` and `params.sessionId`
//! (nothing else). Requests and notifications go, in order, on one lane; answers to the
//! agent's requests on another, so that an answer never waits behind a request (each lane
//! posts one message at a time, so each keeps its order). A message whose params name a
//! session goes with `Acp-Session-Id`, once that session's stream is open: it is opened
//! first if it is not (`session/load` sends the session's history on it before answering).
//! An answer to a request that came on a session's stream goes with that session's id. A
//! POST must be answered `2xx` within the write timeout. Refused otherwise (`400`, `413`,
//! `429`, `503`…), a request is answered here with an error that says so; `401`, `403`,
//! `404` (the connection is gone) or no answer end the connection. A POST that surely did
//! not reach the server (no TCP connection could be made) is sent again with backoff for
//! `Dial::resume_within`; one that may have reached it is not.
//!
//! `initialize`, the first line, is POSTed alone: its `200` answer (handed to the runtime)
//! names the connection in `Acp-Connection-Id`, and the connection's stream is open before
//! anything else is sent.
//!
//! In: the lines of every stream, handed to the runtime in the order they come, taken from
//! the streams only as fast as the runtime reads them. An answer to `session/new`,
//! `session/fork`, `session/load` or `session/resume` opens the stream of the session it
//! names (for `load` and `resume`, the session the request named) if it is not open.
//!
//! End: the runtime closing its side (what it wrote is posted first, then `DELETE`); the
//! server closing the connection's stream (what the streams still hold is handed on first,
//! for at most the connect timeout); no JSON-RPC either way for [`Limits::idle`]; or a
//! failure (then `DELETE` too). The runtime then sees end of input.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use reqwest::Method;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, WriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::endpoint::{Backoff, CONNECTION_ID, Endpoint, not_sent, status_text};
use super::events::{EventStream, Line, Scope, Told};
use crate::websocket::stream::{Ended, Limits};

/// The methods whose answer opens (or reopens) a session.
const OPENING: [&str; 4] = ["session/new", "session/fork", "session/load", "session/resume"];
/// The lane of requests and notifications.
const ORDERED: usize = 0;
/// The lane of answers to the agent's requests.
const ANSWERS: usize = 1;
/// How many of the runtime's lines may wait for their POST before its lines are no longer
/// read (it then waits, as for a peer that reads slowly).
const MAX_QUEUED: usize = 1024;
/// How many requests' routes are remembered at most (ours that may open a session, the
/// agent's that came on a session's stream).
const MAX_REMEMBERED: usize = 4096;
/// How many lines of the streams may wait for the runtime.
const LINES_WAITING: usize = 64;
/// How many bytes of lines go to the runtime in one buffer (one line at least).
const FEED_BYTES: usize = 64 * 1024;

/// Runs the connection of `endpoint` for the runtime at the other end of `runtime`.
pub(super) async fn run(endpoint: Arc<Endpoint>, runtime: DuplexStream) -> Ended {
    let mut pump = Pump::new(endpoint);
    let ended = pump.pump(runtime).await;
    pump.end().await;
    ended
}

/// One of the runtime's messages, read for where it goes.
struct Outgoing {
    line: String,
    method: Option<String>,
    /// A request's id (its JSON text).
    request: Option<String>,
    /// An answer's id (its JSON text).
    answer: Option<String>,
    /// The session its params name.
    session: Option<String>,
}

/// The fields of a message that say where it goes.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(default, borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
}

/// The session that params (or a result) name.
#[derive(Deserialize)]
struct SessionOf {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

impl Peek<'_> {
    /// The id as a key (`None` for a null or missing one).
    fn id(&self) -> Option<String> {
        let id: serde_json::Value = serde_json::from_str(self.id?.get()).ok()?;
        (!id.is_null()).then(|| id.to_string())
    }
}

/// The `sessionId` of `object`, if it is an object that has one.
fn session_of(object: Option<&RawValue>) -> Option<String> {
    serde_json::from_str::<SessionOf>(object?.get()).ok()?.session_id
}

impl Outgoing {
    fn read(line: String) -> Outgoing {
        let (method, request, answer, session) = match serde_json::from_str::<Peek>(&line) {
            Ok(peek) => {
                let id = peek.id();
                let session = session_of(peek.params);
                let method = peek.method.map(|method| method.into_owned());
                match method {
                    Some(method) => (Some(method), id, None, session),
                    None => (None, None, id, None),
                }
            }
            Err(_) => (None, None, None, None),
        };
        Outgoing {
            line,
            method,
            request,
            answer,
            session,
        }
    }
}

/// A POST done: its lane, the id of the request it carried (if it was one), how it went.
struct Posted {
    lane: usize,
    request: Option<String>,
    outcome: Outcome,
}

/// How a POST went.
enum Outcome {
    /// `2xx`.
    Taken,
    /// `initialize`'s answer: the connection it names (if it names one) and the answer.
    Initialized { connection: Option<String>, answer: String },
    /// Refused; why.
    Refused(String),
    /// The connection cannot go on; why.
    Fatal(String),
}

/// A stream of the connection, while its task runs (or its server did not know it).
struct Stream {
    _task: AbortOnDrop,
    state: StreamState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamState {
    Opening,
    Open,
    /// A session stream the server did not know: its task has ended.
    Unknown,
}

/// A task aborted when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One lane of POSTs, one at a time.
#[derive(Default)]
struct Lane {
    queue: VecDeque<Outgoing>,
    in_flight: Option<AbortOnDrop>,
}

struct Pump {
    endpoint: Arc<Endpoint>,
    /// Named by `initialize`'s answer.
    connection: Option<Arc<str>>,
    streams: HashMap<Scope, Stream>,
    /// Our requests whose answers may open a session: id → the session the request named.
    opening: HashMap<String, Option<String>>,
    /// The agent's requests that came on a session's stream: id → the session.
    asked: HashMap<String, String>,
    lanes: [Lane; 2],
    lines: (mpsc::Sender<Line>, mpsc::Receiver<Line>),
    told: (mpsc::UnboundedSender<Told>, mpsc::UnboundedReceiver<Told>),
    posted: (mpsc::UnboundedSender<Posted>, mpsc::UnboundedReceiver<Posted>),
    /// Lines for the runtime (each with its newline), and how much of the first is written.
    to_feed: VecDeque<Vec<u8>>,
    fed: usize,
    /// When the server closed the connection's stream: until when its other streams may
    /// still be read.
    closing: Option<Instant>,
}

impl Pump {
    fn new(endpoint: Arc<Endpoint>) -> Pump {
        Pump {
            endpoint,
            connection: None,
            streams: HashMap::new(),
            opening: HashMap::new(),
            asked: HashMap::new(),
            lanes: Default::default(),
            lines: mpsc::channel(LINES_WAITING),
            told: mpsc::unbounded_channel(),
            posted: mpsc::unbounded_channel(),
            to_feed: VecDeque::new(),
            fed: 0,
            closing: None,
        }
    }

    fn limits(&self) -> Limits {
        self.endpoint.limits
    }

    async fn pump(&mut self, runtime: DuplexStream) -> Ended {
        let (from_runtime, mut to_runtime) = tokio::io::split(runtime);
        let mut from_runtime = BufReader::with_capacity(16 * 1024, from_runtime);
        let mut line = Vec::new();
        let mut runtime_open = true;
        let mut active = Instant::now();
        let idle = self.limits().idle;
        // (A far deadline stands for "never": the branch is off then.)
        let far = || Instant::now() + std::time::Duration::from_secs(3600 * 24 * 365);
        loop {
            self.start_lanes();
            if !runtime_open
                && self
                    .lanes
                    .iter()
                    .all(|lane| lane.queue.is_empty() && lane.in_flight.is_none())
            {
                return Ended::Closed;
            }
            if self.closing.is_some() && self.drained() {
                return Ended::Closed;
            }
            let queued: usize = self.lanes.iter().map(|lane| lane.queue.len()).sum();
            let feeding = self.to_feed.front().map(|bytes| &bytes[self.fed..]);
            tokio::select! {
                read = from_runtime.read_until(b'\n', &mut line), if runtime_open && queued < MAX_QUEUED => {
                    match read {
                        Ok(0) | Err(_) => runtime_open = false,
                        Ok(_) => {
                            let text = String::from_utf8_lossy(&line).trim().to_string();
                            line.clear();
                            if !text.is_empty() {
                                active = Instant::now();
                                self.queue(Outgoing::read(text));
                            }
                        }
                    }
                }
                Some(Posted { lane, request, outcome }) = self.posted.1.recv() => {
                    self.lanes[lane].in_flight = None;
                    if let Err(why) = self.posted(request, outcome) {
                        return Ended::Failed(why);
                    }
                }
                Some(told) = self.told.1.recv() => {
                    if let Err(why) = self.told(told) {
                        return Ended::Failed(why);
                    }
                }
                Some((scope, text)) = self.lines.1.recv(), if feeding.is_none() => {
                    active = Instant::now();
                    self.take_line(scope, text);
                    // And the lines already waiting behind it: one write to the runtime for a
                    // burst of updates, not one each.
                    for _ in 1..LINES_WAITING {
                        let Ok((scope, text)) = self.lines.1.try_recv() else { break };
                        self.take_line(scope, text);
                    }
                }
                written = feed(&mut to_runtime, feeding) => {
                    match written {
                        Ok(written) if written > 0 => {
                            self.fed += written;
                            if self.to_feed.front().is_some_and(|bytes| self.fed >= bytes.len()) {
                                self.to_feed.pop_front();
                                self.fed = 0;
                            }
                        }
                        // The runtime stopped reading: it is shutting down.
                        _ => return Ended::Closed,
                    }
                }
                _ = tokio::time::sleep_until(idle.map_or_else(far, |idle| active + idle)), if idle.is_some() => {
                    return Ended::Failed(format!("no JSON-RPC for {:?}", idle.unwrap_or_default()));
                }
                _ = tokio::time::sleep_until(self.closing.unwrap_or_else(far)), if self.closing.is_some() => {
                    tracing::warn!(agent = %self.endpoint.url, "the agent closed the connection; its session streams did not end in time");
                    return Ended::Closed;
                }
            }
        }
    }

    /// After the server closed the connection: every stream has ended and what they sent is
    /// handed on.
    fn drained(&self) -> bool {
        self.streams.values().all(|stream| stream.state == StreamState::Unknown)
            && self.lines.1.is_empty()
            && self.to_feed.is_empty()
    }

    fn queue(&mut self, outgoing: Outgoing) {
        let lane = match outgoing.answer.is_some() {
            true => ANSWERS,
            false => ORDERED,
        };
        self.lanes[lane].queue.push_back(outgoing);
    }

    /// Posts the head of each lane that may go (none once the server closed the connection).
    fn start_lanes(&mut self) {
        if self.closing.is_some() {
            return;
        }
        for lane in [ORDERED, ANSWERS] {
            while self.lanes[lane].in_flight.is_none() {
                let Some(head) = self.lanes[lane].queue.front() else {
                    break;
                };
                if self.connection.is_none() {
                    // `initialize` under way (on the ordered lane): the rest waits.
                    if self.lanes[ORDERED].in_flight.is_some() {
                        break;
                    }
                    let head = self.lanes[lane].queue.pop_front().expect("a head");
                    if head.method.as_deref() == Some("initialize") && head.request.is_some() {
                        self.post(lane, head, true);
                    } else {
                        self.refuse_before_initialize(head);
                    }
                    continue;
                }
                if self.state(&None) == Some(StreamState::Opening) {
                    break;
                }
                if let Some(session) = &head.session {
                    let scope = Some(session.clone());
                    match self.state(&scope) {
                        None => {
                            self.open_stream(scope);
                            break;
                        }
                        Some(StreamState::Opening) => break,
                        Some(_) => {}
                    }
                }
                let head = self.lanes[lane].queue.pop_front().expect("a head");
                if let (Some(id), Some(method)) = (&head.request, &head.method)
                    && OPENING.contains(&method.as_str())
                    && self.opening.len() < MAX_REMEMBERED
                {
                    self.opening.insert(id.clone(), head.session.clone());
                }
                self.post(lane, head, false);
            }
        }
    }

    fn state(&self, scope: &Scope) -> Option<StreamState> {
        self.streams.get(scope).map(|stream| stream.state)
    }

    /// A message before the connection is open: a request is answered with an error, the
    /// rest dropped.
    fn refuse_before_initialize(&mut self, outgoing: Outgoing) {
        let why = "over Streamable HTTP the first message is `initialize`, which opens the connection";
        match &outgoing.request {
            Some(id) => self.feed_line(error_answer(id, -32600, why)),
            None => tracing::warn!(agent = %self.endpoint.url, "{why}: a message sent before it was dropped"),
        }
    }

    /// POSTs `outgoing` on `lane`; the outcome comes back on `posted`.
    fn post(&mut self, lane: usize, outgoing: Outgoing, initialize: bool) {
        let session = match &outgoing.answer {
            Some(id) => self.asked.remove(id),
            None => outgoing.session.clone(),
        };
        let endpoint = Arc::clone(&self.endpoint);
        let connection = self.connection.clone();
        let posted = self.posted.0.clone();
        let task = tokio::spawn(async move {
            let Outgoing { line, request, .. } = outgoing;
            let outcome = send(&endpoint, connection.as_deref(), session.as_deref(), line, initialize).await;
            let _ = posted.send(Posted { lane, request, outcome });
        });
        self.lanes[lane].in_flight = Some(AbortOnDrop(task));
    }

    /// What a POST's outcome means for the connection; `Err` ends it.
    fn posted(&mut self, request: Option<String>, outcome: Outcome) -> Result<(), String> {
        match outcome {
            Outcome::Taken => {}
            Outcome::Initialized { connection, answer } => {
                let failed = !serde_json::from_str::<Peek>(&answer).is_ok_and(|peek| peek.result.is_some());
                self.feed_line(answer);
                match connection {
                    Some(connection) => {
                        self.connection = Some(connection.into());
                        self.open_stream(None);
                    }
                    // A refused `initialize` opens no connection; another may follow.
                    None if failed => {}
                    None => {
                        return Err(format!(
                            "the agent at {} answered `initialize` without naming the connection (no Acp-Connection-Id)",
                            self.endpoint.url
                        ));
                    }
                }
            }
            Outcome::Refused(why) => match request {
                Some(id) => self.feed_line(error_answer(&id, -32603, &why)),
                None => tracing::warn!(agent = %self.endpoint.url, "a message was not taken: {why}"),
            },
            Outcome::Fatal(why) => return Err(why),
        }
        Ok(())
    }

    /// What a stream told; `Err` ends the connection.
    fn told(&mut self, told: Told) -> Result<(), String> {
        match told {
            Told::Opened(scope) => self.set_state(&scope, StreamState::Open),
            Told::Unknown(scope) => {
                tracing::debug!(agent = %self.endpoint.url, ?scope, "the agent does not know this session (yet)");
                self.set_state(&scope, StreamState::Unknown);
            }
            Told::Closed(scope) => {
                if scope.is_none() && self.closing.is_none() {
                    tracing::debug!(agent = %self.endpoint.url, "the agent closed the connection");
                    self.closing = Some(Instant::now() + self.endpoint.connect_timeout);
                }
                self.streams.remove(&scope);
            }
            Told::Failed(why) => return Err(why),
        }
        Ok(())
    }

    fn set_state(&mut self, scope: &Scope, state: StreamState) {
        if let Some(stream) = self.streams.get_mut(scope) {
            stream.state = state;
        }
    }

    /// Opens `scope`'s stream (the connection must be open).
    fn open_stream(&mut self, scope: Scope) {
        let Some(connection) = self.connection.clone() else {
            return;
        };
        let stream = EventStream {
            endpoint: Arc::clone(&self.endpoint),
            connection,
            scope: scope.clone(),
            lines: self.lines.0.clone(),
            told: self.told.0.clone(),
        };
        let task = AbortOnDrop(tokio::spawn(stream.run()));
        self.streams.insert(
            scope,
            Stream {
                _task: task,
                state: StreamState::Opening,
            },
        );
    }

    /// A line of `scope`'s stream: noted (the agent's requests on a session's stream, answers
    /// that open a session), then handed to the runtime.
    fn take_line(&mut self, scope: Scope, line: String) {
        if let Ok(peek) = serde_json::from_str::<Peek>(&line) {
            match (peek.method.is_some(), peek.id()) {
                (true, Some(id)) => {
                    if let Some(session) = scope
                        && self.asked.len() < MAX_REMEMBERED
                    {
                        self.asked.insert(id, session);
                    }
                }
                (false, Some(id)) => {
                    if let Some(named) = self.opening.remove(&id)
                        && peek.result.is_some()
                        && let Some(session) = session_of(peek.result).or(named)
                    {
                        let scope = Some(session);
                        if !matches!(self.state(&scope), Some(StreamState::Opening | StreamState::Open)) {
                            self.open_stream(scope);
                        }
                    }
                }
                _ => {}
            }
        }
        self.feed_line(line);
    }

    /// Queues `line` for the runtime: at the end of the last buffer while that is under
    /// [`FEED_BYTES`] (bytes already written from it stay where they are), else in a new one.
    fn feed_line(&mut self, line: String) {
        match self.to_feed.back_mut() {
            Some(last) if last.len() < FEED_BYTES => last.extend_from_slice(line.as_bytes()),
            _ => self.to_feed.push_back(line.into_bytes()),
        }
        if let Some(last) = self.to_feed.back_mut() {
            last.push(b'\n');
        }
    }

    /// Stops every stream and POST; ends the connection at the server (`DELETE`), unless
    /// the server ended it.
    async fn end(&mut self) {
        self.streams.clear();
        for lane in &mut self.lanes {
            lane.in_flight = None;
        }
        let Some(connection) = self.connection.take() else {
            return;
        };
        if self.closing.is_some() {
            return;
        }
        let delete = self.endpoint.request(Method::DELETE, Some(&connection));
        match self.endpoint.within_connect_timeout(delete.send()).await {
            Ok(response) => {
                tracing::debug!(agent = %self.endpoint.url, status = %response.status(), "ended the connection")
            }
            Err(error) => tracing::debug!(agent = %self.endpoint.url, %error, "could not end the connection"),
        }
    }
}

/// Writes some of `feeding` to the runtime (cancel-safe: a write that did not complete took
/// nothing); pending while there is nothing to write.
async fn feed(to_runtime: &mut WriteHalf<DuplexStream>, feeding: Option<&[u8]>) -> std::io::Result<usize> {
    match feeding {
        Some(bytes) => to_runtime.write(bytes).await,
        None => std::future::pending().await,
    }
}

/// POSTs `line`; how it went.
async fn send(
    endpoint: &Endpoint,
    connection: Option<&str>,
    session: Option<&str>,
    line: String,
    initialize: bool,
) -> Outcome {
    let timeout = endpoint.limits.write_timeout;
    let line = bytes::Bytes::from(line);
    // A POST that surely did not reach the agent (the network, or the agent, is away) is
    // sent again for a while, as a broken stream is resumed; one that may have reached it
    // is not (it would be taken twice).
    let mut backoff = Backoff::for_resuming(endpoint);
    let mut response = loop {
        let sending = endpoint.post(connection, session, line.clone()).send();
        match tokio::time::timeout(timeout, sending).await {
            Ok(Ok(response)) => break response,
            Ok(Err(error)) if not_sent(&error) && backoff.wait().await => {
                tracing::debug!(agent = %endpoint.url, %error, "a message did not reach the agent: sending it again");
            }
            Ok(Err(error)) => return Outcome::Fatal(endpoint.unreachable(&error).to_string()),
            Err(_) => {
                return Outcome::Fatal(format!("the agent at {} took no message for {timeout:?}", endpoint.url));
            }
        }
    };
    let status = response.status();
    if status.is_success() {
        if !initialize {
            return Outcome::Taken;
        }
        let connection = response
            .headers()
            .get(CONNECTION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        return match read_answer(endpoint, &mut response).await {
            Ok(answer) => Outcome::Initialized { connection, answer },
            Err(why) => Outcome::Fatal(why),
        };
    }
    let refusal = endpoint.refusal(response).await;
    match status.as_u16() {
        401 | 403 => Outcome::Fatal(format!("the agent at {} refused a message: {refusal}", endpoint.url)),
        404 => Outcome::Fatal(format!(
            "the agent at {} no longer knows the connection: {refusal}",
            endpoint.url
        )),
        _ => Outcome::Refused(format!("the agent at {} refused the message: {refusal}", endpoint.url)),
    }
}

/// The body of `initialize`'s answer, at most the frame limit, read within the write timeout,
/// on one line.
async fn read_answer(endpoint: &Endpoint, response: &mut reqwest::Response) -> Result<String, String> {
    let limit = endpoint.limits.max_message_bytes;
    let mut body = Vec::new();
    let reading = async {
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| endpoint.unreachable(&error).to_string())?
        {
            if body.len() + chunk.len() > limit {
                return Err(format!(
                    "the agent at {} answered `initialize` with over {limit} bytes",
                    endpoint.url
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(())
    };
    match tokio::time::timeout(endpoint.limits.write_timeout, reading).await {
        Ok(Ok(())) => {}
        Ok(Err(why)) => return Err(why),
        Err(_) => {
            return Err(format!(
                "the agent at {} took over {:?} to send `initialize`'s answer",
                endpoint.url, endpoint.limits.write_timeout
            ));
        }
    }
    let answer = String::from_utf8(body).map_err(|_| {
        format!(
            "the agent at {} answered `initialize` with text that is not UTF-8",
            endpoint.url
        )
    })?;
    let answer = answer.trim();
    if answer.is_empty() {
        return Err(format!(
            "the agent at {} answered `initialize` with nothing ({})",
            endpoint.url,
            status_text(response.status())
        ));
    }
    Ok(answer.replace(['\n', '\r'], " "))
}

/// A JSON-RPC error answer to request `id` (its JSON text).
fn error_answer(id: &str, code: i64, message: &str) -> String {
    let id: serde_json::Value = serde_json::from_str(id).unwrap_or(serde_json::Value::Null);
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a line says about where it goes: its lane, its session, the ids of requests and
    /// answers (as JSON text, so that `1` and `"1"` differ).
    #[test]
    fn a_line_is_read_for_its_lane_session_and_id() {
        let prompt = Outgoing::read(
            r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}"#.into(),
        );
        assert_eq!(prompt.method.as_deref(), Some("session/prompt"));
        assert_eq!(prompt.request.as_deref(), Some("3"));
        assert_eq!(prompt.session.as_deref(), Some("s1"));
        assert!(prompt.answer.is_none());
        let answer =
            Outgoing::read(r#"{"jsonrpc":"2.0","id":"7","result":{"outcome":{"outcome":"cancelled"}}}"#.into());
        assert_eq!(answer.answer.as_deref(), Some("\"7\""));
        assert!(answer.method.is_none() && answer.session.is_none());
        let cancel = Outgoing::read(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":[1]}"#.into());
        assert!(cancel.request.is_none() && cancel.session.is_none());
        let null_id = Outgoing::read(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#.into());
        assert!(null_id.request.is_none());
        let garbage = Outgoing::read("not json".into());
        assert!(garbage.method.is_none() && garbage.answer.is_none());
    }
}
