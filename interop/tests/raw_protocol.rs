//! Raw JSON lines written to our example servers' stdin, no SDK in between: the framing and
//! error rules of docs/design/runtime.md, byte for byte.

use interop::raw::{Next, RawClient, assert_error};
use interop::{AgentDirs, AgentProcess, StderrMode, example_binary};
use serde_json::{Value, json};

const SERVERS: [&str; 2] = ["echo-server", "governed-server"];

/// A client of `server`, started in fresh folders.
fn start(server: &str, dirs: &AgentDirs) -> RawClient {
    RawClient::spawn(&example_binary(server), dirs)
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_before_initialize_is_invalid_request() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        let cwd = dirs.project("p");
        let response = client
            .request(json!(1), "session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        assert_error(&client, &response, &json!(1), -32600, server);
        // And the connection goes on: initialize still works.
        client.initialize(json!(2)).await;
        client.new_session(json!(3), &cwd).await;
        client.close_stdin().await;
        assert!(client.expect_exit().await.success());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_initialize_is_invalid_request() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        let response = client
            .request(json!(2), "initialize", json!({"protocolVersion": 1}))
            .await;
        assert_error(&client, &response, &json!(2), -32600, server);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_method_is_method_not_found() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        for (id, method) in [(json!(2), "session/frobnicate"), (json!("x-3"), "_vendor/thing")] {
            let response = client.request(id.clone(), method, json!({})).await;
            assert_error(&client, &response, &id, -32601, &format!("{server} {method}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_is_never_answered() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        let cwd = dirs.project("p");
        // Unknown notifications, an extension one, and a cancel for a session that does not
        // exist: none may be answered (an answer would be the next line).
        for notification in [
            json!({"jsonrpc": "2.0", "method": "session/frobnicate", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "_vendor/ping", "params": {"n": 1}}),
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "no-such-session"}}),
            json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 99}}),
        ] {
            client.send(&notification).await;
        }
        client
            .send(
                &json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}),
            )
            .await;
        let next = client.recv().await;
        if next.get("id") != Some(&json!(2)) || next.get("result").is_none() {
            client.fail(format!(
                "{server}: the line after four notifications and a session/new is not the \
                 session/new result: {next}"
            ));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_is_not_json_is_parse_error_with_id_null() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        for garbage in ["this is not json", "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":"] {
            client.send_line(garbage).await;
            let response = client.recv().await;
            assert_error(
                &client,
                &response,
                &Value::Null,
                -32700,
                &format!("{server}: {garbage:?}"),
            );
        }
        // The connection survives.
        client.new_session(json!(2), &dirs.project("p")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_is_not_a_json_rpc_2_object_is_invalid_request() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        for (line, id) in [
            (
                r#"{"jsonrpc":"1.0","id":7,"method":"session/new","params":{}}"#,
                json!(7),
            ),
            (r#"{"id":8,"method":"session/new","params":{}}"#, json!(8)),
            ("[]", Value::Null),
            ("42", Value::Null),
            (r#""a string""#, Value::Null),
        ] {
            client.send_line(line).await;
            let response = client.recv().await;
            assert_error(&client, &response, &id, -32600, &format!("{server}: {line}"));
        }
        client.new_session(json!(9), &dirs.project("p")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mb_frame_is_rejected_and_the_connection_goes_on() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        let session = client.new_session(json!(2), &dirs.project("p")).await;
        let rss_before = client.process.peak_rss_kib();

        // `id` first, so a server reading only the frame's beginning can answer it.
        let text = "x".repeat(10 * 1024 * 1024);
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"{text}"}}]}}}}"#
        );
        client.send_line(&frame).await;
        drop((frame, text));
        client
            .send(&json!({"jsonrpc": "2.0", "id": 8, "method": "session/prompt", "params": prompt(&session, "after the big one")}))
            .await;

        let mut answer = client.recv().await;
        // governed-server announces its slash commands right after the session/new answer.
        while answer["params"]["update"]["sessionUpdate"] == "available_commands_update" {
            answer = client.recv().await;
        }
        let id = answer.get("id").cloned().unwrap_or(Value::Null);
        if !(id == json!(7) || id.is_null()) || answer.get("method").is_some() {
            client.fail(format!(
                "{server}: the first answer after the 10 MB frame is not for id 7 (or null): {answer}"
            ));
        }
        assert_error(&client, &answer, &id, -32600, &format!("{server}: 10 MB frame"));
        let (response, updates) = client.recv_response(&json!(8)).await;
        if response["result"]["stopReason"] != "end_turn" {
            client.fail(format!("{server}: the prompt after the big frame failed: {response}"));
        }
        let echoed: String = updates
            .iter()
            .filter_map(|u| u["params"]["update"]["content"]["text"].as_str())
            .collect();
        assert_eq!(echoed, "after the big one", "{server}");

        // "Discarded without being buffered whole": the peak RSS grew by less than the frame.
        if let (Some(before), Some(after)) = (rss_before, client.process.peak_rss_kib()) {
            let grown = after.saturating_sub(before);
            assert!(
                grown < 8 * 1024,
                "{server}: peak RSS grew by {grown} KiB while discarding a 10 MB frame \
                 ({before} → {after} KiB): the frame was buffered"
            );
        }
        client.close_stdin().await;
        assert!(client.expect_exit().await.success());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_exits_with_status_0() {
    for server in SERVERS {
        // Idle, right after initialize.
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        client.close_stdin().await;
        let status = client.expect_exit().await;
        if !status.success() {
            client.fail(format!("{server} exited with {status} on stdin EOF when idle"));
        }

        // With a turn running: it is interrupted, and the exit is still clean.
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        let session = client.new_session(json!(2), &dirs.project("p")).await;
        client
            .send(
                &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt(&session, "/forever")}),
            )
            .await;
        let first = client.recv().await;
        if first["method"] != "session/update" {
            client.fail(format!("{server}: /forever did not start streaming: {first}"));
        }
        client.close_stdin().await;
        // Drain whatever it still writes until it closes stdout, then it must exit 0.
        loop {
            match client.next_line(interop::TIMEOUT).await {
                Next::Line(_) => {}
                Next::Eof => break,
                Next::Timeout => client.fail(format!(
                    "{server} kept its stdout open for {:?} after stdin EOF during a turn",
                    interop::TIMEOUT
                )),
            }
        }
        let status = client.expect_exit().await;
        if !status.success() {
            client.fail(format!("{server} exited with {status} on stdin EOF during a turn"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_and_unknown_fields_are_tolerated() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        let meta = json!({"vendor.example/trace": "abc", "nested": {"x": [1, 2]}});
        let response = client
            .request(
                json!(1),
                "initialize",
                json!({
                    "protocolVersion": 1,
                    "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false, "_meta": meta}, "terminal": false, "futureCapability": {"x": true}},
                    "clientInfo": {"name": "interop", "version": "0.1.0", "nickname": "raw"},
                    "_meta": meta,
                    "someFutureField": 42
                }),
            )
            .await;
        if response.get("result").is_none() {
            client.fail(format!(
                "{server}: initialize with _meta/unknown fields failed: {response}"
            ));
        }
        let cwd = dirs.project("p");
        let response = client
            .request(
                json!(2),
                "session/new",
                json!({"cwd": cwd, "mcpServers": [], "_meta": meta, "futureOption": "on"}),
            )
            .await;
        let Some(session) = response["result"]["sessionId"].as_str().map(str::to_string) else {
            client.fail(format!(
                "{server}: session/new with _meta/unknown fields failed: {response}"
            ));
        };
        let response = client
            .request(
                json!(3),
                "session/prompt",
                json!({
                    "sessionId": session,
                    "prompt": [{"type": "text", "text": "tolerant", "_meta": meta, "annotations": null, "futureField": 1}],
                    "_meta": meta,
                    "futureField": {"a": 1}
                }),
            )
            .await;
        if response["result"]["stopReason"] != "end_turn" {
            client.fail(format!(
                "{server}: session/prompt with _meta/unknown fields failed: {response}"
            ));
        }
        // Unknown fields at the top level of the message are ignored too.
        client
            .send_line(r#"{"jsonrpc":"2.0","id":4,"method":"session/frobnicate","params":{},"extra":true}"#)
            .await;
        let response = client.recv().await;
        assert_error(&client, &response, &json!(4), -32601, server);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_session_is_not_found_and_a_second_concurrent_prompt_is_invalid_params() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        let response = client
            .request(json!(2), "session/prompt", prompt("no-such-session", "hi"))
            .await;
        assert_error(
            &client,
            &response,
            &json!(2),
            -32002,
            &format!("{server}: unknown session"),
        );

        let session = client.new_session(json!(3), &dirs.project("p")).await;
        client
            .send(
                &json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": prompt(&session, "/forever")}),
            )
            .await;
        client
            .send(&json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": prompt(&session, "second")}))
            .await;
        let (response, _) = client.recv_response(&json!(5)).await;
        assert_error(
            &client,
            &response,
            &json!(5),
            -32602,
            &format!("{server}: second prompt"),
        );
        client
            .send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}))
            .await;
        let (response, _) = client.recv_response(&json!(4)).await;
        if response["result"]["stopReason"] != "cancelled" {
            client.fail(format!("{server}: /forever after cancel answered {response}"));
        }
    }
}

