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

use crate::jsonrpc::frame::{Frame, FrameReader};
use crate::jsonrpc::{self, Id, Incoming, RpcError, codes};

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
    mut output: W,
    max_frame_bytes: usize,
    write_timeout: Duration,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut frames = FrameReader::new(BufReader::new(input), max_frame_bytes);
    let mut until = Instant::now() + LISTEN_FOR;
    let error = RpcError::new(codes::INTERNAL_ERROR, message);
    loop {
        let frame = match tokio::time::timeout_at(until, frames.next()).await {
            Ok(Ok(Some(frame))) => frame,
            // End of input, an unreadable input, or time's up.
            Ok(Ok(None) | Err(_)) | Err(_) => break,
        };
        let answer = match frame {
            Frame::TooLarge { id, .. } => jsonrpc::encode_error(&id.unwrap_or(Id::Null), &error),
            Frame::Line(line) => match jsonrpc::parse(&line) {
                Ok(Incoming::Request { id, method, .. }) => {
                    tracing::debug!(%id, method, "answered with the reason the agent is not there");
                    jsonrpc::encode_error(&id, &error)
                }
                Ok(Incoming::Notification { .. } | Incoming::Response { .. }) => continue,
                Err(unreadable) => jsonrpc::encode_error(&unreadable.id, &unreadable.error),
            },
        };
        let written = tokio::time::timeout(write_timeout, async {
            output.write_all(&answer).await?;
            output.flush().await
        })
        .await;
        if !matches!(written, Ok(Ok(()))) {
            tracing::debug!("the editor does not take our answers; stopping");
            return;
        }
        until = until.min(Instant::now() + LINGER);
    }
    let _ = tokio::time::timeout(write_timeout, output.shutdown()).await;
}
