//! The governance decision: the one place a tool call is allowed, asked about or denied.

use crate::governance::{Decision, Governance, ToolRequest, decide_claimed};

/// Who says what kind of tool a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KindFrom {
    /// The operator's own code (a server's turn): governance decides on it as given.
    Operator,
    /// A peer (an agent's report, a permission request): its word may only make the decision
    /// stricter ([`decide_claimed`]), never approve anything.
    Peer,
}

/// Governance's decision on `request`, made once for each of `names` (each in turn the
/// request's `tool`), the strictest winning; `Ask` without names. The request's `kind` counts
/// as `from` says.
pub(crate) fn decide<'a>(
    governance: &dyn Governance,
    request: &ToolRequest<'_>,
    names: impl IntoIterator<Item = &'a str>,
    from: KindFrom,
) -> Decision {
    names
        .into_iter()
        .map(|tool| {
            let request = ToolRequest { tool, ..*request };
            match from {
                KindFrom::Operator => governance.decide(&request),
                KindFrom::Peer => decide_claimed(governance, &request).0,
            }
        })
        .reduce(Decision::stricter)
        .unwrap_or(Decision::Ask)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::{KindFrom, decide};
    use crate::governance::{Decision, Governance, ToolKind, ToolRequest};

    /// Allows `read-file`, and anything of kind `read`; denies `delete-repo`; asks the rest.
    struct Rules;

    impl Governance for Rules {
        fn decide(&self, request: &ToolRequest<'_>) -> Decision {
            match (request.tool, request.kind) {
                ("delete-repo", _) => Decision::Deny("no deleting".into()),
                ("read-file", _) | (_, Some(ToolKind::Read)) => Decision::Allow,
                _ => Decision::Ask,
            }
        }
    }

    fn decided(names: &[&str], kind: Option<ToolKind>, from: KindFrom) -> Decision {
        let request = ToolRequest {
            operator: "op",
            session: "s",
            tool: "",
            kind,
            arguments: &Value::Null,
            principal: None,
        };
        decide(&Rules, &request, names.iter().copied(), from)
    }

    /// Every name is decided and the strictest wins; no name asks. The operator's own kind
    /// is heard as given; a peer's only where it makes the decision stricter.
    #[test]
    fn the_strictest_name_wins_and_a_peers_kind_never_approves() {
        assert_eq!(decided(&["read-file"], None, KindFrom::Peer), Decision::Allow);
        assert_eq!(
            decided(&["read-file", "write-file"], None, KindFrom::Peer),
            Decision::Ask
        );
        assert_eq!(
            decided(&["read-file", "delete-repo"], None, KindFrom::Peer),
            Decision::Deny("no deleting".into())
        );
        assert_eq!(decided(&[], None, KindFrom::Peer), Decision::Ask);
        let read = Some(ToolKind::Read);
        assert_eq!(decided(&["write-file"], read, KindFrom::Operator), Decision::Allow);
        assert_eq!(decided(&["write-file"], read, KindFrom::Peer), Decision::Ask);
    }
}
