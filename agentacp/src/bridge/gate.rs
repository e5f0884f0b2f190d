//! What the editor may see of the agent's tool calls.
//!
//! Each call the agent announces (a `tool_call`, or a permission request about it) gets a
//! governance state, decided on what identifies it — every name it goes by (`name`,
//! `_meta.aip44.tool`, `title`), its `kind` and its `rawInput`, exactly what [`ToolFacts`]
//! reads — on the strictest reading (the decide function's job: each name, a title only
//! where it is a name, the kind only where it is stricter). Once decided, what the call
//! *is* — its `title`, `name`, `kind` and `_meta.aip44.tool` — is fixed: an update or a
//! re-announcement that would change them passes without them (a re-announcement with them
//! as decided), a permission request about the call shows them as decided, and the attempt
//! is reported for the audit ([`Frozen`]). New arguments (`rawInput`), or a permission
//! request about the call, decide it again; a permission request on every name the call
//! went by.
//! Updates for calls never announced, and everything after a call was hidden, never pass.
//! History replayed by `session/load` is gated on governance alone: it reports calls that
//! ran before, so approvals cannot be checked; a replayed update that would change what a
//! replayed call is does not pass.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::governance::Decision;
use crate::oversight::ToolFacts;

/// The fields of a tool call that [`ToolFacts`] reads to tell which tool it is, besides
/// `_meta.aip44.tool` (kept alone, as `{"_meta": {"aip44": {"tool": …}}}`).
const IDENTITY: [&str; 4] = ["title", "name", "kind", "rawInput"];

/// The fields that say what a call is: fixed once it is decided (with `_meta.aip44.tool`).
const NAMING: [&str; 3] = ["title", "name", "kind"];

/// Where in its `_meta` a call's tool name may be given, besides `name` and `title`.
const META_TOOL: &str = "/aip44/tool";

/// At most this many characters of a value are quoted in an audit reason.
const QUOTED: usize = 120;

/// A call's governance state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Governance allows the call as it stands: everything about it passes.
    Allowed,
    /// Governance asks: until the editor approves the call as it stands, it may be shown
    /// (pending, with a preview) but it may not run or report anything it produced.
    NeedsApproval,
    /// Approved as it stands: by the editor, or by governance through a permission request.
    Approved,
    /// The editor (or a timeout, or the editor leaving) rejected it: it may only fail.
    Rejected,
    /// Nothing more about it reaches the editor.
    Hidden,
}

#[derive(Debug)]
struct Call {
    /// The identifying fields as they stand (`toolCallId` included).
    fields: Map<String, Value>,
    state: State,
    /// Whether the editor has been shown it (then hiding it tells the editor it failed).
    shown: bool,
    /// Announced by a `session/load` replay; forgotten when the load is answered.
    replayed: bool,
}

impl Call {
    /// A call not shown to the editor yet.
    fn new(fields: Map<String, Value>, state: State, replayed: bool) -> Call {
        Call {
            fields,
            state,
            shown: false,
            replayed,
        }
    }

    fn facts(&self) -> ToolFacts {
        facts_of(&self.fields)
    }

    fn hide(&mut self) {
        self.state = State::Hidden;
        // Only the id is needed from now on.
        self.fields.retain(|key, _| key == "toolCallId");
    }
}

/// What to do with one live `tool_call` / `tool_call_update`.
#[derive(Debug)]
pub(super) enum Live {
    /// Forward it. `auto`: governance was asked again (what identifies the call changed) and
    /// now allows it without asking; `redecided`: the new decision, for the audit.
    Pass {
        facts: ToolFacts,
        auto: bool,
        redecided: Option<String>,
        /// Pass this instead: the update without what would change what the call is.
        frozen: Option<Frozen>,
    },
    /// Drop it: the call is hidden already.
    Drop,
    /// Drop it and hide the call from now on; audit it as denied by governance for `reason`.
    /// `close`: the editor saw the call, tell it the call failed.
    Hide {
        facts: ToolFacts,
        reason: String,
        close: bool,
    },
}

