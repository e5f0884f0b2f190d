//! The session calls beyond `new` / `load` / `prompt`: `session/list`, `resume`, `close`,
//! `delete`, `set_mode`, `set_config_option`, and extension methods. Each is typed with the
//! pinned revision's request and response, bounded by
//! [`ClientOptions::request_timeout`](super::ClientOptions::request_timeout), and refused here,
//! without sending anything ([`ClientError::NotOffered`]), when the agent did not offer it.

use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::connection::Client;
use super::error::ClientError;
use super::extensions::is_extension;
use super::session::SessionState;
use super::stream;
use crate::wire::default as wire;

/// What [`Client::list_all_sessions`] reads at most, unless told otherwise.
pub const LIST_PAGES_MAX: usize = 100;

fn not_offered(method: &str, missing: &str) -> ClientError {
    ClientError::NotOffered {
        method: method.to_string(),
        missing: missing.to_string(),
    }
}

impl Client {
    /// What the agent said about `session`: its modes, config options and slash commands
    /// (from its answers and its updates so far); `None` for a session it said nothing about.
    pub fn session_state(&self, session: &wire::SessionId) -> Option<SessionState> {
        self.shared.sessions.get(session.as_str())
    }

    /// A request of ours, answered within the request timeout.
    async fn call<T: DeserializeOwned>(&self, method: &str, params: &impl Serialize) -> Result<T, ClientError> {
        let timeout = self.shared.options.request_timeout;
        self.shared.request(method, params, timeout).await
    }

    /// Refuses `method` unless the agent advertised `sessionCapabilities.<name>`.
    fn session_capability(&self, method: &str, name: &str, advertised: bool) -> Result<(), ClientError> {
        if advertised {
            Ok(())
        } else {
            Err(not_offered(
                method,
                &format!("no `sessionCapabilities.{name}` in its capabilities at `initialize`"),
            ))
        }
    }

    fn capabilities(&self) -> &wire::SessionCapabilities {
        &self.initialize.agent_capabilities.session_capabilities
    }

    /// `session/list`: one page of the agent's sessions, those in `cwd` when given (absolute,
    /// inside the workspace root); `cursor` is the previous page's `nextCursor`.
    pub async fn list_sessions(
        &self,
        cwd: Option<&Path>,
        cursor: Option<String>,
    ) -> Result<wire::ListSessionsResponse, ClientError> {
        let method = wire::method_names::SESSION_LIST;
        self.session_capability(method, "list", self.capabilities().list.is_some())?;
        let cwd = cwd.map(|cwd| self.confine_cwd(cwd)).transpose()?;
        let request = wire::ListSessionsRequest {
            cwd: cwd.map(|cwd| cwd.to_string_lossy().into_owned()),
            cursor,
            ..wire::ListSessionsRequest::default()
        };
        self.call(method, &request).await
    }

