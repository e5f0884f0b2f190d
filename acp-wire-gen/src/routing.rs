//! The routing unions of a revision (`ClientRequest`, `AgentResponse`, `AgentNotification`, …):
//! each lists, one branch per method, the params or result types of the requests or
//! notifications one side sends.
//!
//! The revisions of August and September 2025 annotate few or none of their types with
//! `x-method`, so for them the method table ([`super::methods`]) reads the bindings here:
//!
//! - a branch is `{"$ref": "#/$defs/T", "title": "T"}`, or, for a result without a payload,
//!   `{"title": "AuthenticateResponse", "type": "null"}`;
//! - a request union and its response union list their methods in the same order (upstream
//!   generates both from one list), so the result of a request is the branch at the same
//!   position; which response union goes with which request union is read from the titles
//!   (`InitializeRequest` beside `InitializeResponse`), since the request unions were named
//!   by the side that *receives* them in the first revision and by the side that sends them
//!   afterwards;
//! - response and notification unions are named after the side that sends them in every
//!   revision, which gives the side that handles each of their methods.
//!
//! From v0.7 the unions are whole JSON-RPC envelopes (objects with `method` and `params`);
//! their branches are not routing branches and are left alone (those revisions annotate every
//! type).

use serde_json::{Map, Value};

use super::methods::Side;
use super::names;
use super::plan::ENVELOPES;
use super::shape::ref_name;

/// What a routing union carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carries {
    /// Request params.
    Requests,
    /// Request results.
    Results,
    /// Notification params.
    Notifications,
}

/// What one branch names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A definition of `$defs`.
    Definition(String),
    /// `type: null`: a result without a payload, named by the branch's title.
    Null,
    /// Neither (the title-only branch of extension methods, `ExtMethodRequest`).
    Nothing,
}

/// One branch of a routing union.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch {
    /// The branch's `title`.
    pub title: Option<String>,
    /// What it names.
    pub target: Target,
}

impl Branch {
    /// The type name the branch stands for: its definition, else its title.
    pub fn type_name(&self) -> Option<&str> {
        match &self.target {
            Target::Definition(name) => Some(name),
            Target::Null | Target::Nothing => self.title.as_deref(),
        }
    }

    /// The title (else the type name) without its `Request` / `Response` / `Notification`
    /// ending, as lowercase words: `CreateTerminalRequest` → `create terminal`.
    pub fn stem(&self) -> Vec<String> {
        self.title.as_deref().or(self.type_name()).map(stem).unwrap_or_default()
    }
}

/// A routing union.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Union {
    /// Its definition name (`AgentRequest`).
    pub name: String,
    /// What it carries.
    pub carries: Carries,
    /// Its branches, in schema order.
    pub branches: Vec<Branch>,
}

impl Union {
    /// The side that handles the methods of a response or notification union: these are named
    /// after the side that sends them (`AgentResponse`: the agent answers, so it handles the
    /// requests; `AgentNotification`: the agent sends, so the client handles them). `None` for
    /// a request union, whose naming changed between revisions.
    pub fn handled_by(&self) -> Option<Side> {
        let sender = self.sender()?;
        match self.carries {
            Carries::Results => Some(sender),
            Carries::Notifications => Some(match sender {
                Side::Agent => Side::Client,
                _ => Side::Agent,
            }),
            Carries::Requests => None,
        }
    }

    /// The side that sends what a response or notification union carries: the one it is
    /// named after. `None` for a request union.
    pub fn sender(&self) -> Option<Side> {
        if self.carries == Carries::Requests {
            None
        } else if self.name.starts_with("Agent") {
            Some(Side::Agent)
        } else if self.name.starts_with("Client") {
            Some(Side::Client)
        } else {
            None
        }
    }
}

/// The routing unions of a schema.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routing {
    /// Every routing union the schema has, in [`ENVELOPES`] order.
    pub unions: Vec<Union>,
}

