//! Hostile manifests (issue 23, items 13–15): whatever a manifest or a ref holds, or however
//! big or odd a file it is, `lint`, `explain` and the macro's expansion answer with a
//! diagnostic — never a stack overflow, a hang or unbounded memory.
//!
//! Stack overflows abort the whole process, so the checks that could overflow run either in
//! the `scaffold-aip` binary or in a child process (this test binary, re-run for one test) on
//! a thread with a small stack: an overflow then fails the test instead of the harness.
//!
//! The codes about a file's size or kind, which no manifest text can show, are checked here; the
//! list of them (`NOT_FROM_TEXT` in `acp-manifest/tests/manifest/common.rs`) names these tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use acp_manifest::Code;
use acp_manifest::document::MAX_FILE_BYTES;
use acp_manifest::manifest::check_file;
use acp_manifest::yaml::MAX_DEPTH;

/// Writes `<dir>/<name>/ACP.md` with `yaml` as its frontmatter and returns its path.
fn write_manifest(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join("ACP.md");
    std::fs::write(&path, format!("---\n{yaml}---\n# Body\n")).unwrap();
    path
}

/// `depth` block sequences nested on one line under `a:` (`a:\n  - - - … x`).
fn block_sequences(depth: usize) -> String {
    format!("a:\n  {}x\n", "- ".repeat(depth - 1))
}

/// `depth` block mappings, each indented one space more than its parent.
fn block_mappings(depth: usize) -> String {
    (0..depth)
        .map(|level| format!("{}k{level}:\n", " ".repeat(level)))
        .collect::<String>()
        .trim_end_matches(":\n")
        .to_string()
        + ": v\n"
}

/// A valid manifest that keeps `deep` (YAML) under an extra top-level key.
fn valid_with(name: &str, extra: &str) -> String {
    format!(
        "name: {name}\nid: {name}\ndescription: A client.\nversion: 0.1.0\nkind: client\ntransport: stdio\n\
         metadata:\n  aip44:\n    acp_rev: 0fc18323\n    tier: basic\n{extra}"
    )
}

fn scaffold_aip(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// Asserts the command exited normally with status 1 (findings) and reported `code`.
fn assert_reported(output: &Output, code: Code) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        output.status.code(),
        Some(1),
        "expected exit 1 with {code}, got {} (a signal means a crash):\n{}",
        output.status,
        &text[..text.len().min(4000)]
    );
    assert!(
        text.contains(&format!("[{code}]")),
        "no {code}:\n{}",
        &text[..text.len().min(4000)]
    );
}

/// Runs `body` on a thread with a `stack`-byte stack inside a child process — this test binary
/// re-run for the one test `name` — so that a stack overflow aborts the child and fails this
/// test rather than killing the harness.
fn in_child_on_small_stack(name: &str, stack: usize, body: fn()) {
    const CHILD: &str = "ACP_GEN_HOSTILE_CHILD";
    if std::env::var_os(CHILD).is_some_and(|v| v == name) {
        let thread = std::thread::Builder::new().stack_size(stack).spawn(body).unwrap();
        thread.join().unwrap();
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(&format!("test {name} ... ok")),
        "`{name}` on a {stack}-byte stack failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A modest stack: std's default for spawned threads, less than rustc gives proc macros.
const SMALL_STACK: usize = 2 << 20;

// ---------------------------------------------------------------------------------------
// Item 13: nesting depth.

#[test]
fn lint_reports_10000_nested_block_sequences_instead_of_overflowing() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_manifest(dir.path(), "deep", &block_sequences(10_000));
    assert_reported(&scaffold_aip(&["lint".as_ref(), path.as_ref()]), Code::NestingTooDeep);
}

#[test]
fn explain_reports_60000_nested_block_sequences_instead_of_overflowing() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_manifest(dir.path(), "deep", &block_sequences(60_000));
    assert_reported(
        &scaffold_aip(&["explain".as_ref(), path.as_ref()]),
        Code::NestingTooDeep,
    );
}

#[test]
fn lint_reports_1400_nested_block_mappings_as_too_deep() {
    // About the deepest block mapping that fits the size limit (each level indents once more).
    let dir = tempfile::tempdir().unwrap();
    let path = write_manifest(dir.path(), "deep", &block_mappings(1_400));
    assert_reported(&scaffold_aip(&["lint".as_ref(), path.as_ref()]), Code::NestingTooDeep);
}

