//! The connection core: the one read loop that every role of the runtime runs on — a server
//! facing its client, a client facing its agent, and each face of a bridge.
//!
//! [`serve`] reads the peer's frames in order ([`FrameReader`]: the frame limit, and the one
//! answer to a frame over it, [`over_limit`]), bounds their depth where the role passes them
//! on, parses each once, and hands it to the [`Role`]: responses, notifications and requests,
//! each with its frame. The peer's `$/cancel_request` is read here, for every role, and handed
//! to [`Role::cancel_request`]: a role that answers the peer's requests with [`Cancels`] has it
//! handled by default, and each request made cancellable before the next message is read. The
//! peer's requests in flight are kept in an [`InFlight`] table (the one place that refuses an
//! id still in flight); our own requests in a
//! [`Pending`](crate::jsonrpc::pending::Pending); and everything is written through the one
//! ordered writer ([`Outbox`](crate::jsonrpc::outbox::Outbox)). The transports (stdio, a child
//! process, WebSocket) are adapters below: any `AsyncBufRead` of lines.
//!
//! Shared limits and timeouts, with their one set of defaults, are [`Limits`].

pub mod dialect;
mod in_flight;
mod limits;

pub use dialect::{Dialect, Inbound, Negotiate, Seam};
pub use in_flight::{InFlight, duplicate_id};
pub use limits::Limits;

use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::value::RawValue;
use tokio::io::AsyncBufRead;

use crate::jsonrpc::cancels::{Cancellable, Cancels};
use crate::jsonrpc::frame::{Frame, FrameReader, within_depth};
use crate::jsonrpc::pending::{CANCEL_REQUEST, cancelled_request};
use crate::jsonrpc::{self, Id, Incoming, RpcError, Unreadable, codes};

/// Whether the read loop goes on after a message (`Continue`) or stops (`Break`: the peer
/// can no longer be answered).
pub type Flow = ControlFlow<()>;

/// Go on reading.
pub const CONTINUE: Flow = ControlFlow::Continue(());

/// A request of the peer's, as [`serve`] hands it to its [`Role`].
#[derive(Debug)]
pub struct Request {
    /// Its id.
    pub id: Id,
    /// The method.
    pub method: String,
    /// The params, unparsed.
    pub params: Option<Box<RawValue>>,
    /// The frame as read (depth-bounded for a role with [`Role::BOUND_DEPTH`]), to pass on.
    pub line: Vec<u8>,
    /// For a role with [`Role::cancels`]: the request, cancellable from now on.
    pub cancellable: Option<Cancellable>,
}

/// The peer's `$/cancel_request`, as [`serve`] hands it to [`Role::cancel_request`].
#[derive(Debug)]
pub struct CancelRequest {
    /// The request its params name; `None` when they name none (or are not readable).
    pub request: Option<Id>,
    /// The params, unparsed (for a role that checks them or passes them on).
    pub params: Option<Box<RawValue>>,
    /// The frame as read (depth-bounded for a role with [`Role::BOUND_DEPTH`]), to pass on.
    pub line: Vec<u8>,
}

impl CancelRequest {
    /// The method: `$/cancel_request`.
    pub const METHOD: &'static str = CANCEL_REQUEST;
}

/// One side of a connection: what it does with each message its peer sends. The read loop
/// ([`serve`]) is the same for every role; a role is only its handling.
///
/// Each handler returns [`Flow`]; its future must be `Send`, as the loop runs in a task.
pub trait Role: Send {
    /// The peer, as logs name it ("the client", "the agent", "the editor").
    const PEER: &'static str;

    /// Whether each frame is bounded to the depth a peer's JSON reader takes before it is
    /// parsed ([`within_depth`]): for a role that passes frames on.
    const BOUND_DEPTH: bool = false;

    /// The peer's requests this side answers and the peer may cancel: when `Some`, each
    /// request is made cancellable as it is read, and the default
    /// [`cancel_request`](Role::cancel_request) cancels them.
    fn cancels(&self) -> Option<&Arc<Cancels>> {
        None
    }

