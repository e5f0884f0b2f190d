//! Pieces shared by the benchmarks (`benches/client_stream.rs` and `benches/stream.rs`).
//!
//! - [`sdk_stream`]: the official SDK client ([`SdkClient`]) consumes `/stream N SIZE` from an
//!   agent and counts the updates ([`sdk_stream_with_env`]: with variables added to the
//!   agent's environment).
//! - [`serde_pipe_limit`]: the limit of the medium — the same notifications serialised with
//!   serde_json into an OS pipe on one thread, read and parsed back line by line on another.
//! - [`chunk_notification`]: one `session/update` of `/stream`, as the official SDK's types,
//!   serialising to the JSON echo-server sends.
//! - [`raise_fd_limit`]: room for the many connections of the remote benchmarks.
//! - [`our_client_stream`]: our client (`agentacp::client::Client`, over any transport)
//!   consumes `/stream N SIZE` and checks every chunk.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use serde::{Deserialize, Serialize};

use crate::sdk::{Options, SdkClient};
use crate::{AgentDirs, AgentProcess, StderrMode, peak_rss_kib, stream_chunk};

/// A whole `session/update` JSON-RPC notification.
#[derive(Debug, Serialize, Deserialize)]
pub struct Notification {
    /// `"2.0"`.
    pub jsonrpc: String,
    /// `"session/update"`.
    pub method: String,
    /// The session and its update.
    pub params: SessionNotification,
}

/// Chunk `i` of `/stream N size` in `session`: an `agent_message_chunk` with the text
/// [`stream_chunk`]`(i, size)`.
pub fn chunk_notification(session: &str, i: usize, size: usize) -> Notification {
    Notification {
        jsonrpc: "2.0".to_string(),
        method: "session/update".to_string(),
        params: SessionNotification::new(
            session.to_string(),
            SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(stream_chunk(
                i, size,
            ))))),
        ),
    }
}

/// The limit program: serialises `updates` [`chunk_notification`]s (in `session`, of `size`
/// bytes) with serde_json into an OS pipe on a second thread; this thread reads the pipe line
/// by line and parses each line back (into the official SDK's types). Returns the time from
/// the first serialisation to the last parse; panics unless exactly `updates` text chunks of
/// `size` bytes came back.
pub fn serde_pipe_limit(session: &str, updates: usize, size: usize) -> Duration {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    let session = session.to_string();
    let start = Instant::now();
    let producer = std::thread::spawn(move || {
        let mut out = BufWriter::with_capacity(1 << 16, writer);
        for i in 0..updates {
            serde_json::to_writer(&mut out, &chunk_notification(&session, i, size)).expect("serialise");
            out.write_all(b"\n").expect("write");
        }
        out.flush().expect("flush");
    });
    let mut input = BufReader::with_capacity(1 << 16, reader);
    let mut line = String::new();
    let mut parsed = 0usize;
    while input.read_line(&mut line).expect("read") > 0 {
        let message: Notification = serde_json::from_str(&line).expect("parse");
        if let SessionUpdate::AgentMessageChunk(chunk) = &message.params.update
            && let ContentBlock::Text(text) = &chunk.content
            && text.text.len() == size
        {
            parsed += 1;
        }
        line.clear();
    }
    producer.join().expect("the producer thread");
    let elapsed = start.elapsed();
    assert_eq!(
        parsed, updates,
        "the limit program parsed back {parsed} of {updates} chunks"
    );
    elapsed
}

/// What one client run measured.
#[derive(Debug, Clone, Copy)]
pub struct StreamRun {
    /// From sending `session/prompt` to its response (the stream's last update before it).
    pub elapsed: Duration,
    /// Updates received before the response.
    pub updates: u64,
    /// The agent's peak RSS (`VmHWM`, KiB), read after the response, before its stdin closes.
    pub agent_peak_kib: u64,
}

/// The official SDK client (transcript and event recording off: it only counts updates)
/// consumes `/stream {updates} {size}` from `binary`, run in fresh [`AgentDirs`]. Panics
/// unless the turn ends `end_turn` and the agent then exits 0 on stdin EOF; the caller checks
/// the count.
pub async fn sdk_stream(binary: &Path, updates: usize, size: usize) -> StreamRun {
    sdk_stream_with_env(binary, &[], updates, size).await
}

/// [`sdk_stream`] with `env` added to the agent's environment (after the [`AgentDirs`]'
/// variables), e.g. `AGENTACP_PROTOCOL_VERSIONS`.
pub async fn sdk_stream_with_env(binary: &Path, env: &[(&str, OsString)], updates: usize, size: usize) -> StreamRun {
    let dirs = AgentDirs::new();
    let mut all: Vec<(&str, OsString)> = dirs.env();
    all.extend(env.iter().cloned());
    let process = AgentProcess::spawn_with_env(binary, &all, StderrMode::Capture);
    let pid = process.pid;
    let client = SdkClient::connect(
        process,
        Options {
            transcript: false,
            record_updates: false,
        },
    )
    .await;
    client.initialize().await;
    let session = client.new_session(&dirs.project("p")).await;
    let start = Instant::now();
    let response = client.prompt(&session, &format!("/stream {updates} {size}")).ok().await;
    let elapsed = start.elapsed();
    let agent_peak_kib = peak_rss_kib(pid).unwrap_or(0);
    if response.stop_reason != StopReason::EndTurn {
        client.fail(format!("the stream ended {:?}, not end_turn", response.stop_reason));
    }
    let updates = client.update_count();
    let status = client.shutdown().await;
    assert!(status.success(), "{} exited with {status}", binary.display());
    StreamRun {
        elapsed,
        updates,
        agent_peak_kib,
    }
}

/// The median (the upper one for an even count); panics on an empty list.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

/// Raises this process's soft limit on open files to `wanted` (or the hard limit).
pub fn raise_fd_limit(wanted: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|soft| soft < wanted) {
        let current = limit.maximum.map_or(wanted, |hard| hard.min(wanted));
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(current),
                maximum: limit.maximum,
            },
        );
    }
}

/// Our client, connected to an agent that has `/stream` (over stdio or a remote profile),
/// opens a session in `cwd` and consumes `/stream {updates} {size}`: the time from sending
/// the prompt to its stop reason. Panics unless exactly `updates` text chunks of `size` bytes
/// arrive and the turn ends `end_turn`.
pub async fn our_client_stream(client: &agentacp::client::Client, cwd: &Path, updates: usize, size: usize) -> Duration {
    use agentacp::client::{PromptEvent, Update};
    let session = client.new_session(cwd).await.expect("session/new");
    let start = Instant::now();
    let mut turn = client
        .prompt_text(&session, &format!("/stream {updates} {size}"))
        .await
        .expect("session/prompt");
    let mut counted = 0usize;
    let stop = loop {
        match turn.next().await {
            Some(Ok(PromptEvent::Update(update))) => {
                if !matches!(update, Update::MessageChunk(_)) || update.text().map(str::len) != Some(size) {
                    panic!("update {counted}: not a {size}-byte text chunk: {update:?}");
                }
                counted += 1;
            }
            Some(Ok(PromptEvent::Stop(reason))) => break reason,
            Some(Ok(other)) => panic!("after {counted} updates, an unexpected event: {other:?}"),
            Some(Err(error)) => panic!("the stream failed after {counted} updates: {error}"),
            None => panic!("the stream ended without a stop reason after {counted} updates"),
        }
    };
    let elapsed = start.elapsed();
    assert_eq!(
        stop,
        agentacp::wire::default::StopReason::EndTurn,
        "the stream's stop reason"
    );
    assert_eq!(counted, updates, "updates counted");
    elapsed
}