#[test]
fn macro_expansion_reports_deep_nesting_on_a_small_stack() {
    in_child_on_small_stack(
        "macro_expansion_reports_deep_nesting_on_a_small_stack",
        SMALL_STACK,
        || {
            let dir = tempfile::tempdir().unwrap();
            let yaml = valid_with("deep", &block_mappings(1_000));
            let path = write_manifest(dir.path(), "deep", &yaml);
            let text = expand_at(
                &path,
                quote::quote!(
                    struct Deep;
                ),
            );
            assert!(text.contains("compile_error"), "{text}");
            assert!(text.contains("error[ACP012]"), "{text}");
        },
    );
}

#[test]
fn the_deepest_allowed_nesting_is_checked_explained_and_expanded_on_a_small_stack() {
    // Everything that walks the tree (schema check, JSON, the model, explain, the macro,
    // dropping it) at the limit, on an eighth of the modest stack: the limit leaves room.
    in_child_on_small_stack(
        "the_deepest_allowed_nesting_is_checked_explained_and_expanded_on_a_small_stack",
        SMALL_STACK / 8,
        || {
            let dir = tempfile::tempdir().unwrap();
            // The root mapping is one level; `x-deep` holds the rest.
            let deep = format!("x-deep:\n  {}x\n", "- ".repeat(MAX_DEPTH - 1));
            let path = write_manifest(dir.path(), "deep", &valid_with("deep", &deep));
            let checked = check_file(&path).unwrap();
            assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
            assert!(acp_manifest::explain::explain(&checked).is_some());
            let text = expand_at(
                &path,
                quote::quote!(
                    struct Deep;
                ),
            );
            assert!(!text.contains("compile_error"), "{text}");

            let one_more = format!("x-deep:\n  {}x\n", "- ".repeat(MAX_DEPTH));
            let path = write_manifest(dir.path(), "deep", &valid_with("deep", &one_more));
            let codes: Vec<Code> = check_file(&path).unwrap().diagnostics.iter().map(|d| d.code).collect();
            assert_eq!(codes, vec![Code::NestingTooDeep]);
        },
    );
}

// ---------------------------------------------------------------------------------------
// Item 15: file size and kind.

/// Writes `head` at the start of a file of `size` bytes (sparse: the rest takes no disk).
fn sparse(path: &Path, head: &str, size: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, head).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(size)
        .unwrap();
}

/// The codes `check_file` reports for `path`.
fn codes(path: &Path) -> Vec<Code> {
    check_file(path).unwrap().diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn a_manifest_one_byte_over_the_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let at_limit = write_manifest(dir.path(), "deep", "a: 1\n");
    let text = std::fs::read_to_string(&at_limit).unwrap();
    let padding = MAX_FILE_BYTES as usize - text.len();
    std::fs::write(&at_limit, text.clone() + &"x".repeat(padding)).unwrap();
    assert!(!codes(&at_limit).contains(&Code::FileTooLarge));
    std::fs::write(&at_limit, text + &"x".repeat(padding + 1)).unwrap();
    assert_eq!(codes(&at_limit), vec![Code::FileTooLarge]);
    let checked = check_file(&at_limit).unwrap();
    assert!(checked.document.source.text().is_empty(), "nothing of it is kept");
}

#[test]
fn lint_and_explain_refuse_a_3_gb_manifest_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge/ACP.md");
    sparse(&path, "---\na: [", 3 << 30);
    for command in ["lint", "explain"] {
        let output = scaffold_aip(&[command.as_ref(), path.as_ref()]);
        assert_reported(&output, Code::FileTooLarge);
        let text = String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
        assert!(text.contains("3221225472 bytes"), "{text}");
    }
}

#[cfg(unix)]
#[test]
fn lint_and_explain_refuse_dev_zero() {
    for command in ["lint", "explain"] {
        let output = scaffold_aip(&[command.as_ref(), "/dev/zero".as_ref()]);
        assert_reported(&output, Code::NotARegularFile);
        let text = String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
        assert!(
            text.contains("/dev/zero:1:1") && text.contains("a character device"),
            "{text}"
        );
    }
}

