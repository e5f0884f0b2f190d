//! Real third-party ACP programs from npm, pinned in `interop/real-agents` (`npm ci --prefix
//! interop/real-agents`; `.ci/run` installs them): the headless client `acpx` drives our
//! example servers and our bridge end to end, and our example client drives the agents Codex
//! ACP, Claude agent ACP and Gemini CLI, directly and through our bridge, to the step each
//! reaches without credentials, and `scaffold-aip conform` reports each agent's demand for a
//! login as one clear failure. After every run, no process is left in the run's folder.
//!
//! Skipped, saying so, when the packages are absent. Nothing here needs network access or
//! credentials: the agents stop where they would need them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use interop::{AgentDirs, ScriptOutput, example_binary, run_script};

/// The bound on one run of a client (a real agent starts in a few seconds).
const DEADLINE: Duration = Duration::from_secs(120);

/// How long the processes of a finished run may take to be gone (the agent's stop is stdin
/// closed, a grace, SIGTERM, a grace, SIGKILL: a few seconds at most).
const GONE_WITHIN: Duration = Duration::from_secs(15);

fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("real-agents/node_modules/.bin")
}

/// The installed program `name`, or why the test is skipped.
fn program(name: &str) -> Result<PathBuf, String> {
    let path = bin_dir().join(name);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} is absent (run `npm ci --prefix interop/real-agents`)",
            path.display()
        ))
    }
}

/// `PATH` with the packages' programs (and their Node 22, which acpx needs) first.
fn path_with_packages() -> std::ffi::OsString {
    let mut paths = vec![bin_dir()];
    paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(paths).expect("PATH joins")
}

/// The processes whose working folder lies inside `dir` (an agent and anything it started,
/// which inherit the folder), other than this test: `(pid, command line)`.
fn processes_in(dir: &Path) -> Vec<(u32, String)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
            if pid == me || !cwd.starts_with(dir) {
                return None;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            Some((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        })
        .collect()
}

/// Fails, listing them, when processes are still running in `dir` once `GONE_WITHIN` has
/// passed (polled: a process being reaped right now is not a leftover).
fn assert_nothing_left_in(dir: &Path, what: &str) {
    let started = Instant::now();
    loop {
        let left = processes_in(dir);
        if left.is_empty() {
            return;
        }
        if started.elapsed() > GONE_WITHIN {
            for (pid, _) in &left {
                // Clean up before failing, so one failure does not leak into the next test.
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            }
            panic!("{what}: processes left running after {GONE_WITHIN:?}: {left:#?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn show(output: &ScriptOutput) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status, output.stdout, output.stderr
    )
}

/// Runs `acpx --agent AGENT ... exec PROMPT` in `dirs`' project folder.
fn acpx(
    dirs: &AgentDirs,
    env: &[(&str, std::ffi::OsString)],
    agent: &Path,
    flags: &[&str],
    prompt: &str,
) -> ScriptOutput {
    let acpx = program("acpx").expect("checked by the caller");
    let project = dirs.project("project");
    let mut command = Command::new(acpx);
    command
        .current_dir(&project)
        .env("PATH", path_with_packages())
        // acpx keeps its own state under HOME: a scratch one.
        .env("HOME", dirs.project("home"))
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .arg("--agent")
        .arg(agent)
        .arg("--cwd")
        .arg(&project)
        .args(["--format", "text", "--timeout", "60"])
        .args(flags)
        .arg("exec")
        .arg(prompt);
    let output = run_script(&mut command, DEADLINE);
    assert_nothing_left_in(&project, &format!("acpx with {}", agent.display()));
    output
}

#[test]
fn acpx_drives_our_servers_and_our_bridge() {
    if let Err(why) = program("acpx") {
        interop::skip_without_peer(&why);
        return;
    }
    let dirs = AgentDirs::new();
    std::fs::write(dirs.project("project").join("notes.txt"), "from the workspace\n").unwrap();

    let echo = acpx(
        &dirs,
        &dirs.env(),
        &example_binary("echo-server"),
        &[],
        "hello from acpx",
    );
    assert_eq!(echo.status.and_then(|s| s.code()), Some(0), "{}", show(&echo));
    assert!(echo.stdout.contains("hello from acpx"), "{}", show(&echo));

    let read = r#"/tool read-file {"path":"notes.txt"}"#;
    let governed = acpx(
        &dirs,
        &dirs.env(),
        &example_binary("governed-server"),
        &["--approve-all"],
        read,
    );
    assert!(governed.stdout.contains("from the workspace"), "{}", show(&governed));

    let bridge_audit = dirs.project("audit").join("bridge.jsonl");
    let bridge_env = dirs.bridge_env(&bridge_audit);
    let bridge = example_binary("governance-bridge");
    // The bridge starts the governed server beside it.
    let through = acpx(&dirs, &bridge_env, &bridge, &["--approve-all"], read);
    assert!(through.stdout.contains("from the workspace"), "{}", show(&through));

    // A write governance asks about, refused by acpx's user: not written, on either side.
    let write = r#"/tool write-file {"path":"refused.txt","content":"no"}"#;
    let refused = acpx(&dirs, &bridge_env, &bridge, &["--deny-all"], write);
    assert!(refused.stdout.contains("rejected"), "{}", show(&refused));
    assert!(!dirs.project("project").join("refused.txt").exists());
    let audit = std::fs::read_to_string(&bridge_audit).expect("the bridge's audit log");
    assert!(audit.contains("write-file"), "{audit}");
}

/// One real agent, and what our client shows of it when it has no credentials.
struct RealAgent {
    /// Its program in `node_modules/.bin`, and arguments.
    command: &'static [&'static str],
    /// What our client's output must say (the step the agent stops at, in its words).
    expected: &'static [&'static str],
}

