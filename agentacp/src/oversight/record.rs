//! The write-ahead audit record: every record the runtime writes about something it is about
//! to do — a tool call's decision, approval and outcome, a turn's lifecycle step, a change to
//! a session, a message a bridge passes on — goes through [`write_ahead`] before what it
//! describes is sent or carried out. When it fails, the caller does not go on.

use serde_json::{Map, Value, json};

use crate::audit::{Actor, AuditEvent, AuditLog, Subject};
use crate::auth::{BEARER, Identity};

/// Appends `event` to `log`, naming `identity` (`metadata.aip44.identity`) when a remote
/// client proved one. Returns once the record is written (and synced, if the log's policy
/// says so); the error, a sentence from the log, means nothing was recorded and what the
/// record describes must not happen.
pub(crate) fn write_ahead(log: &AuditLog, identity: Option<&Identity>, event: AuditEvent) -> Result<(), String> {
    let stamped;
    let log = match identity {
        Some(identity) => {
            stamped = log.stamped("aip44", identity.audit_fields());
            &stamped
        }
        None => log,
    };
    log.record(event).map(drop).map_err(|error| error.to_string())
}

/// A record of `action` by `actor` (its id and role) on the subject of `kind` named
/// `reference`, with `aip44` as its `metadata.aip44`.
pub(crate) fn event_of(
    (actor, role): (String, &str),
    action: &str,
    (kind, reference): (&str, &str),
    aip44: Map<String, Value>,
) -> AuditEvent {
    let actor = Actor {
        id: actor,
        role: Some(role.into()),
    };
    let subject = Subject {
        kind: kind.into(),
        reference: Some(reference.to_string()),
        path: None,
    };
    let mut event = AuditEvent::new(actor, action, subject);
    event.metadata = Some([("aip44".to_string(), Value::Object(aip44))].into_iter().collect());
    event
}

/// An `auth.*` record of operator `operator_id` (a server's, or a bridge's).
pub(crate) fn auth_event(operator_id: &str, action: &str, identity: &Identity, via: &str) -> AuditEvent {
    let actor = (identity.as_str().to_string(), "client");
    let mut event = event_of(actor, action, ("operator", operator_id), identity.audit_fields());
    event.input = Some(json!({"method": BEARER, "via": via}));
    event
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::write_ahead;
    use crate::audit::{AuditEvent, AuditLog, Lifecycle, MemorySink};
    use crate::auth::Identity;

    /// A record is in the log when `write_ahead` returns, naming the identity it is given
    /// (and only then); the log's own stamp is not lost.
    #[test]
    fn a_record_is_written_before_it_returns_naming_its_identity() {
        let sink = MemorySink::default();
        let log = AuditLog::with_sink(Box::new(sink.clone()));
        let event = || AuditEvent::lifecycle("op", "s1", Lifecycle::Running, None);
        let alice = Identity::new("alice").unwrap();
        write_ahead(&log, Some(&alice), event()).unwrap();
        assert_eq!(sink.lines().len(), 1, "written before it returned");
        write_ahead(&log, None, event()).unwrap();
        let identities: Vec<Value> = (sink.lines().iter())
            .map(|line| serde_json::from_str::<Value>(line).unwrap()["metadata"]["aip44"]["identity"].clone())
            .collect();
        assert_eq!(identities, [Value::from("alice"), Value::Null]);
    }
}
