//! The driver over Streamable HTTP (`--connect http://…`), the remote transport of the ACP
//! RFD "Streamable HTTP & WebSocket Transport", behind the same [`Peer`](super::Peer) as
//! stdio and WebSocket: the kit's frames are POSTed one by one, the agent's messages are the
//! lines of the events of the connection's SSE streams.
//!
//! - The first POST carries no `Acp-Connection-Id`: it must be `initialize`, whose `200`
//!   answer (its body, a message) names the connection; the kit then opens the connection's
//!   stream (`GET`, `Accept: text/event-stream`) on a thread of its own.
//! - Every later POST names the connection, and expects `202`; a session-scoped one (its
//!   `params.sessionId` a string) names the session in `Acp-Session-Id` too, and the kit's
//!   answer to a request that came on a session's stream names that session.
//! - A session's stream is opened before the kit first POSTs a message naming it (for
//!   `session/load`, before the load, whose replay comes on it), and when an answer names a
//!   session (`session/new`, `session/fork`, `session/resume`), before that answer is handed
//!   on: by the time a check reads it, what the session sends is read too.
//! - Closing is `DELETE`, after which the server ends the streams; cookies the server sets
//!   are returned for the life of the peer; the bearer token goes on every request.
//!
//! The client is `ureq` (blocking, HTTP/1.1, no TLS: `https://` is refused with a sentence):
//! one TCP connection per open stream, the POSTs on pooled ones. Every request but a stream's
//! body has the peer's timeout; a stream's body is read until the server ends it.

use std::collections::{HashMap, HashSet};
use std::io::BufReader;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use serde_json::Value;
use ureq::Agent;
use ureq::http::{Response, StatusCode};

use super::{Connect, LINE_KEEP, STDERR_KEEP, Sent, each_line, unauthorized};
use crate::trim;

/// The header naming the connection.
const CONNECTION_ID: &str = "Acp-Connection-Id";
/// The header naming a session.
const SESSION_ID: &str = "Acp-Session-Id";
/// How much of a refusal's body (the server's sentence) is read.
const REFUSAL_KEEP: u64 = 64 * 1024;

/// A Streamable HTTP connection to a remote agent.
pub(super) struct HttpPeer {
    shared: Arc<Shared>,
}

/// What the peer and its stream threads share.
struct Shared {
    agent: Agent,
    url: String,
    token: Option<String>,
    timeout: Duration,
    /// The connection's id, once `initialize` was answered.
    connection: OnceLock<String>,
    /// The sessions whose streams are open (or were opened).
    opened: Mutex<HashSet<String>>,
    /// The requests of the agent's that came on a session's stream: their ids (as JSON text)
    /// and the session, for the kit's answers.
    asked: Mutex<HashMap<String, String>>,
    /// Where the agent's lines go.
    lines: Sender<String>,
    /// What the kit learnt of the connection's end (the peer's "stderr").
    notes: Arc<Mutex<String>>,
    /// Given to each stream's thread; dropped at close, so that `done` disconnects once every
    /// stream has ended.
    running: Mutex<Option<Sender<()>>>,
    /// Set once the kit closes: a stream that ends is then no news.
    closing: AtomicBool,
}

/// A new peer and what the driver's [`Peer`](super::Peer) keeps of it.
pub(super) struct Ends {
    /// The peer.
    pub(super) http: HttpPeer,
    /// The agent's lines.
    pub(super) lines: Receiver<String>,
    /// What the kit learns of the connection's end.
    pub(super) notes: Arc<Mutex<String>>,
    /// Disconnects once the peer is closed and its streams have ended.
    pub(super) done: Receiver<()>,
}