    /// Every page of `session/list` (see [`Client::list_sessions`]), at most `max_pages`
    /// ([`LIST_PAGES_MAX`] is a fair bound): more pages, or a cursor the agent gave before,
    /// is an error rather than a loop without end.
    pub async fn list_all_sessions(
        &self,
        cwd: Option<&Path>,
        max_pages: usize,
    ) -> Result<Vec<wire::SessionInfo>, ClientError> {
        let mut sessions = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut cursor = None;
        for _ in 0..max_pages.max(1) {
            let page = self.list_sessions(cwd, cursor).await?;
            sessions.extend(page.sessions);
            match page.next_cursor {
                None => return Ok(sessions),
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(ClientError::InvalidResponse {
                        method: wire::method_names::SESSION_LIST.into(),
                        reason: format!("the cursor `{next}` came back: the pages go round in a circle"),
                    });
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(ClientError::InvalidResponse {
            method: wire::method_names::SESSION_LIST.into(),
            reason: format!("more than {} pages of sessions", max_pages.max(1)),
        })
    }

    /// `session/resume` of `session` in `cwd` (absolute, inside the workspace root): the
    /// session goes on without its history being replayed. The answer's modes and config
    /// options are kept ([`Client::session_state`]).
    pub async fn resume_session(
        &self,
        session: &wire::SessionId,
        cwd: &Path,
    ) -> Result<wire::ResumeSessionResponse, ClientError> {
        let method = wire::method_names::SESSION_RESUME;
        self.session_capability(method, "resume", self.capabilities().resume.is_some())?;
        let cwd = self.confine_cwd(cwd)?;
        let request = wire::ResumeSessionRequest::new(session.clone(), cwd.to_string_lossy().into_owned());
        let resumed: wire::ResumeSessionResponse =
            match self.with_own_mcp_servers(serde_json::json!([]), Some(session)).0 {
                // The MCP servers this client provides over ACP (the typed request cannot hold them).
                Value::Array(own) if !own.is_empty() => {
                    let mut params =
                        serde_json::to_value(&request).map_err(|error| ClientError::InvalidState(error.to_string()))?;
                    params["mcpServers"] = Value::Array(own);
                    self.call(method, &params).await?
                }
                _ => self.call(method, &request).await?,
            };
        self.shared.context.set_session_cwd(session.as_str(), cwd);
        let (modes, options, meta) = (
            resumed.modes.clone(),
            resumed.config_options.clone(),
            resumed.meta.clone(),
        );
        self.shared.sessions.answered(session.as_str(), modes, options, meta);
        Ok(resumed)
    }

    /// `session/close`: the agent frees the session. A turn still running in it is cancelled
    /// first (`session/cancel`, as the agent would do). An agent's `-32002` (it does not know
    /// the session) counts as closed, as ACP recommends: closing twice is not an error.
    pub async fn close_session(&self, session: &wire::SessionId) -> Result<wire::CloseSessionResponse, ClientError> {
        let method = wire::method_names::SESSION_CLOSE;
        self.session_capability(method, "close", self.capabilities().close.is_some())?;
        if self.shared.subscriber(session.as_str()).is_some() {
            stream::cancel(&self.shared, session).await?;
        }
        self.end_session(session, method, &wire::CloseSessionRequest::new(session.clone()))
            .await
    }

    /// `session/delete`: the agent forgets the session (it no longer lists or loads it). An
    /// agent's `-32002` (no such session) counts as deleted, as for [`Client::close_session`].
    pub async fn delete_session(&self, session: &wire::SessionId) -> Result<wire::DeleteSessionResponse, ClientError> {
        let method = wire::method_names::SESSION_DELETE;
        self.session_capability(method, "delete", self.capabilities().delete.is_some())?;
        self.end_session(session, method, &wire::DeleteSessionRequest::new(session.clone()))
            .await
    }

    /// Asks the agent to end `session` (`session/close` or `session/delete`, an unknown
    /// session counting as ended), then forgets it here.
    async fn end_session<T: DeserializeOwned + Default>(
        &self,
        session: &wire::SessionId,
        method: &str,
        request: &impl Serialize,
    ) -> Result<T, ClientError> {
        let ended = gone_is_done(self.call(method, request).await)?;
        self.shared.sessions.forget(session.as_str());
        #[cfg(feature = "mcp")]
        self.shared.mcp.session_closed(session.as_str());
        Ok(ended)
    }

    /// `session/set_mode`: offered when the agent's answer about the session carried `modes`;
    /// `mode` must be one of them. The kept current mode follows.
    pub async fn set_mode(
        &self,
        session: &wire::SessionId,
        mode: &wire::SessionModeId,
    ) -> Result<wire::SetSessionModeResponse, ClientError> {
        let method = wire::method_names::SESSION_SET_MODE;
        let state = self.session_state(session).unwrap_or_default();
        let Some(modes) = state.modes else {
            return Err(not_offered(method, "the session was opened without `modes`"));
        };
        if !modes.available_modes.iter().any(|m| &m.id == mode) {
            let ids: Vec<&str> = modes.available_modes.iter().map(|m| m.id.as_str()).collect();
            return Err(ClientError::InvalidState(format!(
                "the agent offers no mode `{mode}` (its modes: {})",
                ids.join(", ")
            )));
        }
        let request = wire::SetSessionModeRequest::new(session.clone(), mode.clone());
        let answer: wire::SetSessionModeResponse = self.call(method, &request).await?;
        self.shared.sessions.edit(session.as_str(), |state| {
            if let Some(modes) = &mut state.modes {
                modes.current_mode_id = mode.clone();
            }
        });
        Ok(answer)
    }

    /// `session/set_config_option`: offered when the agent's answer about the session carried
    /// `configOptions`; `option` must be one of them ([`config_value`](super::config_value)
    /// reads a value from text). The answer's options, all with their values, are kept.
    pub async fn set_config_option(
        &self,
        session: &wire::SessionId,
        option: &wire::SessionConfigId,
        value: wire::SetSessionConfigOptionRequestKind,
    ) -> Result<wire::SetSessionConfigOptionResponse, ClientError> {
        let method = wire::method_names::SESSION_SET_CONFIG_OPTION;
        let state = self.session_state(session).unwrap_or_default();
        let Some(options) = &state.config_options else {
            return Err(not_offered(method, "the session was opened without `configOptions`"));
        };
        if !options.iter().any(|o| &o.id == option) {
            let ids: Vec<&str> = options.iter().map(|o| o.id.0.as_str()).collect();
            return Err(ClientError::InvalidState(format!(
                "the agent offers no config option `{option}` (its options: {})",
                ids.join(", ")
            )));
        }
        let request = wire::SetSessionConfigOptionRequest::new(session.clone(), option.clone(), value);
        let answer: wire::SetSessionConfigOptionResponse = self.call(method, &request).await?;
        self.shared.sessions.edit(session.as_str(), |state| {
            state.config_options = Some(answer.config_options.clone());
            state.meta = answer.meta.clone();
        });
        Ok(answer)
    }

    /// An extension request (`method` starts with `_`) with `params` as they are (`_meta`
    /// included); the agent's result as it is.
    pub async fn ext_request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        check_extension(method)?;
        self.call(method, &params).await
    }

    /// An extension notification (`method` starts with `_`), sent within the request timeout.
    pub async fn ext_notification(&self, method: &str, params: Value) -> Result<(), ClientError> {
        check_extension(method)?;
        let timeout = self.shared.options.request_timeout;
        tokio::time::timeout(timeout, self.shared.notify(method, &params))
            .await
            .map_err(|_| self.shared.timeout_error(method, timeout))?
    }
}

fn check_extension(method: &str) -> Result<(), ClientError> {
    if is_extension(method) {
        Ok(())
    } else {
        Err(ClientError::InvalidState(format!(
            "`{method}` is not an extension method: their names start with `_`"
        )))
    }
}

/// The answer to `session/close` or `session/delete`, with the agent's `-32002` (it does not
/// know the session) taken as done: the session is gone either way.
fn gone_is_done<T: Default>(answer: Result<T, ClientError>) -> Result<T, ClientError> {
    match answer {
        Err(error) if error.is_resource_not_found() => {
            tracing::debug!(%error, "the agent does not know the session; taken as done");
            Ok(T::default())
        }
        answer => answer,
    }
}
