//! The method table: every ACP method of one revision, which side handles it, and its
//! request / response / notification types.
//!
//! The methods and their sides come from `meta.json` (or, without it, the `x-side` /
//! `x-method` annotations). Each method's types are found, in this order:
//!
//! 1. a binding given by the user (`--method METHOD=Params[:Result]`, [`MethodBinding`]);
//! 2. the definitions annotated `x-method: METHOD` (every type from v0.4 on; some in the
//!    revisions of late August and early September 2025; none before);
//! 3. the routing unions ([`super::routing`]): the params type is the branch of a request or
//!    notification union whose title is made of the method's words (`terminal/create` →
//!    `CreateTerminalRequest`, `session/update` → `SessionNotification`), and the result is
//!    the branch at the same position of the paired response union, `null` included
//!    (`{"title": "AuthenticateResponse", "type": "null"}`).
//!
//! A method none of them binds is an error that names the method and what was looked for.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::names;
use super::routing::{Branch, Carries, Routing, Target, Union};

/// Which side handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    /// The agent handles it (the client sends it).
    Agent,
    /// The client handles it (the agent sends it).
    Client,
    /// Either side (`$/cancel_request`).
    Protocol,
}

impl Side {
    /// `agent`, `client`, or `either side`, for messages.
    pub fn peer(self) -> &'static str {
        match self {
            Side::Agent => "agent",
            Side::Client => "client",
            Side::Protocol => "either side",
        }
    }

    /// The `meta.json` group that lists the methods of this side.
    pub fn group(self) -> &'static str {
        match self {
            Side::Agent => "agentMethods",
            Side::Client => "clientMethods",
            Side::Protocol => "protocolMethods",
        }
    }
}

/// One method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Method {
    /// The wire name (`session/prompt`).
    pub name: String,
    /// Who handles it.
    pub side: Side,
    /// The request params type, for requests.
    pub request: Option<String>,
    /// The result type, for requests.
    pub response: Option<String>,
    /// The params type, for notifications.
    pub notification: Option<String>,
}

impl Method {
    /// Its params type, request or notification.
    pub fn params(&self) -> Option<&str> {
        self.request.as_deref().or(self.notification.as_deref())
    }
}

/// A method's types named by the user (`--method METHOD=ParamsType[:ResultType]`), for a
/// method whose binding the schema does not give. With a result type the method is a request;
/// without one, its result is read from the schema as usual (the response union), and it is a
/// notification when there is none.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MethodBinding {
    /// The wire name.
    pub method: String,
    /// The params type (a definition of the schema).
    pub params: String,
    /// The result type, for a request.
    pub result: Option<String>,
}

impl FromStr for MethodBinding {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let usage = || {
            format!(
                "`{text}`: expected METHOD=ParamsType[:ResultType], e.g. terminal/create=CreateTerminalRequest:CreateTerminalResponse"
            )
        };
        let (method, types) = text.split_once('=').ok_or_else(usage)?;
        let (params, result) = match types.split_once(':') {
            Some((params, result)) => (params, Some(result)),
            None => (types, None),
        };
        let is_type = |name: &str| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if method.is_empty() || !is_type(params) || result.is_some_and(|result| !is_type(result)) {
            return Err(usage());
        }
        Ok(MethodBinding {
            method: method.to_string(),
            params: params.to_string(),
            result: result.map(str::to_string),
        })
    }
}

impl fmt::Display for MethodBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.method, self.params)?;
        match &self.result {
            Some(result) => write!(f, ":{result}"),
            None => Ok(()),
        }
    }
}

/// The methods of one revision, sorted by side then name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodTable {
    /// Every method.
    pub methods: Vec<Method>,
    /// Result types the schema gives as `null` (a response union's `{"title": …, "type":
    /// "null"}` branch) rather than as a definition; the generator makes each a unit struct.
    pub null_results: BTreeSet<String>,
    /// Where the table departs from `meta.json`, and why.
    pub notes: Vec<String>,
}

