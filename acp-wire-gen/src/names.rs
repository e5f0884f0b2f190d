//! Rust names for schema names: fields in snake_case, types and variants in UpperCamelCase,
//! keywords escaped, and every name in a scope unique.

use std::collections::BTreeSet;

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
        if !c.is_alphanumeric() {
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
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// A field or function name: `sessionId` → `session_id`, `type` → `r#type`, `_meta` → `meta`.
pub fn snake(name: &str) -> String {
    let mut out = words(name).join("_");
    if out.is_empty() {
        out = "field".into();
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
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
                .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect();
    if out.is_empty() {
        out = "Value".into();
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'V');
    }
    escape(out)
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
}

impl Scope {
    /// A scope where `taken` are already used.
    pub fn with(taken: impl IntoIterator<Item = String>) -> Self {
        Scope {
            taken: taken.into_iter().collect(),
        }
    }

    /// `wanted`, or `wanted2`, `wanted3`, ... if taken; the result is now taken.
    pub fn claim(&mut self, wanted: &str) -> String {
        let mut name = wanted.to_string();
        let mut n = 2;
        while self.taken.contains(&name) {
            name = format!("{wanted}{n}");
            n += 1;
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
    fn scopes_never_hand_out_a_name_twice() {
        let mut scope = Scope::with(["Kind".to_string()]);
        assert_eq!(scope.claim("Kind"), "Kind2");
        assert_eq!(scope.claim("Kind"), "Kind3");
        assert_eq!(scope.claim("Other"), "Other");
    }
}
