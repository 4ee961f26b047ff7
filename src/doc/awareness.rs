//! Who is in a document and where their cursor is: the y-protocols awareness states, kept in
//! memory only (never stored), each held by the socket that last set it. Like homeroom's
//! presence it is keyed by the tab (the Yjs client id), the newest socket of the same user
//! wins, and a state goes when its socket closes or stops renewing it.

use std::collections::BTreeMap;

use super::error::DocError;
use super::wire::Entry;
use super::ConnId;

/// One Yjs client's state.
#[derive(Debug, Clone)]
struct State {
    clock: u32,
    /// JSON text; `None` once removed (the clock is kept until `expires`, so an older update
    /// cannot bring the state back).
    json: Option<String>,
    /// The socket that last set it, and its user (whether it had no token).
    owner: ConnId,
    user: String,
    anonymous: bool,
    /// When it goes unless renewed (ms).
    expires: u64,
}

/// The bounds on awareness (see `DocConfig`).
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Largest state (JSON bytes).
    pub max_state: usize,
    /// Most live states one socket holds.
    pub per_socket: usize,
    /// A state not renewed for this long goes (ms); y-protocols' own `outdatedTimeout`.
    pub timeout: u64,
}

/// Who sends awareness entries, and which Yjs clients they may set states for.
pub struct Claimant<'a> {
    /// Their user.
    pub user: &'a str,
    /// Admitted without a token: the user names their socket only.
    pub anonymous: bool,
    /// Whether they may hold `client`'s state at all (no other user writes the document for
    /// it).
    pub may_claim: &'a dyn Fn(u64) -> bool,
}

/// Every awareness state of the room.
#[derive(Debug, Default)]
pub struct Awareness {
    /// Boxed: see `DocRoom::sockets`.
    states: BTreeMap<u64, Box<State>>,
}

impl Awareness {
    /// Applies `entries` from socket `conn` of `user` at `now`; returns the entries that
    /// changed something, for everyone. An entry no newer than what the room holds changes
    /// nothing (stock clients echo every state they receive) but renews the socket's own.
    /// All or nothing for the rest: a newer entry for a state another user's socket holds or
    /// held last (its removal keeps who it was until it is forgotten, so a tab that lost its
    /// socket finds its state its own again), for a client another user writes the document
    /// for, or one too large, refuses the message.
    pub fn apply(
        &mut self,
        conn: ConnId,
        who: Claimant<'_>,
        entries: Vec<Entry>,
        now: u64,
        bounds: Bounds,
    ) -> Result<Vec<Entry>, DocError> {
        let user = who.user;
        let (fresh, stale): (Vec<Entry>, Vec<Entry>) =
            entries.into_iter().partition(|e| self.is_newer(e));
        let mut adds = 0;
        for e in &fresh {
            if e.json.len() > bounds.max_state {
                return Err(DocError::AwarenessTooLarge);
            }
            if !(who.may_claim)(e.client) {
                return Err(DocError::NotYourClient);
            }
            match self.states.get(&e.client) {
                // A removed state of a user without a token is anyone's: that user was only a
                // socket, and its tab reconnects as another.
                Some(s) if s.user != user && (s.json.is_some() || !s.anonymous) => {
                    return Err(DocError::NotYourClient)
                }
                Some(s) if s.json.is_some() && s.owner == conn => {}
                _ if !e.is_removal() => adds += 1,
                _ => {}
            }
        }
        if self.held_by(conn) + adds > bounds.per_socket {
            return Err(DocError::AwarenessTooLarge);
        }
        for e in stale {
            // A renewal at the same clock still says the tab is alive.
            if let Some(s) = self.states.get_mut(&e.client) {
                if s.owner == conn && s.json.is_some() && s.clock == e.clock {
                    s.expires = now.saturating_add(bounds.timeout);
                }
            }
        }
        let expires = now.saturating_add(bounds.timeout);
        for e in &fresh {
            let json = (!e.is_removal()).then(|| e.json.clone());
            let (user, anonymous) = (user.to_owned(), who.anonymous);
            let state = State { clock: e.clock, json, owner: conn, user, anonymous, expires };
            self.states.insert(e.client, Box::new(state));
        }
        Ok(fresh)
    }

    /// Whether `e` would change the room's state for its client (y-protocols' rule: a higher
    /// clock, or a removal at the same clock).
    fn is_newer(&self, e: &Entry) -> bool {
        match self.states.get(&e.client) {
            None => !e.is_removal(),
            Some(s) => {
                s.clock < e.clock || (s.clock == e.clock && e.is_removal() && s.json.is_some())
            }
        }
    }

    /// Removes every state socket `conn` holds (it closed): the removals, for the others.
    pub fn drop_socket(&mut self, conn: ConnId, now: u64, timeout: u64) -> Vec<Entry> {
        self.remove_where(|s| s.owner == conn, now, timeout)
    }

    /// Removes the states not renewed in time, and forgets removed ones whose clocks no
    /// longer matter; the removals, for the others.
    pub fn expire(&mut self, now: u64, timeout: u64) -> Vec<Entry> {
        self.states.retain(|_, s| s.json.is_some() || s.expires > now);
        self.remove_where(|s| s.expires <= now, now, timeout)
    }

    fn remove_where(
        &mut self,
        gone: impl Fn(&State) -> bool,
        now: u64,
        timeout: u64,
    ) -> Vec<Entry> {
        let mut removed = Vec::new();
        for (&client, s) in self.states.iter_mut().filter(|(_, s)| s.json.is_some() && gone(s)) {
            s.clock = s.clock.saturating_add(1);
            s.json = None;
            s.expires = now.saturating_add(timeout);
            removed.push(Entry { client, clock: s.clock, json: "null".into() });
        }
        removed
    }

    /// The user of a token who holds `client`'s state, or held it last (until it is forgotten).
    pub fn named_holder(&self, client: u64) -> Option<&str> {
        self.states.get(&client).filter(|s| !s.anonymous).map(|s| s.user.as_str())
    }

    /// Whether a state of `client` (live, or removed and not yet forgotten) was set by another
    /// socket than `conn`.
    pub fn set_by_another(&self, client: u64, conn: ConnId) -> bool {
        self.states.get(&client).is_some_and(|s| s.owner != conn)
    }

    /// The live states socket `conn` holds (what its attachment keeps across hibernation).
    pub fn of_socket(&self, conn: ConnId) -> Vec<Entry> {
        self.live().filter(|(_, s)| s.owner == conn).map(|(c, s)| entry(*c, s)).collect()
    }

    /// Every live state, for a socket that joins or asks.
    pub fn all(&self) -> Vec<Entry> {
        self.live().map(|(c, s)| entry(*c, s)).collect()
    }

    /// When the next state goes unless renewed (ms).
    pub fn next_expiry(&self) -> Option<u64> {
        self.states.values().map(|s| s.expires).min()
    }

    fn held_by(&self, conn: ConnId) -> usize {
        self.live().filter(|(_, s)| s.owner == conn).count()
    }

    fn live(&self) -> impl Iterator<Item = (&u64, &State)> {
        self.states.iter().map(|(c, s)| (c, &**s)).filter(|(_, s)| s.json.is_some())
    }
}

fn entry(client: u64, s: &State) -> Entry {
    Entry { client, clock: s.clock, json: s.json.clone().unwrap_or_else(|| "null".into()) }
}
