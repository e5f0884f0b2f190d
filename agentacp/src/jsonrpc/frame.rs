//! Reading newline-delimited frames with a size limit.
//!
//! A frame over the limit is skipped without being buffered whole: only its first
//! [`HEAD_BYTES`] are kept, to find its `id` so the error can answer the right request.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::Id;

/// The default frame limit (the largest JSON-RPC message accepted): 4 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// How much of an oversized frame is kept to look for its `id`.
pub const HEAD_BYTES: usize = 64 * 1024;

/// One frame read from the peer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A line, without its line ending.
    Line(Vec<u8>),
    /// A line longer than the limit, skipped.
    TooLarge {
        /// Its length in bytes.
        len: usize,
        /// Its `id`, when one could be read from its first bytes.
        id: Option<Id>,
    },
}

/// Reads frames from a buffered reader.
///
/// [`next`](FrameReader::next) is cancel-safe: a frame read in part when its future is dropped
/// (as `tokio::select!` does whenever another branch wins) is kept, and the next call goes on
/// from there. Lines arrive in pieces whenever the peer writes them in pieces or they are
/// longer than a pipe's buffer.
#[derive(Debug)]
pub struct FrameReader<R> {
    reader: R,
    limit: usize,
    partial: Partial,
}

/// The frame being read: what has been taken from the reader so far.
#[derive(Debug, Default)]
struct Partial {
    /// The bytes kept (all of them, or the first [`HEAD_BYTES`] of an oversized frame).
    line: Vec<u8>,
    /// Its length so far.
    len: usize,
    oversized: bool,
    /// Whether any byte of it was read (so end of input ends it rather than the stream).
    started: bool,
}

impl<R: AsyncBufRead + Unpin> FrameReader<R> {
    /// Frames of at most `limit` bytes (the line ending not counted).
    pub fn new(reader: R, limit: usize) -> Self {
        FrameReader {
            reader,
            limit,
            partial: Partial::default(),
        }
    }

    /// The limit frames are read with, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The next frame; `None` at end of input. Blank lines are skipped; a last line without
    /// a line ending is still a frame. Cancel-safe (see [`FrameReader`]).
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            match self.read_one().await? {
                Some(Frame::Line(line)) if line.iter().all(u8::is_ascii_whitespace) => continue,
                other => return Ok(other),
            }
        }
    }

    async fn read_one(&mut self) -> std::io::Result<Option<Frame>> {
        // Every byte consumed from the reader is in `self.partial` before the next await.
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                if !self.partial.started {
                    return Ok(None);
                }
                break;
            }
            let partial = &mut self.partial;
            partial.started = true;
            let (chunk, consumed, done) = match available.iter().position(|&b| b == b'\n') {
                Some(end) => (&available[..end], end + 1, true),
                None => (available, available.len(), false),
            };
            partial.len += chunk.len();
            if !partial.oversized && partial.len > self.limit {
                partial.oversized = true;
            }
            let keep = if partial.oversized {
                HEAD_BYTES.saturating_sub(partial.line.len())
            } else {
                chunk.len()
            };
            partial.line.extend_from_slice(&chunk[..keep.min(chunk.len())]);
            self.reader.consume(consumed);
            if done {
                break;
            }
        }
        let Partial {
            mut line,
            len,
            oversized,
            ..
        } = std::mem::take(&mut self.partial);
        if line.last() == Some(&b'\r') && !oversized {
            line.pop();
        }
        Ok(Some(if oversized {
            Frame::TooLarge {
                len,
                id: sniff_id(&line),
            }
        } else {
            Frame::Line(line)
        }))
    }
}

/// The frame `line` as it may be passed on to a peer: unchanged when it nests within
/// [`MAX_WRITE_DEPTH`](acp_audit::MAX_WRITE_DEPTH) levels, else with what nests deeper kept as
/// its JSON text (`{"$deepJson": "…"}`, [`acp_audit::bound_text`]), so that every peer's JSON
/// reader reads it. Read without recursion, however deep it nests.
pub fn within_depth(line: Vec<u8>) -> Vec<u8> {
    match std::str::from_utf8(&line).ok().and_then(acp_audit::bound_text) {
        Some(bounded) => {
            tracing::debug!(len = line.len(), "a frame nested too deep for its peer was bounded");
            bounded.into_bytes()
        }
        None => line,
    }
}

