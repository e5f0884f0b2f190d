//! Elicitation: an agent's question to the user for structured input (`elicitation/create`),
//! in one of two modes — a form described by a restricted JSON Schema, or a URL the user opens
//! out of band — and the user's answer: accept (with the form's content), decline or cancel.
//!
//! Every role uses the pieces here: what a question is ([`Elicitation`]) and what it looks
//! like on the wire, how an answer reads and whether it fits the form it answers
//! ([`read_answer`]), how a client answers one ([`ElicitationHandler`], the default
//! [`DeclineAll`]), the governance rule for an agent's question crossing a client or a bridge
//! ([`gate`]), and the audit records of each step (`elicitation.create`, `elicitation.answer`,
//! `elicitation.complete`, written through [`write_ahead`](super::record::write_ahead) by the
//! caller before the message they describe is sent).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use crate::audit::AuditEvent;
use crate::future::BoxFuture;
use crate::governance::Decision;
pub use crate::methods::ElicitationModes;
use crate::methods::elicitation_offered_in;
use crate::sync::lock;
use crate::wire::default as wire;

/// The two modes, by their wire names.
pub(crate) const FORM: &str = "form";
/// URL mode's wire name.
pub(crate) const URL: &str = "url";

/// A question to the user: its message and its mode, from [`Elicitation::form`] or
/// [`Elicitation::url`].
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    message: String,
    mode: Mode,
    tool_call_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Mode {
    Form { schema: Value },
    Url { id: String, url: String },
}

impl Elicitation {
    /// A form: `schema` is the restricted JSON Schema of what to ask (`{"type": "object",
    /// "properties": {…}, "required": […]}`, flat, each property a string, number, integer,
    /// boolean or an array of enum strings), e.g. `json!(…)` or
    /// `serde_json::to_value(wire::ElicitationSchema { … })`. Never for secrets (passwords,
    /// tokens, keys): the spec sends those through URL mode.
    pub fn form(message: impl Into<String>, schema: Value) -> Self {
        Elicitation {
            message: message.into(),
            mode: Mode::Form { schema },
            tool_call_id: None,
        }
    }

    /// A URL the user is asked to open (an OAuth consent, a payment page): `id` names this
    /// interaction for `elicitation/complete` and must be unique among the connection's
    /// outstanding ones; an accept means the user agreed to open it, not that it is done.
    pub fn url(message: impl Into<String>, id: impl Into<String>, url: impl Into<String>) -> Self {
        Elicitation {
            message: message.into(),
            mode: Mode::Url {
                id: id.into(),
                url: url.into(),
            },
            tool_call_id: None,
        }
    }

    /// Ties the question to a tool call of the session (`toolCallId`).
    pub fn for_tool_call(mut self, tool_call_id: impl Into<String>) -> Self {
        self.tool_call_id = Some(tool_call_id.into());
        self
    }

    /// The message shown to the user.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `"form"` or `"url"`.
    pub fn mode(&self) -> &'static str {
        match self.mode {
            Mode::Form { .. } => FORM,
            Mode::Url { .. } => URL,
        }
    }

    /// The URL-mode interaction's id (`elicitationId`); `None` for a form.
    pub fn url_id(&self) -> Option<&str> {
        match &self.mode {
            Mode::Url { id, .. } => Some(id),
            Mode::Form { .. } => None,
        }
    }

    /// Whether `offered` has this question's mode.
    pub fn offered_in(&self, offered: ElicitationModes) -> bool {
        match self.mode {
            Mode::Form { .. } => offered.form,
            Mode::Url { .. } => offered.url,
        }
    }

    /// What the sender must get right before asking (the spec's sender rules): a form's schema
    /// is an object schema with `properties`, each property an object with a `type`, and
    /// `required` naming only properties; a URL is absolute (`scheme://host…`, no spaces) and
    /// its id is not empty. The error is a sentence.
    pub fn check(&self) -> Result<(), String> {
        match &self.mode {
            Mode::Form { schema } => check_schema(schema),
            Mode::Url { id, url } if id.is_empty() => Err(format!("the URL elicitation of `{url}` has an empty id")),
            Mode::Url { url, .. } if !is_absolute_url(url) => Err(format!(
                "`{url}` is not an absolute URL (`scheme://host/…`, without spaces)"
            )),
            Mode::Url { .. } => Ok(()),
        }
    }

    /// The `elicitation/create` params, scoped to `session`.
    pub(crate) fn params(&self, session: &str) -> Value {
        let mut params = json!({"sessionId": session, "mode": self.mode(), "message": self.message});
        if let Some(id) = &self.tool_call_id {
            params["toolCallId"] = json!(id);
        }
        match &self.mode {
            Mode::Form { schema } => params["requestedSchema"] = schema.clone(),
            Mode::Url { id, url } => {
                params["elicitationId"] = json!(id);
                params["url"] = json!(url);
            }
        }
        params
    }
}

