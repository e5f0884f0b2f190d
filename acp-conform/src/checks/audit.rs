//! The audit checks. AIP-44: "Conformance tests MUST exercise the audit emit path". The kit
//! drives the agent through the `--tool-prompt` turns, watches what reaches the wire, answers
//! its permission requests one way or another, and then reads the records the agent appended
//! to its audit log meanwhile (the records before the run are left alone, so the log may be
//! shared with earlier checks and runs).

use std::path::Path;

use serde_json::{Value, json};

use super::{prompt_params, with_session};
use crate::{Context, Outcome, Peer, trim};

/// How the kit answers the agent's permission requests in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// With an allow option (`allow_once` when offered).
    Allow,
    /// With a reject option (`reject_once` when offered).
    Reject,
    /// Not at all: the kit sends `session/cancel` instead and stops after that turn.
    Unanswered,
}

/// What one run of the tool prompts showed.
#[derive(Debug)]
pub struct ToolRun {
    /// The session the turns ran in.
    session: String,
    /// Every message the agent sent during the turns.
    wire: Vec<Value>,
    /// The tool call id of each permission request, with the kit's answer.
    asked: Vec<(String, Answer)>,
    /// The records the agent appended to its log during the run.
    records: Vec<Value>,
    /// The whole log's chain, verified after the run: its record count, or why it fails.
    chain: Result<u64, String>,
}

/// Runs the tool prompts (a plain prompt when there are none) in one session of a fresh
/// agent, answering permission requests with `answer`; then closes stdin, waits for the
/// agent to exit and reads what it appended to `log`.
fn drive(context: &Context, log: &Path, answer: Answer) -> Result<ToolRun, String> {
    let before = line_count(log)?;
    let (mut peer, _, session) = with_session(context)?;
    let plain = ["hello, conform".to_string()];
    let prompts = if context.config.tool_prompts.is_empty() {
        &plain[..]
    } else {
        &context.config.tool_prompts[..]
    };
    let mut run = ToolRun {
        session,
        wire: Vec::new(),
        asked: Vec::new(),
        records: Vec::new(),
        chain: Ok(0),
    };
    for (n, prompt) in prompts.iter().enumerate() {
        let id = json!(format!("tool-prompt-{n}"));
        peer.request(id.clone(), "session/prompt", prompt_params(&run.session, prompt))?;
        let cancelled =
            turn(&mut peer, &id, answer, &mut run).map_err(|e| format!("the turn of `{}`: {e}", trim(prompt)))?;
        if cancelled {
            break;
        }
    }
    peer.close_stdin();
    peer.wait_exit(context.config.timeout);
    run.records = records_after(log, before)?;
    run.chain = match acp_audit::verify_file(log) {
        Ok(summary) => Ok(summary.records),
        Err(acp_audit::AuditError::Broken(error)) => Err(format!("the chain is broken: {error}")),
        Err(error) => Err(error.to_string()),
    };
    Ok(run)
}

/// Reads one turn until the response to `id`, answering requests on the way; `Ok(true)` when
/// the kit left a permission request unanswered and cancelled the turn.
fn turn(peer: &mut Peer, id: &Value, answer: Answer, run: &mut ToolRun) -> Result<bool, String> {
    let mut deadline = std::time::Instant::now() + peer.timeout;
    let mut cancelled = false;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let message = peer.recv_within(left).map_err(|e| {
            let after = if cancelled {
                " after session/cancel, its permission request unanswered"
            } else {
                ""
            };
            format!("no response{after}: {e}{}", peer.stderr_hint())
        })?;
        run.wire.push(message.clone());
        let (Some(method), Some(request)) = (message["method"].as_str(), message.get("id")) else {
            if message.get("method").is_none() && message.get("id") == Some(id) {
                return Ok(cancelled);
            }
            continue;
        };
        if method != "session/request_permission" {
            peer.send(&json!({"jsonrpc": "2.0", "id": request, "error": {"code": -32601, "message": "not offered by the conformance kit"}}))?;
            continue;
        }
        let tool_call_id = message["params"]["toolCall"]["toolCallId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if answer == Answer::Unanswered || cancelled {
            run.asked.push((tool_call_id, Answer::Unanswered));
            if !cancelled {
                cancelled = true;
                peer.notify("session/cancel", json!({"sessionId": run.session}))?;
                deadline = std::time::Instant::now() + peer.timeout;
            }
            continue;
        }
        run.asked.push((tool_call_id, answer));
        let prefix = if answer == Answer::Allow { "allow" } else { "reject" };
        let outcome = match option(&message["params"]["options"], prefix) {
            Some(option) => json!({"outcome": "selected", "optionId": option}),
            None => json!({"outcome": "cancelled"}),
        };
        peer.send(&json!({"jsonrpc": "2.0", "id": request, "result": {"outcome": outcome}}))?;
    }
}

