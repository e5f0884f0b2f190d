//! A WebSocket as the newline-delimited byte stream the rest of the runtime speaks.
//!
//! Servers, clients and bridges read and write JSON-RPC as lines over any
//! `AsyncRead`/`AsyncWrite` pair; [`into_lines`] gives them one over a WebSocket, so every
//! guarantee of the stdio path (the ordered writer, the frame limit, cancellation, governance,
//! audit) holds over WebSocket unchanged. One task per connection pumps between the two:
//!
//! - a text message from the peer is one or more JSON-RPC messages separated by newlines (a
//!   trailing newline is optional); it is handed on as lines, while what the runtime writes
//!   is sent on (a message of many requests can have more answers than the pipes hold), and
//!   the next message is read once it is all handed on;
//! - every line we write is sent as one text message (without its newline); lines that are
//!   queued together are sent together and flushed once;
//! - a binary message closes the connection (`1003`, JSON-RPC over ACP is text); a message over
//!   the limit closes it with `1009` (tungstenite refuses it before buffering it whole);
//! - a ping goes out every [`Limits::keepalive`]; a peer that sends nothing at all (not even a
//!   pong) for two of those is gone, and the connection ends;
//! - no JSON-RPC in either direction for [`Limits::idle`] ends it too (`1000`, "idle");
//! - a peer that takes nothing for [`Limits::write_timeout`] ends it;
//! - a listener may close it with a code and reason of its own ([`Closer`]: `1013` for an
//!   unauthenticated connection evicted to make room for an authenticated one).
//!
//! When the connection ends for any reason, the reading side sees end of input, which the
//! runtime treats like a closed stdin: running turns are cancelled, pending requests fail.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

/// The bounds one remote connection runs under. Over Streamable HTTP (a dialer's): the
/// largest event accepted; a stream silent for two keepalives, once its server has sent a
/// comment on it (servers that send keepalive comments do), is taken as broken and resumed;
/// each POST may take the write timeout.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest message accepted from the peer, in bytes (default 4 MiB, the stdio frame
    /// limit).
    pub max_message_bytes: usize,
    /// How often a ping is sent (default 30 s). A peer silent for two of these is gone.
    pub keepalive: Duration,
    /// How long the connection may carry no JSON-RPC in either direction before it is closed
    /// (default: none).
    pub idle: Option<Duration>,
    /// How long the peer may take nothing before the connection is given up (default 60 s).
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: crate::jsonrpc::frame::DEFAULT_MAX_FRAME_BYTES,
            keepalive: Duration::from_secs(30),
            idle: None,
            write_timeout: Duration::from_secs(60),
        }
    }
}

/// How a remote connection (WebSocket or Streamable HTTP) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The peer closed it (or our side finished writing and closed it).
    Closed,
    /// It ended because of a limit or an error; the text says which.
    Failed(String),
}

/// Bytes written by the runtime are queued here before they become messages.
const PIPE_BYTES: usize = 256 * 1024;

/// Turns `ws` into a line stream: read JSON-RPC lines from the first half, write them to the
/// second. The returned task pumps until either side ends, then closes the WebSocket and
/// tells how it ended.
///
/// When `stop` turns true (the listener shuts down), the input ends as if the peer had closed
/// it, while what the runtime still writes (the answers of turns it cancels) is sent before the
/// WebSocket closes.
pub fn into_lines<S>(
    ws: WebSocketStream<S>,
    limits: Limits,
    stop: watch::Receiver<bool>,
) -> (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>, JoinHandle<Ended>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (read, write, pump, _closer) = into_closable_lines(ws, limits, stop);
    (read, write, pump)
}

/// [`into_lines`], with a [`Closer`] that closes the WebSocket with a code and reason of the
/// caller's (the listener evicting a connection).
pub(crate) fn into_closable_lines<S>(
    ws: WebSocketStream<S>,
    limits: Limits,
    stop: watch::Receiver<bool>,
) -> (
    ReadHalf<DuplexStream>,
    WriteHalf<DuplexStream>,
    JoinHandle<Ended>,
    Closer,
)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let (read, write) = tokio::io::split(theirs);
    let (closer, closing) = oneshot::channel();
    let pump = tokio::spawn(pump(ws, ours, limits, stop, closing));
    (read, write, pump, Closer(closer))
}