/// Threads that keep the CPUs busy while alive; stopped and joined on drop, a failing
/// assertion's unwinding included.
struct BusyThreads {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyThreads {
    fn start(count: usize) -> BusyThreads {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..count)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        BusyThreads { stop, threads }
    }
}

impl Drop for BusyThreads {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// A prompt sent the moment the previous one's answer arrives is a new turn, never "already
/// running": the server ends the turn before it answers. With stdout written by the turn's own
/// thread, a client on the other core used to win that race now and then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_sent_as_soon_as_the_last_one_is_answered_is_taken() {
    let binaries = SERVERS.map(example_binary);
    // Busy threads make the scheduler preempt the server's thread right after its write, which
    // is when the race was lost (within the first 250 prompts in every run before the fix).
    let _busy = BusyThreads::start(3);
    for (server, binary) in SERVERS.iter().zip(&binaries) {
        let dirs = AgentDirs::new();
        let mut client = RawClient::spawn(binary, &dirs);
        client.initialize(json!(1)).await;
        let session = client.new_session(json!(2), &dirs.project("p")).await;
        for id in 3..600 {
            let response = client
                .request(json!(id), "session/prompt", prompt(&session, "hi"))
                .await;
            if response["result"]["stopReason"] != "end_turn" {
                client.fail(format!("{server}: prompt {id} answered {response}"));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_frame_limit_is_configurable() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut env = dirs.env();
        env.push(("AGENTACP_MAX_FRAME_BYTES", "2048".into()));
        let mut client = RawClient::new(AgentProcess::spawn_with_env(
            &example_binary(server),
            &env,
            StderrMode::Capture,
        ));
        client.initialize(json!(1)).await;
        let session = client.new_session(json!(2), &dirs.project("p")).await;
        let over = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt(&session, &"o".repeat(4096))});
        let response = client.request(json!(3), "session/prompt", over["params"].clone()).await;
        assert_error(
            &client,
            &response,
            &json!(3),
            -32600,
            &format!("{server}: a 4 KB frame over a 2 KB limit"),
        );
        let (response, _) = {
            client
                .send(&json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": prompt(&session, &"u".repeat(1024))}))
                .await;
            client.recv_response(&json!(4)).await
        };
        if response["result"]["stopReason"] != "end_turn" {
            client.fail(format!("{server}: a 1 KB frame under a 2 KB limit failed: {response}"));
        }
    }
}

/// `$/cancel_request` for a running `session/prompt`: the ACP schema lets the receiver answer
/// either with a cancellation marker (for a prompt, `stopReason: cancelled`) or with error
/// `-32800`; either way exactly once, the turn stops, and the session stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_request_ends_a_prompt_once() {
    for server in SERVERS {
        let dirs = AgentDirs::new();
        let mut client = start(server, &dirs);
        client.initialize(json!(1)).await;
        let session = client.new_session(json!(2), &dirs.project("p")).await;
        client
            .send(
                &json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": prompt(&session, "/forever")}),
            )
            .await;
        let first = client.recv().await;
        if first["method"] != "session/update" {
            client.fail(format!("{server}: /forever did not start streaming: {first}"));
        }
        client
            .send(&json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 5}}))
            .await;
        let (response, _) = client.recv_response(&json!(5)).await;
        let marker = response["result"]["stopReason"] == "cancelled";
        let error = response["error"]["code"] == -32800;
        if !(marker || error) {
            client.fail(format!(
                "{server}: $/cancel_request of a prompt answered {response}, want stopReason cancelled or error -32800"
            ));
        }
        // The session stays usable, and nothing more is said about request 5 or its turn.
        client
            .send(&json!({"jsonrpc": "2.0", "id": 6, "method": "session/prompt", "params": prompt(&session, "still here")}))
            .await;
        let (response, updates) = client.recv_response(&json!(6)).await;
        if response["result"]["stopReason"] != "end_turn" {
            client.fail(format!(
                "{server}: the prompt after $/cancel_request failed: {response}"
            ));
        }
        let texts: Vec<&str> = updates
            .iter()
            .filter_map(|u| u["params"]["update"]["content"]["text"].as_str())
            .collect();
        if texts != ["still here"] {
            client.fail(format!(
                "{server}: between the cancelled prompt's answer and the next prompt's, saw {texts:?}"
            ));
        }
        let answers = client.transcript.responses_to(&json!(5));
        if answers.len() != 1 {
            client.fail(format!("{server}: request 5 was answered {} times", answers.len()));
        }
    }
}

