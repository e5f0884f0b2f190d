//! The upstream ACP revisions this toolchain knows, and resolving `acp_rev` prefixes.
//!
//! A revision is "known" when `agentacp` ships its generated wire types (see
//! `scaffold-aip regen`). This table is the single list the linter and the macro consult.

use std::path::{Path, PathBuf};

/// One upstream ACP revision with built-in wire types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revision {
    /// Full 40-hex commit SHA of agentclientprotocol/agent-client-protocol.
    pub sha: &'static str,
    /// What it is (release tag or published crate).
    pub label: &'static str,
    /// The ACP `protocolVersion` spoken at that revision.
    pub protocol_version: u16,
    /// The methods the client (the editor) handles at that revision, by wire name.
    pub client_methods: &'static [&'static str],
}

/// The client-side methods of ACP v1.0.0.
const V1_CLIENT_METHODS: &[&str] = &[
    "fs/read_text_file",
    "fs/write_text_file",
    "session/request_permission",
    "session/update",
    "terminal/create",
    "terminal/kill",
    "terminal/output",
    "terminal/release",
    "terminal/wait_for_exit",
];

/// The client-side methods of the later built-in revisions: v1.0.0's plus elicitation.
const V1_ELICITATION_CLIENT_METHODS: &[&str] = &[
    "elicitation/complete",
    "elicitation/create",
    "fs/read_text_file",
    "fs/write_text_file",
    "session/request_permission",
    "session/update",
    "terminal/create",
    "terminal/kill",
    "terminal/output",
    "terminal/release",
    "terminal/wait_for_exit",
];

/// The default revision: the one the published crate `agent-client-protocol-schema`
/// 1.15.1 was built from.
pub const DEFAULT: Revision = Revision {
    sha: "0fc18323a9fdad4e5b4a20ec2f1645dde843fd9b",
    label: "agent-client-protocol-schema 1.15.1",
    protocol_version: 1,
    client_methods: V1_ELICITATION_CLIENT_METHODS,
};

/// Every known revision, default first.
pub const KNOWN: &[Revision] = &[
    DEFAULT,
    Revision {
        sha: "b7f0005493b98de32fabee3e9540e2b64da68535",
        label: "v1.7.0 (main, 2026-08-22)",
        protocol_version: 1,
        client_methods: V1_ELICITATION_CLIENT_METHODS,
    },
    Revision {
        sha: "d9072428412f97189bad8856f8ee6394a8dd52ef",
        label: "v1.0.0",
        protocol_version: 1,
        client_methods: V1_CLIENT_METHODS,
    },
];

/// A revision without built-in wire types whose module `scaffold-aip regen` generated into the
/// manifest's crate: what the module itself says about that revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The module's file.
    pub path: PathBuf,
    /// The full SHA its first line names.
    pub sha: String,
    /// Its `PROTOCOL_VERSION`, when the module could be read.
    pub protocol_version: Option<u16>,
    /// The client-side methods of its `METHODS` table, when the module could be read.
    pub client_methods: Option<Vec<String>>,
}

/// A generated module larger than this is not parsed (its revision is still taken from the
/// first line); real ones are a few hundred KiB.
const MAX_GENERATED_BYTES: u64 = 16 * 1024 * 1024;

/// Brackets nested deeper than this are not given to the parser (which recurses on them);
/// generated modules nest about ten deep.
const MAX_GENERATED_NESTING: usize = 128;

/// The deepest bracket nesting of `text`, counting every `(`, `[` and `{` (an over-estimate
/// when brackets appear in strings or comments, which only makes the limit stricter).
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for byte in text.bytes() {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

impl Generated {
    /// Reads the module at `path`: `None` unless its first line is the header
    /// `scaffold-aip regen` writes. A body that cannot be parsed leaves the protocol version
    /// and the methods unknown; nothing here panics on a bad file.
    pub fn read(path: &Path) -> Option<Generated> {
        use std::io::Read;
        let metadata = std::fs::metadata(path).ok()?;
        if !metadata.is_file() {
            return None;
        }
        let mut head = Vec::new();
        std::fs::File::open(path).ok()?.take(256).read_to_end(&mut head).ok()?;
        let head = String::from_utf8_lossy(&head);
        let sha = crate::wire::generate::rev_of_header(head.lines().next()?)?.to_string();
        let file = (metadata.len() <= MAX_GENERATED_BYTES)
            .then(|| std::fs::read_to_string(path).ok())
            .flatten()
            .filter(|text| nesting(text) <= MAX_GENERATED_NESTING)
            .and_then(|text| syn::parse_file(&text).ok());
        let constant = |name: &str| {
            file.as_ref()?.items.iter().find_map(|item| match item {
                syn::Item::Const(c) if c.ident == name => Some(&*c.expr),
                _ => None,
            })
        };
        let protocol_version = match constant("PROTOCOL_VERSION") {
            Some(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(int),
                ..
            })) => int.base10_parse::<u16>().ok(),
            _ => None,
        };
        let client_methods = constant("METHODS").and_then(client_methods_of);
        Some(Generated {
            path: path.to_path_buf(),
            sha,
            protocol_version,
            client_methods,
        })
    }
}

