//! Issue #50: `acp-client` built for Windows starts an agent that is a `.cmd` file — what npm
//! installs on Windows — under Wine, by its bare name (found with `PATH` and `PATHEXT`, as
//! `cmd.exe` would; the standard library alone looks for `agent.exe` only).
//!
//! The agent is `agent.cmd` in a folder whose path holds spaces: it writes its first argument
//! to `argument.txt`, starts `linger.exe` in the background (a program that sleeps ten
//! minutes and ignores its stdin, built here with mingw-w64), then runs the Windows build of
//! the echo server. Shown here:
//!
//! - initialize, a session and a prompt answered through the `.cmd` agent, its argument with
//!   spaces arriving whole; after the client ends, nothing of the agent's tree is left;
//! - an argument `cmd.exe` would read as its own syntax (`"` then `&`, or `%`: the BatBadBut
//!   class) refused in a sentence naming the agent and the argument's position, with nothing
//!   started (no `argument.txt`, no injected file, no process);
//! - the client killed outright (SIGKILL to its Wine process: none of its own clean-up runs)
//!   takes the agent's whole tree with it, `linger.exe` included: the Job Object the agent runs
//!   in is killed as its last handle closes.
//! - `terminal/*` (`examples/terminal_probe.rs`, the runtime's built-in terminals): a `.cmd`
//!   command's exit code, an unsafe argument refused, a kill, and a release ending what the
//!   command left running.
//!
//! Whether a process is left is read from Linux's process table: under Wine every Windows
//! process is a Linux process whose command line is its Windows one. Wine is not Windows (its
//! Job Objects and consoles are its own implementations): see docs/design/windows.md.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use test_support::wine::{self, Wine};

/// How long a process of the agent may take to appear or to be gone (a guard against a hang,
/// not a timing target: Wine starts a program in seconds on a loaded machine).
const GUARD: Duration = Duration::from_secs(60);

/// `linger.exe`: sleeps ten minutes, whatever its stdin does.
const LINGER_C: &str = "#include <windows.h>\nint main(void) { Sleep(600000); return 0; }\n";

/// Wine, the client's Windows build, and a scratch folder (with a space in its name) holding
/// the agent's folder `agent bin` (again with a space).
struct Setup {
    wine: Wine,
    client: PathBuf,
    scratch: tempfile::TempDir,
}

impl Setup {
    /// Everything built and written; `None` (after saying why, or failing under CI's flag)
    /// without Wine, mingw-w64 or the rustup target.
    fn new() -> Option<Setup> {
        let wine = Wine::start()?;
        let client = wine::build_for_windows("acp-client", None);
        let echo = wine::build_for_windows("echo-server", None);
        let scratch = tempfile::Builder::new()
            .prefix("acp cmd agent ")
            .tempdir()
            .expect("a scratch folder");
        let setup = Setup { wine, client, scratch };
        let bin = setup.bin();
        std::fs::create_dir(&bin).unwrap();
        std::fs::create_dir(setup.scratch.path().join("state")).unwrap();
        std::fs::copy(&echo, bin.join("echo-agent.exe")).unwrap();
        let source = setup.scratch.path().join("linger.c");
        std::fs::write(&source, LINGER_C).unwrap();
        let built = Command::new(wine::MINGW)
            .arg("-o")
            .arg(bin.join("linger.exe"))
            .arg(&source)
            .output()
            .expect("mingw-w64 runs");
        assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
        let folder = wine::windows_path(setup.scratch.path());
        let script = [
            "@echo off",
            r#">"%~dp0argument.txt" echo %~1"#,
            r#"start "" /b "%~dp0linger.exe""#,
            &format!(r#"set "AGENTACP_STATE_DIR={folder}\state""#),
            &format!(r#"set "AGENTACP_WORKSPACE_ROOT={folder}""#),
            r#""%~dp0echo-agent.exe""#,
        ];
        std::fs::write(bin.join("agent.cmd"), script.join("\r\n") + "\r\n").unwrap();
        // The terminal probe's command: prints its argument, leaves `linger.exe`, exits with 3.
        let probe = [
            "@echo off",
            "echo arg=%~1",
            r#"start "" /b "%~dp0linger.exe""#,
            "exit /b 3",
        ];
        std::fs::write(bin.join("probe.cmd"), probe.join("\r\n") + "\r\n").unwrap();
        Some(setup)
    }

    /// The agent's folder.
    fn bin(&self) -> PathBuf {
        self.scratch.path().join("agent bin")
    }

    /// `acp-client ARGS -- agent AGENT_ARGS` under Wine, the agent's folder on its `PATH`.
    fn client(&self, args: &[&str], agent_args: &[&str]) -> Command {
        let folder = wine::windows_path(self.scratch.path());
        let mut command = self.wine.command(&self.client);
        command
            .current_dir(self.scratch.path())
            .env("WINEPATH", wine::windows_path(&self.bin()))
            .env("AGENTACP_AUDIT_LOG", format!(r"{folder}\client-audit.jsonl"))
            .args(args)
            .args(["--cwd", &folder, "--", "agent"])
            .args(agent_args);
        command
    }

    /// The pids of the running processes of this setup's agent folder named `program`.
    fn running(&self, program: &str) -> Vec<u32> {
        let marker = self.scratch.path().file_name().unwrap().to_string_lossy().into_owned();
        let Ok(table) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        table
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let line = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let line = String::from_utf8_lossy(&line);
                line.contains(&marker) && line.contains(program)
            })
            .collect()
    }

