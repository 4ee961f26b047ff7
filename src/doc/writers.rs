//! Which user writes for each Yjs client id of the document: the first user whose update
//! brought a block of that client, kept in storage beside the log so it outlives a reload.
//!
//! A Yjs client id is a claim, not an identity: the bytes of an update name it. Without the
//! binding a member could write under another editor's id, at the clocks that editor will use
//! next; the editor's own blocks then arrive as already known, are trimmed to nothing and never
//! reach anyone, while its client is told they were saved (the two documents then differ for
//! good: their state vectors are equal, so no sync repairs them). Bound, the second writer is
//! refused `not_your_client`, as awareness already refused another user's live state.
//!
//! An editor shows its client in its awareness before its first edit; from then on the client is
//! its user's too ([`Writers::bind_shown`]), stored like a writer's, so that a member who read the
//! client id from a cursor cannot write for it once the cursor is gone (30 s after its socket,
//! or at once after a reload) and take the editor's next edits from it. Each user keeps at most
//! [`SHOWN_PER_USER`] such clients that have not written, the newest, and a socket binds one:
//! a member who shows a new client on every connect only moves her own rows, at that pace.

use std::collections::{BTreeMap, HashMap};

/// The writer the room's own edits and the operator's backend updates are bound to. No token's
/// `sub` is empty, so no member is it.
pub const ROOM_WRITER: &str = "";

/// Clients a user has shown in awareness but not written for, kept bound to them: the newest
/// this many (a user's tabs, each a client per load).
pub const SHOWN_PER_USER: usize = 16;

/// Clients shown and not written for, of all users: past it a shown client is not bound (its
/// awareness state still holds it while it lives). As many as a document may hold clients.
pub const MAX_SHOWN: usize = super::MAX_BLOCKS;

/// Each Yjs client id that has written, and its user (interned: a document may hold up to
/// [`super::MAX_BLOCKS`] clients, each of one of a few users).
#[derive(Debug, Default)]
pub struct Writers {
    users: Vec<String>,
    numbers: HashMap<String, u32>,
    clients: BTreeMap<u64, u32>,
    /// Clients bound from their user's awareness that had not written when bound, with their
    /// user's number, oldest first (after a reload, in the order of their ids). A plain list:
    /// a socket binds at most one, so it changes at the pace of connects.
    shown: Vec<(u32, u64)>,
}

impl Writers {
    /// The user client `client` writes for, if it has written.
    pub fn owner(&self, client: u64) -> Option<&str> {
        self.clients.get(&client).map(|&n| self.users[n as usize].as_str())
    }

    /// Binds `client` to `user` unless it is bound already; whether it was new.
    pub fn bind(&mut self, client: u64, user: &str) -> bool {
        if self.clients.contains_key(&client) {
            return false;
        }
        let number = match self.numbers.get(user) {
            Some(&n) => n,
            None => {
                let n = self.users.len() as u32; // at most one user a client
                self.users.push(user.to_owned());
                self.numbers.insert(user.to_owned(), n);
                n
            }
        };
        self.clients.insert(client, number);
        true
    }

    /// Binds `client`, which `user` shows in their awareness and which has not written, unless
    /// it is bound already or [`MAX_SHOWN`] such clients are. Returns whether it was bound, and
    /// the clients whose bindings made way: past [`SHOWN_PER_USER`], the user's oldest shown
    /// client that has not written since (`written` says which have: theirs stay bound).
    pub fn bind_shown(
        &mut self,
        client: u64,
        user: &str,
        written: impl Fn(u64) -> bool,
    ) -> (bool, Vec<u64>) {
        if self.clients.contains_key(&client) || self.shown.len() >= MAX_SHOWN {
            return (false, Vec::new());
        }
        self.bind(client, user);
        let number = self.numbers[user];
        self.shown.push((number, client));
        let mut unbound = Vec::new();
        if self.shown.iter().filter(|&&(n, _)| n == number).count() > SHOWN_PER_USER {
            let oldest = self.shown.iter().position(|&(n, _)| n == number);
            if let Some((_, old)) = oldest.map(|i| self.shown.remove(i)) {
                if !written(old) {
                    self.clients.remove(&old);
                    unbound.push(old);
                }
            }
        }
        (true, unbound)
    }

    /// Notes, after a reload, that `client` (bound to a user) has not written: it was bound
    /// from that user's awareness.
    pub fn restore_shown(&mut self, client: u64) {
        let Some(&number) = self.clients.get(&client) else { return };
        if self.users[number as usize] == ROOM_WRITER {
            return;
        }
        self.shown.push((number, client));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_writer_keeps_a_client() {
        let mut w = Writers::default();
        assert!(w.bind(7, "ann"));
        assert!(!w.bind(7, "mallory"));
        assert!(w.bind(8, "ann"));
        assert!(w.bind(9, ROOM_WRITER));
        assert_eq!(
            (w.owner(7), w.owner(8), w.owner(9), w.owner(10)),
            (Some("ann"), Some("ann"), Some(""), None)
        );
        assert_eq!((w.clients.len(), w.users.len()), (3, 2), "each user kept once");
    }

    #[test]
    fn a_user_keeps_the_newest_clients_shown_and_every_one_that_wrote() {
        let mut w = Writers::default();
        let wrote = |c: u64| c.is_multiple_of(2); // the even ones wrote after they were shown
        for c in 1..=SHOWN_PER_USER as u64 {
            assert_eq!(w.bind_shown(c, "ann", wrote), (true, vec![]));
        }
        assert_eq!(w.bind_shown(3, "mallory", wrote), (false, vec![]), "bound already");
        // The next makes way for the oldest: 1, which has not written, is let go.
        assert_eq!(w.bind_shown(100, "ann", wrote), (true, vec![1]));
        // Then 2, which wrote: it stays bound, and nothing is let go.
        assert_eq!(w.bind_shown(101, "ann", wrote), (true, vec![]));
        assert_eq!((w.owner(1), w.owner(2), w.owner(101)), (None, Some("ann"), Some("ann")));
        // Another user's clients do not make way for hers.
        assert_eq!(w.bind_shown(200, "bob", wrote), (true, vec![]));
        assert_eq!(w.owner(3), Some("ann"));
    }
}