impl MethodTable {
    /// Builds the table; `Err` lists what does not fit: a method whose types cannot be found
    /// (saying what was looked for), an annotated type whose method `meta.json` does not list,
    /// a `binding` that names an unknown method or type.
    pub fn read(schema: &Value, meta: &Value, bindings: &[MethodBinding]) -> Result<Self, Vec<String>> {
        let defs = schema
            .get("$defs")
            .and_then(Value::as_object)
            .ok_or_else(|| vec!["schema has no $defs".to_string()])?;
        let mut builder = Builder {
            defs,
            routing: Routing::read(schema),
            methods: listed_methods(meta)?,
            explicit: BTreeSet::new(),
            null_results: BTreeSet::new(),
            notes: Vec::new(),
            problems: Vec::new(),
        };
        builder.bind_explicitly(bindings);
        builder.bind_annotated();
        builder.bind_by_routing();
        builder.add_results();
        builder.read_sides();
        let Builder {
            methods,
            null_results,
            notes,
            problems,
            ..
        } = builder;
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut methods: Vec<Method> = methods.into_values().collect();
        methods.sort_by(|a, b| (a.side, &a.name).cmp(&(b.side, &b.name)));
        Ok(MethodTable {
            methods,
            null_results,
            notes,
        })
    }

    /// The method with this wire name.
    pub fn get(&self, name: &str) -> Option<&Method> {
        self.methods.iter().find(|m| m.name == name)
    }
}

/// The methods `meta.json` lists, by name, with the side of their group and no types yet.
fn listed_methods(meta: &Value) -> Result<BTreeMap<String, Method>, Vec<String>> {
    let mut methods = BTreeMap::new();
    for side in [Side::Agent, Side::Client, Side::Protocol] {
        let group = side.group();
        for name in meta
            .get(group)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.values())
        {
            let name = name
                .as_str()
                .ok_or_else(|| vec![format!("meta.json {group}: a method name is not a string")])?;
            methods.insert(
                name.to_string(),
                Method {
                    name: name.to_string(),
                    side,
                    request: None,
                    response: None,
                    notification: None,
                },
            );
        }
    }
    Ok(methods)
}

struct Builder<'a> {
    defs: &'a serde_json::Map<String, Value>,
    routing: Routing,
    methods: BTreeMap<String, Method>,
    /// The methods the user bound (`--method`): nothing else changes them.
    explicit: BTreeSet<String>,
    null_results: BTreeSet<String>,
    notes: Vec<String>,
    problems: Vec<String>,
}

/// The hint that ends every "cannot bind" problem.
fn binding_hint(method: &str, params: Option<&str>) -> String {
    format!(
        "name its types with `--method {method}={}[:ResultType]`",
        params.unwrap_or("ParamsType")
    )
}

