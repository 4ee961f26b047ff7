//! The home's side of its relays' links on the runtime: each link's WebSocket (accepted, so it
//! hibernates with the home), which sessions it carries, what the room owes each link this
//! turn ([`Downlinks`]), and how a home rebuilt after an eviction or a reset learns its
//! relays' sessions again (it asks the relays, which hold them: it stores none).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use worker::{SqlStorage, SqlStorageValue as V, WebSocket};

use crate::protocol::link::{Back, Open};
use crate::relay::{Answer, Downlinks, Held, Recalls, Relays};
use crate::room::Peer;

/// What a link socket's attachment holds (a client socket's holds its peer): the link, and
/// which of its sockets this is (an instance that dials again replaces its own socket, whose
/// close must not close the new one's sessions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkTag {
    pub link: String,
    pub nonce: u64,
    /// When the home accepted it (ms): its first sign of life.
    #[serde(default)]
    pub opened: u64,
    /// The link version its relay speaks ([`crate::protocol::link::LINK_VERSION`]).
    #[serde(default = "v1")]
    pub version: u32,
}

fn v1() -> u32 {
    1
}

/// The link a socket is, if it is one.
pub fn link_of(ws: &WebSocket) -> Option<LinkTag> {
    let text = super::upgrade::attachment(ws)?;
    serde_json::from_str::<LinkTag>(&text).ok()
}

/// A signal the engine sends once to each of `links` ([`crate::room::Output::Signal`]): its key,
/// those links, and the sender's own (`origin`).
#[derive(Clone, Copy)]
pub struct Signal<'a> {
    pub key: &'a str,
    pub links: &'a [String],
    pub origin: Option<&'a str>,
}

/// The home's links, present while the room is in memory.
#[derive(Default)]
pub struct Links {
    /// Which instance of each relay the home listens to (stored).
    pub registry: Relays,
    sockets: HashMap<String, (LinkTag, WebSocket)>,
    /// When each link last sent a message (ms), while the room is in memory.
    heard: HashMap<String, u64>,
    /// The link of each session a relay holds.
    conns: HashMap<String, String>,
    /// The sessions of each link.
    members: HashMap<String, HashSet<String>>,
    /// Sessions opened in this turn whose welcome has not gone to their link yet: the engine's
    /// outputs are applied after the turn's opens, so a broadcast it made before such a
    /// session joined finds it among the link's members, and must not reach it (a frame
    /// before the welcome).
    fresh: HashSet<String>,
    /// The links asked for their sessions that have not answered yet.
    recalls: Recalls,
    /// What the room owes each link this turn.
    pub down: Downlinks,
    /// Link messages sent and heard since the room was loaded, for `/stats`.
    pub messages_out: u64,
    pub messages_in: u64,
    /// Links closed because their relays fell behind them (more than the link's window).
    pub behind_closes: u64,
}

impl Links {
    /// Rebuilds the links from storage and the runtime's link sockets. Their sessions are not
    /// stored: each link still connected is asked for them ([`Downlinks::recall`]), and its
    /// relay gives them back ([`Links::recalled`]), as recall `id` (this load's own) of a
    /// room loaded at `since`.
    pub fn restore(
        sql: &SqlStorage,
        all: &[WebSocket],
        (id, since): (u64, u64),
    ) -> worker::Result<Links> {
        #[derive(Deserialize)]
        struct RelayRow {
            name: String,
            epoch: i64,
        }
        let relays: Vec<RelayRow> = sql.exec("SELECT name, epoch FROM relays", None)?.to_array()?;
        let mut links = Links {
            registry: Relays::from_stored(relays.into_iter().map(|r| (r.name, r.epoch as u64))),
            ..Links::default()
        };
        for ws in all {
            if let Some(tag) = link_of(ws) {
                if tag.version >= 2 {
                    // Its relay counts what it took from the message with this recall on.
                    links.down.hold(&tag.link);
                }
                links.down.recall(&tag.link, id, since);
                links.recalls.start(&tag.link, id);
                links.sockets.insert(tag.link.clone(), (tag, ws.clone()));
            }
        }
        Ok(links)
    }

