//! A located YAML tree built from `saphyr-parser` events.
//!
//! Every key and every value keeps its byte span in the file, mappings keep their order,
//! duplicate keys are reported (the first is kept), and plain scalars are resolved with the
//! YAML 1.2 core schema (so `yes` is a string and `1.0` a float).

use std::collections::HashMap;
use std::ops::Range;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use crate::diagnostic::{Code, Diagnostic};
use crate::source::SourceFile;

/// Most nodes a document may expand to through aliases (guards against "billion laughs").
const MAX_NODES: usize = 100_000;

/// Most lists and mappings a document may nest, the root included. Real manifests and the
/// documents they refer to nest six levels at most; 64 keeps every recursive walk over the
/// tree (checks, JSON conversion, serde, `Drop`) within a few hundred KiB of stack, well
/// inside the 2 MiB of a spawned thread and the stack rustc gives proc macros.
pub const MAX_DEPTH: usize = 64;

/// A YAML value with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub value: Value,
    /// Byte range of the value in the file.
    pub span: Range<usize>,
}

/// A YAML value, core schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`, `~` or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer or a float.
    Number(serde_json::Number),
    /// A float JSON cannot hold (`.inf`, `.nan`).
    NonFiniteFloat,
    /// Any other scalar.
    String(String),
    /// A sequence.
    Sequence(Vec<Node>),
    /// A mapping with string keys, in source order, without duplicates.
    Mapping(Vec<Entry>),
}

/// One `key: value` pair of a mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The key as written.
    pub key: String,
    /// Byte range of the key.
    pub key_span: Range<usize>,
    /// The value.
    pub value: Node,
}

impl Value {
    /// How a diagnostic names this kind of value ("a string", "null", ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(n) if n.is_f64() => "a float",
            Value::Number(_) => "an integer",
            Value::NonFiniteFloat => "a float",
            Value::String(_) => "a string",
            Value::Sequence(_) => "a list",
            Value::Mapping(_) => "a mapping",
        }
    }
}

impl Node {
    /// The entries if this is a mapping.
    pub fn as_mapping(&self) -> Option<&[Entry]> {
        match &self.value {
            Value::Mapping(entries) => Some(entries),
            _ => None,
        }
    }

    /// The string if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The entry for `key` if this is a mapping that has it.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.as_mapping()?.iter().find(|e| e.key == key)
    }

    /// The value under `key` if this is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|e| &e.value)
    }

    /// The entry at a path of keys (`["metadata", "aip44", "tier"]`).
    pub fn entry_at(&self, path: &[&str]) -> Option<&Entry> {
        let (last, parents) = path.split_last()?;
        let mut node = self;
        for key in parents {
            node = node.get(key)?;
        }
        node.entry(last)
    }

    /// The value at a path of keys.
    pub fn get_at(&self, path: &[&str]) -> Option<&Node> {
        self.entry_at(path).map(|e| &e.value)
    }

    /// The plain JSON value (spans dropped; non-finite floats become null).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null | Value::NonFiniteFloat => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Number(n) => J::Number(n.clone()),
            Value::String(s) => J::String(s.clone()),
            Value::Sequence(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Mapping(entries) => J::Object(entries.iter().map(|e| (e.key.clone(), e.value.to_json())).collect()),
        }
    }
}