impl Builder<'_> {
    /// Applies the user's bindings.
    fn bind_explicitly(&mut self, bindings: &[MethodBinding]) {
        for binding in bindings {
            let Some(method) = self.methods.get(&binding.method) else {
                let listed: Vec<&str> = self.methods.keys().map(String::as_str).collect();
                self.problems.push(format!(
                    "--method {binding}: `{}` is not a method of this revision (it has: {})",
                    binding.method,
                    listed.join(", ")
                ));
                continue;
            };
            if !self.explicit.insert(binding.method.clone()) {
                self.problems
                    .push(format!("--method {binding}: `{}` is bound twice", binding.method));
                continue;
            }
            if !self.defs.contains_key(&binding.params) {
                self.problems.push(format!(
                    "--method {binding}: the schema has no definition `{}`",
                    binding.params
                ));
                continue;
            }
            if let Some(result) = &binding.result
                && !self.defs.contains_key(result)
                && !self.is_null_result(result)
            {
                self.problems.push(format!(
                    "--method {binding}: the schema has no definition `{result}` (nor a `null` result of that title)"
                ));
                continue;
            }
            let is_request = binding.result.is_some()
                || self
                    .routing
                    .params_union(&binding.params)
                    .is_some_and(|(union, _)| union.carries == Carries::Requests);
            let method = Method {
                request: is_request.then(|| binding.params.clone()),
                response: binding.result.clone(),
                notification: (!is_request).then(|| binding.params.clone()),
                ..method.clone()
            };
            if let Some(result) = binding.result.as_ref().filter(|r| self.is_null_result(r)) {
                self.null_results.insert(result.clone());
            }
            self.methods.insert(binding.method.clone(), method);
        }
    }

    /// Whether a response union gives `name` as a `null` result.
    fn is_null_result(&self, name: &str) -> bool {
        !self.defs.contains_key(name)
            && self.routing.unions.iter().any(|union| {
                union.carries == Carries::Results
                    && union
                        .branches
                        .iter()
                        .any(|b| b.target == Target::Null && b.title.as_deref() == Some(name))
            })
    }

    /// Reads the `x-method` annotations, for the methods the user did not bind.
    fn bind_annotated(&mut self) {
        for (def, body) in self.defs {
            let Some(name) = body.get("x-method").and_then(Value::as_str) else {
                continue;
            };
            let Some(method) = self.methods.get_mut(name) else {
                self.problems.push(format!(
                    "{def} is annotated with method `{name}`, which meta.json does not list"
                ));
                continue;
            };
            if self.explicit.contains(name) {
                continue;
            }
            let slot = if def.ends_with("Request") {
                &mut method.request
            } else if def.ends_with("Response") {
                &mut method.response
            } else if def.ends_with("Notification") {
                &mut method.notification
            } else {
                self.problems.push(format!(
                    "{def}: cannot tell whether it is a request, response or notification"
                ));
                continue;
            };
            *slot = Some(def.clone());
        }
    }

    /// Binds the methods still without params to the branches of the request and notification
    /// unions their words fit, one pair at a time: a method and a branch are bound when each
    /// is the other's single best fit among those left.
    fn bind_by_routing(&mut self) {
        let taken: BTreeSet<String> = self
            .methods
            .values()
            .filter_map(|m| m.params().map(str::to_string))
            .collect();
        let mut branches: Vec<(&Union, &Branch)> = self
            .routing
            .params_branches()
            .filter(|(_, branch)| branch.type_name().is_some_and(|name| !taken.contains(name)))
            .collect();
        let mut unbound: Vec<String> = self
            .methods
            .values()
            .filter(|m| m.params().is_none())
            .map(|m| m.name.clone())
            .collect();
        let mut bound = Vec::new();
        loop {
            let pair = unbound.iter().enumerate().find_map(|(m, method)| {
                let b = single_best(branches.iter().map(|(_, branch)| fit(method, &branch.stem())))?;
                let stem = branches[b].1.stem();
                (single_best(unbound.iter().map(|other| fit(other, &stem))) == Some(m)).then_some((m, b))
            });
            let Some((m, b)) = pair else { break };
            bound.push((unbound.remove(m), branches.remove(b)));
        }
        for (name, (union, branch)) in bound {
            let params = branch.type_name().map(str::to_string);
            if let Some(method) = self.methods.get_mut(&name) {
                match union.carries {
                    Carries::Requests => method.request = params,
                    _ => method.notification = params,
                }
            }
        }
        for name in unbound {
            let problem = self.unbound_problem(&name, &branches);
            self.problems.push(problem);
        }
    }

    /// What was looked for, for a method no source binds.
    fn unbound_problem(&self, name: &str, left: &[(&Union, &Branch)]) -> String {
        let group = self.methods.get(name).map_or("meta.json", |m| m.side.group());
        let words = method_words(name).join(", ");
        let scores: Vec<usize> = left.iter().map(|(_, branch)| fit(name, &branch.stem())).collect();
        let best = scores.iter().copied().max().unwrap_or(0);
        let unions = self
            .routing
            .names(&[Carries::Requests, Carries::Notifications])
            .join(", ");
        let routing = if unions.is_empty() {
            "the schema has no routing unions (ClientRequest, AgentNotification, …) that list params types by title"
                .to_string()
        } else if best > 0 {
            let tied: Vec<String> = left
                .iter()
                .zip(&scores)
                .filter(|(_, score)| **score == best)
                .map(|((union, branch), _)| format!("`{}` ({})", branch.type_name().unwrap_or_default(), union.name))
                .collect();
            format!(
                "in the routing unions, {} fit its words ({words}) equally well",
                tied.join(" and ")
            )
        } else {
            format!("no branch of {unions} left unbound has a title made of its words ({words})")
        };
        format!(
            "method `{name}` ({group}) has no request or notification type: no definition is annotated `x-method: \"{name}\"`, and {routing}; {}",
            binding_hint(name, None)
        )
    }

    /// Gives each request without a result type the branch of the paired response union.
    fn add_results(&mut self) {
        let mut results = Vec::new();
        for method in self.methods.values() {
            let (Some(request), None) = (&method.request, &method.response) else {
                continue;
            };
            match self.routing.result_of(request) {
                Ok((union, branch)) => {
                    let name = branch.type_name().unwrap_or_default().to_string();
                    if branch.target == Target::Null {
                        if self.defs.contains_key(&name) {
                            self.problems.push(format!(
                                "method `{}`: {} gives its result `{name}` as `null`, but `{name}` is also a definition; {}",
                                method.name,
                                union.name,
                                binding_hint(&method.name, Some(request))
                            ));
                            continue;
                        }
                        self.null_results.insert(name.clone());
                    }
                    results.push((method.name.clone(), name));
                }
                Err(why) => self.problems.push(format!(
                    "method `{}` has no result type for its request `{request}`: no definition ending in `Response` is annotated `x-method: \"{}\"`, and {why}; {}",
                    method.name,
                    method.name,
                    binding_hint(&method.name, Some(request))
                )),
            }
        }
        for (name, result) in results {
            if let Some(method) = self.methods.get_mut(&name) {
                method.response = Some(result);
            }
        }
    }

    /// Takes each method's side from the response or notification union that carries it,
    /// where `meta.json` says otherwise (the first revision's `meta.json` lists
    /// `session/update` with the agent's methods).
    fn read_sides(&mut self) {
        for method in self.methods.values_mut() {
            if method.side == Side::Protocol || self.explicit.contains(&method.name) {
                continue;
            }
            let (carrier, carries) = match (&method.notification, &method.response) {
                (Some(notification), _) => (notification, Carries::Notifications),
                (None, Some(response)) => (response, Carries::Results),
                (None, None) => continue,
            };
            let union = self.routing.unions.iter().find(|union| {
                union.carries == carries
                    && union
                        .branches
                        .iter()
                        .any(|branch| branch.type_name() == Some(carrier.as_str()))
            });
            let Some((union, side, sender)) =
                union.and_then(|union| Some((union, union.handled_by()?, union.sender()?)))
            else {
                continue;
            };
            if side != method.side {
                self.notes.push(format!(
                    "meta.json lists `{}` in {}, but `{carrier}` is in {}, which the {} sends: the {} handles it",
                    method.name,
                    method.side.group(),
                    union.name,
                    sender.peer(),
                    side.peer(),
                ));
                method.side = side;
            }
        }
    }
}

