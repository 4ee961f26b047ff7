//! [`Recalls`]: the home's side of asking its relays for their sessions back, after it was
//! rebuilt without them (the relays hold their sessions' records; the home stores none), and
//! the opens it holds until they have.

use std::collections::{HashMap, HashSet};

use crate::protocol::link::{Back, Open};
use crate::room::Peer;

/// The links asked for their sessions ([`DownOp::Recall`](crate::protocol::link::DownOp)) that
/// have not answered yet: each with its recall's id (only the answer to this load's own recall
/// is taken: one to an earlier load's may name a client the relay has closed since) and the
/// connections it spoke for meanwhile that the room did not know. Those are closed (to
/// resume), and the answer, sent before the relay heard of the close, must not bring them back.
///
/// A frame of a session the room does not know yet is first kept for the answer ([`park`]),
/// up to [`PARKED_BYTES`] per link, and taken once the answer has given its session back: a
/// room that wakes from hibernation because a relayed member wrote does not close her to
/// resume. Past the bound, or once one of its frames was refused, the session is closed.
///
/// [`park`]: Recalls::park
///
/// ```
/// use homeroom::relay::Recalls;
///
/// let mut recalls = Recalls::default();
/// recalls.start("oc-0#3", 41);
/// // A frame of a session the room does not know yet: close it, once.
/// assert_eq!(recalls.unknown("oc-0#3", "oc-0.c9"), Some(true));
/// assert_eq!(recalls.unknown("oc-0#3", "oc-0.c9"), Some(false));
/// // A link that owes no answer: its word for a stranger is dropped.
/// assert_eq!(recalls.unknown("eu-0#1", "eu-0.c1"), None);
/// // A frame of another stranger waits for the answer, which gives it back in order.
/// assert!(recalls.park("oc-0#3", "oc-0.c2", "{\"type\":\"publish\"}".into(), 1_000));
/// assert!(!recalls.park("oc-0#3", "oc-0.c9", "{}".into(), 1_000)); // closed already
/// assert_eq!(recalls.holding_since(), Some(1_000));
/// // A frame that waited too long for its link's answer: its writer resumes instead.
/// recalls.start("eu-0#1", 7);
/// assert!(recalls.park("eu-0#1", "eu-0.c1", "{}".into(), 0));
/// assert!(recalls.overdue(9_999, 10_000).is_empty());
/// assert_eq!(recalls.overdue(10_000, 10_000), vec![("eu-0#1".to_owned(), "eu-0.c1".to_owned())]);
/// assert_eq!(recalls.holding_since(), Some(1_000));
/// // An answer to another recall is not this one's; this one's is taken once.
/// assert!(recalls.answer("oc-0#3", 40, "oc-0.", vec![], vec![]).is_none());
/// let answer = recalls.answer("oc-0#3", 41, "oc-0.", vec![], vec![]).unwrap();
/// assert_eq!(answer.parked, vec![("oc-0.c2".to_owned(), "{\"type\":\"publish\"}".to_owned())]);
/// assert!(recalls.answer("oc-0#3", 41, "oc-0.", vec![], vec![]).is_none());
/// // Past a link's allowance the connection holding the most of it makes way for a newcomer.
/// recalls.start("oc-0#4", 42);
/// let big = "x".repeat(homeroom::relay::PARKED_BYTES - 10);
/// assert!(recalls.park("oc-0#4", "oc-0.c5", big, 2_000));
/// assert!(recalls.park("oc-0#4", "oc-0.c6", "{\"type\":\"publish\"}".into(), 2_000));
/// assert_eq!(recalls.evicted(), vec![("oc-0#4".to_owned(), "oc-0.c5".to_owned())]);
/// ```
#[derive(Debug, Default)]
pub struct Recalls {
    pending: HashMap<String, Pending>,
    /// Opens that came while a link owed its answer, and what their clients said after, in
    /// the order they came ([`Recalls::hold`]).
    /// Each with when it was held (ms).
    held: Vec<(u64, Held)>,
    /// The connections whose opens are held.
    held_conns: HashSet<String>,
    held_bytes: usize,
    /// Connections that made way for another's frames or open ([`Recalls::park`],
    /// [`Recalls::hold`]), each with its link: the caller closes them to resume
    /// ([`Recalls::evicted`]).
    evicted: Vec<(String, String)>,
}