/// Parses `yaml`, which starts at the beginning of line `first_line` of `file`.
/// Returns the root node (None for an empty document or after a syntax error) and every
/// diagnostic found on the way.
pub fn parse(file: &SourceFile, yaml: &str, first_line: usize) -> (Option<Node>, Vec<Diagnostic>) {
    let mut builder = Builder {
        file,
        first_line,
        stack: Vec::new(),
        anchors: HashMap::new(),
        nodes: 0,
        root: None,
        diagnostics: Vec::new(),
    };
    let mut parser = Parser::new_from_str(yaml);
    while let Some(next) = parser.next_event() {
        match next {
            Ok((event, span)) => {
                if let Err(diagnostic) = builder.event(event, span) {
                    builder.diagnostics.push(diagnostic);
                    return (None, builder.diagnostics);
                }
            }
            Err(error) => {
                let marker = error.marker();
                let at = builder.offset(marker.line(), marker.col());
                let end = next_char_end(file.text(), at);
                // The parser finds undefined aliases itself; say what that is.
                let diagnostic = if error.info().contains("unknown anchor") {
                    Diagnostic::new(Code::UnsupportedYaml, at..end, "alias to an undefined anchor")
                        .with_help("define the anchor (`&name`) before the alias (`*name`) uses it")
                } else {
                    Diagnostic::new(
                        Code::YamlSyntax,
                        at..end,
                        format!("YAML syntax error: {}", error.info()),
                    )
                };
                builder.diagnostics.push(diagnostic);
                return (None, builder.diagnostics);
            }
        }
    }
    (builder.root, builder.diagnostics)
}

fn next_char_end(text: &str, at: usize) -> usize {
    text[at..].chars().next().map_or(at, |c| at + c.len_utf8())
}

/// A container under construction.
enum Frame {
    Sequence {
        items: Vec<Node>,
        start: usize,
        anchor: usize,
    },
    Mapping {
        entries: Vec<Entry>,
        /// Each key's index in `entries`, so a duplicate is found without a scan.
        keys: HashMap<String, usize>,
        pending_key: Option<(String, Range<usize>)>,
        /// A complex key being skipped: its value is dropped too.
        skip_value: bool,
        start: usize,
        anchor: usize,
    },
}

struct Builder<'f> {
    file: &'f SourceFile,
    first_line: usize,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    root: Option<Node>,
    diagnostics: Vec<Diagnostic>,
}