    /// Tells each link whose relay mirrors the room's state (version 3 on) the state of a home
    /// just rebuilt ([`Downlinks::mirror`]), after its recall: the home before may have stored
    /// a write it never told.
    pub fn mirror_all(&mut self, state: &str) {
        for (link, (tag, _)) in &self.sockets {
            if tag.version >= 3 {
                self.down.mirror(link, state);
            }
        }
    }

    /// A new link's socket.
    pub fn open(&mut self, tag: &LinkTag, ws: WebSocket) {
        self.sockets.insert(tag.link.clone(), (tag.clone(), ws));
    }

    /// The link version `link`'s relay speaks (1 for a link this home does not hold).
    pub fn version(&self, link: &str) -> u32 {
        self.sockets.get(link).map_or(1, |(tag, _)| tag.version)
    }

    /// Whether `tag` is the open socket of its link (not one it replaced).
    pub fn is_current(&self, tag: &LinkTag) -> bool {
        self.sockets.get(&tag.link).is_some_and(|(t, _)| t.nonce == tag.nonce)
    }

    /// Forgets a link that closed (or was replaced) and its sessions; returns its socket.
    pub fn close(&mut self, link: &str) -> Option<WebSocket> {
        for conn in self.members.remove(link).unwrap_or_default() {
            self.conns.remove(&conn);
            self.fresh.remove(&conn);
        }
        self.down.forget(link);
        self.recalls.forget(link);
        self.heard.remove(link);
        self.sockets.remove(link).map(|(_, ws)| ws)
    }

    /// `link` sent a message at `now`: a sign of life.
    pub fn heard(&mut self, link: &str, now: u64) {
        self.heard.insert(link.to_owned(), now);
    }

    /// Whether the room has a relay's link.
    pub fn any(&self) -> bool {
        !self.sockets.is_empty()
    }

    /// The links with no sign of life for longer than `lease` at `now`: no message, and no
    /// ping the runtime answered for them (`answered`) since then.
    pub fn silent(
        &self,
        now: u64,
        lease: u64,
        answered: impl Fn(&WebSocket) -> Option<u64>,
    ) -> Vec<LinkTag> {
        self.sockets
            .iter()
            .filter(|(link, _)| self.last_sign(link, &answered).unwrap_or(0) + lease < now)
            .map(|(_, (tag, _))| tag.clone())
            .collect()
    }

    /// When `link` was last heard from (ms): its opening, its last message, or the last ping
    /// the runtime answered for it (`answered`). `None` for a link it does not have.
    pub fn last_sign(
        &self,
        link: &str,
        answered: impl Fn(&WebSocket) -> Option<u64>,
    ) -> Option<u64> {
        let (tag, ws) = self.sockets.get(link)?;
        let heard = self.heard.get(link).copied();
        [Some(tag.opened), heard, answered(ws)].into_iter().flatten().max()
    }

    /// Stores the registry (a new instance of a relay was admitted).
    pub fn store_registry(&self, sql: &SqlStorage) -> worker::Result<()> {
        for (name, epoch) in self.registry.stored() {
            sql.exec(
                "INSERT OR REPLACE INTO relays (name, epoch) VALUES (?, ?)",
                vec![V::String(name.into()), V::Integer(epoch as i64)],
            )?;
        }
        Ok(())
    }

    /// A session of `link` (a relay's client the home is about to open, or one given back).
    pub fn add(&mut self, conn: &str, link: &str) {
        self.conns.insert(conn.to_owned(), link.to_owned());
        self.members.entry(link.to_owned()).or_default().insert(conn.to_owned());
    }

    /// A relay's client the home is about to open: a session of `link` whose welcome has not
    /// gone yet ([`Links::welcomed`]).
    pub fn opening(&mut self, conn: &str, link: &str) {
        self.add(conn, link);
        self.fresh.insert(conn.to_owned());
    }

    /// `conn`'s welcome (or its first frame, which is its welcome) goes to its link now: what
    /// the room broadcasts from here on is for it too.
    pub fn welcomed(&mut self, conn: &str) {
        if !self.fresh.is_empty() {
            self.fresh.remove(conn);
        }
    }

    /// The link `conn` is on, if a relay holds it.
    pub fn link_of(&self, conn: &str) -> Option<&str> {
        self.conns.get(conn).map(String::as_str)
    }

