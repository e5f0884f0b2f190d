//! The user-facing references stay true to the library.
//!
//! `docs/diagnostics.md` has one section per diagnostic code (`## ACP103 — <summary>`), and
//! `docs/manifest.md` describes every frontmatter field. These tests read both files and
//! check them against the library itself, so a new code, a renamed field or a changed rule
//! fails here until the docs say so.
//!
//! Example convention, for both files: a fenced block whose info string carries
//! `file=<relative path>` is an example file. All such blocks of one `##` section are written
//! into one fresh temporary folder, and every block whose path ends in `ACP.md` is linted
//! through the library. Other attributes of the info string:
//!
//! - `also=ACP100,ACP108`: codes the example reports besides its section's own code (each must
//!   also be named in the section's prose, so a reader is told);
//! - `escapes`: `\xNN` in the block stands for the byte `0xNN` (non-UTF-8 text, a BOM, tabs);
//! - `crlf`: the file is written with CRLF line endings.
//!
//! In a code section the example must report exactly that code plus its `also=` codes (as a
//! set); anywhere else exactly its `also=` codes (usually none: a clean example). A code
//! section without an example must say `<!-- no-example -->`, and only a code this test can
//! prove unreachable may do that, or one of `common::NOT_FROM_TEXT` (a file's size or kind,
//! which no example text can show; `scaffold-aip/tests/hostile.rs` checks those).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, PathBuf};

use acp_manifest::Code;
use acp_manifest::diagnostic::Severity;
use acp_manifest::manifest::check_file;
use serde_json::Value;

fn read_doc(name: &str) -> String {
    let path = common::workspace().join("docs").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------
// A small markdown reader: `##` sections, their prose, and their fenced blocks.

/// A fenced code block.
#[derive(Debug, Clone)]
struct Fence {
    /// 1-based line of the opening fence.
    line: usize,
    /// The info string's words after the language.
    attrs: BTreeMap<String, String>,
    /// The block's text, each line ending in `\n`.
    body: String,
}

/// The text under one `## ` heading (or before the first one).
#[derive(Debug, Clone, Default)]
struct Section {
    /// The heading text without `## ` (empty before the first heading).
    heading: String,
    /// 1-based line of the heading.
    line: usize,
    /// Everything outside fenced blocks.
    prose: String,
    /// The fenced blocks.
    fences: Vec<Fence>,
}

impl Section {
    /// `Some(code)` when the heading is `ACPnnn — ...`.
    fn code(&self) -> Option<&str> {
        let word = self.heading.split_whitespace().next()?;
        is_code_token(word).then_some(word)
    }

    /// The heading's text after `ACPnnn — `.
    fn title(&self) -> &str {
        self.heading.split_once(" — ").map_or("", |(_, title)| title.trim())
    }
}

fn is_code_token(word: &str) -> bool {
    word.len() == 6 && word.starts_with("ACP") && word[3..].bytes().all(|b| b.is_ascii_digit())
}

const KNOWN_ATTRS: &[&str] = &["file", "also", "escapes", "crlf"];

fn parse_sections(text: &str) -> Vec<Section> {
    let mut sections = vec![Section::default()];
    let mut open: Option<(usize, Fence)> = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let section = sections.last_mut().expect("never empty");
        if let Some((ticks, fence)) = &mut open {
            let trimmed = line.trim_end();
            if trimmed.len() >= *ticks && trimmed.bytes().all(|b| b == b'`') {
                section.fences.push(fence.clone());
                open = None;
            } else {
                fence.body.push_str(line);
                fence.body.push('\n');
            }
            continue;
        }
        let ticks = line.bytes().take_while(|&b| b == b'`').count();
        if ticks >= 3 {
            let mut words = line[ticks..].split_whitespace();
            let _language = words.next();
            let mut attrs = BTreeMap::new();
            for word in words {
                let (key, value) = word.split_once('=').unwrap_or((word, ""));
                assert!(
                    KNOWN_ATTRS.contains(&key),
                    "line {number}: unknown fence attribute `{key}` (known: {KNOWN_ATTRS:?})"
                );
                attrs.insert(key.to_string(), value.to_string());
            }
            open = Some((
                ticks,
                Fence {
                    line: number,
                    attrs,
                    body: String::new(),
                },
            ));
            continue;
        }
        if let Some(heading) = line.strip_prefix("## ") {
            sections.push(Section {
                heading: heading.trim().to_string(),
                line: number,
                ..Section::default()
            });
            continue;
        }
        section.prose.push_str(line);
        section.prose.push('\n');
    }
    assert!(open.is_none(), "a fenced block is never closed");
    sections
}

