//! Reading a record line strictly: JSON in which no object repeats a key, at any depth.
//!
//! `serde_json::Value` keeps the last of two equal keys, so `{"output":"FORGED",…,"output":…}`
//! would hash like the record without the first `output` while a reader that keeps the first
//! key sees the forged value. A record with a repeated key therefore never verifies.
//!
//! Records nest up to [`MAX_READ_DEPTH`] levels (see [`super::depth`]): `serde_json`'s own
//! limit of 128 levels is lifted here, and the visitor below stops at that depth instead, so
//! reading never recurses deeper.

use std::fmt;

use serde::de::{self, DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::depth::{MAX_READ_DEPTH, MAX_WRITE_DEPTH};

/// How the visitor's message for a repeated key starts.
const DUPLICATE: &str = "duplicate key";

/// Reads one line of an audit log (without its `\n`) as the verifier does: a JSON value in
/// which no object repeats a key, nested at most [`MAX_READ_DEPTH`] levels deep (records
/// written before the writer bounded their depth included). Every reader of a log should read
/// its records with this, so that it reads what the writer wrote and what the verifier
/// accepts. The error says why, in a sentence: `duplicate key "k" in a.b[2] (column N): …`,
/// `nested deeper than 256 levels (column N): …` or `not JSON: …`.
pub fn parse_record(line: &str) -> Result<Value, String> {
    let mut deserializer = serde_json::Deserializer::from_str(line);
    // The visitor stops at MAX_READ_DEPTH, so the parser never recurses deeper than that.
    deserializer.disable_recursion_limit();
    let parsed = Unique { at: &At::Top, level: 1 }
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    parsed.map_err(|error| match error.classify() {
        // Only the visitor below raises data errors: a repeated key, or too deep a value.
        serde_json::error::Category::Data => {
            let full = error.to_string();
            let suffix = format!(" at line {} column {}", error.line(), error.column());
            let message = full.strip_suffix(&suffix).unwrap_or(&full);
            let why = if message.starts_with(DUPLICATE) {
                "a record must not repeat a key, since only one of the values is hashed".to_string()
            } else {
                format!(
                    "deeper than any record acp-audit reads (it writes them within {MAX_WRITE_DEPTH} levels, \
                     keeping what nests deeper as text)"
                )
            };
            format!("{message} (column {}): {why}", error.column())
        }
        _ => format!("not JSON: {error}"),
    })
}

/// Where a value sits in the record, for messages.
enum At<'a> {
    Top,
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Top => Ok(()),
            At::Key(parent, key) => {
                parent.fmt(f)?;
                let plain = !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$'));
                match (plain, parent) {
                    (true, At::Top) => f.write_str(key),
                    (true, _) => write!(f, ".{key}"),
                    (false, _) => write!(f, "[{}]", Value::String((*key).to_string())),
                }
            }
            At::Index(parent, index) => {
                parent.fmt(f)?;
                write!(f, "[{index}]")
            }
        }
    }
}

/// Builds a [`Value`] like `serde_json` does, but errors on a repeated key and on an array or
/// object nested deeper than [`MAX_READ_DEPTH`].
struct Unique<'a> {
    at: &'a At<'a>,
    /// The nesting level of an array or object read here (the top one is level 1).
    level: usize,
}

impl Unique<'_> {
    /// An error when an array or object read here would be nested too deep.
    fn check_level<E: de::Error>(&self) -> Result<(), E> {
        if self.level > MAX_READ_DEPTH {
            return Err(E::custom(format!("nested deeper than {MAX_READ_DEPTH} levels")));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.check_level()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Unique {
            at: &At::Index(self.at, items.len()),
            level: self.level + 1,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.check_level()?;
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if members.contains_key(&key) {
                let place = match self.at {
                    At::Top => "at the top level".to_string(),
                    at => format!("in {at}"),
                };
                return Err(A::Error::custom(format!("{DUPLICATE} {} {place}", Value::String(key))));
            }
            let value = map.next_value_seed(Unique {
                at: &At::Key(self.at, &key),
                level: self.level + 1,
            })?;
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_serde_json_reads_them() {
        let text = r#"{"a":[1,-2,3.5,18446744073709551615,true,null,"é\n"],"b":{"c":{}},"d":[]}"#;
        assert_eq!(parse_record(text), Ok(serde_json::from_str::<Value>(text).unwrap()));
    }

    #[test]
    fn repeated_keys_are_named_with_their_path() {
        let cases = [
            (r#"{"a":1,"a":2}"#, r#"duplicate key "a" at the top level (column 10)"#),
            (
                r#"{"a":{"b":[0,{"c":1,"c":1}]}}"#,
                r#"duplicate key "c" in a.b[1] (column 23)"#,
            ),
            (
                r#"{"x.y":{"\n":1,"\n":2}}"#,
                r#"duplicate key "\n" in ["x.y"] (column 19)"#,
            ),
        ];
        for (text, reason) in cases {
            let error = parse_record(text).unwrap_err();
            assert!(error.starts_with(reason), "{text}: {error}");
        }
        // Equal keys in different objects are fine.
        assert!(parse_record(r#"{"a":{"a":1},"b":{"a":2}}"#).is_ok());
    }

    #[test]
    fn syntax_errors_are_not_json() {
        for text in ["{", "{} x", "{\"a\":1,}", "[1e999]"] {
            assert!(parse_record(text).unwrap_err().starts_with("not JSON: "), "{text}");
        }
    }

    /// `levels` nested arrays, then `levels` nested objects, with keys `k`.
    fn nested_text(levels: usize) -> String {
        let arrays = "[".repeat(levels / 2) + &"]".repeat(levels / 2);
        let objects = levels - levels / 2;
        "{\"k\":".repeat(objects) + &arrays + &"}".repeat(objects)
    }

    #[test]
    fn values_nest_up_to_the_read_limit_and_no_deeper() {
        // Deeper than serde_json's own limit (128), as records written before issue #44 may be.
        for levels in [127, 128, 130, MAX_READ_DEPTH] {
            let value = parse_record(&nested_text(levels)).unwrap_or_else(|e| panic!("{levels}: {e}"));
            assert_eq!(super::super::depth::depth(&value), levels);
        }
        let error = parse_record(&nested_text(MAX_READ_DEPTH + 1)).unwrap_err();
        assert!(error.starts_with("nested deeper than 256 levels (column "), "{error}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        // Within half the stack of a test thread or a tokio worker (2 MiB), in a debug build.
        let deep = std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(|| {
                let deepest = parse_record(&nested_text(MAX_READ_DEPTH)).map(|_| ());
                let too_deep = ["[", "{\"a\":"].map(|open| parse_record(&open.repeat(100_000)));
                (deepest, too_deep)
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        assert_eq!(deep.0, Ok(()));
        for error in deep.1 {
            let error = error.unwrap_err();
            assert!(error.starts_with("nested deeper than 256 levels"), "{error}");
        }
    }
}
