//! A governance bridge (`kind: bridge`): the editor starts
//! `governance-bridge [--pass-env NAME]... [-- AGENT ARGS...]` as its agent (or connects to
//! `governance-bridge --listen HOST:PORT` over WebSocket or Streamable HTTP; `--connect URL`
//! relays to a remote agent, `ws(s)://` or `http(s)://`, instead of starting one: see `--help`); the bridge starts the agent (default: the `governed-server` example beside
//! this binary) and relays the session, gating tool calls by `OPERATOR.md` + `GOVERNANCE.md`
//! and auditing both directions in `audit/bridge.jsonl` of its state folder (or
//! `$AGENTACP_AUDIT_LOG`).
//!
//! The agent gets a cleared environment plus `PATH`, `HOME`, ... and the `AGENTACP_*` settings
//! it needs: `AGENTACP_WORKSPACE_ROOT`, `AGENTACP_STATE_DIR`, and `AGENTACP_DOWNSTREAM_AUDIT_LOG`
//! as its `AGENTACP_AUDIT_LOG`. An agent that reads its key from the environment needs it
//! named: `--pass-env OPENAI_API_KEY` (repeatable), or `AGENTACP_BRIDGE_PASS_ENV` (names
//! separated by commas or spaces).

use std::net::SocketAddr;
use std::path::PathBuf;

use agentacp::bridge::listen::BridgeListener;
use agentacp::bridge::{BridgeOptions, DEFAULT_TOKEN_ENV, RunBridge, TOKEN_ENV_VAR, token_from_env};
use agentacp::client::AgentCommand;
use agentacp::prelude::*;
use agentacp::server::websocket::ListenOptions;
use agentacp::websocket::Dial;

/// The bridge: which agent to start.
#[acp_operator(manifest = "ACP.md")]
pub struct Gatekeeper {
    agent: Vec<String>,
    /// `--pass-env` names.
    pass_env: Vec<String>,
}

impl GatekeeperBridge for Gatekeeper {
    fn downstream(&self) -> AgentCommand {
        let (program, args) = match self.agent.split_first() {
            Some((program, args)) => (PathBuf::from(program), args.to_vec()),
            None => (beside_this_binary("governed-server"), Vec::new()),
        };
        let mut command = AgentCommand::new(program)
            .args(args)
            .allow_env("AGENTACP_WORKSPACE_ROOT")
            .allow_env("AGENTACP_STATE_DIR")
            .allow_env("AGENTACP_LOG");
        for name in &self.pass_env {
            command = command.allow_env(name);
        }
        if let Some(log) = std::env::var_os("AGENTACP_DOWNSTREAM_AUDIT_LOG") {
            command = command.env("AGENTACP_AUDIT_LOG", log);
        }
        command
    }
}

fn beside_this_binary(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

const USAGE: &str = "\
usage: governance-bridge [OPTIONS] [--] [AGENT ARGS...]

An AIP-44 governance bridge: the editor talks ACP to it (over stdio, or over WebSocket or
Streamable HTTP with --listen); it relays to the agent, gating tool calls by OPERATOR.md +
GOVERNANCE.md and auditing both directions.

The agent (downstream):
  AGENT ARGS...        the agent to start (default: the governed-server example beside
                       this binary), with a cleared environment
  --pass-env NAME      pass the variable NAME through to the agent (repeatable; also
                       AGENTACP_BRIDGE_PASS_ENV)
  --connect URL        dial a remote agent instead of starting one (also
                       AGENTACP_BRIDGE_CONNECT): over WebSocket, ws://HOST:PORT/acp or
                       wss://..., or over Streamable HTTP, http://HOST:PORT/acp or
                       https://... Its bearer token, read from the variable --token-env
                       names, is sent on the WebSocket upgrade, or on every HTTP request
  --token-env NAME     the environment variable holding the remote agent's token (default
                       AGENTACP_BRIDGE_TOKEN_ENV, else AGENTACP_TOKEN). A token is never
                       taken from the command line. Named here, it must be set

