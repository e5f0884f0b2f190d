//! JSON-RPC 2.0 as ACP uses it: one JSON object per line, requests, notifications and
//! responses in both directions.
//!
//! [`frame`] reads lines with a size limit, [`cancels`] holds the peer's requests it may cancel, [`outbox`] is the one ordered writer, [`pending`]
//! matches responses to the requests we sent, [`stdio`] is stdin and stdout as the channel. This
//! module parses and encodes messages.

pub mod cancels;
pub mod frame;
pub mod outbox;
pub mod pending;
#[cfg(unix)]
pub mod stdio;
#[cfg(not(unix))]
#[path = "stdio_portable.rs"]
pub mod stdio;
mod write_now;

use std::fmt;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The JSON-RPC error codes ACP uses.
pub mod codes {
    /// The line is not JSON.
    pub const PARSE_ERROR: i32 = -32700;
    /// Not a valid request, or not allowed now (before `initialize`, frame too large).
    pub const INVALID_REQUEST: i32 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// The params do not fit the method (a missing `sessionId`, a bad `cwd`, ...).
    pub const INVALID_PARAMS: i32 = -32602;
    /// The handler failed.
    pub const INTERNAL_ERROR: i32 = -32603;
    /// The request was cancelled (`$/cancel_request`).
    pub const REQUEST_CANCELLED: i32 = -32800;
    /// Authentication is required first.
    pub const AUTH_REQUIRED: i32 = -32000;
    /// "Resource not found": the session, file or terminal a request names does not exist
    /// (ACP; an unknown session's answer carries `data.sessionId`).
    pub const RESOURCE_NOT_FOUND: i32 = -32002;
}

/// A request id: a number or a string (`null` only in answers to unreadable messages).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    /// A numeric id.
    Number(i64),
    /// A string id.
    String(String),
    /// `null`.
    Null,
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
            Id::Null => f.write_str("null"),
        }
    }
}

/// The error object of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// One of [`codes`], or an application code.
    pub code: i32,
    /// One sentence.
    pub message: String,
    /// Anything more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with a code and a message.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// One message read from the peer.
#[derive(Debug)]
pub enum Incoming {
    /// A request: answer it.
    Request {
        /// Its id.
        id: Id,
        /// The method.
        method: String,
        /// The params, unparsed.
        params: Option<Box<RawValue>>,
    },
    /// A notification: never answer it.
    Notification {
        /// The method.
        method: String,
        /// The params, unparsed.
        params: Option<Box<RawValue>>,
    },
    /// The answer to a request we sent.
    Response {
        /// The id of our request.
        id: Id,
        /// The result, or the error.
        outcome: Result<Box<RawValue>, RpcError>,
    },
}

/// A message that could not be read: the error to answer with, and the id to answer (when
/// there was one).
#[derive(Debug)]
pub struct Unreadable {
    /// The id, when the message had a readable one.
    pub id: Id,
    /// What to answer.
    pub error: RpcError,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    jsonrpc: Option<String>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present_raw")]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<RpcError>,
}

/// Reads a key that is present as `Some`, even when its value is `null`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// Reads a key that is present as `Some`, keeping a `null` result as the raw `null`.
fn present_raw<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(deserializer).map(Some)
}

