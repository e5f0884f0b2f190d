//! `acp-conform`: a conformance kit for ACP agents. It starts the agent under test over stdio
//! (or connects to a remote one over WebSocket, [`Connect`]), runs a suite of [`Check`]s (each
//! in a fresh process or connection, so one crash poisons nothing else) and reports pass /
//! fail (with the offending message) / skip for each. `scaffold-aip conform` is
//! a thin command over [`run`] and [`report`]; `docs/conform.md` lists the checks.

pub mod auth;
pub mod checks;
pub mod driver;
pub mod report;
pub mod v2;

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

pub use driver::{Connect, Launch, Peer, Sent};

/// What a check concluded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "lowercase")]
pub enum Outcome {
    /// The agent behaved as the rule says.
    Pass,
    /// It did not; the evidence (the offending message, trimmed).
    Fail(String),
    /// The check does not apply; why.
    Skip(String),
}

/// One check: an id, a title, the rule it enforces, and the function that judges.
pub struct Check {
    /// A stable id, `group.name`.
    pub id: &'static str,
    /// A one-line title.
    pub title: &'static str,
    /// The rule enforced, in our words, with the spec section it comes from.
    pub rule: &'static str,
    /// What it needs of the agent besides `initialize`.
    pub needs: Needs,
    /// Runs the check; `Err` is a failure with its evidence.
    pub run: fn(&Context) -> Result<Outcome, String>,
}

/// What a check needs of the agent besides `initialize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing more: it judges `initialize` or single frames.
    Agent,
    /// A session (`session/new` answered): skipped when the agent refuses sessions for want
    /// of authentication ([`auth::REQUIRED`]).
    Session,
}

/// What the kit needs to know to run the suite.
#[derive(Debug, Clone)]
pub struct Config {
    /// How to start the agent.
    pub launch: Launch,
    /// A remote agent to connect to instead (`--connect`): then `launch` is not used, and the
    /// checks that need the agent's process are skipped.
    pub connect: Option<Connect>,
    /// The `initialize` result the manifest leads to (`scaffold-aip explain`), when one is given.
    pub expected_initialize: Option<Value>,
    /// The manifest describes a bridge: its capabilities are its agent's narrowed to the
    /// manifest's (so they may be fewer), and `_meta.aip44.downstream` names that agent.
    pub bridge: bool,
    /// The deadline of every wait on the agent.
    pub timeout: Duration,
    /// Run only these check ids (all when empty).
    pub only: Vec<String>,
    /// A prompt that keeps a turn running until it is cancelled.
    pub long_prompt: String,
    /// Where the agent writes its audit log (for the `audit.*` checks; skipped without).
    pub audit_log: Option<AuditSource>,
    /// Prompts that drive the agent to tool calls, one turn each (for the `audit.*` checks:
    /// best one that runs without asking, one that asks permission and one governance denies).
    pub tool_prompts: Vec<String>,
    /// The auth method to `authenticate` with after each `initialize` (`--auth`); it must be
    /// one the agent offers (`authMethods`), and not a `terminal` one.
    pub auth: Option<String>,
    /// The protocol version whose suite runs: 1 (the default) or 2 ([`v2`], `--protocol 2`).
    pub protocol: u16,
    /// The v2 JSON schema every frame of the agent's is checked against (`--schema`; `v2.schema`
    /// is skipped without it). The kit embeds none.
    pub schema: Option<std::path::PathBuf>,
    /// The agent is a Windows program run under Wine here, which names this machine's root
    /// folder as this drive (Wine's default is `Z`): every path the kit gives it (its
    /// `AGENTACP_WORKSPACE_ROOT` and `AGENTACP_STATE_DIR`, each `cwd`) is written as it names
    /// them (`Z:\tmp\…`). Not used with [`connect`](Self::connect), whose root is the server's.
    pub wine_drive: Option<char>,
}

/// Where the kit finds the agent's audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditSource {
    /// A file: `--audit-log`, or the manifest's `audit.kind: external` with an absolute `ref`.
    File(std::path::PathBuf),
    /// A file in the state folder the kit gives the agent (`AGENTACP_STATE_DIR`), as the
    /// runtime resolves it: a relative `ref` of `audit.kind: external`, or the default
    /// `audit.kind: governance`'s file (see [`acp_audit::channel_log_name`]).
    StateFolder(std::path::PathBuf),
    /// The manifest turns the log off (`audit.kind: off`, tier basic only).
    Off,
}

