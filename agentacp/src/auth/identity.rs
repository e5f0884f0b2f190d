//! Who a connection acts as ([`Identity`]), and why a token could not be checked
//! ([`Unchecked`]): the types the token stores (file and database) share.

use std::fmt;

/// Why a token could not be checked: the token store's database cannot be reached (or did not
/// answer in time). A connection showing the token is refused (`503` on an upgrade or HTTP
/// request), never admitted. `Display` is a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unchecked(pub(super) String);

impl fmt::Display for Unchecked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unchecked {}

/// A principal an authenticated connection acts as: AIP-7 `principalId`-like (letters, digits,
/// `-_.@:`, 1..=128 chars).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity(pub(super) String);

impl Identity {
    /// Checks `id`: 1 to 128 ASCII letters, digits and `-_.@:`. The error says what is wrong.
    pub fn new(id: impl Into<String>) -> Result<Identity, String> {
        let id = id.into();
        acp_tokens::check_identity(&id)?;
        Ok(Identity(id))
    }

    /// The identity as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What every audit record made for this identity carries in `metadata.aip44`:
    /// `{"identity": "<id>"}` (see [`crate::audit::AuditLog::stamped`]).
    pub fn audit_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::from_iter([("identity".to_string(), self.0.clone().into())])
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