    /// The peer's `$/cancel_request`, handled before the next message is read. Default: with
    /// [`cancels`](Role::cancels), the request it names is cancelled (one it does not name is
    /// ignored); without, it is handed on as a [`notification`](Role::notification).
    fn cancel_request(&mut self, cancel: CancelRequest) -> impl Future<Output = Flow> + Send {
        async move {
            let cancelled = self
                .cancels()
                .map(|cancels| cancel.request.as_ref().is_some_and(|id| cancels.cancel_id(id)));
            match cancelled {
                None => {
                    self.notification(CancelRequest::METHOD.to_owned(), cancel.params, cancel.line)
                        .await
                }
                Some(true) => CONTINUE,
                Some(false) => {
                    tracing::debug!(
                        "a `$/cancel_request` from {} for no request being answered was ignored",
                        Self::PEER
                    );
                    CONTINUE
                }
            }
        }
    }

    /// Sees every frame as it is read, before it is handled (a wire tap, a sign of life).
    fn frame_read(&mut self, _frame: &Frame) {}

    /// The connection's dialect seam, when its peer may speak another protocol version: each
    /// frame goes through [`Seam::incoming`] before it is handled. Default: none.
    fn seam(&self) -> Option<&Seam> {
        None
    }

    /// A frame over the limit was skipped: `error` (see [`over_limit`]) is the answer for the
    /// request `id` names, when its first bytes named one.
    fn too_large(&mut self, id: Option<Id>, error: RpcError) -> impl Future<Output = Flow> + Send;

    /// A frame that is not a JSON-RPC message. Default: ignored, with a warning (for a role
    /// whose peer is not answered for it).
    #[expect(
        clippy::boxed_local,
        reason = "the handler's signature: a role that keeps it takes the box"
    )]
    fn unreadable(&mut self, unreadable: Box<Unreadable>) -> impl Future<Output = Flow> + Send {
        tracing::warn!(error = %unreadable.error, "an unreadable message from {} was ignored", Self::PEER);
        std::future::ready(CONTINUE)
    }

    /// The answer to one of our requests.
    fn response(
        &mut self,
        id: Id,
        outcome: Result<Box<RawValue>, RpcError>,
        line: Vec<u8>,
    ) -> impl Future<Output = Flow> + Send;

    /// A notification.
    fn notification(
        &mut self,
        method: String,
        params: Option<Box<RawValue>>,
        line: Vec<u8>,
    ) -> impl Future<Output = Flow> + Send;

    /// A request: answer it, now or from a task.
    fn request(&mut self, request: Request) -> impl Future<Output = Flow> + Send;

    /// What [`wait`](Role::wait) completes with (`Infallible` for a role that waits on
    /// nothing but the peer).
    type Wake: Send;

    /// What the role waits on beside the peer's frames (a timer, its tasks, its writer giving
    /// up), polled before each frame. Must be cancel-safe: it is dropped whenever a frame
    /// comes first. Default: nothing.
    fn wait(&mut self) -> impl Future<Output = Self::Wake> + Send {
        std::future::pending()
    }

    /// Handles what [`wait`](Role::wait) completed with (not cancelled by a frame).
    fn woken(&mut self, wake: Self::Wake) -> impl Future<Output = Flow> + Send {
        drop(wake);
        std::future::ready(CONTINUE)
    }
}

/// The answer to a frame of `len` bytes over the `limit`, which was skipped.
pub fn over_limit(len: usize, limit: usize) -> RpcError {
    RpcError::new(
        codes::INVALID_REQUEST,
        format!("message of {len} bytes is over the limit of {limit} bytes; it was discarded"),
    )
}

