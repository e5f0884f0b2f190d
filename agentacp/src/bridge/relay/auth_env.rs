//! An `env_var` auth method through a bridge: the agent reads its variables from its own
//! environment, which the bridge clears but for what it is told to pass (`--pass-env`,
//! `AGENTACP_BRIDGE_PASS_ENV`). The editor's `authenticate` with such a method whose variable
//! the agent does not get is answered by the bridge, with the variable named and the flag that
//! passes it, instead of failing at the agent with "OPENAI_API_KEY is not set". A remote agent
//! has its own environment: nothing is checked.

use std::sync::Mutex;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::client::{AuthMethodInfo, unpassed_env_advice};
use crate::downstream::Downstream;
use crate::subprocess::AgentCommand;

/// What an `authenticate` of the editor's needs of the agent's environment.
#[derive(Debug, Default)]
pub(super) struct AuthEnv {
    /// The started agent's command (its environment); `None` for a remote agent.
    command: Option<AgentCommand>,
    /// The agent's `authMethods`, once it answered `initialize`.
    methods: Mutex<Vec<AuthMethodInfo>>,
}

impl AuthEnv {
    /// For the agent `downstream` starts.
    pub(super) fn new(downstream: &Downstream) -> AuthEnv {
        let command = match downstream {
            Downstream::Process(command) => Some(command.clone()),
            #[cfg(feature = "websocket")]
            Downstream::Remote(_) => None,
        };
        AuthEnv {
            command,
            methods: Mutex::default(),
        }
    }

    /// Notes the methods of the agent's `initialize` answer.
    pub(super) fn advertised(&self, initialize: &Value) {
        *crate::sync::lock(&self.methods) = AuthMethodInfo::read_all(initialize);
    }

    /// Why the editor's `authenticate` (its `params`) cannot work: an `env_var` method whose
    /// required variable the agent's environment lacks, said with the flag that passes it.
    pub(super) fn refusal(&self, params: Option<&RawValue>) -> Option<String> {
        let command = self.command.as_ref()?;
        let params: Value = serde_json::from_str(params?.get()).ok()?;
        let id = params.get("methodId").and_then(Value::as_str)?;
        let methods = crate::sync::lock(&self.methods);
        let method = methods.iter().find(|method| method.id.as_str() == id)?;
        let unpassed = method.unpassed_env_vars(command);
        if unpassed.is_empty() {
            return None;
        }
        Some(format!(
            "{} (this bridge's agent gets only the variables it is told to pass: `--pass-env NAME` or AGENTACP_BRIDGE_PASS_ENV)",
            unpassed_env_advice(method, &unpassed, "--pass-env")
        ))
    }
}
