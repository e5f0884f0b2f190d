//! One-line renderings for people: every `session/update` kind of the default revision
//! ([`Update::one_line`]), and long text clipped to a bounded single line ([`clip`]).

use serde::Serialize;
use serde_json::Value;

use super::events::Update;
use crate::wire::default as wire;

/// The longest [`Update::one_line`], in characters.
pub const ONE_LINE_MAX: usize = 200;

/// `text` on one line: every run of whitespace (newlines included) becomes one space, and a
/// text longer than `max` characters is cut, ending in `…`.
pub fn clip(text: &str, max: usize) -> String {
    let mut chars = text
        .split_whitespace()
        .enumerate()
        .flat_map(|(n, word)| (n > 0).then_some(' ').into_iter().chain(word.chars()))
        // Control characters other than whitespace would break the line on a terminal.
        .map(|c| if c.is_control() { '\u{fffd}' } else { c });
    let mut line: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        let cut = line
            .char_indices()
            .nth(max.saturating_sub(1))
            .map_or(line.len(), |(at, _)| at);
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// A unit-like wire value (a status, a kind, a severity) as its wire string.
fn tag(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_string(),
    }
}

fn content(block: &wire::ContentBlock) -> String {
    match block {
        wire::ContentBlock::Text(text) => text.text.clone(),
        wire::ContentBlock::Image(image) => format!("<image {}>", image.mime_type),
        wire::ContentBlock::Audio(audio) => format!("<audio {}>", audio.mime_type),
        wire::ContentBlock::ResourceLink(link) => format!("<link {}>", link.uri),
        wire::ContentBlock::Resource(resource) => match &resource.resource {
            wire::EmbeddedResourceResource::TextResourceContents(text) => format!("<resource {}>", text.uri),
            wire::EmbeddedResourceResource::BlobResourceContents(blob) => format!("<resource {}>", blob.uri),
        },
    }
}

fn patch<T>(value: &crate::wire::support::Patch<T>, show: impl Fn(&T) -> String) -> Option<String> {
    match value {
        crate::wire::support::Patch::Unchanged => None,
        crate::wire::support::Patch::Clear => Some("(cleared)".to_string()),
        crate::wire::support::Patch::Set(value) => Some(show(value)),
    }
}

/// A list of names, at most a few shown.
fn names<'a>(all: impl ExactSizeIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 8;
    let total = all.len();
    let mut shown: Vec<&str> = all.take(SHOWN).collect();
    let more = format!("+{} more", total.saturating_sub(SHOWN));
    if total > SHOWN {
        shown.push(&more);
    }
    shown.join(", ")
}

