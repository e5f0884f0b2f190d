//! The official ACP TypeScript SDK (`@agentclientprotocol/sdk`, pinned in `interop/ts`) drives
//! `echo-server` and `governed-server` over stdio through `interop/ts/scenario.mjs`:
//! handshake, a 1000-chunk stream, cancellation, a cwd outside the workspace root, and (for
//! `governed-server`) approved, rejected, denied and read-only tool calls, the server's
//! operator using this editor's files and terminal (`turn.editor()`), and the session surface
//! its manifest declares in `metadata.agentacp` (modes, the model option, `/summary`,
//! `_governed/status`, `session/list`, `close`, a second `close` that the SDK takes as done
//! (the agent's `-32002`), `resume`).
//!
//! The same scenario, with only the transport changed, over a WebSocket to `governed-server
//! --listen` (docs/remote.md): once through the SDK's `ndJsonStream` over a `ws` socket with the
//! token in the `Authorization` header, once through the SDK's own `createWebSocketStream`
//! without it (`session/new` refused `-32000`, then `authenticate` with the token in `_meta`);
//! both first see a wrong token refused `401` and a foreign `Origin` `403`, and the audit log
//! then names the token's identity in every record of the connection. The SDK's
//! `createWebSocketStream` also runs with the token in the header.
//!
//! Issue #47: the same scenario over Streamable HTTP on the same `/acp` endpoint, through the
//! SDK's `createHttpStream` (`experimental/http-client`), with the token in `Authorization` on
//! every request or with `authenticate`; every request it made must have been answered as the
//! RFD says (`initialize` 200, other POSTs 202, SSE GETs 200, DELETE 202).
//!
//! Skipped, saying so, when `node` is not on `PATH` or `npm ci --prefix interop/ts` has not
//! been run (`interop/ts/node_modules` is absent).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use interop::audit::check_identity_in_audit_log;
use interop::websocket::{WsServer, test_token};

/// The whole scenario must finish within this; the script's own steps time out after 30 s each.
const DEADLINE: Duration = Duration::from_secs(300);

fn ts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ts")
}

/// Why the TypeScript side cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => return Some("`node` is not on PATH".to_owned()),
    }
    let sdk = ts_dir().join("node_modules/@agentclientprotocol/sdk");
    if !sdk.is_dir() {
        return Some(format!(
            "{} is absent (run `npm ci --prefix interop/ts`)",
            sdk.display()
        ));
    }
    None
}

/// The steps every run prints.
const STEPS: [&str; 6] = [
    "initialize",
    "session/new",
    "stream",
    "cancel",
    "after-cancel",
    "cwd-outside",
];
/// The steps only `--governed` runs print.
const GOVERNED_STEPS: [&str; 16] = [
    "tool-approved",
    "tool-rejected",
    "tool-denied",
    "tool-read",
    "editor-read",
    "editor-write",
    "editor-run",
    "set-mode",
    "set-config-option",
    "slash-command",
    "mode-update",
    "extension",
    "session-list",
    "session-close",
    "session-close-twice",
    "session-resume",
];

/// Runs `scenario.mjs` against the binary `name` over its stdio and asserts that every step
/// passed, each one it should run reported `ok`.
fn run_scenario(name: &str, governed: bool) {
    if let Some(why) = skip_reason() {
        interop::skip_without_peer(&why);
        return;
    }
    let binary = interop::example_binary(name);

    let dirs = interop::AgentDirs::new();
    let cwd = dirs.workspace_root.join("project");
    std::fs::create_dir(&cwd).expect("create the session cwd");

    let mut command = Command::new("node");
    command
        .arg(ts_dir().join("scenario.mjs"))
        .arg(&binary)
        .current_dir(ts_dir())
        .envs(dirs.env())
        .env("SCENARIO_CWD", &cwd)
        .env("SCENARIO_OUTSIDE", dirs.outside())
        .env("SCENARIO_AGENT_NAME", name);
    if governed {
        command.arg("--governed");
    }
    let extra: &[&str] = if governed { &GOVERNED_STEPS } else { &[] };
    run_and_check(&mut command, extra, String::new);
}