/// A new peer for `target` (`http://` only). Nothing is sent yet: the first POST
/// (`initialize`) opens the connection.
pub(super) fn connect(target: &Connect, timeout: Duration) -> Result<Ends, String> {
    let url = &target.url;
    let uri: ureq::http::Uri = url.parse().map_err(|e| format!("--connect {url}: not a URL: {e}"))?;
    match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
        Some("http") => {}
        Some("https") => {
            return Err(format!(
                "--connect {url}: https:// is not supported by the kit yet (it has no TLS); \
                 connect over http://, e.g. to a loopback port or through a tunnel"
            ));
        }
        _ => return Err(format!("--connect {url}: not an http:// URL")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("--connect {url}: no host"));
    }
    let agent: Agent = Agent::config_builder()
        // The kit judges every status itself, follows no redirect, and goes straight to the
        // server (no proxy from the environment), as it does over WebSocket.
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .proxy(None)
        .user_agent(format!("scaffold-aip-conform/{}", env!("CARGO_PKG_VERSION")))
        .timeout_connect(Some(timeout))
        .timeout_send_request(Some(timeout))
        .timeout_send_body(Some(timeout))
        .timeout_recv_response(Some(timeout))
        .build()
        .into();
    let (lines, receiver) = channel();
    let (running, done) = channel();
    let notes = Arc::new(Mutex::new(String::new()));
    let shared = Arc::new(Shared {
        agent,
        url: url.clone(),
        token: target.token.clone(),
        timeout,
        connection: OnceLock::new(),
        opened: Mutex::default(),
        asked: Mutex::default(),
        lines,
        notes: notes.clone(),
        running: Mutex::new(Some(running)),
        closing: AtomicBool::new(false),
    });
    Ok(Ends {
        http: HttpPeer { shared },
        lines: receiver,
        notes,
        done,
    })
}

impl HttpPeer {
    /// POSTs one frame; `Sent::Refused` with the status and a sentence when the server
    /// refuses it, `Err` when it cannot be sent (no server, no answer in time, closed).
    pub(super) fn post(&self, frame: &str) -> Result<Sent, String> {
        let shared = &self.shared;
        if shared.closing.load(Ordering::SeqCst) {
            return Err("the connection is closed".into());
        }
        let message: Value = serde_json::from_str(frame).unwrap_or(Value::Null);
        let method = message.get("method").and_then(Value::as_str);
        let what = match (method, message.get("id")) {
            (Some(method), _) => format!("POST {method}"),
            (None, Some(id)) if message.is_object() => format!("POST of the answer to request {id}"),
            _ => "POST of a frame that is not a JSON-RPC message".to_string(),
        };
        let session = match method {
            Some(_) => message
                .get("params")
                .and_then(|params| params.get("sessionId"))
                .and_then(Value::as_str)
                .map(str::to_string),
            None => message
                .get("id")
                .and_then(|id| shared.asked.lock().ok()?.remove(&id.to_string())),
        };
        let connection = shared.connection.get();
        if let (Some(session), Some(_), Some(_)) = (&session, connection, method) {
            // Its answers and updates come on its stream: open it first.
            shared.open_session(session)?;
        }
        let mut request = shared
            .agent
            .post(&shared.url)
            .header("Content-Type", "application/json")
            .config()
            .timeout_global(Some(shared.timeout))
            .build();
        if let Some(connection) = connection {
            request = request.header(CONNECTION_ID, connection);
        }
        if let Some(session) = &session {
            request = request.header(SESSION_ID, session);
        }
        if let Some(token) = &shared.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = request.send(frame).map_err(|e| shared.failed(&what, &e))?;
        match response.status() {
            StatusCode::OK => {
                let body = response
                    .body_mut()
                    .with_config()
                    .limit(LINE_KEEP as u64)
                    .lossy_utf8(true)
                    .read_to_string()
                    .map_err(|e| shared.failed(&what, &e))?;
                if connection.is_none() {
                    self.opened(&response)?;
                }
                for line in body.lines() {
                    let _ = shared.lines.send(line.trim_end().to_string());
                }
                Ok(Sent::Taken)
            }
            StatusCode::ACCEPTED | StatusCode::NO_CONTENT => Ok(Sent::Taken),
            status => Ok(Sent::Refused {
                status: status.as_u16(),
                sentence: shared.refusal(&what, response),
            }),
        }
    }

