//! Locking that outlives a panic elsewhere.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking the data over from a holder that panicked (the runtime's state stays
/// usable: every critical section leaves it consistent).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
