//! What an AIP-36 SANDBOX.md with `provider: local` asks for, read from its frontmatter.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

/// A mount of the sandbox (`mounts[]`): a folder the confined programs may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// What is mounted.
    pub source: MountSource,
    /// Where: with `provider: local` nothing is remapped, so `at` is a folder of this machine.
    pub at: PathBuf,
    /// `mode: read-only` (default read-write).
    pub read_only: bool,
}

/// A mount's `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountSource {
    /// `workspace`: the workspace root (the mount's `at`, or the folder inside it that
    /// `AGENTACP_WORKSPACE_ROOT` narrows it to).
    Workspace,
    /// `{file: path}`: a folder or file of this machine.
    File(PathBuf),
    /// `{ref: …}` or `{inline: …}`: an AIP-35 storage backing, which only a provider that
    /// mounts storage can give.
    Storage(String),
}

/// `limits`: the caps on each command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// `timeout_ms`: wall-clock time of a command (and of each MCP tool call).
    pub timeout: Option<Duration>,
    /// `memory_mb`, in MiB: what each process may allocate (`RLIMIT_DATA`) and, where the
    /// runtime may make a cgroup for the run, what all its processes may use together,
    /// shared memory included.
    pub memory_mb: Option<u64>,
    /// `cpu_ms`: the CPU time of a command.
    pub cpu: Option<Duration>,
    /// `metadata.agentacp.processes` (AIP-36's `limits` has no field for it): how many
    /// processes (threads among them) a program and what it starts may run at once.
    pub processes: Option<u64>,
}

/// The sandbox a manifest binds (`metadata.aip44.sandbox`), as far as the runtime enforces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxProfile {
    /// `provider` (the runtime implements `local`).
    pub provider: String,
    /// `mounts`: the only folders confined programs may reach (besides the system's, read-only).
    pub mounts: Vec<Mount>,
    /// `limits`.
    pub limits: Limits,
    /// `env.passthrough`: the only variables passed from the runtime's environment.
    pub env_passthrough: Vec<String>,
    /// `network.egress`: the hosts confined programs may reach (empty: none).
    pub egress: Vec<String>,
    /// `read_only`: commands are refused (`sandbox_read_only`).
    pub read_only: bool,
    /// `metadata.agentacp.enforcement: best-effort`: run even when this kernel cannot enforce
    /// all of the profile (what is not enforced is reported). Default: `required`, refuse to
    /// start.
    pub best_effort: bool,
}

impl SandboxProfile {
    /// Reads the profile from SANDBOX.md's frontmatter (as JSON); an error names the field.
    pub fn from_frontmatter(doc: &Value) -> Result<SandboxProfile, String> {
        let provider = doc
            .get("provider")
            .and_then(Value::as_str)
            .ok_or("SANDBOX.md has no `provider`")?
            .to_string();
        let mounts = match doc.get("mounts") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(mounts)) => mounts
                .iter()
                .enumerate()
                .map(|(index, mount)| Mount::parse(mount).map_err(|why| format!("SANDBOX.md mounts[{index}]: {why}")))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("SANDBOX.md `mounts` is not a list".into()),
        };
        let limits = &doc["limits"];
        let number = |key: &str| -> Result<Option<u64>, String> {
            match &limits[key] {
                Value::Null => Ok(None),
                value => value
                    .as_u64()
                    .filter(|n| *n > 0)
                    .map(Some)
                    .ok_or_else(|| format!("SANDBOX.md limits.{key} is not a positive integer")),
            }
        };
        let limits = Limits {
            timeout: number("timeout_ms")?.map(Duration::from_millis),
            memory_mb: number("memory_mb")?,
            cpu: number("cpu_ms")?.map(Duration::from_millis),
            processes: match &doc["metadata"]["agentacp"]["processes"] {
                Value::Null => None,
                value => Some(value.as_u64().filter(|n| *n > 0).ok_or(
                    "SANDBOX.md metadata.agentacp.processes is not a positive integer (the most processes a program may run at once)",
                )?),
            },
        };
        let enforcement = doc["metadata"]["agentacp"]["enforcement"].as_str();
        let best_effort = match enforcement {
            None | Some("required") => false,
            Some("best-effort") => true,
            Some(other) => {
                return Err(format!(
                    "SANDBOX.md metadata.agentacp.enforcement is `{other}`: use `required` (the default) or `best-effort`"
                ));
            }
        };
        Ok(SandboxProfile {
            provider,
            mounts,
            limits,
            env_passthrough: strings(&doc["env"]["passthrough"], "env.passthrough")?,
            egress: strings(&doc["network"]["egress"], "network.egress")?,
            read_only: doc["read_only"].as_bool().unwrap_or(false),
            best_effort,
        })
    }
}

