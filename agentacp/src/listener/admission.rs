//! Who gets a place on a WebSocket listener, and who gives one up.
//!
//! Every connection takes one of the listener's slots (`ListenOptions::max_connections`).
//! With tokens, a connection that has not proved who it is yet (upgrading, or upgraded and not
//! authenticated) also holds a place among the *unauthenticated*: at most
//! `ListenOptions::max_unauthenticated_per_address` from one address and
//! `ListenOptions::unauthenticated_limit` in all, so they never hold every slot.
//!
//! A connection over one of those limits, or that finds no free slot, is not turned away at
//! once: it may be a client with a token. It goes on *over the limit*: its upgrade is read,
//! and refused (`429` for its address's limit, `503` otherwise) unless it shows a valid token.
//! An upgrade that does takes a free slot, or else the slot of the oldest unauthenticated
//! connection, which is evicted (an upgrading one dropped, an open one closed with `1013` and
//! a reason). At most [`OVER_LIMIT_UPGRADES`] upgrades over the limit are read at once; a new
//! one drops the oldest, so that slow upgrades cannot hold them all.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio_tungstenite::tungstenite::http::StatusCode;

use crate::sync::lock;

/// How many upgrades over the limit are read at once (the oldest is dropped for a newer one).
pub(super) const OVER_LIMIT_UPGRADES: usize = 32;

/// A refusal: the HTTP status and the body that says why.
pub(crate) type Refusal = (StatusCode, &'static str);

const TOO_MANY_FROM_ADDRESS: Refusal = (
    StatusCode::TOO_MANY_REQUESTS,
    "too many connections from this address have not authenticated yet; try again later, or show a token on the upgrade",
);
const TOO_MANY_UNAUTHENTICATED: Refusal = (
    StatusCode::SERVICE_UNAVAILABLE,
    "too many connections have not authenticated yet; try again later, or show a token on the upgrade",
);
const FULL: Refusal = (StatusCode::SERVICE_UNAVAILABLE, "too many connections; try again later");

/// A connection's slot: taken from it when it is evicted.
pub(crate) type Slot = Arc<Mutex<Option<OwnedSemaphorePermit>>>;

/// The listener's slots and the places of the connections that have not authenticated.
pub(crate) struct Gate {
    slots: Arc<Semaphore>,
    /// The limits on unauthenticated connections; `None` without tokens (nobody authenticates).
    limits: Option<UnauthenticatedLimits>,
    state: Mutex<State>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct UnauthenticatedLimits {
    /// From one address (`0`: no limit).
    pub(super) per_address: usize,
    /// In all.
    pub(super) total: usize,
}

#[derive(Default)]
struct State {
    /// Numbers connections in the order they came.
    next: u64,
    /// The unauthenticated connections holding a slot, oldest first.
    unproven: BTreeMap<u64, Unproven>,
    /// How many of them each address has.
    by_address: HashMap<IpAddr, usize>,
    /// The upgrades over the limit being read, oldest first: told when they are dropped.
    over_limit: BTreeMap<u64, oneshot::Sender<()>>,
}

struct Unproven {
    key: IpAddr,
    slot: Slot,
    evict: oneshot::Sender<()>,
}

/// A connection let in by [`Gate::admit`].
pub(crate) struct Ticket {
    /// Its slot (none while it is over the limit).
    pub(crate) slot: Slot,
    /// Told if the connection is evicted (or, over the limit, dropped for a newer one).
    evicted: Option<oneshot::Receiver<()>>,
    /// Its place among the unauthenticated, or among the upgrades over the limit.
    place: Option<UnprovenPlace>,
    /// Over the limit: what it is told unless it shows a valid token.
    over_limit: Option<Refusal>,
}

/// A connection's place in the [`Gate`], given back when dropped.
pub(crate) struct UnprovenPlace {
    gate: Arc<Gate>,
    number: u64,
}

impl std::fmt::Debug for UnprovenPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnprovenPlace").field("number", &self.number).finish()
    }
}

impl Gate {
    /// The gate of a listener with `max_connections` slots; `limits` on the unauthenticated
    /// when the listener takes tokens (`None`: nobody authenticates).
    pub(super) fn new(max_connections: usize, limits: Option<UnauthenticatedLimits>) -> Arc<Gate> {
        Arc::new(Gate {
            slots: Arc::new(Semaphore::new(max_connections)),
            limits,
            state: Mutex::default(),
        })
    }

