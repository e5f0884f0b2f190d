//! What `#[acp_operator]` generates for a server: an [`Operator`] impl over the
//! [`OperatorSpec`] read from the manifest at compile time, that decodes requests through the
//! pinned revision's `ClientRequest` enum and calls the author's handler trait. Its methods are
//! the agent-side handler methods of the method table ([`crate::methods`]).

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::Result;
use crate::future::BoxFuture;
use crate::spec::OperatorSpec;
use crate::tier::Tier;

use super::session::SessionContext;
use super::turn::Turn;

/// A server operator, as the runtime drives it. `#[acp_operator]` implements this for the
/// annotated struct; operator authors implement the generated handler trait instead.
pub trait Operator: Send + Sync + 'static {
    /// The manifest's tier.
    type Tier: Tier;

    /// The manifest, as read at compile time.
    fn spec() -> &'static OperatorSpec;

    /// `session/prompt`: run one turn; the result is the `PromptResponse` as JSON.
    fn prompt<'a>(&'a self, turn: &'a mut Turn<'_, Self::Tier>, params: &'a RawValue) -> BoxFuture<'a, Result<Value>>;

    /// `session/load`, after the runtime replayed the stored history; `None` when the
    /// manifest does not turn on `loadSession`.
    fn load_session<'a>(
        &'a self,
        _session: &'a SessionContext,
        _params: &'a RawValue,
    ) -> Option<BoxFuture<'a, Result<Value>>> {
        None
    }

    /// Checks the params of a message the runtime answers itself (`notification` for
    /// `session/cancel` and `$/cancel_request`) by decoding it through the pinned revision's
    /// `ClientRequest` / `ClientNotification`: params the schema's types refuse are an error
    /// (`-32602`); a method the revision does not define passes (the runtime decides). The
    /// generated impl does this; the default checks nothing.
    fn check_params(
        _method: &str,
        _params: Option<&RawValue>,
        _notification: bool,
    ) -> std::result::Result<(), crate::jsonrpc::RpcError> {
        Ok(())
    }

    /// `session/set_mode`, after the runtime checked, audited and set the mode; `None` when
    /// the manifest declares no `metadata.agentacp.modes`.
    fn set_mode<'a>(
        &'a self,
        _session: &'a SessionContext,
        _params: &'a RawValue,
    ) -> Option<BoxFuture<'a, Result<Value>>> {
        None
    }

    /// `session/set_config_option`, after the runtime checked, audited and set the value;
    /// `None` when the manifest declares no `metadata.agentacp.configOptions`.
    fn set_config_option<'a>(
        &'a self,
        _session: &'a SessionContext,
        _params: &'a RawValue,
    ) -> Option<BoxFuture<'a, Result<Value>>> {
        None
    }

    /// An extension request the manifest declares (`metadata.agentacp.extensions.requests`);
    /// `None` when it declares none.
    fn extension<'a>(&'a self, _method: &'a str, _params: Value) -> Option<BoxFuture<'a, Result<Value>>> {
        None
    }

    /// An extension notification the manifest declares
    /// (`metadata.agentacp.extensions.notifications`); `None` when it declares none.
    fn extension_notification<'a>(&'a self, _method: &'a str, _params: Value) -> Option<BoxFuture<'a, Result<()>>> {
        None
    }

    /// `authenticate`; `None` when the manifest has neither a transport that needs it nor a
    /// sign-in method of type `agent`.
    fn authenticate<'a>(&'a self, _params: &'a RawValue) -> Option<BoxFuture<'a, Result<Value>>> {
        None
    }

    /// A terminal sign-in for the declared method `method` (`metadata.agentacp.auth`, `type:
    /// terminal`): the credential to store; `None` when the manifest declares no such method.
    fn sign_in<'a>(&'a self, _method: &'a str) -> Option<BoxFuture<'a, Result<super::credential::Credential>>> {
        None
    }

    /// Where the operator keeps its credential; `None` when the manifest declares no sign-in
    /// method.
    fn credential_file(&self) -> Option<super::credential::CredentialFile> {
        None
    }
}

/// Encodes a result for the wire.
pub fn encode_result(result: &impl Serialize) -> Result<Value> {
    Ok(serde_json::to_value(result)?)
}

/// An operator whose manifest's `transport` lists `websocket`: `#[acp_operator]` implements
/// it then, and only then, so serving a stdio-only operator over WebSocket does not compile.
#[diagnostic::on_unimplemented(
    message = "`{Self}`'s manifest does not offer the websocket transport",
    label = "its `transport` does not list `websocket`",
    note = "add `websocket` to the manifest's `transport` (`transport: [stdio, websocket]`)"
)]
pub trait OffersWebSocket {}