    /// The connection `response` (the answer to `initialize`) names: kept, and its stream
    /// opened.
    fn opened(&self, response: &Response<ureq::Body>) -> Result<(), String> {
        let shared = &self.shared;
        let id = response
            .headers()
            .get(CONNECTION_ID)
            .and_then(|value| value.to_str().ok())
            .filter(|id| !id.is_empty())
            .ok_or_else(|| {
                format!(
                    "{}: the answer to the first POST names no connection ({CONNECTION_ID}): is this a Streamable HTTP endpoint?",
                    shared.url
                )
            })?;
        let _ = shared.connection.set(id.to_string());
        Shared::open_stream(shared, None)
    }

    /// Closes the connection (`DELETE`): the server ends its streams. Once only; what fails
    /// is noted.
    pub(super) fn close(&self) {
        let shared = &self.shared;
        if shared.closing.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(connection) = shared.connection.get() {
            let mut request = shared
                .agent
                .delete(&shared.url)
                .header(CONNECTION_ID, connection)
                .config()
                .timeout_global(Some(shared.timeout))
                .build();
            if let Some(token) = &shared.token {
                request = request.header("Authorization", format!("Bearer {token}"));
            }
            match request.call() {
                Ok(response) if response.status().is_success() => {}
                Ok(response) => {
                    let sentence = shared.refusal("DELETE", response);
                    shared.note(sentence);
                }
                Err(error) => shared.note(shared.failed("DELETE", &error)),
            }
        }
        if let Ok(mut running) = shared.running.lock() {
            running.take();
        }
    }
}

impl Shared {
    /// Opens `session`'s stream unless it is open.
    fn open_session(self: &Arc<Self>, session: &str) -> Result<(), String> {
        let mut opened = self.opened.lock().map_err(|_| "a stream thread failed".to_string())?;
        if opened.contains(session) {
            return Ok(());
        }
        Shared::open_stream(self, Some(session))?;
        opened.insert(session.to_string());
        Ok(())
    }

    /// GETs the connection's stream (or `session`'s) and reads it on a thread of its own.
    fn open_stream(self: &Arc<Self>, session: Option<&str>) -> Result<(), String> {
        let Some(running) = self.running.lock().ok().and_then(|running| running.clone()) else {
            return Err("the connection is closed".into());
        };
        let connection = self.connection.get().ok_or("no connection yet")?;
        let what = match session {
            None => "GET of the connection's stream".to_string(),
            Some(session) => format!("GET of the stream of session {session}"),
        };
        let mut request = self
            .agent
            .get(&self.url)
            .header("Accept", "text/event-stream")
            .header(CONNECTION_ID, connection);
        if let Some(session) = session {
            request = request.header(SESSION_ID, session);
        }
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let response = request.call().map_err(|e| self.failed(&what, &e))?;
        if response.status() != StatusCode::OK {
            return Err(self.refusal(&what, response));
        }
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        if !kind.starts_with("text/event-stream") {
            return Err(format!(
                "{}: the {what} was answered with `{}`, not an event stream",
                self.url,
                trim(kind)
            ));
        }
        let shared = self.clone();
        let session = session.map(str::to_string);
        let body = response.into_body().into_reader();
        thread::spawn(move || {
            shared.read_stream(BufReader::new(body), session.as_deref());
            drop(running);
        });
        Ok(())
    }

    /// Hands on the lines of the events of one stream until it ends (or no one listens).
    fn read_stream(self: &Arc<Self>, reader: impl std::io::BufRead, session: Option<&str>) {
        let outcome = events(reader, |data| {
            data.split('\n').all(|line| {
                self.learn(line, session);
                self.lines.send(line.to_string()).is_ok()
            })
        });
        if !self.closing.load(Ordering::SeqCst) {
            let stream = match session {
                None => "the connection's stream".to_string(),
                Some(session) => format!("the stream of session {session}"),
            };
            self.note(match outcome {
                Ok(()) => format!("the server ended {stream}"),
                Err(error) => format!("{stream} failed: {error}"),
            });
        }
    }