The editor (upstream):
  (default)            stdio: the editor starts this program as its agent
  --listen HOST:PORT   serve remote editors over WebSocket at ws://HOST:PORT/acp (and
                       Streamable HTTP at http://HOST:PORT/acp), one bridge and one agent
                       per connection. Tokens: AGENTACP_TOKEN (one) or
                       AGENTACP_TOKENS_FILE; without them only a loopback address may be
                       used. With tokens, every connection must send one on the upgrade
                       (`Authorization: Bearer <token>`): this bridge has no `authenticate`
                       step, so a connection without one is refused (-32000) and a wrong one
                       gets 401. TLS: AGENTACP_TLS_CERT and AGENTACP_TLS_KEY. With both
                       --listen and --connect, use --token-env so the two tokens differ

Other settings (timeouts, audit log, state dir) come from the AGENTACP_* variables.
";

/// What the command line asks for.
struct Args {
    gatekeeper: Gatekeeper,
    /// `--listen`: serve editors over WebSocket and Streamable HTTP here.
    listen: Option<SocketAddr>,
    /// `--connect`: the remote agent.
    connect: Option<String>,
    /// `--token-env`: the variable holding the remote agent's token.
    token_env: Option<String>,
    /// `--help`.
    help: bool,
}

/// `[--pass-env NAME]... [--connect URL] [--token-env NAME] [--listen HOST:PORT] [--] [AGENT ARGS...]`
/// (each also as `--flag=value`).
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut pass_env = Vec::new();
    let mut agent = Vec::new();
    let (mut listen, mut connect, mut token_env, mut help) = (None, None, None, false);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone() {
                Some(value) => Ok(value),
                None => args.next().ok_or(format!("{flag} needs {what}")),
            }
        };
        match flag.as_str() {
            "--pass-env" => pass_env.push(value("a variable name")?),
            "--connect" => {
                connect = Some(value(
                    "a URL (ws://HOST:PORT/acp, http://HOST:PORT/acp, wss://... or https://...)",
                )?)
            }
            "--token-env" => token_env = Some(value("a variable name")?),
            "--listen" => {
                let addr = value("HOST:PORT")?.replace("localhost:", "127.0.0.1:");
                listen = Some(
                    addr.parse()
                        .map_err(|_| format!("--listen wants HOST:PORT, e.g. 127.0.0.1:8765 (got `{addr}`)"))?,
                );
            }
            "-h" | "--help" => help = true,
            _ => {
                if arg != "--" {
                    agent.push(arg);
                }
                agent.extend(args);
                break;
            }
        }
    }
    let bad_name = |name: &String| name.is_empty() || name.contains('=');
    if pass_env.iter().any(bad_name) {
        return Err("--pass-env takes a variable name".into());
    }
    if token_env.as_ref().is_some_and(bad_name) {
        return Err("--token-env takes a variable name (the token itself is never given on the command line)".into());
    }
    if connect.is_some() && !agent.is_empty() {
        return Err("give either --connect URL or an agent command, not both".into());
    }
    Ok(Args {
        gatekeeper: Gatekeeper { agent, pass_env },
        listen,
        connect,
        token_env,
        help,
    })
}

/// The bridge's options: the `AGENTACP_*` variables, with `--connect` / `--token-env` on top.
fn bridge_options(args: &Args) -> Result<BridgeOptions, String> {
    let mut options = BridgeOptions::from_env();
    let url = args
        .connect
        .clone()
        .or_else(|| options.connect.as_ref().map(|dial| dial.url.clone()));
    if let Some(url) = url {
        if Dial::new(&url).transport().is_err() {
            return Err(format!(
                "--connect wants a ws://, wss://, http:// or https:// URL (got `{url}`)"
            ));
        }
        let token = match &args.token_env {
            Some(name) => Some(token_from_env(name).ok_or(format!("--token-env {name}: the variable is not set"))?),
            None => {
                let name = std::env::var(TOKEN_ENV_VAR).unwrap_or_else(|_| DEFAULT_TOKEN_ENV.to_string());
                token_from_env(&name)
            }
        };
        let dial = Dial::new(url);
        options.connect = Some(match token {
            Some(token) => dial.token(token),
            None => dial,
        });
    } else if let Some(name) = &args.token_env {
        return Err(format!(
            "--token-env {name} names the remote agent's token: it needs --connect URL (or AGENTACP_BRIDGE_CONNECT)"
        ));
    }
    Ok(options)
}

