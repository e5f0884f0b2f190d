//! What generated wire modules (`scaffold-aip regen`) build on: the leniency deserializers
//! behind the schema's `x-deserialize-*` annotations, the three-state [`Patch`] field, the
//! method table types, and the decode error of the typed method enums.
//!
//! Generated code names everything here by its full path
//! (`::agentacp::wire::support::...`), so a module regenerated in a user's crate needs only
//! `agentacp` as a dependency; `serde` and `serde_json` are re-exported for the derives.

use std::fmt;

pub use serde;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
pub use serde_json;
pub use serde_json::Value;
pub use serde_json::value::RawValue;
pub use std::collections::BTreeMap;

/// `_meta`: a JSON object whose keys and values ACP reserves for extensions.
pub type Meta = serde_json::Map<String, Value>;

/// A JSON object of anything.
pub type JsonObject = serde_json::Map<String, Value>;

/// A field where absent, `null` and a value mean three different things: leave the stored
/// value as it is, clear it, or replace it (`SessionInfoUpdate.title`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Patch<T> {
    /// The key was absent: leave the stored value unchanged. Serializes as no key at all.
    #[default]
    Unchanged,
    /// The key was `null`: clear the stored value.
    Clear,
    /// The key had a value: replace the stored value with it.
    Set(T),
}

impl<T> Patch<T> {
    /// `true` for [`Patch::Unchanged`] (used to leave the key out when serializing).
    pub fn is_unchanged(&self) -> bool {
        matches!(self, Patch::Unchanged)
    }

    /// The new value, if this patch sets one.
    pub fn as_set(&self) -> Option<&T> {
        match self {
            Patch::Set(value) => Some(value),
            _ => None,
        }
    }
}

impl<T: Serialize> Serialize for Patch<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Patch::Set(value) => value.serialize(serializer),
            Patch::Unchanged | Patch::Clear => serializer.serialize_none(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(deserializer)? {
            Some(value) => Patch::Set(value),
            None => Patch::Clear,
        })
    }
}

/// `x-deserialize-default-on-error`: a value that does not fit becomes the type's default
/// instead of failing the whole message.
pub fn default_on_error<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

/// `x-deserialize-default-on-error` for a field whose schema names a default: a value that
/// does not fit becomes `fallback()`.
pub fn default_on_error_or<'de, D, T>(deserializer: D, fallback: fn() -> T) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).unwrap_or_else(|_| fallback()))
}

/// `x-deserialize-default-on-null`: `null` becomes the type's default (an empty list).
pub fn default_on_null<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A list field in any of the forms the generator emits (`Vec<T>`, `Option<Vec<T>>`,
/// `Patch<Vec<T>>`), for the skip-invalid-items deserializers.
pub trait ListField: Sized + Default {
    /// The element type.
    type Item: DeserializeOwned;
    /// The field for a JSON array (`Some`) or `null` (`None`); `None` when the field cannot
    /// be null.
    fn from_list(items: Option<Vec<Self::Item>>) -> Option<Self>;
}

impl<T: DeserializeOwned> ListField for Vec<T> {
    type Item = T;
    fn from_list(items: Option<Vec<T>>) -> Option<Self> {
        items
    }
}

impl<T: DeserializeOwned> ListField for Option<Vec<T>> {
    type Item = T;
    fn from_list(items: Option<Vec<T>>) -> Option<Self> {
        Some(items)
    }
}

impl<T: DeserializeOwned> ListField for Patch<Vec<T>> {
    type Item = T;
    fn from_list(items: Option<Vec<T>>) -> Option<Self> {
        Some(match items {
            Some(items) => Patch::Set(items),
            None => Patch::Clear,
        })
    }
}

fn keep_valid_items<L: ListField>(value: Value) -> Result<L, &'static str> {
    let items = match value {
        Value::Null => None,
        Value::Array(items) => Some(
            items
                .into_iter()
                .filter_map(|item| L::Item::deserialize(item).ok())
                .collect(),
        ),
        _ => return Err("expected an array"),
    };
    L::from_list(items).ok_or("expected an array, found null")
}

/// `x-deserialize-skip-invalid-items`: items that do not fit are dropped; anything but an
/// array (or `null`, where the field allows it) is still an error.
pub fn skip_invalid_items<'de, D, L>(deserializer: D) -> Result<L, D::Error>
where
    D: Deserializer<'de>,
    L: ListField,
{
    let value = Value::deserialize(deserializer)?;
    keep_valid_items(value).map_err(serde::de::Error::custom)
}