/// One session update, rendered (before clipping).
fn render(update: &wire::SessionUpdate) -> String {
    use wire::SessionUpdate as U;
    match update {
        U::UserMessageChunk(chunk) => format!("[user] {}", content(&chunk.content)),
        U::AgentMessageChunk(chunk) => format!("[agent] {}", content(&chunk.content)),
        U::AgentThoughtChunk(chunk) => format!("[thought] {}", content(&chunk.content)),
        U::ToolCall(call) => {
            let mut line = format!("[tool] {}", call.title);
            if let Some(kind) = &call.kind {
                line.push_str(&format!(" {{{}}}", tag(kind)));
            }
            let status = call.status.as_ref().map_or_else(|| "pending".to_string(), tag);
            line.push_str(&format!(" ({status})"));
            line
        }
        U::ToolCallUpdate(call) => {
            let name = call.title.as_deref().unwrap_or(call.tool_call_id.as_str());
            let status = call.status.as_ref().map_or_else(|| "updated".to_string(), tag);
            format!("[tool] {name} → {status}")
        }
        U::Plan(plan) => {
            let done = plan
                .entries
                .iter()
                .filter(|entry| tag(&entry.status) == "completed")
                .count();
            let current = plan
                .entries
                .iter()
                .find(|entry| tag(&entry.status) == "in_progress")
                .map(|entry| format!(": now {}", entry.content))
                .unwrap_or_default();
            format!("[plan] {done}/{} done{current}", plan.entries.len())
        }
        U::AvailableCommandsUpdate(update) => format!(
            "[commands] {} available: {}",
            update.available_commands.len(),
            names(update.available_commands.iter().map(|command| command.name.as_str()))
        ),
        U::CurrentModeUpdate(update) => format!("[mode] {}", update.current_mode_id.as_str()),
        U::ConfigOptionUpdate(update) => format!(
            "[config] {} options: {}",
            update.config_options.len(),
            names(update.config_options.iter().map(|option| option.name.as_str()))
        ),
        U::SessionInfoUpdate(update) => {
            let mut parts = Vec::new();
            if let Some(title) = patch(&update.title, Clone::clone) {
                parts.push(format!("title {title}"));
            }
            if let Some(at) = patch(&update.updated_at, Clone::clone) {
                parts.push(format!("updated {at}"));
            }
            if parts.is_empty() {
                parts.push("unchanged".to_string());
            }
            format!("[session] {}", parts.join("; "))
        }
        U::UsageUpdate(usage) => {
            let mut line = format!("[usage] {} / {} tokens", usage.used, usage.size);
            if let Some(cost) = &usage.cost {
                line.push_str(&format!(", {:.4} {}", cost.amount, cost.currency));
            }
            line
        }
        U::Notice(notice) => {
            let mut line = format!("[notice {}] {}", tag(&notice.severity), notice.title);
            if let Some(description) = &notice.description {
                line.push_str(": ");
                line.push_str(description);
            }
            line
        }
        U::CompactionUpdate(update) => {
            let mut line = format!("[compaction {}] {}", update.compaction_id.as_str(), tag(&update.status));
            if let Some(error) = patch(&update.error, Clone::clone) {
                line.push_str(": ");
                line.push_str(&error);
            }
            line
        }
        U::CompactionSummaryChunk(chunk) => format!(
            "[compaction {}] {}",
            chunk.compaction_id.as_str(),
            content(&chunk.content)
        ),
    }
}

