//! The state one client connection shares between the reader loop and the running turns:
//! the ordered writer, the requests we wait on, audit, governance and the session store.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::audit::{AuditEvent, AuditLog};
use crate::auth::{Identity, TokenStore};
use crate::connection::dialect::{Negotiate, PROMPT_ACCEPTED, SESSION_HISTORY, Seam};
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::{Pending, RequestFailure};
use crate::jsonrpc::{self, Id, RpcError};
use crate::oversight::record::write_ahead;

use super::memory::MemoryAudit;
use super::session::{SessionContext, SessionStore};
use crate::methods::ClientMethods;
use crate::surface::ConfigValue;
use crate::sync::lock;

/// Who is at the other end of a connection, and whether it has proved it.
#[derive(Default)]
pub(crate) struct Access {
    /// The tokens `authenticate` checks; `None`: the transport needs no authentication (stdio,
    /// or a loopback listener with no tokens configured).
    pub(crate) tokens: Option<Arc<TokenStore>>,
    /// The identity the client proved (at the WebSocket upgrade, or with `authenticate`),
    /// with the token that proved it: checked again at each request, so a token revoked from
    /// the store stops serving the connections it opened. Watched by what closes a connection
    /// left unauthenticated.
    proof: tokio::sync::watch::Sender<Option<(Identity, String)>>,
    /// What is given back once the client proves who it is (over WebSocket: its place among
    /// the unauthenticated connections).
    held_until_proven: Mutex<Option<Box<dyn Send>>>,
    /// Held by the `authenticate` being admitted: its checks, its record and its identity
    /// go together, one `authenticate` at a time.
    admitting: Mutex<()>,
}

/// Why [`Access::admit`] refused an identity.
pub(crate) enum Refused {
    /// The connection is authenticated as this other identity.
    Another(Identity),
    /// The token does not prove the identity (any more: revoked meanwhile), or there is none.
    NotProved,
}

