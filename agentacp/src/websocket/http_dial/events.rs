//! One event stream of a Streamable HTTP connection (the connection's, or a session's): a
//! task that opens it, hands each event's data to the pump as a line, and resumes it when it
//! breaks.
//!
//! - Each event's data is one JSON-RPC message; line breaks in it (an event of several `data:`
//!   lines) become spaces, which JSON allows between tokens.
//! - The id of the last event handed on is kept. A stream that breaks (its body fails, or,
//!   once the server has sent a comment on it, nothing for two keepalives) is opened again
//!   with `Last-Event-ID`: the server sends what followed it, so nothing is missed or handed
//!   on twice. Attempts are retried with backoff for `Endpoint::resume_within`: a
//!   transport error, a server error or `429`; `409` too when no `Last-Event-ID` could be
//!   sent (a server that gives no ids answers so while it still holds the old GET). Then the
//!   connection is given up, with the last answer in the sentence. `409` to a GET with
//!   `Last-Event-ID` (the server no longer keeps the events after it), `404` (the connection
//!   is gone), `401`, `403` and other refusals give it up at once.
//! - A stream whose body ends cleanly was closed by the server: it is not opened again.
//! - An event over the frame limit, or an event stream that does not parse, ends the
//!   connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::{Response, StatusCode};
use sse_stream::SseStream;
use tokio::sync::mpsc;

use super::endpoint::{Backoff, Endpoint};

/// Which stream: the connection's (`None`) or a session's.
pub(super) type Scope = Option<String>;

/// A line of a stream's, for the runtime.
pub(super) type Line = (Scope, String);

/// What a stream tells the pump, besides its lines.
#[derive(Debug)]
pub(super) enum Told {
    /// It is open (the first time).
    Opened(Scope),
    /// A session stream the server does not know (`404` at its first GET).
    Unknown(Scope),
    /// The server closed it.
    Closed(Scope),
    /// It cannot go on: the connection is given up, for this reason.
    Failed(String),
}

/// What the bytes of an event may be beyond the frame limit (its `id:` and `data:` fields,
/// keepalive comments).
const SLACK_BYTES: usize = 64 * 1024;

/// One stream's task.
pub(super) struct EventStream {
    pub(super) endpoint: Arc<Endpoint>,
    pub(super) connection: Arc<str>,
    pub(super) scope: Scope,
    pub(super) lines: mpsc::Sender<Line>,
    pub(super) told: mpsc::UnboundedSender<Told>,
}

/// How reading a stream's body ended.
enum Read {
    /// The server ended it.
    Closed,
    /// It broke: open it again.
    Broken(String),
    /// The connection cannot go on.
    Fatal(String),
    /// The pump is gone.
    Unwanted,
}

/// Why a stream's body stopped, below the event parser.
#[derive(Debug)]
enum ChunkError {
    Silent(Duration),
    TooLarge(usize),
    Body(String),
}

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChunkError::Silent(after) => write!(f, "nothing arrived for {after:?}, not even a keepalive"),
            ChunkError::TooLarge(limit) => write!(f, "an event is over the limit of {limit} bytes"),
            ChunkError::Body(error) => f.write_str(error),
        }
    }
}

impl std::error::Error for ChunkError {}

impl EventStream {
    /// Opens the stream and reads it until it ends; tells the pump how.
    pub(super) async fn run(self) {
        let mut last: Option<String> = None;
        let mut response = match self.open(None).await {
            Ok(response) => response,
            Err((Some(StatusCode::NOT_FOUND), _)) if self.scope.is_some() => {
                return self.tell(Told::Unknown(self.scope.clone()));
            }
            Err((_, why)) => return self.tell(Told::Failed(self.cannot_open(&why))),
        };
        self.tell(Told::Opened(self.scope.clone()));
        loop {
            match self.read(response, &mut last).await {
                Read::Closed => return self.tell(Told::Closed(self.scope.clone())),
                Read::Unwanted => return,
                Read::Fatal(why) => return self.tell(Told::Failed(why)),
                Read::Broken(why) => {
                    tracing::warn!(agent = %self.endpoint.url, stream = %self.name(), "an event stream broke ({why}): resuming it");
                    response = match self.resume(last.as_deref()).await {
                        Ok(response) => response,
                        Err(why) => return self.tell(Told::Failed(why)),
                    };
                    tracing::info!(agent = %self.endpoint.url, stream = %self.name(), after = ?last, "resumed an event stream");
                }
            }
        }
    }

    fn tell(&self, told: Told) {
        let _ = self.told.send(told);
    }

    /// "the connection's stream", "the stream of session S".
    fn name(&self) -> String {
        match &self.scope {
            None => "the connection's stream".to_string(),
            Some(session) => format!("the stream of session {session}"),
        }
    }

    fn cannot_open(&self, why: &str) -> String {
        format!("the agent at {} did not open {}: {why}", self.endpoint.url, self.name())
    }

