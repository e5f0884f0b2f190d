//! Versioned schemas: each component (`sessions`, `audit`, `tokens`, …) lists its steps, and
//! [`migrate`] applies those the database lacks, in order, in one transaction.

use postgres::Client;

use crate::{Database, DbError};

/// The table that records the applied steps: `(component, version, name, applied_at)`.
pub const SCHEMA_TABLE: &str = "agentacp_schema";

/// One step of a component's schema. Versions start at 1 and go up by one; a step, once
/// released, never changes (a change is a new step).
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its number.
    pub version: i32,
    /// A few words on what it does (recorded).
    pub name: &'static str,
    /// The SQL, one or more statements.
    pub sql: &'static str,
}

/// Applies the steps of `component` that `database` lacks, in one transaction under an
/// advisory lock (replicas starting together apply each step once); the version the
/// database is at afterwards. A database at a version this build does not know (a newer
/// build migrated it) is refused with [`DbError::Schema`], and so are steps not numbered
/// 1, 2, 3, ….
pub fn migrate(database: &Database, component: &'static str, steps: &'static [Migration]) -> Result<i32, DbError> {
    check_numbering(component, steps)?;
    let shown = database.shown().to_string();
    database.run_raw(move |client| apply(client, component, steps).map_err(|e| in_words(&shown, component, e)))
}

fn check_numbering(component: &str, steps: &[Migration]) -> Result<(), DbError> {
    for (i, step) in steps.iter().enumerate() {
        if step.version != i as i32 + 1 {
            return Err(DbError::Schema(format!(
                "the {component} schema's steps must be numbered 1, 2, 3, …; step {} is numbered {}",
                i + 1,
                step.version
            )));
        }
    }
    Ok(())
}

/// What went wrong applying steps, before it is said in words.
enum Failure {
    Sql(postgres::Error),
    Newer { at: i32, known: i32 },
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Failure {
        Failure::Sql(e)
    }
}

fn in_words(shown: &str, component: &str, failure: Failure) -> DbError {
    match failure {
        Failure::Sql(e) => DbError::query(shown, &e),
        Failure::Newer { at, known } => DbError::Schema(format!(
            "the {component} schema of the database at {shown} is at version {at}, newer than this build knows ({known}): \
             run a build at least as new as the one that migrated it"
        )),
    }
}

fn apply(client: &mut Client, component: &str, steps: &[Migration]) -> Result<i32, Failure> {
    let mut tx = client.transaction()?;
    // One lock for every component: two replicas starting at once take turns.
    tx.execute("select pg_advisory_xact_lock(hashtext('agentacp_schema'))", &[])?;
    tx.batch_execute(&format!(
        "create table if not exists {SCHEMA_TABLE} (
            component text not null,
            version integer not null,
            name text not null,
            applied_at timestamptz not null default now(),
            primary key (component, version))"
    ))?;
    let row = tx.query_one(
        &format!("select coalesce(max(version), 0) from {SCHEMA_TABLE} where component = $1"),
        &[&component],
    )?;
    let at: i32 = row.get(0);
    let known = steps.len() as i32;
    if at > known {
        return Err(Failure::Newer { at, known });
    }
    for step in &steps[at as usize..] {
        tx.batch_execute(step.sql)?;
        tx.execute(
            &format!("insert into {SCHEMA_TABLE} (component, version, name) values ($1, $2, $3)"),
            &[&component, &step.version, &step.name],
        )?;
    }
    tx.commit()?;
    Ok(known)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;

    static STEPS: [Migration; 2] = [
        Migration {
            version: 1,
            name: "a table",
            sql: "create table things (id text primary key)",
        },
        Migration {
            version: 2,
            name: "a column",
            sql: "alter table things add column size integer",
        },
    ];

    fn database(test: &str) -> Option<Database> {
        let cluster = test_support::postgres::cluster()?;
        Some(Database::connect(&cluster.database(test), Options::default()).expect("connects"))
    }

    #[test]
    fn steps_are_applied_once_and_in_order() {
        let Some(db) = database("migrate_once") else { return };
        assert_eq!(migrate(&db, "things", &STEPS[..1]).unwrap(), 1);
        assert_eq!(migrate(&db, "things", &STEPS).unwrap(), 2);
        assert_eq!(migrate(&db, "things", &STEPS).unwrap(), 2, "nothing left to apply");
        let applied = db
            .run(|c| c.query_one("select count(*) from agentacp_schema where component = 'things'", &[]))
            .unwrap();
        assert_eq!(applied.get::<_, i64>(0), 2);
        db.run(|c| c.execute("insert into things (id, size) values ('a', 1)", &[]))
            .unwrap();
    }

    #[test]
    fn a_database_newer_than_the_build_is_refused_with_a_sentence() {
        let Some(db) = database("migrate_newer") else { return };
        migrate(&db, "things", &STEPS).unwrap();
        let error = migrate(&db, "things", &STEPS[..1]).unwrap_err().to_string();
        assert!(
            error.contains("is at version 2, newer than this build knows (1)"),
            "{error}"
        );
    }

    #[test]
    fn replicas_migrating_at_once_apply_each_step_once() {
        let Some(db) = database("migrate_race") else { return };
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let db = db.clone();
                std::thread::spawn(move || migrate(&db, "things", &STEPS))
            })
            .collect();
        for handle in handles {
            assert_eq!(handle.join().unwrap().unwrap(), 2);
        }
    }

    #[test]
    fn steps_out_of_order_are_refused() {
        static BAD: [Migration; 1] = [Migration {
            version: 2,
            name: "x",
            sql: "select 1",
        }];
        let Some(db) = database("migrate_bad") else { return };
        let error = migrate(&db, "things", &BAD).unwrap_err().to_string();
        assert!(error.contains("step 1 is numbered 2"), "{error}");
    }
}