/// Parses one line.
pub fn parse(line: &[u8]) -> Result<Incoming, Box<Unreadable>> {
    let unreadable = |id, code, message: String| {
        Box::new(Unreadable {
            id,
            error: RpcError::new(code, message),
        })
    };
    let envelope: Envelope = match serde_json::from_slice(line) {
        Ok(envelope) => envelope,
        Err(error) if error.is_data() => {
            let what = match serde_json::from_slice::<Value>(line) {
                Ok(Value::Array(_)) => "batches are not supported".to_string(),
                Ok(_) => format!("not a JSON-RPC message: {error}"),
                Err(_) => format!("not a JSON-RPC message: {error}"),
            };
            return Err(unreadable(Id::Null, codes::INVALID_REQUEST, what));
        }
        Err(error) => {
            return Err(unreadable(
                Id::Null,
                codes::PARSE_ERROR,
                format!("parse error: {error}"),
            ));
        }
    };
    let id = match envelope.id {
        None => None,
        Some(value) => match serde_json::from_value::<Id>(value) {
            Ok(id) => Some(id),
            Err(_) => {
                return Err(unreadable(
                    Id::Null,
                    codes::INVALID_REQUEST,
                    "`id` must be a number, a string or null".into(),
                ));
            }
        },
    };
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return Err(unreadable(
            id.unwrap_or(Id::Null),
            codes::INVALID_REQUEST,
            "`jsonrpc` must be \"2.0\"".into(),
        ));
    }
    match (envelope.method, id) {
        (Some(method), Some(id)) => Ok(Incoming::Request {
            id,
            method,
            params: envelope.params,
        }),
        (Some(method), None) => Ok(Incoming::Notification {
            method,
            params: envelope.params,
        }),
        (None, Some(id)) => match (envelope.result, envelope.error) {
            (_, Some(error)) => Ok(Incoming::Response {
                id,
                outcome: Err(error),
            }),
            (Some(result), None) => Ok(Incoming::Response {
                id,
                outcome: Ok(result),
            }),
            (None, None) => Err(unreadable(
                id,
                codes::INVALID_REQUEST,
                "a response needs `result` or `error`".into(),
            )),
        },
        (None, None) => Err(unreadable(
            Id::Null,
            codes::INVALID_REQUEST,
            "a message needs `method` or `id`".into(),
        )),
    }
}

#[derive(Serialize)]
struct OutRequest<'a, P> {
    jsonrpc: &'static str,
    id: &'a Id,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct OutNotification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct OutResult<'a, R> {
    jsonrpc: &'static str,
    id: &'a Id,
    result: &'a R,
}

#[derive(Serialize)]
struct OutError<'a> {
    jsonrpc: &'static str,
    id: &'a Id,
    error: &'a RpcError,
}

fn line(value: &impl Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_else(|error| {
        // Only a failing `Serialize` impl gets here; the peer still gets a well-formed line.
        serde_json::to_vec(&serde_json::json!({"jsonrpc": "2.0", "method": "$/error", "params": error.to_string()}))
            .unwrap_or_default()
    });
    bytes.push(b'\n');
    bytes
}