/// Reads the peer's frames and hands each to `role`, until end of input, a read error, or a
/// handler's `Break`.
pub async fn serve<R: Role, T: AsyncBufRead + Unpin + Send>(role: &mut R, mut frames: FrameReader<T>) {
    let limit = frames.limit();
    loop {
        let frame = tokio::select! {
            biased;
            wake = role.wait() => {
                if role.woken(wake).await.is_break() {
                    return;
                }
                continue;
            }
            frame = frames.next() => frame,
        };
        let frame = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, "reading from {} failed", R::PEER);
                return;
            }
        };
        role.frame_read(&frame);
        // Through the seam only while it may still translate: a connection settled on the
        // runtime's own version reads as one without a seam.
        let through_seam = match (role.seam(), frame) {
            (Some(seam), Frame::Line(line)) if !seam.passes_through() => Err(seam.incoming(line)),
            (_, frame) => Ok(frame),
        };
        let flow = match through_seam {
            Ok(frame) => handle(role, frame, limit).await,
            Err(inbound) => translated(role, inbound, limit).await,
        };
        if flow.is_break() {
            return;
        }
    }
}

/// What one frame became through the connection's dialect, handed to the role in order.
async fn translated<R: Role>(role: &mut R, inbound: Vec<Inbound>, limit: usize) -> Flow {
    for item in inbound {
        let flow = match item {
            Inbound::Line(line) => handle(role, Frame::Line(line), limit).await,
            Inbound::Refused(refused) => role.unreadable(refused).await,
            Inbound::Say(line) => {
                if let Some(seam) = role.seam() {
                    seam.say(line).await;
                }
                CONTINUE
            }
        };
        if flow.is_break() {
            return flow;
        }
    }
    CONTINUE
}

/// Hands a loopback answer of the role's dialect (see [`dialect::next_loopback`]) to `role`
/// as the peer's answer, for its [`Role::woken`]; anything but an answer is dropped.
pub async fn loopback_answered<R: Role>(role: &mut R, answer: Vec<u8>) -> Flow {
    match jsonrpc::parse(&answer) {
        Ok(Incoming::Response { id, outcome }) => role.response(id, outcome, answer).await,
        _ => CONTINUE,
    }
}

