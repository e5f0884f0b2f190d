//! Authentication: the methods an agent advertises at `initialize` (`authMethods`), and which
//! one the client uses at `authenticate`, if any ([`AuthPolicy`]).
//!
//! The pinned revision types two kinds, [`wire::AuthMethod`]: `agent` (the agent does it
//! itself at `authenticate`) and `terminal` (the client runs the agent interactively; never
//! passed to `authenticate`). Agents also send `env_var` methods (Codex: `OPENAI_API_KEY`,
//! `CODEX_API_KEY`), from a later schema: the agent reads the named variables from its own
//! environment at `authenticate`. [`AuthMethodInfo`] reads all three from the raw JSON.
//!
//! The agent's environment is cleared except an allow-list ([`AgentCommand`]): an `env_var`
//! method works only when its variables reach the agent — pass them with
//! [`AgentCommand::allow_env`] (or set them with [`AgentCommand::env`]).

use std::sync::Arc;

use serde_json::Value;

use crate::subprocess::AgentCommand;
use crate::wire::default as wire;

/// One variable of an `env_var` method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthEnvVar {
    /// The variable's name.
    pub name: String,
    /// Whether the method works without it.
    pub optional: bool,
}

/// What kind of method an [`AuthMethodInfo`] is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AuthKind {
    /// `agent` (or no `type`): the agent authenticates by itself at `authenticate`.
    Agent,
    /// `env_var`: the agent reads these variables from its environment at `authenticate`.
    EnvVar(Vec<AuthEnvVar>),
    /// `terminal`: the user runs the agent with these arguments in a terminal; never passed
    /// to `authenticate`.
    Terminal(wire::AuthMethodTerminal),
    /// Any other `type`, by name.
    Other(String),
}

/// One of the agent's `authMethods`, as advertised at `initialize`.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthMethodInfo {
    /// Its id, for `authenticate`.
    pub id: wire::AuthMethodId,
    /// Its human-readable name.
    pub name: String,
    /// Its description, when it has one.
    pub description: Option<String>,
    /// Its kind.
    pub kind: AuthKind,
    /// The method as the agent sent it.
    pub raw: Value,
}

impl AuthMethodInfo {
    /// Reads the `authMethods` of an `initialize` answer; entries without a string `id` are
    /// skipped (logged).
    pub fn read_all(initialize: &Value) -> Vec<AuthMethodInfo> {
        let Some(methods) = initialize.get("authMethods").and_then(Value::as_array) else {
            return Vec::new();
        };
        methods
            .iter()
            .filter_map(|raw| {
                let read = AuthMethodInfo::read(raw);
                if read.is_none() {
                    tracing::warn!(method = %raw, "ignoring an auth method without a string `id`");
                }
                read
            })
            .collect()
    }

    fn read(raw: &Value) -> Option<AuthMethodInfo> {
        let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_string);
        // The id is `id` in this revision, `methodId` in later ones.
        let id = text("id").or_else(|| text("methodId"))?;
        let kind = match raw.get("type").and_then(Value::as_str) {
            None | Some("agent") => AuthKind::Agent,
            Some("terminal") => match serde_json::from_value::<wire::AuthMethodTerminal>(raw.clone()) {
                Ok(terminal) => AuthKind::Terminal(terminal),
                Err(_) => AuthKind::Other("terminal".to_string()),
            },
            Some("env_var") => AuthKind::EnvVar(env_vars(raw)),
            Some(other) => AuthKind::Other(other.to_string()),
        };
        Some(AuthMethodInfo {
            id: wire::AuthMethodId(id.clone()),
            name: text("name").unwrap_or(id),
            description: text("description"),
            kind,
            raw: raw.clone(),
        })
    }

    /// Whether this is an `env_var` method whose required variables are all set (not empty)
    /// in the environment `command` gives the agent.
    pub fn env_vars_set_for(&self, command: &AgentCommand) -> bool {
        match &self.kind {
            AuthKind::EnvVar(vars) => {
                vars.iter().any(|var| !var.optional)
                    && vars
                        .iter()
                        .filter(|var| !var.optional)
                        .all(|var| command.agent_env(&var.name).is_some_and(|value| !value.is_empty()))
            }
            _ => false,
        }
    }

    /// The required variables of this `env_var` method that the environment `command` gives
    /// the agent lacks (unset or empty), each with whether ours has it; empty for any other
    /// kind. See [`unpassed_env_advice`] for what to tell the user.
    pub fn unpassed_env_vars(&self, command: &AgentCommand) -> Vec<UnpassedVar> {
        let AuthKind::EnvVar(vars) = &self.kind else {
            return Vec::new();
        };
        let set = |value: Option<std::ffi::OsString>| value.is_some_and(|value| !value.is_empty());
        vars.iter()
            .filter(|var| !var.optional && !set(command.agent_env(&var.name)))
            .map(|var| UnpassedVar {
                name: var.name.clone(),
                ours: set(std::env::var_os(&var.name)),
            })
            .collect()
    }

    /// One line for a person: `id (kind): name`, with the variables of an `env_var` method.
    pub fn describe(&self) -> String {
        let kind = match &self.kind {
            AuthKind::Agent => "agent".to_string(),
            AuthKind::EnvVar(vars) => {
                let names: Vec<String> = vars
                    .iter()
                    .map(|var| {
                        if var.optional {
                            format!("{} (optional)", var.name)
                        } else {
                            var.name.clone()
                        }
                    })
                    .collect();
                format!("env_var: {}", names.join(", "))
            }
            AuthKind::Terminal(_) => "terminal".to_string(),
            AuthKind::Other(kind) => kind.clone(),
        };
        let mut line = format!("{} ({kind}): {}", self.id, self.name);
        if let Some(description) = &self.description {
            line.push_str(" — ");
            line.push_str(description);
        }
        super::render::clip(&line, 300)
    }
}

