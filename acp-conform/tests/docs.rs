//! Every check (of the v1 and the v2 suite) is documented in docs/conform.md, under its id,
//! and every id documented there is a check.

#[test]
fn docs_conform_lists_exactly_the_checks() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/conform.md");
    let text = std::fs::read_to_string(&path).expect("docs/conform.md");
    let mut checks = acp_conform::all_checks();
    checks.extend(acp_conform::v2::all());
    for check in &checks {
        assert!(
            text.contains(&format!("| `{}` |", check.id)),
            "docs/conform.md lacks `{}`",
            check.id
        );
    }
    let documented = text.lines().filter(|line| line.starts_with("| `")).count();
    assert_eq!(
        documented,
        checks.len(),
        "docs/conform.md documents a check that does not exist"
    );
}