fn check_schema(schema: &Value) -> Result<(), String> {
    let Some(object) = schema.as_object() else {
        return Err("the requested schema is not a JSON object".into());
    };
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the requested schema must say `\"type\": \"object\"`".into());
    }
    let Some(properties) = object.get("properties").and_then(Value::as_object) else {
        return Err("the requested schema must have `properties` (an object)".into());
    };
    if let Some((name, _)) =
        (properties.iter()).find(|(_, property)| property.get("type").and_then(Value::as_str).is_none())
    {
        return Err(format!("property `{name}` of the requested schema has no `type`"));
    }
    for name in required(schema) {
        if !properties.contains_key(name) {
            return Err(format!(
                "`required` names `{name}`, which is not a property of the requested schema"
            ));
        }
    }
    Ok(())
}

fn required(schema: &Value) -> impl Iterator<Item = &str> {
    (schema.get("required").and_then(Value::as_array).into_iter().flatten()).filter_map(Value::as_str)
}

/// `scheme://rest`, the scheme a letter then letters, digits, `+`, `-` or `.`; something after
/// `//`; no whitespace or control characters anywhere.
fn is_absolute_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    let mut letters = scheme.chars();
    letters.next().is_some_and(|first| first.is_ascii_alphabetic())
        && letters.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !rest.starts_with('/')
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The user's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationOutcome {
    /// The user submitted the form — its content, checked against the requested schema — or
    /// agreed to open the URL (content empty: the interaction happens out of band).
    Accept(Map<String, Value>),
    /// The user explicitly declined.
    Decline,
    /// The user dismissed the question without choosing.
    Cancel,
}

impl ElicitationOutcome {
    /// Its wire name: `accept`, `decline` or `cancel`.
    pub fn action(&self) -> &'static str {
        match self {
            ElicitationOutcome::Accept(_) => "accept",
            ElicitationOutcome::Decline => "decline",
            ElicitationOutcome::Cancel => "cancel",
        }
    }

    /// The `elicitation/create` result that gives this answer.
    pub fn to_response(&self) -> Value {
        match self {
            ElicitationOutcome::Accept(content) if content.is_empty() => json!({"action": "accept"}),
            ElicitationOutcome::Accept(content) => json!({"action": "accept", "content": content}),
            other => json!({"action": other.action()}),
        }
    }
}

/// Reads the answer (`result`, the response's JSON) to `request`, the params of an
/// `elicitation/create`: the action, and for an accepted form its content, which must fit the
/// requested schema (every required property there, no other property, each value of its
/// property's type and among its choices). A missing or `null` content reads as empty. The
/// error says in a sentence what does not fit.
pub(crate) fn read_answer(request: &Value, result: &str) -> Result<ElicitationOutcome, String> {
    let answer: Value = serde_json::from_str(result).map_err(|_| "the answer is not JSON".to_string())?;
    let content = match answer.get("content") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(content)) => content.clone(),
        Some(_) => return Err("its `content` is not an object".into()),
    };
    match answer.get("action").and_then(Value::as_str) {
        Some("decline") => Ok(ElicitationOutcome::Decline),
        Some("cancel") => Ok(ElicitationOutcome::Cancel),
        Some("accept") if request.get("mode").and_then(Value::as_str) == Some(FORM) => {
            fits(request.get("requestedSchema").unwrap_or(&Value::Null), &content)?;
            Ok(ElicitationOutcome::Accept(content))
        }
        // URL mode: the content means nothing (the interaction is out of band).
        Some("accept") => Ok(ElicitationOutcome::Accept(Map::new())),
        Some(other) => Err(format!(
            "its `action` is `{other}`, not `accept`, `decline` or `cancel`"
        )),
        None => Err("it has no `action`".into()),
    }
}

/// Whether `content` fits `schema` (see [`read_answer`]).
fn fits(schema: &Value, content: &Map<String, Value>) -> Result<(), String> {
    let empty = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    if let Some(missing) = required(schema).find(|name| !content.contains_key(*name)) {
        return Err(format!("the required property `{missing}` is missing"));
    }
    for (name, value) in content {
        let Some(property) = properties.get(name) else {
            return Err(format!("`{name}` is not a property of the requested schema"));
        };
        fits_property(property, value).map_err(|why| format!("property `{name}` {why}"))?;
    }
    Ok(())
}