/// A method's words: `session/request_permission` → `session`, `request`, `permission`.
fn method_words(method: &str) -> Vec<String> {
    names::words(method)
}

/// How well a type's stem fits a method: two points for each word of the method's last part
/// it has (`terminal/create`: `create`), one for each word of the namespace (`terminal`).
fn fit(method: &str, stem: &[String]) -> usize {
    let (namespace, action) = method.rsplit_once('/').unwrap_or(("", method));
    let count = |part: &str| names::words(part).iter().filter(|w| stem.contains(w)).count();
    2 * count(action) + count(namespace)
}

/// The position of the single highest score, when it is above zero and no other equals it.
fn single_best(scores: impl Iterator<Item = usize>) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    let mut tied = false;
    for (at, score) in scores.enumerate() {
        match best {
            Some((_, top)) if score == top => tied = true,
            Some((_, top)) if score < top => {}
            _ => {
                best = Some((at, score));
                tied = false;
            }
        }
    }
    best.filter(|(_, score)| *score > 0 && !tied).map(|(at, _)| at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A revision in the shape of August 2025: no `x-method`, results `null` or a definition.
    fn unannotated() -> (Value, Value) {
        let schema = json!({"$defs": {
            "ClientRequest": {"anyOf": [
                {"$ref": "#/$defs/InitializeRequest", "title": "InitializeRequest"},
                {"$ref": "#/$defs/PromptRequest", "title": "PromptRequest"},
                {"$ref": "#/$defs/SetSessionModeRequest", "title": "SetSessionModeRequest"}
            ]},
            "AgentResponse": {"anyOf": [
                {"$ref": "#/$defs/InitializeResponse", "title": "InitializeResponse"},
                {"title": "PromptResponse", "type": "null"},
                {"$ref": "#/$defs/SetSessionModeResponse", "title": "SetSessionModeResponse"}
            ]},
            "AgentRequest": {"anyOf": [
                {"$ref": "#/$defs/CreateTerminalRequest", "title": "CreateTerminalRequest"},
                {"$ref": "#/$defs/KillTerminalCommandRequest", "title": "KillTerminalCommandRequest"}
            ]},
            "ClientResponse": {"anyOf": [
                {"$ref": "#/$defs/CreateTerminalResponse", "title": "CreateTerminalResponse"},
                {"title": "KillTerminalResponse", "type": "null"}
            ]},
            "AgentNotification": {"anyOf": [{"$ref": "#/$defs/SessionNotification", "title": "SessionNotification"}]},
            "ClientNotification": {"anyOf": [{"$ref": "#/$defs/CancelNotification", "title": "CancelNotification"}]},
            "InitializeRequest": {"type": "object", "properties": {}},
            "InitializeResponse": {"type": "object", "properties": {}},
            "PromptRequest": {"type": "object", "properties": {}},
            "SetSessionModeRequest": {"type": "object", "properties": {}},
            "SetSessionModeResponse": {"type": "object", "properties": {}},
            "CreateTerminalRequest": {"type": "object", "properties": {}},
            "CreateTerminalResponse": {"type": "object", "properties": {}},
            "KillTerminalCommandRequest": {"type": "object", "properties": {}},
            "SessionNotification": {"type": "object", "properties": {}},
            "CancelNotification": {"type": "object", "properties": {}}
        }});
        let meta = json!({
            "agentMethods": {"initialize": "initialize", "session_prompt": "session/prompt",
                             "session_set_mode": "session/set_mode", "session_cancel": "session/cancel"},
            "clientMethods": {"terminal_create": "terminal/create", "terminal_kill": "terminal/kill",
                              "session_update": "session/update"}
        });
        (schema, meta)
    }

    fn types(table: &MethodTable, name: &str) -> (Option<String>, Option<String>, Option<String>) {
        let m = table.get(name).unwrap_or_else(|| panic!("no {name}"));
        (m.request.clone(), m.response.clone(), m.notification.clone())
    }

    fn some(name: &str) -> Option<String> {
        Some(name.to_string())
    }

    #[test]
    fn without_annotations_the_routing_unions_bind_every_method() {
        let (schema, meta) = unannotated();
        let table = MethodTable::read(&schema, &meta, &[]).unwrap();
        assert_eq!(
            types(&table, "terminal/create"),
            (some("CreateTerminalRequest"), some("CreateTerminalResponse"), None)
        );
        assert_eq!(
            types(&table, "session/set_mode"),
            (some("SetSessionModeRequest"), some("SetSessionModeResponse"), None)
        );
        // A result the schema gives as `null` is named by its title.
        assert_eq!(
            types(&table, "session/prompt"),
            (some("PromptRequest"), some("PromptResponse"), None)
        );
        assert_eq!(
            types(&table, "terminal/kill"),
            (some("KillTerminalCommandRequest"), some("KillTerminalResponse"), None)
        );
        assert_eq!(
            table.null_results,
            BTreeSet::from(["PromptResponse".into(), "KillTerminalResponse".into()])
        );
        assert_eq!(
            types(&table, "session/update"),
            (None, None, some("SessionNotification"))
        );
        assert_eq!(
            types(&table, "session/cancel"),
            (None, None, some("CancelNotification"))
        );
        assert!(table.notes.is_empty(), "{:?}", table.notes);
    }

    #[test]
    fn annotations_win_over_the_unions() {
        let (mut schema, meta) = unannotated();
        // Annotated to another method than its words say: the annotation is what counts.
        schema["$defs"]["CreateTerminalRequest"]["x-method"] = json!("terminal/kill");
        schema["$defs"]["KillTerminalCommandRequest"]["x-method"] = json!("terminal/create");
        let table = MethodTable::read(&schema, &meta, &[]).unwrap();
        assert_eq!(
            table.get("terminal/kill").unwrap().request,
            some("CreateTerminalRequest")
        );
        assert_eq!(
            table.get("terminal/create").unwrap().request,
            some("KillTerminalCommandRequest")
        );
    }

    #[test]
    fn a_method_nothing_binds_is_named_with_what_was_looked_for() {
        let (mut schema, mut meta) = unannotated();
        meta["clientMethods"]["fs_read_text_file"] = json!("fs/read_text_file");
        schema["$defs"]["ReadFileParams"] = json!({"type": "object", "properties": {}});
        let problems = MethodTable::read(&schema, &meta, &[]).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        let problem = &problems[0];
        assert!(
            problem.starts_with("method `fs/read_text_file` (clientMethods) has no request or notification type"),
            "{problem}"
        );
        assert!(
            problem.contains("no definition is annotated `x-method: \"fs/read_text_file\"`"),
            "{problem}"
        );
        assert!(
            problem.contains("has a title made of its words (fs, read, text, file)"),
            "{problem}"
        );
        assert!(
            problem.contains("--method fs/read_text_file=ParamsType[:ResultType]"),
            "{problem}"
        );

        // The user names the types; the result defaults to a notification outside the unions.
        let binding: MethodBinding = "fs/read_text_file=ReadFileParams:InitializeResponse".parse().unwrap();
        let table = MethodTable::read(&schema, &meta, &[binding]).unwrap();
        assert_eq!(
            types(&table, "fs/read_text_file"),
            (some("ReadFileParams"), some("InitializeResponse"), None)
        );
        let binding: MethodBinding = "fs/read_text_file=ReadFileParams".parse().unwrap();
        let table = MethodTable::read(&schema, &meta, &[binding]).unwrap();
        assert_eq!(types(&table, "fs/read_text_file"), (None, None, some("ReadFileParams")));
    }

    #[test]
    fn equal_fits_are_not_guessed() {
        let (mut schema, mut meta) = unannotated();
        // Two new branches that fit `terminal/output` equally (one word of the last part each).
        for name in ["OutputARequest", "OutputBRequest"] {
            schema["$defs"]["AgentRequest"]["anyOf"]
                .as_array_mut()
                .unwrap()
                .push(json!({"$ref": format!("#/$defs/{name}"), "title": name}));
            schema["$defs"][name] = json!({"type": "object", "properties": {}});
        }
        meta["clientMethods"]["terminal_output"] = json!("terminal/output");
        let problems = MethodTable::read(&schema, &meta, &[]).unwrap_err();
        assert!(
            problems.iter().any(|p| p.contains("`OutputARequest` (AgentRequest) and `OutputBRequest` (AgentRequest) fit its words (terminal, output) equally well")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_request_without_a_result_says_where_it_looked() {
        let (mut schema, meta) = unannotated();
        // The response union no longer lines up with its request union by title.
        schema["$defs"]["ClientResponse"] = json!({"anyOf": [{"$ref": "#/$defs/Other", "title": "Other"}]});
        let problems = MethodTable::read(&schema, &meta, &[]).unwrap_err();
        assert!(
            problems.iter().any(|p| p
                .starts_with("method `terminal/create` has no result type for its request `CreateTerminalRequest`")
                && p.contains("no response union's titles match those of AgentRequest")
                && p.contains("--method terminal/create=CreateTerminalRequest[:ResultType]")),
            "{problems:?}"
        );
    }

    #[test]
    fn the_union_that_carries_a_result_gives_its_side() {
        let (schema, mut meta) = unannotated();
        meta["agentMethods"].as_object_mut().unwrap().remove("session_prompt");
        meta["clientMethods"]["session_prompt"] = json!("session/prompt");
        let table = MethodTable::read(&schema, &meta, &[]).unwrap();
        assert_eq!(table.get("session/prompt").unwrap().side, Side::Agent);
        assert_eq!(
            table.notes,
            [
                "meta.json lists `session/prompt` in clientMethods, but `PromptResponse` is in AgentResponse, which the agent sends: the agent handles it"
            ]
        );
    }

    #[test]
    fn the_union_that_carries_a_notification_gives_its_side() {
        let (schema, mut meta) = unannotated();
        // As in the first revision: meta.json lists session/update with the agent's methods.
        meta["clientMethods"].as_object_mut().unwrap().remove("session_update");
        meta["agentMethods"]["session_update"] = json!("session/update");
        let table = MethodTable::read(&schema, &meta, &[]).unwrap();
        assert_eq!(table.get("session/update").unwrap().side, Side::Client);
        assert_eq!(table.notes.len(), 1, "{:?}", table.notes);
        assert!(table.notes[0].contains("meta.json lists `session/update` in agentMethods, but `SessionNotification` is in AgentNotification, which the agent sends: the client handles it"), "{}", table.notes[0]);
    }

    #[test]
    fn bad_bindings_are_refused_with_the_reason() {
        let (schema, meta) = unannotated();
        let read = |text: &str| {
            MethodTable::read(&schema, &meta, &[text.parse().unwrap()])
                .unwrap_err()
                .join("\n")
        };
        assert!(
            read("nope/x=PromptRequest")
                .contains("`nope/x` is not a method of this revision (it has: initialize, session/cancel")
        );
        assert!(read("session/prompt=Missing").contains("the schema has no definition `Missing`"));
        assert!(read("session/prompt=PromptRequest:Missing").contains("no definition `Missing`"));
        let twice: Vec<MethodBinding> = vec!["session/prompt=PromptRequest".parse().unwrap(); 2];
        assert!(
            MethodTable::read(&schema, &meta, &twice)
                .unwrap_err()
                .join("")
                .contains("bound twice")
        );
        for bad in ["session/prompt", "=A", "m=", "m=A:", "m=A B"] {
            let error = bad.parse::<MethodBinding>().unwrap_err();
            assert!(
                error.contains("expected METHOD=ParamsType[:ResultType]"),
                "{bad}: {error}"
            );
        }
        let binding: MethodBinding = "terminal/kill=KillTerminalCommandRequest:KillTerminalResponse"
            .parse()
            .unwrap();
        assert_eq!(
            binding.to_string(),
            "terminal/kill=KillTerminalCommandRequest:KillTerminalResponse"
        );
        // A `null` result may be named by its title.
        let table = MethodTable::read(&schema, &meta, &[binding]).unwrap();
        assert!(table.null_results.contains("KillTerminalResponse"));
    }
}
