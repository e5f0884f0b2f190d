//! The pool: connections on threads of their own, and the blocking call with a deadline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postgres::{Client, Config, NoTls};

use crate::DbError;

/// How a [`Database`] connects and waits.
#[derive(Debug, Clone)]
pub struct Options {
    /// Connections (and threads) in the pool. Default 4.
    pub connections: usize,
    /// How long [`Database::run`] waits for an answer; also each statement's
    /// `statement_timeout`, so a job given up on does not run on. Default 10 s.
    pub answer_within: Duration,
    /// How long opening a connection may take. Default 5 s.
    pub connect_within: Duration,
    /// `application_name`, which `pg_stat_activity` shows. Default `agentacp`.
    pub application_name: String,
    /// Certificates (PEM) trusted for the server's, besides Mozilla's roots, when the URL
    /// says `sslmode=require` (feature `tls`): a private CA. Default none.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            connections: 4,
            answer_within: Duration::from_secs(10),
            connect_within: Duration::from_secs(5),
            application_name: "agentacp".to_string(),
            ca_file: None,
        }
    }
}

/// A job for a pool thread: runs with the thread's connection (or the error opening it);
/// `true` when it found the connection broken (the thread opens a new one for the next job),
/// which it has then counted in the pool's outages before answering its caller.
type Job = Box<dyn FnOnce(Result<&mut Client, DbError>, &AtomicU64) -> bool + Send>;

/// A pool of connections to one database. Clones share the pool; it ends when the last
/// clone is dropped (the threads finish the job at hand and close their connections).
#[derive(Clone)]
pub struct Database {
    shared: Arc<Shared>,
}

struct Shared {
    jobs: Mutex<Sender<Job>>,
    /// What a worker needs to open its connection.
    opener: Opener,
    options: Options,
}

/// How to open a connection to the database.
#[derive(Clone)]
struct Opener {
    config: Config,
    tls: Tls,
    shown: String,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("url", &self.shared.opener.shown)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// A pool on `url` (`postgres://user:password@host:port/dbname` or key=value). Opens one
    /// connection at once, so that a wrong URL, password or an absent server is an error here
    /// and not at the first store call.
    pub fn connect(url: &str, options: Options) -> Result<Database, DbError> {
        let mut config: Config = url
            .parse()
            .map_err(|e: postgres::Error| DbError::BadUrl(e.to_string()))?;
        config
            .connect_timeout(options.connect_within)
            .application_name(&options.application_name)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            .options(&format!("-c statement_timeout={}", options.answer_within.as_millis()));
        let tls = Tls::for_config(&config, &options)?;
        let opener = Opener {
            config,
            tls,
            shown: crate::shown_url(url),
        };
        let workers = options.connections.max(1);
        Database::start(opener, options, workers, true)
    }

    /// Starts `workers` threads, each with a connection it opens at its first job (and again
    /// after a break when `reopen`), and checks the database answers.
    fn start(opener: Opener, options: Options, workers: usize, reopen: bool) -> Result<Database, DbError> {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let outages = Arc::new(AtomicU64::new(0));
        for n in 0..workers {
            let worker = Worker {
                jobs: rx.clone(),
                opener: opener.clone(),
                client: None,
                reopen,
                opened: false,
                outages: outages.clone(),
                outages_seen: 0,
                last_used: std::time::Instant::now(),
            };
            std::thread::Builder::new()
                .name(format!("acp-postgres-{n}"))
                .spawn(move || worker.run())
                .map_err(|e| DbError::Unreachable {
                    database: opener.shown.clone(),
                    why: format!("no thread for a connection: {e}"),
                })?;
        }
        let database = Database {
            shared: Arc::new(Shared {
                jobs: Mutex::new(tx),
                opener,
                options,
            }),
        };
        database.run(|client| client.simple_query("select 1").map(|_| ()))?;
        Ok(database)
    }

    /// The database, as [`shown_url`](crate::shown_url) shows it (no password).
    pub fn shown(&self) -> &str {
        &self.shared.opener.shown
    }