const AGENTS: &[RealAgent] = &[
    // Advertises env_var auth methods and refuses session/new until `authenticate`; our
    // client lists the methods with the variables each needs.
    RealAgent {
        command: &["codex-acp"],
        expected: &[
            "answered `session/new` with an error: Authentication required",
            "codex-api-key (env_var: CODEX_API_KEY)",
        ],
    },
    // Opens a session without credentials; the prompt is refused.
    RealAgent {
        command: &["claude-agent-acp"],
        expected: &["answered `session/prompt` with an error: Authentication required"],
    },
    // Refuses session/new without a key (its methods are plain `agent` ones).
    RealAgent {
        command: &["gemini", "--acp"],
        expected: &[
            "answered `session/new` with an error: Gemini API key is missing",
            "gemini-api-key (agent)",
        ],
    },
];

/// Runs our example client (with `flags`) against `agent_command` in `dirs`' project folder.
fn acp_client(
    dirs: &AgentDirs,
    env: &[(&str, std::ffi::OsString)],
    flags: &[&str],
    agent_command: &[PathBuf],
) -> ScriptOutput {
    let project = dirs.project("project");
    let mut command = Command::new(example_binary("acp-client"));
    command
        .current_dir(&project)
        .env("PATH", path_with_packages())
        .env("HOME", dirs.project("home"))
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .arg("--cwd")
        .arg(&project)
        .args(["--no", "--prompt", "say hello"])
        .args(flags)
        .arg("--")
        .args(agent_command);
    let output = run_script(&mut command, DEADLINE);
    assert_nothing_left_in(&project, &format!("acp-client with {agent_command:?}"));
    output
}

#[test]
fn our_client_and_bridge_reach_each_real_agent_as_far_as_it_goes_without_credentials() {
    for agent in AGENTS {
        let program = match program(agent.command[0]) {
            Ok(program) => program,
            Err(why) => {
                interop::skip_without_peer(&why);
                return;
            }
        };
        let mut command = vec![program];
        command.extend(agent.command[1..].iter().map(PathBuf::from));
        let dirs = AgentDirs::new();

        let direct = acp_client(&dirs, &dirs.env(), &[], &command);
        assert_ne!(direct.status.and_then(|s| s.code()), Some(0), "{}", show(&direct));
        for expected in agent.expected {
            assert!(
                direct.stderr.contains(expected),
                "{:?}: {}",
                agent.command,
                show(&direct)
            );
        }

        let bridge_audit = dirs.project("audit").join("bridge.jsonl");
        let mut through = vec![example_binary("governance-bridge"), PathBuf::from("--")];
        through.extend(command.iter().cloned());
        let bridged = acp_client(&dirs, &dirs.bridge_env(&bridge_audit), &[], &through);
        assert_ne!(bridged.status.and_then(|s| s.code()), Some(0), "{}", show(&bridged));
        for expected in agent.expected {
            assert!(
                bridged.stderr.contains(expected),
                "{:?} behind the bridge: {}",
                agent.command,
                show(&bridged)
            );
        }
    }
}