impl Mount {
    fn parse(mount: &Value) -> Result<Mount, String> {
        let at = mount
            .get("at")
            .and_then(Value::as_str)
            .filter(|at| at.starts_with('/'))
            .ok_or("no absolute `at`")?;
        let source = match &mount["source"] {
            Value::String(source) if source == "workspace" => MountSource::Workspace,
            Value::Object(source) => match (source.get("file"), source.get("ref"), source.get("inline")) {
                (Some(Value::String(file)), _, _) => MountSource::File(PathBuf::from(file)),
                (_, Some(Value::String(reference)), _) => MountSource::Storage(format!("ref {reference}")),
                (_, _, Some(_)) => MountSource::Storage("an inline storage".into()),
                _ => return Err("a `source` that is not `workspace`, `{file}`, `{ref}` or `{inline}`".into()),
            },
            _ => return Err("a `source` that is not `workspace`, `{file}`, `{ref}` or `{inline}`".into()),
        };
        let read_only = match mount["mode"].as_str() {
            None | Some("read-write") => false,
            Some("read-only") => true,
            Some(other) => return Err(format!("`mode: {other}` (read-write or read-only)")),
        };
        Ok(Mount {
            source,
            at: PathBuf::from(at),
            read_only,
        })
    }
}

/// A list of strings (absent: empty).
fn strings(value: &Value, field: &str) -> Result<Vec<String>, String> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("SANDBOX.md {field} holds a non-string"))
            })
            .collect(),
        _ => Err(format!("SANDBOX.md {field} is not a list")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_field_the_runtime_enforces_is_read() {
        let profile = SandboxProfile::from_frontmatter(&json!({
            "provider": "local",
            "config": {},
            "mounts": [
                {"source": "workspace", "at": "/work"},
                {"source": {"file": "/data"}, "at": "/data", "mode": "read-only"},
            ],
            "limits": {"timeout_ms": 1500, "memory_mb": 64, "cpu_ms": 2000},
            "env": {"passthrough": ["PATH", "LANG"]},
            "network": {"egress": ["example.com"]},
            "read_only": true,
            "metadata": {"agentacp": {"enforcement": "best-effort", "processes": 64}},
        }))
        .unwrap();
        assert_eq!(profile.limits.processes, Some(64));
        assert_eq!(profile.mounts[0].source, MountSource::Workspace);
        assert!(profile.mounts[1].read_only && !profile.mounts[0].read_only);
        assert_eq!(profile.mounts[1].source, MountSource::File("/data".into()));
        assert_eq!(profile.limits.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(profile.limits.memory_mb, Some(64));
        assert_eq!(profile.limits.cpu, Some(Duration::from_secs(2)));
        assert_eq!(profile.env_passthrough, ["PATH", "LANG"]);
        assert_eq!(profile.egress, ["example.com"]);
        assert!(profile.read_only && profile.best_effort);
    }

    #[test]
    fn a_bad_field_is_named() {
        let error = |doc: Value| SandboxProfile::from_frontmatter(&doc).unwrap_err();
        assert!(
            error(json!({"provider": "local", "mounts": [{"source": "workspace", "at": "rel"}]})).contains("mounts[0]")
        );
        assert!(error(json!({"provider": "local", "limits": {"memory_mb": 0}})).contains("limits.memory_mb"));
        assert!(error(json!({"provider": "local", "env": {"passthrough": [1]}})).contains("env.passthrough"));
        assert!(
            error(json!({"provider": "local", "metadata": {"agentacp": {"processes": "many"}}}))
                .contains("metadata.agentacp.processes")
        );
        assert!(
            error(json!({"provider": "local", "metadata": {"agentacp": {"enforcement": "lax"}}}))
                .contains("best-effort")
        );
    }
}