/// An open, or a frame of a connection whose open waits, held until every link has answered
/// ([`Recalls::hold`], [`Recalls::release`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// A relay's client opened over `link`.
    Open { link: String, open: Open },
    /// `conn`, whose open is held, spoke over `link`.
    Text { link: String, conn: String, text: String },
}

/// The most bytes of opens and their frames held for the links' answers ([`Recalls::hold`]):
/// a storm's opens of a few seconds; past it the connection holding the most of it is closed to
/// resume (1012) if it holds more than the newcomer would, else the newcomer is, as is one held
/// longer than the caller's wait.
pub const HELD_BYTES: usize = 1024 * 1024;

/// The most bytes of frames kept for one link's answer ([`Recalls::park`]): about a second of
/// a busy relay's writes; a relay that says more before answering has the rest of its
/// strangers closed to resume, as before there was parking.
pub const PARKED_BYTES: usize = 256 * 1024;

/// One link's recall: its id, the connections closed meanwhile, the frames kept for the answer.
#[derive(Debug, Default)]
struct Pending {
    id: u64,
    refused: HashSet<String>,
    parked: Vec<(String, String)>,
    parked_bytes: usize,
    /// When the first of them was kept (ms).
    parked_at: u64,
}

/// What a link's answer gives back: its sessions' records, each with the `seq` it has had
/// nothing after, and the opens of the clients the home had not addressed, each one the link
/// may speak for.
#[derive(Debug, Default)]
pub struct Answer {
    /// Each session's record, with the `seq` it has had nothing after (it catches up from
    /// there: [`Input::Recalled`](crate::room::Input::Recalled)).
    pub peers: Vec<(Peer, u64)>,
    /// The opens of the clients the home had not addressed, to decide again.
    pub opens: Vec<Open>,
    /// The frames kept for the answer, in the order they came (connection, text): each is the
    /// engine's once the peers and opens are, if its connection is back.
    pub parked: Vec<(String, String)>,
}

impl Recalls {
    /// `link` is asked for its sessions, as recall `id`.
    pub fn start(&mut self, link: &str, id: u64) {
        self.pending.insert(link.to_owned(), Pending { id, ..Pending::default() });
    }

    /// `conn`, which the room does not know, sent `text` over `link` at `now` (ms) while
    /// `link` owes its answer: kept for the answer (true), unless `conn` was closed already or
    /// the link's frames kept would pass [`PARKED_BYTES`] (false: close it with
    /// [`Recalls::unknown`]). Past the bound, the connection that holds the most of it makes
    /// way if that is another one (its frames dropped, its id in [`Recalls::evicted`], to be
    /// closed the same way): one member's frames fill the link's allowance no longer at the
    /// cost of a neighbour's.
    pub fn park(&mut self, link: &str, conn: &str, text: String, now: u64) -> bool {
        let Recalls { pending, evicted, .. } = self;
        let Some(p) = pending.get_mut(link) else {
            return false;
        };
        if p.refused.contains(conn) {
            return false;
        }
        while p.parked_bytes + text.len() > PARKED_BYTES {
            let kept = p.parked.iter().map(|(c, t)| (c.as_str(), t.len()));
            let Some((top, most)) = makes_way(kept, conn, text.len()) else {
                return false;
            };
            let top = top.to_owned();
            p.parked.retain(|(c, _)| *c != top);
            p.parked_bytes -= most;
            evicted.push((link.to_owned(), top));
        }
        if p.parked.is_empty() {
            p.parked_at = now;
        }
        p.parked_bytes += text.len();
        p.parked.push((conn.to_owned(), text));
        true
    }