    /// The options it was opened with.
    pub fn options(&self) -> &Options {
        &self.shared.options
    }

    /// A connection of its own (not from the pool), on a thread of its own, for a caller
    /// whose state lives in the connection (a session-level advisory lock, session settings):
    /// a [`Database`] of one connection that is never opened again. Once it breaks, every
    /// call fails with [`DbError::Lost`], so that what the connection held is not silently
    /// gone.
    pub fn dedicated(&self) -> Result<Database, DbError> {
        Database::start(self.shared.opener.clone(), self.shared.options.clone(), 1, false)
    }

    /// Opens a connection on the calling thread (which must not be a tokio runtime's: the
    /// client blocks on a runtime of its own). For the listening thread.
    pub(crate) fn open_here(&self) -> Result<Client, DbError> {
        open(&self.shared.opener)
    }

    /// Runs `job` on a pool connection and waits for its result, at most
    /// [`Options::answer_within`]. A statement error becomes [`DbError::Query`].
    pub fn run<T, F>(&self, job: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    {
        let shown = self.shared.opener.shown.clone();
        self.run_raw(move |client| job(client).map_err(|e| DbError::query(&shown, &e)))
    }

    /// [`run`](Self::run) for a job that makes its own errors (several statements, checks).
    pub fn run_raw<T, F>(&self, job: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Client) -> Result<T, DbError> + Send + 'static,
    {
        let (answer, answered): (SyncSender<Result<T, DbError>>, Receiver<_>) = std::sync::mpsc::sync_channel(1);
        let job: Job = Box::new(move |client, outages| {
            let result = client.and_then(job);
            let broken = result.as_ref().is_err_and(DbError::breaks_connection);
            if broken {
                // Counted before the caller hears of it, so that its next call, on another
                // thread, checks that thread's connection first.
                outages.fetch_add(1, Ordering::Relaxed);
            }
            let _ = answer.send(result);
            broken
        });
        let sent = self.shared.jobs.lock().unwrap_or_else(|e| e.into_inner()).send(job);
        sent.map_err(|_| DbError::Closed)?;
        // The connection's own deadline (statement_timeout) comes first; this one covers a
        // connect that hangs or a network that swallows packets.
        let wait = self.shared.options.answer_within + self.shared.options.connect_within;
        answered.recv_timeout(wait).map_err(|e| match e {
            RecvTimeoutError::Timeout => DbError::Timeout {
                database: self.shared.opener.shown.clone(),
                after: wait,
            },
            RecvTimeoutError::Disconnected => DbError::Closed,
        })?
    }
}

/// One pool thread: takes jobs one at a time, with a connection it opens at the first job
/// and, in a pool (`reopen`), again after a break.
struct Worker {
    jobs: Arc<Mutex<Receiver<Job>>>,
    opener: Opener,
    client: Option<Client>,
    reopen: bool,
    /// Whether a connection was ever opened (a dedicated one is opened once).
    opened: bool,
    /// Breaks seen by any thread of the pool: after a server restart every idle connection
    /// is dead, and each thread checks its own before its next job instead of failing it.
    outages: Arc<AtomicU64>,
    outages_seen: u64,
    /// When the connection last finished a job: one idle for longer than [`IDLE_CHECK`] is
    /// checked before its next job (a server restart while the pool was idle).
    last_used: std::time::Instant,
}

/// How long a pool connection may sit idle before it is checked (one round trip) first.
const IDLE_CHECK: Duration = Duration::from_secs(2);

impl Worker {
    fn run(mut self) {
        loop {
            let job = match self.jobs.lock().unwrap_or_else(|e| e.into_inner()).recv() {
                Ok(job) => job,
                Err(_) => return,
            };
            let outages = self.outages.clone();
            match self.connection() {
                Ok(client) => {
                    if job(Ok(client), &outages) {
                        self.client = None;
                        self.outages_seen = outages.load(Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    job(Err(e), &outages);
                }
            }
        }
    }

    /// The thread's connection: checked when another thread saw a break since or when it sat
    /// idle, opened when absent (a dedicated one only the first time).
    fn connection(&mut self) -> Result<&mut Client, DbError> {
        let outages = self.outages.load(Ordering::Relaxed);
        let suspect = outages != self.outages_seen || self.last_used.elapsed() > IDLE_CHECK;
        self.outages_seen = outages;
        self.last_used = std::time::Instant::now();
        if let Some(client) = self.client.as_mut()
            && (client.is_closed() || (suspect && client.is_valid(Duration::from_secs(1)).is_err()))
        {
            // Dead: the other threads check theirs before their next job.
            self.client = None;
            self.outages_seen = self.outages.fetch_add(1, Ordering::Relaxed) + 1;
        }
        if self.client.is_none() {
            if self.opened && !self.reopen {
                return Err(DbError::Lost {
                    database: self.opener.shown.clone(),
                });
            }
            self.opened = true;
            self.client = Some(open(&self.opener)?);
        }
        Ok(self.client.as_mut().expect("opened above"))
    }
}

/// How connections are secured: plain, or (feature `tls`) rustls.
#[derive(Clone)]
enum Tls {
    Plain,
    #[cfg(feature = "tls")]
    Rustls(tokio_postgres_rustls::MakeRustlsConnect),
}

impl Tls {
    /// Rustls for `sslmode=require` (which then verifies the server's certificate and name,
    /// as libpq's `verify-full`); plain otherwise (`prefer`, the default, does not try TLS:
    /// an unverified certificate would protect nothing). `require` in a build without
    /// feature `tls` is refused here, in words.
    fn for_config(config: &Config, options: &Options) -> Result<Tls, DbError> {
        if config.get_ssl_mode() != postgres::config::SslMode::Require {
            return Ok(Tls::Plain);
        }
        #[cfg(feature = "tls")]
        {
            crate::tls::connector(options.ca_file.as_deref()).map(Tls::Rustls)
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = options;
            Err(DbError::BadUrl(
                "it asks for TLS (sslmode=require), but this build has no TLS for the database \
                 (feature `tls` of acp-postgres, which agentacp's feature `tls` turns on)"
                    .to_string(),
            ))
        }
    }
}

/// Opens a connection.
fn open(opener: &Opener) -> Result<Client, DbError> {
    let opened = match &opener.tls {
        Tls::Plain => opener.config.connect(NoTls),
        #[cfg(feature = "tls")]
        Tls::Rustls(connector) => opener.config.connect(connector.clone()),
    };
    opened.map_err(|e| DbError::Unreachable {
        database: opener.shown.clone(),
        why: e
            .as_db_error()
            .map(|db| db.message().to_string())
            .unwrap_or_else(|| e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Database, Options};
    use crate::DbError;

    #[test]
    fn an_absent_server_is_a_sentence_at_connect() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("postgres://agent:secret@127.0.0.1:{port}/agents");
        let error = Database::connect(&url, Options::default()).unwrap_err();
        assert!(matches!(error, DbError::Unreachable { .. }), "{error:?}");
        let said = error.to_string();
        assert!(
            said.starts_with(&format!(
                "cannot reach the database at postgres://agent@127.0.0.1:{port}/agents"
            )),
            "{said}"
        );
        assert!(!said.contains("secret"), "{said}");
    }

    #[test]
    fn a_dedicated_connection_is_never_silently_reopened_and_works_from_async_code() {
        let Some(cluster) = test_support::postgres::cluster() else {
            return;
        };
        let db = Database::connect(&cluster.database("dedicated"), Options::default()).unwrap();
        // Opened and used from a tokio runtime thread: the client's own runtime is elsewhere.
        let runtime = tokio_runtime();
        let held = runtime.block_on(async { db.dedicated() }).unwrap();
        let pid: i32 = held
            .run(|c| c.query_one("select pg_backend_pid()", &[]))
            .unwrap()
            .get(0);
        held.run(|c| c.execute("select pg_advisory_lock(7)", &[])).unwrap();
        db.run(move |c| c.execute("select pg_terminate_backend($1)", &[&pid]))
            .unwrap();
        // The break shows at the next statement (as a failed statement), and from then on
        // every call says the connection is lost.
        let _ = held.run(|c| c.simple_query("select 1").map(|_| ()));
        let error = held.run(|c| c.simple_query("select 1").map(|_| ())).unwrap_err();
        assert!(matches!(error, DbError::Lost { .. }), "{error:?}");
        assert!(
            error.to_string().contains("held a lock or settings was lost"),
            "{error}"
        );
    }

    #[test]
    fn after_a_server_restart_one_call_at_most_fails_per_pool() {
        let Some(cluster) = test_support::postgres::cluster() else {
            return;
        };
        let db = Database::connect(&cluster.database("restart"), Options::default()).unwrap();
        open_every_connection(&db);
        db.run(|c| {
            c.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity \
                 where pid <> pg_backend_pid() and datname = current_database()",
                &[],
            )
        })
        .unwrap();
        let failed = (0..8)
            .filter(|_| db.run(|c| c.simple_query("select 1").map(|_| ())).is_err())
            .count();
        assert!(failed <= 1, "{failed} calls failed after the outage");
    }

    #[test]
    fn a_pool_idle_through_an_outage_fails_no_call() {
        let Some(cluster) = test_support::postgres::cluster() else {
            return;
        };
        let db = Database::connect(&cluster.database("idle_outage"), Options::default()).unwrap();
        open_every_connection(&db);
        // Every connection is cut from outside (as by a server restart) …
        cluster
            .psql(
                &cluster.url("postgres"),
                "select pg_terminate_backend(pid) from pg_stat_activity where datname like '%idle_outage'",
            )
            .unwrap();
        // … while the pool sits idle for longer than it trusts an idle connection.
        std::thread::sleep(super::IDLE_CHECK + Duration::from_millis(100));
        for _ in 0..8 {
            db.run(|c| c.simple_query("select 1").map(|_| ()))
                .expect("checked and reopened first");
        }
    }

    /// Gives each of the pool's four connections a job at once, so that all are open and
    /// idle afterwards.
    fn open_every_connection(db: &Database) {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let db = db.clone();
                std::thread::spawn(move || db.run(|c| c.simple_query("select pg_sleep(0.2)").map(|_| ())))
            })
            .collect();
        for handle in handles {
            handle.join().unwrap().unwrap();
        }
    }

