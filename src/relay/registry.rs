//! [`Relays`]: the home's side of its links, which instance of each relay it
//! listens to. A relay object that has not touched storage may not know that
//! a newer instance of it exists (the runtime may run two for a moment); the
//! home hears from both and must believe one.

use std::collections::BTreeMap;

/// What the home does with a message from instance `epoch` of a relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// The instance it listens to: apply the message, over `link`.
    Current { link: String },
    /// A newer instance: listen to it over `link` from now on; the sessions
    /// of the old link (`replaced`, if there was one) are gone with it.
    Newer { link: String, replaced: Option<String> },
    /// An older instance than one the home has heard from: refuse the
    /// message, and tell it which instance speaks for the relay.
    Stale { current: u64 },
}

/// Which instance of each relay the home listens to. The adapter stores it
/// (a newer instance is rare: a start, or a new link), so that a home
/// rebuilt from storage refuses a stale instance too.
///
/// ```
/// use homeroom::relay::{Admit, Relays};
///
/// let mut relays = Relays::default();
/// assert_eq!(relays.admit("oc-0", 1), Admit::Newer { link: "oc-0#1".into(), replaced: None });
/// assert_eq!(relays.admit("oc-0", 2), Admit::Newer { link: "oc-0#2".into(), replaced: Some("oc-0#1".into()) });
/// assert_eq!(relays.admit("oc-0", 1), Admit::Stale { current: 2 });
/// assert_eq!(relays.admit("oc-0", 2), Admit::Current { link: "oc-0#2".into() });
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Relays {
    /// The newest instance heard from, per relay.
    epochs: BTreeMap<String, u64>,
}

impl Relays {
    /// From what the adapter stored: each relay's newest instance.
    pub fn from_stored(epochs: impl IntoIterator<Item = (String, u64)>) -> Relays {
        Relays { epochs: epochs.into_iter().collect() }
    }

    /// The name of the link of instance `epoch` of `relay`: the engine's
    /// [`Hello::link`](crate::room::Hello::link) for its sessions.
    pub fn link(relay: &str, epoch: u64) -> String {
        format!("{relay}#{epoch}")
    }

    /// Decides a message from instance `epoch` of `relay`.
    pub fn admit(&mut self, relay: &str, epoch: u64) -> Admit {
        match self.epochs.get(relay).copied() {
            Some(current) if current == epoch => Admit::Current { link: Self::link(relay, epoch) },
            Some(current) if current > epoch => Admit::Stale { current },
            known => {
                self.epochs.insert(relay.to_owned(), epoch);
                Admit::Newer {
                    link: Self::link(relay, epoch),
                    replaced: known.map(|old| Self::link(relay, old)),
                }
            }
        }
    }

    /// Every relay's newest instance, for the adapter to store.
    pub fn stored(&self) -> impl Iterator<Item = (&str, u64)> {
        self.epochs.iter().map(|(r, e)| (r.as_str(), *e))
    }
}
