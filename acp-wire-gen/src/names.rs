//! Rust names for schema names: fields in snake_case, types and variants in UpperCamelCase,
//! keywords escaped, and every name in a scope unique.

use std::collections::{BTreeMap, BTreeSet};

use unicode_ident::{is_xid_continue, is_xid_start};

/// Words that cannot be identifiers even as raw identifiers (`r#self` is not allowed).
const NOT_RAW: &[&str] = &["self", "Self", "super", "crate", "_"];

/// Strict and reserved keywords of Rust 2024.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false", "fn", "for", "gen",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct",
    "trait", "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// Splits a schema name into lowercase words: `sessionId` → `session id`, `_meta` → `meta`,
/// `HTTPHeader` → `http header`, `end_turn` → `end turn`, `-32700` → `32700`.
pub(crate) fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !is_word_char(c) {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let starts_word = c.is_uppercase()
            && !current.is_empty()
            && (chars[i - 1].is_lowercase()
                || chars[i - 1].is_ascii_digit()
                || chars.get(i + 1).is_some_and(|n| n.is_lowercase()));
        if starts_word {
            words.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase().filter(|l| is_xid_continue(*l)));
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// A letter or digit that may be in an identifier (`²` is alphanumeric but may not).
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() && is_xid_continue(c)
}

/// Whether `name` would need a prefix to start an identifier (a digit, a combining mark).
fn starts_badly(name: &str) -> bool {
    name.chars().next().is_some_and(|c| !is_xid_start(c))
}

/// Whether `name` can be a generated type's name as it is: an identifier (not raw) that is
/// not a keyword.
pub fn is_type_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || is_xid_start(c))
        && chars.all(is_xid_continue)
        && name != "_"
        && !NOT_RAW.contains(&name)
        && !KEYWORDS.contains(&name)
}

/// A constant name for `name`: `session/prompt` → `SESSION_PROMPT`, `$/cancel_request` →
/// `CANCEL_REQUEST`, `type` → `TYPE`, `1` → `_1`.
pub fn constant(name: &str) -> String {
    let upper: String = words(name)
        .join("_")
        .chars()
        .flat_map(char::to_uppercase)
        .filter(|c| *c == '_' || is_xid_continue(*c))
        .collect();
    match upper.as_str() {
        "" => "METHOD".to_string(),
        _ if starts_badly(&upper) => format!("_{upper}"),
        _ => upper,
    }
}

/// A field or function name: `sessionId` → `session_id`, `type` → `r#type`, `_meta` → `meta`.
pub fn snake(name: &str) -> String {
    let mut out = words(name).join("_");
    if out.is_empty() {
        out = "field".into();
    }
    if starts_badly(&out) {
        out.insert(0, '_');
    }
    escape(out)
}

/// A type or variant name: `end_turn` → `EndTurn`, `Parse error` → `ParseError`,
/// and a name that would start with a digit gets a `V` prefix (`2.0` → `V20`).
pub fn camel(name: &str) -> String {
    let mut out: String = words(name)
        .iter()
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|first| upper_first(first).chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect();
    if out.is_empty() {
        out = "Value".into();
    }
    if starts_badly(&out) {
        out.insert(0, 'V');
    }
    escape(out)
}

/// `c` in upper case, or as it is when its upper case may not be in an identifier.
fn upper_first(c: char) -> impl Iterator<Item = char> {
    let upper: Vec<char> = c.to_uppercase().collect();
    if upper.iter().all(|u| is_xid_continue(*u)) {
        upper
    } else {
        vec![c]
    }
    .into_iter()
}

fn escape(name: String) -> String {
    if NOT_RAW.contains(&name.as_str()) {
        format!("{name}_")
    } else if KEYWORDS.contains(&name.as_str()) {
        format!("r#{name}")
    } else {
        name
    }
}

/// Hands out names that are unique within one scope (fields of a struct, variants of an enum,
/// items of a module), suffixing `2`, `3`, ... on a clash.
#[derive(Debug, Default)]
pub struct Scope {
    taken: BTreeSet<String>,
    /// For each name asked for, the suffix to try next (so a thousand clashes cost a
    /// thousand steps, not half a million).
    next: BTreeMap<String, usize>,
}

impl Scope {
    /// A scope where `taken` are already used.
    pub fn with(taken: impl IntoIterator<Item = String>) -> Self {
        Scope {
            taken: taken.into_iter().collect(),
            next: BTreeMap::new(),
        }
    }

    /// `wanted`, or `wanted2`, `wanted3`, ... if taken; the result is now taken.
    pub fn claim(&mut self, wanted: &str) -> String {
        let mut name = wanted.to_string();
        let next = self.next.entry(wanted.to_string()).or_insert(2);
        while self.taken.contains(&name) {
            name = format!("{wanted}{next}");
            *next += 1;
        }
        self.taken.insert(name.clone());
        name
    }

    /// `true` if `name` is taken.
    pub fn contains(&self, name: &str) -> bool {
        self.taken.contains(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_fields() {
        assert_eq!(snake("sessionId"), "session_id");
        assert_eq!(snake("_meta"), "meta");
        assert_eq!(snake("type"), "r#type");
        assert_eq!(snake("self"), "self_");
        assert_eq!(snake("mimeType"), "mime_type");
        assert_eq!(snake("HTTPHeaders"), "http_headers");
        assert_eq!(snake("line2Col"), "line2_col");
    }

    #[test]
    fn the_method_tables_variants_are_the_request_enums() {
        // `#[acp_operator]` matches requests on the variant the table names.
        for method in acp_manifest::methods::METHODS {
            assert_eq!(camel(method.name), method.variant, "{}", method.name);
        }
    }

    #[test]
    fn camel_case_types_and_variants() {
        assert_eq!(camel("end_turn"), "EndTurn");
        assert_eq!(camel("Parse error"), "ParseError");
        assert_eq!(camel("session/prompt"), "SessionPrompt");
        assert_eq!(camel("$/cancel_request"), "CancelRequest");
        assert_eq!(camel("2.0"), "V20");
        assert_eq!(camel("-32700"), "V32700");
        assert_eq!(camel("Self"), "Self_");
    }

    #[test]
    fn names_from_any_text_are_identifiers() {
        assert_eq!(constant("session/prompt"), "SESSION_PROMPT");
        assert_eq!(constant("$/cancel_request"), "CANCEL_REQUEST");
        assert_eq!(constant("type"), "TYPE");
        assert_eq!(constant("1"), "_1");
        assert_eq!(constant("²"), "METHOD");
        assert_eq!(camel("x²"), "X");
        assert_eq!(snake("²"), "field");
        assert!(is_type_name("SessionId") && is_type_name("_Private") && is_type_name("Café"));
        for bad in ["", "_", "type", "Self", "1st", "Bad-Name", "x.json", "r#type"] {
            assert!(!is_type_name(bad), "{bad}");
        }
    }

    #[test]
    fn scopes_never_hand_out_a_name_twice() {
        let mut scope = Scope::with(["Kind".to_string()]);
        assert_eq!(scope.claim("Kind"), "Kind2");
        assert_eq!(scope.claim("Kind"), "Kind3");
        assert_eq!(scope.claim("Other"), "Other");
        // A name taken by hand is skipped when the suffixes reach it.
        let mut scope = Scope::with(["Kind".to_string(), "Kind3".to_string()]);
        assert_eq!(scope.claim("Kind"), "Kind2");
        assert_eq!(scope.claim("Kind"), "Kind4");
    }
}
