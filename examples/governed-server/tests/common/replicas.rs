//! Replicas of `governed-server --listen` for the fleet tests (`tests/fleet.rs`) and the fleet
//! benchmark (`benches/fleet.rs`): each a process with its own name and state folder, on a
//! database (its audit log a chain there), or on files (its audit log a file of its own).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentacp::client::{Client, ClientError, ClientOptions};
use agentacp::websocket::Dial;

/// The bound on every wait.
pub const WAIT: Duration = Duration::from_secs(30);

/// One replica: the process and what it wrote on stderr.
pub struct Replica {
    /// Its `AGENTACP_REPLICA`.
    pub name: &'static str,
    child: Child,
    /// `ws://127.0.0.1:PORT/acp`.
    pub url: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    /// Starts replica `name` on `database` (`None`: files in its state folder), its lease
    /// `lease_ms` long. (The benchmark's; the tests use [`start_with`](Replica::start_with).)
    #[allow(dead_code)]
    pub fn start(name: &'static str, database: Option<&str>, dirs: &Dirs, lease_ms: u64) -> Replica {
        Replica::start_with(name, database, dirs, lease_ms, &[])
    }

    /// [`start`](Replica::start), with `env` added to its environment (e.g.
    /// `AGENTACP_TOKENS=database`).
    pub fn start_with(
        name: &'static str,
        database: Option<&str>,
        dirs: &Dirs,
        lease_ms: u64,
        env: &[(&str, &str)],
    ) -> Replica {
        let mut command = Command::new(env!("CARGO_BIN_EXE_governed-server"));
        command
            .args(["--listen", "127.0.0.1:0"])
            .env_remove("RUST_LOG")
            .env_remove("AGENTACP_DATABASE_URL")
            .env("AGENTACP_LOG", "warn,agentacp=info")
            .env("AGENTACP_WORKSPACE_ROOT", &dirs.root)
            .env("AGENTACP_STATE_DIR", dirs.base.join(format!("state-{name}")))
            .env("AGENTACP_REPLICA", name)
            .env("AGENTACP_LEASE_MS", lease_ms.to_string())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // On a database the audit log is the replica's chain there; on files, a file of its own.
        match database {
            Some(database) => command
                .env("AGENTACP_DATABASE_URL", database)
                .env_remove("AGENTACP_AUDIT_LOG"),
            None => command.env("AGENTACP_AUDIT_LOG", dirs.base.join(format!("audit-{name}.jsonl"))),
        };
        let mut child = command.spawn().expect("governed-server starts");
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (output, kept) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("governed-server: listening on ") {
                    let _ = tx.send(addr.to_string());
                }
                kept.lock().unwrap().push(line);
            }
        });
        let url = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("replica {name} did not start:\n{}", stderr.lock().unwrap().join("\n")));
        Replica {
            name,
            child,
            url,
            stderr,
        }
    }

    /// A client connected to it over WebSocket.
    pub async fn client(&self, dirs: &Dirs) -> Client {
        self.connect(dirs, None)
            .await
            .unwrap_or_else(|e| panic!("connecting to {}: {e}\n{}", self.name, self.stderr_text()))
    }

    /// A client connecting to it over WebSocket, showing `token` on the upgrade when given;
    /// the connect's error when it is refused.
    pub async fn connect(&self, dirs: &Dirs, token: Option<&str>) -> Result<Client, ClientError> {
        let options = ClientOptions::default().with_workspace_root(dirs.root.clone());
        let mut dial = Dial::new(self.url.clone());
        if let Some(token) = token {
            dial = dial.token(token);
        }
        tokio::time::timeout(WAIT, Client::connect_websocket(dial, options))
            .await
            .expect("connected in time")
    }

    /// What it wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The folders of one run: the workspace root (shared, as a fleet shares a volume), and one
/// state folder and audit file per replica.
pub struct Dirs {
    _tmp: tempfile::TempDir,
    /// The temporary folder.
    pub base: PathBuf,
    /// `AGENTACP_WORKSPACE_ROOT`.
    pub root: PathBuf,
    /// A session's folder inside it.
    pub project: PathBuf,
}

impl Dirs {
    /// Fresh folders.
    pub fn new() -> Dirs {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("workspace");
        let project = root.join("p");
        std::fs::create_dir_all(&project).unwrap();
        Dirs {
            _tmp: tmp,
            base,
            root,
            project,
        }
    }
}
