//! What oversight reads of a tool call: its id, every name and title it goes by, its kind,
//! arguments, status and output ([`ToolFacts`]), and the names governance decides it on.

use serde_json::Value;

use crate::governance::{Governance, ToolKind};

/// The fields of a tool call (or its permission request) that governance and audit need.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolFacts {
    pub(crate) id: String,
    /// The name it is known by: `name`, else `_meta.aip44.tool`, else the title.
    pub(crate) tool: Option<String>,
    /// Every explicit name the call goes by — `name` and `_meta.aip44.tool`, each once — as
    /// the peer gave them: governance decides on each ([`ToolFacts::readings`]). Empty when
    /// the peer gave none, or this side named the call itself ([`tool`](ToolFacts::tool)).
    pub(crate) names: Vec<String>,
    /// Every title the call goes by, each once: a name of the call when it has no explicit
    /// one, else only where governance knows it as a name ([`ToolFacts::readings`]).
    pub(crate) titles: Vec<String>,
    /// The title the call is shown under.
    pub(crate) title: Option<String>,
    pub(crate) kind: Option<ToolKind>,
    pub(crate) arguments: Option<Value>,
    pub(crate) status: Option<String>,
    pub(crate) output: Option<Value>,
}

impl ToolFacts {
    /// The tool call a permission request is about (at least its id).
    pub(crate) fn of_permission(request: &crate::wire::default::RequestPermissionRequest) -> ToolFacts {
        serde_json::to_value(&request.tool_call)
            .ok()
            .as_ref()
            .and_then(ToolFacts::of)
            .unwrap_or_else(|| ToolFacts {
                id: request.tool_call.tool_call_id.as_str().to_string(),
                ..ToolFacts::default()
            })
    }

    /// Reads a `tool_call`, `tool_call_update` or a permission request's `toolCall`. The
    /// tool's name is `name`, else `_meta.aip44.tool`, else the title.
    pub(crate) fn of(value: &Value) -> Option<ToolFacts> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        let mut names: Vec<String> = Vec::new();
        let given = [
            text("name"),
            value
                .pointer("/_meta/aip44/tool")
                .and_then(Value::as_str)
                .map(str::to_string),
        ];
        for name in given.into_iter().flatten() {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let title = text("title");
        Some(ToolFacts {
            id: text("toolCallId")?,
            tool: names.first().cloned().or_else(|| title.clone()),
            names,
            titles: title.iter().cloned().collect(),
            title,
            kind: value
                .get("kind")
                .and_then(|kind| serde_json::from_value(kind.clone()).ok()),
            arguments: value.get("rawInput").cloned(),
            status: text("status"),
            output: value
                .get("rawOutput")
                .cloned()
                .or_else(|| value.get("content").cloned()),
        })
    }

    /// The names `governance` decides the call on (each, the strictest decision winning):
    /// its explicit [`names`](ToolFacts::names), and of its [`titles`](ToolFacts::titles)
    /// those `governance` knows as names ([`Governance::knows`]) — a descriptive title
    /// (`Read lib.rs`) beside a proper name neither loosens nor denies anything. A call
    /// without an explicit name goes by its titles; one without either by its
    /// [`tool`](ToolFacts::tool) (`unknown` without one).
    pub(crate) fn readings(&self, governance: &dyn Governance) -> Vec<&str> {
        let mut readings: Vec<&str> = self.names.iter().map(String::as_str).collect();
        let explicit = !readings.is_empty();
        for title in &self.titles {
            if !readings.contains(&title.as_str()) && (!explicit || governance.knows(title)) {
                readings.push(title);
            }
        }
        if readings.is_empty() {
            readings.push(self.tool.as_deref().unwrap_or("unknown"));
        }
        readings
    }
}

/// A session update as oversight reads it: the tool call it reports, if any.
pub(crate) trait ReportsToolCall {
    /// The `tool_call` or `tool_call_update` it is, as JSON; `None` for any other update.
    fn tool_call(&self) -> Option<Value>;
}
