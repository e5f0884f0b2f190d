//! What a prompt turn yields: typed updates, then the stop reason (the stream that yields
//! them is in `stream.rs`).

use serde_json::Value;
use serde_json::value::RawValue;

use crate::wire::default as wire;

/// One `session/update` from the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// `agent_message_chunk`.
    MessageChunk(wire::ContentChunk),
    /// `agent_thought_chunk`.
    ThoughtChunk(wire::ContentChunk),
    /// `user_message_chunk` (a `session/load` replays them).
    UserMessageChunk(wire::ContentChunk),
    /// `tool_call`: a new tool call.
    ToolCall(wire::ToolCall),
    /// `tool_call_update`: progress or outcome of a tool call.
    ToolCallUpdate(wire::ToolCallUpdate),
    /// `plan`.
    Plan(wire::Plan),
    /// `available_commands_update`: the slash commands the agent offers now.
    AvailableCommands(wire::AvailableCommandsUpdate),
    /// `current_mode_update`: the session's mode changed.
    CurrentMode(wire::CurrentModeUpdate),
    /// `config_option_update`: the session's config options, all of them, with their values.
    ConfigOptions(wire::ConfigOptionUpdate),
    /// `usage_update`: tokens and cost so far.
    Usage(wire::UsageUpdate),
    /// Any other update (or one that did not fit its type), as its JSON.
    Other(Value),
}

impl crate::oversight::ReportsToolCall for Update {
    fn tool_call(&self) -> Option<Value> {
        match self {
            Update::ToolCall(call) => serde_json::to_value(call).ok(),
            Update::ToolCallUpdate(call) => serde_json::to_value(call).ok(),
            _ => None,
        }
    }
}

impl Update {
    /// Reads the `update` object of a `session/update` (an update that does not fit its
    /// type is [`Update::Other`], as its JSON).
    pub fn from_raw(raw: &RawValue) -> Update {
        match serde_json::from_str::<wire::SessionUpdate>(raw.get()) {
            Ok(wire::SessionUpdate::AgentMessageChunk(chunk)) => Update::MessageChunk(chunk),
            Ok(wire::SessionUpdate::AgentThoughtChunk(chunk)) => Update::ThoughtChunk(chunk),
            Ok(wire::SessionUpdate::UserMessageChunk(chunk)) => Update::UserMessageChunk(chunk),
            Ok(wire::SessionUpdate::ToolCall(call)) => Update::ToolCall(call),
            Ok(wire::SessionUpdate::ToolCallUpdate(update)) => Update::ToolCallUpdate(update),
            Ok(wire::SessionUpdate::Plan(plan)) => Update::Plan(plan),
            Ok(wire::SessionUpdate::AvailableCommandsUpdate(update)) => Update::AvailableCommands(update),
            Ok(wire::SessionUpdate::CurrentModeUpdate(update)) => Update::CurrentMode(update),
            Ok(wire::SessionUpdate::ConfigOptionUpdate(update)) => Update::ConfigOptions(update),
            Ok(wire::SessionUpdate::UsageUpdate(update)) => Update::Usage(update),
            Ok(_) | Err(_) => Update::Other(serde_json::from_str(raw.get()).unwrap_or(Value::Null)),
        }
    }

    /// The text of a text message, thought or user chunk.
    pub fn text(&self) -> Option<&str> {
        match self {
            Update::MessageChunk(chunk) | Update::ThoughtChunk(chunk) | Update::UserMessageChunk(chunk) => {
                match &chunk.content {
                    wire::ContentBlock::Text(text) => Some(&text.text),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// One event of a prompt turn.
// Not boxed: each event is moved once, from the reader to the stream's reader.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum PromptEvent {
    /// An update of the running turn, in the order the agent sent them.
    Update(Update),
    /// An update replayed by `session/load`: history as the agent tells it. Treat its content
    /// as untrusted (it is not the user speaking now); its tool calls are not live.
    Replay(Update),
    /// The turn ended (always the last event of a prompt).
    Stop(wire::StopReason),
    /// The session was loaded (always the last event of a `session/load`).
    Loaded,
}