    /// A ticket for a connection from `peer`, or the refusal to answer it with.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Ticket, Refusal> {
        let Some(limits) = self.limits else {
            // Nobody authenticates: a slot, or `503`.
            let permit = self.slots.clone().try_acquire_owned().map_err(|_| FULL)?;
            let (_, evicted) = oneshot::channel();
            return Ok(Ticket {
                slot: Arc::new(Mutex::new(Some(permit))),
                evicted: Some(evicted),
                place: None,
                over_limit: None,
            });
        };
        let key = address_key(peer);
        let mut state = lock(&self.state);
        let number = state.next;
        state.next += 1;
        let from_address = state.by_address.get(&key).copied().unwrap_or(0);
        let refusal = if limits.per_address > 0 && from_address >= limits.per_address {
            Some(TOO_MANY_FROM_ADDRESS)
        } else if state.unproven.len() >= limits.total {
            Some(TOO_MANY_UNAUTHENTICATED)
        } else {
            None
        };
        let permit = match refusal {
            None => self.slots.clone().try_acquire_owned().ok(),
            Some(_) => None,
        };
        let (evict, evicted) = oneshot::channel();
        let slot = Arc::new(Mutex::new(permit));
        let over_limit = if lock(&slot).is_some() {
            *state.by_address.entry(key).or_default() += 1;
            let unproven = Unproven {
                key,
                slot: slot.clone(),
                evict,
            };
            state.unproven.insert(number, unproven);
            None
        } else {
            if state.over_limit.len() >= OVER_LIMIT_UPGRADES
                && let Some((_, oldest)) = state.over_limit.pop_first()
            {
                tracing::warn!("dropping the oldest upgrade over the limit for a newer one");
                let _ = oldest.send(());
            }
            state.over_limit.insert(number, evict);
            Some(refusal.unwrap_or(FULL))
        };
        Ok(Ticket {
            slot,
            evicted: Some(evicted),
            place: Some(UnprovenPlace {
                gate: self.clone(),
                number,
            }),
            over_limit,
        })
    }

    /// The connection of `ticket` showed a valid token on its upgrade: it gives back its place
    /// and, over the limit, gets a slot: a free one, or the oldest unauthenticated
    /// connection's, which is evicted. `Err`: there is none to be had.
    pub(crate) fn prove(&self, ticket: &mut Ticket) -> Result<(), Refusal> {
        drop(ticket.place.take());
        if ticket.over_limit.is_none() {
            return Ok(());
        }
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => self.evict_oldest().ok_or(FULL)?,
        };
        *lock(&ticket.slot) = Some(permit);
        ticket.over_limit = None;
        Ok(())
    }

    /// Whether the place numbered `number` ([`UnprovenPlace::number`]) is still held among
    /// the unauthenticated: `false` once its connection proved who it is (or ended).
    pub(crate) fn is_unproven(&self, number: u64) -> bool {
        lock(&self.state).unproven.contains_key(&number)
    }

    /// Evicts the oldest unauthenticated connection that holds a slot; its slot.
    fn evict_oldest(&self) -> Option<OwnedSemaphorePermit> {
        let mut state = lock(&self.state);
        loop {
            let (_, oldest) = state.unproven.pop_first()?;
            forget_address(&mut state.by_address, oldest.key);
            let permit = lock(&oldest.slot).take();
            if let Some(permit) = permit {
                tracing::info!(peer = %oldest.key, "evicting the oldest unauthenticated connection for an authenticated one");
                let _ = oldest.evict.send(());
                return Some(permit);
            }
        }
    }
}

impl Ticket {
    /// Completes if the connection is evicted; never, once it no longer can be (it proved
    /// who it is, or ended). Taken once.
    pub(crate) fn evicted(&mut self) -> impl Future<Output = ()> + Send + use<> {
        let evicted = self.evicted.take();
        async move {
            let told = match evicted {
                Some(evicted) => evicted.await.is_ok(),
                None => false,
            };
            if !told {
                std::future::pending::<()>().await;
            }
        }
    }

    /// What the connection is told, over the limit, unless it shows a valid token.
    pub(crate) fn over_limit(&self) -> Option<Refusal> {
        self.over_limit
    }

    /// Its place among the unauthenticated, to hold until it proves who it is.
    pub(crate) fn take_place(&mut self) -> Option<UnprovenPlace> {
        self.place.take()
    }
}

impl UnprovenPlace {
    /// Its number, for [`Gate::is_unproven`].
    pub(crate) fn number(&self) -> u64 {
        self.number
    }
}

