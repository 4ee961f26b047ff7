//! The clocks of the Yjs clients one update names, as the document holds them: what the room's
//! checks of the update and its census need, looked up one by one. A state vector holds every
//! client the document has; built up to three times a frame, it made each frame (a reader's
//! empty update included) cost in proportion to the document's clients, not to the frame.

use yrs::{ClientID, Doc, ReadTxn, StateVector, Transact};

use super::guard::Shape;

/// The clocks of the clients an update names (the clients of its blocks, of its items and the
/// ids they name, and of its deletions), sorted by client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clocks(Vec<(u64, u64)>);

impl Clocks {
    /// The document's clocks for the clients `shape` names.
    pub fn of(doc: &Doc, shape: &Shape) -> Clocks {
        let txn = doc.transact();
        let store = txn.store();
        Clocks::named_by(shape, |client| clock_of(store, client))
    }

    /// The clocks `sv` holds for the clients `shape` names.
    pub fn in_sv(sv: &StateVector, shape: &Shape) -> Clocks {
        Clocks::named_by(shape, |client| u64::from(sv.get(&ClientID::new(client))))
    }

    fn named_by(shape: &Shape, clock: impl Fn(u64) -> u64) -> Clocks {
        let mut clients: Vec<u64> = shape.blocks.iter().map(|b| b.0).collect();
        clients.extend(&shape.clients);
        clients.extend(shape.deletes.iter().map(|d| d.0));
        clients.extend(shape.gcs.iter().map(|g| g.0));
        clients.sort(); // the rooms' sort of ids: no other kind of sort in the Wasm
        clients.dedup();
        Clocks(clients.into_iter().map(|c| (c, clock(c))).collect())
    }

    /// As a function from a client the update names to its clock.
    pub fn known(&self) -> impl Fn(u64) -> u64 + '_ {
        |client| match self.0.binary_search_by_key(&client, |&(c, _)| c) {
            Ok(i) => self.0[i].1,
            Err(_) => {
                // Every check asks only for the clients the update names.
                debug_assert!(false, "client {client} is not named by the update");
                0
            }
        }
    }

    /// The document's state vector with these clocks in place of its own: what the document
    /// held before the update they were taken for (only its clients' clocks moved).
    pub fn in_place_of(&self, now: StateVector) -> StateVector {
        let mut sv = now;
        for &(client, clock) in &self.0 {
            sv.set_min(ClientID::new(client), clock as u32); // clocks fit a u32: the guard's
        }
        sv
    }
}

/// One client's clock in the document.
pub fn clock_of(store: &yrs::Store, client: u64) -> u64 {
    u64::from(store.client_clock(&ClientID::new(client)))
}
