//! The bearer-token file format, in one place for the two sides that use it: agentacp's
//! token store (`agentacp::auth`, which checks the tokens a remote client shows) and
//! `scaffold-aip token` (which issues, rotates and revokes them).
//!
//! A token file has one entry a line, `<identity> sha256:<64 lowercase hex>`; blank lines and
//! lines starting with `#` are ignored. Only the SHA-256 of a token is ever stored.
//!
//! [`file`](mod@file) reads a token file (regular files only, at most [`file::MAX_FILE_BYTES`], never
//! blocking) and takes the lock writers hold while they change one. With feature `postgres`,
//! [`database`](mod@database) keeps the same entries in PostgreSQL instead, for a fleet of
//! replicas.

#[cfg(feature = "postgres")]
pub mod database;
pub mod file;

use sha2::{Digest, Sha256};

/// The longest identity accepted.
pub const MAX_IDENTITY: usize = 128;

/// Checks an identity: 1 to 128 ASCII letters, digits and `-_.@:` (an AIP-7 `principalId`).
/// The error says what is wrong.
pub fn check_identity(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("an identity may not be empty".to_string());
    }
    if id.len() > MAX_IDENTITY {
        return Err(format!(
            "an identity is at most {MAX_IDENTITY} characters (this one has {})",
            id.chars().count()
        ));
    }
    if let Some(bad) = id.chars().find(|c| !is_identity_char(*c)) {
        return Err(format!(
            "an identity holds only letters, digits and `-_.@:` (found {bad:?} in {id:?})"
        ));
    }
    Ok(())
}

fn is_identity_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | ':')
}

/// What adding a token for an identity does with the identity's tokens already there (in a
/// token file or in force in the database).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Others {
    /// Refuse the new token if the identity has one.
    Refuse,
    /// Keep them: the identity has several tokens (an overlapping rotation).
    Keep,
    /// Remove them from the file, or revoke them in the same transaction (a rotation).
    Revoke,
}

/// The SHA-256 of a token.
pub fn digest(token: &str) -> [u8; 32] {
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&Sha256::digest(token.as_bytes()));
    hash
}

/// `sha256:<hex>` of a token, as written in a token file.
pub fn hash_token(token: &str) -> String {
    hash_text(&digest(token))
}

/// `sha256:<hex>` of a token's SHA-256, as written in a token file.
pub fn hash_text(hash: &[u8; 32]) -> String {
    format!("sha256:{}", hex(hash))
}

/// `sha256:<64 lowercase hex>` as bytes.
pub fn parse_hash(text: &str) -> Result<[u8; 32], String> {
    let Some(hex) = text.strip_prefix("sha256:") else {
        return Err("a token hash starts with `sha256:`".to_string());
    };
    let digits = hex.as_bytes();
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    if digits.len() != 64 {
        return Err(format!(
            "a token hash is `sha256:` and 64 lowercase hex digits (found {})",
            digits.len()
        ));
    }
    let mut hash = [0u8; 32];
    for (byte, pair) in hash.iter_mut().zip(digits.chunks_exact(2)) {
        let (Some(high), Some(low)) = (nibble(pair[0]), nibble(pair[1])) else {
            return Err("a token hash is `sha256:` and 64 lowercase hex digits".to_string());
        };
        *byte = (high << 4) | low;
    }
    Ok(hash)
}

/// One line of a token file: its identity and token hash, or `None` for a blank line or a
/// comment. The error says what is wrong (the caller adds `path:line`).
pub fn parse_line(line: &str) -> Result<Option<(&str, [u8; 32])>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let mut fields = line.split_whitespace();
    let (Some(identity), Some(hash), None) = (fields.next(), fields.next(), fields.next()) else {
        return Err("expected `<identity> sha256:<64 lowercase hex>`".to_string());
    };
    check_identity(identity)?;
    Ok(Some((identity, parse_hash(hash)?)))
}

/// A new random token: 32 bytes from the operating system's random source (`getrandom`:
/// `getrandom(2)` on Linux, `ProcessPrng` on Windows, …), as 64 lowercase hex characters
/// prefixed `acp_`. An error only where the system has no random source it can read.
pub fn generate_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|error| std::io::Error::other(format!("the system gave no random bytes ({error})")))?;
    Ok(format!("acp_{}", hex(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(HEX[usize::from(byte >> 4)] as char);
        text.push(HEX[usize::from(byte & 0xf)] as char);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_hashes_to_its_sha256_and_parses_back() {
        // SHA-256("abc"), FIPS 180-2's test vector.
        let hash = hash_token("abc");
        assert_eq!(
            hash,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(parse_hash(&hash).unwrap(), digest("abc"));
    }

    #[test]
    fn identities_are_checked() {
        for good in ["alice", "ci-bot", "a@b.c", "svc:deploy_1"] {
            assert!(check_identity(good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_IDENTITY + 1);
        for bad in ["", "a b", "a/b", "ünï", long.as_str()] {
            assert!(check_identity(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lines_parse_or_say_what_is_wrong() {
        let line = format!("alice {}", hash_token("t"));
        assert_eq!(parse_line(&line).unwrap(), Some(("alice", digest("t"))));
        assert_eq!(parse_line("  # a comment").unwrap(), None);
        assert_eq!(parse_line("").unwrap(), None);
        assert!(parse_line("alice").unwrap_err().contains("expected"));
        assert!(parse_line("alice sha256:xyz").unwrap_err().contains("64 lowercase hex"));
        assert!(
            parse_line(&format!("a/b {}", hash_token("t")))
                .unwrap_err()
                .contains("identity")
        );
    }

    #[test]
    fn new_tokens_differ() {
        let (a, b) = (generate_token().unwrap(), generate_token().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 68);
        assert!(a.starts_with("acp_"));
    }
}
