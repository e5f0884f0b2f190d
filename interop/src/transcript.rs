//! The wire transcript: every line a client wrote to the agent or read from it, kept for
//! assertions on raw messages and for failure messages.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// How many lines the printed tail of a transcript shows.
const TAIL: usize = 60;
/// How many bytes of each line a printed transcript shows.
const LINE_BYTES: usize = 400;
/// How many recent lines are kept in full.
const KEEP: usize = 2000;

/// Which way a line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client → agent (the agent's stdin).
    Sent,
    /// Agent → client (the agent's stdout).
    Received,
}

#[derive(Debug, Default)]
struct Inner {
    recent: VecDeque<(Direction, String)>,
    sent: usize,
    received: usize,
    responses: Vec<Value>,
}

/// A shared, append-only record of the lines on the wire. Cloning shares it.
///
/// It keeps the last 2,000 lines and, in full, every response the agent sent (a received
/// object with an `id` and no `method`), so a test can count the answers to one request id.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    inner: Arc<Mutex<Inner>>,
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one line (without its newline).
    pub fn record(&self, direction: Direction, line: &str) {
        let response = (direction == Direction::Received)
            .then(|| serde_json::from_str::<Value>(line).ok())
            .flatten()
            .filter(|v| v.get("id").is_some() && v.get("method").is_none());
        let mut inner = self.lock();
        match direction {
            Direction::Sent => inner.sent += 1,
            Direction::Received => inner.received += 1,
        }
        if let Some(response) = response {
            inner.responses.push(response);
        }
        if inner.recent.len() == KEEP {
            inner.recent.pop_front();
        }
        // A huge frame is kept as its beginning: enough to see what it was.
        let kept = if line.len() > 65_536 {
            crate::shorten(line, 4096)
        } else {
            line.to_string()
        };
        inner.recent.push_back((direction, kept));
    }

    /// Every response the agent sent whose `id` equals `id`, in arrival order.
    pub fn responses_to(&self, id: &Value) -> Vec<Value> {
        self.lock()
            .responses
            .iter()
            .filter(|r| r.get("id") == Some(id))
            .cloned()
            .collect()
    }

    /// Every response the agent sent, in arrival order.
    pub fn responses(&self) -> Vec<Value> {
        self.lock().responses.clone()
    }

    /// The last lines received from the agent, parsed (lines that are not JSON are skipped).
    pub fn received_values(&self) -> Vec<Value> {
        self.lock()
            .recent
            .iter()
            .filter(|(d, _)| *d == Direction::Received)
            .filter_map(|(_, line)| serde_json::from_str(line).ok())
            .collect()
    }

    /// The number of lines sent and received so far.
    pub fn counts(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.sent, inner.received)
    }

    /// The last lines, one per row, `>>` for sent and `<<` for received, each shortened.
    pub fn tail(&self) -> String {
        let inner = self.lock();
        let mut out = format!(
            "wire transcript ({} lines sent, {} received; last {} shown):\n",
            inner.sent,
            inner.received,
            TAIL.min(inner.recent.len())
        );
        let skip = inner.recent.len().saturating_sub(TAIL);
        for (direction, line) in inner.recent.iter().skip(skip) {
            let arrow = match direction {
                Direction::Sent => ">>",
                Direction::Received => "<<",
            };
            let _ = writeln!(out, "  {arrow} {}", crate::shorten(line, LINE_BYTES));
        }
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}