impl Builder<'_> {
    fn offset(&self, yaml_line: usize, column: usize) -> usize {
        self.file
            .offset_of(self.first_line + yaml_line.saturating_sub(1), column)
    }

    fn span(&self, span: Span) -> Range<usize> {
        let start = self.offset(span.start.line(), span.start.col());
        let end = self.offset(span.end.line(), span.end.col()).max(start);
        start..end
    }

    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), Diagnostic> {
        let range = self.span(span);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let range = scalar_extent(self.file.text(), range, style);
                let is_key = matches!(
                    self.stack.last(),
                    Some(Frame::Mapping {
                        pending_key: None,
                        skip_value: false,
                        ..
                    })
                );
                if is_key {
                    if let Some(Frame::Mapping { pending_key, .. }) = self.stack.last_mut() {
                        *pending_key = Some((text.into_owned(), range));
                    }
                    return Ok(());
                }
                let forced_string = tag
                    .as_ref()
                    .is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str");
                let value = if style == ScalarStyle::Plain && !forced_string {
                    resolve_plain(&text)
                } else {
                    Value::String(text.into_owned())
                };
                self.finish(Node { value, span: range }, anchor)
            }
            Event::SequenceStart(anchor, _) => self.enter(
                Frame::Sequence {
                    items: Vec::new(),
                    start: range.start,
                    anchor,
                },
                range,
            ),
            Event::MappingStart(anchor, _) => self.enter(
                Frame::Mapping {
                    entries: Vec::new(),
                    keys: HashMap::new(),
                    pending_key: None,
                    skip_value: false,
                    start: range.start,
                    anchor,
                },
                range,
            ),
            Event::SequenceEnd | Event::MappingEnd => {
                let end = range.end;
                let (value, start, anchor) = match self.stack.pop() {
                    Some(Frame::Sequence { items, start, anchor }) => (Value::Sequence(items), start, anchor),
                    Some(Frame::Mapping {
                        entries, start, anchor, ..
                    }) => (Value::Mapping(entries), start, anchor),
                    None => return Ok(()),
                };
                self.finish(
                    Node {
                        value,
                        span: start..end.max(start),
                    },
                    anchor,
                )
            }
            Event::Alias(id) => {
                let Some(node) = self.anchors.get(&id).cloned() else {
                    return Err(Diagnostic::new(
                        Code::UnsupportedYaml,
                        range,
                        "alias to an undefined anchor",
                    ));
                };
                self.nodes += count_nodes(&node);
                if self.nodes > MAX_NODES {
                    return Err(Diagnostic::new(
                        Code::UnsupportedYaml,
                        range,
                        format!("aliases expand the frontmatter to more than {MAX_NODES} values"),
                    ));
                }
                // The alias stands where it is written; its content is the anchored node's.
                self.finish(
                    Node {
                        value: node.value,
                        span: range,
                    },
                    0,
                )
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentStart(_) | Event::DocumentEnd | Event::Nothing => {
                Ok(())
            }
        }
    }

    /// Opens a container (at `range`), unless that nests deeper than [`MAX_DEPTH`]: every
    /// walk over the tree recurses, so its depth is what bounds their stack.
    fn enter(&mut self, frame: Frame, range: Range<usize>) -> Result<(), Diagnostic> {
        if self.stack.len() >= MAX_DEPTH {
            let at = range.start..next_char_end(self.file.text(), range.start);
            return Err(Diagnostic::new(
                Code::NestingTooDeep,
                at,
                format!("lists and mappings nest more than {MAX_DEPTH} deep here"),
            )
            .with_help("flatten the structure: no manifest field nests more than six levels"));
        }
        self.stack.push(frame);
        Ok(())
    }

    /// Places a finished node: into its parent, or as the root.
    fn finish(&mut self, node: Node, anchor: usize) -> Result<(), Diagnostic> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(Diagnostic::new(
                Code::UnsupportedYaml,
                node.span,
                format!("the frontmatter has more than {MAX_NODES} values"),
            ));
        }
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Sequence { items, .. }) => items.push(node),
            Some(Frame::Mapping {
                entries,
                keys,
                pending_key,
                skip_value,
                ..
            }) => {
                if *skip_value {
                    *skip_value = false;
                    return Ok(());
                }
                let Some((key, key_span)) = pending_key.take() else {
                    // A sequence or mapping in key position.
                    *skip_value = true;
                    self.diagnostics.push(Diagnostic::new(
                        Code::UnsupportedYaml,
                        node.span,
                        "mapping keys must be strings, not a list or a mapping",
                    ));
                    return Ok(());
                };
                if let Some(&first) = keys.get(&key) {
                    let first_span = entries[first].key_span.clone();
                    self.diagnostics.push(
                        Diagnostic::new(Code::DuplicateKey, key_span, format!("duplicate key `{key}`"))
                            .with_label(first_span, "first defined here")
                            .with_help("remove one of the two; the first one is used"),
                    );
                } else {
                    keys.insert(key.clone(), entries.len());
                    entries.push(Entry {
                        key,
                        key_span,
                        value: node,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Trims a scalar's span to the scalar itself: the parser's end marker can run on over
/// trailing blanks and a comment.
fn scalar_extent(text: &str, span: Range<usize>, style: ScalarStyle) -> Range<usize> {
    let source = &text[span.clone()];
    let len = match style {
        ScalarStyle::SingleQuoted => closing_quote(source, '\'', None),
        ScalarStyle::DoubleQuoted => closing_quote(source, '"', Some('\\')),
        ScalarStyle::Plain => {
            let cut = [" #", "\t#"]
                .iter()
                .filter_map(|c| source.find(c))
                .min()
                .unwrap_or(source.len());
            Some(source[..cut].trim_end().len())
        }
        _ => None,
    };
    match len {
        Some(len) if len > 0 => span.start..span.start + len,
        _ => span,
    }
}

/// The length up to and including the quote that closes the one `source` starts with.
fn closing_quote(source: &str, quote: char, escape: Option<char>) -> Option<usize> {
    let mut chars = source.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if Some(c) == escape {
            chars.next();
        } else if c == quote {
            // In single quotes, '' is an escaped quote.
            if escape.is_none() && chars.peek().is_some_and(|&(_, next)| next == quote) {
                chars.next();
                continue;
            }
            return Some(i + c.len_utf8());
        }
    }
    None
}

fn count_nodes(node: &Node) -> usize {
    1 + match &node.value {
        Value::Sequence(items) => items.iter().map(count_nodes).sum(),
        Value::Mapping(entries) => entries.iter().map(|e| count_nodes(&e.value)).sum(),
        _ => 0,
    }
}

/// Resolves a plain scalar with the YAML 1.2 core schema.
pub fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF" | ".nan" | ".NaN"
        | ".NAN" => return Value::NonFiniteFloat,
        _ => {}
    }
    if let Some(number) = resolve_int(text) {
        return Value::Number(number);
    }
    if is_core_float(text) {
        return match text.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            Some(number) => Value::Number(number),
            None => Value::NonFiniteFloat,
        };
    }
    Value::String(text.to_string())
}

