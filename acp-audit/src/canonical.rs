//! Canonical JSON (the bytes a record's hash is computed over) and the SHA-256 helper.
//!
//! The form is RFC 8785 (JCS) for every record whose integers fit in an IEEE-754 double
//! exactly (|n| ≤ 2^53, the I-JSON range): no whitespace, object members sorted by the UTF-16
//! code units of their keys, strings with only `"`, `\` and the control characters escaped
//! (`\b \f \n \r \t`, else `\u00xx` in lowercase hex), and numbers as ECMAScript's
//! `Number::toString` writes their double (RFC 8785 §3.2.2.3, via `ryu-js`): `1.0` is `1`,
//! `-0.0` is `0`, `1e21` is `1e+21`, `1e-6` is `0.000001`, `1e-7` is `1e-7`.
//!
//! One deliberate exception: an integer `serde_json` holds as `u64` / `i64` is written in
//! plain decimal, exactly, even beyond 2^53, where JCS would write the nearest double
//! (`9007199254740993` → `9007199254740992`). Such a record is outside I-JSON, the domain
//! RFC 8785 is defined on (other implementations refuse it or have already rounded the
//! number when parsing); writing the integer exactly keeps it covered by the hash (a rounded
//! form would let `…993` be changed to `…992` undetected) and keeps the hashes of logs
//! written before this form was adopted. `NaN` and the infinities cannot occur: a
//! `serde_json::Value` never holds them.
//!
//! Logs written before issue #21 hashed non-integer numbers as `serde_json` writes them
//! (`1.0`, `1e-6`); [`legacy_object_without`] reproduces that form so the verifier
//! still accepts those records (see `docs/audit.md`, "The chain").

use std::fmt::Write as _;

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

/// The canonical JSON text of `value`: RFC 8785 (JCS), integers beyond 2^53 kept exact (see
/// the module documentation for the exact form).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, Numbers::Jcs, &mut out);
    out
}

/// The canonical JSON text of the object `map` without its member `skip`.
pub(crate) fn canonical_object_without(map: &Map<String, Value>, skip: &str) -> String {
    let mut out = String::new();
    write_object(map, Some(skip), Numbers::Jcs, &mut out);
    out
}

/// The pre-RFC 8785 form of [`canonical_object_without`] (non-integer numbers as
/// `serde_json` writes them), which records written before issue #21 were hashed over.
pub(crate) fn legacy_object_without(map: &Map<String, Value>, skip: &str) -> String {
    let mut out = String::new();
    write_object(map, Some(skip), Numbers::Legacy, &mut out);
    out
}

/// How a number that is not an integer is written.
#[derive(Clone, Copy)]
enum Numbers {
    /// ECMAScript `Number::toString` of the double (RFC 8785 §3.2.2.3).
    Jcs,
    /// `serde_json`'s own form (shortest round trip, `1.0`, `1e-6`): logs before issue #21.
    Legacy,
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

fn write_value(value: &Value, numbers: Numbers, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => write_number(number, numbers, out),
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, numbers, out);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(map, None, numbers, out),
    }
}

fn write_number(number: &Number, numbers: Numbers, out: &mut String) {
    // Integers are exact in both forms, whatever their size (see the module documentation).
    if let Some(n) = number.as_u64() {
        let _ = write!(out, "{n}");
    } else if let Some(n) = number.as_i64() {
        let _ = write!(out, "{n}");
    } else if let (Numbers::Jcs, Some(f)) = (numbers, number.as_f64()) {
        // Always finite (a `Number` holds no NaN or infinity); `format` would still write
        // `NaN` / `Infinity` rather than panic.
        out.push_str(ryu_js::Buffer::new().format(f));
    } else {
        out.push_str(&number.to_string());
    }
}

fn write_object(map: &Map<String, Value>, skip: Option<&str>, numbers: Numbers, out: &mut String) {
    // The workspace's serde_json keeps insertion order, so sort here, by UTF-16 code units
    // (which differs from byte order for characters above U+FFFF vs U+E000..U+FFFF).
    let mut members: Vec<(&String, &Value)> = map.iter().filter(|(key, _)| Some(key.as_str()) != skip).collect();
    members.sort_by(|(a, _), (b, _)| utf16_order(a, b));
    out.push('{');
    for (i, (key, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        write_value(value, numbers, out);
    }
    out.push('}');
}

/// The order of `a` and `b` by UTF-16 code units. It is their byte order unless one holds a
/// character at U+E000 or above (UTF-8 lead byte 0xEE or higher), which is rare in keys.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    let wide = |text: &str| text.bytes().any(|byte| byte >= 0xee);
    if wide(a) || wide(b) {
        a.encode_utf16().cmp(b.encode_utf16())
    } else {
        a.cmp(b)
    }
}