fn fits_property(property: &Value, value: &Value) -> Result<(), String> {
    let kind = property.get("type").and_then(Value::as_str).unwrap_or_default();
    let is = match kind {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "array" => value.as_array().is_some_and(|items| items.iter().all(Value::is_string)),
        // A type of a later revision or an extension: not ours to judge.
        _ => return Ok(()),
    };
    if !is {
        let article = if kind == "integer" || kind == "array" {
            "an"
        } else {
            "a"
        };
        let what = if kind == "array" {
            "array of strings".to_string()
        } else {
            kind.to_string()
        };
        return Err(format!("must be {article} {what}, not {}", describe(value)));
    }
    let choices = match kind {
        "array" => choices(property.get("items").unwrap_or(&Value::Null), "anyOf"),
        _ => choices(property, "oneOf"),
    };
    let chosen: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        value => vec![value],
    };
    match choices {
        Some(choices) => match chosen.iter().find(|value| !choices.contains(value)) {
            Some(value) => Err(format!("has {value}, which is not one of its choices")),
            None => Ok(()),
        },
        None => Ok(()),
    }
}

/// A property's choices: its `enum`, else the `const` of each entry of `titled` (`oneOf` for
/// a single choice, `anyOf` for the items of a multiple one); `None` when it has none.
fn choices<'a>(schema: &'a Value, titled: &str) -> Option<Vec<&'a Value>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(values.iter().collect());
    }
    let entries = schema.get(titled).and_then(Value::as_array)?;
    Some(entries.iter().filter_map(|entry| entry.get("const")).collect())
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_f64() => "a fractional number",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What a client or a bridge does with an agent's `elicitation/create`, from governance's
/// decision on the tool [`ELICITATION_TOOL`](crate::spec::ELICITATION_TOOL): `deny` declines
/// it without asking anyone; `allow` and `ask` both go to the user (the client's handler, the
/// bridge's editor), since an elicitation is itself the question — nothing can answer it
/// for the user.
pub(crate) fn gate(decision: &Decision) -> Option<String> {
    match decision {
        Decision::Deny(reason) => Some(reason.clone()),
        Decision::Allow | Decision::Ask => None,
    }
}

/// Answers the agent's elicitations — usually by asking the user. A client offers
/// elicitation (`clientCapabilities.elicitation`) only when it has one
/// (`ClientOptions::with_elicitation`), in the modes it names. Each question is bounded by
/// the client's permission timeout: running out of time, the agent's cancel or the session's
/// cancel answers `cancel`.
pub trait ElicitationHandler: Send + Sync + 'static {
    /// The modes offered. Default: form only.
    fn modes(&self) -> ElicitationModes {
        ElicitationModes { form: true, url: false }
    }

    /// The answer to one question. Default: decline. An accepted form's content must fit
    /// the requested schema; one that does not is answered `decline` (and recorded so).
    fn answer(&self, request: wire::CreateElicitationRequest) -> BoxFuture<'static, ElicitationOutcome> {
        let _ = request;
        Box::pin(async { ElicitationOutcome::Decline })
    }

    /// The agent says the URL interaction `id` (one this client accepted) is finished. Each is
    /// told once; unknown and repeated ids are ignored by the runtime. Default: nothing.
    fn completed(&self, id: wire::ElicitationId) {
        let _ = id;
    }
}

/// The default handler: offers form mode and declines every question.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeclineAll;

impl ElicitationHandler for DeclineAll {}

/// The handler a `kind: client` manifest lets answer: `handler` (default [`DeclineAll`]) in the
/// modes both it and the manifest (`metadata.agentacp.elicitation`, `declared`) offer; `None`
/// when the manifest declares none (a handler given anyway is not used, and a warning says so).
pub(crate) fn declared_handler(
    handler: Option<Arc<dyn ElicitationHandler>>,
    declared: ElicitationModes,
) -> Option<Arc<dyn ElicitationHandler>> {
    if !declared.any() {
        if handler.is_some() {
            tracing::warn!(
                "the manifest declares no elicitation (`metadata.agentacp.elicitation`): the elicitation handler is not used"
            );
        }
        return None;
    }
    let handler = handler.unwrap_or_else(|| Arc::new(DeclineAll));
    Some(Arc::new(Declared { handler, declared }))
}

/// A handler limited to the modes a manifest declares.
struct Declared {
    handler: Arc<dyn ElicitationHandler>,
    declared: ElicitationModes,
}

impl ElicitationHandler for Declared {
    fn modes(&self) -> ElicitationModes {
        self.handler.modes().intersect(self.declared)
    }

