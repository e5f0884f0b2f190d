//! What `#[acp_operator]` generates for a `kind: client` manifest: a [`ClientOperator`] whose
//! [`ClientHandlers`] are exactly the methods the manifest's client capabilities declare, and
//! [`Connect`] to drive an agent with the manifest's identity, governance and audit.

use std::future::Future;
use std::sync::Arc;

use super::connection::Client;
use super::error::ClientError;
use super::handlers::ClientHandlers;
use super::options::ClientOptions;
use crate::audit::FsyncPolicy;
use crate::env::{default_state_dir, env_path};
use crate::spec::OperatorSpec;
use crate::subprocess::AgentCommand;
use crate::tier::Tier;

/// A client operator, as the runtime drives it. `#[acp_operator]` implements this for the
/// annotated struct; authors implement the generated `…Client` handler trait instead.
pub trait ClientOperator: ClientHandlers + Sized {
    /// The manifest's tier.
    type Tier: Tier;

    /// The manifest, as read at compile time.
    fn spec() -> &'static OperatorSpec;
}

/// Starts an agent and connects a manifest client to it.
pub trait Connect: ClientOperator {
    /// Spawns `command` and runs `initialize` with the manifest's client capabilities and
    /// `clientInfo`. Unless `options` say otherwise: permission requests go through the
    /// manifest's governance binding (tier governance-aware and up) before the permission
    /// handler, and tool calls are audited where the manifest says (`AGENTACP_AUDIT_LOG`
    /// overrides the file; a governance channel's log lives in `AGENTACP_STATE_DIR`, default
    /// `~/.local/state/agentacp/<id>`).
    fn connect(
        self,
        command: AgentCommand,
        options: ClientOptions,
    ) -> impl Future<Output = Result<Client, ClientError>> + Send;
}

impl<T: ClientOperator> Connect for T {
    async fn connect(self, command: AgentCommand, mut options: ClientOptions) -> Result<Client, ClientError> {
        let spec = T::spec();
        options.handlers = Arc::new(self);
        options.client_info = (spec.id.to_string(), spec.version.to_string());
        options.operator_id.get_or_insert_with(|| spec.operator_id());
        if options.governance.is_none() && T::Tier::NAME != "basic" {
            options.governance = Some(Arc::new(spec.governance()));
        }
        if options.audit.is_off() {
            let state_dir = env_path("AGENTACP_STATE_DIR").unwrap_or_else(|| default_state_dir(spec.id));
            options.audit = spec
                .open_audit(
                    env_path("AGENTACP_AUDIT_LOG").as_deref(),
                    FsyncPolicy::EveryRecord,
                    &state_dir,
                )
                .map_err(|error| ClientError::InvalidState(error.to_string()))?;
        }
        options.elicitation = crate::oversight::elicitation::declared_handler(options.elicitation, spec.elicitation);
        let initialize = Some(spec.initialize_params());
        Client::spawn(command, options, initialize).await
    }
}