/// Makes a FIFO at `path` with `mkfifo`.
#[cfg(target_os = "linux")]
fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Runs `scaffold-aip args` while a writer offers `text` on the FIFO at `fifo`: a reader that
/// opens it gets the text and its end, so a command that reads the FIFO finishes (with the
/// wrong answer) instead of hanging. Linux: opening a FIFO read-write never blocks, which is
/// how the writer is let go when nothing opened the FIFO.
#[cfg(target_os = "linux")]
fn with_fifo_writer(fifo: &Path, text: &'static str, args: &[&std::ffi::OsStr]) -> Output {
    use std::io::Write;
    let writer = {
        let fifo = fifo.to_path_buf();
        std::thread::spawn(move || {
            if let Ok(mut file) = std::fs::OpenOptions::new().write(true).open(fifo) {
                let _ = file.write_all(text.as_bytes());
            }
        })
    };
    let output = scaffold_aip(args);
    let release = std::fs::OpenOptions::new().read(true).write(true).open(fifo).unwrap();
    writer.join().unwrap();
    drop(release);
    output
}

#[cfg(target_os = "linux")]
#[test]
fn lint_and_explain_refuse_a_fifo_instead_of_waiting_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo/ACP.md");
    mkfifo(&fifo);
    for command in ["lint", "explain"] {
        let output = with_fifo_writer(&fifo, "---\na: 1\n---\n", &[command.as_ref(), fifo.as_ref()]);
        assert_reported(&output, Code::NotARegularFile);
    }
    // Found while searching a folder, too.
    let output = scaffold_aip(&["lint".as_ref(), dir.path().as_ref()]);
    assert_reported(&output, Code::NotARegularFile);
}

/// A valid client manifest in `dir/refs-case` whose operator ref is `operator`.
fn with_operator_ref(dir: &Path, operator: &str) -> PathBuf {
    let yaml =
        valid_with("refs-case", "").replace("kind: client", "kind: server") + &format!("    operator: {operator}\n");
    write_manifest(dir, "refs-case", &yaml)
}

#[test]
fn a_2_gb_ref_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = with_operator_ref(dir.path(), "./OPERATOR.md");
    sparse(&manifest.with_file_name("OPERATOR.md"), "---\nname: O\n", 2 << 30);
    let output = scaffold_aip(&["lint".as_ref(), manifest.as_ref()]);
    assert_reported(&output, Code::RefUnreadable);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("is 2147483648 bytes"), "{text}");
}

#[cfg(target_os = "linux")]
#[test]
fn refs_to_a_fifo_or_a_device_are_refused_instead_of_read() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = with_operator_ref(dir.path(), "./OPERATOR.md");
    mkfifo(&manifest.with_file_name("OPERATOR.md"));
    let text = "---\nname: O\nid: o\npersona_summary: p\nversion: 0.1.0\nprofile: {role: r}\n---\n";
    let output = with_fifo_writer(
        &manifest.with_file_name("OPERATOR.md"),
        text,
        &["lint".as_ref(), manifest.as_ref()],
    );
    assert_reported(&output, Code::RefUnreadable);
    assert!(String::from_utf8_lossy(&output.stdout).contains("is a FIFO"));

    let manifest = with_operator_ref(dir.path(), "../../../../../../../../../../dev/zero");
    assert_eq!(codes(&manifest), vec![Code::RefUnreadable]);
}

#[test]
fn macro_expansion_refuses_an_oversized_manifest_without_including_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge/ACP.md");
    sparse(&path, "---\nname: huge\n", MAX_FILE_BYTES + 1);
    let text = expand_at(
        &path,
        quote::quote!(
            struct Huge;
        ),
    );
    assert!(text.contains("error[ACP013]"), "{text}");
    // rustc would read it whole for `include_bytes!`.
    assert!(!text.contains("include_bytes"), "{text}");
}

/// What `#[acp_operator(manifest = "ACP.md")]` on `item` expands to, for the manifest at `path`.
fn expand_at(path: &std::path::Path, item: proc_macro2::TokenStream) -> String {
    let location = acp_expand::Location {
        crate_dir: path.parent().unwrap().to_path_buf(),
        source_dir: None,
    };
    acp_expand::expand(quote::quote!(manifest = "ACP.md"), item, &location).to_string()
}
