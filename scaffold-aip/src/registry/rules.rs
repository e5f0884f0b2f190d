//! The ACP registry's rules for one `agent.json`, written from what the registry's own files
//! say (`agentclientprotocol/registry`: `agent.schema.json`, `FORMAT.md`, `CONTRIBUTING.md`, and
//! the checks its CI runs in `.github/workflows/build_registry.py`), plus agentacp's own rule
//! that no target the runtime cannot be built for is listed. Each finding names the field it is
//! about by JSON pointer, so the caller can point at the manifest line a value came from.

use serde_json::{Map, Value};

/// The binary targets the registry knows, in its order.
pub const PLATFORMS: [&str; 6] = [
    "darwin-aarch64",
    "darwin-x86_64",
    "linux-aarch64",
    "linux-x86_64",
    "windows-aarch64",
    "windows-x86_64",
];

/// The operating systems a `binary` distribution must cover, every one.
const SYSTEMS: [&str; 3] = ["darwin", "linux", "windows"];

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The registry refuses the entry (or agentacp refuses to claim it).
    Error,
    /// Worth knowing; the entry is accepted.
    Warning,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule's short name (documented in docs/cli.md).
    pub rule: &'static str,
    /// Error or warning.
    pub severity: Severity,
    /// The JSON pointer of the field it is about (`""` for the whole entry).
    pub at: String,
    /// What is wrong, as a sentence.
    pub message: String,
}

impl Finding {
    /// An error about the field at `at`.
    pub fn error(rule: &'static str, at: impl Into<String>, message: impl Into<String>) -> Self {
        let (at, message) = (at.into(), message.into());
        Finding {
            rule,
            severity: Severity::Error,
            at,
            message,
        }
    }

    /// A warning about the field at `at`.
    pub fn warning(rule: &'static str, at: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Warning,
            ..Finding::error(rule, at, message)
        }
    }
}

/// What the caller allows beyond the registry's rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allow {
    /// Windows targets are listed although agentacp does not build for Windows (a warning
    /// instead of an error).
    pub unbuilt_targets: bool,
}

/// The keys an entry may have (the schema's `properties`).
const TOP_KEYS: [&str; 9] = [
    "id",
    "name",
    "version",
    "description",
    "repository",
    "authors",
    "license",
    "icon",
    "distribution",
];

/// Checks one entry against every rule.
pub fn check_entry(entry: &Value, allow: Allow) -> Vec<Finding> {
    let mut found = Vec::new();
    let Some(object) = entry.as_object() else {
        found.push(Finding::error("type", "", "an agent.json must hold one JSON object"));
        return found;
    };
    for key in ["id", "name", "version", "description", "distribution"] {
        if !object.contains_key(key) {
            found.push(Finding::error(
                "required",
                "",
                format!("the entry has no `{key}`, which the registry requires"),
            ));
        }
    }
    for key in object.keys().filter(|key| !TOP_KEYS.contains(&key.as_str())) {
        found.push(Finding::warning(
            "unknown-key",
            format!("/{key}"),
            format!("`{key}` is not a field of the registry's format; clients ignore it"),
        ));
    }
    let texts = ["id", "name", "version", "description", "repository", "license", "icon"];
    for key in texts
        .into_iter()
        .filter(|key| object.get(*key).is_some_and(|v| !v.is_string()))
    {
        found.push(Finding::error(
            "type",
            format!("/{key}"),
            format!("`{key}` must be a string"),
        ));
    }
    let text = |key: &str| object.get(key).and_then(Value::as_str);
    if let Some(id) = text("id") {
        found.extend(check_id(id));
    }
    for key in ["name", "description"] {
        if text(key).is_some_and(|value| value.trim().is_empty()) {
            found.push(Finding::error(
                "empty",
                format!("/{key}"),
                format!("`{key}` must not be empty"),
            ));
        }
    }
    if let Some(version) = text("version") {
        found.extend(check_version(version));
    }
    if let Some(repository) = text("repository").filter(|url| !is_web_url(url)) {
        found.push(Finding::error(
            "repository",
            "/repository",
            format!("`repository` is `{repository}`, not an http(s) URL"),
        ));
    }
    if let Some(authors) = object.get("authors") {
        let strings = authors.as_array().is_some_and(|list| list.iter().all(Value::is_string));
        if !strings {
            found.push(Finding::error(
                "type",
                "/authors",
                "`authors` must be a list of strings",
            ));
        }
    }
    if let Some(distribution) = object.get("distribution") {
        check_distribution(distribution, text("version").unwrap_or_default(), allow, &mut found);
    }
    found
}