    /// The connections that made way for another's since the last call, each with its link:
    /// frames kept for an answer ([`Recalls::park`]: close each with [`Recalls::unknown`]), or
    /// a held open and its frames ([`Recalls::hold`], [`Recalls::hold_text`]: close each with
    /// [`Recalls::refuse`]).
    pub fn evicted(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.evicted)
    }

    /// When the earliest frame still kept for an answer was kept (ms), if any: the home keeps
    /// a timer for it, so that the runtime does not evict it with frames only its memory holds.
    pub fn holding_since(&self) -> Option<u64> {
        let parked = self.pending.values().filter(|p| !p.parked.is_empty()).map(|p| p.parked_at);
        let held = self.held.first().map(|(at, _)| *at);
        parked.chain(held).min()
    }

    /// The connections whose frames were kept for an answer since `wait` ms before `now` or
    /// longer, per link, their frames dropped: the caller closes each ([`Recalls::unknown`])
    /// to resume, as if the answer had not come at all.
    pub fn overdue(&mut self, now: u64, wait: u64) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (link, p) in &mut self.pending {
            if !p.parked.is_empty() && p.parked_at + wait <= now {
                let mut conns: Vec<String> = p.parked.drain(..).map(|(c, _)| c).collect();
                conns.dedup();
                p.parked_bytes = 0;
                out.extend(conns.into_iter().map(|c| (link.clone(), c)));
            }
        }
        out
    }

    /// `conn` spoke over `link` and the room does not know it: `Some(true)` the first time
    /// while `link` owes its answer (close it), `Some(false)` again, `None` when `link` owes
    /// nothing (a relay's word for a connection it does not hold is dropped).
    pub fn unknown(&mut self, link: &str, conn: &str) -> Option<bool> {
        Some(self.pending.get_mut(link)?.refused.insert(conn.to_owned()))
    }

    /// `link`'s answer to recall `id`: what it may give back (records parsed, of this link,
    /// named for its relay by `prefix`, and not closed meanwhile). `None` when `link` owes no
    /// answer to `id`.
    pub fn answer(
        &mut self,
        link: &str,
        id: u64,
        prefix: &str,
        peers: Vec<Back>,
        opens: Vec<Open>,
    ) -> Option<Answer> {
        if self.pending.get(link).is_none_or(|p| p.id != id) {
            return None;
        }
        let Pending { refused, parked, .. } = self.pending.remove(link)?;
        let may = |conn: &str| conn.starts_with(prefix) && !refused.contains(conn);
        let peers = peers
            .iter()
            .filter_map(|b| Some((serde_json::from_str::<Peer>(&b.peer).ok()?, b.from)))
            .filter(|(p, _)| may(&p.conn) && p.link.as_deref() == Some(link))
            .collect();
        let opens = opens.into_iter().filter(|o| may(&o.conn)).collect();
        let parked = parked.into_iter().filter(|(conn, _)| !refused.contains(conn)).collect();
        Some(Answer { peers, opens, parked })
    }

    /// Whether `link` owes its answer: its sessions are unknown to the room, but its relay
    /// still gets every frame for all of them.
    pub fn owes(&self, link: &str) -> bool {
        self.pending.contains_key(link)
    }

    /// Forgets a link that closed, and what it held.
    pub fn forget(&mut self, link: &str) {
        self.pending.remove(link);
        let gone: HashSet<String> = self
            .held
            .iter()
            .filter_map(|(_, h)| match h {
                Held::Open { link: l, open } if l == link => Some(open.conn.clone()),
                _ => None,
            })
            .collect();
        self.drop_all(gone);
    }

    /// Whether some link still owes its answer: until none does, the room does not know all
    /// its sessions, and a new open is held ([`Recalls::hold`]).
    pub fn recalling(&self) -> bool {
        !self.pending.is_empty()
    }

    /// `open` came over `link` at `now` (ms) while some link owes its answer
    /// ([`Recalls::recalling`]; decide it at once otherwise, unless [`Recalls::held`]): held
    /// (true) until every link has answered ([`Recalls::release`]), since until then the room
    /// cannot tell whose session it names, nor how many connections its user holds. True for
    /// an open held already (a relay's answer names the opens the home has not answered): it
    /// stays where it came first, before its client's frames. Past [`HELD_BYTES`] the
    /// connection holding the most makes way if it holds more than this open would (its id in
    /// [`Recalls::evicted`]); false when it does not, or nothing is owed: the caller closes it
    /// to resume ([`Recalls::refuse`]).
    ///
    /// ```
    /// use homeroom::protocol::link::Open;
    /// use homeroom::relay::{Held, Recalls};
    ///
    /// let open = |conn: &str| Open {
    ///     conn: conn.into(), session: "s-1".into(), user: "mallory".into(), region: "EU".into(),
    ///     since: None, epoch: None, rand: 1, secret: 2, expires: None, info: None, tail: None,
    /// };
    /// let mut recalls = Recalls::default();
    /// assert!(!recalls.recalling()); // nothing owed: an open is decided at once
    /// recalls.start("oc-0#3", 41);
    /// assert!(recalls.recalling());
    /// assert!(recalls.hold("eu-0#1", open("eu-0.c1"), 5));
    /// assert!(recalls.held("eu-0.c1"));
    /// assert!(recalls.hold_text("eu-0#1", "eu-0.c1", "{}".into()));
    /// assert!(recalls.release().is_empty()); // oc-0 has not answered
    /// recalls.answer("oc-0#3", 41, "oc-0.", vec![], vec![]).unwrap();
    /// let released = recalls.release();
    /// assert!(matches!(&released[0], Held::Open { open, .. } if open.conn == "eu-0.c1"));
    /// assert!(matches!(&released[1], Held::Text { conn, .. } if conn == "eu-0.c1"));
    /// // Past HELD_BYTES the connection holding the most makes way for a newcomer's open.
    /// recalls.start("oc-0#4", 42);
    /// assert!(recalls.hold("eu-0#1", open("eu-0.c2"), 6));
    /// let big = "x".repeat(homeroom::relay::HELD_BYTES - 400);
    /// assert!(recalls.hold_text("eu-0#1", "eu-0.c2", big));
    /// assert!(recalls.hold("oc-0#4", open("oc-0.c7"), 6));
    /// assert_eq!(recalls.evicted(), vec![("eu-0#1".to_owned(), "eu-0.c2".to_owned())]);
    /// assert!(!recalls.held("eu-0.c2") && recalls.held("oc-0.c7"));
    /// ```
    pub fn hold(&mut self, link: &str, open: Open, now: u64) -> bool {
        if self.held(&open.conn) {
            return true;
        }
        if !self.recalling() {
            return false;
        }
        let size = held_size(&open);
        if !self.make_way(&open.conn, size) {
            return false;
        }
        self.held_bytes += size;
        self.held_conns.insert(open.conn.clone());
        self.held.push((now, Held::Open { link: link.to_owned(), open }));
        true
    }

    /// `conn`'s open over `link` is not taken (past a bound, or it waited too long): whether
    /// to close its client to resume (true but once). A link that still owes its answer must
    /// not give it back in the answer, which it may have made before it heard of the close.
    pub fn refuse(&mut self, link: &str, conn: &str) -> bool {
        self.unknown(link, conn) != Some(false)
    }

    /// Whether `conn`'s open is held.
    pub fn held(&self, conn: &str) -> bool {
        self.held_conns.contains(conn)
    }

    /// `conn`, whose open is held, spoke over `link`: the frame waits behind its open (true).
    /// False when its open is not held, or when the frame would pass [`HELD_BYTES`] and no
    /// connection holding more makes way ([`Recalls::evicted`]): then its open and frames are
    /// dropped, and the caller closes it to resume.
    pub fn hold_text(&mut self, link: &str, conn: &str, text: String) -> bool {
        if !self.held(conn) {
            return false;
        }
        if !self.make_way(conn, text.len()) {
            self.drop_held(conn);
            return false;
        }
        self.held_bytes += text.len();
        let at = self.held.last().map_or(0, |(at, _)| *at);
        let (link, conn) = (link.to_owned(), conn.to_owned());
        self.held.push((at, Held::Text { link, conn, text }));
        true
    }

    /// Room for `size` more bytes of `conn`'s under [`HELD_BYTES`]: while there is not, the
    /// connection holding the most of it gives way (its open and frames dropped, its id in
    /// [`Recalls::evicted`]: the caller closes it to resume) if that is another one and it
    /// holds more than `conn` would. False when `conn` is the one past the bound.
    fn make_way(&mut self, conn: &str, size: usize) -> bool {
        while self.held_bytes + size > HELD_BYTES {
            let held = self.held.iter().map(|(_, h)| {
                let (of, _, n) = held_parts(h);
                (of, n)
            });
            let Some((top, _)) = makes_way(held, conn, size) else {
                return false;
            };
            let on = |h: &Held| held_parts(h).0 == top;
            let link = self.held.iter().find(|(_, h)| on(h)).map(|(_, h)| held_parts(h).1);
            let (top, link) = (top.to_owned(), link.unwrap_or_default().to_owned());
            self.drop_all(HashSet::from([top.clone()]));
            self.evicted.push((link, top));
        }
        true
    }

    /// Drops `conn`'s held open and frames (it closed before its open was decided, or it is
    /// closed to resume). Whether it had any.
    pub fn drop_held(&mut self, conn: &str) -> bool {
        if !self.held(conn) {
            return false;
        }
        self.drop_all(HashSet::from([conn.to_owned()]));
        true
    }

    /// Drops the held opens and frames of every connection in `conns`, in one pass over what
    /// is held (a link that closes may take thousands of a storm's opens with it).
    fn drop_all(&mut self, conns: HashSet<String>) {
        if conns.is_empty() {
            return;
        }
        let mut freed = 0;
        self.held.retain(|(_, h)| {
            let (of, _, size) = held_parts(h);
            let keep = !conns.contains(of);
            if !keep {
                freed += size;
            }
            keep
        });
        self.held_bytes -= freed;
        self.held_conns.retain(|c| !conns.contains(c));
    }

    /// Everything held, in the order it came, once no link owes its answer (nothing before).
    pub fn release(&mut self) -> Vec<Held> {
        if self.held.is_empty() || self.recalling() {
            return Vec::new(); // after every link message: nothing to clear
        }
        self.held_conns.clear();
        self.held_bytes = 0;
        std::mem::take(&mut self.held).into_iter().map(|(_, h)| h).collect()
    }

    /// The held opens that waited `wait` ms or longer at `now`, as (link, conn), their frames
    /// dropped: the caller closes each to resume. A relay that does not answer within its
    /// lease loses its link; until then, nobody's open is decided without it.
    pub fn overdue_held(&mut self, now: u64, wait: u64) -> Vec<(String, String)> {
        let out: Vec<(String, String)> = self
            .held
            .iter()
            .take_while(|(at, _)| at + wait <= now)
            .filter_map(|(_, h)| match h {
                Held::Open { link, open } => Some((link.clone(), open.conn.clone())),
                Held::Text { .. } => None,
            })
            .collect();
        self.drop_all(out.iter().map(|(_, conn)| conn.clone()).collect());
        out
    }
}