/// A request line.
pub fn encode_request(id: &Id, method: &str, params: &impl Serialize) -> Vec<u8> {
    line(&OutRequest {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

/// A notification line.
pub fn encode_notification(method: &str, params: &impl Serialize) -> Vec<u8> {
    line(&OutNotification {
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// A success response line.
pub fn encode_result(id: &Id, result: &impl Serialize) -> Vec<u8> {
    line(&OutResult {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// An error response line.
pub fn encode_error(id: &Id, error: &RpcError) -> Vec<u8> {
    line(&OutError {
        jsonrpc: "2.0",
        id,
        error,
    })
}

/// Whether the JSON `text` gives a key twice in one of its objects, at any depth (or cannot
/// be read). Parsers disagree on such a text (this crate's keeps the last value, others the
/// first), so what a peer decides on and what it passes on could differ: a bridge refuses
/// to pass it.
pub(crate) fn gives_a_key_twice(text: &str) -> bool {
    serde_json::from_str::<KeysOnce>(text).is_err()
}

/// A JSON value in which no object gives a key twice (its content is not kept).
struct KeysOnce;

impl<'de> Deserialize<'de> for KeysOnce {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeysOnceVisitor)
    }
}

struct KeysOnceVisitor;

impl<'de> serde::de::Visitor<'de> for KeysOnceVisitor {
    type Value = KeysOnce;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<KeysOnce, E> {
        Ok(KeysOnce)
    }
    fn visit_i64<E>(self, _: i64) -> Result<KeysOnce, E> {
        Ok(KeysOnce)
    }
    fn visit_u64<E>(self, _: u64) -> Result<KeysOnce, E> {
        Ok(KeysOnce)
    }
    fn visit_f64<E>(self, _: f64) -> Result<KeysOnce, E> {
        Ok(KeysOnce)
    }
    fn visit_str<E>(self, _: &str) -> Result<KeysOnce, E> {
        Ok(KeysOnce)
    }
    fn visit_unit<E>(self) -> Result<KeysOnce, E> {
        Ok(KeysOnce)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<KeysOnce, A::Error> {
        while items.next_element::<KeysOnce>()?.is_some() {}
        Ok(KeysOnce)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut entries: A) -> Result<KeysOnce, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = entries.next_key::<std::borrow::Cow<'de, str>>()? {
            if !keys.insert(key.to_string()) {
                return Err(serde::de::Error::custom(format_args!("the key `{key}` is given twice")));
            }
            entries.next_value::<KeysOnce>()?;
        }
        Ok(KeysOnce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Incoming, Box<Unreadable>> {
        parse(text.as_bytes())
    }

    #[test]
    fn a_key_given_twice_is_found_at_any_depth_and_escaped_alike() {
        for twice in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"params": {"name": "read", "name": "write"}}"#,
            r#"[{"x": {"y": [1, {"k": 1, "k": 1}]}}]"#,
            r#"{"name": 1, "n\u0061me": 2}"#,
            "{not json",
        ] {
            assert!(gives_a_key_twice(twice), "{twice}");
        }
        for once in [
            r#"{"a": 1, "b": {"a": 2}}"#,
            r#"[{"a": 1}, {"a": 2}]"#,
            "null",
            r#""s""#,
        ] {
            assert!(!gives_a_key_twice(once), "{once}");
        }
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        assert!(matches!(
            parsed(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#),
            Ok(Incoming::Request { id: Id::Number(1), .. })
        ));
        assert!(matches!(
            parsed(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(
            parsed(r#"{"jsonrpc":"2.0","id":"a","result":null}"#),
            Ok(Incoming::Response {
                id: Id::String(_),
                outcome: Ok(_)
            })
        ));
        assert!(matches!(
            parsed(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"no"}}"#),
            Ok(Incoming::Response {
                outcome: Err(RpcError { code: -1, .. }),
                ..
            })
        ));
    }

    #[test]
    fn a_null_id_is_a_request_not_a_notification() {
        assert!(matches!(
            parsed(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            Ok(Incoming::Request { id: Id::Null, .. })
        ));
    }

    #[test]
    fn bad_lines_get_the_right_code_and_keep_the_id() {
        let code = |text| parsed(text).unwrap_err().error.code;
        assert_eq!(code("{not json"), codes::PARSE_ERROR);
        assert_eq!(code("[1]"), codes::INVALID_REQUEST);
        assert_eq!(code("7"), codes::INVALID_REQUEST);
        assert_eq!(code(r#"{"id":1,"method":"x"}"#), codes::INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":[1],"method":"x"}"#),
            codes::INVALID_REQUEST
        );
        let missing = parsed(r#"{"jsonrpc":"1.0","id":9,"method":"x"}"#).unwrap_err();
        assert_eq!(missing.id, Id::Number(9));
    }

    #[test]
    fn encoded_lines_are_one_json_object_each() {
        let bytes = encode_error(&Id::Null, &RpcError::new(codes::PARSE_ERROR, "x"));
        assert_eq!(bytes.last(), Some(&b'\n'));
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["id"], Value::Null);
        assert_eq!(value["error"]["code"], -32700);
        let request = encode_request(&Id::Number(3), "m", &serde_json::json!({"a": 1}));
        assert_eq!(
            String::from_utf8(request).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"m\",\"params\":{\"a\":1}}\n"
        );
    }
}
