//! A cgroup of its own for one run of a program, where the kernel lets this process make one:
//! a process count (`pids.max`) that holds for root too, and a memory limit that counts every
//! page the run's processes use together, shared memory (`MAP_SHARED`, memfd) and tmpfs files
//! among them (`memory.max`, `memory.limit_in_bytes`), which no rlimit counts.
//!
//! Where: the caller's own cgroup (`/proc/self/cgroup`), in each hierarchy that has the
//! controller and that this process may write:
//!
//! - **cgroup v1**: the `pids` and `memory` hierarchies, each on its own: `pids.max`,
//!   `memory.limit_in_bytes` and, where swap is accounted, `memory.memsw.limit_in_bytes`
//!   (the same number: swapping out does not make room).
//! - **cgroup v2**: the caller's cgroup when it offers the controllers (`cgroup.controllers`)
//!   and is delegated to it (writable). A cgroup with processes in it cannot hand controllers
//!   to its children, so the first use moves this process into a leaf of its own
//!   (`agentacp-NS.PID`) and enables `pids` and `memory` for its cgroup's children; the runs'
//!   cgroups are that leaf's siblings (`pids.max`, `memory.max`, `memory.swap.max` 0,
//!   `memory.oom.group`, `cgroup.kill`). Not exercised by this project's tests (their
//!   machines have cgroup v1 only).
//!
//! A run's cgroup is `agentacp-NS.PID-N` (NS.PID: this process's PID namespace and PID, unique
//! among running processes whatever their namespace). The program joins it itself, in
//! the child between fork and exec ([`Join::join`], before anything else there): a parent
//! that moved it after `spawn` would race the program, which may fork or allocate first.
//! Dropping the [`RunCgroup`] ends the run: no new processes (`pids.max` 0, `cgroup.kill`),
//! SIGKILL to each process left (by pidfd, checked to be still inside), then the cgroup is
//! removed; bounded in time.
//!
//! What does not hold: a caller that is SIGKILLed leaves its runs' cgroups behind (empty
//! once their processes ended, which the sandbox's own means see to). [`probe`] removes the
//! empty `agentacp-NS.PID…` cgroups of its own PID namespace whose PID is no longer running,
//! next to where it makes its own (another namespace's are left: its PIDs cannot be looked
//! up here), and the empty ones named as earlier versions named them, `agentacp-PID…`, whose
//! PID does not run in this namespace. Elsewhere than Linux nothing is available and nothing is made.
#![cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "cgroups are Linux's: elsewhere nothing is found or made")
)]

use std::path::PathBuf;

/// A cgroup hierarchy's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// cgroup v1: one hierarchy per controller.
    V1,
    /// cgroup v2: one unified hierarchy.
    V2,
}

impl Version {
    /// `cgroup v1` or `cgroup v2`, as reported.
    pub fn name(self) -> &'static str {
        match self {
            Version::V1 => "cgroup v1",
            Version::V2 => "cgroup v2",
        }
    }
}

/// Which limits a run's cgroup can enforce here, and with which version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Available {
    /// A process count (`pids.max`).
    pub pids: Option<Version>,
    /// A memory limit for all of a run's processes together (`memory.max`,
    /// `memory.limit_in_bytes`).
    pub memory: Option<Version>,
    /// Whether swap is limited too (v2 `memory.swap.max`, v1 `memory.memsw.*`; without it a
    /// run's pages may be swapped out, past its limit, where the machine has swap).
    pub swap: bool,
}

impl Available {
    /// Nothing (another OS, or no cgroup this process may write).
    pub const NONE: Available = Available {
        pids: None,
        memory: None,
        swap: false,
    };
}

/// What [`probe`] found: what is available, and why the rest is not.
#[derive(Debug, Default)]
pub struct Probe {
    available: Available,
    why_not: Vec<String>,
    /// Where each controller's run cgroups are made.
    places: Vec<Place>,
}

impl Probe {
    /// The limits a run's cgroup can enforce here.
    pub fn available(&self) -> Available {
        self.available
    }

    /// Why a controller is not available, one sentence each.
    pub fn why_not(&self) -> &[String] {
        &self.why_not
    }

    /// The folders in which runs' cgroups are made (one per hierarchy used): where this
    /// process's are, and where a killed one's are left.
    pub fn folders(&self) -> Vec<&std::path::Path> {
        let mut folders: Vec<&std::path::Path> = self.places.iter().map(|place| place.dir.as_path()).collect();
        folders.dedup();
        folders
    }
}

