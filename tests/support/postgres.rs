//! A real PostgreSQL server for the tests of the PostgreSQL stores: one cluster per test
//! binary, made with the machine's `initdb` in a temporary folder, run as an unprivileged
//! user when the tests run as root, listening on loopback only, and ended with the test
//! process (the parent-death signal of the thread that started it, which lives as long as the
//! process). Each test takes a database of its own ([`Cluster::database`]).
//!
//! Without PostgreSQL's server programs, [`cluster`] says why and returns `None` (or fails the
//! test under [`REQUIRE_PEERS`](crate::REQUIRE_PEERS), as in CI, whose `.ci/run` installs the
//! Debian package `postgresql`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the server may take to accept connections after it is started.
const START_WITHIN: Duration = Duration::from_secs(60);

/// The test binary's PostgreSQL server.
#[derive(Debug)]
pub struct Cluster {
    port: u16,
    bin: PathBuf,
    dir: PathBuf,
    /// The server's pid (for tests that stop or kill it).
    pid: std::sync::Mutex<u32>,
    as_root: bool,
    databases: AtomicUsize,
}

/// The test binary's cluster, started on first use; `None` (after saying why, or failing under
/// CI's flag) when PostgreSQL's server programs are absent or the server does not start. Off
/// Unix (the runtime's unit tests under Wine) always `None`, said but never failed: the
/// cluster is started as `nobody` with Unix tools, and the PostgreSQL tests run on Linux.
pub fn cluster() -> Option<&'static Cluster> {
    if cfg!(not(unix)) {
        eprintln!("skipped: the PostgreSQL test cluster runs on Unix only");
        return None;
    }
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    match CLUSTER.get_or_init(Cluster::start) {
        Ok(cluster) => Some(cluster),
        Err(why) => {
            crate::skip_unless_required(why);
            None
        }
    }
}

