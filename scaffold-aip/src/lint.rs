//! Linting many manifests: finding `ACP.md` files under the given paths and checking them
//! in parallel, in a stable order.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use acp_manifest::manifest::{Checked, check_file};

/// One linted file: its check, or the I/O error that stopped it being read.
pub type Outcome = (PathBuf, std::io::Result<Checked>);

/// Finds manifests: each path is a folder searched recursively for `ACP.md` (hidden folders,
/// `target` and `node_modules` are skipped; symlinked folders are not followed), or else
/// checked whatever its name (a FIFO or a device is then reported, not read). Sorted; an
/// error names the path.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    for path in paths {
        let metadata = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if !metadata.is_dir() {
            found.push(path.clone());
            continue;
        }
        let before = found.len();
        walk(path, &mut found).map_err(|e| format!("{}: {e}", path.display()))?;
        if found.len() == before {
            return Err(format!("{}: no ACP.md found in this folder or below", path.display()));
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

fn walk(folder: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(folder)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let file_type = entry.file_type()?;
        let path = entry.path();
        if file_type.is_dir() {
            let skip = name
                .to_str()
                .is_some_and(|n| n.starts_with('.') || n == "target" || n == "node_modules");
            if !skip {
                walk(&path, found)?;
            }
        } else if name == "ACP.md" && !path.is_dir() && path.exists() {
            found.push(clean(path));
        }
    }
    Ok(())
}

/// Drops a leading `./` so paths print the way users type them.
fn clean(path: PathBuf) -> PathBuf {
    match path.strip_prefix(".") {
        Ok(rest) if !rest.as_os_str().is_empty() => rest.to_path_buf(),
        _ => path,
    }
}

/// Checks every file, using all cores; results come back in the order of `files`.
pub fn check_all(files: &[PathBuf]) -> Vec<Outcome> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<Outcome>> = (0..files.len()).map(|_| None).collect();
    let chunks: Vec<Vec<(usize, Outcome)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = files.get(i) else { break };
                        done.push((i, (path.clone(), check_file(path))));
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    for (i, outcome) in chunks.into_iter().flatten() {
        results[i] = Some(outcome);
    }
    results
        .into_iter()
        .zip(files)
        .map(|(r, path)| {
            r.unwrap_or_else(|| {
                (
                    path.clone(),
                    Err(std::io::Error::other("the checker stopped unexpectedly")),
                )
            })
        })
        .collect()
}
