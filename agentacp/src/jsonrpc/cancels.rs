//! The peer's requests this side is answering, which the peer may cancel with
//! `$/cancel_request` (see [`pending::CANCEL_REQUEST`](super::pending::CANCEL_REQUEST)).
//!
//! A request is made cancellable ([`Cancels::cancellable`]) as it is read, before the next
//! message is: the peer may cancel it at once. What a cancel does is up to the answerer: it
//! waits on [`Cancellable::cancelled`] beside its work and answers `-32800` (or the request's
//! own cancellation marker) when that completes first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::Id;
use crate::sync::lock;

/// The peer's requests being answered, by id: what cancels each.
#[derive(Debug, Default)]
pub struct Cancels {
    /// Each request's cancel, with the registration it belongs to (an id the peer reuses while
    /// its first request is still answered replaces it; the first one's drop must not remove
    /// the second's).
    table: Mutex<HashMap<Id, (u64, oneshot::Sender<()>)>>,
    registrations: std::sync::atomic::AtomicU64,
}

impl Cancels {
    /// Makes the peer's request `id` one that [`cancel`](Self::cancel) can cancel, until the
    /// returned [`Cancellable`] is dropped.
    pub fn cancellable(self: &Arc<Self>, id: &Id) -> Cancellable {
        let registration = self.registrations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (cancel, cancelled) = oneshot::channel();
        if lock(&self.table).insert(id.clone(), (registration, cancel)).is_some() {
            tracing::warn!(%id, "a second request under an id still being answered: only it can be cancelled");
        }
        Cancellable {
            cancels: Arc::downgrade(self),
            id: id.clone(),
            registration,
            state: State::Waiting(cancelled),
        }
    }

    /// `$/cancel_request` (its params): cancels the request it names when that is one of
    /// these. `false`: it names none of them (unknown, already answered, or unreadable params).
    pub fn cancel(&self, params: Option<&RawValue>) -> bool {
        super::pending::cancelled_request(params).is_some_and(|named| self.cancel_id(&named))
    }

    /// Cancels the request `id` when it is one of these. `false`: it is not (unknown or
    /// already answered).
    pub fn cancel_id(&self, id: &Id) -> bool {
        match lock(&self.table).remove(id) {
            Some((_, cancel)) => cancel.send(()).is_ok(),
            None => false,
        }
    }

    /// How many requests are cancellable now.
    pub fn len(&self) -> usize {
        lock(&self.table).len()
    }

    /// Whether no request is cancellable now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One of the peer's requests that `$/cancel_request` may cancel (see
/// [`Cancels::cancellable`]); dropped, it no longer can be.
#[derive(Debug)]
pub struct Cancellable {
    cancels: Weak<Cancels>,
    id: Id,
    registration: u64,
    state: State,
}

#[derive(Debug)]
enum State {
    Waiting(oneshot::Receiver<()>),
    Cancelled,
    /// Replaced by a later request under the same id: never cancelled.
    Never,
}

impl Cancellable {
    /// Completes when the request is cancelled, at once if it was already; never, if it is
    /// not.
    pub async fn cancelled(&mut self) {
        if let State::Waiting(receiver) = &mut self.state {
            self.state = match receiver.await {
                Ok(()) => State::Cancelled,
                Err(_) => State::Never,
            };
        }
        if let State::Never = self.state {
            std::future::pending::<()>().await;
        }
    }

    /// Whether the request has been cancelled by now.
    pub fn is_cancelled(&mut self) -> bool {
        if let State::Waiting(receiver) = &mut self.state {
            match receiver.try_recv() {
                Ok(()) => self.state = State::Cancelled,
                Err(oneshot::error::TryRecvError::Closed) => self.state = State::Never,
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
        }
        matches!(self.state, State::Cancelled)
    }
}

impl Drop for Cancellable {
    fn drop(&mut self) {
        if let Some(cancels) = self.cancels.upgrade() {
            let mut table = lock(&cancels.table);
            if table
                .get(&self.id)
                .is_some_and(|(registration, _)| *registration == self.registration)
            {
                table.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancel_of(id: &Id) -> Box<RawValue> {
        RawValue::from_string(serde_json::json!({ "requestId": id }).to_string()).unwrap()
    }

    #[tokio::test]
    async fn a_cancel_reaches_the_request_it_names_and_only_it() {
        let cancels = Arc::new(Cancels::default());
        let mut first = cancels.cancellable(&Id::Number(1));
        let mut second = cancels.cancellable(&Id::String("two".into()));
        assert!(cancels.cancel(Some(&cancel_of(&Id::String("two".into())))));
        second.cancelled().await;
        assert!(second.is_cancelled());
        // Waiting again is no panic: it is still cancelled.
        second.cancelled().await;
        assert!(!first.is_cancelled());
        assert!(!cancels.cancel(Some(&cancel_of(&Id::Number(3)))), "no such request");
        assert!(!cancels.cancel(None), "no params");
        assert_eq!(cancels.len(), 1);
    }

    #[tokio::test]
    async fn an_answered_request_can_no_longer_be_cancelled() {
        let cancels = Arc::new(Cancels::default());
        drop(cancels.cancellable(&Id::Number(1)));
        assert!(cancels.is_empty());
        assert!(!cancels.cancel(Some(&cancel_of(&Id::Number(1)))));
    }

    /// The peer reuses an id while its first request is answered: the second request is the
    /// one a cancel reaches, and the first one's end does not make it uncancellable.
    #[tokio::test]
    async fn a_reused_id_cancels_the_latest_request_even_after_the_first_ends() {
        let cancels = Arc::new(Cancels::default());
        let mut first = cancels.cancellable(&Id::Number(7));
        let mut second = cancels.cancellable(&Id::Number(7));
        assert!(!first.is_cancelled(), "replaced: never cancelled");
        drop(first);
        assert!(cancels.cancel(Some(&cancel_of(&Id::Number(7)))));
        assert!(second.is_cancelled());
    }
}