    /// Whether `conn` is a session of `link` (a relay speaks for its own sessions only).
    pub fn owns(&self, link: &str, conn: &str) -> bool {
        self.conns.get(conn).is_some_and(|l| l == link)
    }

    /// A relay's session is gone (closed by the room, or by its relay).
    pub fn remove(&mut self, conn: &str) {
        self.fresh.remove(conn);
        if let Some(link) = self.conns.remove(conn) {
            if let Some(m) = self.members.get_mut(&link) {
                m.remove(conn);
            }
        }
    }

    /// Gives a relay session's record to its relay to keep (what a client socket's
    /// attachment holds for its own). False when `peer` is not a relay's session.
    pub fn remember(&mut self, peer: &Peer) -> bool {
        let Some(link) = self.conns.get(&peer.conn) else {
            return false;
        };
        let text = serde_json::to_string(peer).unwrap_or_default();
        self.down.peer(link, &peer.conn, text);
        true
    }

    /// `conn` spoke (`text`) over `link`, which owes the room its sessions, before the room
    /// knew it: the frame waits for the answer ([`Recalls::park`]), or, past the bound, `conn`
    /// is closed (1012, to resume) and not taken back when the answer comes. A link that owes
    /// nothing speaks for a connection it does not hold: dropped.
    /// A frame of a connection whose open waits for every link's answer waits behind it
    /// ([`Links::hold_text`]).
    pub fn stranger(&mut self, link: &str, conn: &str, text: String, now: u64) {
        if self.hold_text(link, conn, text.clone()) {
            return;
        }
        if !self.recalls.park(link, conn, text, now) {
            self.unknown(link, conn);
        }
        for (link, conn) in self.recalls.evicted() {
            self.unknown(&link, &conn);
        }
    }

    /// Closes (1012, to resume) the connections whose frames waited for their relay's answer
    /// for `wait` ms or longer at `now`; and returns when the next such wait ends, if frames
    /// still wait: the home keeps a timer for it, so the runtime does not evict it with frames
    /// only its memory holds.
    pub fn parked(&mut self, now: u64, wait: u64) -> Option<u64> {
        for (link, conn) in self.recalls.overdue(now, wait) {
            self.unknown(&link, &conn);
        }
        for (link, conn) in self.recalls.overdue_held(now, wait) {
            self.refuse(&link, &conn);
        }
        self.recalls.holding_since().map(|at| at + wait)
    }

    /// Whether some link still owes the room its sessions (a home just rebuilt): until none
    /// does, opens wait ([`Links::hold`]) and a direct connect goes through a relay.
    pub fn recalling(&self) -> bool {
        self.recalls.recalling()
    }

    /// A relay's client opened over `link` at `now`: `Some(open)` to decide now, or `None`
    /// when it waits for every link's answer ([`Recalls::hold`]; [`Links::release`] gives it
    /// back) or, past the bound, is closed to resume (1012).
    pub fn hold(&mut self, link: &str, open: Open, now: u64) -> Option<Open> {
        // One held already (a relay's answer names it again) stays where it came first.
        if !self.recalls.recalling() && !self.recalls.held(&open.conn) {
            return Some(open);
        }
        let conn = open.conn.clone();
        if !self.recalls.hold(link, open, now) {
            self.refuse(link, &conn);
        }
        self.made_way();
        None
    }

    /// Closes (1012, to resume) the held connections that made way for a newcomer's open or
    /// frame ([`Recalls::evicted`]).
    fn made_way(&mut self) {
        for (link, conn) in self.recalls.evicted() {
            self.refuse(&link, &conn);
        }
    }

    /// Closes `conn`'s client (1012 `room_recalling`, to resume) once, its open not taken; and
    /// keeps a link that still owes its answer from giving it back in it ([`Recalls::refuse`]).
    fn refuse(&mut self, link: &str, conn: &str) {
        if self.recalls.refuse(link, conn) {
            self.down.restart(link, conn, "room_recalling");
        }
    }

    /// `conn` spoke over `link` while its open waits: the frame waits behind it (true), or,
    /// past the bound, `conn` is closed to resume (true: the frame is taken care of). False
    /// when `conn`'s open does not wait.
    pub fn hold_text(&mut self, link: &str, conn: &str, text: String) -> bool {
        if !self.recalls.held(conn) {
            return false;
        }
        if !self.recalls.hold_text(link, conn, text) {
            self.refuse(link, conn);
        }
        self.made_way();
        true
    }

