//! The manifest corpus: each `tests/manifests/{bad,good}/<case>/ACP.md` has an `expected`
//! file, written by hand, listing every diagnostic as `<severity> <CODE> <line>:<column>`.
//! Good cases also have `capabilities.json`, the effective capabilities worked out by hand
//! from the tier table.

use crate::common;

use std::path::Path;

use acp_manifest::manifest::check_file;

fn actual_lines(path: &Path) -> Vec<String> {
    let checked = check_file(path).unwrap();
    checked
        .diagnostics
        .iter()
        .map(|d| {
            let at = checked.document.source.position(d.span.start);
            format!("{} {} {}:{}", d.severity.as_str(), d.code, at.line, at.column)
        })
        .collect()
}

fn expected_lines(path: &Path) -> Vec<String> {
    let file = path.with_file_name("expected");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn compare(group: &str) -> usize {
    let cases = common::cases(group);
    let mut failures = Vec::new();
    for case in &cases {
        let (actual, expected) = (actual_lines(case), expected_lines(case));
        if actual != expected {
            failures.push(format!(
                "{}\n  expected: {expected:?}\n  actual:   {actual:?}",
                case.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    cases.len()
}

#[test]
fn bad_manifests_report_exactly_their_expected_diagnostics() {
    let count = compare("bad");
    assert!(count >= 40, "the corpus needs at least 40 bad manifests, found {count}");
}

#[test]
fn good_manifests_report_exactly_their_expected_warnings() {
    let count = compare("good");
    assert!(count >= 8, "the corpus needs at least 8 good manifests, found {count}");
}

#[test]
fn every_bad_manifest_has_an_error() {
    for case in common::cases("bad") {
        let checked = check_file(&case).unwrap();
        assert!(checked.has_errors(), "{} has no error", case.display());
        assert!(
            checked.manifest.is_none(),
            "{}: a model was built despite errors",
            case.display()
        );
    }
}

#[test]
fn good_manifests_have_the_hand_computed_capabilities() {
    for case in common::cases("good") {
        let checked = check_file(&case).unwrap();
        assert!(!checked.has_errors(), "{}: {:?}", case.display(), checked.diagnostics);
        let file = case.with_file_name("capabilities.json");
        let expected: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display())))
                .unwrap();
        let actual = checked.effective_capabilities().unwrap().to_json();
        assert_eq!(actual, expected, "{}", case.display());
    }
}

#[test]
fn every_error_code_except_ambiguity_is_exercised_by_the_corpus() {
    // Codes about a file's size or kind are exercised by `scaffold-aip/tests/hostile.rs` instead.
    let mut seen = std::collections::BTreeSet::new();
    for group in ["bad", "good"] {
        for case in common::cases(group) {
            for line in expected_lines(&case) {
                seen.insert(line.split_whitespace().nth(1).unwrap().to_string());
            }
        }
    }
    let missing: Vec<_> = acp_manifest::Code::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| *c != "ACP401" && !seen.contains(*c))
        .filter(|c| !common::NOT_FROM_TEXT.iter().any(|(code, _)| code.as_str() == *c))
        .collect();
    assert!(missing.is_empty(), "codes with no corpus case: {missing:?}");
}

/// The sign-in rules (`metadata.agentacp.auth`) say what is wrong and what to write instead.
#[test]
fn sign_in_findings_name_the_method_and_the_fix() {
    let path = common::corpus().join("bad/sign-in-args/ACP.md");
    let checked = check_file(&path).unwrap();
    let said: Vec<(String, String)> = checked
        .diagnostics
        .iter()
        .map(|d| (d.message.clone(), d.help.clone().unwrap_or_default()))
        .collect();
    let has = |message: &str, help: &str| said.iter().any(|(m, h)| m.contains(message) && h.contains(help));
    assert!(
        has("terminal sign-in method `login` has no `args`", "args: [--login]"),
        "{said:?}"
    );
    assert!(has("terminal sign-in method `setup` has no `args`", "args"), "{said:?}");
    assert!(
        has(
            "agent sign-in method `login` has `env`",
            "make the method `type: terminal`"
        ),
        "{said:?}"
    );
    assert!(has("sign-in method id `login` is declared twice", ""), "{said:?}");
}