/// The id of the option of kind `<prefix>_once`, else of the first of kind `<prefix>_*`.
fn option<'a>(options: &'a Value, prefix: &str) -> Option<&'a Value> {
    let options = options.as_array()?;
    let kind = |o: &Value| o["kind"].as_str().unwrap_or_default().to_string();
    options
        .iter()
        .find(|o| kind(o) == format!("{prefix}_once"))
        .or_else(|| options.iter().find(|o| kind(o).starts_with(prefix)))
        .map(|o| &o["optionId"])
}

/// How many lines `log` holds (0 when it does not exist yet).
fn line_count(log: &Path) -> Result<usize, String> {
    match std::fs::read(log) {
        Ok(bytes) => Ok(bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(format!("cannot read {}: {e}", log.display())),
    }
}

/// The records of `log` after its first `before` lines.
fn records_after(log: &Path, before: usize) -> Result<Vec<Value>, String> {
    let text = match std::fs::read_to_string(log) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{}: no audit log after the turns", log.display()));
        }
        Err(e) => return Err(format!("cannot read {}: {e}", log.display())),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .skip(before)
        // Read as the verifier reads them (records may nest deeper than serde_json's default).
        .map(|line| {
            acp_audit::parse_record(line)
                .map_err(|e| format!("{}: a record is unreadable ({e}): {}", log.display(), trim(line)))
        })
        .collect()
}

impl ToolRun {
    /// The `session/update`s of the run's session about tool calls: (tool call id, update).
    fn tool_updates(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.wire.iter().filter_map(|m| {
            let params = &m["params"];
            let update = &params["update"];
            let kind = update["sessionUpdate"].as_str()?;
            (m["method"] == "session/update"
                && params["sessionId"] == self.session.as_str()
                && (kind == "tool_call" || kind == "tool_call_update"))
                .then_some(())?;
            Some((update["toolCallId"].as_str()?, update))
        })
    }

    /// The ids of the tool calls announced on the wire (`tool_call`), in order, once each.
    fn announced(&self) -> Vec<(&str, &Value)> {
        let mut seen: Vec<(&str, &Value)> = Vec::new();
        for (id, update) in self.tool_updates() {
            if update["sessionUpdate"] == "tool_call" && !seen.iter().any(|(s, _)| *s == id) {
                seen.push((id, update));
            }
        }
        seen
    }

    /// The last status the wire gave the tool call `id`.
    fn status(&self, id: &str) -> Option<&str> {
        self.tool_updates()
            .filter(|(call, _)| *call == id)
            .filter_map(|(_, update)| update["status"].as_str())
            .last()
    }

    /// The update that says the tool call `id` completed, if one does.
    fn completed(&self, id: &str) -> Option<&Value> {
        self.tool_updates()
            .find(|(call, update)| *call == id && update["status"] == "completed")
            .map(|(_, update)| update)
    }

    /// The tool-call records of the run's session.
    fn tool_records(&self) -> impl Iterator<Item = &Value> {
        self.records.iter().filter(|r| {
            let mirror = &r["metadata"]["aip44"];
            (r["action"] == "tool.call" || mirror["audit-event-kind"] == "tool-call")
                && (mirror["session"].is_null() || mirror["session"] == self.session.as_str())
        })
    }

