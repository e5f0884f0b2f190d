//! Printing the tour: numbered steps that each pass or fail, and the `--wire` view.

use std::fmt;
use std::future::Future;

use agentacp::client::Direction;

use crate::STEP_TIMEOUT;

/// Runs the tour's steps in order, numbering them.
#[derive(Debug, Default)]
pub struct Steps {
    started: usize,
    passed: usize,
}

/// The step that misbehaved, and how.
#[derive(Debug)]
pub struct Failure {
    number: usize,
    title: String,
    reason: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {} ({}): {}", self.number, self.title, self.reason)
    }
}

impl Steps {
    /// Prints the step's heading, runs it (for at most [`STEP_TIMEOUT`]) and prints whether
    /// it passed.
    pub async fn run<T>(&mut self, title: &str, step: impl Future<Output = Result<T, String>>) -> Result<T, Failure> {
        self.started += 1;
        let number = self.started;
        println!("\n{number}. {title}");
        let outcome = match tokio::time::timeout(STEP_TIMEOUT, step).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("no progress within {STEP_TIMEOUT:?}")),
        };
        match outcome {
            Ok(value) => {
                println!("  ✓ passed");
                self.passed += 1;
                Ok(value)
            }
            Err(reason) => {
                println!("  ✗ {reason}");
                Err(Failure {
                    number,
                    title: title.to_string(),
                    reason,
                })
            }
        }
    }

    /// How many steps passed.
    pub fn passed(&self) -> usize {
        self.passed
    }
}

/// Consecutive `session/update`s from the agent printed before the rest are only counted.
const SHOWN_UPDATES: usize = 6;
/// Longest message printed whole; longer ones are cut and their size given.
const SHOWN_BYTES: usize = 320;

/// Prints the messages the client's wire tap sees, eliding long runs of updates.
#[derive(Debug, Default)]
pub struct WirePrinter {
    /// `session/update`s from the agent in a row.
    updates_in_a_row: usize,
    /// Of those, how many were not printed.
    elided: usize,
}

impl WirePrinter {
    /// Prints one message (or counts it, in a long run of updates).
    pub fn show(&mut self, direction: Direction, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let is_update = direction == Direction::FromAgent && text.contains("\"method\":\"session/update\"");
        if is_update {
            self.updates_in_a_row += 1;
            if self.updates_in_a_row > SHOWN_UPDATES {
                self.elided += 1;
                return;
            }
        } else {
            self.end_run();
        }
        let arrow = match direction {
            Direction::ToAgent => "→",
            Direction::FromAgent => "←",
        };
        println!("    {arrow} {}", cut(&text, SHOWN_BYTES));
    }

    fn end_run(&mut self) {
        if self.elided > 0 {
            println!("    ← … {} more session/update notifications", self.elided);
        }
        self.updates_in_a_row = 0;
        self.elided = 0;
    }
}

/// `text`, or its first `limit` bytes (at a character boundary) and its size.
fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("ééé", 3), "é… (6 bytes)");
    }
}