    /// Waits (at most [`GUARD`]) until `done` holds; whether it did.
    fn eventually(&self, mut done: impl FnMut(&Setup) -> bool) -> bool {
        let deadline = Instant::now() + GUARD;
        while !done(self) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        true
    }

    /// Asserts that no process of the agent's tree runs (waiting for them to be gone).
    fn assert_nothing_left(&self, after: &str) {
        let gone = self
            .eventually(|setup| setup.running("linger.exe").is_empty() && setup.running("echo-agent.exe").is_empty());
        assert!(
            gone,
            "{after}, processes of the agent are left: linger.exe {:?}, echo-agent.exe {:?}",
            self.running("linger.exe"),
            self.running("echo-agent.exe")
        );
    }

    fn file(&self, name: &str) -> PathBuf {
        self.bin().join(name)
    }
}

fn stderr_of(output: &Output) -> String {
    wine::quiet(&String::from_utf8_lossy(&output.stderr))
}

#[test]
fn a_cmd_agent_found_by_its_bare_name_answers_a_prompt_and_leaves_nothing_behind() {
    let Some(setup) = Setup::new() else { return };
    let output = wine::output(&mut setup.client(&["--prompt", "hello from a batch file"], &["two words here"]));
    let stderr = stderr_of(&output);
    assert!(
        output.status.success(),
        "exit status {}; stderr:\n{stderr}",
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("hello from a batch file"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let argument = std::fs::read_to_string(setup.file("argument.txt")).expect("the agent wrote its argument");
    assert_eq!(argument.trim_end(), "two words here");
    setup.assert_nothing_left("after the client ended");
}

#[test]
fn an_argument_cmd_would_read_as_its_own_syntax_is_refused_and_nothing_runs() {
    let Some(setup) = Setup::new() else { return };
    let injected = format!(r"{}\injected.txt", wine::windows_path(setup.scratch.path()));
    let quote_then_command = format!(r#"x" & echo injected > "{injected}"#);
    for (arguments, position, character) in [
        (vec!["--model", quote_then_command.as_str()], 2, "\""),
        (vec!["100%PATH%"], 1, "%"),
    ] {
        let output = wine::output(&mut setup.client(&["--prompt", "hi"], &arguments));
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(1), "{arguments:?}: stderr:\n{stderr}");
        let said = format!("cannot start the agent `agent`: its argument {position} holds `{character}`");
        assert!(stderr.contains(&said), "{arguments:?}: not said ({said}):\n{stderr}");
        assert!(stderr.contains("agent.cmd"), "the batch file is named:\n{stderr}");
        assert!(stderr.contains("nothing was started"), "{stderr}");
        assert!(!setup.file("argument.txt").exists(), "{arguments:?}: the agent ran");
        assert!(
            !setup.scratch.path().join("injected.txt").exists(),
            "{arguments:?}: a command was injected"
        );
        assert!(setup.running("linger.exe").is_empty(), "{arguments:?}: the agent ran");
    }
}

#[test]
fn the_client_killed_outright_takes_the_agents_whole_tree_with_it() {
    let Some(setup) = Setup::new() else { return };
    // No `--prompt`: the client reads prompts from its stdin, kept open here.
    let mut client = setup
        .client(&[], &["running"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wine runs the client");
    let started = setup
        .eventually(|setup| !setup.running("linger.exe").is_empty() && !setup.running("echo-agent.exe").is_empty());
    if !started {
        let _ = client.kill();
        let output = client.wait_with_output().unwrap();
        panic!("the agent did not start; the client's stderr:\n{}", stderr_of(&output));
    }
    // SIGKILL to the client's Wine process: Windows' `TerminateProcess`, no clean-up of ours.
    client.kill().unwrap();
    client.wait().unwrap();
    setup.assert_nothing_left("after the client was killed");
}

/// `terminal/*` on Windows (`examples/terminal_probe.rs`, under Wine): a `.cmd` command found
/// by its bare name in the request's `PATH`, its argument with spaces whole, its exit code
/// reported (no signal); an argument with `"` refused with `-32602`; `terminal/kill` ending a
/// command with the Job Object's exit code 1; after `terminal/release`, what the batch file
/// left running (`linger.exe`) is gone while the client still runs.
#[test]
fn terminal_commands_run_in_a_job_of_their_own_and_release_ends_what_they_left() {
    let Some(setup) = Setup::new() else { return };
    let probe = wine::build_example_for_windows("acp-client", "terminal_probe");
    let mut running = (setup.wine.command(&probe))
        .current_dir(setup.scratch.path())
        .arg(wine::windows_path(setup.scratch.path()))
        .arg(wine::windows_path(&setup.bin()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wine runs the probe");
    let stdout = running.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut said = Vec::new();
    while said.last().is_none_or(|line: &String| line != "released") {
        match lines.recv_timeout(GUARD) {
            Ok(line) => said.push(line),
            Err(_) => {
                let _ = running.kill();
                let output = running.wait_with_output().unwrap();
                panic!(
                    "the probe stopped early; it said {said:?}; stderr:\n{}",
                    stderr_of(&output)
                );
            }
        }
    }
    assert_eq!(said[0], "exit=Some(3) signal=None", "{said:?}");
    assert_eq!(said[1], "output=arg=two words", "{said:?}");
    assert!(
        said[2].starts_with("refused=-32602 cannot run `probe`: its argument 1 holds `\"`, which the batch file"),
        "{said:?}"
    );
    assert_eq!(said[3], "killed=Some(1) signal=None", "{said:?}");
    setup.assert_nothing_left("after the terminals were released");
    drop(running.stdin.take());
    let status = running.wait().unwrap();
    assert!(status.success(), "{status}");
}