/// A controller's place: the folder in which runs' cgroups are made.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    controller: Controller,
    version: Version,
    dir: PathBuf,
}

/// The controllers used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Pids,
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }
}

/// What this process may do with cgroups, found the first time (stale cgroups of ours
/// removed then), then remembered.
pub fn probe() -> &'static Probe {
    static PROBED: std::sync::OnceLock<Probe> = std::sync::OnceLock::new();
    PROBED.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            linux::probe()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Probe {
                why_not: vec!["cgroups exist only on Linux".to_string()],
                ..Probe::default()
            }
        }
    })
}

/// The runs' cgroups of this process that exist now: each is removed when its run ends, so
/// none is left once every [`RunCgroup`] is dropped.
pub fn runs_left() -> Vec<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        linux::runs_left(probe())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// The limits of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// The most processes (threads among them) at once.
    pub processes: Option<u64>,
    /// The most memory, in bytes, of all its processes together.
    pub memory_bytes: Option<u64>,
}

/// One run's cgroups (one per hierarchy), made by [`RunCgroup::create`]; dropping it kills
/// what is left inside and removes them.
#[derive(Debug)]
pub struct RunCgroup {
    /// Each folder, and its hierarchy's version.
    dirs: Vec<(PathBuf, Version)>,
}

/// What the child writes to join a run's cgroups: the `cgroup.procs` files, open.
#[derive(Debug)]
pub struct Join(Vec<std::fs::File>);

impl Join {
    /// Moves the calling process into the run's cgroups (it writes `0`, itself, to each
    /// `cgroup.procs`). Made to run in a child between fork and exec: it only writes to files
    /// opened before, and allocates nothing. Call it first there, before the child drops any
    /// privilege (a user namespace): the kernel checks who writes.
    pub fn join(&self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        for file in &self.0 {
            rustix::io::write(file, b"0")?;
        }
        Ok(())
    }
}

impl RunCgroup {
    /// Makes the cgroups for a run with `limits`, in the places [`probe`] found for each
    /// limit that is set (`None` when no limit is set whose controller is available). An
    /// error when one cannot be made or limited: never a run without a limit it was given.
    pub fn create(limits: Limits) -> std::io::Result<Option<RunCgroup>> {
        #[cfg(target_os = "linux")]
        {
            linux::create(probe(), limits)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = limits;
            Ok(None)
        }
    }

    /// The open `cgroup.procs` files a child writes to join ([`Join::join`]).
    pub fn joiner(&self) -> std::io::Result<Join> {
        let open = |dir: &PathBuf| std::fs::OpenOptions::new().write(true).open(dir.join("cgroup.procs"));
        Ok(Join(
            self.dirs.iter().map(|(dir, _)| open(dir)).collect::<Result<_, _>>()?,
        ))
    }

    /// How many of its processes the kernel's out-of-memory killer ended because the run
    /// reached its memory limit.
    pub fn oom_kills(&self) -> u64 {
        let count = |file: &str| {
            self.dirs
                .iter()
                .filter_map(|(dir, _)| std::fs::read_to_string(dir.join(file)).ok())
                .map(|text| keyed(&text, "oom_kill"))
                .sum::<u64>()
        };
        // v1 says it in `memory.oom_control`, v2 in `memory.events`.
        count("memory.oom_control") + count("memory.events")
    }

    /// How many times a process could not be started because the run had its most
    /// processes (`pids.events`).
    pub fn forks_refused(&self) -> u64 {
        (self.dirs.iter())
            .filter_map(|(dir, _)| std::fs::read_to_string(dir.join("pids.events")).ok())
            .map(|text| keyed(&text, "max"))
            .sum()
    }

    /// Ends the run: kills what is left inside and removes the cgroups. Whether they are
    /// gone (else they are left behind, still named as ours, and the next [`probe`] of a
    /// later process removes them once empty).
    pub fn end(mut self) -> bool {
        self.finish()
    }

    fn finish(&mut self) -> bool {
        if self.dirs.is_empty() {
            return true;
        }
        #[cfg(target_os = "linux")]
        let removed = linux::end(&self.dirs);
        #[cfg(not(target_os = "linux"))]
        let removed = false;
        self.dirs.clear();
        removed
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The number after `key` on its line of a flat-keyed cgroup file (`key N`), or 0.
fn keyed(text: &str, key: &str) -> u64 {
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(name, _)| *name == key)
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(target_os = "linux")]
mod linux {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    use super::{Controller, Limits, Place, Probe, RunCgroup, Version};

