//! The harness itself, against `sdk-stream-agent` (an agent written only with the official
//! SDK): what the tests of our servers rely on works against a known-good peer, so their
//! failures are about the server, not the harness.

use std::path::Path;
use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason;
use interop::raw::{Next, RawClient};
use interop::sdk::{Event, Phase, SdkClient};
use interop::{AgentDirs, AgentProcess, StderrMode, example_binary, stream_chunk};

const SDK_AGENT: &str = "sdk-stream-agent";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_a_stream_in_order_and_before_its_response() {
    let dirs = AgentDirs::new();
    let client = SdkClient::spawn(&example_binary(SDK_AGENT), &dirs).await;
    client.initialize().await;
    let session = client.new_session(&dirs.project("p")).await;
    let prompt = client.prompt(&session, "/stream 1000 64");
    let tag = prompt.tag.clone();
    assert_eq!(prompt.ok().await.stop_reason, StopReason::EndTurn);
    let events = client.events();
    let texts: Vec<&str> = events.iter().filter_map(Event::chunk_text).collect();
    let want: Vec<String> = (0..1000).map(|i| stream_chunk(i, 64)).collect();
    assert_eq!(texts, want);
    for event in &events {
        match event {
            Event::Update { phase, .. } => assert!(phase.is_before(&tag), "{event:?}"),
            Event::Response { .. } => {}
            Event::Permission { .. } | Event::Editor { .. } => panic!("unexpected {event:?}"),
        }
    }
    // The prompt's response is the last event: it was recorded after every update.
    assert!(
        matches!(events.last(), Some(Event::Response { tag: t, .. }) if *t == tag),
        "{:?}",
        events.last()
    );
    assert_eq!(client.transcript().responses_to(&tag.wire_id).len(), 1);
    assert!(client.shutdown().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_updates_after_a_response_and_sees_cancel() {
    let dirs = AgentDirs::new();
    let client = SdkClient::spawn(&example_binary(SDK_AGENT), &dirs).await;
    client.initialize().await;
    let session = client.new_session(&dirs.project("p")).await;
    let forever = client.prompt(&session, "/forever");
    let tag = forever.tag.clone();
    client
        .wait_until("a tick", |events| {
            events.iter().any(|e| e.chunk_text() == Some("tick 0"))
        })
        .await;
    client.cancel(&session);
    assert_eq!(forever.ok().await.stop_reason, StopReason::Cancelled);
    let again = client.prompt(&session, "hello");
    assert_eq!(again.ok().await.stop_reason, StopReason::EndTurn);
    assert!(
        client
            .events()
            .iter()
            .any(|e| matches!(e, Event::Update { phase: Phase::BeforeResponse(t), .. } if *t == tag))
    );
    assert!(client.shutdown().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_client_sees_silence_as_timeout_and_eof_as_eof() {
    let dirs = AgentDirs::new();
    let process = AgentProcess::spawn_with_env(Path::new("/bin/cat"), &dirs.env(), StderrMode::Capture);
    let mut client = RawClient::new(process);
    assert_eq!(client.next_line(Duration::from_millis(200)).await, Next::Timeout);
    client.send_line("{\"echo\":1}").await;
    assert_eq!(client.recv().await, serde_json::json!({"echo": 1}));
    client.close_stdin().await;
    assert_eq!(client.next_line(interop::TIMEOUT).await, Next::Eof);
    assert!(client.expect_exit().await.success());
}

/// A negative control: an agent that answers a prompt and only then sends one more update
/// (a broken ordered writer). The harness must tag that update as after the response, which is
/// what the stream and cancel tests of our servers check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_an_update_sent_after_the_response_as_late() {
    let dirs = AgentDirs::new();
    let script = dirs.late_update_agent();

    let process = AgentProcess::spawn(&script, &dirs, StderrMode::Capture);
    let client = SdkClient::connect(process, interop::sdk::Options::default()).await;
    client.initialize().await;
    let session = client.new_session(&dirs.project("p")).await;
    let prompt = client.prompt(&session, "anything");
    let tag = prompt.tag.clone();
    assert_eq!(prompt.ok().await.stop_reason, StopReason::EndTurn);
    client
        .wait_until("the late update", |events| {
            events.iter().any(|e| e.chunk_text() == Some("late"))
        })
        .await;
    let phase_of = |text: &str| {
        client.events().into_iter().find_map(|e| match e {
            Event::Update { phase, update, .. } if update["content"]["text"] == text => Some(phase),
            _ => None,
        })
    };
    assert_eq!(phase_of("early"), Some(Phase::BeforeResponse(tag.clone())));
    assert_eq!(phase_of("late"), Some(Phase::AfterResponse(tag)));
    assert!(client.shutdown().await.success());
}