/// The id: `^[a-z][a-z0-9-]*$` (the schema's pattern and the registry build's own check).
fn check_id(id: &str) -> Option<Finding> {
    let mut chars = id.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!(first && rest)).then(|| {
        Finding::error(
            "id",
            "/id",
            format!(
                "the id `{id}` must start with a lower-case letter and hold only lower-case letters, digits and `-`"
            ),
        )
    })
}

/// The version: its first three dot-separated parts all digits, as the registry's build
/// checks (so `1.2.0-rc.1`, whose third part is `0-rc`, is refused).
fn check_version(version: &str) -> Option<Finding> {
    let parts: Vec<&str> = version.split('.').collect();
    let numeric = parts.len() >= 3
        && parts[..3]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (!numeric).then(|| {
        Finding::error(
            "version",
            "/version",
            format!("the version `{version}` is not MAJOR.MINOR.PATCH of digits; the registry lists no pre-release or build suffix"),
        )
    })
}

fn check_distribution(distribution: &Value, version: &str, allow: Allow, found: &mut Vec<Finding>) {
    let Some(kinds) = distribution.as_object().filter(|kinds| !kinds.is_empty()) else {
        let message = "`distribution` must name at least one way to install the agent: `binary` archives, an `npx` or a `uvx` package";
        found.push(Finding::error("distribution", "/distribution", message));
        return;
    };
    for (kind, value) in kinds {
        let at = format!("/distribution/{kind}");
        match kind.as_str() {
            "binary" => check_binary(value, version, allow, found),
            "npx" | "uvx" => check_package(kind, value, version, found),
            _ => found.push(Finding::error(
                "distribution",
                at,
                format!("`{kind}` is not a distribution the registry knows (binary, npx, uvx)"),
            )),
        }
    }
}

fn check_binary(binary: &Value, version: &str, allow: Allow, found: &mut Vec<Finding>) {
    let Some(targets) = binary.as_object().filter(|targets| !targets.is_empty()) else {
        let message = "`distribution.binary` must map at least one target to its archive";
        found.push(Finding::error("distribution", "/distribution/binary", message));
        return;
    };
    for (target, value) in targets {
        let at = format!("/distribution/binary/{target}");
        if !PLATFORMS.contains(&target.as_str()) {
            let message = format!("`{target}` is not a registry target (one of {})", PLATFORMS.join(", "));
            found.push(Finding::error("target", at, message));
            continue;
        }
        if target == "windows-x86_64" {
            found.push(wine_only(target, &at));
        } else if target.starts_with("windows-") {
            found.push(unbuilt(target, &at, allow));
        }
        check_target(target, value, version, &at, found);
    }
    let missing: Vec<&str> = SYSTEMS
        .into_iter()
        .filter(|system| {
            !targets
                .keys()
                .any(|t| PLATFORMS.contains(&t.as_str()) && t.split('-').next() == Some(system))
        })
        .collect();
    if !missing.is_empty() {
        found.push(Finding::error(
            "all-systems",
            "/distribution/binary",
            format!(
                "the registry takes binaries only for all three systems (darwin, linux, windows); none is given for {}",
                missing.join(", ")
            ),
        ));
    }
}

/// agentacp's own rule: the runtime's x86_64 Windows build is tested under Wine, not on
/// Windows (docs/crates.md, "Platforms").
fn wine_only(target: &str, at: &str) -> Finding {
    Finding::warning(
        "wine-only",
        at,
        format!(
            "`{target}`: agentacp's Windows build is tested under Wine, not on Windows (docs/crates.md#platforms); run the archive on Windows before publishing it"
        ),
    )
}