    /// The record of the tool call `id`.
    fn record(&self, id: &str) -> Option<&Value> {
        self.tool_records().find(|r| r["subject"]["ref"] == id)
    }

    /// How the kit answered a permission request for `id`, if it was asked.
    fn answer(&self, id: &str) -> Option<Answer> {
        self.asked
            .iter()
            .find(|(call, _)| call == id)
            .map(|(_, answer)| *answer)
    }
}

/// A record's approval (`metadata.aip44.approval`).
fn approval(record: &Value) -> &Value {
    &record["metadata"]["aip44"]["approval"]
}

/// Whether a record says the call produced a result.
fn has_result(record: &Value) -> bool {
    !record["output"]["result"].is_null() || !record["metadata"]["aip44"]["result"].is_null()
}

/// Whether a record says the call ended in an error.
fn has_error(record: &Value) -> bool {
    !record["output"]["error"].is_null() || !record["metadata"]["aip44"]["error"].is_null()
}

/// Judges the agent's audit log with `judge`, or skips saying why the audit checks do not
/// apply; `with_prompts` also skips without `--tool-prompt`.
fn with_log(
    context: &Context,
    with_prompts: bool,
    judge: impl FnOnce(&Path) -> Result<Outcome, String>,
) -> Result<Outcome, String> {
    let log = match context.audit_log() {
        Ok(log) => log,
        Err(why) => return Ok(Outcome::Skip(why)),
    };
    if with_prompts && context.config.tool_prompts.is_empty() {
        return Ok(Outcome::Skip(
            "no --tool-prompt to drive the agent to a tool call".into(),
        ));
    }
    judge(&log)
}

/// The run with every permission allowed, made once and shared by the checks that judge it.
fn allowed_run<'a>(context: &'a Context, log: &Path) -> Result<&'a ToolRun, String> {
    context
        .allowed_run
        .get_or_init(|| drive(context, log, Answer::Allow))
        .as_ref()
        .map_err(Clone::clone)
}

/// `audit.chain`: after the run, the log verifies and holds the run's records.
pub fn chain(context: &Context) -> Result<Outcome, String> {
    with_log(context, false, |log| {
        let run = allowed_run(context, log)?;
        run.chain.as_ref().map_err(|e| format!("{}: {e}", log.display()))?;
        if run.records.is_empty() {
            return Err(format!(
                "{}: no audit record after a session and its turns",
                log.display()
            ));
        }
        Ok(Outcome::Pass)
    })
}

/// `audit.tool-calls`: every tool call on the wire has its record, with its approval.
pub fn tool_calls(context: &Context) -> Result<Outcome, String> {
    with_log(context, true, |log| {
        let run = allowed_run(context, log)?;
        let announced = run.announced();
        if announced.is_empty() {
            return Ok(Outcome::Skip(
                "the --tool-prompt turns put no tool_call on the wire".into(),
            ));
        }
        for (id, update) in announced {
            let call = format!("tool_call `{id}` ({})", trim(&update["title"].to_string()));
            let record = run.record(id).ok_or_else(|| {
                format!(
                    "{call} is on the wire, but {} has no tool.call record of it",
                    log.display()
                )
            })?;
            let approval = approval(record);
            let shown = trim(&approval.to_string());
            // A denied call on the wire is audit.denied-not-on-wire's finding.
            if !approval["deniedBy"].is_null() {
                continue;
            }
            let approved = !approval["approvedBy"].is_null();
            match run.answer(id) {
                Some(_) if !approved => {
                    return Err(format!("{call}: the kit approved it, the record's approval is {shown}"));
                }
                None if !(approved || approval == "auto") => {
                    return Err(format!(
                        "{call}: it ran without asking, the record's approval is {shown} (expected \"auto\")"
                    ));
                }
                _ => {}
            }
            match run.status(id) {
                Some("completed") if !has_result(record) => {
                    return Err(format!(
                        "{call} completed, but its record has no result: {}",
                        trim(&record.to_string())
                    ));
                }
                Some("failed") if !has_error(record) => {
                    return Err(format!(
                        "{call} failed, but its record has no error: {}",
                        trim(&record.to_string())
                    ));
                }
                _ => {}
            }
        }
        Ok(Outcome::Pass)
    })
}

