//! The state one client connection shares between the reader loop and the running turns:
//! the ordered writer, the requests we wait on, audit, governance and the session store.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::audit::{AuditEvent, AuditLog};
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::{Pending, RequestFailure};
use crate::jsonrpc::{self, Id, RpcError};

use super::memory::MemoryAudit;
use super::session::{SessionContext, SessionStore};
use crate::methods::ClientMethods;
use crate::sync::lock;

pub(crate) struct Connection {
    pub(crate) outbox: Outbox,
    pub(crate) pending: Pending,
    pub(crate) audit: AuditLog,
    pub(crate) store: Arc<dyn SessionStore>,
    /// Whether updates are recorded for `session/load`.
    pub(crate) record_history: bool,
    pub(crate) governance: Arc<dyn Governance>,
    pub(crate) operator_id: String,
    pub(crate) permission_timeout: Duration,
    /// How long one request to the editor (`fs/*`, `terminal/*`) may take.
    pub(crate) editor_timeout: Duration,
    /// The editor methods the manifest lets the operator call.
    declared_editor: ClientMethods,
    /// The editor methods the client advertised at `initialize` (none before it).
    offered_editor: Mutex<ClientMethods>,
    client_name: Mutex<Option<String>>,
    tool_calls: AtomicU64,
}

impl Connection {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        outbox: Outbox,
        audit: AuditLog,
        store: Arc<dyn SessionStore>,
        record_history: bool,
        governance: Arc<dyn Governance>,
        operator_id: String,
        permission_timeout: Duration,
        editor_timeout: Duration,
        declared_editor: ClientMethods,
    ) -> Self {
        Connection {
            outbox,
            pending: Pending::new(),
            audit,
            store,
            record_history,
            governance,
            operator_id,
            permission_timeout,
            editor_timeout,
            declared_editor,
            offered_editor: Mutex::new(ClientMethods::NONE),
            client_name: Mutex::new(None),
            tool_calls: AtomicU64::new(0),
        }
    }

    /// Writes an audit record; the action it records must not happen if this fails.
    pub(crate) fn audit(&self, event: AuditEvent) -> Result<()> {
        self.audit
            .record(event)
            .map(drop)
            .map_err(|error| Error::Audit(error.to_string()))
    }

    /// Who answers permission requests: `client:<clientInfo.name>` from `initialize`.
    pub(crate) fn client_name(&self) -> String {
        lock(&self.client_name).clone().unwrap_or_else(|| "client".to_string())
    }

    pub(crate) fn set_client_name(&self, name: Option<&str>) {
        *lock(&self.client_name) = Some(match name {
            Some(name) => format!("client:{name}"),
            None => "client".to_string(),
        });
    }

    /// Records the `clientCapabilities` of `initialize`.
    pub(crate) fn set_offered_editor(&self, offered: ClientMethods) {
        *lock(&self.offered_editor) = offered;
    }

    /// The editor methods the manifest declares.
    pub(crate) fn declared_editor(&self) -> ClientMethods {
        self.declared_editor
    }

    /// The editor methods the client advertised.
    pub(crate) fn offered_editor(&self) -> ClientMethods {
        *lock(&self.offered_editor)
    }

    pub(crate) fn next_tool_call_id(&self) -> String {
        format!("call_{}", self.tool_calls.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// One `session/update` notification for `session`; `update` is the update object's JSON.
    /// Recorded in the session's history first when `session/load` is on.
    pub(crate) async fn send_update(&self, session: &SessionContext, update: String) -> Result<()> {
        if self.record_history {
            self.store.append(session.id(), &update)?;
        }
        self.send_update_unrecorded(session, update).await
    }

    /// One `session/update` that is not added to the history (a replay of it).
    pub(crate) async fn send_update_unrecorded(&self, session: &SessionContext, update: String) -> Result<()> {
        let mut line = Vec::with_capacity(update.len() + session.id().len() + 80);
        line.extend_from_slice(br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"#);
        serde_json::to_writer(&mut line, session.id())?;
        line.extend_from_slice(br#","update":"#);
        line.extend_from_slice(update.as_bytes());
        line.extend_from_slice(b"}}\n");
        Ok(self.outbox.send(line).await?)
    }

    pub(crate) async fn respond(&self, id: &Id, result: &impl Serialize) -> Result<()> {
        Ok(self.outbox.send(jsonrpc::encode_result(id, result)).await?)
    }

    pub(crate) async fn respond_error(&self, id: &Id, error: &RpcError) -> Result<()> {
        Ok(self.outbox.send(jsonrpc::encode_error(id, error)).await?)
    }

    /// Sends a request to the client and waits for its answer, at most `timeout`.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: &impl Serialize,
        timeout: Duration,
    ) -> std::result::Result<Box<RawValue>, RequestFailure> {
        self.pending.call(&self.outbox, method, params, timeout).await
    }
}

impl MemoryAudit for Connection {
    fn operator_id(&self) -> &str {
        &self.operator_id
    }

    fn audit(&self, event: AuditEvent) -> Result<()> {
        Connection::audit(self, event)
    }
}