/// An update of a decided call, rewritten so it does not change what the call is.
#[derive(Debug)]
pub(super) struct Frozen {
    /// The update to pass on instead.
    pub(super) update: Map<String, Value>,
    /// What the agent tried to change (`title "read-file" → "delete-repo"`, …), for the
    /// audit; `None` when only fields it left out were put back (a re-announcement).
    pub(super) refused: Option<String>,
}

/// What to do with one replayed update.
#[derive(Debug)]
pub(super) enum Replayed {
    /// Forward it.
    Pass,
    /// Drop it, for `reason` (audited as a drop).
    Drop { reason: String },
}

/// Governance's answer to a permission request of the agent's, decided on the call as the
/// editor would show it once the request's `toolCall` is applied to what it was shown, and on
/// every name the call went by.
#[derive(Debug)]
pub(super) struct Permission {
    pub(super) facts: ToolFacts,
    /// Show the editor this `toolCall` instead: the request's, with what it would change of
    /// the decided call (its title, name, kind, `_meta.aip44.tool`) as decided.
    pub(super) frozen: Option<Frozen>,
    pub(super) decision: Decision,
    /// The editor had been shown the call that is now denied: tell it the call failed.
    pub(super) close: bool,
    /// The call was hidden before (its denial is audited already).
    pub(super) hidden_before: bool,
}

/// Whether the editor's answer to a permission request still applies.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Pass it on.
    Applies,
    /// The call was hidden while the editor was asked (its denial is already audited).
    Hidden,
    /// What identifies the call changed while the editor was asked: the answer was about
    /// another call.
    Changed,
    /// The call is over (its turn ended) and forgotten.
    Gone,
}

/// The tool calls of every session.
#[derive(Debug, Default)]
pub(super) struct Gate {
    calls: HashMap<(String, String), Call>,
    /// The tools whose calls the bridge holds at the wire, by session and name prefix (the
    /// editor's MCP servers over ACP: `mcp/<server>/`): a call of one the agent reports
    /// running is not yet a violation, as the bridge asks before the call reaches the server.
    held_at_the_wire: HashSet<(String, String)>,
}

/// `toolCallId` and the identifying fields of an update or a permission's `toolCall`.
fn identity(id: &str, update: &Map<String, Value>) -> Map<String, Value> {
    let mut fields = overlay(&Map::new(), update);
    fields.insert("toolCallId".into(), Value::String(id.to_string()));
    fields
}

/// `fields` with the identifying fields `update` carries put over them (a
/// `tool_call_update`'s fields replace the call's, the others stay).
fn overlay(fields: &Map<String, Value>, update: &Map<String, Value>) -> Map<String, Value> {
    let mut merged = fields.clone();
    for key in IDENTITY {
        if let Some(value) = update.get(key) {
            merged.insert(key.to_string(), value.clone());
        }
    }
    if let Some(tool) = meta_tool(update) {
        merged.insert("_meta".into(), serde_json::json!({"aip44": {"tool": tool}}));
    }
    merged
}

/// The `_meta.aip44.tool` an update or a call's fields give.
fn meta_tool(fields: &Map<String, Value>) -> Option<&Value> {
    fields.get("_meta")?.pointer(META_TOOL)
}

/// Sets (`Some`) or removes (`None`) the `_meta.aip44.tool` of an update, keeping the rest of
/// its `_meta`.
fn set_meta_tool(update: &mut Map<String, Value>, tool: Option<&Value>) {
    let Some(tool) = tool else {
        let aip44 = (update.get_mut("_meta")).and_then(|meta| meta.get_mut("aip44"));
        if let Some(Value::Object(aip44)) = aip44 {
            aip44.remove("tool");
        }
        return;
    };
    let meta = update.entry("_meta").or_insert(Value::Null);
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Value::Object(meta) = meta {
        let aip44 = meta.entry("aip44").or_insert(Value::Null);
        if !aip44.is_object() {
            *aip44 = Value::Object(Map::new());
        }
        if let Value::Object(aip44) = aip44 {
            aip44.insert("tool".into(), tool.clone());
        }
    }
}