    fn answer(&self, request: wire::CreateElicitationRequest) -> BoxFuture<'static, ElicitationOutcome> {
        self.handler.answer(request)
    }

    fn completed(&self, id: wire::ElicitationId) {
        self.handler.completed(id)
    }
}

/// The URL interactions of one connection that are outstanding: asked (a server) or accepted
/// (a client) and not completed yet. An id is in it at most once.
#[derive(Debug, Default)]
pub(crate) struct Outstanding(Mutex<HashSet<String>>);

impl Outstanding {
    /// Adds `id`; `false` when it is outstanding already.
    pub(crate) fn insert(&self, id: &str) -> bool {
        lock(&self.0).insert(id.to_string())
    }

    /// Removes `id`; `false` when it was not outstanding.
    pub(crate) fn remove(&self, id: &str) -> bool {
        lock(&self.0).remove(id)
    }
}

/// What a server's connection knows of its client's elicitation: the modes it advertised at
/// `initialize`, and its outstanding URL interactions.
#[derive(Debug, Default)]
pub(crate) struct Elicitations {
    offered: Mutex<ElicitationModes>,
    /// The URL interactions asked and not completed.
    pub(crate) outstanding: Outstanding,
}

impl Elicitations {
    /// Records what `clientCapabilities` (from `initialize`) offers.
    pub(crate) fn set_offered(&self, client_capabilities: Option<&Value>) {
        *lock(&self.offered) = elicitation_offered_in(client_capabilities);
    }

    /// The modes the client offers.
    pub(crate) fn offered(&self) -> ElicitationModes {
        *lock(&self.offered)
    }
}

/// A question passed on to be answered (a bridge's to its editor): its records' subject and
/// its params, which the answer is read against.
#[derive(Debug)]
pub(crate) struct Asked {
    /// Its records' `subject.ref` ([`next_key`]).
    pub(crate) key: String,
    /// The `elicitation/create` params.
    pub(crate) params: Value,
}

static KEYS: AtomicU64 = AtomicU64::new(0);

/// A fresh `subject.ref` for one elicitation's records (the wire's ids may be long or
/// reused; they go in the records' `input`).
pub(crate) fn next_key() -> String {
    format!("elicitation-{}", KEYS.fetch_add(1, Ordering::Relaxed) + 1)
}

fn event(operator: &str, action: &str, key: &str, session: Option<&str>) -> AuditEvent {
    let mut mirror = Map::new();
    mirror.insert("audit-event-kind".into(), json!("elicitation"));
    mirror.insert("operator".into(), json!(operator));
    if let Some(session) = session {
        mirror.insert("session".into(), json!(session));
    }
    let actor = (format!("operator:{operator}"), "operator");
    super::record::event_of(actor, action, ("elicitation", key), mirror)
}

/// The `elicitation.create` record of a question (`params`, as on the wire) before it is
/// sent; `from` says who asks (`operator` for a server's own question, `agent` for one a
/// client or a bridge receives) and `decision`, when governance decided on it, what it said.
pub(crate) fn asked(operator: &str, key: &str, params: &Value, from: &str, decision: Option<&str>) -> AuditEvent {
    let session = params.get("sessionId").and_then(Value::as_str);
    let mut event = event(operator, "elicitation.create", key, session);
    let mut input = Map::new();
    input.insert("from".into(), json!(from));
    for field in [
        "mode",
        "message",
        "toolCallId",
        "requestedSchema",
        "elicitationId",
        "url",
    ] {
        if let Some(value) = params.get(field) {
            input.insert(field.into(), value.clone());
        }
    }
    if let Some(decision) = decision {
        input.insert("decision".into(), json!(decision));
    }
    event.input = Some(Value::Object(input));
    event
}

/// The `elicitation.answer` record: `answer` (the outcome, or why there is none), who gave
/// it (`by`) and, for an answer the runtime gave in the user's place, why (`reason`); before
/// it is acted on.
pub(crate) fn answered(
    operator: &str,
    key: &str,
    session: Option<&str>,
    answer: &Result<ElicitationOutcome, String>,
    by: &str,
    reason: Option<&str>,
) -> AuditEvent {
    let mut event = event(operator, "elicitation.answer", key, session);
    let mut output = match answer {
        Ok(outcome) => outcome.to_response(),
        Err(error) => json!({"error": error}),
    };
    output["answeredBy"] = json!(by);
    if let Some(reason) = reason {
        output["reason"] = json!(reason);
    }
    event.output = Some(output);
    event
}

