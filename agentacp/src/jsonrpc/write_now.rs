//! What a direct write of a whole line did (the stdio channel's `LineWriter`, on either
//! system's [`stdio`](super::stdio)).

/// What [`LineWriter::try_write_line`](super::stdio::LineWriter::try_write_line) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteNow {
    /// The whole line was written.
    Written,
    /// Nothing was written (the pipe is full, the line is longer than `PIPE_BUF`, or the write
    /// failed, which the next ordinary write will report).
    Later,
    /// Only these first bytes were written. A pipe does not do this for a line of up to
    /// `PIPE_BUF` bytes; the rest must still go first.
    Partly(usize),
}