    /// The name every cgroup of ours starts with.
    const PREFIX: &str = "agentacp-";

    /// This process as the names of its cgroups hold it, `NS.PID`: its PID namespace (the
    /// inode of `/proc/self/ns/pid`; `0` where that cannot be read) and its PID there. PIDs
    /// alone repeat across namespaces (a contained runtime is PID 2 in its own), and the
    /// cgroups of runtimes in different namespaces may sit in one folder.
    fn owner() -> String {
        format!("{}.{}", pid_namespace(), std::process::id())
    }

    /// The inode number of this process's PID namespace, or 0 (read once: a process never
    /// changes its own PID namespace).
    fn pid_namespace() -> u64 {
        static NAMESPACE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *NAMESPACE.get_or_init(|| {
            let link = std::fs::read_link("/proc/self/ns/pid").unwrap_or_default();
            let link = link.to_string_lossy();
            let digits = link.trim_start_matches("pid:[").trim_end_matches(']');
            digits.parse().unwrap_or(0)
        })
    }

    /// A hierarchy as `/proc/self/mountinfo` lists it: its version, where it is mounted and
    /// which cgroup is its root there, and its controllers (v1: its super options).
    struct Mount {
        version: Version,
        root: String,
        at: PathBuf,
        options: Vec<String>,
    }

    pub(super) fn probe() -> Probe {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .map(|text| mounts(&text))
            .unwrap_or_default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut probe = Probe::default();
        for controller in [Controller::Pids, Controller::Memory] {
            match place(controller, &mounts, &own) {
                Ok(place) => {
                    remove_stale(&place.dir);
                    let available = &mut probe.available;
                    match controller {
                        Controller::Pids => available.pids = Some(place.version),
                        Controller::Memory => {
                            available.memory = Some(place.version);
                            available.swap = place.dir.join(swap_file(place.version)).exists() || has_swap_file(&place);
                        }
                    }
                    probe.places.push(place);
                }
                Err(why) => probe.why_not.push(format!("{}: {why}", controller.name())),
            }
        }
        probe
    }

    /// The file that limits swap, as seen in the place itself (v1: the hierarchy's files are
    /// in every cgroup; v2: only in children, so asked of a probe child in [`has_swap_file`]).
    fn swap_file(version: Version) -> &'static str {
        match version {
            Version::V1 => "memory.memsw.limit_in_bytes",
            Version::V2 => "memory.swap.max",
        }
    }

    /// Whether a child made in the place has the swap limit (v2, where the place's own files
    /// are not the children's).
    fn has_swap_file(place: &Place) -> bool {
        place.version == Version::V2
            && try_child(&place.dir, |child| child.join(swap_file(Version::V2)).exists()).unwrap_or(false)
    }

