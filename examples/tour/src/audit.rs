//! The last step: verify the server's audit log and check it says what happened.

use std::collections::BTreeMap;
use std::path::Path;

use agentacp::audit::verify;
use agentacp::prelude::*;

use crate::UNLISTED_TOOL;

/// Verifies the hash chain, prints a summary, and checks the tool-call records carry the
/// approvals the tour saw: `auto` for the read, approved by the tour's client for the write,
/// denied by governance for the unlisted tool.
pub fn check(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let summary = verify(text.as_bytes()).map_err(|error| format!("{}: {error}", path.display()))?;
    let last = summary.last_hash.as_deref().unwrap_or("none");
    println!("  the hash chain holds: {} records, last hash {last}", summary.records);
    // The chain verified, so every line is a JSON object.
    let records: Vec<Value> = text
        .lines()
        .filter_map(|line| agentacp::audit::parse_record(line).ok())
        .collect();

    let mut actions = BTreeMap::<String, usize>::new();
    for record in &records {
        *actions
            .entry(record["action"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    let counts: Vec<String> = actions
        .iter()
        .map(|(action, count)| format!("{action} ×{count}"))
        .collect();
    println!("  actions: {}", counts.join(", "));

    println!("  tool calls, with the approval AIP-44 mirrors:");
    let mut approvals = Vec::new();
    for record in records.iter().filter(|record| record["action"] == "tool.call") {
        let mirror = &record["metadata"]["aip44"];
        let tool = mirror["tool"].as_str().unwrap_or("?").to_string();
        let approval = describe_approval(&mirror["approval"]);
        println!("    {tool:<17} {approval}");
        approvals.push((tool, approval));
    }
    let expected = [
        ("read-file", "auto"),
        ("write-file", "approved by client:agentacp-tour"),
        (UNLISTED_TOOL, "denied by governance"),
    ];
    for (tool, approval) in expected {
        let found = approvals
            .iter()
            .any(|(seen_tool, seen)| seen_tool == tool && seen.starts_with(approval));
        if !found {
            return Err(format!(
                "expected a `{tool}` tool call recorded as {approval:?}; recorded: {approvals:?}"
            ));
        }
    }
    if !actions.contains_key("operator.interrupted") {
        return Err("expected the cancelled turn to be recorded as operator.interrupted".to_string());
    }
    for (action, what) in [
        ("session.mode", "the mode switches"),
        ("session.config", "the model change"),
        ("session.close", "the closed session"),
        ("session.resume", "the resumed session"),
    ] {
        if !actions.contains_key(action) {
            return Err(format!("expected {what} to be recorded as {action}"));
        }
    }
    Ok(())
}

/// `auto`, `approved by …`, `rejected by … (why)`, `denied by … (why)`.
fn describe_approval(approval: &Value) -> String {
    if let Some(text) = approval.as_str() {
        return text.to_string();
    }
    let why = approval["reason"]
        .as_str()
        .map(|reason| format!(" ({reason})"))
        .unwrap_or_default();
    for (key, verb) in [
        ("approvedBy", "approved"),
        ("rejectedBy", "rejected"),
        ("deniedBy", "denied"),
    ] {
        if let Some(who) = approval[key].as_str() {
            return format!("{verb} by {who}{why}");
        }
    }
    approval.to_string()
}