/// The `name`s of the entries of a generated `METHODS` table (`&[MethodInfo { name, side, .. }]`)
/// whose `side` is `Client`; `None` when the table does not have that shape.
fn client_methods_of(table: &syn::Expr) -> Option<Vec<String>> {
    let syn::Expr::Reference(reference) = table else {
        return None;
    };
    let syn::Expr::Array(entries) = &*reference.expr else {
        return None;
    };
    let mut methods = Vec::new();
    for entry in &entries.elems {
        let syn::Expr::Struct(entry) = entry else { return None };
        let field = |name: &str| {
            entry
                .fields
                .iter()
                .find(|f| matches!(&f.member, syn::Member::Named(id) if id == name))
                .map(|f| &f.expr)
        };
        let Some(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(method),
            ..
        })) = field("name")
        else {
            return None;
        };
        let Some(syn::Expr::Path(side)) = field("side") else {
            return None;
        };
        if side.path.segments.last().is_some_and(|s| s.ident == "Client") {
            methods.push(method.value());
        }
    }
    Some(methods)
}

/// Why an `acp_rev` did not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// No known revision starts with it.
    Unknown,
    /// Several do.
    Ambiguous(Vec<Revision>),
}

/// Resolves a 7–40 hex-digit prefix against `known`.
pub fn resolve_in(prefix: &str, known: &[Revision]) -> Result<Revision, ResolveError> {
    let matches: Vec<Revision> = known.iter().filter(|r| r.sha.starts_with(prefix)).copied().collect();
    match matches.as_slice() {
        [one] => Ok(*one),
        [] => Err(ResolveError::Unknown),
        _ => Err(ResolveError::Ambiguous(matches)),
    }
}

/// Resolves a prefix against the built-in revisions.
pub fn resolve(prefix: &str) -> Result<Revision, ResolveError> {
    resolve_in(prefix, KNOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_resolve_to_exactly_one() {
        assert_eq!(resolve("0fc1832").unwrap().sha, DEFAULT.sha);
        assert_eq!(resolve(DEFAULT.sha).unwrap(), DEFAULT);
        assert_eq!(resolve("abc1234"), Err(ResolveError::Unknown));
        let table = [
            Revision {
                sha: "aaaaaaa1",
                label: "a",
                protocol_version: 1,
                client_methods: &[],
            },
            Revision {
                sha: "aaaaaaa2",
                label: "b",
                protocol_version: 1,
                client_methods: &[],
            },
        ];
        assert!(matches!(resolve_in("aaaaaaa", &table), Err(ResolveError::Ambiguous(v)) if v.len() == 2));
    }
}

#[cfg(test)]
mod generated_tests {
    use super::*;

    fn built_in_module(revision: &Revision) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../agentacp/src/wire/rev_{}.rs", &revision.sha[..8]))
    }

    /// The table of built-in revisions says what their checked-in modules say: the same SHA,
    /// protocol version and client-side methods (read the way lint reads a generated module).
    #[test]
    fn each_built_in_revision_matches_its_generated_module() {
        for revision in KNOWN {
            let generated = Generated::read(&built_in_module(revision)).expect("a generated module");
            assert_eq!(generated.sha, revision.sha);
            assert_eq!(generated.protocol_version, Some(revision.protocol_version));
            let mut methods = generated.client_methods.expect("a readable METHODS table");
            methods.sort();
            assert_eq!(methods, revision.client_methods, "{}", revision.sha);
        }
    }

    #[test]
    fn a_module_that_is_not_generated_or_not_rust_is_read_without_panicking() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.rs");
        std::fs::write(&plain, "pub const X: u8 = 1;\n").unwrap();
        assert_eq!(Generated::read(&plain), None, "no regen header");
        assert_eq!(Generated::read(dir.path()), None, "a folder");
        assert_eq!(Generated::read(&dir.path().join("absent.rs")), None);

        let sha = "abcdef0123456789abcdef0123456789abcdef01";
        let garbled = dir.path().join("garbled.rs");
        let header = crate::wire::generate::header(sha);
        std::fs::write(&garbled, format!("{header}\nthis is {{ not rust\n")).unwrap();
        let read = Generated::read(&garbled).expect("the header names the revision");
        assert_eq!(
            (read.sha.as_str(), read.protocol_version, read.client_methods),
            (sha, None, None)
        );

        let odd = dir.path().join("odd.rs");
        std::fs::write(
            &odd,
            format!("{header}\npub const PROTOCOL_VERSION: u16 = 70000;\npub const METHODS: &[u8] = &[1, 2];\n"),
        )
        .unwrap();
        let read = Generated::read(&odd).unwrap();
        assert_eq!((read.protocol_version, read.client_methods), (None, None));

        // Nesting that would overflow the parser's stack is not parsed.
        let deep = dir.path().join("deep.rs");
        let nested = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
        std::fs::write(
            &deep,
            format!("{header}\npub const PROTOCOL_VERSION: u16 = 1u16;\nconst X: () = {nested};\n"),
        )
        .unwrap();
        let read = Generated::read(&deep).unwrap();
        assert_eq!((read.protocol_version, read.client_methods), (None, None));
    }
}
