//! Differential tests against the published AIP-44 schema (read from `../shared` at test
//! time; skipped when absent) and against our own generated schema.
//!
//! The frontmatter is split and parsed here independently of our parser (with
//! `serde-saphyr`), so a bug in our YAML reader cannot hide a disagreement.

use crate::common;

use std::path::Path;

use acp_manifest::manifest::{check_file, json_schema};

/// The frontmatter of `path` as JSON, read without any of our code; `None` if it has none or
/// its YAML does not parse.
fn frontmatter_json(path: &Path) -> Option<serde_json::Value> {
    let bytes = std::fs::read(path).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?.replace("\r\n", "\n");
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let rest = text.strip_prefix("---\n")?;
    let mut yaml = String::new();
    for line in rest.split_inclusive('\n') {
        if matches!(line.trim_end(), "---" | "...") {
            // YAML 1.2 core booleans (`off` is a string), as our reader and the npm `yaml`
            // package read them.
            let options = serde_saphyr::options! { strict_booleans: true };
            return serde_saphyr::from_str_with_options::<serde_json::Value>(&yaml, options).ok();
        }
        yaml.push_str(line);
    }
    None
}

/// A validator for the published AIP-44 schema; `None` (after saying so) when `../shared` is absent.
fn published_validator() -> Option<jsonschema::Validator> {
    let Some(shared) = common::shared() else {
        eprintln!("skipped: ../shared is absent");
        return None;
    };
    let text = std::fs::read_to_string(shared.join("upstream/aip-44/ACP.schema.json")).unwrap();
    Some(jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap())
}

fn all_manifests() -> Vec<std::path::PathBuf> {
    let mut all = common::cases("bad");
    all.extend(common::cases("good"));
    all.extend(common::upstream_examples());
    all
}

#[test]
fn whatever_the_published_schema_rejects_lint_rejects() {
    let Some(upstream) = published_validator() else { return };
    let mut rejected_by_both = 0;
    for path in all_manifests() {
        let upstream_accepts = frontmatter_json(&path).is_some_and(|json| upstream.is_valid(&json));
        let ours = check_file(&path).unwrap();
        if !upstream_accepts {
            assert!(
                ours.has_errors(),
                "{}: the published schema rejects it, our lint accepts it",
                path.display()
            );
            rejected_by_both += 1;
        }
    }
    assert!(
        rejected_by_both >= 30,
        "the corpus should exercise schema rejections, got {rejected_by_both}"
    );
}

#[test]
fn our_generated_schema_agrees_with_the_published_one_on_the_corpus() {
    let Some(published) = published_validator() else { return };
    let ours = jsonschema::validator_for(&json_schema()).unwrap();
    let mut compared = 0;
    for path in all_manifests() {
        let Some(json) = frontmatter_json(&path) else { continue };
        assert_eq!(
            ours.is_valid(&json),
            published.is_valid(&json),
            "{}: our schema and the published one disagree on {json}",
            path.display()
        );
        compared += 1;
    }
    assert!(compared >= 40, "only {compared} manifests compared");
}

#[test]
fn our_checker_agrees_with_our_generated_schema_on_schema_errors() {
    // Whenever our generated schema rejects a manifest, the checker reports a schema-family
    // (ACP1xx) error, an earlier input error, or ACP203 (the schema's one if/then rule:
    // a sandboxed tier needs a sandbox).
    let ours = jsonschema::validator_for(&json_schema()).unwrap();
    for path in all_manifests() {
        let Some(json) = frontmatter_json(&path) else { continue };
        if ours.is_valid(&json) {
            continue;
        }
        let checked = check_file(&path).unwrap();
        assert!(
            checked.diagnostics.iter().any(|d| d.is_error()
                && (d.code.as_str() < "ACP200" || d.code == acp_manifest::Code::SandboxedWithoutSandbox)),
            "{}: the schema rejects {json} but no ACP0xx/ACP1xx error was reported: {:?}",
            path.display(),
            checked.diagnostics
        );
    }
}

/// The schema's `pattern`s are ECMA-262 regular expressions. For each field that has one, our
/// checker (regex-lite, ASCII `\d` / `\w`) and the `jsonschema` crate (an ECMA-262 engine)
/// give the same verdict on values chosen to tell the dialects apart: other scripts' digits,
/// full-width letters, a trailing newline (ECMA's `$` without the `m` flag is the end of the
/// input), non-breaking spaces, empty strings and lengths at the bounds.
#[test]
fn each_schema_pattern_judges_values_as_an_ecma_262_engine_does() {
    use acp_manifest::manifest::check_bytes;
    use acp_manifest::manifest::model::{ACP_REV_PATTERN, ID_PATTERN, TAG_PATTERN, VERSION_PATTERN};
    let tricky = [
        "",
        "a",
        "ab",
        "0",
        "a-b",
        "-ab",
        "ab-",
        "AB",
        "a_b",
        "a b",
        "a\u{a0}b",
        "ab\n",
        "\nab",
        "\u{661}\u{662}",
        "\u{ff41}\u{ff42}",
        "é-a",
        "1.2.3",
        "1.2.3\n",
        "\u{661}.2.3",
        "1.\u{663}.3",
        "01.2.3",
        "1.2.3-beta.1",
        "1.2.3+build_5",
        "1.2.3-",
        "v1.2.3",
        "1.2",
        "0fc1832",
        "0fc18323a9fdad4e5b4a20ec2f1645dde843fd9b",
        "0FC1832",
        "0fc1832g",
        "0fc18\u{663}23",
        &"a".repeat(64),
        &"a".repeat(65),
        &"0".repeat(40),
        &"0".repeat(41),
    ];
    // (the pattern, the field it checks in a manifest)
    let fields = [
        (ID_PATTERN, "id"),
        (VERSION_PATTERN, "version"),
        (ACP_REV_PATTERN, "acp_rev"),
        (TAG_PATTERN, "tags"),
    ];
    let mut compared = 0;
    for (pattern, field) in fields {
        let oracle = jsonschema::validator_for(&serde_json::json!({"type": "string", "pattern": pattern}))
            .expect("the oracle compiles the pattern");
        for value in tricky {
            let text = manifest(field, value);
            let checked = check_bytes(Path::new("probe/ACP.md"), text.as_bytes());
            let ours = !checked
                .diagnostics
                .iter()
                .any(|d| d.code == acp_manifest::Code::PatternMismatch);
            assert_eq!(
                ours,
                oracle.is_valid(&serde_json::json!(value)),
                "`{pattern}` on {value:?}: our checker says {ours}\n{text}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 4 * tricky.len());
}

/// A clean server manifest with `value` (JSON-quoted, so any string survives YAML) at `field`.
fn manifest(field: &str, value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap();
    let pick = |name: &str, default: &str| {
        if name == field {
            quoted.clone()
        } else {
            default.to_string()
        }
    };
    format!(
        "---\nname: probe\nid: {}\ndescription: d\nversion: {}\nkind: client\ntransport: stdio\ntags: [{}]\nmetadata:\n  aip44:\n    acp_rev: {}\n    tier: basic\n---\n",
        pick("id", "probe"),
        pick("version", "0.1.0"),
        pick("tags", "probe"),
        pick("acp_rev", "0fc18323"),
    )
}