/// A required variable of an `env_var` method that the agent's environment lacks
/// ([`AuthMethodInfo::unpassed_env_vars`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpassedVar {
    /// The variable's name.
    pub name: String,
    /// Whether our own environment has it (set, not empty): passing it through would do.
    pub ours: bool,
}

/// What to tell the user when `method` cannot work for want of the `unpassed` variables in
/// the agent's environment, `pass` being how the program at hand passes one (`--env`,
/// `--pass-env`): one sentence that names each variable, says to pass one our environment
/// has with `pass NAME`, and to export one it lacks. Never a value.
pub fn unpassed_env_advice(method: &AuthMethodInfo, unpassed: &[UnpassedVar], pass: &str) -> String {
    let each: Vec<String> = unpassed
        .iter()
        .map(|var| {
            let name = &var.name;
            if var.ours {
                format!("{name} is set here but not passed to the agent: pass it with `{pass} {name}`")
            } else {
                format!("{name} is not set: export {name}=… and pass it with `{pass} {name}`")
            }
        })
        .collect();
    format!(
        "the auth method `{}` reads {} from the agent's environment; {}",
        method.id,
        unpassed
            .iter()
            .map(|var| var.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        each.join("; ")
    )
}

/// The variables of an `env_var` method: `vars: [{name, optional}]` (the later schema's), or
/// a single `varName` (earlier drafts).
fn env_vars(raw: &Value) -> Vec<AuthEnvVar> {
    let mut vars: Vec<AuthEnvVar> = raw
        .get("vars")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|var| match var {
            Value::String(name) => Some(AuthEnvVar {
                name: name.clone(),
                optional: false,
            }),
            Value::Object(var) => Some(AuthEnvVar {
                name: var.get("name")?.as_str()?.to_string(),
                optional: var.get("optional").and_then(Value::as_bool).unwrap_or(false),
            }),
            _ => None,
        })
        .collect();
    if let Some(name) = raw.get("varName").and_then(Value::as_str) {
        vars.push(AuthEnvVar {
            name: name.to_string(),
            optional: false,
        });
    }
    vars
}

/// Chooses the method to authenticate with from the agent's methods and the command that
/// started it (to see its environment; for a remote agent, a command named by its URL with
/// an empty environment); `None`: no `authenticate`.
pub type AuthChooser = Arc<dyn Fn(&[AuthMethodInfo], &AgentCommand) -> Option<wire::AuthMethodId> + Send + Sync>;

/// Whether, and how, [`Client::connect`](super::Client::connect) calls `authenticate` after
/// `initialize`. A failed `authenticate` fails the connect (the agent is stopped).
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum AuthPolicy {
    /// The first `env_var` method whose required variables are all set in the agent's
    /// environment ([`AuthMethodInfo::env_vars_set_for`]); none: no `authenticate`.
    #[default]
    EnvVar,
    /// Never authenticate at connect (call [`Client::authenticate`](super::Client::authenticate)).
    Never,
    /// This method, when the agent advertises it (else connect fails).
    Method(wire::AuthMethodId),
    /// The application decides.
    Choose(AuthChooser),
    /// A remote agent's `bearer` method ([`crate::auth::BEARER`]) with this token, sent in
    /// `_meta.agentacp.token` ([`Client::authenticate_with_token`](super::Client::authenticate_with_token)),
    /// when the agent advertises it — it does when it needs a token and none came on the
    /// WebSocket upgrade; when the upgrade carried one, nothing is sent. No `bearer` method:
    /// no `authenticate`.
    Token(String),
}

