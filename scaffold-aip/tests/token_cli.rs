//! `scaffold-aip token`: new, hash, revoke, and the token file they keep (the format
//! `agentacp::auth::TokenStore` reads: `<identity> sha256:<64 lowercase hex>`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `scaffold-aip token hash` with `input` on stdin.
fn hash(dir: &Path, input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .current_dir(dir)
        .args(["token", "hash"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Runs `token new` and returns the token printed on stdout.
fn new_token(dir: &Path, args: &[&str]) -> String {
    let output = run(dir, &[&["token", "new"], args].concat());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let token = stdout.trim_end_matches('\n');
    assert!(!token.contains('\n'), "one line on stdout: {stdout:?}");
    assert!(
        text(&output.stderr).contains("store it now; only its hash is kept"),
        "{}",
        text(&output.stderr)
    );
    token.to_string()
}

/// The SHA-256 of `token` as `scaffold-aip token hash` prints it (checked against a fixed
/// vector in `token_hash_prints_the_sha256_of_one_line`).
fn hash_of(dir: &Path, token: &str) -> String {
    let output = hash(dir, &format!("{token}\n"));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    text(&output.stdout).trim_end().to_string()
}

/// The entry lines of a token file: every line must be an entry in the format agentacp reads.
fn entries(path: &Path) -> Vec<(String, String)> {
    let line_format = regex::Regex::new(r"^([A-Za-z0-9._@:-]{1,128}) (sha256:[0-9a-f]{64})$").unwrap();
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let captures = line_format
                .captures(line)
                .unwrap_or_else(|| panic!("not a token file entry: {line:?}"));
            (captures[1].to_string(), captures[2].to_string())
        })
        .collect()
}

#[test]
fn token_hash_prints_the_sha256_of_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for input in ["abc\n", "abc", "abc\r\n"] {
        let output = hash(dir.path(), input);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        assert_eq!(
            text(&output.stdout),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n",
            "{input:?}"
        );
    }
    for input in ["", "\n", "one\ntwo\n"] {
        let output = hash(dir.path(), input);
        assert_eq!(output.status.code(), Some(2), "{input:?}");
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn token_new_adds_the_hash_to_a_private_file() {
    let dir = tempfile::tempdir().unwrap();
    let token = new_token(dir.path(), &["--identity", "alice", "--file", "tokens"]);
    let hex = token.strip_prefix("acp_").expect("acp_ prefix");
    assert_eq!(hex.len(), 64);
    assert!(hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{token}");
    let path = dir.path().join("tokens");
    assert_eq!(entries(&path), [("alice".to_string(), hash_of(dir.path(), &token))]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }
    // A second identity is appended; the first stays.
    let other = new_token(dir.path(), &["--identity", "ci-bot", "--file", "tokens"]);
    assert_ne!(other, token);
    let listed = entries(&path);
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1], ("ci-bot".to_string(), hash_of(dir.path(), &other)));
}

#[test]
fn token_new_without_a_file_prints_the_line_to_add() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(dir.path(), &["token", "new", "--identity", "alice"]);
    assert_eq!(output.status.code(), Some(0));
    let token = text(&output.stdout).trim_end().to_string();
    let line = format!("alice {}", hash_of(dir.path(), &token));
    assert!(
        text(&output.stderr).lines().any(|l| l == line),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no file written");
}

#[test]
fn a_duplicate_identity_is_refused_and_replace_rotates_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    std::fs::write(&path, "# our tokens\nbob sha256:".to_string() + &"0".repeat(64)).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let first = new_token(dir.path(), &["--identity", "alice", "--file", "tokens"]);
    let before = std::fs::read_to_string(&path).unwrap();
    assert!(before.starts_with("# our tokens\nbob sha256:"), "{before}");

    let refused = run(dir.path(), &["token", "new", "--identity", "alice", "--file", "tokens"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(refused.stdout.is_empty(), "no token is shown for nothing");
    let message = text(&refused.stderr);
    assert!(
        message.contains("`alice` already has a token") && message.contains("--replace"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before, "the file is unchanged");

    let second = new_token(dir.path(), &["--identity", "alice", "--file", "tokens", "--replace"]);
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(
        after.starts_with("# our tokens\nbob sha256:"),
        "comments and others kept: {after}"
    );
    let alice: Vec<_> = after.lines().filter(|line| line.starts_with("alice ")).collect();
    assert_eq!(alice, [format!("alice {}", hash_of(dir.path(), &second))]);
    assert!(!after.contains(&hash_of(dir.path(), &first)), "the old token is gone");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the rewritten file stays private: {mode:o}");
    }
}

#[test]
fn a_bad_identity_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for identity in ["al ice", "", "a/b"] {
        let output = run(
            dir.path(),
            &["token", "new", "--identity", identity, "--file", "tokens"],
        );
        assert_eq!(output.status.code(), Some(2), "{identity:?}");
        assert!(output.stdout.is_empty());
        assert!(
            text(&output.stderr).contains("not an identity"),
            "{}",
            text(&output.stderr)
        );
    }
    assert!(!dir.path().join("tokens").exists());
}

#[test]
fn revoke_removes_the_identity_and_refuses_an_absent_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let alice = new_token(dir.path(), &["--identity", "alice", "--file", "tokens"]);
    let bob = new_token(dir.path(), &["--identity", "bob", "--file", "tokens"]);

    let output = run(
        dir.path(),
        &["token", "revoke", "--identity", "alice", "--file", "tokens"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(entries(&path), [("bob".to_string(), hash_of(dir.path(), &bob))]);
    assert!(
        !std::fs::read_to_string(&path)
            .unwrap()
            .contains(&hash_of(dir.path(), &alice))
    );

    let again = run(
        dir.path(),
        &["token", "revoke", "--identity", "alice", "--file", "tokens"],
    );
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("no token for `alice`"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(entries(&path).len(), 1, "bob's entry is untouched");

    let missing = run(
        dir.path(),
        &["token", "revoke", "--identity", "bob", "--file", "missing"],
    );
    assert_eq!(missing.status.code(), Some(2));
}

#[cfg(unix)]
#[test]
fn a_token_file_others_may_read_is_kept_as_it_is_with_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    std::fs::write(&path, "").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = run(dir.path(), &["token", "new", "--identity", "alice", "--file", "tokens"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(text(&output.stderr).contains("chmod 600"), "{}", text(&output.stderr));
    assert_eq!(entries(&path).len(), 1);
    let private = run(dir.path(), &["token", "new", "--identity", "bob", "--file", "private"]);
    assert!(
        !text(&private.stderr).contains("chmod 600"),
        "{}",
        text(&private.stderr)
    );
}

#[test]
fn every_token_command_has_help() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["token", "--help"][..],
        &["token", "new", "--help"],
        &["token", "hash", "--help"],
        &["token", "revoke", "--help"],
    ] {
        let output = run(dir.path(), args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(text(&output.stdout).contains("Usage: scaffold-aip token"), "{args:?}");
    }
    let output = run(dir.path(), &["token", "new", "--identity", "a", "--replace"]);
    assert_eq!(output.status.code(), Some(2), "--replace needs --file");
}
