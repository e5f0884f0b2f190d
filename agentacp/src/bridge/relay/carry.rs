//! What the editor's MCP server asks of its client, or tells it, carried to the agent, for an
//! agent served the editor's MCP-over-ACP servers by the bridge (`translate.rs`).
//!
//! Sampling, roots and logging are deprecated by MCP (SEP-2577) but still in the protocol the
//! agent and the editor's server speak: this module carries them while they are used, so it
//! names rmcp's deprecated items.
#![allow(deprecated, reason = "carries what MCP peers still send (see above)")]

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CancelledNotificationParam, ClientConfig, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequest, ElicitRequestParams, ElicitResult, ErrorData, ListRootsRequest,
    ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam, ResourceUpdatedNotificationParam,
    ServerRequest,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient, RoleServer, ServiceError,
};

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
/// [`CALL_TIMEOUT`], is answered with an error. A request the editor's server cancels is
/// cancelled at the agent too: `notifications/cancelled` naming the id the bridge gave it.
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

    /// Asks the agent `request`, bounded by [`CALL_TIMEOUT`]; when the editor's server cancels
    /// it (`asked.ct`), cancels it at the agent and stops waiting.
    async fn ask(&self, request: ServerRequest, asked: &RequestContext<RoleClient>) -> Result<ClientResult, ErrorData> {
        let agent = self.connected()?;
        let sent = within(
            AGENT,
            agent.send_cancellable_request(request, PeerRequestOptions::no_options()),
        )
        .await?;
        let id = sent.id.clone();
        tokio::select! {
            answer = within(AGENT, sent.await_response()) => answer,
            () = asked.ct.cancelled() => {
                let cancelled = CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by the editor's MCP server".into()),
                );
                self.tell("cancellation", agent.notify_cancelled(cancelled)).await;
                Err(ErrorData::internal_error("the editor's MCP server cancelled the request", None))
            }
        }
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
        asked: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match self.ask(request, &asked).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(unexpected("sampling/createMessage")),
        }
    }

    async fn list_roots(&self, asked: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        let request = ServerRequest::ListRootsRequest(ListRootsRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        match self.ask(request, &asked).await? {
            ClientResult::ListRootsResult(result) => Ok(result),
            _ => Err(unexpected("roots/list")),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        asked: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self.ask(request, &asked).await? {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(unexpected("elicitation/create")),
        }
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

/// The agent answered `method` with the result of another request.
fn unexpected(method: &str) -> ErrorData {
    ErrorData::internal_error(format!("{AGENT} answered {method} with another kind of result"), None)
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