/// The `elicitation.complete` record of the URL interaction `id`, before the notification.
pub(crate) fn completed(operator: &str, session: Option<&str>, id: &str) -> AuditEvent {
    let mut event = event(operator, "elicitation.complete", &next_key(), session);
    event.input = Some(json!({"elicitationId": id}));
    event
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Elicitation, ElicitationOutcome, read_answer};

    fn form() -> serde_json::Value {
        Elicitation::form(
            "Which strategy?",
            json!({
                "type": "object",
                "properties": {
                    "strategy": {"type": "string", "enum": ["safe", "bold"]},
                    "port": {"type": "integer"},
                    "tags": {"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "b"}]}},
                },
                "required": ["strategy"],
            }),
        )
        .params("s1")
    }

    /// An accepted form's content fits the schema or the answer is refused with a sentence;
    /// decline and cancel carry nothing; an unknown action is refused.
    #[test]
    fn an_accepted_form_must_fit_its_schema() {
        let request = form();
        let accepted = read_answer(
            &request,
            r#"{"action":"accept","content":{"strategy":"safe","port":80,"tags":["b"]}}"#,
        );
        assert!(matches!(accepted, Ok(ElicitationOutcome::Accept(content)) if content["port"] == 80));
        let refused = |answer: &str| read_answer(&request, answer).unwrap_err();
        assert_eq!(
            refused(r#"{"action":"accept"}"#),
            "the required property `strategy` is missing"
        );
        assert_eq!(
            refused(r#"{"action":"accept","content":{"strategy":"safe","port":"80"}}"#),
            "property `port` must be an integer, not a string"
        );
        assert_eq!(
            refused(r#"{"action":"accept","content":{"strategy":"reckless"}}"#),
            r#"property `strategy` has "reckless", which is not one of its choices"#
        );
        assert_eq!(
            refused(r#"{"action":"accept","content":{"strategy":"safe","tags":["c"]}}"#),
            r#"property `tags` has "c", which is not one of its choices"#
        );
        assert_eq!(
            refused(r#"{"action":"accept","content":{"strategy":"safe","extra":1}}"#),
            "`extra` is not a property of the requested schema"
        );
        assert_eq!(
            refused(r#"{"action":"maybe"}"#),
            "its `action` is `maybe`, not `accept`, `decline` or `cancel`"
        );
        assert_eq!(refused("[]"), "it has no `action`");
        assert_eq!(
            read_answer(&request, r#"{"action":"decline","content":{"x":1}}"#),
            Ok(ElicitationOutcome::Decline)
        );
        assert_eq!(
            read_answer(&request, r#"{"action":"cancel"}"#),
            Ok(ElicitationOutcome::Cancel)
        );
    }

    /// A manifest client offers only the modes both its manifest and its handler offer, and
    /// declines by default; declaring none offers none.
    #[test]
    fn a_manifest_client_offers_what_it_declares_and_its_handler_offers() {
        use super::{DeclineAll, ElicitationHandler, ElicitationModes, declared_handler};
        let both = ElicitationModes { form: true, url: true };
        let form = ElicitationModes { form: true, url: false };
        let url = ElicitationModes { form: false, url: true };
        let modes = |handler: Option<std::sync::Arc<dyn ElicitationHandler>>, declared| {
            declared_handler(handler, declared).map(|handler| handler.modes())
        };
        assert_eq!(
            modes(None, url),
            Some(ElicitationModes::NONE),
            "DeclineAll offers form only"
        );
        assert_eq!(modes(None, both), Some(form));
        assert_eq!(
            modes(Some(std::sync::Arc::new(DeclineAll)), ElicitationModes::NONE),
            None
        );
    }

    /// What a sender must get right is checked before anything is sent.
    #[test]
    fn a_bad_question_is_refused_before_it_is_sent() {
        let bad = |schema| Elicitation::form("m", schema).check().unwrap_err();
        assert!(bad(json!({"properties": {}})).contains("\"type\": \"object\""));
        assert!(bad(json!({"type": "object"})).contains("`properties`"));
        assert!(bad(json!({"type": "object", "properties": {"a": {}}})).contains("`a`"));
        assert!(bad(json!({"type": "object", "properties": {}, "required": ["b"]})).contains("`b`"));
        assert!(Elicitation::url("m", "id", "https://example.com/x").check().is_ok());
        for url in ["example.com", "https://", "https:///x", "https://a b", "1http://x"] {
            assert!(Elicitation::url("m", "id", url).check().is_err(), "{url}");
        }
        assert!(Elicitation::url("m", "", "https://example.com").check().is_err());
    }
}
