//! Batched syncs made by a thread of the log's own ([`FsyncPolicy::Batched`](super::FsyncPolicy::Batched)
//! with a sink that offers [`AuditSink::background_sync`](super::AuditSink::background_sync)):
//! the writer of a batch's last record does not wait for the disk, yet a crash still loses
//! at most `every - 1` records.
//!
//! A sync is asked for once half a batch waits; the thread makes it while records go on being
//! written, and covers what was written before it started. A writer whose record would leave
//! a whole batch unsynced waits for the sync in flight: it only does when the disk is slower
//! than half a batch of records.

use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Makes what was appended so far durable, from another thread than the one appending.
pub type BackgroundSync = Box<dyn FnMut() -> io::Result<()> + Send>;

/// The smallest batch synced in the background: a smaller one is synced in line.
pub(crate) const LEAST_BATCH: usize = 4;

/// The thread, and what it shares with the writers.
pub(crate) struct Syncer {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

/// Counts of records: appended, covered by the sync asked for, durable.
#[derive(Default)]
struct State {
    appended: u64,
    requested: u64,
    synced: u64,
    /// Why a sync failed: the log records no more.
    failed: Option<String>,
    stop: bool,
}

impl State {
    fn unsynced(&self) -> u64 {
        self.appended - self.synced
    }
}

impl Syncer {
    /// Starts the thread that syncs with `sync`.
    pub(crate) fn start(sync: BackgroundSync) -> io::Result<Syncer> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let thread = std::thread::Builder::new().name("audit-sync".into()).spawn({
            let shared = Arc::clone(&shared);
            move || run(&shared, sync)
        })?;
        Ok(Syncer {
            shared,
            thread: Some(thread),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One more record was appended: asks for a sync once half of `every` waits, and waits
    /// while a whole batch would. `Err`: a sync failed (why).
    pub(crate) fn appended(&self, every: usize) -> Result<(), String> {
        let every = every as u64;
        let mut state = self.lock();
        state.appended += 1;
        if state.unsynced() >= every.div_ceil(2) && state.requested < state.appended {
            // The thread waits for work only when nothing is asked of it.
            let idle = state.requested <= state.synced;
            state.requested = state.appended;
            if idle {
                self.shared.changed.notify_all();
            }
        }
        while state.failed.is_none() && state.unsynced() >= every {
            state = (self.shared.changed.wait(state)).unwrap_or_else(|e| e.into_inner());
        }
        state.failed.clone().map_or(Ok(()), Err)
    }

    /// How many records are not known to be durable; `Err` once a sync failed.
    pub(crate) fn unsynced(&self) -> Result<u64, String> {
        let state = self.lock();
        state.failed.clone().map_or(Ok(state.unsynced()), Err)
    }

    /// Everything appended so far was made durable in line (a flush).
    pub(crate) fn synced_all(&self) {
        let mut state = self.lock();
        state.synced = state.appended;
        self.shared.changed.notify_all();
    }

    /// Stops the thread, once it has made the syncs asked of it: how many records are still
    /// not durable (0 after a failure, when nothing more should be tried).
    pub(crate) fn stop(mut self) -> u64 {
        self.join();
        let state = self.lock();
        if state.failed.is_some() { 0 } else { state.unsynced() }
    }

    /// Tells the thread to stop once it has made the syncs asked of it, and waits for it.
    fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.lock().stop = true;
            self.shared.changed.notify_all();
            let _ = thread.join();
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.join();
    }
}

/// The thread: syncs while more is asked than is durable, until stopped.
fn run(shared: &Shared, mut sync: BackgroundSync) {
    let lock = || shared.state.lock().unwrap_or_else(|e| e.into_inner());
    let mut state = lock();
    loop {
        if state.failed.is_none() && state.requested > state.synced {
            let covers = state.requested;
            drop(state);
            // A sync that panics fails the log like one that errs (and is not called again):
            // a writer waiting for it must not wait forever.
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(&mut sync));
            state = lock();
            match outcome {
                Ok(Ok(())) => state.synced = state.synced.max(covers),
                Ok(Err(error)) => state.failed = Some(format!("a background sync failed: {error}")),
                Err(panic) => {
                    let why = (panic.downcast_ref::<&str>().copied())
                        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                        .unwrap_or("no message");
                    state.failed = Some(format!("a background sync panicked: {why}"));
                }
            }
            shared.changed.notify_all();
        } else if state.stop {
            return;
        } else {
            state = shared.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}