impl Config {
    /// The defaults for `command`: no manifest, every check, a 5 s timeout, `/forever` as the
    /// long prompt (agentacp's examples read it as "stream until cancelled").
    pub fn new(command: Vec<std::ffi::OsString>) -> Config {
        Config {
            launch: Launch {
                command,
                env: Vec::new(),
            },
            connect: None,
            expected_initialize: None,
            bridge: false,
            timeout: Duration::from_secs(5),
            only: Vec::new(),
            long_prompt: "/forever".into(),
            audit_log: None,
            tool_prompts: Vec::new(),
            auth: None,
            protocol: 1,
            schema: None,
            wine_drive: None,
        }
    }
}

impl Config {
    /// Reads the manifest at `path`: what `initialize` should answer, whether it is a bridge,
    /// and (unless one is set already) where the audit log is.
    pub fn with_manifest(mut self, path: &std::path::Path) -> Result<Config, String> {
        let resolved = resolve(path)?;
        let explanation = acp_manifest::explain::explain(&resolved.0)
            .ok_or_else(|| "the manifest has errors (see `scaffold-aip lint`) or an unknown revision".to_string())?;
        self.expected_initialize = Some(explanation.initialize_response);
        self.bridge = resolved.1.kind() == acp_manifest::manifest::Kind::Bridge;
        if self.audit_log.is_none() {
            self.audit_log = Some(audit_source(resolved.1.audit));
        }
        Ok(self)
    }
}

/// The ids of the checks that failed.
pub fn failed(verdicts: &[Verdict]) -> Vec<&'static str> {
    ids_where(verdicts, |outcome| matches!(outcome, Outcome::Fail(_)))
}

/// The ids of the checks that were skipped.
pub fn skipped(verdicts: &[Verdict]) -> Vec<&'static str> {
    ids_where(verdicts, |outcome| matches!(outcome, Outcome::Skip(_)))
}

fn ids_where(verdicts: &[Verdict], keep: fn(&Outcome) -> bool) -> Vec<&'static str> {
    verdicts.iter().filter(|v| keep(&v.outcome)).map(|v| v.id).collect()
}

/// The result of one check.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The check's id.
    pub id: &'static str,
    /// The check's title.
    pub title: &'static str,
    /// The rule it enforces.
    pub rule: &'static str,
    /// What it concluded.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// How long it took, in milliseconds.
    pub millis: u128,
}

/// Why the suite could not run at all (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The per-run state the checks share: the configuration and a workspace root (a temporary
/// folder passed to each agent as `AGENTACP_WORKSPACE_ROOT`; with [`Config::connect`], the
/// server's root it names).
pub struct Context {
    /// The configuration.
    pub config: Config,
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
    /// The run of the tool prompts with every permission allowed, shared by the audit checks
    /// that judge it.
    allowed_run: std::sync::OnceLock<Result<checks::audit::ToolRun, String>>,
    /// Where, if anywhere, the agent refused the kit for want of authentication.
    auth: auth::Watch,
    /// The v2 suite's state: the schema, the version the agent chose, the frames it failed.
    v2: v2::State,
}

impl Context {
    /// Makes the workspace root and a sibling folder outside it.
    pub fn new(config: Config) -> Result<Context, StartError> {
        let make = || tempfile::Builder::new().prefix("acp-conform-").tempdir();
        let io = |e: std::io::Error| StartError(format!("cannot create a temporary folder: {e}"));
        let v2 = v2::State::new(&config).map_err(StartError)?;
        Ok(Context {
            v2,
            config,
            root: make().map_err(io)?,
            outside: make().map_err(io)?,
            allowed_run: std::sync::OnceLock::new(),
            auth: auth::Watch::default(),
        })
    }

    /// The workspace root (canonical, when it is a local folder).
    pub fn root(&self) -> std::path::PathBuf {
        let root = match &self.config.connect {
            Some(connect) => connect.workspace_root.as_path(),
            None => self.root.path(),
        };
        root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
    }

    /// The workspace root as the agent names it: [`root`](Self::root), or under Wine
    /// ([`Config::wine_drive`]) on Wine's drive.
    pub fn agent_root(&self) -> std::path::PathBuf {
        self.agent_path(&self.root())
    }