fn main() -> std::process::ExitCode {
    let fail = |error: String| {
        eprintln!("governance-bridge: {error}");
        std::process::ExitCode::from(2)
    };
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(error) => return fail(format!("{error}\n(see --help)")),
    };
    if args.help {
        // stdout is the ACP channel when an editor runs us; `--help` is for a person.
        let _ = std::io::Write::write_all(&mut std::io::stdout(), USAGE.as_bytes());
        return std::process::ExitCode::SUCCESS;
    }
    let options = match bridge_options(&args) {
        Ok(options) => options,
        Err(error) => return fail(error),
    };
    let result = match args.listen {
        Some(addr) => listen(args.gatekeeper, options, addr),
        None => args.gatekeeper.run_stdio_with(options),
    };
    // What an agent left behind, even outside its process group, was reparented to us (the
    // runtime is its subreaper): it ends with us.
    agentacp::process_tree::end_all_descendants(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("governance-bridge: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `--listen`: a bridge per connection (WebSocket or Streamable HTTP) until SIGTERM or Ctrl-C.
fn listen(gatekeeper: Gatekeeper, options: BridgeOptions, addr: SocketAddr) -> agentacp::Result<()> {
    agentacp::env::init_logging();
    let listen = ListenOptions::from_env(addr).map_err(agentacp::Error::msg)?;
    let runtime = tokio_runtime()?;
    runtime.block_on(async move {
        let listener = BridgeListener::bind(listen).await?;
        eprintln!("governance-bridge: listening on ws://{}/acp", listener.local_addr()?);
        listener.serve_until_signal(gatekeeper, options).await
    })
}

fn tokio_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        parse_args(args.iter().map(|arg| arg.to_string()))
    }

    #[test]
    fn connect_listen_and_token_env_are_read_and_the_token_never_from_argv() {
        let args = parse(&[
            "--connect",
            "wss://agents.example/acp",
            "--token-env=MY_TOKEN",
            "--listen",
            "localhost:8765",
        ])
        .unwrap();
        assert_eq!(args.connect.as_deref(), Some("wss://agents.example/acp"));
        assert_eq!(args.token_env.as_deref(), Some("MY_TOKEN"));
        assert_eq!(args.listen, Some("127.0.0.1:8765".parse().unwrap()));
        assert!(args.gatekeeper.agent.is_empty());
        // A value that is not a variable name (a token pasted by mistake) is refused.
        assert!(parse(&["--connect", "ws://h:1/acp", "--token-env", "abc=def"]).is_err());
        assert!(parse(&["--connect", "ws://h:1/acp", "--", "agent"]).is_err());
        assert!(parse(&["--listen", "nowhere"]).is_err());
        assert!(parse(&["--help"]).unwrap().help);
        // Without flags, everything is the agent's command line.
        let args = parse(&["--", "agent", "--connect", "x"]).unwrap();
        assert_eq!(args.gatekeeper.agent, ["agent", "--connect", "x"]);
    }

    /// Issue #47: a remote agent over Streamable HTTP as well as over WebSocket.
    #[test]
    fn connect_takes_websocket_and_streamable_http_urls() {
        for url in ["ws://h:1/acp", "wss://h/acp", "http://h:1/acp", "https://h/acp"] {
            let options = bridge_options(&parse(&["--connect", url]).unwrap()).unwrap();
            assert_eq!(options.connect.map(|dial| dial.url).as_deref(), Some(url));
        }
        let error = bridge_options(&parse(&["--connect", "h:1/acp"]).unwrap())
            .err()
            .unwrap();
        assert!(error.contains("http://"), "{error}");
        assert!(USAGE.contains("http://HOST:PORT/acp"));
    }

    #[test]
    fn a_token_env_naming_an_unset_variable_is_an_error() {
        let args = parse(&[
            "--connect",
            "ws://127.0.0.1:1/acp",
            "--token-env",
            "AGENTACP_TEST_SURELY_UNSET_TOKEN",
        ])
        .unwrap();
        let error = bridge_options(&args).expect_err("an unset token variable is refused");
        assert!(error.contains("AGENTACP_TEST_SURELY_UNSET_TOKEN"), "{error}");
        let args = parse(&["--connect", "ftp://example/acp"]).unwrap();
        assert!(bridge_options(&args).is_err());
        // Without a remote agent a token variable means nothing: said, not ignored.
        if std::env::var_os("AGENTACP_BRIDGE_CONNECT").is_none() {
            assert!(bridge_options(&parse(&["--token-env", "SOME_TOKEN"]).unwrap()).is_err());
        }
    }
}