/// `update` of the call decided as `decided`, without what would change what the call is
/// (its `title`, `name`, `kind`, `_meta.aip44.tool`): those are left out, or, in a
/// re-announcement (`restore`: it describes the call whole), given as decided. `None` when
/// the update passes as it is.
fn freeze(decided: &Map<String, Value>, update: &Map<String, Value>, restore: bool) -> Option<Frozen> {
    let quote = |value: Option<&Value>| {
        let text = value.map_or_else(|| "(none)".to_string(), Value::to_string);
        match text.char_indices().nth(QUOTED) {
            Some((end, _)) => format!("{}…", &text[..end]),
            None => text,
        }
    };
    let mut out = update.clone();
    let mut refused = Vec::new();
    for key in NAMING {
        let was = decided.get(key);
        if let Some(now) = update.get(key)
            && Some(now) != was
        {
            refused.push(format!("{key} {} → {}", quote(was), quote(Some(now))));
            out.remove(key);
        }
        if let (true, Some(was)) = (restore, was) {
            out.insert(key.to_string(), was.clone());
        }
    }
    let was = meta_tool(decided);
    if let Some(now) = meta_tool(update)
        && Some(now) != was
    {
        refused.push(format!("_meta.aip44.tool {} → {}", quote(was), quote(Some(now))));
        set_meta_tool(&mut out, None);
    }
    if let (true, Some(was)) = (restore, was) {
        set_meta_tool(&mut out, Some(was));
    }
    (out != *update).then(|| Frozen {
        update: out,
        refused: (!refused.is_empty()).then(|| refused.join(", ")),
    })
}

fn facts_of(fields: &Map<String, Value>) -> ToolFacts {
    let value = Value::Object(fields.clone());
    ToolFacts::of(&value).unwrap_or_default()
}

/// Whether two views of a call are the same call for governance: names, titles, kind and
/// arguments.
fn same(a: &ToolFacts, b: &ToolFacts) -> bool {
    a.tool == b.tool && a.names == b.names && a.titles == b.titles && a.kind == b.kind && a.arguments == b.arguments
}