/// `audit.denied-not-on-wire`: a call governance denied was neither announced nor asked about.
pub fn denied_not_on_wire(context: &Context) -> Result<Outcome, String> {
    with_log(context, true, |log| {
        let run = allowed_run(context, log)?;
        let denied: Vec<&Value> = run
            .tool_records()
            .filter(|r| !approval(r)["deniedBy"].is_null())
            .collect();
        if denied.is_empty() {
            return Ok(Outcome::Skip(
                "no tool call was denied: add a --tool-prompt that asks for a tool governance denies".into(),
            ));
        }
        for record in denied {
            let id = record["subject"]["ref"].as_str().unwrap_or_default();
            let tool = &record["metadata"]["aip44"]["tool"];
            let on_wire = run.wire.iter().find(|m| {
                let update = &m["params"]["update"];
                let asked = &m["params"]["toolCall"];
                (m["method"] == "session/update"
                    && update["toolCallId"] == id
                    && (update["sessionUpdate"] == "tool_call" || update["sessionUpdate"] == "tool_call_update"))
                    || (m["method"] == "session/request_permission" && asked["toolCallId"] == id)
                    || (m["method"] == "session/update"
                        && update["sessionUpdate"] == "tool_call"
                        && tool.is_string()
                        && (update["title"] == *tool || update["name"] == *tool))
            });
            if let Some(message) = on_wire {
                return Err(format!(
                    "governance denied `{}` (record {}), yet it reached the wire: {}",
                    tool.as_str().unwrap_or(id),
                    record["seq"],
                    trim(&message.to_string())
                ));
            }
            if has_result(record) {
                return Err(format!(
                    "a denied call's record has a result: {}",
                    trim(&record.to_string())
                ));
            }
        }
        Ok(Outcome::Pass)
    })
}

/// Judges the calls the kit did not approve in `run`: none ran, each has a record that says
/// it was rejected, with an error and no result.
fn not_run(run: &ToolRun, log: &Path, how: &str) -> Result<Outcome, String> {
    let refused: Vec<&str> = run
        .asked
        .iter()
        .filter(|(_, answer)| *answer != Answer::Allow)
        .map(|(id, _)| id.as_str())
        .collect();
    if refused.is_empty() {
        return Ok(Outcome::Skip(
            "no permission was requested: add a --tool-prompt for a tool that needs approval".into(),
        ));
    }
    for id in refused {
        if let Some(update) = run.completed(id) {
            return Err(format!(
                "tool call `{id}` {how}, yet it ran: {}",
                trim(&update.to_string())
            ));
        }
        let record = run.record(id).ok_or_else(|| {
            format!(
                "tool call `{id}` {how}, and {} has no tool.call record of it",
                log.display()
            )
        })?;
        if approval(record)["rejectedBy"].is_null() || has_result(record) || !has_error(record) {
            return Err(format!(
                "tool call `{id}` {how}; its record should say rejectedBy, with an error and no result: {}",
                trim(&record.to_string())
            ));
        }
    }
    Ok(Outcome::Pass)
}

/// `audit.rejected-not-run`: a permission request answered reject does not run the tool.
pub fn rejected_not_run(context: &Context) -> Result<Outcome, String> {
    with_log(context, true, |log| {
        let run = drive(context, log, Answer::Reject)?;
        not_run(&run, log, "was rejected by the kit")
    })
}

/// `audit.unanswered-not-run`: a permission request left unanswered (the turn cancelled
/// instead) does not run the tool, and the turn still ends.
pub fn unanswered_not_run(context: &Context) -> Result<Outcome, String> {
    with_log(context, true, |log| {
        let run = drive(context, log, Answer::Unanswered)?;
        not_run(&run, log, "was left unanswered and its turn cancelled")
    })
}
