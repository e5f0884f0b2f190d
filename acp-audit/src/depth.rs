//! How deeply a record may nest: the one rule the writer and every reader of a log share.
//!
//! A record holds values that came from elsewhere (a tool's arguments and result, an agent's
//! `rawInput`, an MCP server's `structuredContent`), nested as deeply as their sender liked.
//! JSON readers stop at some depth (`serde_json` at 128 levels), so a record written as deep
//! as it came could not be read back: the chain would no longer verify, and the log would no
//! longer open for appending.
//!
//! So the writer keeps every record within [`MAX_WRITE_DEPTH`] levels: a value that would nest
//! deeper is replaced, at that level, by the placeholder `{"$deepJson": "<its compact JSON
//! text>"}`, which keeps all of it. Readers (verification, [`AuditLog::open`] and its recovery,
//! [`parse_record`]) accept up to [`MAX_READ_DEPTH`] levels, far beyond what the writer writes,
//! so records written before the bound (up to about 130 levels from a peer's JSON) still read.
//!
//! [`AuditLog::open`]: super::AuditLog::open
//! [`parse_record`]: super::parse_record

use serde_json::{Map, Value};

/// The deepest nesting of a record this crate writes, counting the record object as level 1:
/// well within what common JSON readers accept (`serde_json`: 127 levels).
pub const MAX_WRITE_DEPTH: usize = 64;

/// The deepest nesting of a record the readers accept (the record object is level 1); a deeper
/// line is reported as a broken chain, read without recursing past this depth.
pub const MAX_READ_DEPTH: usize = 256;

/// The only key of the placeholder that holds, as compact JSON text, a value the writer found
/// nested deeper than [`MAX_WRITE_DEPTH`].
pub const DEEP_JSON_KEY: &str = "$deepJson";

/// The deepest nesting every common JSON reader accepts (`serde_json`'s default limit lets
/// 127 levels through, 128 fail); a message deeper than this is one its peer may not read.
pub const PEER_READ_DEPTH: usize = 127;

/// Keeps the members of the record `record` within [`MAX_WRITE_DEPTH`] levels.
pub(crate) fn bound_record(record: &mut Map<String, Value>) {
    for member in record.values_mut() {
        bound(member, 2);
    }
}

/// Keeps `value`, at nesting level `level` of the message it is put in (an array or object
/// there is level `level`'s container; the message object is level 1), within
/// [`MAX_WRITE_DEPTH`] levels: a container at the last level that holds another container
/// becomes the placeholder `{"$deepJson": "<its JSON text>"}`. The one rule for a record, and
/// for a value from a peer that agentacp puts in a message to another.
///
/// Recursion stops at [`MAX_WRITE_DEPTH`]; the text of a replaced value is written by
/// `serde_json`, which recurses as deep as the value nests (a value parsed from JSON nests at
/// most 128 levels).
pub fn bound(value: &mut Value, level: usize) {
    let is_container = |v: &Value| v.is_array() || v.is_object();
    let nested = match &*value {
        Value::Array(items) => items.iter().any(is_container),
        Value::Object(members) => members.values().any(is_container),
        _ => return,
    };
    if !nested {
        return;
    }
    if level >= MAX_WRITE_DEPTH {
        let text = value.to_string();
        *value = Value::Object(Map::from_iter([(DEEP_JSON_KEY.to_string(), Value::String(text))]));
        return;
    }
    match value {
        Value::Array(items) => items.iter_mut().for_each(|item| bound(item, level + 1)),
        Value::Object(members) => members.values_mut().for_each(|member| bound(member, level + 1)),
        _ => {}
    }
}

/// The JSON text `text` (a whole message) kept within [`MAX_WRITE_DEPTH`] levels by the rule
/// of [`bound`], or `None` when it nests no deeper than that already. For a message too deep
/// to parse (it is read without recursion): each container at level [`MAX_WRITE_DEPTH`] that
/// holds another container becomes `{"$deepJson": "<its text, whitespace outside strings
/// removed>"}`. Text that is not JSON comes back as a reader would make of it, unparsable still.
pub fn bound_text(text: &str) -> Option<String> {
    if text_depth(text.as_bytes()) <= MAX_WRITE_DEPTH {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut at, mut copied, mut level) = (0, 0, 0usize);
    while at < bytes.len() {
        match bytes[at] {
            b'"' => at = string_end(bytes, at),
            b'{' | b'[' if level + 1 == MAX_WRITE_DEPTH => {
                let end = container_end(bytes, at);
                if text_depth(&bytes[at..end]) > 1 {
                    out.push_str(&text[copied..at]);
                    let kept = Value::String(compact(&text[at..end]));
                    out.push_str(&format!("{{\"{DEEP_JSON_KEY}\":{kept}}}"));
                    copied = end;
                }
                at = end;
            }
            b'{' | b'[' => {
                level += 1;
                at += 1;
            }
            b'}' | b']' => {
                level = level.saturating_sub(1);
                at += 1;
            }
            _ => at += 1,
        }
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// How many levels the JSON text `bytes` nests (0 for a scalar), counted without recursion.
pub fn text_depth(bytes: &[u8]) -> usize {
    let (mut at, mut level, mut deepest) = (0, 0usize, 0);
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                at = string_end(bytes, at);
                continue;
            }
            b'{' | b'[' => {
                level += 1;
                deepest = deepest.max(level);
            }
            b'}' | b']' => level = level.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    deepest
}

/// Where the string that opens at `bytes[start]` (a `"`) ends: just after its closing quote,
/// or the end of the text.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => return at + 1,
            b'\\' => at += 2,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// Where the container that opens at `bytes[start]` ends: just after its closing bracket, or
/// the end of the text.
fn container_end(bytes: &[u8], start: usize) -> usize {
    let (mut at, mut level) = (start, 0usize);
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                at = string_end(bytes, at);
                continue;
            }
            b'{' | b'[' => level += 1,
            b'}' | b']' => {
                level = level.saturating_sub(1);
                if level == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
        at += 1;
    }
    bytes.len()
}