/// Finds the top-level `"id"` of a (possibly truncated) JSON object from its first bytes.
pub fn sniff_id(head: &[u8]) -> Option<Id> {
    let mut scan = Scanner { bytes: head, at: 0 };
    scan.skip_ws();
    scan.eat(b'{')?;
    loop {
        scan.skip_ws();
        let key_start = scan.at;
        scan.skip_string()?;
        let key = &head[key_start..scan.at];
        scan.skip_ws();
        scan.eat(b':')?;
        scan.skip_ws();
        let value_start = scan.at;
        scan.skip_value()?;
        if key == b"\"id\"" {
            return serde_json::from_slice(&head[value_start..scan.at]).ok();
        }
        scan.skip_ws();
        match scan.next()? {
            b',' => continue,
            _ => return None,
        }
    }
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn next(&mut self) -> Option<u8> {
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.at += 1;
        }
    }

    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => {
                    self.next()?;
                }
                _ => {}
            }
        }
    }

    /// Skips one value; `None` if the input ends inside it.
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => self.skip_string()?,
                        b'{' | b'[' => {
                            depth += 1;
                            self.at += 1;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            self.at += 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        _ => self.at += 1,
                    }
                }
            }
            _ => {
                while !matches!(self.peek()?, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                    self.at += 1;
                }
                Some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line that arrives in two pieces, with the read of the first piece abandoned (as a
    /// `select!` abandons it when another branch is ready first): nothing may be lost. Before
    /// the fix the first piece was dropped with the future, and the server answered the rest
    /// with a parse error — and never the request (found by the governed server's
    /// many-sessions test: a request went unanswered about once in three runs).
    #[tokio::test]
    async fn a_read_abandoned_mid_line_loses_nothing() {
        use tokio::io::AsyncWriteExt;
        let (mut writer, reader) = tokio::io::duplex(64);
        let mut frames = FrameReader::new(tokio::io::BufReader::new(reader), 1024);
        writer.write_all(br#"{"jsonrpc":"2.0","#).await.unwrap();
        // Poll `next` once (it takes the first piece, then waits for more) and drop it.
        tokio::select! {
            biased;
            frame = frames.next() => panic!("no whole line yet: {frame:?}"),
            () = std::future::ready(()) => {}
        }
        writer.write_all(b"\"id\":1}\n").await.unwrap();
        assert_eq!(
            frames.next().await.unwrap(),
            Some(Frame::Line(br#"{"jsonrpc":"2.0","id":1}"#.to_vec()))
        );
    }

    async fn frames(input: &[u8], limit: usize) -> Vec<Frame> {
        // A tiny buffer so that frames span many reads.
        let reader = tokio::io::BufReader::with_capacity(7, input);
        let mut frames = FrameReader::new(reader, limit);
        let mut out = Vec::new();
        while let Some(frame) = frames.next().await.unwrap() {
            out.push(frame);
        }
        out
    }

    #[tokio::test]
    async fn lines_are_split_on_newlines_and_crlf_is_trimmed() {
        let got = frames(b"{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":3}", 100).await;
        assert_eq!(
            got,
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::Line(b"{\"b\":2}".to_vec()),
                Frame::Line(b"{\"c\":3}".to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn an_oversized_frame_is_skipped_and_the_next_one_read() {
        let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"params\":\"{}\"}}\n", "x".repeat(500));
        let input = format!("{big}{{\"id\":8}}\n");
        let got = frames(input.as_bytes(), 100).await;
        assert_eq!(
            got,
            vec![
                Frame::TooLarge {
                    len: big.len() - 1,
                    id: Some(Id::Number(7)),
                },
                Frame::Line(b"{\"id\":8}".to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn a_frame_exactly_at_the_limit_is_accepted() {
        let got = frames(b"0123456789\n", 10).await;
        assert_eq!(got, vec![Frame::Line(b"0123456789".to_vec())]);
        let got = frames(b"0123456789X\n", 10).await;
        assert!(matches!(got[0], Frame::TooLarge { len: 11, id: None }));
    }

    #[test]
    fn sniffing_finds_the_top_level_id_only() {
        let id = |text: &str| sniff_id(text.as_bytes());
        assert_eq!(id(r#"{"id":"abc","method":"x"}"#), Some(Id::String("abc".into())));
        assert_eq!(
            id(r#"{"params":{"id":1,"x":[{"id":2}],"s":"\"id\":3"},"id":4}"#),
            Some(Id::Number(4))
        );
        assert_eq!(id(r#"{"method":"x","params":{"text":"aaaa"#), None);
        assert_eq!(id(r#" { "id" : 5 ,"#), Some(Id::Number(5)));
        assert_eq!(id("not json"), None);
    }
}
