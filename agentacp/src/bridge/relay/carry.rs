//! What the editor's MCP server asks of its client, or tells it, carried to the agent, for an
//! agent served the editor's MCP-over-ACP servers by the bridge (`translate.rs`).
//!
//! Sampling, roots and logging are deprecated by MCP (SEP-2577) but still in the protocol the
//! agent and the editor's server speak: this module carries them while they are used, so it
//! names rmcp's deprecated items.
#![allow(deprecated, reason = "carries what MCP peers still send (see above)")]

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ErrorData,
    ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam, ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleClient, RoleServer, ServiceError};

use crate::mcp::CALL_TIMEOUT;
use crate::sync::lock;
/// Where an endpoint's [`AgentSide`] finds the agent's MCP session.
pub(super) type AgentSlot = Arc<Mutex<Option<Peer<RoleServer>>>>;

/// The bridge's MCP client of one of the editor's servers. It presents itself as the agent
/// (the agent's `initialize`, so the editor's server sees the agent's capabilities), and
/// carries what the editor's server asks of its client (sampling, roots, elicitation) and
/// tells it (progress, log messages, changed lists, an updated resource) to the agent's MCP
/// session on the endpoint, as it is: the agent decides, as it would with the server itself.
/// A request that comes before the agent connected, or that the agent does not answer within
/// [`CALL_TIMEOUT`], is answered with an error. Cancellations are not carried: the ids they
/// name are the editor's server's, not those the bridge gave the agent.
#[derive(Clone)]
pub(super) struct AgentSide {
    info: ClientConfig,
    agent: AgentSlot,
}

/// Who a carried request's failure names.
const AGENT: &str = "the agent's MCP client";

impl AgentSide {
    /// Presents itself as `info`; carries to the session in `agent`.
    pub(super) fn new(info: ClientConfig, agent: AgentSlot) -> AgentSide {
        AgentSide { info, agent }
    }

    fn agent(&self) -> Option<Peer<RoleServer>> {
        lock(&self.agent).clone()
    }

    fn connected(&self) -> Result<Peer<RoleServer>, ErrorData> {
        self.agent()
            .ok_or_else(|| ErrorData::internal_error("the agent has not connected to this MCP server yet", None))
    }

    /// Tells the agent `notification` (bounded; a failure is logged, as a notification has
    /// no answer to carry it).
    async fn tell(&self, what: &str, notification: impl Future<Output = Result<(), ServiceError>>) {
        if let Err(error) = within(AGENT, notification).await {
            tracing::debug!(what, %error, "a notification of the editor's MCP server did not reach the agent");
        }
    }
}

impl rmcp::ClientHandler for AgentSide {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        within(AGENT, self.connected()?.create_message(params)).await
    }

    async fn list_roots(&self, _: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        within(AGENT, self.connected()?.list_roots()).await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        within(AGENT, self.connected()?.create_elicitation(request)).await
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        if let Some(agent) = self.agent() {
            self.tell("progress", agent.notify_progress(params)).await;
        }
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _: NotificationContext<RoleClient>) {
        if let Some(agent) = self.agent() {
            self.tell("log message", agent.notify_logging_message(params)).await;
        }
    }

    async fn on_resource_updated(&self, params: ResourceUpdatedNotificationParam, _: NotificationContext<RoleClient>) {
        if let Some(agent) = self.agent() {
            self.tell("resource updated", agent.notify_resource_updated(params))
                .await;
        }
    }

    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        if let Some(agent) = self.agent() {
            self.tell("resource list changed", agent.notify_resource_list_changed())
                .await;
        }
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        if let Some(agent) = self.agent() {
            self.tell("tool list changed", agent.notify_tool_list_changed()).await;
        }
    }

    async fn on_prompt_list_changed(&self, _: NotificationContext<RoleClient>) {
        if let Some(agent) = self.agent() {
            self.tell("prompt list changed", agent.notify_prompt_list_changed())
                .await;
        }
    }
}

/// `request` to `peer`, bounded by [`CALL_TIMEOUT`]; its failure as an MCP error.
pub(super) async fn within<T>(
    peer: &str,
    request: impl Future<Output = Result<T, ServiceError>>,
) -> Result<T, ErrorData> {
    match tokio::time::timeout(CALL_TIMEOUT, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(ServiceError::McpError(error))) => Err(error),
        Ok(Err(error)) => Err(ErrorData::internal_error(format!("{peer}: {error}"), None)),
        Err(_) => Err(ErrorData::internal_error(
            format!("{peer} did not answer within {CALL_TIMEOUT:?}"),
            None,
        )),
    }
}
