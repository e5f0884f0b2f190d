//! Windows: an agent's process tree as a Job Object.
//!
//! A child is started suspended and in a console process group of its own ([`START_FLAGS`]),
//! put into a [`Job`] of its own, and only then let run ([`Job::adopt_suspended`]): whatever
//! it starts is in the job from its first instruction (a child inherits its parent's job; a
//! process cannot leave one unless the job allows it, and ours does not). The job is made with
//! `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`: when its last handle closes — [`Job`] dropped, or
//! the runtime ending in any way, `TerminateProcess` included — the system kills every
//! process in it: the parent-death analogue, for the whole tree. [`Job::terminate`] kills
//! them now; the polite step before it is [`ctrl_break`] to the child's process group (a
//! console program may handle it; what has no console ignores it).

use std::io;
use std::os::windows::io::{AsRawHandle as _, FromRawHandle as _, OwnedHandle};
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::WAIT_OBJECT_0;
use windows_sys::Win32::System::Console::{CTRL_BREAK_EVENT, GenerateConsoleCtrlEvent};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectBasicAccountingInformation,
    JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED, GetExitCodeProcess, INFINITE, OpenProcess, OpenThread,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SET_QUOTA, PROCESS_SYNCHRONIZE, PROCESS_TERMINATE, ResumeThread,
    THREAD_SUSPEND_RESUME, WaitForSingleObject,
};

/// The creation flags of a child that [`Job::adopt_suspended`] takes: suspended (nothing runs
/// before it is in the job), leading a console process group of its own (so that
/// [`ctrl_break`] reaches it and what it starts, not us).
pub const START_FLAGS: u32 = CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP;

/// The exit code [`Job::terminate`] gives the processes it kills.
pub const KILLED_EXIT_CODE: u32 = 1;

/// How often [`Job::wait_empty`] looks again (the job's completion port aside, the system
/// tells nobody when a job empties).
const POLL: Duration = Duration::from_millis(5);

/// A Job Object holding one child and everything below it; dropped, it kills them all.
#[derive(Debug)]
pub struct Job {
    handle: OwnedHandle,
}

impl Job {
    /// A new, empty job that kills its processes when its last handle closes.
    #[allow(unsafe_code)]
    pub fn new() -> io::Result<Job> {
        // SAFETY: no security attributes and no name are valid arguments; the handle returned
        // (when not null) is ours alone and closed once, by `OwnedHandle`.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a valid handle nobody else owns.
        let job = Job {
            handle: unsafe { OwnedHandle::from_raw_handle(raw) },
        };
        // SAFETY: an all-zero JOBOBJECT_EXTENDED_LIMIT_INFORMATION is a valid value (no
        // limits); it lives across the call, which reads exactly its size.
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        let done = unsafe {
            SetInformationJobObject(
                job.handle.as_raw_handle(),
                JobObjectExtendedLimitInformation,
                std::ptr::from_ref(&limits).cast(),
                size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if done == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(job)
    }

    /// Puts the process `pid` into the job. The caller holds a handle of it (its `Child`), so
    /// that the number cannot name another process meanwhile.
    #[allow(unsafe_code)]
    pub fn assign(&self, pid: u32) -> io::Result<()> {
        // SAFETY: plain values; the handle (when not null) is ours and closed by `OwnedHandle`.
        let raw = unsafe { OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, 0, pid) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a valid handle nobody else owns.
        let process = unsafe { OwnedHandle::from_raw_handle(raw) };
        // SAFETY: both handles are valid for the call.
        let done = unsafe { AssignProcessToJobObject(self.handle.as_raw_handle(), process.as_raw_handle()) };
        if done == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Puts the process `pid` (started with [`START_FLAGS`], its `Child` held by the caller)
    /// into the job, then lets its threads run. Failing, the caller must kill it: it is
    /// suspended, or outside the job.
    pub fn adopt_suspended(&self, pid: u32) -> io::Result<()> {
        self.assign(pid)?;
        match resume_threads(pid)? {
            0 => Err(io::Error::other("the new process has no thread to resume")),
            _ => Ok(()),
        }
    }

    /// Kills every process of the job now ([`KILLED_EXIT_CODE`]). Whether the system did.
    #[allow(unsafe_code)]
    pub fn terminate(&self) -> bool {
        // SAFETY: the handle is valid.
        unsafe { TerminateJobObject(self.handle.as_raw_handle(), KILLED_EXIT_CODE) != 0 }
    }

    /// How many processes of the job still run (`None` when the system does not say).
    #[allow(unsafe_code)]
    pub fn active_processes(&self) -> Option<u32> {
        // SAFETY: all-zero is a valid value of this plain struct; the call writes at most
        // its size into it.
        let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        let done = unsafe {
            QueryInformationJobObject(
                self.handle.as_raw_handle(),
                JobObjectBasicAccountingInformation,
                std::ptr::from_mut(&mut info).cast(),
                size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            )
        };
        (done != 0).then_some(info.ActiveProcesses)
    }

    /// Whether no process of the job runs (an unanswered query counts as running).
    pub fn is_empty(&self) -> bool {
        self.active_processes() == Some(0)
    }

    /// Polls, blocking, at most `limit`, until no process of the job runs.
    pub fn wait_empty(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }
}

/// Sends `CTRL_BREAK_EVENT` to console process group `group` (a child started with
/// [`START_FLAGS`] leads one; its number is the child's pid): the polite first step of ending
/// it. Reaches only processes attached to our console. Whether the system took it.
#[allow(unsafe_code)]
pub fn ctrl_break(group: u32) -> bool {
    // SAFETY: plain values.
    unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, group) != 0 }
}

/// Waits until the process `pid` has exited; its exit code. Nothing is released by it: the
/// caller holds a handle of the process (its `Child`), so the number names it until then.
#[allow(unsafe_code)]
pub fn wait_exit_code(pid: u32) -> io::Result<u32> {
    // SAFETY: plain values; the handle (when not null) is ours and closed by `OwnedHandle`.
    let raw = unsafe { OpenProcess(PROCESS_SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a valid handle nobody else owns.
    let process = unsafe { OwnedHandle::from_raw_handle(raw) };
    // SAFETY: a valid handle and a plain value.
    if unsafe { WaitForSingleObject(process.as_raw_handle(), INFINITE) } != WAIT_OBJECT_0 {
        return Err(io::Error::last_os_error());
    }
    let mut code = 0u32;
    // SAFETY: a valid handle; `code` lives across the call.
    if unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(code)
}

/// Resumes every thread of process `pid` (one, for a process created suspended); how many.
#[allow(unsafe_code)]
fn resume_threads(pid: u32) -> io::Result<usize> {
    // SAFETY: plain values; the snapshot handle (when valid) is ours and closed by
    // `OwnedHandle`.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if raw.is_null() || raw == windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw) };
    // SAFETY: all-zero is a valid THREADENTRY32 once its size is set; the calls write at
    // most that size into it.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle(), &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: plain values; the thread handle (when not null) is closed by
            // `OwnedHandle` after the call.
            let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) };
            if thread.is_null() {
                return Err(io::Error::last_os_error());
            }
            let thread = unsafe { OwnedHandle::from_raw_handle(thread) };
            if unsafe { ResumeThread(thread.as_raw_handle()) } == u32::MAX {
                return Err(io::Error::last_os_error());
            }
            resumed += 1;
        }
        more = unsafe { Thread32Next(snapshot.as_raw_handle(), &mut entry) } != 0;
    }
    Ok(resumed)
}