/// `x-deserialize-skip-invalid-items` together with `x-deserialize-default-on-error`: items
/// that do not fit are dropped, and a value that is not a list becomes the default.
pub fn skip_invalid_items_or_default<'de, D, L>(deserializer: D) -> Result<L, D::Error>
where
    D: Deserializer<'de>,
    L: ListField,
{
    let value = Value::deserialize(deserializer)?;
    Ok(keep_valid_items(value).unwrap_or_default())
}

/// The `Deserialize` of a result the schema gives as `null` (early revisions' `authenticate`,
/// `fs/write_text_file`, …): `null`, or an object whatever its keys (a newer peer's `{}`;
/// unknown fields are ignored everywhere). Anything else is an error.
pub fn null_result<'de, D: Deserializer<'de>>(deserializer: D) -> Result<(), D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Null | Value::Object(_) => Ok(()),
        other => Err(serde::de::Error::custom(format!(
            "expected `null` (a result without a payload), found {other}"
        ))),
    }
}

/// Which side of the connection handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The agent handles it; the client sends it.
    Agent,
    /// The client handles it; the agent sends it.
    Client,
    /// Either side may send it (`$/cancel_request`).
    Protocol,
}

/// One method of a revision's method table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    /// The wire name (`session/prompt`).
    pub name: &'static str,
    /// Who handles it.
    pub side: Side,
    /// The params type (`PromptRequest`, or the notification type).
    pub params: &'static str,
    /// The result type for a request; `None` for a notification.
    pub result: Option<&'static str>,
}

impl MethodInfo {
    /// `true` for a notification (no response).
    pub fn is_notification(&self) -> bool {
        self.result.is_none()
    }
}

/// A `session/update` operator code may send with `Turn::update`: a revision's generated
/// `OperatorUpdate`, which has every kind of update but the tool calls (those go through the
/// governed `Turn::tool_call`, so an ungoverned one does not compile). Implemented by the
/// generator only; the runtime still refuses a tool call that reaches it another way.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an update operator code may send: `Turn::update` takes `wire::OperatorUpdate`",
    label = "not a `wire::OperatorUpdate`",
    note = "tool calls are governed and audited: send them with `turn.tool_call(..)` (tier governance-aware and up), never as a raw update"
)]
pub trait OperatorUpdate: Serialize {}

/// A request's params type, tied to its method name and result type.
pub trait RequestParams: Serialize + DeserializeOwned {
    /// The wire method name.
    const METHOD: &'static str;
    /// The type of a successful result.
    type Result: Serialize + DeserializeOwned;
}

/// A notification's params type, tied to its method name.
pub trait NotificationParams: Serialize + DeserializeOwned {
    /// The wire method name.
    const METHOD: &'static str;
}

/// Why a typed method enum could not decode a message.
#[derive(Debug)]
pub enum DecodeError {
    /// The method is not one this enum carries (JSON-RPC -32601).
    UnknownMethod(String),
    /// The params (or result) do not fit the method's type (JSON-RPC -32602).
    InvalidParams {
        /// The method.
        method: String,
        /// What serde said.
        error: serde_json::Error,
    },
}

impl DecodeError {
    /// The JSON-RPC error code for this failure.
    pub fn code(&self) -> i32 {
        match self {
            DecodeError::UnknownMethod(_) => -32601,
            DecodeError::InvalidParams { .. } => -32602,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::UnknownMethod(method) => write!(f, "method not found: `{method}`"),
            DecodeError::InvalidParams { method, error } => write!(f, "invalid params for `{method}`: {error}"),
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DecodeError::UnknownMethod(_) => None,
            DecodeError::InvalidParams { error, .. } => Some(error),
        }
    }
}

/// Decodes `params` (absent or `null` read as `{}`, so all-optional payloads accept them) as
/// `T` for `method`.
pub fn decode_params<T: DeserializeOwned>(method: &str, params: Option<&RawValue>) -> Result<T, DecodeError> {
    let text = match params.map(RawValue::get) {
        Some(text) if text.trim() != "null" => text,
        _ => "{}",
    };
    serde_json::from_str(text).map_err(|error| DecodeError::InvalidParams {
        method: method.to_string(),
        error,
    })
}