/// agentacp's own rule: the runtime is not built for ARM Windows (docs/crates.md,
/// "Platforms").
fn unbuilt(target: &str, at: &str, allow: Allow) -> Finding {
    let why = "agentacp builds and tests no ARM Windows binary (docs/crates.md#platforms)";
    if allow.unbuilt_targets {
        Finding::warning("unbuilt-target", at, format!("`{target}` is listed although {why}"))
    } else {
        Finding::error(
            "unbuilt-target",
            at,
            format!("`{target}` is listed, but {why}; --allow-unbuilt-targets lists it anyway"),
        )
    }
}

fn check_target(target: &str, value: &Value, version: &str, at: &str, found: &mut Vec<Finding>) {
    let Some(fields) = value.as_object() else {
        found.push(Finding::error(
            "type",
            at,
            format!("the `{target}` entry must be an object"),
        ));
        return;
    };
    check_fields(fields, &["archive", "cmd"], &["args", "env"], at, found);
    if fields
        .get("cmd")
        .and_then(Value::as_str)
        .is_some_and(|cmd| cmd.trim().is_empty())
    {
        found.push(Finding::error(
            "cmd",
            format!("{at}/cmd"),
            format!("the `cmd` of `{target}` is empty"),
        ));
    }
    let Some(url) = fields.get("archive").and_then(Value::as_str) else {
        return;
    };
    let at = format!("{at}/archive");
    if !is_web_url(url) {
        found.push(Finding::error(
            "archive",
            at,
            format!("the archive of `{target}` is `{url}`, not an http(s) URL"),
        ));
    } else if url.contains("/latest/") {
        let message = format!(
            "the archive URL of `{target}` says `/latest/`; the registry wants the release's own version in it"
        );
        found.push(Finding::error("archive-version", at, message));
    } else if let Some(in_url) = version_in_url(url).filter(|v| v != version) {
        let message =
            format!("the archive URL of `{target}` is for version {in_url}, the entry's version is {version}");
        found.push(Finding::error("archive-version", at, message));
    }
}

/// The required and optional keys of a target or a package entry (the schema closes both):
/// each required one present, no other key, `args` a list of strings, `env` a map of strings.
fn check_fields(fields: &Map<String, Value>, required: &[&str], optional: &[&str], at: &str, found: &mut Vec<Finding>) {
    for key in required {
        match fields.get(*key) {
            None => found.push(Finding::error(
                "required",
                at,
                format!("`{at}` has no `{key}`, which the registry requires"),
            )),
            Some(value) if !value.is_string() => {
                found.push(Finding::error(
                    "type",
                    format!("{at}/{key}"),
                    format!("`{key}` must be a string"),
                ));
            }
            Some(_) => {}
        }
    }
    for (key, value) in fields {
        let well_typed = match key.as_str() {
            "args" => value.as_array().is_some_and(|list| list.iter().all(Value::is_string)),
            "env" => value.as_object().is_some_and(|map| map.values().all(Value::is_string)),
            key if required.contains(&key) => true,
            _ => {
                let message = format!(
                    "`{key}` is not allowed in `{at}` (only {})",
                    [required, optional].concat().join(", ")
                );
                found.push(Finding::error("unknown-key", format!("{at}/{key}"), message));
                continue;
            }
        };
        if !well_typed && optional.contains(&key.as_str()) {
            let shape = if key == "args" {
                "a list of strings"
            } else {
                "a map of strings"
            };
            found.push(Finding::error(
                "type",
                format!("{at}/{key}"),
                format!("`{key}` must be {shape}"),
            ));
        }
    }
}