    /// A path of this machine as the agent names it: itself, or under Wine
    /// ([`Config::wine_drive`], not remote) on Wine's drive, with `\\` for `/`.
    pub fn agent_path(&self, path: &std::path::Path) -> std::path::PathBuf {
        match self.config.wine_drive {
            Some(drive) if !self.remote() && path.is_absolute() => {
                format!("{drive}:{}", path.display()).replace('/', "\\").into()
            }
            _ => path.to_path_buf(),
        }
    }

    /// Whether the agent is remote ([`Config::connect`]): no process of the kit's.
    pub fn remote(&self) -> bool {
        self.config.connect.is_some()
    }

    /// Whether the variable `name` is set (not empty) in the agent's environment: the kit's,
    /// with [`Launch::env`] over it. A remote agent's is unknown: taken as set.
    pub fn agent_has_env(&self, name: &str) -> bool {
        if self.remote() {
            return true;
        }
        let launched = self.config.launch.env.iter().rev().find(|(key, _)| key == name);
        match launched {
            Some((_, value)) => !value.is_empty(),
            None => std::env::var_os(name).is_some_and(|value| !value.is_empty()),
        }
    }

    /// A folder outside the workspace root.
    pub fn outside(&self) -> &std::path::Path {
        self.outside.path()
    }

    /// The agent's audit log: `Err` is why the audit checks do not apply.
    pub fn audit_log(&self) -> Result<std::path::PathBuf, String> {
        match &self.config.audit_log {
            None => Err("no --audit-log, and no --manifest to find it from".into()),
            Some(AuditSource::File(path)) => Ok(path.clone()),
            Some(AuditSource::StateFolder(_)) if self.config.connect.is_some() => {
                Err("the remote agent's state folder is unknown: give --audit-log".into())
            }
            Some(AuditSource::StateFolder(name)) => Ok(self.outside.path().join(name)),
            Some(AuditSource::Off) => Err("the manifest turns the audit log off".into()),
        }
    }

    /// Starts a fresh agent (with [`Config::connect`]: opens a fresh connection).
    pub fn spawn(&self) -> Result<Peer, String> {
        self.spawn_with(&[])
    }