fn resolve_int(text: &str) -> Option<serde_json::Number> {
    let (radix, digits) = if let Some(hex) = text.strip_prefix("0x") {
        (16, hex)
    } else if let Some(oct) = text.strip_prefix("0o") {
        (8, oct)
    } else {
        let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
        if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        return Some(match text.parse::<i64>() {
            Ok(n) => n.into(),
            Err(_) => match text.parse::<u64>() {
                Ok(n) => n.into(),
                Err(_) => serde_json::Number::from_f64(text.parse::<f64>().ok()?)?,
            },
        });
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok().map(Into::into)
}

/// `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`
fn is_core_float(text: &str) -> bool {
    let bytes = text.strip_prefix(['-', '+']).unwrap_or(text).as_bytes();
    let digits = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut i = digits(0);
    let mut mantissa_digits = i;
    if bytes.get(i) == Some(&b'.') {
        let fraction = digits(i + 1);
        mantissa_digits += fraction;
        i += 1 + fraction;
    }
    if mantissa_digits == 0 {
        return false;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let exponent = digits(i);
        if exponent == 0 {
            return false;
        }
        i += exponent;
    }
    i == bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(yaml: &str) -> (Option<Node>, Vec<Diagnostic>) {
        let file = SourceFile::new("t", yaml.to_string());
        parse(&file, yaml, 1)
    }

    #[test]
    fn core_schema_resolution() {
        assert_eq!(resolve_plain("yes"), Value::String("yes".into()));
        assert_eq!(
            resolve_plain("1.0"),
            Value::Number(serde_json::Number::from_f64(1.0).unwrap())
        );
        assert_eq!(resolve_plain("1.0.0"), Value::String("1.0.0".into()));
        assert_eq!(resolve_plain("0fc18323"), Value::String("0fc18323".into()));
        assert_eq!(resolve_plain("1234567"), Value::Number(1234567.into()));
        assert_eq!(resolve_plain("12e4567"), Value::NonFiniteFloat);
        assert_eq!(resolve_plain("0x1f"), Value::Number(31.into()));
        assert_eq!(resolve_plain("~"), Value::Null);
        assert_eq!(resolve_plain("."), Value::String(".".into()));
        assert_eq!(resolve_plain("1e"), Value::String("1e".into()));
    }

    #[test]
    fn spans_point_at_keys_and_values() {
        let (root, diags) = parse_str("a: 1\nbb:\n  c: 'x'\n");
        assert!(diags.is_empty());
        let root = root.unwrap();
        let c = root.entry_at(&["bb", "c"]).unwrap();
        assert_eq!(c.key_span.start, 11);
        assert_eq!(c.value.span.start, 14);
        assert_eq!(c.value.as_str(), Some("x"));
    }

    #[test]
    fn scalar_spans_stop_before_comments() {
        let yaml = "a: \"x # y\"   # note\nb: 'it''s'  # c\nc: plain words  # c\n";
        let (root, _) = parse_str(yaml);
        let root = root.unwrap();
        let text = |key: &str| &yaml[root.get(key).unwrap().span.clone()];
        assert_eq!(text("a"), "\"x # y\"");
        assert_eq!(text("b"), "'it''s'");
        assert_eq!(text("c"), "plain words");
    }

    #[test]
    fn duplicate_keys_are_reported_and_first_kept() {
        let (root, diags) = parse_str("a: 1\na: 2\n");
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, Code::DuplicateKey);
        assert_eq!(diags[0].span.start, 5);
        assert_eq!(root.unwrap().get("a").unwrap().to_json(), serde_json::json!(1));
    }

    #[test]
    fn complex_keys_are_reported_and_skipped() {
        let (root, diags) = parse_str("? [a, b]\n: 1\nc: 2\n");
        assert_eq!(
            diags.iter().map(|d| d.code).collect::<Vec<_>>(),
            vec![Code::UnsupportedYaml]
        );
        assert_eq!(root.unwrap().to_json(), serde_json::json!({"c": 2}));
    }

    #[test]
    fn aliases_expand_within_a_budget() {
        let (root, diags) = parse_str("a: &x [1, 2]\nb: *x\n");
        assert!(diags.is_empty());
        assert_eq!(root.unwrap().to_json(), serde_json::json!({"a": [1, 2], "b": [1, 2]}));

        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let (root, diags) = parse_str(&bomb);
        assert!(root.is_none());
        assert_eq!(diags.last().unwrap().code, Code::UnsupportedYaml);
    }

    #[test]
    fn undefined_aliases_are_unsupported_yaml() {
        let (root, diags) = parse_str("a: *nowhere\n");
        assert!(root.is_none());
        assert_eq!(
            diags.iter().map(|d| (d.code, d.span.start)).collect::<Vec<_>>(),
            vec![(Code::UnsupportedYaml, 3)]
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        // The scanner stops runaway flow nesting itself (at 255 levels) before the builder
        // sees [`MAX_DEPTH`] levels of it.
        let depth = 100_000;
        let yaml = format!("a: {}{}\n", "[".repeat(depth), "]".repeat(depth));
        let (root, diags) = parse_str(&yaml);
        assert!(root.is_none());
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, Code::YamlSyntax);
        assert!(diags[0].message.contains("recursion limit"), "{}", diags[0].message);
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_reported_where_it_starts() {
        let nest = |depth: usize, style: &str| match style {
            "block list" => format!("{}x\n", "- ".repeat(depth)),
            "block map" => {
                (0..depth)
                    .map(|i| format!("{}k:", " ".repeat(i)))
                    .collect::<Vec<_>>()
                    .join("\n")
                    + " x\n"
            }
            _ => format!("{}x{}\n", "[".repeat(depth), "]".repeat(depth)),
        };
        for style in ["block list", "block map", "flow"] {
            let (root, diags) = parse_str(&nest(MAX_DEPTH, style));
            assert!(root.is_some() && diags.is_empty(), "{style}: {diags:?}");
            let deeper = nest(MAX_DEPTH + 1, style);
            let (root, diags) = parse_str(&deeper);
            assert!(root.is_none(), "{style}");
            assert_eq!(diags.len(), 1, "{style}: {diags:?}");
            assert_eq!(diags[0].code, Code::NestingTooDeep, "{style}");
            let at = &deeper[diags[0].span.clone()];
            assert!(matches!(at, "-" | "k" | "["), "{style}: points at {at:?}");
        }
    }

    #[test]
    fn syntax_errors_are_located() {
        let (root, diags) = parse_str("a: [1, 2\nb: 3\n");
        assert!(root.is_none());
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, Code::YamlSyntax);
    }
}