/// The params of an extension method (`_`-prefixed), kept as raw JSON (`null` when absent).
pub fn decode_extension(method: &str, params: Option<&RawValue>) -> Result<Value, DecodeError> {
    match params {
        None => Ok(Value::Null),
        Some(raw) => serde_json::from_str(raw.get()).map_err(|error| DecodeError::InvalidParams {
            method: method.to_string(),
            error,
        }),
    }
}

/// `true` for an extension method name (ACP reserves names starting with `_`).
pub fn is_extension(method: &str) -> bool {
    method.starts_with('_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Lenient {
        #[serde(default, deserialize_with = "default_on_error")]
        n: Option<u8>,
        #[serde(default, deserialize_with = "skip_invalid_items_or_default")]
        list: Option<Vec<u8>>,
        #[serde(default, deserialize_with = "skip_invalid_items")]
        strict_list: Vec<u8>,
        #[serde(default)]
        patch: Patch<String>,
        #[serde(default, deserialize_with = "default_on_null")]
        args: Vec<String>,
    }

    fn lenient(value: Value) -> Result<Lenient, serde_json::Error> {
        serde_json::from_value(value)
    }

    #[test]
    fn a_null_result_reads_null_or_an_object_and_nothing_else() {
        #[derive(Debug)]
        struct Unit;
        impl<'de> Deserialize<'de> for Unit {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                null_result(deserializer).map(|()| Unit)
            }
        }
        assert!(serde_json::from_value::<Unit>(json!(null)).is_ok());
        assert!(serde_json::from_value::<Unit>(json!({})).is_ok());
        assert!(serde_json::from_value::<Unit>(json!({"_meta": {}})).is_ok());
        let error = serde_json::from_value::<Unit>(json!("done")).unwrap_err().to_string();
        assert!(error.contains("expected `null`"), "{error}");
        assert!(serde_json::from_value::<Unit>(json!([])).is_err());
    }

    #[test]
    fn default_on_error_turns_a_bad_value_into_the_default() {
        assert_eq!(lenient(json!({"n": "x"})).unwrap().n, None);
        assert_eq!(lenient(json!({"n": 300})).unwrap().n, None);
        assert_eq!(lenient(json!({"n": 7})).unwrap().n, Some(7));
    }

    #[test]
    fn skip_invalid_items_drops_bad_items_and_keeps_null_apart() {
        assert_eq!(lenient(json!({"list": [1, "x", 2]})).unwrap().list, Some(vec![1, 2]));
        assert_eq!(lenient(json!({"list": null})).unwrap().list, None);
        assert_eq!(lenient(json!({"list": "x"})).unwrap().list, None);
        assert_eq!(lenient(json!({"strict_list": [1, -1]})).unwrap().strict_list, vec![1]);
        assert!(lenient(json!({"strict_list": "x"})).is_err());
        assert!(lenient(json!({"strict_list": null})).is_err());
    }

    #[test]
    fn patch_keeps_absent_null_and_value_apart() {
        assert_eq!(lenient(json!({})).unwrap().patch, Patch::Unchanged);
        assert_eq!(lenient(json!({"patch": null})).unwrap().patch, Patch::Clear);
        assert_eq!(lenient(json!({"patch": "t"})).unwrap().patch, Patch::Set("t".into()));
        assert_eq!(serde_json::to_value(Patch::<u8>::Clear).unwrap(), Value::Null);
    }

    #[test]
    fn default_on_null_reads_null_as_empty() {
        assert!(lenient(json!({"args": null})).unwrap().args.is_empty());
        assert!(lenient(json!({"args": 1})).is_err());
    }

    #[test]
    fn decode_params_reads_absent_and_null_as_an_empty_object() {
        let absent: Meta = decode_params("m", None).unwrap();
        assert!(absent.is_empty());
        let null = RawValue::from_string("null".into()).unwrap();
        let null: Meta = decode_params("m", Some(&null)).unwrap();
        assert!(null.is_empty());
        let bad = RawValue::from_string("[1]".into()).unwrap();
        let error = decode_params::<Meta>("m", Some(&bad)).unwrap_err();
        assert_eq!(error.code(), -32602);
        assert!(error.to_string().contains("invalid params for `m`"));
    }
}