    fn tokio_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_asked_of_a_build_without_it_is_refused_in_words() {
        let error = Database::connect("postgres://a@127.0.0.1:1/b?sslmode=require", Options::default()).unwrap_err();
        assert!(
            error.to_string().contains("this build has no TLS for the database"),
            "{error}"
        );
    }

    #[test]
    fn a_statement_slower_than_the_deadline_is_cut_and_the_pool_goes_on() {
        let Some(cluster) = test_support::postgres::cluster() else {
            return;
        };
        let options = Options {
            answer_within: Duration::from_millis(300),
            connections: 1,
            ..Options::default()
        };
        let db = Database::connect(&cluster.database("deadline"), options).unwrap();
        let error = db
            .run(|c| c.simple_query("select pg_sleep(5)").map(|_| ()))
            .unwrap_err();
        assert!(error.is_transient(), "{error}");
        assert!(error.to_string().contains("statement timeout"), "{error}");
        db.run(|c| c.simple_query("select 1").map(|_| ()))
            .expect("the connection serves the next job");
    }

    #[test]
    fn a_connection_cut_by_the_server_is_opened_again_for_the_next_job() {
        let Some(cluster) = test_support::postgres::cluster() else {
            return;
        };
        let options = Options {
            connections: 1,
            ..Options::default()
        };
        let db = Database::connect(&cluster.database("reopen"), options).unwrap();
        let error = db
            .run(|c| {
                c.simple_query("select pg_terminate_backend(pg_backend_pid())")
                    .map(|_| ())
            })
            .unwrap_err();
        assert!(error.is_transient(), "{error}");
        db.run(|c| c.simple_query("select 1").map(|_| ())).expect("reopened");
    }
}
