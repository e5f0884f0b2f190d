//! The runtime's layering, checked on its source text (`agentacp/src/**/*.rs`).
//!
//! Bottom to top:
//! 1. foundation — `jsonrpc/`, `methods.rs` (the method table), `error.rs`, `tier.rs`, `workspace/`, `sync.rs`,
//!    `future.rs`: import nothing from the layers above;
//! 2. shared — `governance.rs`, `spec.rs` (the manifest's `OperatorSpec`), `surface.rs` (its
//!    declared modes, config options, commands and extensions), `env.rs` (the `AGENTACP_*`
//!    environment, state folder, logging), `auth.rs` and `auth/` (tokens), `database.rs` (the
//!    database a fleet's stores share), `websocket/`, `listener/` (the WebSocket and Streamable HTTP
//!    listener servers and bridges are served on), `subprocess.rs` (programs
//!    started and spoken to over stdio: agents, stdio MCP servers), `mcp/` (MCP clients, with
//!    `rmcp`), `sandbox.rs` (the local sandbox, the `agentacp-sandbox` crate, and the
//!    sandbox a manifest binds), `oversight/` (the governance decision, the approval question, the
//!    write-ahead audit record), `downstream.rs` (where a client's or a bridge's agent is),
//!    `dialect/` (the translations between a peer's protocol version and the runtime's):
//!    what servers, clients and bridges share;
//! 3. `server/` and `client/`, side by side: neither imports the other;
//! 4. `bridge/`;
//! 5. `lib.rs`, the crate root (re-exports, the prelude, the macro's `__private`).
//!
//! What counts as an import of a file: every `use` declaration (`pub use` re-exports too,
//! brace groups expanded), and every path rooted at `crate::`, `$crate::` (in `macro_rules!`),
//! `super::`, `self::` or the name of a child module the file declares (`connection::…` in a
//! `mod.rs`), wherever it stands (fn bodies, types, `#[cfg(test)]` modules included;
//! `super::` inside an inline `mod` climbs out of it first). A `mod child;` declaration is
//! not an import. Comments and string and char literals are ignored, except that paths in
//! doc comments (intra-doc links such as ``[`X`](crate::server::X)``) count for the layer
//! rules (a doc link from a lower layer into a higher one is refused), not for cycles.
//!
//! A path names a file: the deepest module file it walks through (`crate::server::Turn`
//! names `server/mod.rs`). For the cycle check it is then followed through re-exports to the
//! file that defines the item (`super::ClientContext` in `client/fs.rs` is
//! `client/context.rs`, through `client/mod.rs`'s `pub use`), so a facade `mod.rs` that
//! re-exports its children is no cycle with them. The layer rules apply to both the named file
//! (unless it is the crate root, which only re-exports: `crate::Error` is `error.rs`) and the
//! defining one; a path that leaves the crate (`crate::audit` is `acp_audit`, `crate::wire` is
//! `agentacp_wire`, the generated wire types) is no import.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where a file sits: its layer, and its group within the layer (server and client share a
/// layer but may not import each other).
fn layer_of(file: &str) -> (u8, &'static str) {
    let top = file.split('/').next().unwrap_or(file);
    match top {
        "jsonrpc" | "methods.rs" | "error.rs" | "tier.rs" | "workspace" | "sync.rs" | "future.rs" => (1, "foundation"),
        "governance.rs" | "spec.rs" | "surface.rs" | "env.rs" | "env" | "auth.rs" | "auth" | "database.rs"
        | "websocket" | "listener" | "subprocess.rs" | "subprocess" | "mcp" | "sandbox.rs" | "oversight"
        | "downstream.rs" | "connection" | "dialect" => (2, "shared"),
        "server" => (3, "server"),
        "client" => (3, "client"),
        "bridge" => (4, "bridge"),
        "lib.rs" => (5, "crate root"),
        _ => panic!("{file}: a file the layering does not place; add it to `layer_of` in tests/layering.rs"),
    }
}

/// Whether `from` may import `to`.
fn allowed(from: &str, to: &str) -> bool {
    let ((from_layer, from_group), (to_layer, to_group)) = (layer_of(from), layer_of(to));
    to_layer < from_layer || (to_layer == from_layer && to_group == from_group)
}

