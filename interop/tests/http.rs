//! Issue #47: the official Rust SDK's Streamable HTTP client (`agent-client-protocol-http` 5,
//! `HttpClient`) drives `examples/governed-server`, run as a process with `--listen`: the
//! `/acp` endpoint that serves WebSocket serves Streamable HTTP too (POST, SSE streams,
//! DELETE), and the same client's WebSocket profile on that endpoint. A prompt streams its
//! updates, a permission request is answered (over a POST), a running turn is cancelled;
//! with tokens, the bearer on every request is the identity.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{InitializeRequest, NewSessionRequest};
use agent_client_protocol_http::HttpClient;
use interop::websocket::{WsServer, test_token};
use interop::{AgentDirs, example_binary};
use tokio::sync::mpsc;

#[path = "common/official_http.rs"]
mod official_http;
use official_http::{Script, check, converse, with_client};

/// The server's base URL for the HTTP client (it adds `/acp`).
fn base_url(server: &WsServer) -> String {
    server
        .url()
        .replace("ws://", "http://")
        .trim_end_matches("/acp")
        .to_string()
}

/// An echo, a governed write (its permission answered "allow once") and a cancelled turn.
const GOVERNED: Script<'static> = Script {
    echo: "hello over http",
    echoed: "hello over http",
    permission: Some("/tool write-file {\"path\": \"note.txt\", \"content\": \"hi\"}"),
    forever: "/forever",
    started: "tick",
};

/// Drives [`GOVERNED`] through `http`; fails naming `profile` and the server's stderr.
async fn prompts_answers_a_permission_and_cancels(
    http: HttpClient,
    project: PathBuf,
    server: &WsServer,
    profile: &str,
) {
    let (outcome, seen) = converse(http, project, &GOVERNED).await;
    check(
        outcome,
        &seen,
        &GOVERNED,
        &format!("{profile}\n--- server stderr\n{}", server.stderr_text()),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_http_client_prompts_answers_a_permission_and_cancels() {
    let dirs = AgentDirs::new();
    let server = WsServer::start(&example_binary("governed-server"), &dirs.env());
    let http = HttpClient::new(base_url(&server)).expect("a valid URL");
    prompts_answers_a_permission_and_cancels(http, dirs.project("p"), &server, "Streamable HTTP").await;
    // Its WebSocket profile, on the same endpoint.
    let websocket = HttpClient::new(base_url(&server).replace("http://", "ws://")).expect("a valid URL");
    prompts_answers_a_permission_and_cancels(websocket, dirs.project("q"), &server, "WebSocket").await;
    assert!(!server.stderr_text().contains("panicked"), "{}", server.stderr_text());
}

/// With tokens, the bearer token on every request is who the connection is; a wrong one is
/// refused before anything reaches the operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_the_bearer_on_each_request_is_the_identity_and_a_wrong_one_is_refused() {
    let dirs = AgentDirs::new();
    let project: PathBuf = dirs.project("p");
    let token = test_token();
    let mut env = dirs.env();
    env.push(("AGENTACP_TOKEN", token.clone().into()));
    env.push(("AGENTACP_TOKEN_IDENTITY", "http-runner".into()));
    let server = WsServer::start(&example_binary("governed-server"), &env);
    let client = |token: &str| {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {token}").parse().expect("a header value"),
        );
        HttpClient::builder(base_url(&server))
            .configure_http(|http| http.default_headers(headers))
            .build()
            .expect("a client")
    };
    let (ticks, _) = mpsc::unbounded_channel();
    let session = with_client(client(&token), Arc::default(), ticks.clone(), async move |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        Ok(cx
            .send_request(NewSessionRequest::new(project))
            .block_task()
            .await?
            .session_id)
    })
    .await;
    assert!(session.is_ok(), "{session:?}\n{}", server.stderr_text());

    let refused = with_client(client("not-the-token"), Arc::default(), ticks, async move |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await
    })
    .await;
    let error = format!("{:?}", refused.expect_err("a wrong token is refused"));
    assert!(error.contains("401"), "{error}");
}
