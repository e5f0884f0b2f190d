//! A stdio MCP server's answers, read before rmcp reads them: one nested deeper than rmcp's
//! reader accepts ([`PEER_READ_DEPTH`]) or longer than [`MAX_LINE_BYTES`] would be dropped by
//! rmcp without a word, and the call would wait out its timeout. [`guard`] passes every other
//! line on unchanged, and answers such a line's request id at once with an error that says
//! why (one without an id, a notification, is dropped with a warning).

use tokio::io::{AsyncRead, AsyncWriteExt, BufReader, DuplexStream};

use crate::audit::{PEER_READ_DEPTH, text_depth};
use crate::jsonrpc::frame::{Frame, FrameReader, sniff_id};
use crate::jsonrpc::{self, RpcError, codes};

/// The longest line of a server's that is read (rmcp's own limit).
pub(crate) const MAX_LINE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How many bytes may wait between the guard and rmcp.
const PIPE_BYTES: usize = 64 * 1024;

/// The server's output `from`, as rmcp is to read it: read in a task of its own, which ends
/// when `from` ends or the reader returned is dropped.
pub(crate) fn guard(server: &str, from: impl AsyncRead + Unpin + Send + 'static) -> DuplexStream {
    let (reader, mut to) = tokio::io::duplex(PIPE_BYTES);
    let server = server.to_string();
    tokio::spawn(async move {
        let mut frames = FrameReader::new(BufReader::new(from), MAX_LINE_BYTES);
        loop {
            let line = match frames.next().await {
                Ok(Some(frame)) => checked(&server, frame),
                Ok(None) => return,
                Err(error) => {
                    tracing::debug!(server, %error, "reading the MCP server's output failed");
                    return;
                }
            };
            let Some(mut line) = line else { continue };
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            if to.write_all(&line).await.is_err() {
                return;
            }
        }
    });
    reader
}

/// The line to pass on for `frame`: itself, an error answer to its id, or nothing.
pub(super) fn checked(server: &str, frame: Frame) -> Option<Vec<u8>> {
    let (why, id) = match frame {
        Frame::Line(line) => {
            let levels = text_depth(&line);
            if levels <= PEER_READ_DEPTH {
                return Some(line);
            }
            (
                format!(
                    "the MCP server `{server}`'s answer nests too deep: {levels} levels, where at most {PEER_READ_DEPTH} are read"
                ),
                sniff_id(&line),
            )
        }
        Frame::TooLarge { len, id } => (
            format!(
                "the MCP server `{server}`'s answer is too large: {len} bytes, where at most {MAX_LINE_BYTES} are read"
            ),
            id,
        ),
    };
    tracing::warn!(server, "{why}");
    let id = id?;
    Some(jsonrpc::encode_error(&id, &RpcError::new(codes::INTERNAL_ERROR, why)))
}

/// A JSON-RPC answer (`id` is `"id":…,` or empty) whose result nests `levels` arrays deep.
#[cfg(test)]
pub(super) fn nested_answer(id: &str, levels: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0",{id}"result":{}1{}}}"#,
        "[".repeat(levels),
        "]".repeat(levels)
    )
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    /// A line too deep for rmcp is answered with an error under its id; the lines around it
    /// pass unchanged, a notification too deep is dropped.
    #[tokio::test]
    async fn a_line_too_deep_is_answered_with_an_error_and_the_others_pass() {
        let deep = |id: &str| nested_answer(id, 500);
        let input = format!(
            "{}\n{}\n{}\n",
            deep(r#""id":7,"#),
            deep(""),
            r#"{"jsonrpc":"2.0","id":8,"result":{}}"#
        );
        let mut read = String::new();
        guard("s", std::io::Cursor::new(input.into_bytes()))
            .read_to_string(&mut read)
            .await
            .unwrap();
        let lines: Vec<serde_json::Value> = read.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2, "{read}");
        assert_eq!(lines[0]["id"], 7);
        let message = lines[0]["error"]["message"].as_str().unwrap();
        assert!(message.contains("`s`'s answer nests too deep: 501 levels"), "{message}");
        assert_eq!(lines[1], serde_json::json!({"jsonrpc": "2.0", "id": 8, "result": {}}));
    }
}