    /// `conn` closed before its open was decided: forgotten. Whether its open waited.
    pub fn drop_held(&mut self, conn: &str) -> bool {
        self.recalls.drop_held(conn)
    }

    /// What waited for every link's answer, once none owes it, in the order it came.
    pub fn release(&mut self) -> Vec<Held> {
        self.recalls.release()
    }

    fn unknown(&mut self, link: &str, conn: &str) {
        if self.recalls.unknown(link, conn) == Some(true) {
            self.down.restart(link, conn, "relay_session_unknown");
        }
    }

    /// A link's answer to its recall `id`: what it may give back, its sessions again (the
    /// opens are the engine's to decide). Nothing when it is not the answer owed.
    pub fn recalled(
        &mut self,
        link: &str,
        id: u64,
        prefix: &str,
        (peers, opens): (Vec<Back>, Vec<Open>),
    ) -> Option<Answer> {
        let answer = self.recalls.answer(link, id, prefix, peers, opens)?;
        for (p, _) in &answer.peers {
            self.add(&p.conn, link);
        }
        self.down.recalled(link, id);
        Some(answer)
    }

    /// The engine's broadcast for every link: once per link with a session it is for, naming
    /// the link's sessions in `skip`. A link that owes the room its sessions gets it for the
    /// sessions the room knows only, one by one (the others catch up when they come back), and
    /// not for a session whose welcome has not gone yet (the broadcast came before it joined).
    /// Elsewhere the relay gives an `all` only to clients it has welcomed.
    ///
    /// A signal ([`Signal`]) goes to a link whose relay coalesces signals (version 4 on) once,
    /// keyed, if the engine listed it, and nothing to such a link that is the sender's own;
    /// any other link gets it as a broadcast (its sessions, one by one, are the engine's).
    pub fn broadcast(&mut self, skip: &HashSet<&str>, frame: &str, signal: Option<Signal>) {
        for (link, members) in &self.members {
            let version = self.sockets.get(link).map_or(1, |(tag, _)| tag.version);
            let keyed = signal.filter(|_| version >= 4);
            if keyed.is_some_and(|s| s.origin == Some(link.as_str())) {
                continue; // the sender's own relay delivered it
            }
            // Listed: its sessions are the relay's to coalesce for. Not listed (its sessions
            // did not say their relay coalesces signals): as a broadcast, session by session.
            let keyed = keyed.filter(|s| s.links.contains(link));
            if let (Some(s), false) = (keyed, self.recalls.owes(link)) {
                self.down.signal(link, s.key, frame);
                continue;
            }
            if self.recalls.owes(link) {
                let fresh = &self.fresh;
                let to = members
                    .iter()
                    .filter(|c| !skip.contains(c.as_str()) && !fresh.contains(c.as_str()));
                let to = to.map(|c| (c.as_str(), Some(link.as_str())));
                self.down.send(to, frame);
                continue;
            }
            let skipped: Vec<String> =
                members.iter().filter(|c| skip.contains(c.as_str())).cloned().collect();
            if skipped.len() < members.len() {
                self.down.all(link, skipped, frame);
            }
        }
    }

    /// Sends each link what it is owed this turn, one message per link.
    pub fn flush(&mut self) {
        for (link, text) in self.down.take() {
            if let Some((_, ws)) = self.sockets.get(&link) {
                // A link closing under us reports its close event next.
                let _ = ws.send_with_str(&text);
                self.messages_out += 1;
            }
        }
    }

    /// Closes every link (the engine is about to be dropped): each relay closes its clients,
    /// who resume.
    pub fn close_all(&mut self, code: u16, reason: &str) {
        for (_, (_, ws)) in self.sockets.drain() {
            let _ = ws.close(Some(code), Some(reason));
        }
    }

    /// Sessions per link, for `/stats`.
    pub fn topology(&self) -> serde_json::Value {
        let links: serde_json::Map<String, serde_json::Value> = self
            .sockets
            .keys()
            .map(|l| (l.clone(), self.members.get(l).map_or(0, HashSet::len).into()))
            .collect();
        serde_json::json!({ "links": links, "relayed": self.conns.len() })
    }
}
