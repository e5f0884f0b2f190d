//! The peer's requests this side has taken and not yet answered, by id: the one place that
//! refuses a request whose id is still in flight.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::jsonrpc::{Id, RpcError, codes};

/// The peer's requests in flight, by id, each with what its role keeps about it (`T`).
#[derive(Debug)]
pub struct InFlight<T> {
    table: Mutex<HashMap<Id, T>>,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        InFlight {
            table: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> InFlight<T> {
    /// The table, locked.
    pub fn lock(&self) -> MutexGuard<'_, HashMap<Id, T>> {
        crate::sync::lock(&self.table)
    }

    /// `Err` (the answer to send) when a request under `id` is still in flight: the peer
    /// may not reuse an id before its answer, and the first request keeps its answer.
    pub fn refuse_duplicate(&self, id: &Id) -> Result<(), RpcError> {
        if self.lock().contains_key(id) {
            return Err(duplicate_id(id));
        }
        Ok(())
    }
}

/// The answer to a request whose id `id` is still in flight (`-32600`).
pub fn duplicate_id(id: &Id) -> RpcError {
    RpcError::new(
        codes::INVALID_REQUEST,
        format!("duplicate id in flight: request {id} has not been answered yet"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_in_flight_is_refused_until_it_is_answered() {
        let in_flight = InFlight::default();
        assert!(in_flight.refuse_duplicate(&Id::Number(1)).is_ok());
        in_flight.lock().insert(Id::Number(1), ());
        let error = in_flight.refuse_duplicate(&Id::Number(1)).unwrap_err();
        assert_eq!(error.code, codes::INVALID_REQUEST);
        assert!(error.message.contains("duplicate id in flight"), "{error}");
        assert!(in_flight.refuse_duplicate(&Id::String("1".into())).is_ok());
        in_flight.lock().remove(&Id::Number(1));
        assert!(in_flight.refuse_duplicate(&Id::Number(1)).is_ok());
    }
}
