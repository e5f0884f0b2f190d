//! Canonical JSON (the bytes a record's hash is computed over) and the SHA-256 helper.
//!
//! The form follows RFC 8785 (JCS) for everything an audit record normally holds: no
//! whitespace, object members sorted by the UTF-16 code units of their keys, strings with
//! only `"`, `\` and the control characters escaped (`\b \f \n \r \t`, else `\u00xx` in
//! lowercase hex), integers in plain decimal. Non-integer numbers are written the way
//! `serde_json` writes them (shortest round-trip form, e.g. `1.5`, `1e300`), which can differ
//! from the ECMAScript formatting JCS prescribes (`1.0` here is `1` there, `1e21` is `1e+21`);
//! a chain written and verified by this crate is unaffected, but another implementation
//! hashing such a record may disagree.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The canonical JSON text of `value` (see the module documentation for the exact form).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

/// The canonical JSON text of the object `map` without its member `skip`.
pub(crate) fn canonical_object_without(map: &Map<String, Value>, skip: &str) -> String {
    let mut out = String::new();
    write_object(map, Some(skip), &mut out);
    out
}

/// Lowercase hex SHA-256 of `text`'s UTF-8 bytes.
pub(crate) fn sha256_hex(text: &str) -> String {
    sha256_hex_bytes(text.as_bytes())
}

/// Lowercase hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex_bytes(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest.iter() {
        hex.push(HEX[usize::from(byte >> 4)] as char);
        hex.push(HEX[usize::from(byte & 0xf)] as char);
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => out.push_str(&number.to_string()),
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(map, None, out),
    }
}

fn write_object(map: &Map<String, Value>, skip: Option<&str>, out: &mut String) {
    // The workspace's serde_json keeps insertion order, so sort here, by UTF-16 code units
    // (which differs from byte order for characters above U+FFFF vs U+E000..U+FFFF).
    let mut members: Vec<(&String, &Value)> = map.iter().filter(|(key, _)| Some(key.as_str()) != skip).collect();
    members.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    out.push('{');
    for (i, (key, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        write_value(value, out);
    }
    out.push('}');
}

fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let code = u32::from(c) as usize;
                out.push_str("\\u00");
                out.push(HEX[code >> 4] as char);
                out.push(HEX[code & 0xf] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_whatever_the_insertion_order() {
        let value = json!({"b": 1, "a": 2, "c": {"z": true, "y": null}});
        assert_eq!(canonical_json(&value), r#"{"a":2,"b":1,"c":{"y":null,"z":true}}"#);
    }

    #[test]
    fn keys_sort_by_utf16_code_units_not_bytes() {
        // U+E000 is one UTF-16 unit 0xE000; U+1F600 is the surrogate pair D83D DE00.
        // In UTF-16 order the emoji comes first; in UTF-8 byte order (EE.. vs F0..) it is last.
        let mut map = Map::new();
        map.insert("\u{e000}".into(), json!(1));
        map.insert("\u{1f600}".into(), json!(2));
        map.insert("a".into(), json!(3));
        assert!("\u{e000}".as_bytes() < "\u{1f600}".as_bytes());
        assert_eq!(
            canonical_json(&Value::Object(map)),
            "{\"a\":3,\"\u{1f600}\":2,\"\u{e000}\":1}"
        );
    }

    #[test]
    fn the_jcs_example_key_order() {
        // RFC 8785 §3.2.3's sorting example keys (numeric keys, control, non-ASCII, emoji).
        let value = json!({
            "\u{20ac}": "Euro Sign", "\r": "Carriage Return", "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One", "\u{1f600}": "Emoji: Grinning Face", "\u{80}": "Control", "\u{f6}": "Latin Small Letter O With Diaeresis"
        });
        let keys: Vec<String> = canonical_json(&value)
            .trim_matches(['{', '}'])
            .split(',')
            .map(|m| m.split(':').next().unwrap_or_default().to_string())
            .collect();
        assert_eq!(
            keys,
            [
                "\"\\r\"",
                "\"1\"",
                "\"\u{80}\"",
                "\"\u{f6}\"",
                "\"\u{20ac}\"",
                "\"\u{1f600}\"",
                "\"\u{fb33}\""
            ]
        );
    }

    #[test]
    fn strings_are_escaped_like_serde_json() {
        assert_eq!(
            canonical_json(&json!("a\"b\\c\n\t\u{1}\u{1f}\u{7f}é/")),
            r#""a\"b\\c\n\t\u0001\u001f"#.to_string() + "\u{7f}é/\""
        );
        // Every character below U+0100 matches serde_json's own escaping.
        for code in 0u32..0x100 {
            let text: String = char::from_u32(code).into_iter().collect();
            assert_eq!(
                canonical_json(&json!(text)),
                serde_json::to_string(&text).unwrap(),
                "U+{code:04X}"
            );
        }
    }

    #[test]
    fn nested_values_and_numbers() {
        let value =
            json!({"list": [3, -1, {"k": [], "j": {}}, "x"], "n": 18446744073709551615u64, "f": 1.5, "t": false});
        assert_eq!(
            canonical_json(&value),
            r#"{"f":1.5,"list":[3,-1,{"j":{},"k":[]},"x"],"n":18446744073709551615,"t":false}"#
        );
    }

    #[test]
    fn a_member_can_be_left_out() {
        let Value::Object(map) = json!({"hash": "x", "b": 1, "a": 2}) else {
            unreachable!()
        };
        assert_eq!(canonical_object_without(&map, "hash"), r#"{"a":2,"b":1}"#);
    }

    #[test]
    fn sha256_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
