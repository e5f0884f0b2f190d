//! The upstream ACP revisions this toolchain knows, and resolving `acp_rev` prefixes.
//!
//! A revision is "known" when `agentacp` ships its generated wire types (see
//! `scaffold-aip regen`). This table is the single list the linter and the macro consult.

/// One upstream ACP revision with built-in wire types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revision {
    /// Full 40-hex commit SHA of agentclientprotocol/agent-client-protocol.
    pub sha: &'static str,
    /// What it is (release tag or published crate).
    pub label: &'static str,
    /// The ACP `protocolVersion` spoken at that revision.
    pub protocol_version: u16,
}

/// The default revision: the one the published crate `agent-client-protocol-schema`
/// 1.15.1 was built from.
pub const DEFAULT: Revision = Revision {
    sha: "0fc18323a9fdad4e5b4a20ec2f1645dde843fd9b",
    label: "agent-client-protocol-schema 1.15.1",
    protocol_version: 1,
};

/// Every known revision, default first.
pub const KNOWN: &[Revision] = &[
    DEFAULT,
    Revision {
        sha: "b7f0005493b98de32fabee3e9540e2b64da68535",
        label: "v1.7.0 (main, 2026-08-22)",
        protocol_version: 1,
    },
    Revision {
        sha: "d9072428412f97189bad8856f8ee6394a8dd52ef",
        label: "v1.0.0",
        protocol_version: 1,
    },
];

/// Why an `acp_rev` did not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// No known revision starts with it.
    Unknown,
    /// Several do.
    Ambiguous(Vec<Revision>),
}

/// Resolves a 7–40 hex-digit prefix against `known`.
pub fn resolve_in(prefix: &str, known: &[Revision]) -> Result<Revision, ResolveError> {
    let matches: Vec<Revision> = known.iter().filter(|r| r.sha.starts_with(prefix)).copied().collect();
    match matches.as_slice() {
        [one] => Ok(*one),
        [] => Err(ResolveError::Unknown),
        _ => Err(ResolveError::Ambiguous(matches)),
    }
}

/// Resolves a prefix against the built-in revisions.
pub fn resolve(prefix: &str) -> Result<Revision, ResolveError> {
    resolve_in(prefix, KNOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_resolve_to_exactly_one() {
        assert_eq!(resolve("0fc1832").unwrap().sha, DEFAULT.sha);
        assert_eq!(resolve(DEFAULT.sha).unwrap(), DEFAULT);
        assert_eq!(resolve("abc1234"), Err(ResolveError::Unknown));
        let table = [
            Revision {
                sha: "aaaaaaa1",
                label: "a",
                protocol_version: 1,
            },
            Revision {
                sha: "aaaaaaa2",
                label: "b",
                protocol_version: 1,
            },
        ];
        assert!(matches!(resolve_in("aaaaaaa", &table), Err(ResolveError::Ambiguous(v)) if v.len() == 2));
    }
}