/// Every `ACPnnn` token in `text`.
fn code_tokens(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..].find("ACP") {
        let start = at + offset;
        let digits = bytes[start + 3..].iter().take_while(|b| b.is_ascii_digit()).count();
        let before_ok = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        if digits == 3 && before_ok {
            found.push(text[start..start + 6].to_string());
        }
        at = start + 3;
    }
    found
}

/// The text of the heading (any level) containing `needle`, down to the next heading of the
/// same or a higher level; fenced blocks are kept.
fn subsection<'t>(text: &'t str, needle: &str) -> &'t str {
    let level = |line: &str| {
        let hashes = line.bytes().take_while(|&b| b == b'#').count();
        (hashes > 0 && line[hashes..].starts_with(' ')).then_some(hashes)
    };
    let mut offset = 0;
    let mut start = None;
    let mut in_fence = false;
    for line in text.split_inclusive('\n') {
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence && let Some(this) = level(line) {
            match start {
                None if line.contains(needle) => start = Some((offset, this)),
                Some((from, wanted)) if this <= wanted => return &text[from..offset],
                _ => {}
            }
        }
        offset += line.len();
    }
    let (from, _) = start.unwrap_or_else(|| panic!("no heading containing `{needle}`"));
    &text[from..]
}

/// The cells of the markdown table rows in `text` (header and separator rows included).
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|line| line.starts_with('|'))
        .map(|line| {
            line.trim()
                .trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_string())
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Writing and linting the examples.

fn decode_escapes(text: &str, fence_line: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'x') {
            let hex = text
                .get(i + 2..i + 4)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .unwrap_or_else(|| panic!("line {fence_line}: `\\x` must be followed by two hex digits"));
            out.push(hex);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

fn file_bytes(fence: &Fence) -> Vec<u8> {
    let text = if fence.attrs.contains_key("crlf") {
        fence.body.replace('\n', "\r\n")
    } else {
        fence.body.clone()
    };
    if fence.attrs.contains_key("escapes") {
        decode_escapes(&text, fence.line)
    } else {
        text.into_bytes()
    }
}

fn relative_path(fence: &Fence) -> Option<PathBuf> {
    let written = fence.attrs.get("file")?;
    let path = PathBuf::from(written);
    assert!(
        !written.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_))),
        "line {}: `file={written}` must be a plain relative path",
        fence.line
    );
    Some(path)
}

fn also_codes(fence: &Fence) -> BTreeSet<String> {
    fence
        .attrs
        .get("also")
        .map(|list| list.split(',').filter(|c| !c.is_empty()).map(str::to_string).collect())
        .unwrap_or_default()
}

/// One linted example: where it is in the docs, what it should report, what it did.
struct Outcome {
    doc: &'static str,
    line: usize,
    expected: BTreeSet<String>,
    actual: BTreeSet<String>,
    messages: Vec<String>,
}

/// Writes the section's example files into a fresh folder and lints each ACP.md among them.
fn lint_section(doc: &'static str, section: &Section) -> Vec<Outcome> {
    let files: Vec<(&Fence, PathBuf)> = section
        .fences
        .iter()
        .filter_map(|fence| relative_path(fence).map(|path| (fence, path)))
        .collect();
    if files.is_empty() {
        return Vec::new();
    }
    let root = tempfile::tempdir().expect("a temporary folder");
    for (fence, path) in &files {
        let target = root.path().join(path);
        std::fs::create_dir_all(target.parent().expect("a file has a folder")).expect("create the folder");
        assert!(
            !target.exists(),
            "{doc}:{}: `{}` is written twice in one section",
            fence.line,
            path.display()
        );
        std::fs::write(&target, file_bytes(fence)).expect("write the example file");
    }
    let mut outcomes = Vec::new();
    for (fence, path) in files.iter().filter(|(_, p)| p.file_name() == Some("ACP.md".as_ref())) {
        let checked = check_file(&root.path().join(path)).expect("the example was just written");
        let mut expected = also_codes(fence);
        if let Some(code) = section.code() {
            expected.insert(code.to_string());
        }
        outcomes.push(Outcome {
            doc,
            line: fence.line,
            expected,
            actual: checked.diagnostics.iter().map(|d| d.code.to_string()).collect(),
            messages: checked
                .diagnostics
                .iter()
                .map(|d| {
                    let at = checked.document.source.position(d.span.start);
                    format!("{} {}:{}: {}", d.code, at.line, at.column, d.message)
                })
                .collect(),
        });
    }
    outcomes
}

