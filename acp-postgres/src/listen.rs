//! `LISTEN` on a connection of its own, from a thread of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use crate::{Database, DbError};

/// What a [`Listener`] hands its callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A notification: its channel and payload.
    Notification {
        /// The channel.
        channel: String,
        /// The payload (`pg_notify`'s second argument).
        payload: String,
    },
    /// The listening connection was (re)opened: notifications sent while it was down are
    /// lost, so whoever relies on them reads the state they announce again. Also handed once
    /// at the start, when the channels are first listened to.
    Listening,
}

/// Listens while it lives; dropping it stops the thread within [`LISTEN_POLL`].
#[derive(Debug)]
pub struct Listener {
    stop: Arc<AtomicBool>,
}

/// How often the listening thread looks whether it should stop, and the pause before it
/// opens a lost connection again.
pub const LISTEN_POLL: Duration = Duration::from_millis(250);

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Database {
    /// Listens on `channels` (SQL identifiers: lowercase letters, digits, `_`) on a connection
    /// of its own and hands each notice to `on_notice`, on the listening thread. Returns once
    /// the first connection listens (an error if it cannot); later outages are retried every
    /// [`LISTEN_POLL`], then [`Notice::Listening`] says notifications may have been missed.
    pub fn listen<F>(&self, channels: &[&str], mut on_notice: F) -> Result<Listener, DbError>
    where
        F: FnMut(Notice) + Send + 'static,
    {
        if let Some(bad) = channels.iter().find(|c| !is_identifier(c)) {
            return Err(DbError::Schema(format!(
                "`{bad}` is not a channel name this layer listens on"
            )));
        }
        let statement: String = channels.iter().map(|c| format!("listen {c};")).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let (database, stopping) = (self.clone(), stop.clone());
        // The connection is opened on the listening thread (the client blocks on a runtime of
        // its own, which a tokio thread must not); the first outcome comes back here.
        let (first, opened) = std::sync::mpsc::sync_channel::<Result<(), DbError>>(1);
        std::thread::Builder::new()
            .name("acp-postgres-listen".into())
            .spawn(move || {
                let mut client = match subscribe(&database, &statement) {
                    Ok(client) => Some(client),
                    Err(e) => {
                        let _ = first.send(Err(e));
                        return;
                    }
                };
                let _ = first.send(Ok(()));
                on_notice(Notice::Listening);
                while !stopping.load(Ordering::Relaxed) {
                    match client.as_mut() {
                        Some(open) => {
                            // A broken connection is opened again below; the caller learns of
                            // it through `Notice::Listening` when it is back.
                            if forward(open, &mut on_notice).is_err() {
                                client = None;
                            }
                        }
                        None => {
                            std::thread::sleep(LISTEN_POLL);
                            client = subscribe(&database, &statement).ok();
                            if client.is_some() {
                                on_notice(Notice::Listening);
                            }
                        }
                    }
                }
            })
            .map_err(|e| DbError::Unreachable {
                database: self.shown().to_string(),
                why: format!("no thread to listen on: {e}"),
            })?;
        let options = self.options();
        let wait = options.connect_within + options.answer_within;
        match opened.recv_timeout(wait) {
            Ok(Ok(())) => Ok(Listener { stop }),
            Ok(Err(e)) => Err(e),
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                Err(DbError::Timeout {
                    database: self.shown().to_string(),
                    after: wait,
                })
            }
        }
    }
}

/// Hands on what arrives within one [`LISTEN_POLL`]; an error when the connection broke.
fn forward<F: FnMut(Notice)>(client: &mut postgres::Client, on_notice: &mut F) -> Result<(), postgres::Error> {
    {
        let mut notifications = client.notifications();
        let mut arrived = notifications.timeout_iter(LISTEN_POLL);
        while let Some(n) = arrived.next()? {
            on_notice(Notice::Notification {
                channel: n.channel().to_string(),
                payload: n.payload().to_string(),
            });
        }
    }
    // `timeout_iter` ends quietly on a closed connection: look.
    if client.is_closed() {
        // A query on a closed client fails, which gives the error the caller acts on.
        client.simple_query("")?;
    }
    Ok(())
}

/// A connection of the listening thread's, listening on the channels.
fn subscribe(database: &Database, statement: &str) -> Result<postgres::Client, DbError> {
    let mut client = database.open_here()?;
    client
        .batch_execute(statement)
        .map_err(|e| DbError::query(database.shown(), &e))?;
    Ok(client)
}

fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::Notice;
    use crate::{Database, Options};

    #[test]
    fn a_notification_reaches_the_listener_and_an_outage_is_said() {
        let Some(cluster) = test_support::postgres::cluster() else {
            return;
        };
        let db = Database::connect(&cluster.database("listen"), Options::default()).unwrap();
        let (tx, rx) = mpsc::channel();
        let _listener = db.listen(&["revoked"], move |notice| drop(tx.send(notice))).unwrap();
        let within = Duration::from_secs(10);
        assert_eq!(rx.recv_timeout(within).unwrap(), Notice::Listening);
        db.run(|c| c.execute("select pg_notify('revoked', 'alice')", &[]))
            .unwrap();
        assert_eq!(
            rx.recv_timeout(within).unwrap(),
            Notice::Notification {
                channel: "revoked".into(),
                payload: "alice".into()
            }
        );
        // Cut every other connection (the listener's too): it comes back and says so.
        db.run(|c| {
            c.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity \
                 where pid <> pg_backend_pid() and datname = current_database()",
                &[],
            )
        })
        .unwrap();
        assert_eq!(rx.recv_timeout(within).unwrap(), Notice::Listening);
        db.run(|c| c.execute("select pg_notify('revoked', 'bob')", &[]))
            .unwrap();
        assert_eq!(
            rx.recv_timeout(within).unwrap(),
            Notice::Notification {
                channel: "revoked".into(),
                payload: "bob".into()
            }
        );
    }

    #[test]
    fn a_bad_channel_name_is_refused() {
        let Some(cluster) = test_support::postgres::cluster() else {
            return;
        };
        let db = Database::connect(&cluster.database("listen_bad"), Options::default()).unwrap();
        let error = db.listen(&["drop table x"], |_| {}).unwrap_err().to_string();
        assert!(error.contains("is not a channel name"), "{error}");
    }
}
