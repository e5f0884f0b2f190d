//! Authentication: the methods the agent offers at `initialize` (`authMethods`), the method
//! `--auth` names (checked against them), and the `Watch` that notes where the agent refused
//! the kit for want of authentication (`-32000`). Such a refusal is reported once, as the
//! failure [`REQUIRED`], and the checks it kept from judging are skipped, saying so: never a
//! failure they did not see.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::driver::error_code;
use crate::{Config, Outcome, Verdict, trim};

/// The id of the verdict that reports the refusal.
pub const REQUIRED: &str = "auth.required";

/// ACP's "Authentication required".
pub const AUTH_REQUIRED: i64 = -32000;

const TITLE: &str = "the agent serves the kit without authentication, or with --auth";
const RULE: &str = "ACP initialization, authentication: an agent that advertises authMethods may refuse session requests with -32000 until the client calls authenticate; the kit authenticates only with --auth METHOD, so without it every check that needs a session is skipped";

/// One of the agent's `authMethods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Method {
    /// Its id, for `authenticate` (`id`, or `methodId` in later schemas).
    pub id: String,
    /// What kind it is.
    pub kind: Kind,
}

/// What kind of auth method a [`Method`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `agent` (or no `type`): the agent does it at `authenticate`.
    Agent,
    /// `env_var`: the agent reads these variables (the required ones) at `authenticate`.
    EnvVar(Vec<String>),
    /// `terminal`: the user runs the agent in a terminal; never passed to `authenticate`.
    Terminal,
    /// Any other `type`.
    Other(String),
}

impl Method {
    /// The `authMethods` of an `initialize` result (entries without an id are left out).
    pub fn all_of(initialize: &Value) -> Vec<Method> {
        let methods = initialize.get("authMethods").and_then(Value::as_array);
        methods.into_iter().flatten().filter_map(Method::read).collect()
    }

    fn read(raw: &Value) -> Option<Method> {
        let id = raw.get("id").or_else(|| raw.get("methodId"))?.as_str()?.to_string();
        let kind = match raw.get("type").and_then(Value::as_str) {
            None | Some("agent") => Kind::Agent,
            Some("env_var") => Kind::EnvVar(required_vars(raw)),
            Some("terminal") => Kind::Terminal,
            Some(other) => Kind::Other(other.to_string()),
        };
        Some(Method { id, kind })
    }

    /// `id`, with its kind unless it is `agent`: `codex-api-key (env_var: CODEX_API_KEY)`.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Agent => self.id.clone(),
            Kind::EnvVar(vars) => format!("{} (env_var: {})", self.id, vars.join(", ")),
            Kind::Terminal => format!("{} (terminal)", self.id),
            Kind::Other(kind) => format!("{} ({kind})", self.id),
        }
    }
}

/// The required variables of an `env_var` method: `vars: [{name, optional}]`, or `varName`.
fn required_vars(raw: &Value) -> Vec<String> {
    let listed = raw.get("vars").and_then(Value::as_array).into_iter().flatten();
    let mut names: Vec<String> = listed
        .filter(|var| var.get("optional") != Some(&Value::Bool(true)))
        .filter_map(|var| var.as_str().or_else(|| var.get("name")?.as_str()))
        .map(str::to_string)
        .collect();
    names.extend(raw.get("varName").and_then(Value::as_str).map(str::to_string));
    names
}

/// The methods, for a sentence: `a, b (env_var: X)`, or `none`.
fn listed(methods: &[Method]) -> String {
    if methods.is_empty() {
        return "none".into();
    }
    methods.iter().map(Method::describe).collect::<Vec<_>>().join(", ")
}