/// Runs the prepared `node scenario.mjs …` to its end and asserts that it passed and printed
/// `ok` for every step of [`STEPS`], `extra` and `shutdown`. `server_stderr` is shown on failure.
fn run_and_check(command: &mut Command, extra: &[&str], server_stderr: impl Fn() -> String) {
    let args: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let interop::ScriptOutput { status, stdout, stderr } = interop::run_script(command, DEADLINE);
    let server = server_stderr();
    let report = format!(
        "node {}\n--- stdout\n{stdout}--- stderr\n{stderr}---{}",
        args.join(" "),
        if server.is_empty() {
            String::new()
        } else {
            format!("\n--- server stderr\n{server}---")
        }
    );
    match status {
        None => panic!("the scenario did not finish within {DEADLINE:?}\n{report}"),
        Some(status) if !status.success() => panic!("the scenario failed ({status})\n{report}"),
        Some(_) => eprintln!("{report}"),
    }
    for step in STEPS.iter().chain(extra).chain(&["shutdown"]) {
        assert!(
            stdout
                .lines()
                .any(|line| line == format!("ok {step}") || line.starts_with(&format!("ok {step} "))),
            "no `ok {step}` line\n{report}"
        );
    }
    assert!(!stdout.contains("FAIL"), "{report}");
}

/// The identity `governed-server` gives the token in the WebSocket tests.
const IDENTITY: &str = "ts-editor";

/// How the scenario reaches `governed-server --listen`.
#[derive(Debug, Clone, Copy)]
enum Remote {
    /// Over a WebSocket; `stream` is `ndjson` or `sdk` (see `scenario.mjs`).
    WebSocket { stream: &'static str },
    /// Over Streamable HTTP, through the SDK's `createHttpStream`.
    Http,
}

/// Runs the governed scenario against `governed-server --listen` over `remote` (`auth`:
/// `header` or `authenticate`), then checks that the audit log names [`IDENTITY`] in every
/// record of the connection.
fn run_remote(remote: Remote, auth: &str) {
    if let Some(why) = skip_reason() {
        interop::skip_without_peer(&why);
        return;
    }
    let ws = ts_dir().join("node_modules/ws");
    if matches!(remote, Remote::WebSocket { .. }) && !ws.is_dir() {
        interop::skip_without_peer(&format!(
            "{} is absent (run `npm ci --prefix interop/ts`)",
            ws.display()
        ));
        return;
    }
    let binary = interop::example_binary("governed-server");
    let dirs = interop::AgentDirs::new();
    let cwd = dirs.project("project");
    let token = test_token();
    let mut env = dirs.env();
    env.push(("AGENTACP_TOKEN", token.clone().into()));
    env.push(("AGENTACP_TOKEN_IDENTITY", IDENTITY.into()));
    let mut server = WsServer::start(&binary, &env);

    let mut command = Command::new("node");
    command.arg(ts_dir().join("scenario.mjs"));
    match remote {
        Remote::WebSocket { stream } => command
            .arg(format!("--ws={}", server.url()))
            .arg(format!("--stream={stream}")),
        Remote::Http => command.arg(format!("--http={}", server.url().replacen("ws://", "http://", 1))),
    };
    command
        .arg(format!("--auth={auth}"))
        .arg("--governed")
        .current_dir(ts_dir())
        .env("SCENARIO_TOKEN", &token)
        .env("SCENARIO_CWD", &cwd)
        .env("SCENARIO_OUTSIDE", dirs.outside())
        .env("SCENARIO_AGENT_NAME", "governed-server");
    let mut extra = vec!["refused-wrong-token", "refused-origin", "connect"];
    if auth == "authenticate" {
        extra.extend(["auth-required", "authenticate"]);
    }
    if matches!(remote, Remote::Http) {
        extra.push("http-exchanges");
    }
    extra.extend(GOVERNED_STEPS);
    run_and_check(&mut command, &extra, || server.stderr_text());
    assert!(
        server.is_running(),
        "the server exited when its client left\n--- server stderr\n{}",
        server.stderr_text()
    );
    check_identity_in_audit_log(&dirs.audit_log, IDENTITY);
}

#[test]
fn echo_server_with_the_typescript_sdk() {
    run_scenario("echo-server", false);
}

#[test]
fn governed_server_with_the_typescript_sdk() {
    run_scenario("governed-server", true);
}

#[test]
fn governed_server_over_websocket_with_the_token_in_the_header() {
    run_remote(Remote::WebSocket { stream: "ndjson" }, "header");
}

#[test]
fn governed_server_over_websocket_with_the_sdk_client_and_the_token_in_the_header() {
    run_remote(Remote::WebSocket { stream: "sdk" }, "header");
}

#[test]
fn governed_server_over_websocket_with_authenticate() {
    run_remote(Remote::WebSocket { stream: "sdk" }, "authenticate");
}

/// Issue #47: the SDK's Streamable HTTP client (`experimental/http-client`,
/// `createHttpStream`) with the token in `Authorization` on every request.
#[test]
fn governed_server_over_streamable_http_with_the_token_in_the_header() {
    run_remote(Remote::Http, "header");
}

/// The same client without a token on its requests: `authenticate` with the token in `_meta`.
#[test]
fn governed_server_over_streamable_http_with_authenticate() {
    run_remote(Remote::Http, "authenticate");
}
