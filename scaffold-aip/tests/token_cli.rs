//! `scaffold-aip token`: new, hash, revoke, and the token file they keep (the format
//! `agentacp::auth::TokenStore` reads: `<identity> sha256:<64 lowercase hex>`).

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

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
        &["token", "rotate", "--help"],
        &["token", "list", "--help"],
        &["token", "issue", "--help"],
    ] {
        let output = run(dir.path(), args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(text(&output.stdout).contains("Usage: scaffold-aip token"), "{args:?}");
    }
    let output = run(dir.path(), &["token", "new", "--identity", "a", "--replace"]);
    assert_eq!(output.status.code(), Some(2), "--replace needs --file");
}

/// Starts `scaffold-aip token args` in `dir`, its output piped.
fn spawn_token(dir: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .current_dir(dir)
        .arg("token")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The identities and hashes of a token file, every line parsed as the server parses it.
fn parsed(contents: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for line in contents.lines() {
        let parsed = acp_tokens::parse_line(line).unwrap_or_else(|error| panic!("{line:?}: {error}"));
        if let Some((identity, _)) = parsed {
            let hash = line.split_whitespace().nth(1).unwrap().to_string();
            assert!(
                found.insert(identity.to_string(), hash).is_none(),
                "{identity} twice in:\n{contents}"
            );
        }
    }
    found
}

/// Issue #44, item 3: `token` commands read-modified-wrote the file without a lock, so of two
/// at once the later rename undid the earlier: a revoked token came back, a new one printed
/// but never stored. Each round starts revokes, rotations (`--replace`) and new identities all
/// at once; every command must succeed and every change must be in the file at the end.
#[test]
fn concurrent_token_commands_neither_undo_a_revocation_nor_lose_a_token() {
    const ROUNDS: usize = 4;
    const PER_KIND: usize = 8;
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let mut contents = String::from("# the team's tokens\n");
        for i in 0..PER_KIND {
            for kind in ["victim", "alice"] {
                let old = format!("old-{kind}-{i}");
                contents.push_str(&format!("{kind}-{i} {}\n", acp_tokens::hash_token(&old)));
            }
        }
        std::fs::write(dir.path().join("tokens"), contents).unwrap();
        // (the identity a printed token is for, or none for a revoke; the command)
        let mut commands: Vec<(Option<String>, Vec<String>)> = Vec::new();
        for i in 0..PER_KIND {
            commands.push((None, vec!["revoke".into(), "--identity".into(), format!("victim-{i}")]));
            commands.push((Some(format!("alice-{i}")), vec!["new".into(), "--replace".into()]));
            commands.push((Some(format!("new-{i}")), vec!["new".into()]));
        }
        let children: Vec<_> = commands
            .into_iter()
            .map(|(identity, mut args)| {
                if let Some(identity) = &identity {
                    args.extend(["--identity".into(), identity.clone()]);
                }
                args.extend(["--file".into(), "tokens".into()]);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                (identity, spawn_token(dir.path(), &args))
            })
            .collect();
        let mut expected = BTreeMap::new();
        for (identity, child) in children {
            let output = child.wait_with_output().unwrap();
            assert_eq!(output.status.code(), Some(0), "round {round}: {}", text(&output.stderr));
            if let Some(identity) = identity {
                let token = text(&output.stdout).trim_end().to_string();
                expected.insert(identity, acp_tokens::hash_token(&token));
            }
        }
        let found = parsed(&std::fs::read_to_string(dir.path().join("tokens")).unwrap());
        let revoked: Vec<&String> = found.keys().filter(|id| id.starts_with("victim-")).collect();
        assert!(
            revoked.is_empty(),
            "round {round}: revoked identities are back: {revoked:?}"
        );
        let missing: Vec<&String> = expected
            .keys()
            .filter(|id| found.get(*id) != expected.get(*id))
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: printed tokens not in the file: {missing:?}"
        );
        assert_eq!(found.len(), expected.len(), "round {round}: {found:?}");
    }
}