/// `text` without the whitespace outside its strings.
fn compact(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                let end = string_end(bytes, at);
                out.push_str(&text[at..end]);
                at = end;
            }
            b' ' | b'\t' | b'\r' | b'\n' => at += 1,
            _ => {
                // Up to the next quote or whitespace: ASCII bytes, so char boundaries.
                let end = (at + 1..bytes.len())
                    .find(|&i| matches!(bytes[i], b'"' | b' ' | b'\t' | b'\r' | b'\n'))
                    .unwrap_or(bytes.len());
                out.push_str(&text[at..end]);
                at = end;
            }
        }
    }
    out
}

/// How many levels `value` nests: 0 for a scalar, 1 for an array or object of scalars, …
#[cfg(test)]
pub(crate) fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `levels` nested arrays around `inner`.
    fn nested(levels: usize, inner: Value) -> Value {
        (0..levels).fold(inner, |value, _| Value::Array(vec![value]))
    }

    #[test]
    fn a_shallow_record_is_untouched() {
        let Value::Object(mut record) = json!({"a": [1, {"b": [2]}], "c": "x"}) else {
            unreachable!()
        };
        let before = record.clone();
        bound_record(&mut record);
        assert_eq!(record, before);
    }

    #[test]
    fn the_deepest_record_kept_whole_and_the_first_bounded() {
        // The record is level 1, so a member may nest MAX_WRITE_DEPTH - 1 levels.
        for (levels, bounded) in [(MAX_WRITE_DEPTH - 1, false), (MAX_WRITE_DEPTH, true)] {
            let member = nested(levels, json!(7));
            let mut record = Map::from_iter([("input".to_string(), member.clone())]);
            bound_record(&mut record);
            let record = Value::Object(record);
            assert!(depth(&record) <= MAX_WRITE_DEPTH, "{levels}");
            assert_eq!(record["input"] != member, bounded, "{levels}");
        }
    }

    /// The text form keeps a message as the value form does, and reads without recursion.
    #[test]
    fn a_deep_message_text_is_bounded_as_its_value_would_be() {
        for levels in [MAX_WRITE_DEPTH - 4, 100, 125] {
            let message = json!({"params": {"update": {"rawInput": nested(levels, json!({"p": "a b"}))}}});
            let text = message.to_string();
            let Value::Object(mut record) = message else {
                unreachable!()
            };
            bound_record(&mut record);
            let expected = Value::Object(record).to_string();
            match bound_text(&text) {
                None => assert_eq!(expected, text, "{levels}"),
                Some(bounded) => assert_eq!(bounded, expected, "{levels}"),
            }
        }
        let deep = format!("{{\"a\": {}1{}}}", "[ ".repeat(100_000), " ]".repeat(100_000));
        let bounded = bound_text(&deep).expect("bounded");
        let read: Value = serde_json::from_str(&bounded).expect("any reader reads it");
        assert_eq!(depth(&read), MAX_WRITE_DEPTH);
        assert_eq!(text_depth(deep.as_bytes()), 100_001);
        assert_eq!(bound_text(r#"{"a":"[[[[[[["}"#), None);
    }

    #[test]
    fn a_deeper_value_is_kept_as_its_json_text() {
        for levels in [100, 126, 127, 1_000] {
            let member = json!({"arguments": nested(levels, json!({"path": "a"}))});
            let mut record = Map::from_iter([("input".to_string(), member.clone())]);
            bound_record(&mut record);
            let record = Value::Object(record);
            assert_eq!(depth(&record), MAX_WRITE_DEPTH, "{levels}");
            // Walk down to the placeholder: the first container that holds the text.
            let mut at = &record["input"]["arguments"];
            while at.get(DEEP_JSON_KEY).is_none() {
                at = &at[0];
            }
            let text = at[DEEP_JSON_KEY].as_str().expect("the placeholder holds text");
            let containers = text.matches('[').count() + text.matches('{').count();
            assert_eq!(
                containers + MAX_WRITE_DEPTH - 3,
                levels + 1,
                "{levels}: nothing is lost"
            );
            if levels > 127 {
                // The text is deeper than serde_json reads by default; it is all there.
                continue;
            }
            let kept: Value = serde_json::from_str(text).unwrap();
            let mut whole = &member["arguments"];
            for _ in 0..MAX_WRITE_DEPTH - 3 {
                whole = &whole[0];
            }
            assert_eq!(&kept, whole, "{levels}");
        }
    }
}
