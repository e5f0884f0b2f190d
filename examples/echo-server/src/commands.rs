//! Reading a prompt as a command, shared by the example servers (the governed example
//! includes this file with `#[path]`). See `docs/design/runtime.md` for the commands.

use agentacp::server::Turn;
use agentacp::tier::Tier;
use agentacp::wire::default as wire;

/// `/stream N SIZE`: N numbered chunks of SIZE bytes.
pub async fn stream<T: Tier>(turn: &mut Turn<'_, T>, count: u64, size: usize) -> agentacp::Result<()> {
    for index in 0..count {
        turn.message(numbered_chunk(index, size)).await?;
    }
    Ok(())
}

/// `/forever`: `tick 0`, `tick 1`, … one a millisecond, until the turn is cancelled (then the
/// send fails with `Error::Cancelled`, which ends the turn). Paced like a fast model's stream:
/// unpaced, it floods a slow client with tens of thousands of chunks before its cancel gets
/// through, and a `session/load` afterwards replays them all.
pub async fn forever<T: Tier>(turn: &mut Turn<'_, T>) -> agentacp::Result<()> {
    let mut pace = tokio::time::interval(std::time::Duration::from_millis(1));
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for tick in 0u64.. {
        pace.tick().await;
        turn.message(format!("tick {tick}")).await?;
    }
    Ok(())
}

/// The text of the prompt's first text block (empty if there is none).
pub fn first_text(request: &wire::PromptRequest) -> String {
    request
        .prompt
        .iter()
        .find_map(|block| match block {
            wire::ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// What a prompt asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// `/stream N SIZE`.
    Stream {
        /// How many chunks.
        count: u64,
        /// Bytes per chunk.
        size: usize,
    },
    /// `/forever`.
    Forever,
    /// `/tool NAME ARGS-JSON`.
    Tool {
        /// The tool.
        name: String,
        /// Its arguments (`{}` when absent or unreadable).
        arguments: agentacp::prelude::Value,
    },
    /// Anything else.
    Echo,
}

impl Command {
    pub fn parse(text: &str) -> Command {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["/stream", count, size] => match (count.parse(), size.parse()) {
                (Ok(count), Ok(size)) => Command::Stream { count, size },
                _ => Command::Echo,
            },
            ["/forever"] => Command::Forever,
            ["/tool", name, ..] => {
                let rest = text.trim_start().trim_start_matches("/tool").trim_start();
                let arguments = rest[name.len()..].trim();
                Command::Tool {
                    name: name.to_string(),
                    arguments: serde_json_or_empty(arguments),
                }
            }
            _ => Command::Echo,
        }
    }
}

fn serde_json_or_empty(text: &str) -> agentacp::prelude::Value {
    agentacp::__private::serde_json::from_str(text).unwrap_or_else(|_| agentacp::prelude::json!({}))
}

/// Chunk `index`: the index zero-padded to 8 digits, then `.` up to `size` bytes.
pub fn numbered_chunk(index: u64, size: usize) -> String {
    let mut chunk = format!("{index:08}");
    if chunk.len() < size {
        chunk.extend(std::iter::repeat_n('.', size - chunk.len()));
    }
    chunk
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_from_the_prompt_text() {
        assert_eq!(Command::parse("/stream 3 64"), Command::Stream { count: 3, size: 64 });
        assert_eq!(Command::parse("/forever"), Command::Forever);
        assert_eq!(Command::parse("/stream x 64"), Command::Echo);
        assert_eq!(Command::parse("hello"), Command::Echo);
        assert_eq!(
            Command::parse("/tool write-file {\"path\": \"a b\"}"),
            Command::Tool {
                name: "write-file".into(),
                arguments: agentacp::prelude::json!({"path": "a b"}),
            }
        );
    }

    #[test]
    fn chunks_are_numbered_and_padded() {
        assert_eq!(numbered_chunk(7, 12), "00000007....");
        assert_eq!(numbered_chunk(7, 4), "00000007");
    }
}
