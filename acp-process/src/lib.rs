//! How agentacp ends what it starts: every process below an agent, not only the agent.
//!
//! An agent's process group reaches what it starts, until one of them leaves the group
//! (`setsid`, `setpgid`) or outlives the agent: then it is reparented to PID 1 and nothing of
//! ours could find it again. Here:
//!
//! - [`adopt_orphans`] makes the calling process a *child subreaper* (Linux
//!   `PR_SET_CHILD_SUBREAPER`): an orphan below it is reparented to it, not to PID 1, so it
//!   stays below the caller, where [`end_all_descendants`] finds it.
//! - [`Tree`] holds an agent's descendants as they were found by walking `/proc` (each by a
//!   pidfd: a signal never reaches a process that reused the number), signals them, and reaps
//!   those that became the caller's children.
//!
//! What holds (Linux): a process that was below the agent when the tree was last walked
//! ([`Tree::note_descendants_of`], [`Tree::refresh`]) is ended by [`Tree::end`], wherever it
//! went since (another group, another session). A process below the caller when
//! [`end_all_descendants`] runs is ended by it — with [`adopt_orphans`] in effect that
//! includes every orphan of an agent.
//!
//! What does not: a process that is SIGKILLed gets no chance to run any of this. The agent
//! itself can still be ended by the kernel (`PR_SET_PDEATHSIG`, set by whoever spawns it), but
//! that signal is not inherited by what the agent forks, and a subreaper that dies hands its
//! orphans on to the next one up (or PID 1). Only a PID namespace or a service manager that
//! kills its unit's cgroup (systemd's default `KillMode=control-group`) ends those then:
//! [`contain_tree`] gives the agent a PID namespace of its own where the caller is root, and
//! where it is not, inside a user namespace that maps the caller's uid and gid to themselves
//! (when the kernel lets it make one: [`tree_containment`] says which, and why not is logged;
//! `AGENTACP_CONTAIN_TREE=off` turns both off); agentacp's sandbox has its own. The subreaper
//! is process-wide: orphans below *any* child of the caller
//! are reparented to it, and one that exits on its own stays a zombie of the caller until it
//! is reaped here (a [`Tree`] member, [`reap_adopted_in_group`]) or the caller exits — the
//! caller cannot be told it from a child it started itself, whose status is not this crate's
//! to take. Elsewhere than Linux no tree is found: [`adopt_orphans`] says so, and the rest
//! finds nothing to end.
//!
//! On Windows a tree is not found by walking, it is held from the start: `job` puts each child,
//! started suspended, into a Job Object of its own that kills all its processes when its last
//! handle closes (with the caller, however it ends), and [`program`] finds the file a program
//! name starts (`PATH` with `PATHEXT`) and the arguments a batch file may not be given.
//! `pipe` makes a named pipe that only the current user may open (agentacp's bridge reaches its
//! stdio MCP shims through one).
//!
//! Beside that, [`file`](mod@file): the one way the workspace opens a regular file a user names (never
//! waiting on a FIFO) and reads it within a size limit.

use std::time::{Duration, Instant};

pub mod cgroup;
pub mod file;
#[cfg(windows)]
pub mod job;
#[cfg(target_os = "linux")]
pub mod namespace;
#[cfg(windows)]
pub mod pipe;
pub mod program;
#[cfg(target_os = "linux")]
pub use namespace::{contain_tree, die_with_parent, tree_containment, tree_namespace};

/// The environment variable that turns [`contain_tree`] off (`off`); unset, empty or `auto`:
/// on wherever the kernel allows it. Read once per process.
pub const CONTAIN_TREE_ENV: &str = "AGENTACP_CONTAIN_TREE";

/// How [`contain_tree`] runs a program here ([`tree_containment`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeContainment {
    /// In a PID namespace of its own, nothing else changed: the caller is root (with
    /// `CAP_SYS_ADMIN`).
    PidNamespace,
    /// In a PID namespace of its own inside a user namespace of its own, which maps the
    /// caller's uid and gid to themselves: the caller is not root. The program runs with the
    /// caller's ids and no capabilities; what it sees differently: the owners of files (and
    /// its supplementary groups) outside that mapping show as `nobody`/`nogroup` (access is
    /// decided as before), and set-user-ID programs (`sudo`) and file capabilities gain it
    /// nothing.
    UserNamespace,
}