    /// Starts a fresh agent with extra environment variables (a remote agent's cannot be set:
    /// an error unless `env` is empty).
    pub fn spawn_with(&self, env: &[(&str, &str)]) -> Result<Peer, String> {
        if let Some(connect) = &self.config.connect {
            if !env.is_empty() {
                return Err("the environment of a remote agent cannot be set".into());
            }
            return Peer::connect(connect, self.config.timeout);
        }
        let mut launch = self.config.launch.clone();
        launch
            .env
            .push(("AGENTACP_WORKSPACE_ROOT".into(), self.agent_root().into()));
        launch
            .env
            .push(("AGENTACP_STATE_DIR".into(), self.agent_path(self.outside.path()).into()));
        launch.env.extend(env.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        Peer::spawn(&launch, self.config.timeout)
    }
}

/// Every check, in the order they run.
pub fn all_checks() -> Vec<Check> {
    checks::all()
}

/// Runs the suite: a preflight (start the agent or connect to it, `initialize`) whose failure
/// is a [`StartError`], then each selected check in a fresh agent process or connection.
pub fn run(config: Config) -> Result<Vec<Verdict>, StartError> {
    let checks = match config.protocol {
        1 => all_checks(),
        2 => v2::all(),
        other => {
            return Err(StartError(format!(
                "--protocol {other}: the kit has suites for versions 1 and 2"
            )));
        }
    };
    if let Some(unknown) = config
        .only
        .iter()
        .find(|id| !checks.iter().any(|c| c.id == id.as_str()))
    {
        return Err(StartError(format!("--only: no check `{unknown}`")));
    }
    let context = Context::new(config)?;
    match context.config.protocol {
        2 => v2::preflight(&context),
        _ => checks::preflight(&context),
    }
    .map_err(StartError)?;
    let selected = checks
        .iter()
        .filter(|c| context.config.only.is_empty() || context.config.only.iter().any(|id| id == c.id));
    let verdicts: Vec<Verdict> = selected.map(|check| run_check(&context, check)).collect();
    // The refusal, once, in front of the checks it kept from judging.
    Ok(context
        .auth
        .verdict(&context.config)
        .into_iter()
        .chain(verdicts)
        .collect())
}

/// Runs one check. One the agent's demand for authentication kept from judging is skipped,
/// saying so: up front when it needs a session and the agent refuses them, or when it met
/// the refusal itself (whatever it concluded would not be about its rule).
fn run_check(context: &Context, check: &Check) -> Verdict {
    let started = Instant::now();
    let skip = (check.needs == Needs::Session)
        .then(|| context.auth.skip_for_sessions())
        .flatten()
        .map(Outcome::Skip)
        .or_else(|| v2::gate(context, check));
    let outcome = match skip {
        Some(skip) => skip,
        None => {
            context.auth.start_check();
            let outcome = (check.run)(context).unwrap_or_else(Outcome::Fail);
            context.auth.seen_in_check().map_or(outcome, Outcome::Skip)
        }
    };
    Verdict {
        id: check.id,
        title: check.title,
        rule: check.rule,
        outcome,
        millis: started.elapsed().as_millis(),
    }
}

/// The `initialize` result `scaffold-aip explain` computes for the manifest at `path` (what
/// [`Config::expected_initialize`] holds).
pub fn manifest_initialize(path: &std::path::Path) -> Result<Value, String> {
    Config::new(Vec::new())
        .with_manifest(path)
        .map(|config| config.expected_initialize.unwrap_or_default())
}

/// Where the manifest at `path` says the agent's audit log is (what [`Config::audit_log`]
/// holds when `--audit-log` is not given): an absolute `ref` of `audit.kind: external`, else
/// a file in the agent's state folder (a relative `ref`, or the governance channel's file).
pub fn manifest_audit(path: &std::path::Path) -> Result<AuditSource, String> {
    resolve(path).map(|(_, resolved)| audit_source(resolved.audit))
}

/// The manifest at `path`, checked and resolved.
fn resolve(
    path: &std::path::Path,
) -> Result<(acp_manifest::manifest::Checked, acp_manifest::resolved::Resolved), String> {
    let checked = acp_manifest::manifest::check_file(path).map_err(|e| e.to_string())?;
    let resolved = acp_manifest::resolved::Resolved::of(&checked)
        .ok_or_else(|| "the manifest has errors (see `scaffold-aip lint`) or an unknown revision".to_string())?;
    Ok((checked, resolved))
}

fn audit_source(target: acp_manifest::resolved::AuditTarget) -> AuditSource {
    match target {
        acp_manifest::resolved::AuditTarget::Off => AuditSource::Off,
        acp_manifest::resolved::AuditTarget::External { path } if path.is_absolute() => AuditSource::File(path),
        acp_manifest::resolved::AuditTarget::External { path } => AuditSource::StateFolder(path),
        acp_manifest::resolved::AuditTarget::Governance { channel } => {
            AuditSource::StateFolder(acp_audit::channel_log_name(channel.as_deref()).into())
        }
    }
}

/// Evidence is cut to this many characters.
const EVIDENCE_CHARS: usize = 300;

/// `text` on one line, cut to a readable length.
pub fn trim(text: &str) -> String {
    let flat: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let flat = flat.trim();
    if flat.chars().count() <= EVIDENCE_CHARS {
        flat.to_string()
    } else {
        let cut: String = flat.chars().take(EVIDENCE_CHARS).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::{Config, Context};
    use std::path::{Path, PathBuf};

    /// Issue #50: under Wine every absolute path the kit gives the agent is named on Wine's
    /// drive; without `wine_drive`, and for a relative path, it is left as it is.
    #[test]
    fn paths_are_named_on_wines_drive_only_for_a_windows_agent_under_wine() {
        let wine = Context::new(Config {
            wine_drive: Some('Z'),
            ..Config::new(Vec::new())
        })
        .unwrap();
        assert_eq!(wine.agent_path(Path::new("/tmp/a b/c")), PathBuf::from(r"Z:\tmp\a b\c"));
        assert_eq!(wine.agent_path(Path::new("relative/x")), PathBuf::from("relative/x"));
        let root = wine.agent_root().to_string_lossy().into_owned();
        assert!(root.starts_with(r"Z:\") && !root.contains('/'), "{root}");
        let native = Context::new(Config::new(Vec::new())).unwrap();
        assert_eq!(native.agent_path(Path::new("/tmp/a")), PathBuf::from("/tmp/a"));
        assert_eq!(native.agent_root(), native.root());
    }
}