// ---------------------------------------------------------------------------------------
// Reading the source.

/// One file of the crate.
struct File {
    /// Relative to `src`, `/`-separated.
    name: String,
    /// Its module path (`["client", "connection"]`; `[]` for `lib.rs`).
    module: Vec<String>,
    /// The child modules it declares with `mod name;` (files of their own).
    children: BTreeSet<String>,
    /// Its inline modules (`mod name { … }`): name and byte span of the body.
    inline: Vec<(String, usize, usize)>,
    /// Its top-level `use` declarations (outside fns and inline modules): the name they bind → the absolute path
    /// (`None`: outside the crate).
    uses: BTreeMap<String, Option<Vec<String>>>,
    /// The paths it mentions: (absolute path, as written, line, in a doc comment).
    paths: Vec<(Vec<String>, String, usize, bool)>,
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(name: &str) -> Vec<String> {
    let mut parts: Vec<String> = name.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The text with comments and the contents of string and char literals blanked (newlines
/// kept, so byte offsets and lines stay), and the doc comments' text on the side (same
/// offsets, everything else blanked).
fn blank_comments_and_literals(text: &str) -> (String, String) {
    let src = text.as_bytes();
    let mut code = src.to_vec();
    let mut docs = vec![b' '; src.len()];
    for (i, &b) in src.iter().enumerate() {
        if b == b'\n' {
            docs[i] = b'\n';
        }
    }
    let blank = |code: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut code[from..to] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut i = 0;
    while i < src.len() {
        let rest = &src[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&b| b == b'\n').map_or(src.len(), |n| i + n);
            if rest.starts_with(b"///") || rest.starts_with(b"//!") {
                docs[i..end].copy_from_slice(&src[i..end]);
            }
            blank(&mut code, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let doc = rest.starts_with(b"/**") || rest.starts_with(b"/*!");
            let (mut depth, mut j) = (0usize, i);
            while j < src.len() {
                if src[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if src[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            if doc {
                docs[i..j].copy_from_slice(&src[i..j]);
            }
            blank(&mut code, i, j);
            i = j;
        } else if (rest.starts_with(b"r\"") || rest.starts_with(b"r#") || rest.starts_with(b"br"))
            && (i == 0 || !is_ident(src[i - 1]))
        {
            // A raw string: r"…", r#"…"#, br#"…"#.
            let start = i + if rest[0] == b'b' { 2 } else { 1 };
            let hashes = src[start..].iter().take_while(|&&b| b == b'#').count();
            if src.get(start + hashes) != Some(&b'"') {
                i += 1;
                continue;
            }
            let mut closing = vec![b'"'];
            closing.extend(std::iter::repeat_n(b'#', hashes));
            let body = start + hashes + 1;
            let end = src[body..]
                .windows(closing.len())
                .position(|w| w == closing.as_slice())
                .map_or(src.len(), |n| body + n + closing.len());
            blank(&mut code, body, end.saturating_sub(closing.len()).max(body));
            i = end;
        } else if rest[0] == b'"' {
            let mut j = i + 1;
            while j < src.len() && src[j] != b'"' {
                j += if src[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut code, i + 1, j.min(src.len()));
            i = j + 1;
        } else if rest[0] == b'\'' {
            // A char literal ('x', '\n', '\u{..}', '"'), or a lifetime ('a).
            if rest.get(1) == Some(&b'\\') {
                let end = rest[2..]
                    .iter()
                    .position(|&b| b == b'\'')
                    .map_or(src.len(), |n| i + 2 + n + 1);
                blank(&mut code, i + 1, end - 1);
                i = end;
            } else {
                let ch_len = std::str::from_utf8(&src[i + 1..])
                    .ok()
                    .and_then(|s| s.chars().next())
                    .map_or(1, char::len_utf8);
                if src.get(i + 1 + ch_len) == Some(&b'\'') {
                    blank(&mut code, i + 1, i + 1 + ch_len);
                    i += ch_len + 2;
                } else {
                    i += 1;
                }
            }
        } else {
            i += 1;
        }
    }
    (String::from_utf8(code).unwrap(), String::from_utf8(docs).unwrap())
}

fn line_at(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

fn skip_ws(src: &[u8], mut i: usize) -> usize {
    while i < src.len() && src[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn ident_at(src: &[u8], i: usize) -> Option<(&str, usize)> {
    let end = i + src[i..].iter().take_while(|&&b| is_ident(b)).count();
    (end > i).then(|| (std::str::from_utf8(&src[i..end]).unwrap(), end))
}

/// Whether the word at `i` stands alone (no identifier character, `::` or `.` before it).
fn starts_word(src: &[u8], i: usize) -> bool {
    i == 0 || !(is_ident(src[i - 1]) || src[i - 1] == b':' || src[i - 1] == b'.' || src[i - 1] == b'$')
}

/// The index of the `}` closing the `{` at `open`.
fn closing_brace(src: &[u8], open: usize) -> usize {
    let mut depth = 0;
    for (j, &b) in src.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    src.len()
}

/// A `use` tree, expanded: (path segments, the name it binds).
fn expand_use_tree(tree: &str) -> Vec<(Vec<String>, String)> {
    fn go(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, String)>) {
        let tree = tree.trim();
        if tree.is_empty() {
            return;
        }
        // Split at the top-level `{`.
        if let Some(open) = tree.find('{') {
            let head: Vec<String> = tree[..open]
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            let close = tree.rfind('}').unwrap_or(tree.len());
            let inner = &tree[open + 1..close];
            let mut prefix = prefix.to_vec();
            prefix.extend(head);
            let (mut depth, mut start) = (0, 0);
            for (j, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        go(&prefix, &inner[start..j], out);
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            go(&prefix, &inner[start..], out);
            return;
        }
        let (path, alias) = match tree.split_once(" as ") {
            Some((path, alias)) => (path.trim(), Some(alias.trim().to_string())),
            None => (tree, None),
        };
        let mut segments = prefix.to_vec();
        segments.extend(
            path.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        if segments.last().is_some_and(|s| s == "self") {
            segments.pop();
        }
        let name = alias.unwrap_or_else(|| segments.last().cloned().unwrap_or_default());
        out.push((segments, name));
    }
    let mut out = Vec::new();
    go(&[], tree, &mut out);
    out
}

impl File {
    fn read(src_dir: &Path, path: &Path) -> File {
        let name = path.strip_prefix(src_dir).unwrap().to_string_lossy().replace('\\', "/");
        let module = module_of(&name);
        let mut file = File {
            name,
            module,
            children: BTreeSet::new(),
            inline: Vec::new(),
            uses: BTreeMap::new(),
            paths: Vec::new(),
        };
        let text = std::fs::read_to_string(path).unwrap();
        let (code, docs) = blank_comments_and_literals(&text);
        let src = code.as_bytes();

        // Module declarations.
        let mut i = 0;
        while let Some(n) = code[i..].find("mod ") {
            let at = i + n;
            i = at + 4;
            if !starts_word(src, at) {
                continue;
            }
            let j = skip_ws(src, at + 4);
            let Some((ident, end)) = ident_at(src, j) else { continue };
            let k = skip_ws(src, end);
            match src.get(k) {
                Some(b';') => {
                    file.children.insert(ident.to_string());
                }
                Some(b'{') => file.inline.push((ident.to_string(), k, closing_brace(src, k))),
                _ => {}
            }
        }

        // `use` declarations, then every other path.
        let mut in_use = vec![false; src.len()];
        let mut i = 0;
        while let Some(n) = code[i..].find("use") {
            let at = i + n;
            i = at + 3;
            if !starts_word(src, at) || !src.get(at + 3).is_some_and(u8::is_ascii_whitespace) {
                continue;
            }
            let end = code[at..].find(';').map_or(src.len(), |n| at + n);
            in_use[at..end].iter_mut().for_each(|b| *b = true);
            let tree = code[at + 3..end].split_whitespace().collect::<Vec<_>>().join(" ");
            let scope = file.scope_at(at);
            for (segments, bound) in expand_use_tree(&tree) {
                let written = segments.join("::");
                let absolute = file.absolute(&scope, &segments);
                let depth = code[..at].matches('{').count() - code[..at].matches('}').count();
                if depth == 0 {
                    file.uses.insert(bound, absolute.clone());
                }
                if let Some(absolute) = absolute {
                    file.paths
                        .push((absolute, format!("use {written}"), line_at(&text, at), false));
                }
            }
        }
        for (doc, haystack) in [(false, &code), (true, &docs)] {
            let bytes = haystack.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                if !is_ident(bytes[i]) && bytes[i] != b'$' || !starts_word(bytes, i) || (!doc && in_use[i]) {
                    i += 1;
                    continue;
                }
                let start = i;
                let mut segments = Vec::new();
                let mut j = i;
                if bytes[j] == b'$' {
                    j += 1;
                }
                while let Some((ident, end)) = ident_at(bytes, j) {
                    segments.push(ident.to_string());
                    j = end;
                    if bytes[j..].starts_with(b"::") && bytes.get(j + 2).is_some_and(|&b| is_ident(b)) {
                        j += 2;
                    } else {
                        break;
                    }
                }
                i = j.max(start + 1);
                if segments.len() < 2 {
                    continue;
                }
                let root = segments[0].as_str();
                let rooted = matches!(root, "crate" | "super" | "self") || (!doc && file.children.contains(root));
                if !rooted {
                    continue;
                }
                let scope = file.scope_at(start);
                if let Some(absolute) = file.absolute(&scope, &segments) {
                    let written = std::str::from_utf8(&bytes[start..j]).unwrap().to_string();
                    file.paths.push((absolute, written, line_at(&text, start), doc));
                }
            }
        }
        file
    }

    /// The module path at byte `at`: the file's, then the inline modules around it.
    fn scope_at(&self, at: usize) -> Vec<String> {
        let mut scope = self.module.clone();
        let mut around: Vec<_> = self
            .inline
            .iter()
            .filter(|(_, from, to)| *from < at && at < *to)
            .collect();
        around.sort_by_key(|(_, from, _)| *from);
        scope.extend(around.into_iter().map(|(name, _, _)| name.clone()));
        scope
    }

    /// `segments` as an absolute module path from the crate root, or `None` when it leaves
    /// the crate (`std::…`, `serde::…`, a local alias).
    fn absolute(&self, scope: &[String], segments: &[String]) -> Option<Vec<String>> {
        let mut base = scope.to_vec();
        let mut rest = segments;
        match segments.first().map(String::as_str) {
            Some("crate" | "$crate") => {
                base.clear();
                rest = &segments[1..];
            }
            Some("self") => rest = &segments[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            Some(first) if self.children.contains(first) && scope.len() == self.module.len() => {}
            _ => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }
}

// ---------------------------------------------------------------------------------------
// Resolving paths to files.

struct Crate {
    files: Vec<File>,
    by_module: BTreeMap<Vec<String>, usize>,
}

impl Crate {
    fn read() -> Crate {
        let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut paths = Vec::new();
        source_files(&src_dir, &mut paths);
        paths.sort();
        let files: Vec<File> = paths.iter().map(|path| File::read(&src_dir, path)).collect();
        let by_module = files.iter().enumerate().map(|(i, f)| (f.module.clone(), i)).collect();
        Crate { files, by_module }
    }

    /// The file `path` names: the deepest module file it walks through.
    fn named(&self, path: &[String]) -> usize {
        (0..=path.len())
            .rev()
            .find_map(|n| self.by_module.get(&path[..n]).copied())
            .expect("the crate root")
    }

    /// The file that defines what `path` names, through re-exports (`None`: outside the crate).
    fn defining(&self, path: &[String], depth: usize) -> Option<usize> {
        assert!(depth < 32, "re-exports in a loop at {}", path.join("::"));
        let mut current = self.by_module[&Vec::new()];
        for (n, segment) in path.iter().enumerate() {
            let mut next = self.files[current].module.clone();
            next.push(segment.clone());
            if let Some(&child) = self.by_module.get(&next) {
                current = child;
                continue;
            }
            let file = &self.files[current];
            if file.inline.iter().any(|(name, _, _)| name == segment) {
                return Some(current);
            }
            return match file.uses.get(segment) {
                Some(None) => None,
                Some(Some(target)) => {
                    let mut target = target.clone();
                    target.extend(path[n + 1..].iter().cloned());
                    self.defining(&target, depth + 1)
                }
                None => Some(current),
            };
        }
        Some(current)
    }
}

fn crate_graph() -> (Crate, Vec<String>, BTreeMap<usize, BTreeMap<usize, String>>) {
    let krate = Crate::read();
    let mut violations = Vec::new();
    let mut edges: BTreeMap<usize, BTreeMap<usize, String>> = BTreeMap::new();
    for (from, file) in krate.files.iter().enumerate() {
        for (path, written, line, doc) in &file.paths {
            // The crate root only re-exports (`crate::Error`, `crate::audit`): such a path
            // is judged by the file that defines it alone.
            let named = Some(krate.named(path)).filter(|&n| !krate.files[n].module.is_empty());
            let defining = krate.defining(path, 0);
            for to in [named, defining].into_iter().flatten() {
                let target = &krate.files[to].name;
                if to != from && !allowed(&file.name, target) {
                    let (layer, group) = layer_of(&file.name);
                    let (to_layer, to_group) = layer_of(target);
                    let what = if *doc { "doc link" } else { "import" };
                    violations.push(format!(
                        "src/{}:{line}: {what} `{written}` reaches src/{target} ({to_group}, layer {to_layer}) from {group} (layer {layer})",
                        file.name
                    ));
                    break;
                }
            }
            if let Some(to) = defining
                && to != from
                && !*doc
            {
                edges
                    .entry(from)
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("src/{}:{line} `{written}`", file.name));
            }
        }
    }
    violations.dedup();
    (krate, violations, edges)
}

/// A cycle of the graph, if there is one.
fn find_cycle(count: usize, edges: &BTreeMap<usize, BTreeMap<usize, String>>) -> Option<Vec<usize>> {
    // Depth-first search with colours; a back edge closes a cycle.
    fn visit(
        node: usize,
        edges: &BTreeMap<usize, BTreeMap<usize, String>>,
        colour: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        colour[node] = 1;
        stack.push(node);
        for &next in edges.get(&node).into_iter().flat_map(BTreeMap::keys) {
            match colour[next] {
                0 => {
                    if let Some(cycle) = visit(next, edges, colour, stack) {
                        return Some(cycle);
                    }
                }
                1 => {
                    let start = stack.iter().position(|&n| n == next).unwrap();
                    return Some(stack[start..].to_vec());
                }
                _ => {}
            }
        }
        stack.pop();
        colour[node] = 2;
        None
    }
    let mut colour = vec![0u8; count];
    (0..count).find_map(|node| {
        if colour[node] == 0 {
            visit(node, edges, &mut colour, &mut Vec::new())
        } else {
            None
        }
    })
}

#[test]
fn every_file_imports_only_its_own_layer_or_lower_ones() {
    let (krate, violations, _) = crate_graph();
    assert!(krate.files.len() > 30, "read only {} files", krate.files.len());
    assert!(
        violations.is_empty(),
        "imports against the layering (foundation < shared < server | client < bridge < crate root):\n{}",
        violations.join("\n")
    );
}

#[test]
fn no_files_import_each_other_in_a_loop() {
    let (krate, _, mut edges) = crate_graph();
    assert!(
        edges.values().map(BTreeMap::len).sum::<usize>() > 50,
        "too few imports found"
    );
    let all = edges.clone();
    // Every loop found, each then cut at its last import so the next one shows (at most 20).
    let mut message = String::new();
    for _ in 0..20 {
        let Some(cycle) = find_cycle(krate.files.len(), &edges) else {
            break;
        };
        message.push_str("files importing each other in a loop:\n");
        for (n, &from) in cycle.iter().enumerate() {
            let to = cycle[(n + 1) % cycle.len()];
            let (from_name, to_name) = (&krate.files[from].name, &krate.files[to].name);
            let _ = writeln!(message, "  src/{from_name} -> src/{to_name}  ({})", all[&from][&to]);
        }
        let last = *cycle.last().unwrap();
        edges.get_mut(&last).unwrap().remove(&cycle[0]);
    }
    assert!(message.is_empty(), "{message}");
}

/// The reader itself: a few imports it must see.
#[test]
fn the_reader_sees_imports_in_every_form() {
    let (krate, _, edges) = crate_graph();
    let file = |name: &str| {
        krate
            .files
            .iter()
            .position(|f| f.name == name)
            .unwrap_or_else(|| panic!("no src/{name}"))
    };
    let imports = |from: &str, to: &str| edges.get(&file(from)).is_some_and(|e| e.contains_key(&file(to)));
    // `use crate::…` with a brace group.
    assert!(imports("server/connection.rs", "jsonrpc/outbox.rs"));
    // `super::…` in a `use`.
    assert!(imports("jsonrpc/pending.rs", "jsonrpc/mod.rs"));
    // A child module's path in the body of a `mod.rs`, and a path inside a fn body.
    assert!(imports("server/mod.rs", "server/dispatch.rs"));
    assert!(imports("client/error.rs", "error.rs"));
    // Through a re-export to the defining file.
    assert!(imports("client/fs.rs", "client/context.rs"));
    // The rules themselves.
    assert!(!allowed("governance.rs", "server/mod.rs") && !allowed("client/fs.rs", "server/operator.rs"));
    assert!(!allowed("server/mod.rs", "client/mod.rs") && !allowed("jsonrpc/mod.rs", "spec.rs"));
    assert!(allowed("bridge/relay.rs", "client/mod.rs") && allowed("client/fs.rs", "workspace/mod.rs"));
}

/// Whether `text` declares `name` with a visibility narrower than `pub` (`pub(crate)`,
/// `pub(super)`, `pub(in …)`): an item only the crate may use.
fn declared_crate_private(text: &str, name: &str) -> bool {
    const KINDS: [&str; 10] = [
        "fn", "async fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union",
    ];
    ["pub(crate)", "pub(super)", "pub(in "].iter().any(|visibility| {
        text.match_indices(visibility).any(|(at, _)| {
            let rest = &text[at + visibility.len()..];
            let rest = rest
                .split_once(')')
                .filter(|_| visibility.ends_with(' '))
                .map_or(rest, |(_, after)| after);
            KINDS.iter().any(|kind| {
                rest.trim_start()
                    .strip_prefix(kind)
                    .and_then(|after| after.strip_prefix(' '))
                    .and_then(|after| after.trim_start().strip_prefix(name))
                    .is_some_and(|after| !after.bytes().next().is_some_and(is_ident))
            })
        })
    })
}

/// Issue #46: the bridge is built on what servers and clients offer everyone and on the shared
/// layer: no path in `bridge/` reaches an item that `server/` or `client/` declares for the
/// crate only (`pub(crate)` or narrower). The shared listener (`listener/`) is how a bridge
/// serves over WebSocket and Streamable HTTP, not `server/websocket/`.
#[test]
fn the_bridge_uses_no_crate_private_item_of_servers_or_clients() {
    let krate = Crate::read();
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeSet::new();
    let mut reached = 0;
    for file in krate.files.iter().filter(|file| file.name.starts_with("bridge/")) {
        for (path, written, line, _) in &file.paths {
            let Some(to) = krate.defining(path, 0) else {
                continue;
            };
            let target = &krate.files[to];
            if !matches!(layer_of(&target.name).1, "server" | "client") {
                continue;
            }
            reached += 1;
            let text = std::fs::read_to_string(src_dir.join(&target.name)).unwrap();
            for name in path {
                if declared_crate_private(&text, name) {
                    found.insert(format!(
                        "src/{}:{line}: `{written}` uses `{name}`, which src/{} declares for the crate only",
                        file.name, target.name
                    ));
                }
            }
        }
    }
    assert!(
        reached > 0,
        "no path of bridge/ into server/ or client/ was found: the reader is broken"
    );
    assert!(
        found.is_empty(),
        "the bridge uses crate-private items of server/ or client/ (move what both need to the shared layer):\n{}",
        found.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn a_crate_private_declaration_is_told_from_a_public_one() {
    let text = "pub(crate) struct Upgraded {}\npub struct Listener;\npub(in crate::server) fn run() {}\npub(crate) async fn go() {}";
    assert!(declared_crate_private(text, "Upgraded"));
    assert!(declared_crate_private(text, "run"));
    assert!(declared_crate_private(text, "go"));
    assert!(!declared_crate_private(text, "Listener"));
    assert!(!declared_crate_private(text, "Upgrade"));
}