impl Routing {
    /// Reads the envelope definitions whose branches are all routing branches.
    pub fn read(schema: &Value) -> Routing {
        let Some(defs) = schema.get("$defs").and_then(Value::as_object) else {
            return Routing::default();
        };
        let unions = ENVELOPES
            .iter()
            .filter_map(|name| {
                let carries = if name.ends_with("Request") {
                    Carries::Requests
                } else if name.ends_with("Response") {
                    Carries::Results
                } else {
                    Carries::Notifications
                };
                let branches = defs
                    .get(*name)?
                    .get("anyOf")
                    .or_else(|| defs.get(*name)?.get("oneOf"))?
                    .as_array()?
                    .iter()
                    .map(|branch| branch.as_object().and_then(routing_branch))
                    .collect::<Option<Vec<Branch>>>()?;
                Some(Union {
                    name: name.to_string(),
                    carries,
                    branches,
                })
            })
            .collect();
        Routing { unions }
    }

    /// The request and notification branches naming a definition: `(union, branch)`.
    pub fn params_branches(&self) -> impl Iterator<Item = (&Union, &Branch)> {
        self.unions
            .iter()
            .filter(|union| union.carries != Carries::Results)
            .flat_map(|union| union.branches.iter().map(move |branch| (union, branch)))
            .filter(|(_, branch)| matches!(branch.target, Target::Definition(_)))
    }

    /// The union (and position) listing `params` as request or notification params.
    pub fn params_union(&self, params: &str) -> Option<(&Union, usize)> {
        self.unions
            .iter()
            .filter(|union| union.carries != Carries::Results)
            .find_map(|union| {
                let at = union
                    .branches
                    .iter()
                    .position(|branch| branch.target == Target::Definition(params.to_string()))?;
                Some((union, at))
            })
    }

    /// The response union that answers `requests`: the one whose titles agree with the
    /// request union's at the most positions (`InitializeRequest` ~ `InitializeResponse`);
    /// `None` when none agrees anywhere, or two agree equally.
    pub fn results_for(&self, requests: &Union) -> Option<&Union> {
        let agreement = |results: &Union| {
            requests
                .branches
                .iter()
                .zip(&results.branches)
                .filter(|(request, result)| {
                    let stem = request.stem();
                    !stem.is_empty() && stem == result.stem()
                })
                .count()
        };
        let mut scored: Vec<(usize, &Union)> = self
            .unions
            .iter()
            .filter(|union| union.carries == Carries::Results)
            .map(|union| (agreement(union), union))
            .collect();
        scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
        match scored.as_slice() {
            [(best, union), rest @ ..] if *best > 0 && rest.first().is_none_or(|(next, _)| next < best) => Some(union),
            _ => None,
        }
    }

    /// The result branch of the request whose params are `params`: the branch at the same
    /// position of the paired response union (or, when the two unions differ in length, the
    /// one with the same title stem). `Err` says what is missing.
    pub fn result_of(&self, params: &str) -> Result<(&Union, &Branch), String> {
        let Some((requests, at)) = self
            .params_union(params)
            .filter(|(union, _)| union.carries == Carries::Requests)
        else {
            return Err(format!("`{params}` is in no request union"));
        };
        let results = self.results_for(requests).ok_or_else(|| {
            format!(
                "no response union's titles match those of {}, where `{params}` is",
                requests.name
            )
        })?;
        let branch = if results.branches.len() == requests.branches.len() {
            results.branches.get(at)
        } else {
            let stem = requests.branches[at].stem();
            results.branches.iter().find(|branch| branch.stem() == stem)
        };
        match branch {
            Some(branch) if branch.target != Target::Nothing && branch.type_name().is_some() => Ok((results, branch)),
            _ => Err(format!(
                "{} has no result for `{params}` (branch {} of {})",
                results.name,
                at + 1,
                requests.name
            )),
        }
    }

    /// The names of the routing unions, for messages.
    pub fn names(&self, carries: &[Carries]) -> Vec<&str> {
        self.unions
            .iter()
            .filter(|union| carries.contains(&union.carries))
            .map(|union| union.name.as_str())
            .collect()
    }
}

/// A routing branch: `$ref` (or `allOf: [$ref]`), `type: null`, or a title alone; `None` for
/// anything else (an envelope object).
fn routing_branch(branch: &Map<String, Value>) -> Option<Branch> {
    let title = branch.get("title").and_then(Value::as_str).map(str::to_string);
    let reference = branch.get("$ref").and_then(Value::as_str).or_else(|| {
        match branch.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
            Some([only]) => only.get("$ref").and_then(Value::as_str),
            _ => None,
        }
    });
    let target = if let Some(reference) = reference {
        Target::Definition(ref_name(reference))
    } else if branch.get("type").and_then(Value::as_str) == Some("null") {
        Target::Null
    } else if branch.keys().all(|key| key == "title" || key == "description") && title.is_some() {
        Target::Nothing
    } else {
        return None;
    };
    Some(Branch { title, target })
}