/// Of the bytes kept per connection (`kept`: each connection's pieces), the connection that
/// makes way for `size` more of `conn`'s, with what it holds: the one holding the most (ties by
/// name: a hash map's order is not the simulator's), if it is another one holding more than
/// `conn` would. The bounds of what the home keeps for its relays' answers ([`PARKED_BYTES`],
/// [`HELD_BYTES`]) are thus not first come.
fn makes_way<'a>(
    kept: impl Iterator<Item = (&'a str, usize)>,
    conn: &str,
    size: usize,
) -> Option<(&'a str, usize)> {
    let mut by: HashMap<&str, usize> = HashMap::new();
    for (c, n) in kept {
        *by.entry(c).or_default() += n;
    }
    let mine = size + by.get(conn).copied().unwrap_or(0);
    let (top, most) = by.into_iter().max_by_key(|&(c, n)| (n, c))?;
    (top != conn && most > mine).then_some((top, most))
}

/// A held piece's connection, link and size.
fn held_parts(h: &Held) -> (&str, &str, usize) {
    match h {
        Held::Open { link, open } => (&open.conn, link, held_size(open)),
        Held::Text { link, conn, text } => (conn, link, text.len()),
    }
}

/// What a held open counts against [`HELD_BYTES`]: its record and the token's `info`.
fn held_size(open: &Open) -> usize {
    256 + open.info.as_ref().map_or(0, String::len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(conn: &str) -> Open {
        Open {
            conn: conn.into(),
            session: format!("s-{conn}"),
            user: "u".into(),
            region: "EU".into(),
            since: None,
            epoch: None,
            rand: 1,
            secret: 2,
            expires: None,
            info: None,
            tail: None,
        }
    }

    #[test]
    fn an_open_its_relays_answer_names_again_stays_before_its_frames() {
        let mut r = Recalls::default();
        r.start("eu-0#1", 7);
        assert!(r.hold("eu-0#1", open("eu-0.c1"), 0));
        assert!(r.hold_text("eu-0#1", "eu-0.c1", "t1".into()));
        // The last answer names the open again (the home had not answered it).
        let back = r.answer("eu-0#1", 7, "eu-0.", vec![], vec![open("eu-0.c1")]).unwrap();
        assert!(!r.recalling());
        for o in back.opens {
            assert!(r.hold("eu-0#1", o, 1), "held already: it stays where it came first");
        }
        let released = r.release();
        assert_eq!(released.len(), 2, "{released:?}");
        assert!(matches!(&released[0], Held::Open { open, .. } if open.conn == "eu-0.c1"));
        assert!(matches!(&released[1], Held::Text { text, .. } if text == "t1"));
    }

    #[test]
    fn an_open_closed_to_resume_is_not_given_back_by_its_links_answer() {
        let mut r = Recalls::default();
        r.start("eu-0#1", 7);
        assert!(r.hold("eu-0#1", open("eu-0.c1"), 0));
        assert_eq!(r.overdue_held(10_000, 10_000), [("eu-0#1".to_owned(), "eu-0.c1".to_owned())]);
        assert!(r.refuse("eu-0#1", "eu-0.c1"), "closed once");
        assert!(!r.refuse("eu-0#1", "eu-0.c1"), "not twice");
        // The relay made its answer before it heard of the close.
        let back = r.answer("eu-0#1", 7, "eu-0.", vec![], vec![open("eu-0.c1")]).unwrap();
        assert!(back.opens.is_empty());
    }

    #[test]
    fn only_what_waited_its_time_is_overdue() {
        let mut r = Recalls::default();
        r.start("oc-0#1", 7);
        assert!(r.hold("eu-0#1", open("eu-0.c1"), 0));
        assert!(r.hold("eu-0#1", open("eu-0.c2"), 9_000));
        assert!(r.hold_text("eu-0#1", "eu-0.c2", "t".into()));
        assert_eq!(r.overdue_held(10_000, 10_000), [("eu-0#1".to_owned(), "eu-0.c1".to_owned())]);
        assert!(!r.held("eu-0.c1") && r.held("eu-0.c2"));
        assert_eq!(r.holding_since(), Some(9_000));
        r.forget("oc-0#1");
        assert_eq!(r.release().len(), 2, "the later open and its frame");
        assert_eq!(r.holding_since(), None);
    }
}