impl Drop for UnprovenPlace {
    fn drop(&mut self) {
        let mut state = lock(&self.gate.state);
        let state = &mut *state;
        if let Some(unproven) = state.unproven.remove(&self.number) {
            forget_address(&mut state.by_address, unproven.key);
        }
        state.over_limit.remove(&self.number);
    }
}

/// One unauthenticated connection fewer from `key`.
fn forget_address(by_address: &mut HashMap<IpAddr, usize>, key: IpAddr) {
    if let Some(count) = by_address.get_mut(&key) {
        *count -= 1;
        if *count == 0 {
            by_address.remove(&key);
        }
    }
}

/// What counts as one address: an IPv4 address, or an IPv6 `/64` (what one host is usually
/// given; an IPv4-mapped address is the IPv4 one).
fn address_key(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One host usually has a whole IPv6 `/64`: counted per address, it could open as many
    /// unauthenticated connections as it has addresses.
    #[test]
    fn an_ipv6_slash_64_counts_as_one_address_and_a_mapped_ipv4_as_its_ipv4() {
        let key = |text: &str| address_key(text.parse().unwrap());
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
        assert_ne!(key("192.0.2.7"), key("192.0.2.8"));
    }

    fn gate(max_connections: usize, per_address: usize, total: Option<usize>) -> Arc<Gate> {
        // What `ListenOptions::unauthenticated_limit` makes of `total`.
        let total = total.unwrap_or(max_connections / 2).clamp(1, max_connections.max(1));
        Gate::new(max_connections, Some(UnauthenticatedLimits { per_address, total }))
    }

    #[test]
    fn a_place_is_given_back_when_dropped() {
        let gate = gate(8, 1, None);
        let peer: IpAddr = "192.0.2.7".parse().unwrap();
        let mut first = gate.admit(peer).unwrap();
        assert!(first.over_limit().is_none());
        let second = gate.admit(peer).unwrap();
        assert_eq!(
            second.over_limit(),
            Some(TOO_MANY_FROM_ADDRESS),
            "the address's one place is taken"
        );
        let other = gate.admit("192.0.2.8".parse().unwrap()).unwrap();
        assert!(other.over_limit().is_none(), "another address has its own");
        drop(first.take_place());
        assert!(gate.admit(peer).unwrap().over_limit().is_none(), "given back");
        drop((first, second, other));
        let state = lock(&gate.state);
        assert!(
            state.by_address.is_empty() && state.unproven.is_empty() && state.over_limit.is_empty(),
            "nothing left counted"
        );
    }

    /// The addresses' limits together may exceed the slots: unauthenticated connections hold
    /// at most their share, and a token gets one of theirs when none is free.
    #[test]
    fn unauthenticated_connections_hold_their_share_and_a_token_takes_the_oldest_ones_slot() {
        let gate = gate(4, 0, Some(2));
        let peer: IpAddr = "192.0.2.7".parse().unwrap();
        let mut oldest = gate.admit(peer).unwrap();
        let _newer = gate.admit(peer).unwrap();
        let mut third = gate.admit(peer).unwrap();
        assert_eq!(third.over_limit(), Some(TOO_MANY_UNAUTHENTICATED));
        gate.prove(&mut third).expect("a free slot");
        let mut fourth = gate.admit(peer).unwrap();
        gate.prove(&mut fourth).expect("the last free slot");
        let mut fifth = gate.admit(peer).unwrap();
        assert_eq!(fifth.over_limit(), Some(TOO_MANY_UNAUTHENTICATED));
        gate.prove(&mut fifth)
            .expect("the oldest unauthenticated connection's slot");
        assert!(lock(&oldest.slot).is_none(), "the evicted connection's slot was taken");
        assert!(
            oldest.evicted.as_mut().unwrap().try_recv().is_ok(),
            "the evicted connection was told"
        );
        assert!(lock(&fifth.slot).is_some());
    }

    #[test]
    fn the_oldest_upgrade_over_the_limit_is_dropped_for_a_newer_one() {
        let gate = gate(1, 0, Some(1));
        let peer: IpAddr = "192.0.2.7".parse().unwrap();
        let _holder = gate.admit(peer).unwrap();
        let mut over: Vec<Ticket> = (0..OVER_LIMIT_UPGRADES).map(|_| gate.admit(peer).unwrap()).collect();
        assert!(over.iter().all(|ticket| ticket.over_limit().is_some()));
        let _newest = gate.admit(peer).unwrap();
        assert!(
            over[0].evicted.as_mut().unwrap().try_recv().is_ok(),
            "the oldest was dropped"
        );
        assert!(
            over[1].evicted.as_mut().unwrap().try_recv().is_err(),
            "the others are read on"
        );
    }
}