/// `CreateTerminalRequest` → `create terminal`: a type name's words without the ending that
/// says what kind of message it is.
pub fn stem(type_name: &str) -> Vec<String> {
    let mut words = names::words(type_name);
    if words
        .last()
        .is_some_and(|last| matches!(last.as_str(), "request" | "response" | "notification"))
    {
        words.pop();
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The first revision's shape: request unions named by the receiver, results `null` or a
    /// definition, paired by position.
    fn early() -> Value {
        json!({"$defs": {
            "AgentRequest": {"anyOf": [
                {"$ref": "#/$defs/InitializeRequest", "title": "InitializeRequest"},
                {"$ref": "#/$defs/AuthenticateRequest", "title": "AuthenticateRequest"}
            ]},
            "AgentResponse": {"anyOf": [
                {"$ref": "#/$defs/InitializeResponse", "title": "InitializeResponse"},
                {"title": "AuthenticateResponse", "type": "null"}
            ]},
            "ClientRequest": {"anyOf": [
                {"$ref": "#/$defs/KillTerminalCommandRequest", "title": "KillTerminalCommandRequest"}
            ]},
            "ClientResponse": {"anyOf": [
                {"title": "KillTerminalResponse", "type": "null"}
            ]},
            "AgentNotification": {"anyOf": [
                {"$ref": "#/$defs/SessionNotification", "title": "SessionNotification"},
                {"title": "ExtNotification"}
            ]}
        }})
    }

    #[test]
    fn results_are_paired_by_position_in_the_union_whose_titles_agree() {
        let routing = Routing::read(&early());
        assert_eq!(routing.unions.len(), 5);
        let (union, branch) = routing.result_of("InitializeRequest").unwrap();
        assert_eq!(union.name, "AgentResponse");
        assert_eq!(branch.target, Target::Definition("InitializeResponse".into()));
        let (_, branch) = routing.result_of("AuthenticateRequest").unwrap();
        assert_eq!(
            (branch.target.clone(), branch.type_name()),
            (Target::Null, Some("AuthenticateResponse"))
        );
        // Titles that differ (`KillTerminalCommand…` / `KillTerminal…`) pair by position once
        // the unions are paired.
        let requests = &routing
            .unions
            .iter()
            .find(|u| u.name == "ClientRequest")
            .unwrap()
            .clone();
        assert!(routing.results_for(requests).is_none(), "no title agrees");
        let error = routing.result_of("KillTerminalCommandRequest").unwrap_err();
        assert!(
            error.contains("no response union's titles match those of ClientRequest"),
            "{error}"
        );
        assert!(
            routing
                .result_of("SessionNotification")
                .unwrap_err()
                .contains("in no request union")
        );
    }

    #[test]
    fn response_and_notification_unions_name_their_sender() {
        let routing = Routing::read(&early());
        let side = |name: &str| routing.unions.iter().find(|u| u.name == name).unwrap().handled_by();
        assert_eq!(side("AgentResponse"), Some(Side::Agent));
        assert_eq!(side("ClientResponse"), Some(Side::Client));
        assert_eq!(side("AgentNotification"), Some(Side::Client));
        assert_eq!(side("AgentRequest"), None);
    }

    #[test]
    fn envelope_objects_are_not_routing_unions() {
        let schema = json!({"$defs": {"ClientRequest": {"anyOf": [
            {"type": "object", "properties": {"method": {"type": "string"}}}
        ]}}});
        assert!(Routing::read(&schema).unions.is_empty());
    }

    #[test]
    fn stems_drop_the_message_kind() {
        assert_eq!(stem("CreateTerminalRequest"), ["create", "terminal"]);
        assert_eq!(stem("SessionNotification"), ["session"]);
        assert_eq!(stem("RequestPermissionRequest"), ["request", "permission"]);
    }
}
