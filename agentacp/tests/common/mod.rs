//! The client end of a server served in process over in-memory pipes (one each way, like a
//! child process's stdin and stdout: dropping the writing end is end of input). Shared by the
//! raw-wire runtime tests; every wait is bounded by [`WAIT`].

#![allow(dead_code, reason = "each test file uses a part of the harness")]

pub mod listening;

use std::time::Duration;

use agentacp::server::{self, Operator, ServerOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::task::JoinHandle;

/// `Keeper`, the operator of tests/operators/test-unknown-session/ACP.md: every method that
/// names a session declared, each answered as simply as it can be (the tests look at what
/// the runtime does around it).
#[macro_export]
macro_rules! keeper_operator {
    () => {
        #[acp_operator(manifest = "tests/operators/test-unknown-session/ACP.md")]
        struct Keeper;

        /// Answers everything: what is checked here is the runtime's answer before the operator.
        impl KeeperServer for Keeper {
            async fn prompt(
                &self,
                _turn: &mut Turn<'_, GovernanceAware>,
                _request: wire::PromptRequest,
            ) -> Result<wire::StopReason> {
                Ok(wire::StopReason::EndTurn)
            }

            async fn load_session(
                &self,
                _session: &SessionContext,
                _request: wire::LoadSessionRequest,
            ) -> Result<wire::LoadSessionResponse> {
                Ok(wire::LoadSessionResponse::default())
            }

            async fn set_mode(
                &self,
                _session: &SessionContext,
                _request: wire::SetSessionModeRequest,
            ) -> Result<wire::SetSessionModeResponse> {
                Ok(wire::SetSessionModeResponse::default())
            }

            async fn set_config_option(
                &self,
                _session: &SessionContext,
                _request: wire::SetSessionConfigOptionRequest,
            ) -> Result<wire::SetSessionConfigOptionResponse> {
                Ok(wire::SetSessionConfigOptionResponse::new(Vec::new()))
            }

            async fn extension(&self, _method: &str, params: serde_json::Value) -> Result<serde_json::Value> {
                Ok(params)
            }
        }
    };
}

/// Implements a server handler trait whose `prompt` says `ok` and ends the turn and whose
/// `load_session` loads: for tests about what the runtime does around the operator.
#[macro_export]
macro_rules! ok_server {
    ($handler:ident for $operator:ident, $tier:ty) => {
        impl $handler for $operator {
            async fn prompt(
                &self,
                turn: &mut Turn<'_, $tier>,
                _request: wire::PromptRequest,
            ) -> Result<wire::StopReason> {
                turn.message("ok").await?;
                Ok(wire::StopReason::EndTurn)
            }

            async fn load_session(
                &self,
                _session: &SessionContext,
                _request: wire::LoadSessionRequest,
            ) -> Result<wire::LoadSessionResponse> {
                Ok(wire::LoadSessionResponse::default())
            }
        }
    };
}

/// The methods a `test-remote` operator (tests/operators/test-remote/ACP.md) answers with
/// nothing: `session/load`, extensions, `authenticate`; inside its handler's `impl`.
#[macro_export]
macro_rules! remote_no_ops {
    () => {
        async fn load_session(
            &self,
            _session: &SessionContext,
            _request: wire::LoadSessionRequest,
        ) -> Result<wire::LoadSessionResponse> {
            Ok(wire::LoadSessionResponse::default())
        }

        async fn extension(&self, _method: &str, _params: Value) -> Result<Value> {
            Ok(json!({}))
        }

        async fn extension_notification(&self, _method: &str, _params: Value) -> Result<()> {
            Ok(())
        }

        async fn authenticate(&self, _request: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
            Ok(wire::AuthenticateResponse::default())
        }
    };
}

/// Declares `Remote`, the `test-remote` operator (tests/operators/test-remote/ACP.md) whose
/// prompt is [`listening::scripted_prompt`] and whose other methods do nothing
/// ([`remote_no_ops!`]): the server of the remote tests.
#[macro_export]
macro_rules! scripted_remote {
    () => {
        #[acp_operator(manifest = "tests/operators/test-remote/ACP.md")]
        struct Remote;

        impl RemoteServer for Remote {
            async fn prompt(
                &self,
                turn: &mut Turn<'_, GovernanceAware>,
                request: wire::PromptRequest,
            ) -> Result<wire::StopReason> {
                common::listening::scripted_prompt(turn, request).await
            }

            remote_no_ops!();
        }
    };
}

/// Every wait on the server is bounded: a broken server fails the test, it does not hang it.
pub const WAIT: Duration = Duration::from_secs(10);

/// Raw JSON-RPC lines to and from a server running in this process.
pub struct Pipe {
    writer: DuplexStream,
    lines: Lines<BufReader<DuplexStream>>,
    server: JoinHandle<agentacp::Result<()>>,
    next_id: i64,
}

impl Pipe {
    /// Serves `operator` with `options` on a fresh pair of pipes.
    pub fn serve(operator: impl Operator, options: ServerOptions) -> Pipe {
        let (writer, server_read) = tokio::io::duplex(1 << 16);
        let (server_write, read) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(server::serve(operator, options, server_read, server_write));
        Pipe {
            writer,
            lines: BufReader::new(read).lines(),
            server,
            next_id: 100,
        }
    }

    /// Sends one message as a line.
    pub async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    /// Sends bytes as they are.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
    }

    /// The next message from the server.
    pub async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("the server answered in time")
            .unwrap()
            .expect("the server is still writing");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Sends a request; returns its id.
    pub async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a request and returns (messages before the answer, the answer).
    pub async fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.request(method, params).await;
        self.until_answer(id).await
    }

    /// The messages up to the answer to `id`, and the answer.
    pub async fn until_answer(&mut self, id: i64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                return (before, message);
            }
            before.push(message);
        }
    }

    /// Answers the server's request `request` with `result`.
    pub async fn answer(&mut self, request: &Value, result: Value) {
        let id = request["id"].clone();
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result})).await;
    }

    /// `session/prompt` with one text block; returns its id.
    pub async fn prompt(&mut self, session: &str, text: &str) -> i64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// What `serve` returned, waiting for it (with the input still open).
    pub async fn ended(&mut self) -> agentacp::Result<()> {
        tokio::time::timeout(WAIT, &mut self.server)
            .await
            .expect("serve returned")
            .expect("the server task did not panic")
    }

    /// Reads until end of file; whether that came in time.
    pub async fn drained(&mut self) -> bool {
        tokio::time::timeout(WAIT, async { while let Ok(Some(_)) = self.lines.next_line().await {} })
            .await
            .is_ok()
    }

    /// Closes the input and waits for `serve` to return `Ok`.
    pub async fn finish(self) {
        let Pipe { writer, server, .. } = self;
        drop(writer);
        tokio::time::timeout(WAIT, server)
            .await
            .expect("serve returned after end of input")
            .unwrap()
            .unwrap();
    }
}

/// The text of every message chunk among `messages`.
pub fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str().map(str::to_string))
        .collect()
}