    /// One GET of the stream; an answer other than an event stream is refused with its status
    /// (if it had one) and a sentence.
    async fn open(&self, last: Option<&str>) -> Result<Response, (Option<StatusCode>, String)> {
        let request = self.endpoint.stream(&self.connection, self.scope.as_deref(), last);
        let response = self
            .endpoint
            .within_connect_timeout(request.send())
            .await
            .map_err(|error| (None, error.to_string()))?;
        let status = response.status();
        if status != StatusCode::OK {
            return Err((Some(status), self.endpoint.refusal(response).await));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        if !content_type
            .trim_start()
            .to_ascii_lowercase()
            .starts_with("text/event-stream")
        {
            return Err((
                Some(status),
                format!("it answered with `{content_type}`, not an event stream"),
            ));
        }
        Ok(response)
    }

    /// Opens the stream again after event `last`, retrying as the module says.
    async fn resume(&self, last: Option<&str>) -> Result<Response, String> {
        if last.is_none() {
            tracing::warn!(agent = %self.endpoint.url, stream = %self.name(), "the agent gave its events no ids: what it sent while the stream was broken may be lost");
        }
        let mut backoff = Backoff::for_resuming(&self.endpoint);
        loop {
            let why = match self.open(last).await {
                Ok(response) => return Ok(response),
                Err((status, why)) => {
                    // `409` to a GET with `Last-Event-ID`: the events are gone (agentacp's
                    // server lets such a GET take over a stream a stale GET still holds);
                    // without one (a server that gives no ids): the old GET still holds it.
                    let retried = match status {
                        None => true,
                        Some(StatusCode::CONFLICT) => last.is_none(),
                        Some(status) => status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS,
                    };
                    if !retried {
                        return Err(self.cannot_resume(last, &why));
                    }
                    why
                }
            };
            if !backoff.wait().await {
                return Err(format!(
                    "{} within {:?}",
                    self.cannot_resume(last, &why),
                    self.endpoint.resume_within
                ));
            }
        }
    }

    fn cannot_resume(&self, last: Option<&str>, why: &str) -> String {
        let after = last.map(|last| format!(" after event {last}")).unwrap_or_default();
        format!(
            "the agent at {} did not resume {}{after}: {why}",
            self.endpoint.url,
            self.name()
        )
    }

    /// Reads the events of `response`, handing each on and noting its id in `last`.
    async fn read(&self, response: Response, last: &mut Option<String>) -> Read {
        let limit = self.endpoint.limits.max_message_bytes;
        let pending = Arc::new(AtomicUsize::new(0));
        let chunks = chunks(
            response,
            self.endpoint.limits.keepalive * 2,
            limit,
            Arc::clone(&pending),
        );
        let mut events = std::pin::pin!(SseStream::from_bytes_stream(chunks));
        loop {
            let event = match events.next().await {
                None => return Read::Closed,
                Some(Ok(event)) => event,
                Some(Err(sse_stream::Error::Body(error))) => {
                    return match error.downcast::<ChunkError>() {
                        Ok(error) if matches!(*error, ChunkError::TooLarge(_)) => Read::Fatal(format!(
                            "the agent at {} sent {}: {error}",
                            self.endpoint.url,
                            self.name()
                        )),
                        Ok(error) => Read::Broken(error.to_string()),
                        Err(error) => Read::Broken(error.to_string()),
                    };
                }
                Some(Err(error)) => {
                    return Read::Fatal(format!(
                        "the agent at {} sent {} that does not parse as events: {error}",
                        self.endpoint.url,
                        self.name()
                    ));
                }
            };
            pending.store(0, Ordering::Relaxed);
            let message = event.event.as_deref().is_none_or(|kind| kind == "message");
            if let Some(data) = event.data.filter(|data| message && !data.trim().is_empty()) {
                if data.len() > limit {
                    return Read::Fatal(format!(
                        "the agent at {} sent an event over the limit of {limit} bytes on {}",
                        self.endpoint.url,
                        self.name()
                    ));
                }
                let line = match data.contains(['\n', '\r']) {
                    true => data.replace(['\n', '\r'], " "),
                    false => data,
                };
                if self.lines.send((self.scope.clone(), line)).await.is_err() {
                    return Read::Unwanted;
                }
            }
            if let Some(id) = event.id {
                *last = Some(id);
            }
        }
    }
}

/// The body of `response` as chunks. Once a comment has come (a server that sends keepalive
/// comments), a wait longer than `silence` for the next chunk is an error; so is an event
/// that grows past `limit` (`pending` counts the bytes since the last event read, reset by
/// the reader and at each chunk that ends on an event's end).
fn chunks(
    response: Response,
    silence: Duration,
    limit: usize,
    pending: Arc<AtomicUsize>,
) -> impl futures_util::Stream<Item = Result<Bytes, ChunkError>> {
    let state = (response, false, pending, false);
    futures_util::stream::unfold(state, move |(mut response, commented, pending, failed)| async move {
        if failed {
            return None;
        }
        let next = match commented {
            true => match tokio::time::timeout(silence, response.chunk()).await {
                Ok(next) => next.map_err(body_error),
                Err(_) => Err(ChunkError::Silent(silence)),
            },
            false => response.chunk().await.map_err(body_error),
        };
        let chunk = match next {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return None,
            Err(error) => return Some((Err(error), (response, commented, pending, true))),
        };
        let waiting = pending.load(Ordering::Relaxed) + chunk.len();
        if waiting > limit.saturating_add(SLACK_BYTES) {
            return Some((Err(ChunkError::TooLarge(limit)), (response, commented, pending, true)));
        }
        let ended = chunk.ends_with(b"\n\n") || chunk.ends_with(b"\r\n\r\n") || chunk.ends_with(b"\r\r");
        pending.store(if ended { 0 } else { waiting }, Ordering::Relaxed);
        let commented = commented || chunk.starts_with(b":") || chunk.windows(2).any(|pair| pair == b"\n:");
        Some((Ok(chunk), (response, commented, pending, false)))
    })
}

fn body_error(error: reqwest::Error) -> ChunkError {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    ChunkError::Body(text)
}
