//! Protocol dialects: the translations between the protocol version a peer speaks and the
//! runtime's own (ACP v1, the default revision), one per face of a connection.
//!
//! The runtime keeps speaking v1 inside: operators, governance and audit see v1 messages.
//! A connection whose peer speaks v2 gets a dialect at `initialize`
//! ([`connection::dialect`](crate::connection::dialect), the seam in the connection core),
//! which translates each frame at the edges:
//! - the agent face (`v2::AgentFace`, feature `v2`): what a server receives from a v2
//!   client and sends to it;
//! - the client face ([`client_face`]): what our client, or a bridge, sends to a v2 agent
//!   and receives from it.
//!
//! Which versions a server serves is its configuration ([`ServedVersions`]); each
//! connection is served in the version [`negotiate`] picks from what its client asked.

pub mod client_face;
#[cfg(feature = "v2")]
pub mod v2;

use std::sync::Arc;

use crate::connection::dialect::{Dialect, Negotiate, RUNTIME_VERSION};

/// The protocol versions this build of the runtime can serve: 1, and 2 with feature `v2`.
pub const BUILT_VERSIONS: &[u16] = if cfg!(feature = "v2") { &[1, 2] } else { &[1] };

/// The protocol versions a server serves on one endpoint (each connection in one of them):
/// checked at start-up against what this build can serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedVersions(Vec<u16>);

impl ServedVersions {
    /// The set `versions` names (in any order, repeats ignored); an error in sentences when
    /// it is empty or names a version this build cannot serve.
    pub fn new(versions: &[u16]) -> Result<ServedVersions, String> {
        let mut served: Vec<u16> = versions.to_vec();
        served.sort_unstable();
        served.dedup();
        if served.is_empty() {
            return Err("no protocol version to serve: name at least one (1 or 2)".into());
        }
        if let Some(unknown) = served.iter().find(|version| !BUILT_VERSIONS.contains(version)) {
            return Err(if *unknown == 2 {
                "protocol version 2 cannot be served: this agent was built without agentacp's feature `v2`".into()
            } else {
                format!("protocol version {unknown} is not one the runtime speaks (it serves 1 and 2)")
            });
        }
        Ok(ServedVersions(served))
    }

    /// Reads a comma-separated list (`AGENTACP_PROTOCOL_VERSIONS`, e.g. `1,2`).
    pub fn parse(text: &str) -> Result<ServedVersions, String> {
        let versions = text
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .map(|part| {
                part.parse::<u16>()
                    .map_err(|_| format!("`{part}` is not a protocol version (a whole number such as 1 or 2)"))
            })
            .collect::<Result<Vec<u16>, String>>()?;
        ServedVersions::new(&versions)
    }

    /// The versions, lowest first.
    pub fn versions(&self) -> &[u16] {
        &self.0
    }

    /// Whether a connection may need translating (a version other than the runtime's).
    pub fn translates(&self) -> bool {
        self.0.iter().any(|version| *version != RUNTIME_VERSION)
    }
}

/// The version a connection is served in: the one the client asked for when it is served,
/// else the latest served (the client then decides whether to go on).
pub fn negotiate(served: &ServedVersions, asked: u64) -> u16 {
    served
        .0
        .iter()
        .copied()
        .find(|version| u64::from(*version) == asked)
        .unwrap_or_else(|| served.0.iter().copied().max().unwrap_or(RUNTIME_VERSION))
}

/// A server's [`Negotiate`]: the agent face of the version [`negotiate`] picks.
pub(crate) struct AgentNegotiation(pub(crate) ServedVersions);

impl Negotiate for AgentNegotiation {
    fn at_initialize(&self, asked: u64) -> Option<Arc<dyn Dialect>> {
        let version = negotiate(&self.0, asked);
        tracing::debug!(asked, version, "protocol version negotiated");
        agent_face(version)
    }
}

/// The agent face for `version`; `None` for the runtime's own.
fn agent_face(version: u16) -> Option<Arc<dyn Dialect>> {
    match version {
        #[cfg(feature = "v2")]
        2 => Some(Arc::new(v2::AgentFace::new())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer is the version asked for when served, else the latest served.
    #[test]
    fn a_client_gets_its_version_when_served_else_the_latest() {
        if cfg!(feature = "v2") {
            let both = ServedVersions::new(&[2, 1, 2]).unwrap();
            assert_eq!((both.versions(), both.translates()), ([1, 2].as_slice(), true));
            assert_eq!(
                (negotiate(&both, 1), negotiate(&both, 2), negotiate(&both, 3)),
                (1, 2, 2)
            );
            assert_eq!(negotiate(&ServedVersions::new(&[2]).unwrap(), 1), 2);
        } else {
            assert!(ServedVersions::new(&[1, 2]).unwrap_err().contains("feature `v2`"));
        }
        let one = ServedVersions::new(&[1]).unwrap();
        assert_eq!((negotiate(&one, 2), one.translates()), (1, false));
        assert!(
            ServedVersions::parse("1, x")
                .unwrap_err()
                .contains("`x` is not a protocol version")
        );
        assert!(ServedVersions::parse("").unwrap_err().contains("no protocol version"));
        assert!(ServedVersions::new(&[3]).unwrap_err().contains("protocol version 3"));
    }
}
