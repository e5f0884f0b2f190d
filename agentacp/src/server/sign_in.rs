//! Signing in over stdio: the methods a server's manifest declares in `metadata.agentacp.auth`
//! (docs/editors.md, "The ACP registry"; docs/manifest.md).
//!
//! - `type: agent`: the client calls `authenticate` with the method's id on the running agent;
//!   the operator's `authenticate` signs the user in (and may keep the credential in its
//!   [`CredentialFile`](super::CredentialFile)). The connection is signed in once it answers.
//! - `type: terminal`: the client runs the agent's program again, with the method's `args`, in
//!   a terminal. [`sign_in_if_asked`] (called first by [`Serve`](super::Serve)) sees those
//!   arguments, calls the operator's `sign_in`, stores the credential it returns in the
//!   operator's [`CredentialFile`](super::CredentialFile), and the program exits `0`
//!   (anything else is a failure).
//!
//! A connection whose operator declares sign-in methods is refused every request but
//! `initialize` and `authenticate` (`-32000`, auth required) until it is signed in: this
//! connection's `authenticate` succeeded, or the credential file holds a credential. A
//! WebSocket listener with tokens offers its bearer method instead (`access`), unchanged.

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::jsonrpc::{RpcError, codes};
use crate::surface::{SignIn, SignInKind};

use super::Operator;

/// When this process was started for a terminal sign-in (its arguments are exactly a declared
/// `terminal` method's `args`): runs the operator's `sign_in` for that method, stores the
/// credential, and returns `Some` with how it went (the program then exits, `0` on success).
/// `None` at once otherwise. [`Serve`](super::Serve) calls it first; a `main` that reads its
/// own arguments calls it before it does.
pub async fn sign_in_if_asked<O: Operator>(operator: &O) -> Option<Result<()>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    sign_in_for_args(operator, &args).await
}

/// [`sign_in_if_asked`] for the program arguments `args` (without the program's name).
pub async fn sign_in_for_args<O: Operator>(operator: &O, args: &[String]) -> Option<Result<()>> {
    let method = terminal_method(O::spec().surface.sign_in, args)?;
    Some(run_terminal_sign_in(operator, method).await)
}

/// The declared terminal method whose `args` are exactly `args`.
fn terminal_method(methods: &'static [SignIn], args: &[String]) -> Option<&'static SignIn> {
    methods
        .iter()
        .find(|method| method.kind == SignInKind::Terminal && !method.args.is_empty() && method.args == args)
}

/// Runs the operator's `sign_in` for `method` and stores what it returns.
async fn run_terminal_sign_in<O: Operator>(operator: &O, method: &SignIn) -> Result<()> {
    let (Some(signing_in), Some(file)) = (operator.sign_in(method.id), operator.credential_file()) else {
        return Err(Error::msg(format!(
            "the sign-in method `{}` is declared, but this operator does not implement `sign_in`",
            method.id
        )));
    };
    let credential = signing_in.await?;
    file.store(&credential).map_err(|error| {
        Error::msg(format!(
            "cannot store the credential in {}: {error}",
            file.path().display()
        ))
    })?;
    tracing::info!(method = method.id, file = %file.path().display(), "signed in");
    Ok(())
}

/// The `authMethods` of an `initialize` answer over stdio: every declared method, the terminal
/// ones only to a client that runs them (`clientCapabilities.auth.terminal`, or the older
/// `_meta["terminal-auth"]` the ACP registry's check sends).
pub(crate) fn advertised(methods: &[SignIn], client_capabilities: Option<&Value>) -> Value {
    let terminal = client_capabilities.is_some_and(|caps| {
        caps.pointer("/auth/terminal") == Some(&Value::Bool(true))
            || caps
                .pointer("/_meta/terminal-auth")
                .is_some_and(|v| v == &Value::Bool(true))
    });
    let offered = methods
        .iter()
        .filter(|method| terminal || method.kind == SignInKind::Agent)
        .map(SignIn::to_json);
    Value::Array(offered.collect())
}

/// The `authenticate` of a declared method, checked: `Ok` for an `agent` method; `-32602` for
/// a terminal one (the client runs it, never sends it here) or an unknown id.
pub(crate) fn check_method(methods: &[SignIn], params: &Value) -> std::result::Result<(), RpcError> {
    let id = params.get("methodId").and_then(Value::as_str).unwrap_or_default();
    match methods.iter().find(|method| method.id == id) {
        Some(method) if method.kind == SignInKind::Agent => Ok(()),
        Some(method) => Err(RpcError::new(
            codes::INVALID_PARAMS,
            format!(
                "the sign-in method `{id}` runs in a terminal (the program with `{}`), not through `authenticate`",
                method.args.join(" ")
            ),
        )),
        None => {
            let known: Vec<&str> = methods.iter().map(|m| m.id).collect();
            Err(RpcError::new(
                codes::INVALID_PARAMS,
                format!(
                    "unknown authentication method `{id}`: this agent offers `{}`",
                    known.join("`, `")
                ),
            ))
        }
    }
}

/// The `-32000` refusal of `method` before the user signed in, with the methods in `data`.
pub(crate) fn required(method: &str, methods: &[SignIn]) -> RpcError {
    let offered: Vec<Value> = methods.iter().map(SignIn::to_json).collect();
    let mut error = RpcError::new(
        codes::AUTH_REQUIRED,
        format!("`{method}` needs you to sign in first: use one of the `authMethods` of `initialize`"),
    );
    error.data = Some(json!({"authMethods": offered}));
    error
}