fn check_examples(doc: &'static str, sections: &[Section]) -> usize {
    let outcomes: Vec<Outcome> = sections.iter().flat_map(|s| lint_section(doc, s)).collect();
    let failures: Vec<String> = outcomes
        .iter()
        .filter(|o| o.expected != o.actual)
        .map(|o| {
            format!(
                "docs/{}:{}: expected {:?}, got {:?}\n    {}",
                o.doc,
                o.line,
                o.expected,
                o.actual,
                o.messages.join("\n    ")
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} examples report other codes than documented:\n{}",
        failures.len(),
        outcomes.len(),
        failures.join("\n")
    );
    outcomes.len()
}

/// The example conventions every section of both references follows: a whole document
/// (starting with `---`) is a tested example, and `also=` codes are named in the prose.
fn example_conventions(sections: &[Section]) -> Vec<String> {
    let mut problems = Vec::new();
    for section in sections {
        for fence in &section.fences {
            if fence.body.starts_with("---\n") && relative_path(fence).is_none() {
                problems.push(format!(
                    "line {}: a whole document with no `file=`: make it a tested example",
                    fence.line
                ));
            }
            for also in also_codes(fence) {
                if Some(also.as_str()) == section.code() {
                    problems.push(format!("line {}: `also={also}` repeats the section's code", fence.line));
                } else if !code_tokens(&section.prose).contains(&also) {
                    problems.push(format!(
                        "line {}: the example also reports {also}; the section's text must say so",
                        fence.line
                    ));
                }
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------
// docs/diagnostics.md

/// Codes that have no example because no manifest can trigger them today, with the proof.
/// When a proof stops holding, the code has become reachable and needs an example.
fn unreachable_today(code: Code) -> Option<Result<(), String>> {
    match code {
        Code::AmbiguousRevision => {
            let known = acp_manifest::revisions::KNOWN;
            let clash = known.iter().enumerate().find_map(|(i, a)| {
                known[i + 1..]
                    .iter()
                    .find(|b| a.sha[..7] == b.sha[..7])
                    .map(|b| (a.sha, b.sha))
            });
            Some(match clash {
                None => Ok(()),
                Some((a, b)) => Err(format!(
                    "{a} and {b} share a 7-digit prefix, so ACP401 can fire: give it an example"
                )),
            })
        }
        _ => None,
    }
}

#[test]
fn diagnostics_md_has_one_section_per_code_and_names_no_other() {
    let text = read_doc("diagnostics.md");
    let sections = parse_sections(&text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for section in &sections {
        let Some(name) = section.code() else { continue };
        if let Some(first) = seen.insert(name.to_string(), section.line) {
            problems.push(format!("{name}: two sections (lines {first} and {})", section.line));
        }
        let Some(code) = Code::ALL.iter().find(|c| c.as_str() == name) else {
            // A retired code keeps its section, saying so, with no example to lint.
            if acp_manifest::codes::RETIRED.iter().any(|(retired, _)| *retired == name) {
                if !section.prose.contains("**Retired.**") || !section.fences.is_empty() {
                    problems.push(format!(
                        "{name} is retired: its section must say `**Retired.**` and have no example"
                    ));
                }
                continue;
            }
            problems.push(format!(
                "line {}: section for `{name}`, which is not a code",
                section.line
            ));
            continue;
        };
        if section.title() != code.summary() {
            problems.push(format!(
                "line {}: `{name}` is titled `{}`, the library calls it `{}`",
                section.line,
                section.title(),
                code.summary()
            ));
        }
        let severity = match code.severity() {
            Severity::Error => "**Severity:** error.",
            Severity::Warning => "**Severity:** warning.",
        };
        if !section.prose.contains(severity) {
            problems.push(format!("{name}: the section must say `{severity}`"));
        }
        let anchor = format!("<a id=\"{}\"></a>", name.to_ascii_lowercase());
        if !text.contains(&anchor) {
            problems.push(format!("{name}: no anchor `{anchor}` for links to it"));
        }
    }
    for code in Code::ALL {
        if !seen.contains_key(code.as_str()) {
            problems.push(format!("{code} ({}) has no section", code.summary()));
        }
    }
    let real: BTreeSet<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(acp_manifest::codes::RETIRED.iter().map(|(retired, _)| *retired))
        .collect();
    for token in code_tokens(&text) {
        if !real.contains(token.as_str()) {
            problems.push(format!("`{token}` is named but is not a code"));
        }
    }
    assert!(problems.is_empty(), "docs/diagnostics.md:\n{}", problems.join("\n"));
}

#[test]
fn every_diagnostics_example_reports_exactly_its_code() {
    let text = read_doc("diagnostics.md");
    let sections = parse_sections(&text);
    let mut problems = example_conventions(&sections);
    for section in &sections {
        let manifests = section
            .fences
            .iter()
            .filter(|f| relative_path(f).is_some_and(|p| p.file_name() == Some("ACP.md".as_ref())))
            .count();
        let Some(name) = section.code() else { continue };
        let Some(code) = Code::ALL.iter().copied().find(|c| c.as_str() == name) else {
            continue;
        };
        let declared_unreachable = section.prose.contains("<!-- no-example -->");
        match (manifests, declared_unreachable, unreachable_today(code)) {
            (1, false, _) => {}
            (1, true, _) => problems.push(format!("{name}: has an example but says `no-example`")),
            (0, true, Some(Ok(()))) => {}
            (0, true, None) if common::NOT_FROM_TEXT.iter().any(|(c, _)| *c == code) => {}
            (0, true, Some(Err(why))) => problems.push(format!("{name}: {why}")),
            (0, true, None) => problems.push(format!(
                "{name}: says `no-example`, but this test has no proof that it cannot fire"
            )),
            (n, _, _) => problems.push(format!(
                "{name} (line {}): needs exactly one example `file=.../ACP.md`, found {n}",
                section.line
            )),
        }
    }
    assert!(problems.is_empty(), "docs/diagnostics.md:\n{}", problems.join("\n"));
    let count = check_examples("diagnostics.md", &sections);
    let without = 1 + common::NOT_FROM_TEXT.len();
    assert!(count >= Code::ALL.len() - without, "only {count} examples were linted");
}

// ---------------------------------------------------------------------------------------
// docs/manifest.md

/// One field of the generated schema.
#[derive(Debug)]
struct Field {
    /// Dotted path; `[]` marks the items of a list (`metadata.aip44.mcp_servers[].name`).
    path: String,
    /// Whether its parent mapping's `required` lists it.
    required: bool,
    /// The field's resolved schema.
    schema: Value,
}

fn resolve<'s>(root: &'s Value, mut schema: &'s Value) -> &'s Value {
    while let Some(pointer) = schema.get("$ref").and_then(Value::as_str) {
        schema = pointer
            .strip_prefix('#')
            .and_then(|p| root.pointer(p))
            .unwrap_or_else(|| panic!("unresolvable $ref {pointer}"));
    }
    schema
}

/// Every property reachable from `schema`, depth first, in schema order.
fn collect_fields(root: &Value, schema: &Value, prefix: &str, out: &mut Vec<Field>) {
    let schema = resolve(root, schema);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (key, property) in properties {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            let resolved = resolve(root, property).clone();
            out.push(Field {
                path: path.clone(),
                required: required.contains(&key.as_str()),
                schema: resolved.clone(),
            });
            collect_fields(root, &resolved, &path, out);
        }
    }
    if let Some(items) = schema.get("items") {
        collect_fields(root, items, &format!("{prefix}[]"), out);
    }
}

/// The JSON types a field may take, and the allowed values of its enums.
fn types_and_values(root: &Value, schema: &Value, types: &mut BTreeSet<String>, values: &mut BTreeSet<String>) {
    let schema = resolve(root, schema);
    if let Some(found) = schema.get("type").and_then(Value::as_str) {
        types.insert(found.to_string());
    }
    for value in schema.get("enum").and_then(Value::as_array).into_iter().flatten() {
        // A string value as written (`basic`), any other (`1`) as its JSON text.
        values.insert(value.as_str().map_or_else(|| value.to_string(), str::to_string));
    }
    for union in ["anyOf", "oneOf"] {
        for branch in schema.get(union).and_then(Value::as_array).into_iter().flatten() {
            types_and_values(root, branch, types, values);
        }
    }
    if schema.get("type").and_then(Value::as_str) == Some("array")
        && let Some(items) = schema.get("items")
    {
        let mut item_types = BTreeSet::new();
        types_and_values(root, items, &mut item_types, values);
    }
}

#[test]
fn manifest_md_documents_every_field_of_the_schema() {
    let root = acp_manifest::manifest::json_schema();
    let mut fields = Vec::new();
    collect_fields(&root, &root, "", &mut fields);
    assert!(fields.len() > 30, "the schema walk found only {} fields", fields.len());

    let text = read_doc("manifest.md");
    let index = subsection(&text, "Field index");
    let rows: BTreeMap<String, Vec<String>> = table_rows(index)
        .into_iter()
        .filter_map(|cells| {
            let path = cells.first()?.strip_prefix('`')?.strip_suffix('`')?.to_string();
            Some((path, cells))
        })
        .collect();
    let outside_index = text.replacen(index, "", 1);
    let mut problems = Vec::new();
    for field in &fields {
        let quoted = format!("`{}`", field.path);
        let Some(cells) = rows.get(&field.path) else {
            problems.push(format!("{quoted}: no row in the field index"));
            continue;
        };
        let [_, kind, required, default, ..] = cells.as_slice() else {
            problems.push(format!("{quoted}: the row needs field, type, required, default, ..."));
            continue;
        };
        if required.starts_with("yes") != field.required {
            problems.push(format!(
                "{quoted}: the schema says required = {}, the index says `{required}`",
                field.required
            ));
        }
        if default.is_empty() {
            problems.push(format!("{quoted}: the default column is empty"));
        }
        let (mut types, mut values) = (BTreeSet::new(), BTreeSet::new());
        types_and_values(&root, &field.schema, &mut types, &mut values);
        for json_type in &types {
            let word = match json_type.as_str() {
                "object" => "mapping",
                "array" => "list",
                "boolean" => "boolean",
                "string" if !values.is_empty() => continue,
                "string" => "string",
                other => other,
            };
            if !kind.contains(word) {
                problems.push(format!("{quoted}: the type column `{kind}` should say `{word}`"));
            }
        }
        for value in &values {
            if !kind.contains(&format!("`{value}`")) {
                problems.push(format!("{quoted}: the type column must list the value `{value}`"));
            }
        }
        if !outside_index.contains(&quoted) {
            problems.push(format!("{quoted}: described only in the index; give it a paragraph"));
        }
    }
    let known: BTreeSet<&str> = fields.iter().map(|f| f.path.as_str()).collect();
    for path in rows.keys() {
        if !known.contains(path.as_str()) {
            problems.push(format!(
                "`{path}`: in the field index, but the schema has no such field"
            ));
        }
    }
    assert!(problems.is_empty(), "docs/manifest.md:\n{}", problems.join("\n"));
}

/// The fields the library requires of a ref document, read from the ACP304 message it gives
/// for a document that has only `present` (which picks the document type).
fn required_ref_fields(key: &str, file: &str, present: &str) -> Vec<String> {
    let root = tempfile::tempdir().expect("a temporary folder");
    let folder = root.path().join("probe");
    std::fs::create_dir(&folder).expect("create the folder");
    let manifest = format!(
        "---\nname: probe\nid: probe\ndescription: Probe.\nversion: 0.1.0\nkind: client\ntransport: stdio\n\
         metadata:\n  aip44:\n    acp_rev: 0fc18323\n    tier: basic\n    {key}: ./{file}\n---\n"
    );
    std::fs::write(folder.join("ACP.md"), manifest).expect("write the probe");
    std::fs::write(folder.join(file), format!("---\n{present}\n---\n")).expect("write the probe ref");
    let checked = check_file(&folder.join("ACP.md")).expect("the probe was just written");
    let diagnostic = checked
        .diagnostics
        .iter()
        .find(|d| d.code == Code::RefMissingFields)
        .unwrap_or_else(|| {
            panic!(
                "no ACP304 for a {file} with only `{present}`: {:?}",
                checked.diagnostics
            )
        });
    let (_, list) = diagnostic
        .message
        .split_once("lacks required")
        .unwrap_or_else(|| panic!("unexpected ACP304 message: {}", diagnostic.message));
    let mut fields: Vec<String> = list.split('`').skip(1).step_by(2).map(str::to_string).collect();
    // The key that picked the document type is required too; it was present in the probe.
    if let Some((key, _)) = present.split_once(':')
        && !key.starts_with("x-")
    {
        fields.insert(0, key.to_string());
    }
    fields
}

#[test]
fn manifest_md_documents_the_required_fields_of_each_ref_document() {
    let text = read_doc("manifest.md");
    let documents = [
        ("OPERATOR.md (", "operator", "OPERATOR.md", "x-probe: 1"),
        ("SANDBOX.md (", "sandbox", "SANDBOX.md", "x-probe: 1"),
        (
            "GOVERNANCE.md as a workspace manifest",
            "governance",
            "GOVERNANCE.md",
            "schema: governance.workspace/v1",
        ),
        (
            "GOVERNANCE.md as a policy",
            "governance",
            "GOVERNANCE.md",
            "doctype: policy",
        ),
    ];
    let mut problems = Vec::new();
    for (heading, key, file, present) in documents {
        let fields = required_ref_fields(key, file, present);
        assert!(!fields.is_empty(), "{file} with `{present}`: no required fields found");
        let rows: BTreeMap<String, Vec<String>> = table_rows(subsection(&text, heading))
            .into_iter()
            .filter_map(|cells| {
                let field = cells.first()?.strip_prefix('`')?.strip_suffix('`')?.to_string();
                Some((field, cells))
            })
            .collect();
        for field in fields {
            match rows.get(&field).and_then(|cells| cells.get(2)) {
                Some(required) if required.starts_with("yes") => {}
                Some(other) => problems.push(format!(
                    "`{heading}…`: `{field}` is required by lint, the table says `{other}`"
                )),
                None => problems.push(format!("`{heading}…`: no table row for the required `{field}`")),
            }
        }
    }
    assert!(problems.is_empty(), "docs/manifest.md:\n{}", problems.join("\n"));
}

#[test]
fn manifest_md_examples_lint_as_documented_and_link_every_rule() {
    let text = read_doc("manifest.md");
    let sections = parse_sections(&text);
    let mut problems = example_conventions(&sections);
    assert!(problems.is_empty(), "docs/manifest.md:\n{}", problems.join("\n"));
    let count = check_examples("manifest.md", &sections);
    assert!(
        count >= 4,
        "docs/manifest.md should have complete, tested examples; found {count}"
    );

    let real: BTreeSet<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(acp_manifest::codes::RETIRED.iter().map(|(retired, _)| *retired))
        .collect();
    for token in code_tokens(&text) {
        if !real.contains(token.as_str()) {
            problems.push(format!("`{token}` is named but is not a code"));
        }
    }
    // Every manifest rule (schema, AIP-44, refs, revision) is linked to its catalogue entry.
    for code in Code::ALL.iter().filter(|c| c.as_str() >= "ACP100") {
        let link = format!("(diagnostics.md#{})", code.as_str().to_ascii_lowercase());
        if !text.contains(&link) {
            problems.push(format!("{code} ({}) is never linked as `{link}`", code.summary()));
        }
    }
    assert!(problems.is_empty(), "docs/manifest.md:\n{}", problems.join("\n"));
}

/// The anchors a document defines: explicit `<a id="...">` and GitHub's heading slugs
/// (lower case, spaces to `-`, punctuation other than `-` and `_` dropped).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("<a id=\"") {
        let rest = &text[at + 7..];
        found.insert(rest[..rest.find('"').unwrap_or(0)].to_string());
    }
    let mut in_fence = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let slug: String = line
            .trim_start_matches('#')
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        found.insert(slug);
    }
    found
}

#[test]
fn links_between_the_references_name_existing_anchors() {
    let docs = ["diagnostics.md", "manifest.md"];
    let defined: BTreeMap<&str, BTreeSet<String>> = docs.iter().map(|d| (*d, anchors(&read_doc(d)))).collect();
    let mut problems = Vec::new();
    let mut links = 0;
    for doc in docs {
        let text = read_doc(doc);
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')').unwrap_or(rest.len())];
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if file.is_empty() { doc } else { file };
            let Some(known) = defined.get(file) else { continue };
            links += 1;
            if !anchor.is_empty() && !known.contains(anchor) {
                problems.push(format!("docs/{doc}: link to `{target}`, which is not defined"));
            }
        }
    }
    assert!(links > 50, "only {links} links between the two references were found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
