//! MCP at the sandboxed tier (issue #18): the round trip of one MCP tool call made by an
//! operator through the runtime — governance, the `tool_call` updates, the audit records
//! (fsync'd, the default) — against the same call made directly with `rmcp`, in the same run,
//! on the same MCP server (`src/bin/mcp-test-server.rs`, release build, its read-only
//! `read_note`: allowed without asking).
//!
//! - (a) direct: an `rmcp` client calls `read_note` on the server's stdio;
//! - (b) a plain ACP prompt to `examples/sandboxed-server` (release), answered with one message
//!   (what every prompt costs, MCP or not);
//! - (c) an ACP prompt whose operator makes the governed MCP call (`/mcp call notes read_note`);
//! - (d) the same prompt, the server now provided by our client over the ACP connection
//!   (MCP-over-ACP: `mcp/message` both ways, the same tools in-process in the client), with
//!   the audit batched: against (c) batched, MCP-over-ACP against stdio MCP.
//!
//! The runtime's cost of a call is (c) − (b): governance, two tool-call updates, the audit
//! records and the MCP call; its overhead is that over (a). That difference also holds the
//! client reading two more updates. So (e) times the call where the operator makes it: the
//! example's `/mcp repeat CALLS ...` makes the governed call `CALLS` times in one turn and
//! reports the mean time from `turn.mcp().call()` to its outcome (governance, the updates
//! queued, the audit records written, the MCP round trip), while the client reads the updates. (b) and (c) run twice, with the
//! audit log synced after every record (`AGENTACP_AUDIT_FSYNC=every`, the default) and every
//! 64 (`batched:64`). `CALLS` calls each, `ROUNDS` rounds interleaved after a warm-up; medians
//! of the per-call times. The ratio to the direct call is also taken round by round (each
//! round's (e) over the same round's (a), measured a moment apart) and its median and range
//! printed: on a shared machine whose speed drifts from minute to minute, that pairing is the
//! steadier figure.
//!
//! Run with `cargo bench -p interop --bench mcp`.

#![allow(clippy::print_stdout)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use agentacp::client::{AgentCommand, Client, ClientOptions, PermissionDecision, PromptEvent};
use agentacp::wire::default as wire;
use interop::bench_support::median;
use interop::notes_mcp::Notes;
use interop::{AgentDirs, release_binary};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

const CALLS: usize = 200;
const ROUNDS: usize = 7;
const WAIT: Duration = Duration::from_secs(60);

/// Seconds per call, as the operator timed `CALLS` governed calls in one turn of
/// `/mcp repeat` (its last message: `N calls, X µs per call; ...`).
async fn repeated(client: &Client, session: &wire::SessionId, call: &str) -> f64 {
    let text = format!("/mcp repeat {CALLS} {call}");
    let mut turn = tokio::time::timeout(WAIT, client.prompt_text(session, &text))
        .await
        .unwrap()
        .unwrap();
    let mut report = String::new();
    loop {
        match tokio::time::timeout(WAIT, turn.next()).await.unwrap() {
            Some(Ok(PromptEvent::Stop(_))) => break,
            Some(Ok(PromptEvent::Update(agentacp::client::Update::MessageChunk(chunk)))) => {
                if let wire::ContentBlock::Text(text) = chunk.content {
                    report = text.text;
                }
            }
            Some(Ok(_)) => {}
            other => panic!("`{text}`: {other:?}"),
        }
    }
    let micros = report
        .split(" µs per call")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|number| number.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no timing in {report:?}"));
    assert!(report.contains("the last completed"), "{report}");
    micros / 1e6
}

/// Seconds per call of `CALLS` prompts of `text`, each checked to end `end_turn`.
async fn prompts(client: &Client, session: &wire::SessionId, text: &str) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        let mut turn = tokio::time::timeout(WAIT, client.prompt_text(session, text))
            .await
            .unwrap()
            .unwrap();
        loop {
            match tokio::time::timeout(WAIT, turn.next()).await.unwrap() {
                Some(Ok(PromptEvent::Stop(reason))) => {
                    assert_eq!(reason, wire::StopReason::EndTurn);
                    break;
                }
                Some(Ok(_)) => {}
                other => panic!("`{text}`: {other:?}"),
            }
        }
    }
    start.elapsed().as_secs_f64() / CALLS as f64
}