/// A token file being changed is only ever seen whole: `token new` replaces it by a rename,
/// so a reader (here reading as the server does, in a loop, while tokens are rotated) finds
/// every identity in every version, never an empty or cut file.
#[test]
fn a_reader_only_ever_sees_whole_token_files() {
    const IDENTITIES: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    // Long comments make each version a few hundred KiB: a writer in place would take a while.
    let mut contents = String::new();
    for i in 0..IDENTITIES {
        let hash = acp_tokens::hash_token(&format!("t{i}"));
        contents.push_str(&format!("# {}\nid-{i} {hash}\n", "x".repeat(16 << 10)));
    }
    std::fs::write(&path, contents).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let mut latest = BTreeMap::new();
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let bytes = acp_tokens::file::read(&path)
                    .unwrap()
                    .expect("the file is always there");
                let seen = String::from_utf8(bytes).unwrap();
                let found = parsed(&seen);
                assert_eq!(
                    found.len(),
                    IDENTITIES,
                    "a reader saw part of a file: {} bytes",
                    seen.len()
                );
            }
        });
        for round in 0..24 {
            let identity = format!("id-{}", round % IDENTITIES);
            let output = spawn_token(
                dir.path(),
                &["new", "--replace", "--identity", &identity, "--file", "tokens"],
            )
            .wait_with_output()
            .unwrap();
            assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
            latest.insert(identity, acp_tokens::hash_token(text(&output.stdout).trim_end()));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap();
    });
    let found = parsed(&std::fs::read_to_string(&path).unwrap());
    for (identity, hash) in &latest {
        assert_eq!(
            found.get(identity),
            Some(hash),
            "{identity}: the last rotation is in force"
        );
    }
}

/// Issue #44, item 6: `token new --file /dev/zero` read the device until memory ran out, and a
/// FIFO hung it. Both are refused at once with a sentence naming the file, no lock file is
/// made beside them, and `revoke` refuses them the same way.
#[cfg(unix)]
#[test]
fn token_commands_refuse_dev_zero_and_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("mkfifo").arg(dir.path().join("fifo")).status().unwrap();
    assert!(status.success());
    for (file, kind) in [("fifo", "a FIFO"), ("/dev/zero", "a character device")] {
        for args in [
            &["token", "new", "--identity", "alice", "--file", file][..],
            &["token", "revoke", "--identity", "alice", "--file", file],
        ] {
            let output = common::run_bounded(dir.path(), args);
            assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
            assert!(output.stdout.is_empty(), "no token is shown for nothing: {args:?}");
            assert_eq!(
                text(&output.stderr),
                format!("scaffold-aip token: {file}: not a regular file ({kind}); a token file is a regular file\n"),
                "{args:?}"
            );
        }
    }
    assert!(!Path::new("/dev/zero.lock").exists());
    assert!(!dir.path().join("fifo.lock").exists());
}

/// A token file over 1 MiB (here a sparse 3 GiB one) is refused without being read.
#[cfg(unix)]
#[test]
fn a_token_file_over_the_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(dir.path().join("tokens")).unwrap();
    file.set_len(3 << 30).unwrap();
    let output = common::run_bounded(dir.path(), &["token", "new", "--identity", "alice", "--file", "tokens"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty());
    assert_eq!(
        text(&output.stderr),
        "scaffold-aip token: tokens: the file is larger than a token file may be (3221225472 bytes); \
         the limit is 1048576 bytes (1 MiB)\n"
    );
}