/// Codex with a key in `CODEX_API_KEY` (not a real one): our client picks the `env_var` method
/// whose variable the agent gets, `authenticate`s, opens a session and reaches the prompt,
/// which fails at OpenAI's end (no network, or a key it refuses), with the agent's error data
/// shown. The same through the bridge, which passes the variable on with `--pass-env`.
#[test]
fn our_client_authenticates_codex_with_an_env_var_key_directly_and_through_the_bridge() {
    let codex = match program("codex-acp") {
        Ok(program) => program,
        Err(why) => {
            interop::skip_without_peer(&why);
            return;
        }
    };
    let dirs = AgentDirs::new();
    let mut env = dirs.env();
    env.push(("CODEX_API_KEY", "sk-not-a-real-key".into()));
    let direct = acp_client(&dirs, &env, &["--env", "CODEX_API_KEY"], std::slice::from_ref(&codex));
    assert_ne!(direct.status.and_then(|s| s.code()), Some(0), "{}", show(&direct));
    assert!(
        direct.stderr.contains("answered `session/prompt` with an error"),
        "authenticated, the session opened and the prompt reached the agent: {}",
        show(&direct)
    );
    assert!(!direct.stderr.contains("Authentication required"), "{}", show(&direct));

    let bridge_audit = dirs.project("audit").join("bridge.jsonl");
    let mut env = dirs.bridge_env(&bridge_audit);
    env.push(("CODEX_API_KEY", "sk-not-a-real-key".into()));
    let through = [
        example_binary("governance-bridge"),
        PathBuf::from("--pass-env"),
        PathBuf::from("CODEX_API_KEY"),
        PathBuf::from("--"),
        codex,
    ];
    let bridged = acp_client(&dirs, &env, &["--env", "CODEX_API_KEY"], &through);
    assert!(
        bridged.stderr.contains("answered `session/prompt` with an error"),
        "through the bridge: {}",
        show(&bridged)
    );
    assert!(
        !bridged.stderr.contains("Authentication required"),
        "{}",
        show(&bridged)
    );
}

/// One real agent, and the `auth.required` failure `scaffold-aip conform` reports for it
/// without credentials.
struct Walled {
    /// Its program in `node_modules/.bin`, and arguments.
    command: &'static [&'static str],
    /// What the failure's evidence says (the methods it offers, the request it refused).
    says: &'static [&'static str],
}

const WALLED: &[Walled] = &[
    Walled {
        command: &["codex-acp"],
        says: &[
            "the agent requires authentication: methods chatgpt, codex-api-key (env_var: CODEX_API_KEY)",
            "it answered session/new with -32000",
        ],
    },
    // Opens sessions, refuses prompts, and offers no methods.
    Walled {
        command: &["claude-agent-acp"],
        says: &["offers no auth methods at initialize: it answered session/prompt with -32000"],
    },
    Walled {
        command: &["gemini", "--acp"],
        says: &[
            "the agent requires authentication: methods oauth-personal, gemini-api-key",
            "it answered session/new with -32000",
        ],
    },
];

/// The checks run against the real agents: those that need a session or the connection to
/// serve after a refusal (where a missing login used to read as "the connection no longer
/// serves"), and the handshake. Left out are checks these agents fail for reasons of their own,
/// unrelated to authentication (seen when this test was written: a truncated frame or a
/// non-string method left unanswered or answered -32601, bad params answered -32603, Claude's
/// agent opening a session before `initialize` and still running 5 s after EOF), and
/// `turn.sigterm`, which Claude's agent (it opens sessions) once failed on a loaded machine.
const CONFORM_CHECKS: &str = "handshake.version-current,handshake.agent-info,jsonrpc.unknown-method,\
jsonrpc.notification-unanswered,jsonrpc.ids-echoed,jsonrpc.stdout-clean,session.unknown-session,\
session.relative-cwd,session.load,turn.updates-before-response,turn.cancel";