fn check_package(kind: &str, value: &Value, version: &str, found: &mut Vec<Finding>) {
    let at = format!("/distribution/{kind}");
    let Some(fields) = value.as_object() else {
        found.push(Finding::error(
            "type",
            at,
            format!("`distribution.{kind}` must be an object"),
        ));
        return;
    };
    check_fields(fields, &["package"], &["args", "env"], &at, found);
    let Some(package) = fields.get("package").and_then(Value::as_str) else {
        return;
    };
    let at = format!("{at}/package");
    let pinned = if kind == "npx" {
        npm_version(package)
    } else {
        pypi_version(package)
    };
    if package.trim().is_empty() {
        found.push(Finding::error("package", at, format!("the `{kind}` package is empty")));
    } else if package.to_ascii_lowercase().contains("@latest") {
        let message = format!("the `{kind}` package `{package}` says `@latest`; pin the version ({version})");
        found.push(Finding::error("package-version", at, message));
    } else if let Some(pinned) = pinned.filter(|pinned| pinned != version) {
        let message = format!("the `{kind}` package `{package}` is version {pinned}, the entry's version is {version}");
        found.push(Finding::error("package-version", at, message));
    }
}

/// Whether `url` is an absolute `http(s)://host…` URL without blanks.
pub fn is_web_url(url: &str) -> bool {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|rest| {
        let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
        !host.is_empty() && !url.chars().any(char::is_whitespace)
    })
}

/// The release version an archive URL names, as the registry's build reads it: a path
/// segment after `/download/` or `/releases/` of digits and dots (a `v` before it allowed),
/// or an npm tarball `/-/name-X.Y.Z.tgz`; padded to three parts.
pub fn version_in_url(url: &str) -> Option<String> {
    for (at, _) in url.match_indices('/') {
        let rest = &url[at..];
        let after = ["/download/", "/releases/"]
            .iter()
            .find_map(|marker| rest.strip_prefix(marker));
        let Some(after) = after else { continue };
        let after = after.strip_prefix('v').unwrap_or(after);
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.').len();
        if digits > 0 && after[digits..].starts_with('/') {
            return Some(three_parts(&after[..digits]));
        }
    }
    let (_, tarball) = url.split_once("/-/")?;
    let stem = tarball.split('/').next()?.strip_suffix(".tgz")?;
    let (_, version) = stem.rsplit_once('-')?;
    let parts: Vec<&str> = version.split('.').collect();
    let plain = parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    plain.then(|| version.to_string())
}

/// `1.2` → `1.2.0`; `1.2.3.4` → `1.2.3`.
fn three_parts(version: &str) -> String {
    let mut parts: Vec<&str> = version.split('.').take(3).collect();
    parts.resize(3, "0");
    parts.join(".")
}

/// The version an npm package spec pins (`@scope/name@1.2.3`, `name@1.2.3`).
fn npm_version(package: &str) -> Option<String> {
    let unscoped = package.strip_prefix('@').unwrap_or(package);
    unscoped.split('@').nth(1).map(str::to_string)
}

/// The version a PyPI spec pins, read as the registry's build reads it: the first run of `=`
/// or `@` followed by digits and dots (`name==1.2.3`, `name@1.2.3`).
fn pypi_version(package: &str) -> Option<String> {
    let mut rest = package;
    while let Some(at) = rest.find(['=', '@']) {
        let after = rest[at..].trim_start_matches(['=', '@']);
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.').len();
        if digits > 0 {
            return Some(after[..digits].to_string());
        }
        rest = after;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_urls_like_the_registry_reads_them() {
        let github = "https://github.com/o/r/releases/download/v0.1.0/x-linux.tar.gz";
        assert_eq!(version_in_url(github).as_deref(), Some("0.1.0"));
        assert_eq!(version_in_url("https://h/releases/2.1/x.zip").as_deref(), Some("2.1.0"));
        assert_eq!(
            version_in_url("https://registry.npmjs.org/p/-/p-1.4.2.tgz").as_deref(),
            Some("1.4.2")
        );
        assert_eq!(version_in_url("https://example.com/x.tar.gz"), None);
        assert_eq!(npm_version("@scope/name@1.2.3").as_deref(), Some("1.2.3"));
        assert_eq!(npm_version("@scope/name"), None);
        assert_eq!(pypi_version("name==1.2.3").as_deref(), Some("1.2.3"));
        assert_eq!(pypi_version("name@latest"), None);
    }
}