/// Closes a WebSocket of [`into_closable_lines`] at once: the close frame goes out with its
/// code and reason, then the runtime sees end of input (what it still writes is not sent).
#[derive(Debug)]
pub(crate) struct Closer(oneshot::Sender<(CloseCode, &'static str)>);

impl Closer {
    /// Sends the close frame `code` with `reason` (at most 123 bytes), and ends the connection.
    pub(crate) fn close(self, code: CloseCode, reason: &'static str) {
        let _ = self.0.send((code, reason));
    }
}

async fn pump<S>(
    mut ws: WebSocketStream<S>,
    runtime: DuplexStream,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
    closing: oneshot::Receiver<(CloseCode, &'static str)>,
) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Pending until the closer is used (never, once it is dropped unused).
    let closing = async move {
        match closing.await {
            Ok(close) => close,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::pin!(closing);
    let (from_runtime, to_runtime) = tokio::io::split(runtime);
    // `None` once the input has ended (shutdown): the runtime sees end of input.
    let mut to_runtime = Some(to_runtime);
    let mut from_runtime = BufReader::with_capacity(16 * 1024, from_runtime);
    let mut line = Vec::new();
    // The peer's message being handed to the runtime.
    let mut feeding: Option<Feeding> = None;
    let mut keepalive = tokio::time::interval_at(Instant::now() + limits.keepalive, limits.keepalive);
    let mut heard = Instant::now();
    let mut active = Instant::now();
    let idle_check = limits.idle.unwrap_or(Duration::from_secs(3600 * 24 * 365));
    let ended = loop {
        let idle_deadline = active + idle_check;
        tokio::select! {
            (code, reason) = &mut closing => {
                close(&mut ws, code, reason).await;
                break Ended::Failed(format!("closed by the server: {reason}"));
            }
            changed = stop.changed(), if to_runtime.is_some() => {
                if (changed.is_err() || *stop.borrow_and_update())
                    && let Some(mut input) = to_runtime.take()
                {
                    // (Dropping a split half closes nothing: the runtime must see end of input.)
                    let _ = input.shutdown().await;
                    feeding = None;
                }
            }
            written = feed(to_runtime.as_mut(), feeding.as_ref()), if feeding.is_some() && to_runtime.is_some() => {
                match written {
                    Ok(written) if written > 0 => {
                        if feeding.as_mut().is_some_and(|fed| fed.advance(written)) {
                            feeding = None;
                        }
                    }
                    // The runtime stopped reading: it is shutting down.
                    _ => break Ended::Closed,
                }
            }
            message = ws.next(), if to_runtime.is_some() && feeding.is_none() => {
                heard = Instant::now();
                match message {
                    Some(Ok(Message::Text(text))) => {
                        active = heard;
                        feeding = Feeding::new(text);
                    }
                    Some(Ok(Message::Binary(_))) => {
                        close(&mut ws, CloseCode::Unsupported, "binary messages are not ACP: send JSON-RPC as text").await;
                        break Ended::Failed("the peer sent a binary message".into());
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Close(_))) => {
                        // tungstenite queued the reply to the peer's close; reading on sends it
                        // and ends the stream, so the peer sees a clean close, not a reset.
                        let _ = tokio::time::timeout(Duration::from_secs(5), async {
                            while ws.next().await.is_some() {}
                        })
                        .await;
                        break Ended::Closed;
                    }
                    None => break Ended::Closed,
                    Some(Err(error)) => {
                        let reason = error.to_string();
                        if matches!(error, tokio_tungstenite::tungstenite::Error::Capacity(_)) {
                            close(&mut ws, CloseCode::Size, "message too large").await;
                        }
                        break Ended::Failed(reason);
                    }
                }
            }
            read = from_runtime.read_until(b'\n', &mut line) => {
                match read {
                    Ok(0) | Err(_) => {
                        // The runtime is done: everything it wrote has been sent.
                        close(&mut ws, CloseCode::Normal, "").await;
                        break Ended::Closed;
                    }
                    Ok(_) => {
                        active = Instant::now();
                        match send_lines(&mut ws, &mut from_runtime, &mut line, limits.write_timeout).await {
                            Ok(()) => {}
                            Err(reason) => break Ended::Failed(reason),
                        }
                    }
                }
            }
            _ = keepalive.tick() => {
                if heard.elapsed() >= limits.keepalive * 2 {
                    break Ended::Failed(format!("the peer sent nothing, not even a pong, for {:?}", heard.elapsed()));
                }
                let pinged = tokio::time::timeout(limits.write_timeout, ws.send(Message::Ping(Default::default()))).await;
                if !matches!(pinged, Ok(Ok(()))) {
                    break Ended::Failed("the peer took no ping".into());
                }
            }
            _ = tokio::time::sleep_until(idle_deadline), if limits.idle.is_some() => {
                close(&mut ws, CloseCode::Normal, "idle").await;
                break Ended::Failed(format!("no JSON-RPC for {idle_check:?}"));
            }
        }
    };
    if let Some(mut input) = to_runtime {
        let _ = input.shutdown().await;
    }
    ended
}

/// A text message of the peer's, handed to the runtime piece by piece, then a newline if it
/// did not end with one.
struct Feeding {
    text: Utf8Bytes,
    written: usize,
    newline: bool,
}

impl Feeding {
    /// `None` for an empty message: nothing to hand on.
    fn new(text: Utf8Bytes) -> Option<Feeding> {
        let newline = !text.as_bytes().ends_with(b"\n");
        (!text.is_empty()).then_some(Feeding {
            text,
            written: 0,
            newline,
        })
    }

    /// What is left to write.
    fn rest(&self) -> &[u8] {
        let text = self.text.as_bytes();
        match (&text[self.written.min(text.len())..], self.newline) {
            ([], true) => b"\n",
            (rest, _) => rest,
        }
    }

    /// `written` more bytes were taken; whether that was all.
    fn advance(&mut self, written: usize) -> bool {
        if self.written < self.text.len() {
            self.written += written;
        } else {
            self.newline = false;
        }
        self.rest().is_empty()
    }
}

/// Writes some of what `feeding` has left to the runtime (cancel-safe: a write that did not
/// complete took nothing); `Ok(0)` when the input has ended.
async fn feed(to_runtime: Option<&mut WriteHalf<DuplexStream>>, feeding: Option<&Feeding>) -> std::io::Result<usize> {
    match (to_runtime, feeding) {
        (Some(to_runtime), Some(feeding)) => to_runtime.write(feeding.rest()).await,
        _ => Ok(0),
    }
}

/// Sends `line` and every further complete line already buffered, then flushes once.
async fn send_lines<S, R>(
    ws: &mut WebSocketStream<S>,
    from_runtime: &mut BufReader<R>,
    line: &mut Vec<u8>,
    write_timeout: Duration,
) -> Result<(), String>
where
    S: AsyncRead + AsyncWrite + Unpin,
    R: AsyncRead + Unpin,
{
    let sent = tokio::time::timeout(write_timeout, async {
        loop {
            if line.ends_with(b"\n") {
                line.pop();
            }
            if !line.is_empty() {
                let text = String::from_utf8(std::mem::take(line))
                    .map_err(|_| "the runtime wrote a line that is not UTF-8".to_string())?;
                ws.feed(Message::text(text)).await.map_err(|error| error.to_string())?;
            }
            line.clear();
            // More lines already queued go in the same flush.
            // (A complete line is in the buffer, so this read does not wait.)
            if !from_runtime.buffer().contains(&b'\n') {
                break;
            }
            from_runtime
                .read_until(b'\n', line)
                .await
                .map_err(|error| error.to_string())?;
        }
        ws.flush().await.map_err(|error| error.to_string())
    })
    .await;
    match sent {
        Ok(result) => result,
        Err(_) => Err(format!("the peer took nothing for {write_timeout:?}")),
    }
}

async fn close<S>(ws: &mut WebSocketStream<S>, code: CloseCode, reason: &'static str)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), ws.close(Some(frame))).await;
}