    /// The hierarchies mounted here.
    fn mounts(mountinfo: &str) -> Vec<Mount> {
        mountinfo
            .lines()
            .filter_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                let left: Vec<&str> = left.split(' ').collect();
                let mut right = right.split(' ');
                let version = match right.next()? {
                    "cgroup" => Version::V1,
                    "cgroup2" => Version::V2,
                    _ => return None,
                };
                let options = right.nth(1).unwrap_or_default();
                Some(Mount {
                    version,
                    root: unescape(left.get(3)?),
                    at: PathBuf::from(unescape(left.get(4)?)),
                    options: options.split(',').map(str::to_string).collect(),
                })
            })
            .collect()
    }

    /// A mountinfo field with its octal escapes (`\040` for a space) undone.
    fn unescape(field: &str) -> String {
        let bytes = field.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut index = 0;
        while index < bytes.len() {
            let octal = bytes.get(index + 1..index + 4).and_then(|digits| {
                let digits = std::str::from_utf8(digits).ok()?;
                u8::from_str_radix(digits, 8).ok()
            });
            match (bytes[index], octal) {
                (b'\\', Some(byte)) => {
                    out.push(byte);
                    index += 4;
                }
                (byte, _) => {
                    out.push(byte);
                    index += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Where runs' cgroups with `controller` are made: v1 first (a hierarchy of its own),
    /// else v2; else why neither.
    fn place(controller: Controller, mounts: &[Mount], own: &str) -> Result<Place, String> {
        let name = controller.name();
        let v1 = mounts
            .iter()
            .find(|mount| mount.version == Version::V1 && mount.options.iter().any(|option| option == name));
        if let Some(mount) = v1 {
            let path = own
                .lines()
                .filter_map(|line| {
                    let mut fields = line.splitn(3, ':').skip(1);
                    fields.next().zip(fields.next())
                })
                .find(|(controllers, _)| controllers.split(',').any(|c| c == name))
                .map(|(_, path)| path)
                .ok_or_else(|| format!("cgroup v1: this process is in no `{name}` cgroup"))?;
            let dir = within(mount, path)?;
            return try_child(&dir, |_| true)
                .map(|_| Place {
                    controller,
                    version: Version::V1,
                    dir: dir.clone(),
                })
                .map_err(|why| format!("cgroup v1: cannot make a cgroup in this process's `{name}` cgroup: {why}"));
        }
        let Some(mount) = mounts.iter().find(|mount| mount.version == Version::V2) else {
            return Err("no cgroup hierarchy has this controller here".to_string());
        };
        let path = own
            .lines()
            .find_map(|line| line.strip_prefix("0::"))
            .ok_or("cgroup v2: this process is in no cgroup v2")?;
        v2_place(controller, &within(mount, path)?)
    }

    /// The folder of cgroup `path` in `mount`.
    fn within(mount: &Mount, path: &str) -> Result<PathBuf, String> {
        let relative = if mount.root == "/" {
            Some(path)
        } else {
            path.strip_prefix(mount.root.as_str())
                .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        let relative = relative.ok_or_else(|| {
            format!(
                "{}: this process's cgroup `{path}` is outside the mounted part `{}`",
                mount.version.name(),
                mount.root
            )
        })?;
        Ok(mount.at.join(relative.trim_start_matches('/')))
    }

    /// cgroup v2: `dir` (this process's cgroup) hands `controller` to its children, once this
    /// process is moved into a leaf of its own beside them; else why not.
    fn v2_place(controller: Controller, dir: &Path) -> Result<Place, String> {
        let name = controller.name();
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        if !read("cgroup.controllers").split_whitespace().any(|c| c == name) {
            return Err(format!(
                "cgroup v2: this process's cgroup is not given the `{name}` controller (not delegated)"
            ));
        }
        if !read("cgroup.subtree_control").split_whitespace().any(|c| c == name) {
            enable(dir, name).map_err(|why| {
                format!("cgroup v2: this process's cgroup is not delegated to it (enabling `{name}` for its children: {why})")
            })?;
        }
        match try_child(dir, |child| child.join(format!("{name}.max")).exists()) {
            Ok(true) => Ok(Place {
                controller,
                version: Version::V2,
                dir: dir.to_path_buf(),
            }),
            Ok(false) => Err(format!("cgroup v2: a cgroup made here has no `{name}.max`")),
            Err(why) => Err(format!(
                "cgroup v2: cannot make a cgroup in this process's cgroup: {why}"
            )),
        }
    }

    /// Enables `controller` for the children of `dir`, this process's cgroup, after moving
    /// this process into a leaf of its own there; back where it was if that fails (another
    /// process in `dir`: not delegated to this one alone).
    fn enable(dir: &Path, controller: &str) -> std::io::Result<()> {
        enter_own_leaf(dir)?;
        std::fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}")).inspect_err(|_| {
            if std::fs::write(dir.join("cgroup.procs"), "0").is_ok() {
                let _ = std::fs::remove_dir(dir.join(format!("{PREFIX}{}", owner())));
            }
        })
    }

    /// Moves this process into `dir/agentacp-NS.PID` (v2: a cgroup with processes cannot hand
    /// controllers to its children). It stays there for its life; the leaf is removed by a
    /// later process's [`remove_stale`] once this one is gone.
    fn enter_own_leaf(dir: &Path) -> std::io::Result<()> {
        let leaf = dir.join(format!("{PREFIX}{}", owner()));
        if !leaf.exists() {
            std::fs::create_dir(&leaf)?;
        }
        std::fs::write(leaf.join("cgroup.procs"), "0").inspect_err(|_| {
            let _ = std::fs::remove_dir(&leaf);
        })
    }

    /// Makes a child of `dir` (named as a probe of ours), asks `check` of it, and removes it.
    fn try_child<T>(dir: &Path, check: impl FnOnce(&Path) -> T) -> std::io::Result<T> {
        let child = dir.join(format!("{PREFIX}{}-probe", owner()));
        std::fs::create_dir(&child)?;
        let answer = check(&child);
        let _ = std::fs::remove_dir(&child);
        Ok(answer)
    }

    /// Removes the empty cgroups of ours in `dir` whose process is gone (left behind by a
    /// process that was SIGKILLed): only those of this PID namespace, where `/proc` tells
    /// whether their PID still runs, and those named the earlier way, `agentacp-PID…` with
    /// no namespace, whose PID does not run here. A cgroup with a process in it cannot be
    /// removed.
    fn remove_stale(dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let namespace = pid_namespace().to_string();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(owner) = name.to_str().and_then(|name| name.strip_prefix(PREFIX)) else {
                continue;
            };
            let owner = owner.split('-').next().unwrap_or_default();
            let pid = match owner.split_once('.') {
                Some((ns, pid)) if ns == namespace => pid,
                Some(_) => continue,
                // The earlier names: the PID alone.
                None => owner,
            };
            let ours = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
            if ours && !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }

    /// The runs' cgroups of this process in the places of `probe`.
    pub(super) fn runs_left(probe: &Probe) -> Vec<PathBuf> {
        let ours = format!("{PREFIX}{}-", owner());
        let run = |name: &str| {
            name.strip_prefix(&ours)
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        };
        (probe.places.iter())
            .filter_map(|place| std::fs::read_dir(&place.dir).ok())
            .flat_map(|entries| entries.flatten())
            .filter(|entry| entry.file_name().to_str().is_some_and(run))
            .map(|entry| entry.path())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Makes the cgroup `dir`, named for this process: one of that name already there was
    /// left by an earlier process of this PID in this namespace, which is gone (this process
    /// has its PID), and is removed first where it is empty.
    fn make_dir(dir: &Path) -> std::io::Result<()> {
        match std::fs::create_dir(dir) {
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_dir(dir)?;
                std::fs::create_dir(dir)
            }
            made => made,
        }
    }

    /// Makes the run's cgroups, each limited; removed again when a step fails.
    pub(super) fn create(probe: &Probe, limits: Limits) -> std::io::Result<Option<RunCgroup>> {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let wanted = |place: &&Place| match place.controller {
            Controller::Pids => limits.processes.is_some(),
            Controller::Memory => limits.memory_bytes.is_some(),
        };
        let places: Vec<&Place> = probe.places.iter().filter(wanted).collect();
        if places.is_empty() {
            return Ok(None);
        }
        let name = format!("{PREFIX}{}-{}", owner(), RUNS.fetch_add(1, Ordering::Relaxed));
        let mut run = RunCgroup { dirs: Vec::new() };
        for place in places {
            let dir = place.dir.join(&name);
            if !run.dirs.iter().any(|(made, _)| made == &dir) {
                make_dir(&dir).map_err(|error| context(error, "making", &dir))?;
                run.dirs.push((dir.clone(), place.version));
            }
            for (file, value) in settings(place, limits) {
                let optional = file.starts_with('?');
                let file = dir.join(file.trim_start_matches('?'));
                if optional && !file.exists() {
                    continue;
                }
                match std::fs::write(&file, value) {
                    Err(_) if optional => {}
                    written => written.map_err(|error| context(error, "writing", &file))?,
                }
            }
        }
        Ok(Some(run))
    }

    /// What is written to limit a run (a name starting with `?`: where the kernel has it).
    fn settings(place: &Place, limits: Limits) -> Vec<(&'static str, String)> {
        match (place.controller, place.version) {
            (Controller::Pids, _) => limits
                .processes
                .map(|n| vec![("pids.max", n.to_string())])
                .unwrap_or_default(),
            (Controller::Memory, Version::V1) => limits
                .memory_bytes
                .map(|bytes| {
                    vec![
                        ("memory.limit_in_bytes", bytes.to_string()),
                        ("?memory.memsw.limit_in_bytes", bytes.to_string()),
                    ]
                })
                .unwrap_or_default(),
            (Controller::Memory, Version::V2) => limits
                .memory_bytes
                .map(|bytes| {
                    vec![
                        ("memory.max", bytes.to_string()),
                        ("?memory.swap.max", "0".to_string()),
                        ("?memory.oom.group", "1".to_string()),
                    ]
                })
                .unwrap_or_default(),
        }
    }

    fn context(error: std::io::Error, doing: &str, path: &Path) -> std::io::Error {
        std::io::Error::new(
            error.kind(),
            format!("{doing} the run's cgroup `{}`: {error}", path.display()),
        )
    }

    /// Kills what is left in `dirs` and removes them, within [`crate::KILL_WAIT`]: whether
    /// all are gone.
    pub(super) fn end(dirs: &[(PathBuf, Version)]) -> bool {
        for (dir, version) in dirs {
            // No new process, then (v2) the kernel kills them all.
            let _ = std::fs::write(dir.join("pids.max"), "0");
            if *version == Version::V2 {
                let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            }
        }
        let deadline = Instant::now() + crate::KILL_WAIT;
        loop {
            let left: Vec<u32> = dirs.iter().flat_map(|(dir, _)| members(dir)).collect();
            if left.is_empty() {
                // Removed once its last process has fully exited (else busy a moment more).
                let gone = dirs.iter().filter(|(dir, _)| removed(dir)).count();
                if gone == dirs.len() {
                    return true;
                }
            }
            for pid in left {
                kill_member(pid, dirs);
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(crate::POLL);
        }
    }

    /// Whether `dir` is removed (or already gone).
    fn removed(dir: &Path) -> bool {
        match std::fs::remove_dir(dir) {
            Ok(()) => true,
            Err(error) => error.kind() == std::io::ErrorKind::NotFound,
        }
    }

    /// The processes in cgroup `dir`.
    fn members(dir: &Path) -> Vec<u32> {
        std::fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    /// SIGKILL to process `pid`, through a pidfd taken first and used only once `pid` is
    /// seen inside `dirs` again: a number reused since by a process outside is not signalled.
    fn kill_member(pid: u32, dirs: &[(PathBuf, Version)]) {
        let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
            return;
        };
        let still_inside = || {
            dirs.iter()
                .any(|(dir, _)| members(dir).contains(&(pid.as_raw_pid() as u32)))
        };
        match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
            Ok(pidfd) => {
                if still_inside() {
                    let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
                }
            }
            // Before Linux 5.3: by number (a reuse in between cannot be ruled out).
            Err(rustix::io::Errno::NOSYS) if still_inside() => {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            Err(_) => {}
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_hierarchies_and_this_process_cgroup_are_read() {
            let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,relatime shared:10 - cgroup cgroup rw,pids
32 25 0:28 /sub /sys/fs/cgroup/uni\\040fied rw,relatime - cgroup2 cgroup2 rw
33 25 0:29 / /proc rw - proc proc rw";
            let found = mounts(mountinfo);
            assert_eq!(found.len(), 3);
            assert_eq!(found[0].version, Version::V1);
            assert!(found[0].options.iter().any(|option| option == "memory"));
            assert_eq!(found[2].at, PathBuf::from("/sys/fs/cgroup/uni fied"));
            assert_eq!(
                within(&found[0], "/process_api/x").unwrap(),
                PathBuf::from("/sys/fs/cgroup/memory/process_api/x")
            );
            assert_eq!(
                within(&found[2], "/sub/user").unwrap(),
                PathBuf::from("/sys/fs/cgroup/uni fied/user")
            );
            assert!(
                within(&found[2], "/other")
                    .unwrap_err()
                    .contains("outside the mounted part")
            );
            assert!(within(&found[2], "/subway").is_err());
        }

        /// A runtime that was SIGKILLed leaves its runs' cgroups behind; the next probe
        /// removes those of a process that is gone, once empty, and nothing else.
        #[test]
        fn only_the_empty_cgroups_of_a_process_that_is_gone_are_removed() {
            let place = std::env::temp_dir().join(format!("acp-process-stale-{}", std::process::id()));
            std::fs::create_dir_all(&place).unwrap();
            // PID 0 never names a running process; this one runs. Another PID namespace's
            // cgroups are left alone: its PIDs are not this `/proc`'s to look up.
            let here = pid_namespace();
            let gone = place.join(format!("{PREFIX}{here}.0-3"));
            let full = place.join(format!("{PREFIX}{here}.0-4"));
            let running = place.join(format!("{PREFIX}{}-5", owner()));
            let elsewhere = place.join(format!("{PREFIX}{}.0-3", here + 1));
            let other = place.join("other-0-3");
            for dir in [&gone, &full, &running, &elsewhere, &other] {
                std::fs::create_dir(dir).unwrap();
            }
            std::fs::write(full.join("cgroup.procs"), "12\n").unwrap();
            remove_stale(&place);
            let kept = (
                !gone.exists(),
                full.exists() && running.exists() && elsewhere.exists() && other.exists(),
            );
            std::fs::remove_dir_all(&place).unwrap();
            assert_eq!(kept, (true, true));
        }

        /// The cgroups named the earlier way, `agentacp-PID-N` (no PID namespace), were never
        /// removed: each SIGKILLed runtime of an earlier version left them for good. Those of
        /// a PID gone from this `/proc` are removed once empty; the others stay.
        #[test]
        fn the_stale_cgroups_named_the_earlier_way_are_removed_too() {
            let place = std::env::temp_dir().join(format!("acp-process-stale-old-{}", std::process::id()));
            std::fs::create_dir_all(&place).unwrap();
            let gone = place.join(format!("{PREFIX}0-3"));
            let gone_leaf = place.join(format!("{PREFIX}0"));
            let full = place.join(format!("{PREFIX}0-4"));
            let running = place.join(format!("{PREFIX}{}-5", std::process::id()));
            let unnumbered = place.join(format!("{PREFIX}x0-3"));
            for dir in [&gone, &gone_leaf, &full, &running, &unnumbered] {
                std::fs::create_dir(dir).unwrap();
            }
            std::fs::write(full.join("cgroup.procs"), "12\n").unwrap();
            remove_stale(&place);
            let kept = (
                !gone.exists() && !gone_leaf.exists(),
                full.exists() && running.exists() && unnumbered.exists(),
            );
            std::fs::remove_dir_all(&place).unwrap();
            assert_eq!(kept, (true, true));
        }

        /// The cgroup v2 path, on a folder that only looks like a cgroup (no cgroup v2 with
        /// controllers on this project's machines): a cgroup not given the controller is not
        /// delegated; one that is gets this process moved into a leaf of its own and the
        /// controller enabled for its children (a plain folder's child then lacks `pids.max`).
        #[test]
        fn cgroup_v2_needs_the_controller_delegated_and_moves_this_process_into_a_leaf() {
            let dir = std::env::temp_dir().join(format!("acp-process-v2-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cgroup.controllers"), "cpu io\n").unwrap();
            let not_given = v2_place(Controller::Pids, &dir).unwrap_err();
            std::fs::write(dir.join("cgroup.controllers"), "cpu pids memory\n").unwrap();
            std::fs::write(dir.join("cgroup.subtree_control"), "").unwrap();
            let lacking = v2_place(Controller::Pids, &dir).unwrap_err();
            let leaf = dir.join(format!("{PREFIX}{}", owner()));
            let moved = std::fs::read_to_string(leaf.join("cgroup.procs")).unwrap_or_default();
            let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            assert!(not_given.contains("not given the `pids` controller"), "{not_given}");
            assert!(lacking.contains("has no `pids.max`"), "{lacking}");
            assert_eq!((moved.as_str(), enabled.as_str()), ("0", "+pids"));
        }

        #[test]
        fn a_run_sets_what_each_version_limits() {
            let limits = Limits {
                processes: Some(18),
                memory_bytes: Some(64 << 20),
            };
            let place = |controller, version| Place {
                controller,
                version,
                dir: PathBuf::from("/"),
            };
            let files = |controller, version| -> Vec<&str> {
                settings(&place(controller, version), limits)
                    .into_iter()
                    .map(|(file, _)| file)
                    .collect()
            };
            assert_eq!(files(Controller::Pids, Version::V1), ["pids.max"]);
            assert_eq!(
                files(Controller::Memory, Version::V1),
                ["memory.limit_in_bytes", "?memory.memsw.limit_in_bytes"]
            );
            assert_eq!(
                files(Controller::Memory, Version::V2),
                ["memory.max", "?memory.swap.max", "?memory.oom.group"]
            );
            assert!(settings(&place(Controller::Pids, Version::V2), Limits::default()).is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_keyed_counts_are_read() {
        let text = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed(text, "oom_kill"), 3);
        assert_eq!(keyed(text, "max"), 0);
    }
}