impl Cluster {
    /// A new, empty database on the cluster, named after `test`; its connection URL.
    pub fn database(&self, test: &str) -> String {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        let name: String = test
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let name = format!("t{n}_{name}");
        let status = Command::new(self.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", &name])
            .stdin(Stdio::null())
            .status()
            .expect("createdb runs");
        assert!(status.success(), "createdb {name} failed: {status}");
        self.url(&name)
    }

    /// The URL of database `name` on the cluster (user `postgres`, trusted on loopback).
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The folder of PostgreSQL's programs (`psql`, `pg_ctl`, …).
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The cluster's data folder.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        *self.pid.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the server (a fast shutdown: open connections are cut), waiting until it is gone.
    pub fn stop(&self) -> Result<(), String> {
        // SIGINT: PostgreSQL's fast shutdown. Gone when its pid file is.
        let _ = Command::new("kill").args(["-INT", &self.pid().to_string()]).status();
        let deadline = Instant::now() + START_WITHIN;
        while self.data_dir().join("postmaster.pid").exists() {
            if Instant::now() > deadline {
                return Err("PostgreSQL did not stop".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Starts the server again after [`stop`](Self::stop), on the same port and data.
    pub fn start_again(&self) -> Result<(), String> {
        let pid = spawn_kept(&self.bin, &self.dir, self.port, self.as_root)?;
        *self.pid.lock().unwrap_or_else(|e| e.into_inner()) = pid;
        self.wait_ready()
    }

    /// Runs one SQL text with `psql` on database `url`, stopping at the first error; its
    /// output (unaligned, tuples only).
    pub fn psql(&self, url: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("psql did not start: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// Turns TLS on (`ssl = on`, reloaded) with a certificate and key in PEM, for the tests
    /// of TLS connections; plain connections are still accepted. Waits until new connections
    /// see it.
    pub fn enable_tls(&self, cert_pem: &str, key_pem: &str) -> Result<(), String> {
        let (cert, key) = (self.dir.join("server.crt"), self.dir.join("server.key"));
        std::fs::write(&cert, cert_pem).map_err(|e| format!("cannot write the certificate: {e}"))?;
        std::fs::write(&key, key_pem).map_err(|e| format!("cannot write the key: {e}"))?;
        key_for_server(&cert, &key, self.as_root)?;
        let admin = self.url("postgres");
        let set = format!(
            "alter system set ssl_cert_file = '{}'; alter system set ssl_key_file = '{}'; alter system set ssl = on; select pg_reload_conf()",
            cert.display(),
            key.display()
        );
        for statement in set.split("; ") {
            self.psql(&admin, statement)?;
        }
        let deadline = Instant::now() + START_WITHIN;
        while self.psql(&admin, "show ssl")? != "on" {
            if Instant::now() > deadline {
                return Err("TLS did not come on".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn start() -> Result<Cluster, String> {
        let bin = server_programs().ok_or(
            "PostgreSQL's server programs (initdb, postgres) are absent: install the Debian package postgresql",
        )?;
        remove_dead_clusters();
        let dir = std::env::temp_dir().join(format!("agentacp-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let as_root = running_as_root();
        if as_root {
            give_to_nobody(&dir)?;
        }
        let data = dir.join("data");
        let initdb = unprivileged(&bin.join("initdb"), as_root)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "-D"])
            .arg(&data)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("initdb did not start: {e}"))?;
        if !initdb.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&initdb.stderr).trim()
            ));
        }
        let port = free_port()?;
        let pid = spawn_kept(&bin, &dir, port, as_root)?;
        let cluster = Cluster {
            port,
            bin,
            dir,
            pid: std::sync::Mutex::new(pid),
            as_root,
            databases: AtomicUsize::new(0),
        };
        cluster.wait_ready()?;
        Ok(cluster)
    }

    /// Waits until the server accepts a query, at most [`START_WITHIN`].
    fn wait_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + START_WITHIN;
        loop {
            match self.psql(&self.url("postgres"), "select 1") {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
                    return Err(format!("PostgreSQL did not start within {START_WITHIN:?}: {e}\n{log}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

/// Removes the folders of earlier test processes' clusters (about 40 MB each) once their
/// process is gone (its server went with it).
fn remove_dead_clusters() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("agentacp-pg-")) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The folder holding `initdb` and `postgres`: from `PATH`, else Debian's newest
/// `/usr/lib/postgresql/<major>/bin`.
fn server_programs() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        let dir = std::env::split_paths(&path).find(|dir| dir.join("initdb").is_file())?;
        // Debian links initdb into PATH; psql and createdb are beside the real one.
        let real = std::fs::canonicalize(dir.join("initdb")).ok()?;
        real.parent().map(Path::to_path_buf)
    });
    on_path.or_else(|| {
        let mut majors: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let major = entry.file_name().to_str()?.parse().ok()?;
                let bin = entry.path().join("bin");
                bin.join("initdb").is_file().then_some((major, bin))
            })
            .collect();
        majors.sort();
        majors.pop().map(|(_, bin)| bin)
    })
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// PostgreSQL refuses to run as root: the cluster's folder belongs to `nobody`.
fn give_to_nobody(dir: &Path) -> Result<(), String> {
    let status = Command::new("chown")
        .args(["nobody:nogroup"])
        .arg(dir)
        .status()
        .map_err(|e| format!("chown did not start: {e}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("chown nobody {} failed", dir.display()))
}

/// `program`, run as `nobody` through `setpriv` when the tests run as root, with a
/// parent-death signal so that it ends with the thread that started it.
fn unprivileged(program: &Path, as_root: bool) -> Command {
    let mut command = Command::new("setpriv");
    if as_root {
        command.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"]);
    }
    command.args(["--pdeathsig", "TERM"]).arg(program);
    command
}

/// A loopback port free at the time of asking.
fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Starts the server from a thread that lives as long as the test process, so that the
/// parent-death signal ends the server with the process and not with the first test; its pid.
fn spawn_kept(bin: &Path, dir: &Path, port: u16, as_root: bool) -> Result<u32, String> {
    let (tx, rx) = std::sync::mpsc::channel::<Result<u32, String>>();
    let mut command = unprivileged(&bin.join("postgres"), as_root);
    command
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-h", "127.0.0.1", "-k"])
        .arg(dir)
        .args(["-c", "fsync=off", "-c", "max_connections=200"])
        .stdin(Stdio::null());
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .map_err(|e| format!("server log: {e}"))?;
    command.stdout(Stdio::null()).stderr(log);
    std::thread::Builder::new()
        .name("postgres-keeper".into())
        .spawn(move || {
            let child: std::io::Result<Child> = command.spawn();
            match child {
                Ok(mut child) => {
                    let _ = tx.send(Ok(child.id()));
                    let _ = child.wait();
                }
                Err(e) => {
                    let _ = tx.send(Err(format!("postgres did not start: {e}")));
                }
            }
        })
        .map_err(|e| format!("no thread for postgres: {e}"))?;
    rx.recv().map_err(|_| "the postgres keeper thread ended".to_string())?
}

/// Makes `key` readable by the server only, as it requires: owned by root and readable by its
/// group (nogroup) when the server runs as nobody (`as_root`), else its own with mode 0600.
#[cfg(unix)]
fn key_for_server(cert: &Path, key: &Path, as_root: bool) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = if as_root {
        std::os::unix::fs::chown(key, Some(0), Some(65534)).map_err(|e| format!("chown: {e}"))?;
        std::os::unix::fs::chown(cert, Some(0), Some(65534)).map_err(|e| format!("chown: {e}"))?;
        0o640
    } else {
        0o600
    };
    std::fs::set_permissions(key, std::fs::Permissions::from_mode(mode)).map_err(|e| format!("chmod: {e}"))
}

/// The test server runs on Unix only (this crate builds elsewhere for the Wine tests).
#[cfg(not(unix))]
fn key_for_server(_cert: &Path, _key: &Path, _as_root: bool) -> Result<(), String> {
    Err("the PostgreSQL test server's TLS is set up on Unix only".to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_test_gets_a_database_of_its_own_and_the_server_restarts() {
        let Some(cluster) = super::cluster() else { return };
        let a = cluster.database("one");
        let b = cluster.database("one");
        assert_ne!(a, b);
        cluster
            .psql(&a, "create table t (x int); insert into t values (7)")
            .unwrap();
        assert_eq!(cluster.psql(&a, "select x from t").unwrap(), "7");
        assert!(
            cluster.psql(&b, "select x from t").is_err(),
            "the second database is empty"
        );
        cluster.stop().unwrap();
        assert!(cluster.psql(&a, "select 1").is_err(), "stopped");
        cluster.start_again().unwrap();
        assert_eq!(cluster.psql(&a, "select x from t").unwrap(), "7");
    }
}