impl Access {
    /// A connection that must authenticate with one of `tokens` (`proved`: it already did,
    /// at the upgrade, with this token).
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) fn required(tokens: Arc<TokenStore>, proved: Option<(Identity, String)>) -> Access {
        Access {
            tokens: Some(tokens),
            proof: tokio::sync::watch::Sender::new(proved),
            held_until_proven: Mutex::new(None),
            admitting: Mutex::new(()),
        }
    }

    /// Keeps `held` until the client proves who it is, then drops it.
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) fn hold_until_proven(&self, held: Box<dyn Send>) {
        *lock(&self.held_until_proven) = Some(held);
    }

    /// Holds off every other `authenticate` while one is admitted.
    pub(crate) fn one_admission(&self) -> std::sync::MutexGuard<'_, ()> {
        lock(&self.admitting)
    }

    /// Whether `identity` could be admitted now with `token` (`None`: the token that proved
    /// it before): [`admit`](Self::admit)'s checks, without setting anything.
    pub(crate) fn may_admit(&self, identity: &Identity, token: Option<&str>) -> std::result::Result<(), Refused> {
        self.may_admit_against(self.proof.borrow().as_ref(), identity, token)
    }

    /// [`may_admit`](Self::may_admit) with `proof` the connection's.
    fn may_admit_against(
        &self,
        proof: Option<&(Identity, String)>,
        identity: &Identity,
        token: Option<&str>,
    ) -> std::result::Result<(), Refused> {
        match proof {
            Some((current, _)) if current != identity => Err(Refused::Another(current.clone())),
            current => {
                let token = token.or(current.map(|(_, before)| before.as_str()));
                match (token, &self.tokens) {
                    (Some(token), Some(tokens)) if tokens.still_proves(identity, token) => Ok(()),
                    (Some(_), None) => Ok(()),
                    _ => Err(Refused::NotProved),
                }
            }
        }
    }

    /// `identity` is the client's, proved by `token` (`None`: the token that proved it
    /// before, on the upgrade), unless the connection is authenticated as another identity or
    /// the token no longer proves it: a connection's sessions are its identity's, so it
    /// changes identity only through `logout` or a revoked token, which forget them.
    pub(crate) fn admit(&self, identity: Identity, token: Option<String>) -> std::result::Result<(), Refused> {
        let mut outcome = Ok(());
        self.proof.send_if_modified(|proof| {
            outcome = self.may_admit_against(proof.as_ref(), &identity, token.as_deref());
            if outcome.is_err() {
                return false;
            }
            let token = token.or_else(|| proof.take().map(|(_, before)| before));
            *proof = token.map(|token| (identity, token));
            true
        });
        outcome?;
        lock(&self.held_until_proven).take();
        Ok(())
    }

    /// The client's identity, once authenticated.
    pub(crate) fn identity(&self) -> Option<Identity> {
        self.proof.borrow().as_ref().map(|(identity, _)| identity.clone())
    }

    /// Forgets the identity and the token that proved it (`logout`, a revoked token).
    pub(crate) fn forget_identity(&self) {
        self.proof.send_replace(None);
    }

    /// Whether the identity's token was revoked since it proved it (no longer in the store,
    /// or another identity's now).
    pub(crate) fn revoked(&self) -> bool {
        let Some(tokens) = &self.tokens else { return false };
        let proof = self.proof.borrow().clone();
        proof.is_some_and(|(identity, token)| !tokens.still_proves(&identity, &token))
    }

    /// Whether requests other than `initialize` and `authenticate` must wait for
    /// authentication.
    pub(crate) fn pending(&self) -> bool {
        self.tokens.is_some() && self.proof.borrow().is_none()
    }

    /// Completes once the connection has been unauthenticated (pending) for `limit` at a
    /// stretch: from its start, or from a `logout`. Never, where no authentication is needed.
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) async fn unauthenticated_for(&self, limit: Duration) {
        if self.tokens.is_none() {
            return std::future::pending().await;
        }
        let mut identity = self.proof.subscribe();
        loop {
            // Authenticated: wait for a logout.
            if identity.wait_for(Option::is_none).await.is_err() {
                return std::future::pending().await;
            }
            // Unauthenticated: closed unless it authenticates within `limit`.
            if tokio::time::timeout(limit, identity.wait_for(Option::is_some))
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

pub(crate) struct Connection {
    pub(crate) outbox: Outbox,
    pub(crate) pending: Pending,
    pub(crate) audit: AuditLog,
    /// The session store of the connection's identity (set again when it authenticates).
    store: Mutex<Arc<dyn SessionStore>>,
    /// Who the client is, and whether it still has to prove it.
    pub(crate) access: Arc<Access>,
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
    /// Whether the client advertised `session.configOptions.boolean` (boolean config options
    /// are sent only then).
    boolean_options: AtomicBool,
    /// The local sandbox the operator's programs run in (tier sandboxed, SANDBOX.md).
    pub(crate) sandbox: Option<Arc<crate::sandbox::Confinement>>,
    /// The client's elicitation modes and outstanding URL elicitations (`Turn::elicit`).
    pub(crate) elicitations: crate::oversight::elicitation::Elicitations,
    /// The connection's dialect seam, when the server serves another protocol version than
    /// the runtime's (`ServerOptions::protocol_versions`): the client's `initialize` settles it.
    pub(crate) seam: Option<Seam>,
    /// The open MCP-over-ACP connections to the client's MCP servers (`mcp/message` routing).
    #[cfg(feature = "mcp")]
    pub(crate) tunnels: Arc<crate::mcp::tunnel::Tunnels>,
    /// This replica's part in a fleet sharing a database (issue #49): the leases its turns
    /// hold, the cancels forwarded between replicas. `None`: one process alone.
    #[cfg(feature = "postgres")]
    pub(crate) fleet: Option<Arc<crate::server::store::fleet::Fleet>>,
}

/// The audit record of a change to a whole session (`action`) made by operator
/// `operator_id`, with its `input`.
pub(crate) fn session_event(
    operator_id: &str,
    action: &str,
    session: &str,
    input: Option<serde_json::Value>,
) -> AuditEvent {
    let mut event = AuditEvent::new(
        crate::audit::Actor {
            id: format!("operator:{operator_id}"),
            role: Some("operator".into()),
        },
        action,
        crate::audit::Subject {
            kind: "session".into(),
            reference: Some(session.to_string()),
            path: None,
        },
    );
    event.input = input;
    event
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
        access: Arc<Access>,
    ) -> Self {
        Connection {
            outbox,
            pending: Pending::new(),
            audit,
            store: Mutex::new(store),
            access,
            record_history,
            governance,
            operator_id,
            permission_timeout,
            editor_timeout,
            declared_editor,
            offered_editor: Mutex::new(ClientMethods::NONE),
            client_name: Mutex::new(None),
            tool_calls: AtomicU64::new(0),
            boolean_options: AtomicBool::new(false),
            sandbox: None,
            seam: None,
            elicitations: Default::default(),
            #[cfg(feature = "mcp")]
            tunnels: Arc::default(),
            #[cfg(feature = "postgres")]
            fleet: None,
        }
    }

    /// The same connection, its turns leasing their sessions in `fleet`.
    #[cfg(feature = "postgres")]
    pub(crate) fn with_fleet(mut self, fleet: Option<Arc<crate::server::store::fleet::Fleet>>) -> Self {
        self.fleet = fleet;
        self
    }

    /// The same connection, running the operator's programs in `sandbox`.
    pub(crate) fn with_sandbox(mut self, sandbox: Option<Arc<crate::sandbox::Confinement>>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The same connection, its protocol version picked at `initialize` by `negotiation`
    /// (`None`: the runtime's own, untranslated).
    pub(crate) fn with_seam(mut self, negotiation: Option<Arc<dyn Negotiate>>) -> Self {
        self.seam = negotiation.map(|negotiation| Seam::new(&self.outbox, Some(negotiation)));
        self
    }

    /// Whether the client speaks a protocol version whose baseline has `session/list` and
    /// `session/resume` (v2), which are then served whatever the manifest declares.
    pub(crate) fn session_baseline(&self) -> bool {
        self.seam.as_ref().is_some_and(|seam| seam.version() >= 2)
    }

    /// Tells the connection's dialect that prompt `id` was taken (the v2 acknowledgement),
    /// before anything of its turn is sent. Nothing on a connection without one.
    pub(crate) async fn prompt_accepted(&self, id: &Id) {
        if self.outbox.rewrites() {
            let notice = jsonrpc::encode_notification(PROMPT_ACCEPTED, &serde_json::json!({"requestId": id}));
            let _ = self.outbox.send(notice).await;
        }
    }

    /// Whether the connection's lines are translated (its client speaks another protocol
    /// version than the runtime's).
    pub(crate) fn translated(&self) -> bool {
        self.outbox.rewrites()
    }

    /// Hands the connection's dialect the stored `history` of `session`, resumed without a
    /// replay (the v2 face numbers the session's messages from it), before the answer.
    /// Nothing on a connection without one.
    pub(crate) async fn session_history(&self, session: &str, history: &[Box<serde_json::value::RawValue>]) {
        if self.outbox.rewrites() {
            let params = serde_json::json!({"sessionId": session, "updates": history});
            let _ = self
                .outbox
                .send(jsonrpc::encode_notification(SESSION_HISTORY, &params))
                .await;
        }
    }

    /// The session store of the client's identity.
    pub(crate) fn store(&self) -> Arc<dyn SessionStore> {
        lock(&self.store).clone()
    }

    /// The store `session`'s history is kept in: its identity's, which is the connection's
    /// no longer after a `logout` or a revoked token (a cancelled turn's last writes).
    pub(crate) fn store_of(&self, session: &SessionContext) -> Arc<dyn SessionStore> {
        session.store().cloned().unwrap_or_else(|| self.store())
    }

    /// Replaces the session store (the client authenticated as an identity of its own).
    pub(crate) fn set_store(&self, store: Arc<dyn SessionStore>) {
        *lock(&self.store) = store;
    }

    /// Records whether the client takes boolean config options.
    pub(crate) fn set_boolean_options(&self, offered: bool) {
        self.boolean_options.store(offered, Ordering::Relaxed);
    }

    /// Whether the client takes boolean config options.
    pub(crate) fn boolean_options(&self) -> bool {
        self.boolean_options.load(Ordering::Relaxed)
    }

    /// Audits a change to a whole session (`action`, e.g. `session.close`, `session.mode`)
    /// before it is carried out: if the record cannot be written, nothing happens.
    pub(crate) fn session_audit(&self, action: &str, session: &str, input: Option<serde_json::Value>) -> Result<()> {
        self.audit(session_event(&self.operator_id, action, session, input))
    }

    /// Switches `session` to `mode`: checked against the manifest, audited (`session.mode`,
    /// with who asked: `by`), then set. Returns the mode it was in.
    pub(crate) fn change_mode(&self, session: &SessionContext, mode: &str, by: &str) -> Result<Option<String>> {
        session.surface().check_mode(mode).map_err(Error::InvalidParams)?;
        let from = session.mode();
        self.session_audit(
            "session.mode",
            session.id(),
            Some(serde_json::json!({"from": from, "to": mode, "by": by})),
        )?;
        session.change_settings(|settings| settings.mode = Some(mode.to_string()));
        Ok(from)
    }

    /// Sets config option `id` of `session` to `value`: checked against the manifest, audited
    /// (`session.config`, with who asked: `by`), then set. Returns the value it had.
    pub(crate) fn change_config(
        &self,
        session: &SessionContext,
        id: &str,
        value: ConfigValue,
        by: &str,
    ) -> Result<Option<ConfigValue>> {
        let surface = session.surface();
        surface.check_config_value(id, &value).map_err(Error::InvalidParams)?;
        let from = session.config_value(id);
        self.session_audit(
            "session.config",
            session.id(),
            Some(serde_json::json!({
                "option": id,
                "from": from.as_ref().map(ConfigValue::to_json),
                "to": value.to_json(),
                "by": by,
            })),
        )?;
        Ok(session.change_settings(|settings| settings.set_config(surface, id, value)))
    }

    /// The `config_option_update` of `session`'s current values, `None` without options.
    pub(crate) fn config_update(&self, session: &SessionContext) -> Option<String> {
        let options = session
            .surface()
            .config_options_json(&session.settings(), self.boolean_options())?;
        Some(serde_json::json!({"sessionUpdate": "config_option_update", "configOptions": options}).to_string())
    }

    /// A session setup answer (`session/new`, `load`, `resume`) with the session's `modes`
    /// and `configOptions`, when the manifest declares them: the runtime keeps them, so they
    /// replace what the operator's answer said.
    pub(crate) fn setup_answer(&self, session: &SessionContext, mut answer: serde_json::Value) -> serde_json::Value {
        let (surface, settings) = (session.surface(), session.settings());
        if let Some(object) = answer.as_object_mut() {
            if let Some(modes) = surface.modes_json(&settings) {
                object.insert("modes".into(), modes);
            }
            if let Some(options) = surface.config_options_json(&settings, self.boolean_options()) {
                object.insert("configOptions".into(), options);
            }
        }
        answer
    }

    /// Sends `session`'s `available_commands_update` (every declared command) after its setup
    /// answer, when the manifest declares commands. Not recorded: every setup sends it again.
    pub(crate) async fn announce_commands(&self, session: &SessionContext) {
        let surface = session.surface();
        if let Some(update) = surface.commands_update(&surface.command_names())
            && let Err(error) = self.send_update_unrecorded(session, update.to_string()).await
        {
            tracing::warn!(%error, session = session.id(), "could not announce the session's commands");
        }
    }

    /// Records an update in `session`'s history without sending it (a change the client made
    /// itself, so that `session/load` replays it and a resumed session gets it back), saved
    /// before the change is answered (a database's batch written, a file synced).
    pub(crate) fn record_only(&self, session: &SessionContext, update: &str) -> Result<()> {
        if self.record_history {
            let store = self.store_of(session);
            store.append(session.id(), update)?;
            store.flush_session(session.id())?;
        }
        Ok(())
    }

    /// Writes an audit record; the action it records must not happen if this fails.
    /// Records made for an authenticated client carry its identity
    /// (`metadata.aip44.identity`).
    pub(crate) fn audit(&self, event: AuditEvent) -> Result<()> {
        self.audit_as(self.access.identity().as_ref(), event)
    }

    /// Appends `event` naming `identity` (`metadata.aip44.identity`): for a record about a
    /// session, the session's identity, which is the connection's no longer after a `logout`
    /// or a revoked token (a cancelled turn's last records).
    pub(crate) fn audit_as(&self, identity: Option<&Identity>, event: AuditEvent) -> Result<()> {
        write_ahead(&self.audit, identity, event).map_err(Error::Audit)
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
            self.store_of(session).append(session.id(), &update)?;
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

/// The connection's audit log, naming a session's identity: what a session's operator memory
/// is recorded with ([`Connection::records_of`]).
pub(crate) struct SessionRecords<'a> {
    connection: &'a Connection,
    identity: Option<&'a Identity>,
}

impl Connection {
    /// Records about `session`, naming its identity.
    pub(crate) fn records_of<'a>(&'a self, session: &'a SessionContext) -> SessionRecords<'a> {
        SessionRecords {
            connection: self,
            identity: session.identity(),
        }
    }
}

impl MemoryAudit for SessionRecords<'_> {
    fn operator_id(&self) -> &str {
        &self.connection.operator_id
    }

    fn audit(&self, event: AuditEvent) -> Result<()> {
        self.connection.audit_as(self.identity, event)
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
