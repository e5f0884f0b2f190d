//! A database chain whose PostgreSQL server goes away (feature `postgres`): `record` returns an
//! error (the runtime then refuses the action it was about to take), never panics or hangs,
//! and once the server is back the same log resumes the chain (and a reopened one continues
//! it). A test binary of its own:
//! it stops the cluster that every test of its binary shares.

#![cfg(all(unix, feature = "postgres"))]

use std::time::Duration;

use acp_audit::{Actor, AuditError, AuditEvent, AuditLog, FsyncPolicy, Subject, verify_database};
use acp_postgres::{Database, Options};

fn event() -> AuditEvent {
    AuditEvent::new(
        Actor {
            id: "operator:outage".into(),
            role: None,
        },
        "audit.note",
        Subject {
            kind: "note".into(),
            reference: None,
            path: None,
        },
    )
}

#[test]
fn an_outage_refuses_records_and_the_log_resumes_once_the_database_is_back() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("outage");
    let options = Options {
        answer_within: Duration::from_secs(2),
        connect_within: Duration::from_secs(2),
        ..Options::default()
    };
    let db = Database::connect(&url, options).unwrap();
    for policy in [FsyncPolicy::EveryRecord, FsyncPolicy::Batched { every: 4 }] {
        let log = AuditLog::open_database(&db, "op@outage", policy).unwrap();
        let before = log.record(event()).unwrap().seq;
        cluster.stop().unwrap();
        let error = log.record(event()).unwrap_err();
        assert!(matches!(error, AuditError::Io(_)), "{error:?}");
        let said = error.to_string();
        assert!(said.starts_with("audit log I/O error: "), "{said}");
        assert!(!said.contains("Error {"), "a sentence, not debug output: {said}");
        let again = log.record(event()).unwrap_err();
        assert!(matches!(again, AuditError::Failed(_)), "{again:?}");
        let reopened = AuditLog::open_database(&db, "op@outage", policy).unwrap_err();
        assert!(matches!(reopened, AuditError::Io(_)), "{reopened:?}");
        cluster.start_again().unwrap();
        // The same log goes on once the database is back (within a second of its last try),
        // from the chain's end: nothing was half-written.
        let resumed = loop {
            match log.record(event()) {
                Ok(record) => break record,
                Err(AuditError::Failed(reason)) if reason.contains("less than a second ago") => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(error) => panic!("{error}"),
            }
        };
        assert_eq!(resumed.seq, before + 1, "nothing was half-written");
        drop(log);
        let log = AuditLog::open_database(&db, "op@outage", policy).unwrap();
        assert_eq!(
            log.record(event()).unwrap().seq,
            before + 2,
            "a reopened log goes on too"
        );
    }
    let [verdict] = verify_database(&db, None).unwrap().try_into().unwrap();
    assert_eq!(verdict.result.map(|s| s.records), Ok(6));
}