/// The bound on one `conform` run against a real agent (seen: Codex under 1 s, Gemini CLI and
/// Claude's agent 15 s, each check starting the agent afresh; none needs the network).
const CONFORM_DEADLINE: Duration = Duration::from_secs(90);

/// `scaffold-aip conform` against each real agent, without credentials (a scratch HOME, no
/// other variables but PATH): the report is the one `auth.required` failure, first, naming
/// the agent's methods, nothing else fails, what needs what the login guards is skipped for
/// it, and nothing is left running.
#[test]
fn conform_reports_one_clear_authentication_failure_for_each_real_agent() {
    for agent in WALLED {
        let program = match program(agent.command[0]) {
            Ok(program) => program,
            Err(why) => {
                interop::skip_without_peer(&why);
                return;
            }
        };
        let dirs = AgentDirs::new();
        let project = dirs.project("project");
        let mut command = Command::new(example_binary("scaffold-aip"));
        command
            .current_dir(&project)
            .env_clear()
            .env("PATH", path_with_packages())
            .env("HOME", dirs.project("home"))
            .args([
                "conform",
                "--format",
                "json",
                "--timeout-ms",
                "10000",
                "--only",
                CONFORM_CHECKS,
                "--",
            ])
            .arg(&program)
            .args(&agent.command[1..]);
        let output = run_script(&mut command, CONFORM_DEADLINE);
        assert_nothing_left_in(&project, &format!("conform with {:?}", agent.command));
        assert_eq!(output.status.and_then(|s| s.code()), Some(1), "{}", show(&output));
        let report: serde_json::Value =
            serde_json::from_str(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&output)));
        let checks = report["checks"].as_array().expect("checks");
        let failed: Vec<&serde_json::Value> = checks.iter().filter(|c| c["outcome"] == "fail").collect();
        assert_eq!(failed.len(), 1, "{:?}: {}", agent.command, show(&output));
        assert_eq!(checks[0]["id"], "auth.required", "{}", show(&output));
        let evidence = checks[0]["detail"].as_str().unwrap_or_default();
        for says in agent.says {
            assert!(evidence.contains(says), "{:?}: {evidence}", agent.command);
        }
        // Whatever the login kept from being judged says so.
        let skipped_for_auth = checks
            .iter()
            .filter(|c| {
                c["outcome"] == "skip"
                    && c["detail"]
                        .as_str()
                        .is_some_and(|d| d.contains("requires authentication"))
            })
            .count();
        assert!(skipped_for_auth >= 1, "{:?}: {}", agent.command, show(&output));
    }
}

/// Issue #45.4: acpx in front of a bridge whose agent cannot be reached. The bridge used to
/// exit without a word: acpx printed an EPIPE trace and waited out its timeout. Now acpx's
/// `initialize` is answered with the reason, which acpx shows, naming the URL.
#[test]
fn acpx_shows_why_the_bridges_agent_cannot_be_reached() {
    if let Err(why) = program("acpx") {
        interop::skip_without_peer(&why);
        return;
    }
    let dirs = AgentDirs::new();
    // A port nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a loopback port")
        .port();
    let url = format!("ws://127.0.0.1:{port}/acp");
    let mut env = dirs.bridge_env(&dirs.project("audit").join("bridge.jsonl"));
    env.push(("AGENTACP_BRIDGE_CONNECT", url.clone().into()));
    let output = acpx(&dirs, &env, &example_binary("governance-bridge"), &[], "hi");
    assert_ne!(output.status.and_then(|s| s.code()), Some(0), "{}", show(&output));
    let said = format!("governance-bridge cannot reach the agent at {url}: ");
    assert!(
        output.stdout.contains(&said) || output.stderr.contains(&said),
        "{}",
        show(&output)
    );
}
