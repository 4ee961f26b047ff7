//! Which user writes for each Yjs client id of the document: the first user whose update
//! brought a block of that client, kept in storage beside the log so it outlives a reload.
//!
//! A Yjs client id is a claim, not an identity: the bytes of an update name it. Without the
//! binding a member could write under another editor's id, at the clocks that editor will use
//! next; the editor's own blocks then arrive as already known, are trimmed to nothing and never
//! reach anyone, while its client is told they were saved (the two documents then differ for
//! good: their state vectors are equal, so no sync repairs them). Bound, the second writer is
//! refused `not_your_client`, as awareness already refused another user's live state.

use std::collections::{BTreeMap, HashMap};

/// The writer the room's own edits and the operator's backend updates are bound to. No token's
/// `sub` is empty, so no member is it.
pub const ROOM_WRITER: &str = "";

/// Each Yjs client id that has written, and its user (interned: a document may hold up to
/// [`super::MAX_BLOCKS`] clients, each of one of a few users).
#[derive(Debug, Default)]
pub struct Writers {
    users: Vec<String>,
    numbers: HashMap<String, u32>,
    clients: BTreeMap<u64, u32>,
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
}
