//! [`Recalls`]: the home's side of asking its relays for their sessions back, after it was
//! rebuilt without them (the relays hold their sessions' records; the home stores none).

use std::collections::{HashMap, HashSet};

use crate::room::Peer;

/// The links asked for their sessions ([`DownOp::Recall`](crate::protocol::link::DownOp)) that
/// have not answered yet, each with the connections it spoke for meanwhile that the room did
/// not know. Those are closed (to resume), and the link's answer, sent before it heard of the
/// close, must not bring them back.
///
/// ```
/// use homeroom::relay::Recalls;
///
/// let mut recalls = Recalls::default();
/// recalls.start("oc-0#3");
/// // A frame of a session the room does not know yet: close it, once.
/// assert_eq!(recalls.unknown("oc-0#3", "oc-0.c9"), Some(true));
/// assert_eq!(recalls.unknown("oc-0#3", "oc-0.c9"), Some(false));
/// // A link that owes no answer: its word for a stranger is dropped.
/// assert_eq!(recalls.unknown("eu-0#1", "eu-0.c1"), None);
/// // The answer comes once; the closed connection is not in it any more.
/// assert!(recalls.answer("oc-0#3", "oc-0.", vec![]).is_some());
/// assert!(recalls.answer("oc-0#3", "oc-0.", vec![]).is_none());
/// ```
#[derive(Debug, Default)]
pub struct Recalls {
    pending: HashMap<String, HashSet<String>>,
}

impl Recalls {
    /// `link` is asked for its sessions.
    pub fn start(&mut self, link: &str) {
        self.pending.insert(link.to_owned(), HashSet::new());
    }

    /// `conn` spoke over `link` and the room does not know it: `Some(true)` the first time
    /// while `link` owes its answer (close it), `Some(false)` again, `None` when `link` owes
    /// nothing (a relay's word for a connection it does not hold is dropped).
    pub fn unknown(&mut self, link: &str, conn: &str) -> Option<bool> {
        Some(self.pending.get_mut(link)?.insert(conn.to_owned()))
    }

    /// `link`'s answer: the records it may give back (each parsed, of this link, named for
    /// its relay by `prefix`, and not closed meanwhile). `None` when `link` owed no answer.
    pub fn answer(&mut self, link: &str, prefix: &str, peers: Vec<String>) -> Option<Vec<Peer>> {
        let refused = self.pending.remove(link)?;
        let peers = peers
            .iter()
            .filter_map(|text| serde_json::from_str::<Peer>(text).ok())
            .filter(|p| p.conn.starts_with(prefix) && !refused.contains(&p.conn))
            .filter(|p| p.link.as_deref() == Some(link))
            .collect();
        Some(peers)
    }

    /// Whether `link` owes its answer: its sessions are unknown to the room, but its relay
    /// still gets every frame for all of them.
    pub fn owes(&self, link: &str) -> bool {
        self.pending.contains_key(link)
    }

    /// Forgets a link that closed.
    pub fn forget(&mut self, link: &str) {
        self.pending.remove(link);
    }
}
