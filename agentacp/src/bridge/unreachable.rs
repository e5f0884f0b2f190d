//! A bridge whose agent cannot be started or reached (no such program, a refused connection, a
//! `401`): rather than exit without a word, leaving the editor waiting on `initialize` until
//! its own timeout, it answers the editor's requests with the reason, then stops.
//!
//! Each request the editor sends (`initialize` first, but any) is answered with `-32603`
//! (internal error) whose message names the bridge, the program or URL, and the cause:
//! "governance-bridge cannot start the agent `codex-acp`: no program of that name on PATH".
//! Notifications and answers are dropped. The bridge listens at most [`LISTEN_FOR`]; once it
//! has answered a request, only [`LINGER`] more for requests sent right behind it; and it
//! stops at once at end of input.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::time::Instant;

use serde_json::value::RawValue;

use crate::connection::{self, CONTINUE, Flow, Request, Role};
use crate::jsonrpc::frame::FrameReader;
use crate::jsonrpc::{self, Id, RpcError, Unreadable, codes};

/// The longest the editor is listened to when the agent cannot be started or reached.
pub(super) const LISTEN_FOR: Duration = Duration::from_secs(5);
/// After an answer: how long requests sent right behind the answered one are still waited for.
pub(super) const LINGER: Duration = Duration::from_millis(250);

/// Answers every request from `input` on `output` with `-32603` and `message`, until end of
/// input, or [`LISTEN_FOR`] (and, once a request is answered, [`LINGER`] after the last
/// answer). Each write is bounded by `write_timeout`; nothing here fails.
pub(super) async fn answer_with<R, W>(
    message: &str,
    input: R,
    output: W,
    max_frame_bytes: usize,
    write_timeout: Duration,
) where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let frames = FrameReader::new(BufReader::new(input), max_frame_bytes);
    let mut role = Unreachable {
        output,
        error: RpcError::new(codes::INTERNAL_ERROR, message),
        until: Instant::now() + LISTEN_FOR,
        write_timeout,
    };
    // End of input, an unreadable input, time's up, or an editor that takes no answers.
    connection::serve(&mut role, frames).await;
    let _ = tokio::time::timeout(write_timeout, role.output.shutdown()).await;
}

/// The editor face of a bridge without an agent: a role on the connection core that answers
/// every request with the reason.
struct Unreachable<W> {
    output: W,
    /// What every request is answered with.
    error: RpcError,
    /// When to stop listening.
    until: Instant,
    write_timeout: Duration,
}

impl<W: AsyncWrite + Unpin + Send> Unreachable<W> {
    /// Answers request `id` with the reason.
    async fn answer(&mut self, id: &Id) -> Flow {
        let answer = jsonrpc::encode_error(id, &self.error);
        self.send(answer).await
    }

    /// Writes `answer` at once, bounded by the write timeout; `Break` when the editor does not
    /// take it.
    async fn send(&mut self, answer: Vec<u8>) -> Flow {
        let written = tokio::time::timeout(self.write_timeout, async {
            self.output.write_all(&answer).await?;
            self.output.flush().await
        })
        .await;
        if !matches!(written, Ok(Ok(()))) {
            tracing::debug!("the editor does not take our answers; stopping");
            return Flow::Break(());
        }
        self.until = self.until.min(Instant::now() + LINGER);
        CONTINUE
    }
}

impl<W: AsyncWrite + Unpin + Send> Role for Unreachable<W> {
    const PEER: &'static str = "the editor";
    type Wake = ();

    fn wait(&mut self) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until(self.until)
    }

    async fn woken(&mut self, (): ()) -> Flow {
        Flow::Break(())
    }

    async fn too_large(&mut self, id: Option<Id>, _: RpcError) -> Flow {
        self.answer(&id.unwrap_or(Id::Null)).await
    }

    async fn unreadable(&mut self, unreadable: Box<Unreadable>) -> Flow {
        self.send(jsonrpc::encode_error(&unreadable.id, &unreadable.error))
            .await
    }

    async fn response(&mut self, _: Id, _: Result<Box<RawValue>, RpcError>, _: Vec<u8>) -> Flow {
        CONTINUE
    }

    async fn notification(&mut self, _: String, _: Option<Box<RawValue>>, _: Vec<u8>) -> Flow {
        CONTINUE
    }

    async fn request(&mut self, request: Request) -> Flow {
        tracing::debug!(id = %request.id, method = request.method, "answered with the reason the agent is not there");
        self.answer(&request.id).await
    }
}