    /// What a line of the agent's tells the kit: an answer naming a session (its stream is
    /// opened before the answer is handed on), a request on a session's stream (the kit's
    /// answer names that session).
    fn learn(self: &Arc<Self>, line: &str, session: Option<&str>) {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            return;
        };
        match (message.get("method"), message.get("id"), session) {
            (Some(_), Some(id), Some(session)) => {
                if let Ok(mut asked) = self.asked.lock() {
                    asked.insert(id.to_string(), session.to_string());
                }
            }
            (None, Some(_), _) => {
                if let Some(named) = message.pointer("/result/sessionId").and_then(Value::as_str)
                    && let Err(error) = self.open_session(named)
                {
                    self.note(error);
                }
            }
            _ => {}
        }
    }

    /// A sentence for a request that failed before any answer.
    fn failed(&self, what: &str, error: &ureq::Error) -> String {
        let url = &self.url;
        match error {
            ureq::Error::Timeout(_) => format!("{url}: no answer to the {what} within {} ms", self.timeout.as_millis()),
            ureq::Error::Io(error) => format!("cannot connect to {url}: {error}"),
            ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                format!("cannot connect to {url}: {error}")
            }
            _ => format!("{url}: the {what} failed: {error}"),
        }
    }

    /// A sentence for a request the server answered with a status the kit did not expect,
    /// with what the server said (the start of its body, on one line).
    fn refusal(&self, what: &str, mut response: Response<ureq::Body>) -> String {
        let url = &self.url;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED {
            return unauthorized(url, self.token.is_some());
        }
        let said = response
            .body_mut()
            .with_config()
            .limit(REFUSAL_KEEP)
            .lossy_utf8(true)
            .read_to_string()
            .map(|body| trim(&body))
            .unwrap_or_default();
        let said = if said.is_empty() {
            String::new()
        } else {
            format!(": the server says \"{said}\"")
        };
        let hint = match status {
            StatusCode::FORBIDDEN => " (an Origin it does not allow, or a connection of another identity)",
            StatusCode::NOT_FOUND if self.connection.get().is_none() => {
                " (no ACP endpoint at this URL: agentacp's servers serve /acp)"
            }
            StatusCode::NOT_FOUND => " (the connection or session is not the server's, or no longer)",
            _ => "",
        };
        format!("{url}: the {what} was refused: {status}{hint}{said}")
    }

    /// Keeps `text` in the notes.
    fn note(&self, text: String) {
        if let Ok(mut kept) = self.notes.lock()
            && kept.len() < STDERR_KEEP
        {
            kept.push_str(&text);
            kept.push('\n');
        }
    }
}

/// Reads a stream of server-sent events, handing the data of each (its `data:` lines joined
/// with newlines, at most [`LINE_KEEP`] bytes) to `event` until the stream ends or `event`
/// says stop; other fields and comments are skipped, and an event the stream ends before its
/// blank line is dropped, as the SSE standard says. `Err` is a read error.
///
/// A parser of its own, a few lines: the maintained SSE crates (`eventsource-stream`,
/// `sse-stream`) parse async byte streams, and the kit is blocking.
fn events(reader: impl std::io::BufRead, mut event: impl FnMut(&str) -> bool) -> std::io::Result<()> {
    let mut data: Option<String> = None;
    each_line(reader, |line| {
        if line.is_empty() {
            return data.take().is_none_or(|data| event(&data));
        }
        if line.starts_with(':') {
            return true;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        if field == "data" {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(data) if data.len() < LINE_KEEP => {
                    data.push('\n');
                    data.push_str(value);
                }
                Some(_) => {}
                None => data = Some(value.to_string()),
            }
        }
        true
    })
}

#[cfg(test)]
mod tests {
    use super::events;

    #[test]
    fn events_join_their_data_lines_and_skip_comments_other_fields_and_a_cut_event() {
        let stream =
            ": open\n\nid: 1\ndata: {\"a\":1}\n\n: keepalive\n\nevent: message\ndata: one\ndata:two\r\n\ndata: cut";
        let mut seen = Vec::new();
        events(stream.as_bytes(), |data| {
            seen.push(data.to_string());
            true
        })
        .expect("read");
        assert_eq!(seen, vec!["{\"a\":1}", "one\ntwo"]);
    }
}