/// Checks that `--auth id` names a method the agent offers, that can be passed to
/// `authenticate`, and (for an `env_var` one) whose variables the agent gets (`env` tells
/// whether a variable is set in the agent's environment); `Err` says why not, with the
/// methods offered.
pub fn check_choice(methods: &[Method], id: &str, env: impl Fn(&str) -> bool) -> Result<(), String> {
    let Some(method) = methods.iter().find(|m| m.id == id) else {
        return Err(format!(
            "--auth {id}: the agent offers no such auth method (it offers: {})",
            listed(methods)
        ));
    };
    match &method.kind {
        Kind::Terminal => Err(format!(
            "--auth {id}: a terminal auth method is never passed to `authenticate`: log in by \
             running the agent in a terminal, then run the kit without --auth"
        )),
        Kind::EnvVar(vars) => match vars.iter().find(|var| !env(var)) {
            Some(var) => Err(format!(
                "--auth {id}: the agent reads {var} at `authenticate`, and it is not set: set it and pass it with --env {var}"
            )),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Where the agent refused the kit for want of authentication.
#[derive(Debug, Clone)]
struct Refusal {
    /// The request refused (`session/new`, `session/prompt`, ...).
    method: String,
    /// The agent's error message.
    message: String,
}

/// What the run learnt of the agent's authentication: its methods, whether it refuses
/// sessions (seen by the preflight), the first refusal, and whether the running check saw one.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    methods: Mutex<Vec<Method>>,
    /// The preflight's `session/new` was refused: the checks that need a session are skipped.
    sessions: Mutex<Option<Refusal>>,
    /// The first refusal of the run, the preflight's or a check's.
    first: Mutex<Option<Refusal>>,
    /// The running check saw a refusal.
    in_check: AtomicBool,
    /// A check was skipped for a refusal.
    kept: AtomicBool,
}

impl Watch {
    /// Notes the agent's methods (from the preflight's `initialize`).
    pub(crate) fn set_methods(&self, methods: Vec<Method>) {
        if let Ok(mut kept) = self.methods.lock() {
            *kept = methods;
        }
    }

    /// Whether `response` (to `method`) refuses for want of authentication; if so it is noted,
    /// against the running check.
    pub(crate) fn refused(&self, method: &str, response: &Value) -> bool {
        if error_code(response) != Some(AUTH_REQUIRED) {
            return false;
        }
        let refusal = Refusal {
            method: method.to_string(),
            message: response["error"]["message"].as_str().unwrap_or_default().to_string(),
        };
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert(refusal);
        }
        self.in_check.store(true, Ordering::SeqCst);
        true
    }

    /// Notes that the preflight's `session/new` was refused (`response`), if it was.
    pub(crate) fn note_sessions(&self, response: &Value) {
        if self.refused("session/new", response)
            && let (Ok(mut sessions), Ok(first)) = (self.sessions.lock(), self.first.lock())
        {
            *sessions = first.clone();
        }
    }

    /// Whether the agent refuses sessions (the preflight's was refused).
    pub(crate) fn refuses_sessions(&self) -> bool {
        self.sessions.lock().is_ok_and(|sessions| sessions.is_some())
    }

    /// Why a check that needs a session is skipped, when the agent refuses sessions (the
    /// check is then counted as kept from judging).
    pub(crate) fn skip_for_sessions(&self) -> Option<String> {
        let reason = self.sessions.lock().ok()?.as_ref().map(skip_reason)?;
        self.kept.store(true, Ordering::SeqCst);
        Some(reason)
    }

    /// A check starts: it has seen no refusal yet.
    pub(crate) fn start_check(&self) {
        self.in_check.store(false, Ordering::SeqCst);
    }

    /// Why the check that just ran is skipped, when it saw a refusal.
    pub(crate) fn seen_in_check(&self) -> Option<String> {
        if !self.in_check.load(Ordering::SeqCst) {
            return None;
        }
        let reason = self.first.lock().ok()?.as_ref().map(skip_reason)?;
        self.kept.store(true, Ordering::SeqCst);
        Some(reason)
    }

    /// The [`REQUIRED`] failure, when a refusal kept a check from judging.
    pub(crate) fn verdict(&self, config: &Config) -> Option<Verdict> {
        if !self.kept.load(Ordering::SeqCst) {
            return None;
        }
        let refusal = self.first.lock().ok()?.clone()?;
        let methods = self.methods.lock().ok()?.clone();
        let answered = format!(
            "it answered {} with {AUTH_REQUIRED} ({})",
            refusal.method,
            trim(&refusal.message)
        );
        let evidence = match (&config.auth, methods.is_empty()) {
            (Some(id), _) => {
                format!("the agent still requires authentication after `authenticate` with {id}: {answered}")
            }
            (None, false) => format!(
                "the agent requires authentication: methods {}; {answered}; run the kit with --auth METHOD \
                 (and --env NAME for the variable of an env_var method)",
                listed(&methods)
            ),
            (None, true) => format!(
                "the agent requires authentication and offers no auth methods at initialize: {answered}; \
                 log it in outside the kit, or give it its credentials (--env NAME)"
            ),
        };
        Some(Verdict {
            id: REQUIRED,
            title: TITLE,
            rule: RULE,
            outcome: Outcome::Fail(evidence),
            millis: 0,
        })
    }
}

/// Why a check the refusal kept from judging is skipped.
fn skip_reason(refusal: &Refusal) -> String {
    format!(
        "the agent requires authentication ({REQUIRED}): it refused {} with {AUTH_REQUIRED}",
        refusal.method
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn methods_are_read_and_a_choice_is_checked_against_them() {
        let init = json!({"authMethods": [
            {"id": "chatgpt", "name": "Login with ChatGPT"},
            {"id": "key", "type": "env_var", "vars": [{"name": "CONFORM_KEY"}, {"name": "CONFORM_BASE", "optional": true}]},
            {"methodId": "old", "type": "env_var", "varName": "CONFORM_OLD"},
            {"id": "login", "type": "terminal", "args": ["--login"]},
            {"name": "no id"}
        ]});
        let methods = Method::all_of(&init);
        let described: Vec<String> = methods.iter().map(Method::describe).collect();
        assert_eq!(
            described,
            [
                "chatgpt",
                "key (env_var: CONFORM_KEY)",
                "old (env_var: CONFORM_OLD)",
                "login (terminal)"
            ]
        );
        assert_eq!(check_choice(&methods, "chatgpt", |_| false), Ok(()));
        assert_eq!(check_choice(&methods, "key", |var| var == "CONFORM_KEY"), Ok(()));
        let unset = check_choice(&methods, "key", |_| false).unwrap_err();
        assert!(unset.contains("--env CONFORM_KEY"), "{unset}");
        let unknown = check_choice(&methods, "nope", |_| true).unwrap_err();
        assert!(
            unknown.contains("no such auth method (it offers: chatgpt, key (env_var: CONFORM_KEY)"),
            "{unknown}"
        );
        assert!(
            check_choice(&methods, "login", |_| true)
                .unwrap_err()
                .contains("terminal")
        );
    }
}
