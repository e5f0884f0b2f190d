//! Who a client is: authentication where the transport needs it (WebSocket with tokens), and
//! the session store of each identity.
//!
//! Over stdio nothing here applies: whoever started the server is its user. A WebSocket
//! listener configured with tokens ([`TokenStore`]) serves nothing but `initialize` and
//! `authenticate` until the client has shown one, either on the upgrade
//! (`Authorization: Bearer <token>`) or in `authenticate` (method [`BEARER`], the token in
//! `_meta.agentacp.token`). From then on the identity is the client's: sessions are kept per
//! identity, every audit record of the connection names it (`metadata.aip44.identity`), and
//! governance sees it as the call's principal.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::connection::{Access, Connection, Refused};
use super::session::{FileStore, MemoryStore, SessionStore};
use crate::audit::AuditEvent;
use crate::auth::{BEARER, Identity, TokenStore};
use crate::error::{Error, Result};
use crate::jsonrpc::{RpcError, codes};
use crate::oversight::record::auth_event;
use crate::sync::lock;

/// The `authMethods` entry for [`BEARER`].
pub(crate) fn bearer_method() -> Value {
    json!({
        "id": BEARER,
        "name": "Bearer token",
        "description": "Send `Authorization: Bearer <token>` on the WebSocket upgrade, or the token in `_meta.agentacp.token` of `authenticate`",
    })
}

/// The `initialize` answer of a connection that must authenticate: the bearer method, and
/// `logout`.
pub(crate) fn advertise(initialize: &mut Value) {
    if let Some(object) = initialize.as_object_mut() {
        object.insert("authMethods".into(), json!([bearer_method()]));
        if let Some(capabilities) = object.get_mut("agentCapabilities").and_then(Value::as_object_mut) {
            capabilities.insert("auth".into(), json!({"logout": {}}));
        }
    }
}

/// The identity an `authenticate` request proves, with its token; or (no token given) the
/// one shown on the upgrade, without. A failure is answered `-32000` and logged, never with
/// the token.
pub(crate) fn check_bearer(
    tokens: &TokenStore,
    access: &Access,
    params: &RawValue,
) -> std::result::Result<(Identity, Option<String>), RpcError> {
    let params: Value = serde_json::from_str(params.get())
        .map_err(|error| RpcError::new(codes::INVALID_PARAMS, format!("invalid `authenticate` params: {error}")))?;
    let method = params.get("methodId").and_then(Value::as_str).unwrap_or_default();
    if method != BEARER {
        return Err(RpcError::new(
            codes::INVALID_PARAMS,
            format!("unknown authentication method `{method}`: this agent offers `{BEARER}`"),
        ));
    }
    match params.pointer("/_meta/agentacp/token").and_then(Value::as_str) {
        Some(token) => match tokens.check(token) {
            Ok(Some(identity)) => Ok((identity, Some(token.to_string()))),
            Err(unchecked) => Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!("authentication failed: {unchecked}"),
            )),
            Ok(None) => {
                tracing::warn!("authenticate: a token was refused");
                Err(RpcError::new(
                    codes::AUTH_REQUIRED,
                    "authentication failed: the token is not accepted",
                ))
            }
        },
        None => access.identity().map(|identity| (identity, None)).ok_or_else(|| {
            RpcError::new(
                codes::AUTH_REQUIRED,
                "authentication failed: no token (send it as `_meta.agentacp.token`, or as `Authorization: Bearer` on the upgrade)",
            )
        }),
    }
}

/// `identity` is now the client's: audited first (`auth.login`, `via: authenticate`), then
/// its session store is the connection's. A connection authenticated as another identity is
/// refused (`-32600`): its sessions are that identity's, and it must `logout` first.
pub(crate) fn admit(
    connection: &Connection,
    stores: &StoreBook,
    (identity, token): (Identity, Option<String>),
) -> Result<()> {
    let refused = |why: Refused| {
        Error::Rpc(match why {
            Refused::Another(current) => RpcError::new(
                codes::INVALID_REQUEST,
                format!(
                    "this connection is authenticated as `{}`; `logout` first to authenticate as another identity",
                    current.as_str()
                ),
            ),
            Refused::NotProved => RpcError::new(
                codes::AUTH_REQUIRED,
                "authentication failed: the token is not accepted (any more)",
            ),
        })
    };
    // One at a time: a second `authenticate` sees what the first one set. The token is
    // checked again: it may have been revoked since the request was read.
    let _one_at_a_time = connection.access.one_admission();
    connection
        .access
        .may_admit(&identity, token.as_deref())
        .map_err(refused)?;
    let store = stores.for_identity(Some(&identity))?;
    connection.audit_as(
        Some(&identity),
        event(connection, "auth.login", &identity, "authenticate"),
    )?;
    // The store before the identity: until the identity is set, requests are refused.
    connection.set_store(store);
    // Fails only if the token was revoked this very moment.
    connection.access.admit(identity, token).map_err(refused)?;
    Ok(())
}