fn write_string(text: &str, out: &mut String) {
    out.push('"');
    // Only ASCII characters are escaped, so the text is copied in runs between them.
    let mut run_start = 0;
    for (i, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[run_start..i]);
        run_start = i + 1;
        if escape.is_empty() {
            let code = usize::from(byte);
            out.push_str("\\u00");
            out.push(HEX[code >> 4] as char);
            out.push(HEX[code & 0xf] as char);
        } else {
            out.push_str(escape);
        }
    }
    out.push_str(&text[run_start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
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
        // Integers beyond 2^53 stay exact (the module's one deliberate departure from JCS).
        let value = json!({
            "list": [3, -1, {"k": [], "j": {}}, "x"], "n": 18446744073709551615u64,
            "m": i64::MIN, "s": 9007199254740993u64, "f": 1.5, "t": false
        });
        assert_eq!(
            canonical_json(&value),
            r#"{"f":1.5,"list":[3,-1,{"j":{},"k":[]},"x"],"m":-9223372036854775808,"n":18446744073709551615,"s":9007199254740993,"t":false}"#
        );
    }

    /// The canonical form of the double with these IEEE-754 bits.
    fn of_bits(bits: u64) -> Option<String> {
        Number::from_f64(f64::from_bits(bits)).map(|n| canonical_json(&Value::Number(n)))
    }

    #[test]
    fn rfc8785_appendix_b_numbers() {
        // RFC 8785 Appendix B: IEEE-754 bits → the JSON number JCS writes.
        let vectors = [
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        let failures: Vec<String> = vectors
            .iter()
            .filter_map(|&(bits, want)| {
                let got = of_bits(bits);
                (got.as_deref() != Some(want)).then(|| format!("{bits:016x}: {got:?}, want {want}"))
            })
            .collect();
        assert!(failures.is_empty(), "{failures:#?}");
        // The table's NaN and Infinity rows are errors in JCS; a serde_json Value cannot hold them.
        for bits in [0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000] {
            assert_eq!(of_bits(bits), None);
        }
    }

    #[test]
    fn numbers_as_ecmascript_writes_them() {
        // As parsed from a line (serde_json reads `1.0`, `-0` and `1E30` as doubles).
        for (text, want) in [
            ("1.0", "1"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("1e21", "1e+21"),
            ("1E30", "1e+30"),
            ("1e20", "100000000000000000000"),
            ("1e-7", "1e-7"),
            ("1e-6", "0.000001"),
            ("0.1", "0.1"),
            ("100e-2", "1"),
            ("123456789012.0", "123456789012"),
            ("1e16", "10000000000000000"),
            ("-1.5e-9", "-1.5e-9"),
            ("4.50", "4.5"),
            // Two shortest digit strings are equally close: ECMAScript takes the even one.
            ("1076874665820451.25", "1076874665820451.2"),
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(canonical_json(&value), want, "{text}");
        }
        assert_eq!(canonical_json(&json!(0.1 + 0.2)), "0.30000000000000004");
    }

    #[test]
    fn the_rfc8785_example() {
        // RFC 8785 §3.2.2: the input and its canonical form.
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        let value: Value = serde_json::from_str(input).unwrap();
        assert_eq!(
            canonical_json(&value),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn the_legacy_form_is_serde_json_s() {
        let Value::Object(map) = json!({"a": 1.0, "b": 1e21, "c": 1e-6, "d": 7, "hash": "x"}) else {
            unreachable!()
        };
        // The serde_json of this lockfile (1.0.154) writes `1e+21`; older ones wrote `1e21`.
        assert_eq!(
            legacy_object_without(&map, "hash"),
            r#"{"a":1.0,"b":1e+21,"c":1e-6,"d":7}"#
        );
        assert_eq!(
            canonical_object_without(&map, "hash"),
            r#"{"a":1,"b":1e+21,"c":0.000001,"d":7}"#
        );
    }

    /// ECMAScript `Number::toString` (ECMA-262 §6.1.6.1.20) built from the shortest digits of
    /// Rust's own formatter (`{:e}`), independently of `ryu-js` (except that Rust may break a
    /// tie between two closest digit strings the other way).
    fn ecmascript(f: f64) -> String {
        if f == 0.0 {
            return "0".into();
        }
        if f < 0.0 {
            return format!("-{}", ecmascript(-f));
        }
        let exp = format!("{f:e}");
        let (mantissa, e) = exp.split_once('e').unwrap();
        let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
        let k = digits.len() as i64;
        let n = e.parse::<i64>().unwrap() + 1;
        if k <= n && n <= 21 {
            digits + &"0".repeat((n - k) as usize)
        } else if 0 < n && n <= 21 {
            format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
        } else if -6 < n && n <= 0 {
            format!("0.{}{digits}", "0".repeat((-n) as usize))
        } else {
            let sign = if n - 1 < 0 { '-' } else { '+' };
            let (first, rest) = digits.split_at(1);
            let dot = if rest.is_empty() { "" } else { "." };
            format!("{first}{dot}{rest}e{sign}{}", (n - 1).abs())
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        #[test]
        fn doubles_round_trip_and_match_an_independent_formatter(
            f in prop_oneof![
                any::<u64>().prop_map(f64::from_bits),
                -1e7..1e7f64,
                any::<i64>().prop_map(|i| i as f64),
                (-400i32..400).prop_map(|e| 10f64.powi(e)),
            ].prop_filter("finite", |f| f.is_finite())
        ) {
            let Some(number) = Number::from_f64(f) else { unreachable!() };
            let text = canonical_json(&Value::Number(number));
            prop_assert_eq!(text.parse::<f64>().ok(), Some(f), "{} does not read back", text);
            let reference = ecmascript(f);
            // Rust's digits may round a tie the other way: ECMAScript then takes the even one.
            let tie = text.len() == reference.len()
                && text[..text.len() - 1] == reference[..reference.len() - 1]
                && reference.parse::<f64>().ok() == Some(f)
                && text.ends_with(['0', '2', '4', '6', '8']);
            prop_assert!(text == reference || tie, "{} where the reference has {}", text, reference);
        }
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