/// A token file reached through a symbolic link stays a link: the file it points to is changed.
#[cfg(unix)]
#[test]
fn a_linked_token_file_is_changed_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("secrets")).unwrap();
    std::os::unix::fs::symlink("secrets/tokens", dir.path().join("tokens")).unwrap();
    let token = new_token(dir.path(), &["--identity", "alice", "--file", "tokens"]);
    let _ = new_token(dir.path(), &["--identity", "bob", "--file", "tokens"]);
    let run = run(
        dir.path(),
        &["token", "revoke", "--identity", "bob", "--file", "tokens"],
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert!(
        std::fs::symlink_metadata(dir.path().join("tokens"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let real = dir.path().join("secrets/tokens");
    assert_eq!(entries(&real), [("alice".to_string(), acp_tokens::hash_token(&token))]);
}

/// `token list --file` prints the entries; `new --add` gives an identity a second token beside
/// the first (an overlapping rotation), and `rotate` replaces both.
#[test]
fn list_add_and_rotate_work_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let first = new_token(dir.path(), &["--identity", "alice", "--file", "tokens"]);
    let second = new_token(dir.path(), &["--identity", "alice", "--file", "tokens", "--add"]);
    let both: Vec<_> = [&first, &second]
        .iter()
        .map(|token| ("alice".to_string(), hash_of(dir.path(), token)))
        .collect();
    assert_eq!(entries(&path), both);
    let listed = run(dir.path(), &["token", "list", "--file", "tokens"]);
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    let expected: String = both.iter().map(|(id, hash)| format!("{id} {hash}\n")).collect();
    assert_eq!(text(&listed.stdout), expected);

    let rotated = run(
        dir.path(),
        &["token", "rotate", "--identity", "alice", "--file", "tokens"],
    );
    assert_eq!(rotated.status.code(), Some(0), "{}", text(&rotated.stderr));
    let third = text(&rotated.stdout).trim_end().to_string();
    assert_eq!(entries(&path), [("alice".to_string(), hash_of(dir.path(), &third))]);

    let nowhere = run(dir.path(), &["token", "list"]);
    assert_eq!(nowhere.status.code(), Some(2));
    assert!(
        text(&nowhere.stderr).contains("--file PATH or --database [URL]"),
        "{}",
        text(&nowhere.stderr)
    );
}

/// Issue #49: `token new|rotate|revoke|list --database URL` keep the tokens of a fleet in
/// PostgreSQL: only hashes are stored, the token is printed once, a rotation or revocation
/// revokes (kept, with its time) and is announced on `agentacp_tokens` in its transaction.
#[cfg(feature = "postgres")]
#[test]
fn token_commands_keep_a_fleets_tokens_in_the_database() {
    use acp_tokens::database::CHANNEL;
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("token_cli");
    let dir = tempfile::tempdir().unwrap();
    let rows = |sql: &str| cluster.psql(&url, sql).unwrap().trim().to_string();
    let state_of = |token: &str| {
        let hex = hash_of(dir.path(), token)["sha256:".len()..].to_string();
        rows(&format!(
            "select identity || ' ' || (revoked_at is null) from agentacp_tokens where sha256 = decode('{hex}', 'hex')"
        ))
    };

    let first = new_token(dir.path(), &["--identity", "alice", "--database", &url]);
    assert_eq!(state_of(&first), "alice true");
    assert!(
        rows("select count(*) from agentacp_tokens where position(convert_to('acp_', 'UTF8') in sha256) > 0") == "0",
        "only hashes are stored"
    );
    let refused = run(dir.path(), &["token", "new", "--identity", "alice", "--database", &url]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(refused.stdout.is_empty(), "no token is shown for nothing");
    assert!(text(&refused.stderr).contains("--replace"), "{}", text(&refused.stderr));
    let second = new_token(dir.path(), &["--identity", "alice", "--database", &url, "--add"]);
    assert_eq!(state_of(&second), "alice true");

    // A server replica listens to the channel.
    let db = acp_postgres::Database::connect(&url, acp_postgres::Options::default()).unwrap();
    let (notices, notified) = std::sync::mpsc::channel();
    let _listener = db.listen(&[CHANNEL], move |notice| drop(notices.send(notice))).unwrap();
    let wait = std::time::Duration::from_secs(10);
    assert_eq!(notified.recv_timeout(wait).unwrap(), acp_postgres::Notice::Listening);
    let announced = acp_postgres::Notice::Notification {
        channel: CHANNEL.to_string(),
        payload: "alice".to_string(),
    };

    let rotated = run(
        dir.path(),
        &["token", "rotate", "--identity", "alice", "--database", &url],
    );
    assert_eq!(rotated.status.code(), Some(0), "{}", text(&rotated.stderr));
    assert!(
        text(&rotated.stderr).contains("revoked 2 tokens of `alice`"),
        "{}",
        text(&rotated.stderr)
    );
    let third = text(&rotated.stdout).trim_end().to_string();
    assert_eq!(notified.recv_timeout(wait).unwrap(), announced);
    assert_eq!(
        (state_of(&first), state_of(&second), state_of(&third)),
        ("alice false".into(), "alice false".into(), "alice true".into())
    );

    let listed = run(dir.path(), &["token", "list", "--database", &url]);
    let listed = text(&listed.stdout);
    assert!(
        listed.starts_with(&format!("alice {} issued 20", hash_of(dir.path(), &third))) && listed.lines().count() == 1,
        "{listed}"
    );
    let all = text(&run(dir.path(), &["token", "list", "--database", &url, "--all"]).stdout);
    assert_eq!(
        all.lines().filter(|line| line.contains(" revoked 20")).count(),
        2,
        "{all}"
    );

    let revoked = run(
        dir.path(),
        &["token", "revoke", "--identity", "alice", "--database", &url],
    );
    assert_eq!(revoked.status.code(), Some(0), "{}", text(&revoked.stderr));
    assert_eq!(notified.recv_timeout(wait).unwrap(), announced);
    assert_eq!(state_of(&third), "alice false");
    let again = run(
        dir.path(),
        &["token", "revoke", "--identity", "alice", "--database", &url],
    );
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("no token in force for `alice`"),
        "{}",
        text(&again.stderr)
    );
}

/// `token new|list|revoke|rotate --database` without a URL read it from
/// `AGENTACP_DATABASE_URL` (the servers' variable), which keeps a password out of the process
/// list; without the variable, a sentence says so and no token is shown.
#[cfg(feature = "postgres")]
#[test]
fn a_bare_database_flag_reads_the_url_from_agentacp_database_url() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("token_cli_env");
    let dir = tempfile::tempdir().unwrap();
    let run_env = |args: &[&str], url: Option<&str>| common::run_with_database_env(dir.path(), args, url);
    let issued = run_env(&["token", "new", "--identity", "bob", "--database"], Some(&url));
    assert_eq!(issued.status.code(), Some(0), "{}", text(&issued.stderr));
    let said = text(&issued.stderr);
    assert!(said.contains("`bob` added to the database at postgres://"), "{said}");
    assert!(!said.contains("warning"), "{said}");
    let token = text(&issued.stdout).trim_end().to_string();
    let listed = text(&run_env(&["token", "list", "--database"], Some(&url)).stdout);
    assert!(
        listed.starts_with(&format!("bob {} issued 20", hash_of(dir.path(), &token))),
        "{listed}"
    );
    let revoked = run_env(&["token", "revoke", "--identity", "bob", "--database"], Some(&url));
    assert_eq!(revoked.status.code(), Some(0), "{}", text(&revoked.stderr));
    assert!(
        text(&revoked.stderr).contains("revoked 1 token of `bob`"),
        "{}",
        text(&revoked.stderr)
    );

    for args in [
        &["token", "new", "--identity", "bob", "--database", "--add"][..],
        &["token", "rotate", "--identity", "bob", "--database"],
        &["token", "list", "--database", "--all"],
        &["token", "revoke", "--identity", "bob", "--database"],
    ] {
        let unset = run_env(args, None);
        assert_eq!(unset.status.code(), Some(2), "{args:?}");
        assert!(unset.stdout.is_empty(), "{args:?}: no token is shown");
        assert_eq!(
            text(&unset.stderr),
            "scaffold-aip token: `--database` without a URL reads it from AGENTACP_DATABASE_URL, which is not set: \
             set it, or give the URL after `--database`\n",
            "{args:?}"
        );
    }
}

/// A database that cannot be reached is said in a sentence (without the password), and no
/// token is printed for nothing. Its URL given on the command line with a password is warned
/// about (the process list shows it); from `AGENTACP_DATABASE_URL` it is not.
#[cfg(feature = "postgres")]
#[test]
fn an_unreachable_database_is_a_sentence_and_no_token_is_shown() {
    let (url, port) = common::unreachable_database();
    let dir = tempfile::tempdir().unwrap();
    let output = run(dir.path(), &["token", "new", "--identity", "alice", "--database", &url]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty(), "no token is shown");
    let said = text(&output.stderr);
    assert!(
        said.contains(&format!(
            "cannot reach the database at postgres://agent@127.0.0.1:{port}/agents"
        )),
        "{said}"
    );
    assert!(!said.contains("s3cret"), "{said}");
    assert!(
        said.starts_with(
            "scaffold-aip token: warning: the database URL on the command line holds a password, which other users \
             of this machine can read in the process list; set AGENTACP_DATABASE_URL and give `--database` without \
             a URL\n"
        ),
        "{said}"
    );
    let from_env = common::run_with_database_env(
        dir.path(),
        &["token", "new", "--identity", "alice", "--database"],
        Some(&url),
    );
    assert_eq!(from_env.status.code(), Some(2));
    let said = text(&from_env.stderr);
    assert!(
        said.starts_with("scaffold-aip token: cannot reach the database at"),
        "{said}"
    );
}
