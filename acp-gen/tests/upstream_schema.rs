//! Differential tests against the published AIP-44 schema (read from `../shared` at test
//! time; skipped when absent) and against our own generated schema.
//!
//! The frontmatter is split and parsed here independently of our parser (with
//! `serde-saphyr`), so a bug in our YAML reader cannot hide a disagreement.

mod common;

use std::path::Path;

use acp_gen::manifest::{check_file, json_schema};

/// The frontmatter of `path` as JSON, read without any of our code; `None` if it has none or
/// its YAML does not parse.
fn frontmatter_json(path: &Path) -> Option<serde_json::Value> {
    let bytes = std::fs::read(path).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?.replace("\r\n", "\n");
    let rest = text.strip_prefix("---\n")?;
    let end = rest
        .find("\n---\n")
        .map(|i| i + 1)
        .or_else(|| rest.strip_suffix("\n---").map(|r| r.len() + 1))?;
    let yaml = &rest[..end];
    serde_saphyr::from_str::<serde_json::Value>(yaml).ok()
}

fn all_manifests() -> Vec<std::path::PathBuf> {
    let mut all = common::cases("bad");
    all.extend(common::cases("good"));
    all.extend(common::upstream_examples());
    all
}

#[test]
fn whatever_the_published_schema_rejects_lint_rejects() {
    let Some(shared) = common::shared() else {
        eprintln!("skipped: ../shared is absent");
        return;
    };
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shared.join("upstream/aip-44/ACP.schema.json")).unwrap())
            .unwrap();
    let upstream = jsonschema::validator_for(&schema).unwrap();
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
    let Some(shared) = common::shared() else {
        eprintln!("skipped: ../shared is absent");
        return;
    };
    let published: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shared.join("upstream/aip-44/ACP.schema.json")).unwrap())
            .unwrap();
    let published = jsonschema::validator_for(&published).unwrap();
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
    // (ACP1xx) error — or an earlier input error — for it.
    let ours = jsonschema::validator_for(&json_schema()).unwrap();
    for path in all_manifests() {
        let Some(json) = frontmatter_json(&path) else { continue };
        if ours.is_valid(&json) {
            continue;
        }
        let checked = check_file(&path).unwrap();
        assert!(
            checked
                .diagnostics
                .iter()
                .any(|d| d.is_error() && d.code.as_str() < "ACP200"),
            "{}: the schema rejects {json} but no ACP0xx/ACP1xx error was reported: {:?}",
            path.display(),
            checked.diagnostics
        );
    }
}

#[test]
fn checked_in_schema_matches_the_types() {
    let path = common::workspace().join("schemas/ACP.schema.json");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == acp_gen::manifest::json_schema_text(),
        "schemas/ACP.schema.json is stale: run `cargo run -p acp-gen --bin scaffold-aip -- schema > schemas/ACP.schema.json`"
    );
}