impl std::fmt::Debug for AuthPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthPolicy::EnvVar => f.write_str("EnvVar"),
            AuthPolicy::Never => f.write_str("Never"),
            AuthPolicy::Method(id) => f.debug_tuple("Method").field(id).finish(),
            AuthPolicy::Choose(_) => f.write_str("Choose(..)"),
            AuthPolicy::Token(_) => f.write_str("Token(<redacted>)"),
        }
    }
}

impl AuthPolicy {
    /// The method this policy picks among `methods` for the agent `command` starts.
    pub fn choose(&self, methods: &[AuthMethodInfo], command: &AgentCommand) -> Option<wire::AuthMethodId> {
        match self {
            AuthPolicy::EnvVar => methods
                .iter()
                .find(|method| method.env_vars_set_for(command))
                .map(|method| method.id.clone()),
            AuthPolicy::Never => None,
            AuthPolicy::Method(id) => Some(id.clone()),
            AuthPolicy::Choose(choose) => choose(methods, command),
            AuthPolicy::Token(_) => methods
                .iter()
                .find(|method| method.id.as_str() == crate::auth::BEARER)
                .map(|method| method.id.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_kind_of_method_is_read_and_the_default_picks_an_env_var_method_whose_variables_are_passed() {
        let init = json!({"authMethods": [
            {"id": "chatgpt", "name": "Login with ChatGPT"},
            {"id": "login", "name": "Log in", "type": "terminal", "args": ["--login"]},
            {"id": "openai", "name": "OPENAI_API_KEY", "type": "env_var", "vars": [{"name": "AGENTACP_TEST_UNSET_KEY"}]},
            {"id": "codex", "name": "CODEX_API_KEY", "type": "env_var", "varName": "AGENTACP_TEST_KEY"},
            {"id": "oauth", "name": "OAuth", "type": "_oauth"},
            {"name": "no id"}
        ]});
        let methods = AuthMethodInfo::read_all(&init);
        assert_eq!(methods.len(), 5);
        assert_eq!(methods[0].kind, AuthKind::Agent);
        assert!(matches!(&methods[1].kind, AuthKind::Terminal(t) if t.args == ["--login"]));
        assert_eq!(methods[4].kind, AuthKind::Other("_oauth".into()));
        assert!(methods[3].describe().contains("env_var: AGENTACP_TEST_KEY"));
        let command = AgentCommand::new("agent").env("AGENTACP_TEST_KEY", "k");
        assert_eq!(
            AuthPolicy::default().choose(&methods, &command),
            Some(wire::AuthMethodId::from("codex"))
        );
        // Set, but empty: not picked. Not passed at all: not picked.
        let empty = AgentCommand::new("agent").env("AGENTACP_TEST_KEY", "");
        assert_eq!(AuthPolicy::default().choose(&methods, &empty), None);
        assert_eq!(
            AuthPolicy::default().choose(&methods, &AgentCommand::new("agent")),
            None
        );
        assert_eq!(AuthPolicy::Never.choose(&methods, &command), None);
    }

    #[test]
    fn unpassed_variables_are_named_with_whether_ours_has_them_and_the_advice_names_the_flag() {
        let init = json!({"authMethods": [
            {"id": "key", "name": "Key", "type": "env_var", "vars": [
                {"name": "PATH"}, {"name": "AGENTACP_TEST_SURELY_UNSET_KEY"}, {"name": "OPTIONAL_ONE", "optional": true}
            ]},
            {"id": "agent", "name": "Agent"}
        ]});
        let methods = AuthMethodInfo::read_all(&init);
        // PATH is ours and passed by default: not missing. Without the allow-list it is.
        let passed = methods[0].unpassed_env_vars(&AgentCommand::new("agent"));
        let unset = UnpassedVar {
            name: "AGENTACP_TEST_SURELY_UNSET_KEY".into(),
            ours: false,
        };
        assert_eq!(passed, std::slice::from_ref(&unset));
        let cleared = methods[0].unpassed_env_vars(&AgentCommand::new("agent").env_clear_all());
        let path = UnpassedVar {
            name: "PATH".into(),
            ours: true,
        };
        assert_eq!(cleared, [path, unset]);
        let advice = unpassed_env_advice(&methods[0], &cleared, "--pass-env");
        assert!(advice.contains("`--pass-env PATH`"), "{advice}");
        assert!(
            advice.contains("export AGENTACP_TEST_SURELY_UNSET_KEY=… and pass it"),
            "{advice}"
        );
        assert!(methods[1].unpassed_env_vars(&AgentCommand::new("agent")).is_empty());
    }
}
