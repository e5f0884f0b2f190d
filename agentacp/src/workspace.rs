//! Confining paths: a session's `cwd` to the workspace root, and the paths tools touch to the
//! session's `cwd`. Symlinks are resolved before comparing, so a link cannot lead outside.

use std::path::{Path, PathBuf};

/// Checks a `cwd` from `session/new` or `session/load`: absolute, existing, and inside `root`
/// once both are canonical. Returns the canonical path.
pub fn confine_cwd(cwd: &str, root: &Path) -> Result<PathBuf, String> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(format!("`cwd` must be an absolute path, got `{cwd}`"));
    }
    let canonical = path
        .canonicalize()
        .map_err(|error| format!("`cwd` `{cwd}` cannot be used: {error}"))?;
    if !canonical.is_dir() {
        return Err(format!("`cwd` `{cwd}` is not a directory"));
    }
    let root = root
        .canonicalize()
        .map_err(|error| format!("the workspace root `{}` cannot be used: {error}", root.display()))?;
    if !canonical.starts_with(&root) {
        return Err(format!(
            "`cwd` `{cwd}` is outside the workspace root `{}`",
            root.display()
        ));
    }
    Ok(canonical)
}

/// Resolves `path` (relative to `base`, or absolute) and checks that it stays inside `base`.
/// The file need not exist: the longest existing ancestor is canonicalised (a `..` below a
/// folder that does not exist is refused).
pub fn confine_path(base: &Path, path: &str) -> Result<PathBuf, String> {
    let base = base
        .canonicalize()
        .map_err(|error| format!("`{}` cannot be used: {error}", base.display()))?;
    let joined = base.join(path);
    let mut existing = joined.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let resolved = loop {
        match existing.canonicalize() {
            Ok(canonical) => break canonical,
            Err(_) => {
                let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                    return Err(format!("`{path}` cannot be resolved"));
                };
                rest.push(name);
                existing = parent;
            }
        }
    };
    let full = rest.iter().rev().fold(resolved, |acc, name| acc.join(name));
    if full.starts_with(&base) {
        Ok(full)
    } else {
        Err(format!("`{path}` is outside `{}`", base.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile_dir::Dir, PathBuf, PathBuf) {
        let dir = tempfile_dir::Dir::new();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("project/src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        (dir, root, outside)
    }

    /// A temporary folder removed on drop (std only, to keep the runtime's dependencies small).
    mod tempfile_dir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static NEXT: AtomicUsize = AtomicUsize::new(0);
                let path = std::env::temp_dir().join(format!(
                    "agentacp-ws-{}-{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&path).unwrap();
                Dir(path)
            }
            pub fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn cwd_must_be_absolute_and_inside_the_root() {
        let (_dir, root, outside) = tree();
        let project = root.join("project");
        assert!(confine_cwd(project.to_str().unwrap(), &root).is_ok());
        assert!(confine_cwd("project", &root).unwrap_err().contains("absolute"));
        assert!(
            confine_cwd(outside.to_str().unwrap(), &root)
                .unwrap_err()
                .contains("outside")
        );
        let sneaky = format!("{}/../outside", root.display());
        assert!(confine_cwd(&sneaky, &root).unwrap_err().contains("outside"));
        assert!(confine_cwd("/definitely/not/here", &root).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_out_of_the_root_is_refused() {
        let (_dir, root, outside) = tree();
        let link = root.join("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert!(
            confine_cwd(link.to_str().unwrap(), &root)
                .unwrap_err()
                .contains("outside")
        );
        assert!(confine_path(&root, "link/file.txt").unwrap_err().contains("outside"));
    }

    #[test]
    fn tool_paths_stay_inside_the_base() {
        let (_dir, root, _outside) = tree();
        let base = root.join("project");
        let inside = confine_path(&base, "src/new.rs").unwrap();
        assert!(inside.ends_with("project/src/new.rs"));
        assert!(confine_path(&base, "src/../src/lib.rs").is_ok());
        assert!(confine_path(&base, "../../outside/x").unwrap_err().contains("outside"));
        assert!(confine_path(&base, "/etc/passwd").unwrap_err().contains("outside"));
        assert!(confine_path(&base, "nope/../../x").is_err());
    }
}