fn main() {
    let server = release_binary("mcp-test-server");
    let agent = release_binary("sandboxed-server");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let dirs = AgentDirs::new();
        let project = dirs.project("p");
        std::fs::write(project.join("hello.txt"), "hello").unwrap();

        // (a) direct, with rmcp.
        let mut child = tokio::process::Command::new(&server)
            .current_dir(&project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let direct = ().serve((stdout, stdin)).await.expect("MCP initialize");
        let arguments = json!({"name": "hello.txt"}).as_object().unwrap().clone();
        let call_direct = || async {
            let start = Instant::now();
            for _ in 0..CALLS {
                let params = CallToolRequestParams::new("read_note").with_arguments(arguments.clone());
                let result = direct.call_tool(params).await.unwrap();
                assert_ne!(result.is_error, Some(true));
            }
            start.elapsed().as_secs_f64() / CALLS as f64
        };

        // (b), (c): through the sandboxed example, with each audit fsync policy.
        let call = r#"notes read_note {"name":"hello.txt"}"#;
        let governed = format!("/mcp call {call}");
        let governed = governed.as_str();
        let mut agents = Vec::new();
        for (fsync, over_acp) in [("every", false), ("batched:64", false), ("batched:64", true)] {
            let mut command = AgentCommand::new(&agent).env("AGENTACP_AUDIT_FSYNC", fsync);
            for (key, value) in dirs.env() {
                let value = if key == "AGENTACP_AUDIT_LOG" {
                    dirs.state_dir
                        .join(format!("audit-{}-{over_acp}.jsonl", fsync.replace(':', "-")))
                        .into()
                } else {
                    value
                };
                command = command.env(key, value);
            }
            let mut options = ClientOptions::default()
                .with_workspace_root(dirs.workspace_root.clone())
                .with_permission(|_| async { PermissionDecision::Reject });
            let servers = if over_acp {
                let folder = project.clone();
                options = options.with_mcp_over_acp("notes", move || Notes { folder: folder.clone() });
                json!([])
            } else {
                json!([{"name": "notes", "command": server, "args": [], "env": []}])
            };
            let client = Client::connect(command, options).await.unwrap();
            let session = client.new_session_with_mcp_servers(&project, servers).await.unwrap();
            prompts(&client, &session, "hello").await;
            prompts(&client, &session, governed).await;
            let how = if over_acp { "over ACP" } else { "over stdio" };
            agents.push((fsync, how, client, session, Vec::new(), Vec::new(), Vec::new()));
        }
        call_direct().await;
        let mut a = Vec::new();
        for _ in 0..ROUNDS {
            a.push(call_direct().await);
            for (_, _, client, session, b, c, e) in &mut agents {
                b.push(prompts(client, session, "hello").await);
                c.push(prompts(client, session, governed).await);
                e.push(repeated(client, session, call).await);
            }
        }
        let a_rounds = a.clone();
        let a = median(a);
        let us = |seconds: f64| seconds * 1e6;
        println!("\nMCP read_note on mcp-test-server (release), {CALLS} calls × {ROUNDS} rounds, medians per call");
        println!("  (a) direct rmcp call: {:.1} µs", us(a));
        for (fsync, how, client, _, b, c, e) in agents {
            let (b, c) = (median(b), median(c));
            println!("  AGENTACP_AUDIT_FSYNC={fsync}, the MCP server {how}:");
            println!(
                "    (b) ACP prompt, no tool (sandboxed-server)         {:>9.1} µs",
                us(b)
            );
            println!(
                "    (c) ACP prompt with the governed, audited MCP call {:>9.1} µs",
                us(c)
            );
            println!(
                "    the runtime's cost of the call, (c) − (b): {:.1} µs, {:.2}× the direct call (target ≤ 1.2×), \
                 added {:.1} µs per governed call (target < 100 µs)",
                us(c - b),
                (c - b) / a,
                us(c - b - a)
            );
            let mut ratios: Vec<f64> = e.iter().zip(&a_rounds).map(|(e, a)| e / a).collect();
            ratios.sort_by(f64::total_cmp);
            let (e, low, high) = (median(e), ratios[0], ratios[ratios.len() - 1]);
            println!(
                "    (e) the governed call timed in the operator: {:.1} µs, {:.2}× the direct call (target ≤ 1.2×), \
                 added {:.1} µs per governed call (target < 100 µs); round by round: median {:.2}×, {low:.2}–{high:.2}×",
                us(e),
                e / a,
                us(e - a),
                median(ratios),
            );
            drop(client);
        }
        drop(direct);
    });
}
