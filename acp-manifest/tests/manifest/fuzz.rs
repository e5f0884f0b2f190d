//! Fuzzing the parser and checker with proptest: arbitrary bytes, and random edits of valid
//! manifests. Nothing may panic, and every result must be well-formed: spans inside the text
//! and on character boundaries, no internal "could not read" error, a model exactly when
//! there is no error. `PROPTEST_CASES=100000` runs it longer.

use crate::common;

use std::path::PathBuf;

use acp_manifest::manifest::check_bytes;
use proptest::prelude::*;

/// A valid manifest (with refs that resolve) to mutate: the clean fixture of the CLI tests.
fn seed() -> (PathBuf, String) {
    let path = common::workspace().join("scaffold-aip/tests/fixtures/cli-clean/ACP.md");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

fn assert_well_formed(path: &std::path::Path, bytes: &[u8]) {
    let checked = check_bytes(path, bytes);
    let text = checked.document.source.text();
    for d in &checked.diagnostics {
        assert!(
            d.span.start <= d.span.end && d.span.end <= text.len(),
            "span {:?} outside {} bytes",
            d.span,
            text.len()
        );
        assert!(
            text.is_char_boundary(d.span.start) && text.is_char_boundary(d.span.end),
            "span {:?} splits a character",
            d.span
        );
        assert!(
            !d.message.starts_with("could not read the manifest"),
            "schema and model disagree: {}",
            d.message
        );
        let _ = checked.document.source.position(d.span.start);
    }
    assert_eq!(
        checked.manifest.is_some(),
        !checked.has_errors(),
        "{:?}",
        checked.diagnostics
    );
    if checked.manifest.is_some() {
        assert!(checked.effective_capabilities().is_some());
    }
}

/// Characters that matter to YAML and to our frontmatter splitter.
fn yaml_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::sample::select(vec![':', '-', ' ', '\n', '\t', '#', '"', '\'', '[', ']', '{', '}', ',', '&', '*', '!', '|', '>', '?', '%', '@', '`', '\r', '\u{feff}', 'é', '0', 'a']),
        1 => any::<char>(),
    ]
}

#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, String),
    Delete(usize, usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), prop::collection::vec(yaml_char(), 1..4))
            .prop_map(|(at, cs)| Edit::Insert(at, cs.into_iter().collect())),
        (any::<usize>(), 1usize..12).prop_map(|(at, n)| Edit::Delete(at, n)),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    let boundary = |at: usize| {
        let mut at = at % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    match edit {
        Edit::Insert(at, s) => {
            let at = boundary(*at);
            format!("{}{s}{}", &text[..at], &text[at..])
        }
        Edit::Delete(at, n) => {
            let start = boundary(*at);
            let end = boundary(start + n);
            format!("{}{}", &text[..start], &text[end.max(start)..])
        }
        Edit::DuplicateLine(i) => {
            let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
            let i = i % lines.len();
            lines.insert(i, lines[i]);
            lines.concat()
        }
        Edit::SwapLines(a, b) => {
            let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
            let (a, b) = (a % lines.len(), b % lines.len());
            lines.swap(a, b);
            lines.concat()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let (path, _) = seed();
        assert_well_formed(&path, &bytes);
        let mut framed = b"---\n".to_vec();
        framed.extend_from_slice(&bytes);
        framed.extend_from_slice(b"\n---\n");
        assert_well_formed(&path, &framed);
    }

    #[test]
    fn edited_manifests_never_panic(edits in prop::collection::vec(edit(), 1..6)) {
        let (path, mut text) = seed();
        for e in &edits {
            text = apply(&text, e);
        }
        assert_well_formed(&path, text.as_bytes());
    }
}