/// `facts` with the names and titles of `other` it lacks, each once.
fn with_names_of(mut facts: ToolFacts, other: ToolFacts) -> ToolFacts {
    for (names, more) in [(&mut facts.names, other.names), (&mut facts.titles, other.titles)] {
        for name in more {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    facts
}

fn tool_name(facts: &ToolFacts) -> &str {
    facts.tool.as_deref().unwrap_or("unknown")
}

/// What a live update changed of a call already known (see [`Live::Pass`]).
#[derive(Default)]
struct Changes {
    auto: bool,
    redecided: Option<String>,
    frozen: Option<Frozen>,
}

/// A known call described again by a live update: what identifies it is frozen as decided,
/// and governance decides again if the rest (its arguments) changed. `Err`: hide it.
fn described_again(
    call: &mut Call,
    id: &str,
    update: &Map<String, Value>,
    is_new: bool,
    decide: impl Fn(&ToolFacts) -> Decision,
) -> Result<Changes, Box<Live>> {
    let mut changes = Changes::default();
    let before = call.facts();
    changes.frozen = freeze(&call.fields, update, is_new);
    let update = changes.frozen.as_ref().map_or(update, |frozen| &frozen.update);
    call.fields = if is_new {
        // A call announced again is described again, whole.
        identity(id, update)
    } else {
        overlay(&call.fields, update)
    };
    call.replayed = false;
    let after = call.facts();
    if same(&before, &after) {
        return Ok(changes);
    }
    let decision = decide(&after);
    changes.redecided = Some(decision_name(&decision));
    match decision {
        Decision::Deny(reason) => {
            let close = call.shown;
            call.hide();
            return Err(Box::new(Live::Hide {
                reason: format!(
                    "policy violation: the agent turned the tool call into `{}`, which governance denies ({reason})",
                    tool_name(&after)
                ),
                facts: after,
                close,
            }));
        }
        Decision::Allow => {
            if call.state == State::NeedsApproval {
                call.state = State::Allowed;
                changes.auto = true;
            } else if call.state == State::Allowed {
                changes.auto = true;
            }
        }
        Decision::Ask => {
            // An approval was for what the call was; a rejection stays.
            if matches!(call.state, State::Allowed | State::Approved) {
                call.state = State::NeedsApproval;
            }
        }
    }
    Ok(changes)
}

/// Whether a live `update` of `call` passes: not when it shows the call running or done
/// without the approval it needs, or after a rejection (`held`: the bridge holds the call at
/// the wire, so its running is not yet a violation).
fn passes(call: &mut Call, update: &Map<String, Value>, held: bool, changes: Changes) -> Live {
    let status = update.get("status").and_then(Value::as_str);
    let output = update.contains_key("rawOutput");
    let running = matches!(status, Some("in_progress")) && !held;
    let violation = match call.state {
        State::NeedsApproval if output || running || matches!(status, Some("completed" | "failed")) => {
            Some("policy violation: the agent ran it without the approval governance requires")
        }
        State::Rejected if matches!(status, Some("in_progress" | "completed")) => {
            Some("policy violation: the agent ran it after it was rejected")
        }
        _ => None,
    };
    let facts = call.facts();
    if let Some(reason) = violation {
        let close = call.shown;
        call.hide();
        return Live::Hide {
            facts,
            reason: reason.into(),
            close,
        };
    }
    call.shown = true;
    Live::Pass {
        facts,
        auto: changes.auto,
        redecided: changes.redecided,
        frozen: changes.frozen,
    }
}

/// What a decision is called in the audit.
fn decision_name(decision: &Decision) -> String {
    match decision {
        Decision::Allow => "allow".into(),
        Decision::Ask => "ask".into(),
        Decision::Deny(reason) => format!("deny: {reason}"),
    }
}

impl Gate {
    /// A live `tool_call` (`is_new`) or `tool_call_update` of call `id` in `session`.
    pub(super) fn live(
        &mut self,
        session: &str,
        id: &str,
        update: &Map<String, Value>,
        is_new: bool,
        decide: impl Fn(&ToolFacts) -> Decision,
    ) -> Live {
        let key = (session.to_string(), id.to_string());
        let mut changes = Changes::default();
        let call = match self.calls.get_mut(&key) {
            Some(call) if call.state == State::Hidden => return Live::Drop,
            Some(call) => match described_again(call, id, update, is_new, decide) {
                Ok(changed) => {
                    changes = changed;
                    call
                }
                Err(hide) => return *hide,
            },
            None if !is_new => {
                let fields = identity(id, update);
                let facts = facts_of(&fields);
                self.hidden(key, fields, false);
                return Live::Hide {
                    facts,
                    reason: "policy violation: an update for a tool call the agent never announced".into(),
                    close: false,
                };
            }
            None => {
                let fields = identity(id, update);
                let facts = facts_of(&fields);
                let state = match decide(&facts) {
                    Decision::Allow => State::Allowed,
                    Decision::Ask => State::NeedsApproval,
                    Decision::Deny(reason) => {
                        self.hidden(key, fields, false);
                        return Live::Hide {
                            facts,
                            reason,
                            close: false,
                        };
                    }
                };
                self.calls.entry(key).or_insert(Call::new(fields, state, false))
            }
        };
        let tool = tool_name(&call.facts()).to_string();
        let held = (self.held_at_the_wire.iter()).any(|(s, prefix)| s == session && tool.starts_with(prefix.as_str()));
        passes(call, update, held, changes)
    }

    /// Keeps call `key` hidden from now on, described by `fields`.
    fn hidden(&mut self, key: (String, String), fields: Map<String, Value>, replayed: bool) {
        let mut call = Call::new(fields, State::Hidden, replayed);
        call.hide();
        self.calls.insert(key, call);
    }

    /// A `tool_call` (`is_new`) or `tool_call_update` replayed by `session/load`.
    pub(super) fn replayed(
        &mut self,
        session: &str,
        id: &str,
        update: &Map<String, Value>,
        is_new: bool,
        decide: impl Fn(&ToolFacts) -> Decision,
    ) -> Replayed {
        let key = (session.to_string(), id.to_string());
        let fields = match self.calls.get(&key) {
            Some(call) if call.state == State::Hidden => {
                return Replayed::Drop {
                    reason: "a replayed update of a tool call governance hid".into(),
                };
            }
            Some(call) if !is_new => {
                if let Some(refused) = freeze(&call.fields, update, false).and_then(|frozen| frozen.refused) {
                    return Replayed::Drop {
                        reason: format!("a replayed update that would change what the tool call is ({refused})"),
                    };
                }
                overlay(&call.fields, update)
            }
            Some(_) => identity(id, update),
            None if !is_new => {
                self.hidden(key, identity(id, update), true);
                return Replayed::Drop {
                    reason: "a replayed update for a tool call the history never announced".into(),
                };
            }
            None => identity(id, update),
        };
        let facts = facts_of(&fields);
        let changed = self.calls.get(&key).is_none_or(|call| !same(&call.facts(), &facts));
        let denied = match changed.then(|| decide(&facts)) {
            Some(Decision::Deny(reason)) => Some(reason),
            _ => None,
        };
        let call = self
            .calls
            .entry(key)
            .or_insert(Call::new(Map::new(), State::Allowed, true));
        call.fields = fields;
        if let Some(reason) = denied {
            call.hide();
            return Replayed::Drop {
                reason: format!(
                    "a replayed tool call `{}` governance denies: {reason}",
                    tool_name(&facts)
                ),
            };
        }
        call.shown = true;
        Replayed::Pass
    }

    /// A `session/request_permission` of the agent's about call `id`, whose `toolCall` is
    /// `tool_call`: governance decides on the call as it stands once `tool_call` is applied
    /// — on every name the call went by, the decided ones and the request's. A decided call
    /// stays what it is, as an update would ([`freeze`]): the request shows it as decided.
    pub(super) fn permission(
        &mut self,
        session: &str,
        id: &str,
        tool_call: &Map<String, Value>,
        decide: impl Fn(&ToolFacts) -> Decision,
    ) -> Permission {
        let key = (session.to_string(), id.to_string());
        let asked = facts_of(&identity(id, tool_call));
        let mut frozen = None;
        let call = match self.calls.get_mut(&key) {
            Some(call) if call.state == State::Hidden => {
                return Permission {
                    facts: asked,
                    frozen: None,
                    decision: Decision::Deny("governance denies this tool".into()),
                    close: false,
                    hidden_before: true,
                };
            }
            Some(call) => {
                if freeze(&call.fields, tool_call, false).is_some() {
                    frozen = freeze(&call.fields, tool_call, true);
                }
                let tool_call = frozen.as_ref().map_or(tool_call, |frozen| &frozen.update);
                call.fields = overlay(&call.fields, tool_call);
                call.replayed = false;
                call
            }
            None => self
                .calls
                .entry(key)
                .or_insert(Call::new(identity(id, tool_call), State::NeedsApproval, false)),
        };
        let facts = call.facts();
        // On every name the call went by: the decided ones, and the ones asked about.
        let decision = decide(&with_names_of(facts.clone(), asked));
        let mut close = false;
        match &decision {
            Decision::Allow => call.state = State::Approved,
            Decision::Ask => {
                call.state = State::NeedsApproval;
                // The request shows the editor the call.
                call.shown = true;
            }
            Decision::Deny(_) => {
                close = call.shown;
                call.hide();
            }
        }
        Permission {
            facts,
            frozen,
            decision,
            close,
            hidden_before: false,
        }
    }

    /// Whether the editor's answer to the permission request about `asked` still applies;
    /// if it does, the call is `approved` or rejected from now on.
    pub(super) fn answered(&mut self, session: &str, asked: &ToolFacts, approved: bool) -> Answer {
        let key = (session.to_string(), asked.id.clone());
        let Some(call) = self.calls.get_mut(&key) else {
            return Answer::Gone;
        };
        if call.state == State::Hidden {
            return Answer::Hidden;
        }
        if !same(&call.facts(), asked) {
            return Answer::Changed;
        }
        call.state = if approved { State::Approved } else { State::Rejected };
        Answer::Applies
    }

    /// Calls of the editor's MCP server `server` over ACP in `session` are held at the wire.
    pub(super) fn hold_at_the_wire(&mut self, session: &str, server: &str) {
        (self.held_at_the_wire).insert((session.to_string(), format!("mcp/{server}/")));
    }

    /// The editor approved, through the bridge's own permission request, a call of `tool`
    /// with `arguments` that the agent made without asking (an MCP tool over ACP): the live
    /// call of `session` that is that call, waiting for an approval, is approved. Its id, if
    /// there is one.
    pub(super) fn approved_elsewhere(&mut self, session: &str, tool: &str, arguments: &Value) -> Option<ToolFacts> {
        let (_, call) = self.calls.iter_mut().find(|((s, _), call)| {
            let facts = call.facts();
            s == session
                && call.state == State::NeedsApproval
                && !call.replayed
                && facts.tool.as_deref() == Some(tool)
                && facts.arguments.as_ref() == Some(arguments)
        })?;
        call.state = State::Approved;
        Some(call.facts())
    }

    /// A permission request about `id` was rejected without the editor (a timeout, the
    /// editor gone): the call may only fail from now on.
    pub(super) fn rejected(&mut self, session: &str, id: &str) {
        if let Some(call) = self.calls.get_mut(&(session.to_string(), id.to_string()))
            && call.state != State::Hidden
        {
            call.state = State::Rejected;
        }
    }

    /// The turn of `session` ended: its calls are forgotten, except which ones are hidden.
    pub(super) fn turn_ended(&mut self, session: &str) {
        self.calls
            .retain(|(s, _), call| s != session || call.state == State::Hidden);
    }

    /// The `session/load` of `session` was answered: the replayed calls are forgotten.
    pub(super) fn load_answered(&mut self, session: &str) {
        self.calls.retain(|(s, _), call| s != session || !call.replayed);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    /// `read-file` runs, `write-file` asks, the rest is denied.
    fn decide(facts: &ToolFacts) -> Decision {
        match facts.tool.as_deref() {
            Some("read-file") => Decision::Allow,
            Some("write-file") => Decision::Ask,
            other => Decision::Deny(format!("{other:?} is not allowed")),
        }
    }

    /// An MCP tool of the editor's over ACP is held at the wire: reported running before the
    /// bridge asked is no violation, its result passes once the editor approved the call
    /// itself, and a call of another tool reported running unasked is still hidden.
    #[test]
    fn a_call_held_at_the_wire_may_run_until_the_bridge_has_asked() {
        let ask = |_: &ToolFacts| Decision::Ask;
        let mut gate = Gate::default();
        gate.hold_at_the_wire("s", "notes");
        let call = json!({"title": "mcp/notes/read", "rawInput": {"p": 1}, "status": "in_progress"});
        let running = gate.live("s", "c", &object(call), true, ask);
        assert!(matches!(running, Live::Pass { .. }), "{running:?}");
        let update = json!({"title": "mcp/notes/read", "status": "in_progress"});
        let early = gate.live("s", "c2", &object(update), true, ask);
        assert!(matches!(early, Live::Pass { .. }), "{early:?}");
        let update = json!({"status": "completed", "rawOutput": 1});
        let result = gate.live("s", "c2", &object(update), false, ask);
        assert!(
            matches!(result, Live::Hide { .. }),
            "a result without an approval: {result:?}"
        );
        let approved = gate.approved_elsewhere("s", "mcp/notes/read", &json!({"p": 1}));
        assert_eq!(approved.map(|facts| facts.id), Some("c".to_string()));
        let update = json!({"status": "completed", "rawOutput": 2});
        let result = gate.live("s", "c", &object(update), false, ask);
        assert!(matches!(result, Live::Pass { .. }), "{result:?}");
        for (session, tool) in [
            ("other", "mcp/notes/read"),
            ("s", "mcp/other/read"),
            ("s", "mcp/notes-x/read"),
        ] {
            let update = json!({"title": tool, "status": "in_progress"});
            let unasked = gate.live(session, tool, &object(update), true, ask);
            assert!(matches!(unasked, Live::Hide { .. }), "{session} {tool}: {unasked:?}");
        }
    }

    /// A decided call keeps its names and kind: an update passes without a change of them,
    /// a re-announcement with them as decided; the rest of each passes.
    #[test]
    fn an_update_passes_without_what_would_change_the_call() {
        let mut gate = Gate::default();
        let call = json!({"title": "read-file", "kind": "read", "_meta": {"aip44": {"tool": "read-file"}, "x": 1}});
        let announced = gate.live("s", "c", &object(call), true, decide);
        assert!(matches!(announced, Live::Pass { frozen: None, .. }), "{announced:?}");
        let update =
            json!({"title": "delete-repo", "_meta": {"aip44": {"tool": "delete-repo"}, "x": 2}, "status": "completed"});
        let Live::Pass {
            frozen: Some(frozen), ..
        } = gate.live("s", "c", &object(update), false, decide)
        else {
            panic!("passes, rewritten")
        };
        assert_eq!(
            Value::Object(frozen.update),
            json!({"_meta": {"aip44": {}, "x": 2}, "status": "completed"})
        );
        let refused = frozen.refused.unwrap();
        assert!(refused.contains(r#"title "read-file" → "delete-repo""#), "{refused}");
        assert!(refused.contains("_meta.aip44.tool"), "{refused}");
        let again = gate.live(
            "s",
            "c",
            &object(json!({"kind": "delete", "rawOutput": 1})),
            true,
            decide,
        );
        let Live::Pass {
            frozen: Some(frozen), ..
        } = again
        else {
            panic!("passes, rewritten: {again:?}")
        };
        assert_eq!(
            Value::Object(frozen.update),
            json!({"title": "read-file", "kind": "read", "_meta": {"aip44": {"tool": "read-file"}}, "rawOutput": 1})
        );
        assert!(frozen.refused.unwrap().contains("kind"));
    }

    #[test]
    fn a_denied_call_is_hidden_and_stays_hidden() {
        let mut gate = Gate::default();
        let announced = gate.live("s", "c", &object(json!({"title": "delete-repo"})), true, decide);
        assert!(matches!(announced, Live::Hide { close: false, .. }), "{announced:?}");
        let later = gate.live("s", "c", &object(json!({"title": "read-file"})), true, decide);
        assert!(matches!(later, Live::Drop), "{later:?}");
        let asked = gate.permission("s", "c", &object(json!({"title": "read-file"})), decide);
        assert!(matches!(asked.decision, Decision::Deny(_)), "{asked:?}");
    }

    /// A permission request about a call is decided on every name the call went by.
    #[test]
    fn a_permission_request_is_decided_on_the_names_announced_and_asked_about() {
        let strictest = |facts: &ToolFacts| {
            facts
                .readings(&crate::governance::AllowAll)
                .into_iter()
                .map(|tool| {
                    decide(&ToolFacts {
                        tool: Some(tool.to_string()),
                        ..ToolFacts::default()
                    })
                })
                .reduce(Decision::stricter)
                .unwrap()
        };
        let mut gate = Gate::default();
        gate.live("s", "d", &object(json!({"title": "write-file"})), true, strictest);
        let asked = gate.permission("s", "d", &object(json!({"title": "read-file"})), strictest);
        assert_eq!(asked.decision, Decision::Ask, "{asked:?}");
    }

    /// A permission request that would rename a decided call is decided on every name, and
    /// shows the editor the call as decided; one that changes nothing of it passes as sent.
    #[test]
    fn a_permission_request_shows_a_decided_call_as_decided() {
        let mut gate = Gate::default();
        gate.live(
            "s",
            "c",
            &object(json!({"title": "write-file", "kind": "edit"})),
            true,
            decide,
        );
        let request = json!({"toolCallId": "c", "title": "read-file", "kind": "read", "rawInput": 1});
        let asked = gate.permission("s", "c", &object(request), decide);
        assert_eq!(asked.decision, Decision::Ask, "{asked:?}");
        let frozen = asked.frozen.expect("rewritten");
        assert_eq!(
            Value::Object(frozen.update),
            json!({"toolCallId": "c", "title": "write-file", "kind": "edit", "rawInput": 1})
        );
        let refused = frozen.refused.unwrap();
        assert!(refused.contains(r#"title "write-file" → "read-file""#), "{refused}");
        assert_eq!(asked.facts.title.as_deref(), Some("write-file"));
        let again = gate.permission(
            "s",
            "c",
            &object(json!({"toolCallId": "c", "title": "write-file"})),
            decide,
        );
        assert!(again.frozen.is_none(), "{again:?}");
    }

    #[test]
    fn an_approval_covers_the_call_it_was_given_for_only() {
        let mut gate = Gate::default();
        gate.live(
            "s",
            "c",
            &object(json!({"title": "write-file", "rawInput": {"p": 1}})),
            true,
            decide,
        );
        let asked = gate.permission("s", "c", &object(json!({})), decide);
        assert_eq!(asked.decision, Decision::Ask);
        assert_eq!(gate.answered("s", &asked.facts, true), Answer::Applies);
        let ran = gate.live("s", "c", &object(json!({"status": "in_progress"})), false, decide);
        assert!(matches!(ran, Live::Pass { .. }), "{ran:?}");
        // Other arguments: another call, which needs its own approval.
        let other = gate.live(
            "s",
            "c",
            &object(json!({"rawInput": {"p": 2}, "status": "completed", "rawOutput": 1})),
            false,
            decide,
        );
        assert!(matches!(other, Live::Hide { close: true, .. }), "{other:?}");
    }

    #[test]
    fn an_answer_about_a_call_that_changed_meanwhile_does_not_apply() {
        let mut gate = Gate::default();
        let asked = gate.permission("s", "c", &object(json!({"title": "write-file", "rawInput": 1})), decide);
        gate.live("s", "c", &object(json!({"rawInput": 2})), false, decide);
        assert_eq!(gate.answered("s", &asked.facts, true), Answer::Changed);
    }

    #[test]
    fn a_rejected_call_may_only_fail() {
        let mut gate = Gate::default();
        gate.live("s", "c", &object(json!({"title": "write-file"})), true, decide);
        gate.rejected("s", "c");
        let failed = gate.live(
            "s",
            "c",
            &object(json!({"status": "failed", "rawOutput": "no"})),
            false,
            decide,
        );
        assert!(matches!(failed, Live::Pass { .. }), "{failed:?}");
        let ran = gate.live("s", "c", &object(json!({"status": "completed"})), false, decide);
        assert!(matches!(ran, Live::Hide { .. }), "{ran:?}");
    }

    #[test]
    fn replayed_calls_are_forgotten_after_the_load_and_hidden_ones_after_nothing() {
        let mut gate = Gate::default();
        gate.live("s", "hidden", &object(json!({"title": "delete-repo"})), true, decide);
        gate.turn_ended("s");
        let again = gate.replayed("s", "hidden", &object(json!({"title": "read-file"})), true, decide);
        assert!(matches!(again, Replayed::Drop { .. }), "{again:?}");
        let old = gate.replayed("s", "old", &object(json!({"title": "read-file"})), true, decide);
        assert!(matches!(old, Replayed::Pass), "{old:?}");
        gate.load_answered("s");
        let live = gate.live("s", "old", &object(json!({"status": "completed"})), false, decide);
        assert!(matches!(live, Live::Hide { close: false, .. }), "{live:?}");
    }
}