/// An answer to `session/request_permission` that is not a valid selection of an offered
/// option (an unknown option id, an error, a result of the wrong shape) fails closed: the
/// tool does not run and the outcome is `rejected`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_permission_answers_fail_closed() {
    let answers = [
        json!({"result": {"outcome": {"outcome": "selected", "optionId": "no-such-option"}}}),
        json!({"error": {"code": -32603, "message": "the client broke"}}),
        json!({"result": {"unexpected": true}}),
    ];
    for (n, answer) in answers.iter().enumerate() {
        let dirs = AgentDirs::new();
        let cwd = dirs.project("p");
        let mut client = start("governed-server", &dirs);
        client.initialize(json!(1)).await;
        let session = client.new_session(json!(2), &cwd).await;
        let text = r#"/tool write-file {"path":"x.txt","content":"must not be written"}"#;
        client
            .send(&json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt(&session, text)}))
            .await;
        let mut texts = Vec::new();
        let mut asked = false;
        loop {
            let message = client.recv().await;
            if message["method"] == "session/request_permission" {
                asked = true;
                let mut reply = answer.clone();
                reply["jsonrpc"] = json!("2.0");
                reply["id"] = message["id"].clone();
                client.send(&reply).await;
            } else if let Some(text) = message["params"]["update"]["content"]["text"].as_str() {
                texts.push(text.to_string());
            } else if message.get("id") == Some(&json!(3)) {
                break;
            }
        }
        if !asked {
            client.fail(format!("answer {n}: no session/request_permission was sent"));
        }
        if texts != ["rejected"] {
            client.fail(format!(
                "answer {n} ({answer}): the turn said {texts:?}, want [\"rejected\"]"
            ));
        }
        assert!(!cwd.join("x.txt").exists(), "answer {n} ({answer}) let the tool run");
    }
}