/// `logout`: audited (`auth.logout`), then the connection has no identity.
pub(crate) fn leave(connection: &Connection) -> Result<()> {
    if let Some(identity) = connection.access.identity() {
        connection.audit(event(connection, "auth.logout", &identity, "logout"))?;
    }
    connection.access.forget_identity();
    Ok(())
}

/// The token that proved the connection's identity was revoked: audited (`auth.revoked`),
/// then the connection has no identity (it must authenticate again, within the time it has
/// for that, or is closed).
pub(crate) fn revoked(connection: &Connection) -> Result<()> {
    // Forgotten first, whatever the record: a revoked identity is not kept for want of one.
    let identity = connection.access.identity();
    connection.access.forget_identity();
    if let Some(identity) = identity {
        tracing::warn!(identity = identity.as_str(), "the token of a connection was revoked");
        connection.audit_as(
            Some(&identity),
            event(connection, "auth.revoked", &identity, "token store"),
        )?;
    }
    Ok(())
}

/// The `auth.login` of a client that showed its token on the WebSocket upgrade (the
/// connection is authenticated from its start).
pub(crate) fn admitted_on_upgrade(connection: &Connection) -> Result<()> {
    match connection.access.identity() {
        Some(identity) => connection.audit(event(connection, "auth.login", &identity, "upgrade")),
        None => Ok(()),
    }
}

/// An `auth.*` record: the identity acts (and, like every record of the connection, is named
/// in `metadata.aip44.identity`, also when it is not, or no longer, the connection's).
fn event(connection: &Connection, action: &str, identity: &Identity, via: &str) -> AuditEvent {
    auth_event(&connection.operator_id, action, identity, via)
}

/// The session stores, one per identity, so that one client never lists, loads or resumes
/// another's sessions. Without an identity (stdio, an open loopback listener): the default
/// store.
pub(crate) struct StoreBook {
    default: Arc<dyn SessionStore>,
    /// Where each identity's sessions go.
    backing: Backing,
    /// Whether the options gave the store: then it serves every identity.
    given: bool,
    by_identity: Mutex<HashMap<Identity, Arc<dyn SessionStore>>>,
}

/// Where a [`StoreBook`] keeps each identity's sessions.
pub(crate) enum Backing {
    /// In memory (also when the options gave one store for everybody).
    Memory,
    /// In files: `<this folder>/<identity>` (`<state>/sessions/identities/<identity>`).
    Files(PathBuf),
    /// In the database, as the rows of the identity.
    Database(crate::server::store::InDatabase),
}

impl StoreBook {
    pub(crate) fn new(default: Arc<dyn SessionStore>, backing: Backing, given: bool) -> StoreBook {
        StoreBook {
            default,
            backing,
            given,
            by_identity: Mutex::default(),
        }
    }

    /// The store of `identity`.
    pub(crate) fn for_identity(&self, identity: Option<&Identity>) -> Result<Arc<dyn SessionStore>> {
        let Some(identity) = identity.filter(|_| !self.given) else {
            return Ok(self.default.clone());
        };
        let mut stores = lock(&self.by_identity);
        if let Some(store) = stores.get(identity) {
            return Ok(store.clone());
        }
        let store: Arc<dyn SessionStore> = match &self.backing {
            Backing::Files(base) => {
                let dir = base.join(folder_name(identity));
                Arc::new(FileStore::open(&dir).map_err(|error| {
                    Error::Io(std::io::Error::new(
                        error.kind(),
                        format!("cannot open the session store in {}: {error}", dir.display()),
                    ))
                })?)
            }
            Backing::Database(place) => crate::server::store::session_store(place, Some(identity.as_str())),
            Backing::Memory => Arc::new(MemoryStore::default()),
        };
        stores.insert(identity.clone(), store.clone());
        Ok(store)
    }
}

/// A folder name for `identity`: the identity itself when it is a plain name, else a hash of
/// it (never `.`, `..` or a path).
fn folder_name(identity: &Identity) -> String {
    let id = identity.as_str();
    let plain = !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    if plain {
        id.to_string()
    } else {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(id.as_bytes());
        let hex: String = digest.iter().take(16).map(|byte| format!("{byte:02x}")).collect();
        format!("id-{hex}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_never_names_a_folder_outside_the_store() {
        for id in ["..", ".", "../x", "a/b", ".hidden", "a:b"] {
            let name = folder_name(&Identity::new(id).unwrap_or_else(|_| Identity::new("fallback").unwrap()));
            assert!(!name.starts_with('.') && !name.contains('/'), "{id} -> {name}");
        }
        assert_eq!(
            folder_name(&Identity::new("alice@example.com").unwrap()),
            "alice@example.com"
        );
    }
}