/// Elsewhere than Linux: no PID namespace; `command` is unchanged.
#[cfg(not(target_os = "linux"))]
pub fn contain_tree(_command: &mut std::process::Command) -> bool {
    false
}

/// Elsewhere than Linux: no PID namespace.
#[cfg(not(target_os = "linux"))]
pub fn tree_namespace() -> bool {
    false
}

/// Elsewhere than Linux: no PID namespace.
#[cfg(not(target_os = "linux"))]
pub fn tree_containment() -> Option<TreeContainment> {
    None
}

/// Elsewhere than Linux: nothing (a child outlives a killed caller).
#[cfg(not(target_os = "linux"))]
pub fn die_with_parent(_command: &mut std::process::Command) {}

/// How long [`Tree::end`] waits after SIGKILL for the processes to be gone.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// How often a wait looks again (the kernel tells nobody when a tree empties).
const POLL: Duration = Duration::from_millis(5);

/// Makes the calling process the child subreaper of everything it starts (once per process;
/// later calls only say whether it is). Whether it is in effect: `false` elsewhere than Linux,
/// or when the kernel refused ([`adopt_orphans_result`] says why, for the caller's log).
pub fn adopt_orphans() -> bool {
    adopt_orphans_result().is_ok()
}

/// [`adopt_orphans`], with why it is not in effect.
pub fn adopt_orphans_result() -> Result<(), &'static str> {
    #[cfg(target_os = "linux")]
    {
        static ADOPTING: std::sync::OnceLock<Result<(), &'static str>> = std::sync::OnceLock::new();
        *ADOPTING.get_or_init(|| {
            rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
                .map_err(|_| "the kernel refused to make this process a child subreaper")
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err("a child subreaper exists only on Linux")
    }
}

/// Ends every process below the calling one: SIGTERM, `grace` to exit, SIGKILL, then a bounded
/// wait; each that is a child of the caller is reaped (the exit status of a child the caller
/// still holds a handle of is taken too: call this last, as a program exits). Repeated while
/// new processes turn up (forked as their parents were ended), a few rounds at most. Whether
/// nothing is left below the caller.
pub fn end_all_descendants(grace: Duration) -> bool {
    for _ in 0..3 {
        let mut tree = Tree::default();
        if tree.note_descendants_of(std::process::id()) == 0 {
            return true;
        }
        tree.end(grace);
    }
    Tree::default().note_descendants_of(std::process::id()) == 0
}

/// Sends SIGTERM to process group `group` (a child started with `process_group(0)` leads one
/// of its own): the polite first step of ending an agent, before [`Tree::end`] or a kill.
/// Whether the signal was sent (`false` off Unix, or when the group is gone).
pub fn terminate_group(group: u32) -> bool {
    #[cfg(unix)]
    {
        let Some(group) = i32::try_from(group).ok().and_then(rustix::process::Pid::from_raw) else {
            return false;
        };
        rustix::process::kill_process_group(group, rustix::process::Signal::TERM).is_ok()
    }
    #[cfg(not(unix))]
    {
        let _ = group;
        false
    }
}

/// Reaps the caller's exited children in process group `group`, its leader aside: what the
/// group's processes left behind and the caller adopted ([`adopt_orphans`]), now zombies that
/// would keep the group from being empty. (A child the caller started itself leads a group of
/// its own or is in the caller's, so none of their statuses is taken.) How many were reaped.
pub fn reap_adopted_in_group(group: u32) -> usize {
    #[cfg(target_os = "linux")]
    {
        let Ok(group) = i32::try_from(group) else { return 0 };
        let us = i32::try_from(std::process::id()).unwrap_or(0);
        proc::table()
            .into_iter()
            .filter(|e| e.group == group && e.pid != group && e.parent == us && e.zombie)
            .filter_map(|e| rustix::process::Pid::from_raw(e.pid))
            .filter(|&pid| {
                let options = rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOHANG;
                rustix::process::waitid(rustix::process::WaitId::Pid(pid), options).is_ok_and(|s| s.is_some())
            })
            .count()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = group;
        0
    }
}

/// An agent's descendants, as found by walking `/proc` (each held by a pidfd where the kernel
/// has them). Dropping it signals nothing: [`Tree::end`] does.
#[derive(Debug, Default)]
pub struct Tree {
    members: Vec<Member>,
}

/// One process of a [`Tree`].
#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code, reason = "found only on Linux"))]
struct Member {
    pid: i32,
    /// Its start time (`/proc/<pid>/stat`), which tells it from a later process of that pid.
    start: u64,
    /// A pidfd (Linux 5.3 and later); without one, the pid and start time are checked first.
    #[cfg(target_os = "linux")]
    fd: Option<std::os::fd::OwnedFd>,
}

impl Tree {
    /// Adds every process now below `root` (not `root` itself) that the tree does not hold
    /// yet; how many were added.
    pub fn note_descendants_of(&mut self, root: u32) -> usize {
        self.note_below(&[root])
    }

    /// Adds what the processes of the tree started since it was last walked.
    pub fn refresh(&mut self) -> usize {
        if self.members.is_empty() {
            return 0;
        }
        self.note_below(&self.pids())
    }

    /// Adds every process now below one of `roots` that the tree does not hold yet (one walk
    /// of `/proc`); how many were added.
    fn note_below(&mut self, roots: &[u32]) -> usize {
        let before = self.members.len();
        #[cfg(target_os = "linux")]
        {
            let roots: Vec<i32> = roots.iter().filter_map(|&root| i32::try_from(root).ok()).collect();
            for found in proc::descendants_of(&roots) {
                if self
                    .members
                    .iter()
                    .any(|m| m.pid == found.pid && m.start == found.start)
                {
                    continue;
                }
                if let Some(member) = Member::open(found) {
                    self.members.push(member);
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = roots;
        self.members.len() - before
    }

    /// Sends SIGTERM to every process of the tree that still runs.
    pub fn terminate(&self) {
        #[cfg(target_os = "linux")]
        self.signal(rustix::process::Signal::TERM);
    }

    /// Sends SIGKILL to every process of the tree that still runs.
    pub fn kill(&self) {
        #[cfg(target_os = "linux")]
        self.signal(rustix::process::Signal::KILL);
    }

    #[cfg(target_os = "linux")]
    fn signal(&self, signal: rustix::process::Signal) {
        for member in &self.members {
            member.signal(signal);
        }
    }

    /// Forgets the processes that have exited (reaping those that are the caller's
    /// children); whether any still runs.
    pub fn running(&mut self) -> bool {
        self.members.retain(|member| !member.gone());
        !self.members.is_empty()
    }

    /// The pids of the processes the tree holds.
    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(|m| u32::try_from(m.pid).ok()).collect()
    }

    /// Ends the tree, blocking: walks it again, SIGTERM, at most `grace` for every process to
    /// exit, then (walked again) SIGKILL and at most two seconds more. Whether every process
    /// is gone.
    pub fn end(&mut self, grace: Duration) -> bool {
        self.refresh();
        if !self.running() {
            return true;
        }
        self.terminate();
        if self.wait_gone(grace) {
            return true;
        }
        self.refresh();
        self.kill();
        self.wait_gone(KILL_WAIT)
    }

    /// Polls, blocking, at most `limit`, until no process of the tree runs.
    fn wait_gone(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if !self.running() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }
}

#[cfg(target_os = "linux")]
impl Member {
    /// Holds `found` by a pidfd, when the process is still the one found (`None` when it is
    /// gone, or its pid already names another).
    fn open(found: proc::Entry) -> Option<Member> {
        let pid = rustix::process::Pid::from_raw(found.pid)?;
        let fd = match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
            Ok(fd) => Some(fd),
            Err(rustix::io::Errno::SRCH) => return None,
            // An older kernel: the pid, checked by its start time before each use.
            Err(_) => None,
        };
        // Opened after the walk: the pid must still be that process.
        if proc::entry(found.pid).map(|now| now.start) != Some(found.start) {
            return None;
        }
        Some(Member {
            pid: found.pid,
            start: found.start,
            fd,
        })
    }

    fn signal(&self, signal: rustix::process::Signal) {
        match &self.fd {
            Some(fd) => {
                let _ = rustix::process::pidfd_send_signal(fd, signal);
            }
            None => {
                if let (Some(pid), Some(now)) = (rustix::process::Pid::from_raw(self.pid), proc::entry(self.pid))
                    && now.start == self.start
                    && !now.zombie
                {
                    let _ = rustix::process::kill_process(pid, signal);
                }
            }
        }
    }

    /// Whether it has exited; reaped when it is the caller's child.
    fn gone(&self) -> bool {
        let Some(fd) = &self.fd else {
            return proc::entry(self.pid).is_none_or(|now| now.start != self.start || now.zombie);
        };
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        let now = Timespec { tv_sec: 0, tv_nsec: 0 };
        let exited = match rustix::event::poll(&mut fds, Some(&now)) {
            Ok(ready) => ready > 0,
            Err(_) => false,
        };
        if exited {
            // Not the caller's child (its own parent reaps it): `ECHILD`, nothing to do.
            let options = rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOHANG;
            let _ = rustix::process::waitid(rustix::process::WaitId::PidFd(std::os::fd::AsFd::as_fd(fd)), options);
        }
        exited
    }
}

#[cfg(not(target_os = "linux"))]
impl Member {
    fn gone(&self) -> bool {
        true
    }
}

/// The process table, read from `/proc`.
#[cfg(target_os = "linux")]
mod proc {
    use std::collections::HashMap;

    /// A process as `/proc/<pid>/stat` shows it.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Entry {
        pub(crate) pid: i32,
        pub(crate) parent: i32,
        pub(crate) group: i32,
        pub(crate) start: u64,
        pub(crate) zombie: bool,
    }

    /// The process `pid`, when there is one.
    pub(crate) fn entry(pid: i32) -> Option<Entry> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // "pid (comm) S ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
        // stime cutime cstime priority nice threads itrealvalue starttime ...": the fields
        // after the last ')' (a name may hold one).
        let (_, rest) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        Some(Entry {
            pid,
            parent: fields.get(1)?.parse().ok()?,
            group: fields.get(2)?.parse().ok()?,
            start: fields.get(19)?.parse().ok()?,
            zombie: matches!(fields.first(), Some(&("Z" | "X"))),
        })
    }

    /// Every process there is now.
    pub(crate) fn table() -> Vec<Entry> {
        let Ok(folder) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        folder
            .flatten()
            .filter_map(|process| process.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(entry)
            .collect()
    }

    /// Every process below one of `roots`, parents before their children.
    pub(crate) fn descendants_of(roots: &[i32]) -> Vec<Entry> {
        let mut children: HashMap<i32, Vec<Entry>> = HashMap::new();
        for entry in table() {
            children.entry(entry.parent).or_default().push(entry);
        }
        let mut found = Vec::new();
        let mut next = roots.to_vec();
        while let Some(parent) = next.pop() {
            for child in children.remove(&parent).unwrap_or_default() {
                next.push(child.pid);
                found.push(child);
            }
        }
        found
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A process that left its group and session (`setsid`) below a child is found, ended and
    /// reaped; the child's own group signal would not have reached it.
    #[test]
    fn a_setsid_grandchild_is_found_and_ended() {
        assert!(adopt_orphans());
        let mut child = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 600 & echo $!; exec sleep 600"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        let mut tree = Tree::default();
        // `setsid` execs `sleep`: the same pid, found once it runs (the walk is repeated
        // until then: it may not have forked yet).
        let deadline = Instant::now() + Duration::from_secs(20);
        while !tree.pids().contains(&grandchild) {
            assert!(Instant::now() < deadline, "the grandchild {grandchild} was not found");
            tree.note_descendants_of(child.id());
            std::thread::sleep(POLL);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(tree.end(Duration::from_secs(5)));
        assert!(
            proc::entry(grandchild as i32).is_none(),
            "the grandchild is still there (or a zombie)"
        );
    }
}