/// One frame: parsed once, handed to the role.
async fn handle<R: Role>(role: &mut R, frame: Frame, limit: usize) -> Flow {
    let line = match frame {
        Frame::TooLarge { len, id } => {
            tracing::warn!(
                len,
                limit,
                ?id,
                "a message from {} over the limit was discarded",
                R::PEER
            );
            return role.too_large(id, over_limit(len, limit)).await;
        }
        Frame::Line(line) if R::BOUND_DEPTH => within_depth(line),
        Frame::Line(line) => line,
    };
    match jsonrpc::parse(&line) {
        Err(unreadable) => role.unreadable(unreadable).await,
        Ok(Incoming::Response { id, outcome }) => role.response(id, outcome, line).await,
        Ok(Incoming::Notification { method, params }) if method == CANCEL_REQUEST => {
            let request = cancelled_request(params.as_deref());
            role.cancel_request(CancelRequest { request, params, line }).await
        }
        Ok(Incoming::Notification { method, params }) => role.notification(method, params, line).await,
        Ok(Incoming::Request { id, method, params }) => {
            // Cancellable from now on: the peer's next message may be its cancel.
            let cancellable = role.cancels().map(|cancels| cancels.cancellable(&id));
            let request = Request {
                id,
                method,
                params,
                line,
                cancellable,
            };
            role.request(request).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A role that keeps what it was handed, and its requests' cancels.
    #[derive(Default)]
    struct Recorder {
        cancels: Arc<Cancels>,
        seen: Vec<String>,
        requests: Vec<Cancellable>,
    }

    impl Role for Recorder {
        const PEER: &'static str = "the test";
        type Wake = std::convert::Infallible;

        fn cancels(&self) -> Option<&Arc<Cancels>> {
            Some(&self.cancels)
        }

        async fn too_large(&mut self, id: Option<Id>, error: RpcError) -> Flow {
            self.seen.push(format!("too large {id:?}: {}", error.message));
            CONTINUE
        }

        async fn unreadable(&mut self, unreadable: Box<Unreadable>) -> Flow {
            self.seen.push(format!("unreadable {}", unreadable.error.code));
            CONTINUE
        }

        async fn response(&mut self, id: Id, _: Result<Box<RawValue>, RpcError>, _: Vec<u8>) -> Flow {
            self.seen.push(format!("response {id}"));
            CONTINUE
        }

        async fn notification(&mut self, method: String, _: Option<Box<RawValue>>, _: Vec<u8>) -> Flow {
            self.seen.push(format!("notification {method}"));
            CONTINUE
        }

        async fn request(&mut self, request: Request) -> Flow {
            self.seen.push(format!("request {} {}", request.id, request.method));
            self.requests.extend(request.cancellable);
            if request.method == "stop" {
                return ControlFlow::Break(());
            }
            CONTINUE
        }
    }

    /// One loop for every role: a frame over the limit is answered once, with the limit named;
    /// `$/cancel_request` reaches the request it names and never the role; a handler's `Break`
    /// ends the loop.
    #[tokio::test]
    async fn the_loop_answers_an_oversized_frame_handles_cancels_and_stops_when_told() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"x","params":"{}"}}"#,
            "a".repeat(200)
        );
        let input = [
            big.as_str(),
            r#"{"jsonrpc":"2.0","id":1,"method":"work"}"#,
            r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#,
            r#"{"jsonrpc":"2.0","method":"note"}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
            "not json",
            r#"{"jsonrpc":"2.0","id":3,"method":"stop"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"never read"}"#,
        ]
        .join("\n");
        let mut role = Recorder::default();
        serve(&mut role, FrameReader::new(input.as_bytes(), 128)).await;
        let too_large = format!(
            "too large Some(Number(7)): message of {} bytes is over the limit of 128 bytes; it was discarded",
            big.len()
        );
        assert_eq!(
            role.seen,
            [
                too_large.as_str(),
                "request 1 work",
                "notification note",
                "response 2",
                "unreadable -32700",
                "request 3 stop"
            ]
        );
        assert!(role.requests[0].is_cancelled(), "the cancel reached request 1");
        assert!(!role.requests[1].is_cancelled());
    }

    /// A role that answers nothing the peer may cancel (a bridge's face, which passes the
    /// peer's cancels on): `$/cancel_request` reaches it as a notification, frame and all.
    struct Passing(Vec<String>);

    impl Role for Passing {
        const PEER: &'static str = "the test";
        type Wake = std::convert::Infallible;

        async fn too_large(&mut self, _: Option<Id>, _: RpcError) -> Flow {
            CONTINUE
        }

        async fn response(&mut self, _: Id, _: Result<Box<RawValue>, RpcError>, _: Vec<u8>) -> Flow {
            CONTINUE
        }

        async fn notification(&mut self, method: String, params: Option<Box<RawValue>>, line: Vec<u8>) -> Flow {
            let params = params.map_or("none".into(), |params| params.get().to_owned());
            self.0.push(format!("{method} {params} {}", line.len()));
            CONTINUE
        }

        async fn request(&mut self, request: Request) -> Flow {
            assert!(request.cancellable.is_none(), "no cancels: nothing made cancellable");
            CONTINUE
        }
    }

    #[tokio::test]
    async fn a_role_without_cancels_gets_the_peers_cancel_as_a_notification() {
        let cancel = r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#;
        let input = [r#"{"jsonrpc":"2.0","id":1,"method":"work"}"#, cancel].join("\n");
        let mut role = Passing(Vec::new());
        serve(&mut role, FrameReader::new(input.as_bytes(), 1024)).await;
        assert_eq!(
            role.0,
            [format!(r#"$/cancel_request {{"requestId":1}} {}"#, cancel.len())]
        );
    }
}