impl Update {
    /// The update on one line for a person, at most [`ONE_LINE_MAX`] characters: a
    /// `[kind]` prefix and the gist (a chunk's text, a tool call's title and status, the
    /// number of commands and their names, tokens used…). An update of no kind this revision
    /// knows shows its `sessionUpdate` and its JSON, clipped.
    pub fn one_line(&self) -> String {
        let typed: Option<wire::SessionUpdate> = match self {
            Update::MessageChunk(chunk) => Some(wire::SessionUpdate::AgentMessageChunk(chunk.clone())),
            Update::ThoughtChunk(chunk) => Some(wire::SessionUpdate::AgentThoughtChunk(chunk.clone())),
            Update::UserMessageChunk(chunk) => Some(wire::SessionUpdate::UserMessageChunk(chunk.clone())),
            Update::ToolCall(call) => Some(wire::SessionUpdate::ToolCall(call.clone())),
            Update::ToolCallUpdate(call) => Some(wire::SessionUpdate::ToolCallUpdate(call.clone())),
            Update::Plan(plan) => Some(wire::SessionUpdate::Plan(plan.clone())),
            Update::AvailableCommands(update) => Some(wire::SessionUpdate::AvailableCommandsUpdate(update.clone())),
            Update::CurrentMode(update) => Some(wire::SessionUpdate::CurrentModeUpdate(update.clone())),
            Update::ConfigOptions(update) => Some(wire::SessionUpdate::ConfigOptionUpdate(update.clone())),
            Update::Usage(update) => Some(wire::SessionUpdate::UsageUpdate(update.clone())),
            Update::Other(value) => serde_json::from_value(value.clone()).ok(),
        };
        let line = match (typed, self) {
            (Some(update), _) => render(&update),
            (None, Update::Other(value)) => {
                let kind = value.get("sessionUpdate").and_then(Value::as_str).unwrap_or("update");
                format!("[{kind}] {value}")
            }
            (None, _) => String::new(),
        };
        clip(&line, ONE_LINE_MAX)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Which variant an update is: a match without a wildcard, so a regenerated revision with
    /// a new kind fails to compile here until the samples below cover it.
    fn variant(update: &wire::SessionUpdate) -> usize {
        use wire::SessionUpdate as U;
        match update {
            U::UserMessageChunk(_) => 0,
            U::AgentMessageChunk(_) => 1,
            U::AgentThoughtChunk(_) => 2,
            U::ToolCall(_) => 3,
            U::ToolCallUpdate(_) => 4,
            U::Plan(_) => 5,
            U::AvailableCommandsUpdate(_) => 6,
            U::CurrentModeUpdate(_) => 7,
            U::ConfigOptionUpdate(_) => 8,
            U::SessionInfoUpdate(_) => 9,
            U::UsageUpdate(_) => 10,
            U::Notice(_) => 11,
            U::CompactionUpdate(_) => 12,
            U::CompactionSummaryChunk(_) => 13,
        }
    }
    const VARIANTS: usize = 14;

    #[test]
    fn every_update_kind_of_the_revision_renders_on_one_bounded_line() {
        let long = "line one\nline two\t".repeat(2000);
        let text = json!({"type": "text", "text": long});
        let commands: Vec<Value> = (0..300)
            .map(|n| json!({"name": format!("command-{n}"), "description": long}))
            .collect();
        let options: Vec<Value> = (0..50)
            .map(|n| {
                json!({"id": format!("o{n}"), "name": format!("option {n}\nx"), "type": "select",
                            "currentValue": "a", "options": [{"value": "a", "name": "A"}]})
            })
            .collect();
        let samples = [
            json!({"sessionUpdate": "user_message_chunk", "content": text}),
            json!({"sessionUpdate": "agent_message_chunk", "content": text}),
            json!({"sessionUpdate": "agent_thought_chunk", "content": text}),
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": long, "kind": "edit", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "rawOutput": {"x": long}}),
            json!({"sessionUpdate": "plan", "entries": [
                {"content": long, "priority": "high", "status": "in_progress"},
                {"content": "b", "priority": "low", "status": "completed"}]}),
            json!({"sessionUpdate": "available_commands_update", "availableCommands": commands}),
            json!({"sessionUpdate": "current_mode_update", "currentModeId": long}),
            json!({"sessionUpdate": "config_option_update", "configOptions": options}),
            json!({"sessionUpdate": "session_info_update", "title": long, "updatedAt": "2026-01-01T00:00:00Z"}),
            json!({"sessionUpdate": "usage_update", "used": 1200, "size": 200000, "cost": {"amount": 0.5, "currency": "USD"}}),
            json!({"sessionUpdate": "notice", "severity": "warning", "title": "Rate limited", "description": long}),
            json!({"sessionUpdate": "compaction_update", "compactionId": "k1", "status": "failed", "error": long}),
            json!({"sessionUpdate": "compaction_summary_chunk", "compactionId": "k1", "content": text}),
            // Not a kind of this revision.
            json!({"sessionUpdate": "something_new", "x": long}),
        ];
        let mut seen = [false; VARIANTS];
        for sample in samples {
            let kind = sample["sessionUpdate"].as_str().unwrap().to_string();
            if let Ok(typed) = serde_json::from_value::<wire::SessionUpdate>(sample.clone()) {
                seen[variant(&typed)] = true;
            }
            let raw = serde_json::value::to_raw_value(&sample).unwrap();
            let line = Update::from_raw(&raw).one_line();
            assert!(!line.contains(['\n', '\r', '\t']), "{kind}: {line}");
            assert!(
                line.chars().count() <= ONE_LINE_MAX,
                "{kind}: {} chars",
                line.chars().count()
            );
            assert!(line.starts_with('['), "{kind}: {line}");
            assert!(
                !line.contains("Some(") && !line.contains("{ "),
                "{kind} looks like Debug: {line}"
            );
        }
        assert_eq!(seen, [true; VARIANTS], "a sample for every kind of the revision");
    }

    #[test]
    fn readable_summaries() {
        let line = |value: Value| Update::from_raw(&serde_json::value::to_raw_value(&value).unwrap()).one_line();
        assert_eq!(
            line(json!({"sessionUpdate": "usage_update", "used": 1200, "size": 200000})),
            "[usage] 1200 / 200000 tokens"
        );
        assert_eq!(
            line(json!({"sessionUpdate": "available_commands_update",
                        "availableCommands": [{"name": "review", "description": "Review a change"}]})),
            "[commands] 1 available: review"
        );
        assert_eq!(clip("a\n\nb   c", 10), "a b c");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abcd", 4), "abcd");
    }
}
