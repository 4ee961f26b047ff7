//! The document room driven in virtual time by Yjs editors (`yrs` documents speaking the
//! sync protocol), with its effects applied to an in-memory store the way the Durable
//! Object applies them to SQLite.

mod attacks;
mod awareness;
mod chains;
mod fuzz;
mod marks;
mod nesting;
mod rules;
mod sync;
mod versions;

use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{GetString, ReadTxn, StateVector, Text, Transact, Update};

use super::rules::DocRules;
use super::wire::{self, Message};
use super::{DocConfig, DocError, DocRoom, Effect, Member};

/// The room's own Yjs client id (a room draws one at random each load, so none of the editors'
/// and crafted updates' small ids is ever its), and the next two for its reloads.
pub const ROOM_CLIENT: u64 = 1 << 40;

/// What storage holds: the snapshot and the log after it.
#[derive(Debug, Default, Clone)]
pub struct Stored {
    pub snapshot: Vec<u8>,
    pub log: Vec<Vec<u8>>,
    /// Which user each Yjs client writes for.
    pub writers: Vec<(u64, String)>,
}

impl Stored {
    pub fn bytes(&self) -> usize {
        self.snapshot.len() + self.log.iter().map(Vec::len).sum::<usize>()
    }
}

/// An editor: a Yjs document with one text, connected (or not) to the room.
pub struct Editor {
    pub doc: yrs::Doc,
    pub conn: Option<u64>,
    pub inbox: Vec<Vec<u8>>,
    /// Closed by the room: code and reason.
    pub closed: Option<(u16, String)>,
}

impl Editor {
    pub fn new(client: u64) -> Editor {
        Editor {
            doc: yrs::Doc::with_client_id(client),
            conn: None,
            inbox: Vec::new(),
            closed: None,
        }
    }

    pub fn text(&self) -> String {
        let text = self.doc.get_or_insert_text("text");
        text.get_string(&self.doc.transact())
    }

    /// Types `s` at the end; returns the update to send.
    pub fn type_text(&self, s: &str) -> Vec<u8> {
        let text = self.doc.get_or_insert_text("text");
        let mut txn = self.doc.transact_mut();
        let len = text.len(&txn);
        text.insert(&mut txn, len, s);
        txn.encode_update_v1()
    }

    /// Deletes the first `n` characters (or fewer); returns the update to send.
    pub fn delete_front(&self, n: u32) -> Vec<u8> {
        let text = self.doc.get_or_insert_text("text");
        let mut txn = self.doc.transact_mut();
        let n = n.min(text.len(&txn));
        text.remove_range(&mut txn, 0, n);
        txn.encode_update_v1()
    }

    pub fn step1(&self) -> Vec<u8> {
        wire::sync_step1(&self.doc.transact().state_vector().encode_v1())
    }
}

/// The room, its store and its editors, with the effects applied in order.
pub struct Sim {
    pub room: DocRoom,
    pub config: DocConfig,
    pub stored: Stored,
    pub editors: Vec<Editor>,
    pub now: u64,
    pub next_conn: u64,
    /// Every effect applied, in order.
    pub trace: Vec<Effect>,
    /// The kind's rules, made fresh at each load.
    pub rules: Option<fn() -> Box<dyn DocRules>>,
}

impl Sim {
    pub fn new(config: DocConfig, editors: usize) -> Sim {
        Sim {
            room: DocRoom::new(config, ROOM_CLIENT),
            config,
            stored: Stored::default(),
            editors: (0..editors).map(|i| Editor::new(100 + i as u64)).collect(),
            now: 1_000,
            next_conn: 1,
            trace: Vec::new(),
            rules: None,
        }
    }

    /// The same, its rooms under the rules `make` makes.
    pub fn with_rules(mut self, make: fn() -> Box<dyn DocRules>) -> Sim {
        self.rules = Some(make);
        self.room = DocRoom::new(self.config, ROOM_CLIENT).with_rules(make());
        self
    }

    /// Connects editor `i` as `member` and runs the sync to the end.
    pub fn connect_as(&mut self, i: usize, member: Member) {
        let conn = self.next_conn;
        self.next_conn += 1;
        self.editors[i].conn = Some(conn);
        self.editors[i].closed = None;
        self.room.open(self.now, conn, member);
        self.apply();
        if self.editors[i].conn.is_none() {
            return; // refused (the rules' join)
        }
        let step1 = self.editors[i].step1();
        self.send(i, &step1);
    }

    pub fn connect(&mut self, i: usize) {
        self.connect_as(i, member(&format!("user{i}")));
    }

    /// Editor `i` sends `frame`; everything that follows is delivered.
    pub fn send(&mut self, i: usize, frame: &[u8]) {
        let conn = self.editors[i].conn.expect("connected");
        self.room.message(self.now, conn, frame);
        self.apply();
    }

    pub fn edit(&mut self, i: usize, s: &str) {
        let update = self.editors[i].type_text(s);
        if self.editors[i].conn.is_some() {
            self.send(i, &wire::update(&update));
        }
    }

    pub fn disconnect(&mut self, i: usize) {
        if let Some(conn) = self.editors[i].conn.take() {
            self.room.close(self.now, conn);
            self.apply();
        }
    }

    /// The object is reset (a Wasm reset, an eviction): a fresh room from what is stored;
    /// every socket is gone.
    pub fn reset(&mut self) {
        self.room = DocRoom::new(self.config, ROOM_CLIENT + 1);
        if let Some(make) = self.rules {
            self.room = DocRoom::new(self.config, ROOM_CLIENT + 1).with_rules(make());
        }
        let log: Vec<&[u8]> = self.stored.log.iter().map(Vec::as_slice).collect();
        assert_eq!(self.room.restore(&self.stored.snapshot, log), 0, "every stored update loads");
        self.room.restore_writers(self.stored.writers.clone());
        for e in &mut self.editors {
            e.conn = None;
        }
    }

    /// Applies the room's effects: storage first, as they come, then delivery; a frame
    /// that shows an update must find it stored.
    pub fn apply(&mut self) {
        loop {
            let effects = self.room.take_effects();
            if effects.is_empty() {
                return;
            }
            for effect in effects {
                self.trace.push(effect.clone());
                match effect {
                    Effect::Store(update) => self.stored.log.push(update),
                    Effect::Bind { clients, user } => {
                        self.stored.writers.extend(clients.into_iter().map(|c| (c, user.clone())));
                    }
                    Effect::Unbind { clients } => {
                        self.stored.writers.retain(|(c, _)| !clients.contains(c));
                    }
                    Effect::Compact(snapshot) => {
                        self.stored.snapshot = snapshot;
                        self.stored.log.clear();
                    }
                    Effect::Send(conn, frame) => self.deliver(conn, &frame),
                    Effect::Broadcast { except, frame } => {
                        let conns: Vec<u64> = self
                            .editors
                            .iter()
                            .filter_map(|e| e.conn)
                            .filter(|c| Some(*c) != except)
                            .collect();
                        for conn in conns {
                            self.deliver(conn, &frame);
                        }
                    }
                    Effect::Close(conn, code, reason) => {
                        if let Some(e) = self.editors.iter_mut().find(|e| e.conn == Some(conn)) {
                            e.conn = None;
                            e.closed = Some((code, reason));
                        }
                        self.room.close(self.now, conn);
                    }
                    Effect::Remember(_) | Effect::Refused(..) => {}
                }
            }
        }
    }

    /// An editor reads a frame: a sync step 1 is answered, updates applied.
    fn deliver(&mut self, conn: u64, frame: &[u8]) {
        let Some(i) = self.editors.iter().position(|e| e.conn == Some(conn)) else { return };
        self.editors[i].inbox.push(frame.to_vec());
        match wire::decode(frame) {
            Ok(Message::SyncStep1(sv)) => {
                let diff = self.editors[i].doc.transact().encode_diff_v1(&sv);
                self.room.message(self.now, conn, &wire::sync_step2(&diff));
            }
            Ok(Message::Update { bytes, .. }) => {
                let update = Update::decode_v1(&bytes).expect("the room sends valid updates");
                self.editors[i].doc.transact_mut().apply_update(update).expect("applies");
            }
            _ => {}
        }
    }

    /// The document as storage would load it.
    pub fn stored_text(&self) -> String {
        let mut room = DocRoom::new(self.config, ROOM_CLIENT + 2);
        let log: Vec<&[u8]> = self.stored.log.iter().map(Vec::as_slice).collect();
        room.restore(&self.stored.snapshot, log);
        let text = room.doc().get_or_insert_text("text").get_string(&room.doc().transact());
        text
    }

    /// Every frame that carries an update was preceded by storing it.
    pub fn assert_stored_before_seen(&self) {
        let mut stored: Vec<&[u8]> = Vec::new();
        for effect in &self.trace {
            match effect {
                Effect::Store(u) => stored.push(u),
                Effect::Broadcast { frame, .. } | Effect::Send(_, frame) => {
                    if let Ok(Message::Update { bytes, step2: false, .. }) = wire::decode(frame) {
                        assert!(
                            stored.contains(&bytes.as_slice()),
                            "an update shown before it was stored"
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

/// What `effects` hand socket `conn` (the frames sent to it, the broadcasts it is not excepted
/// from) until they close it, and the close (code and reason) if they do.
pub fn handed_to(effects: &[Effect], conn: u64) -> (usize, Option<(u16, String)>) {
    let mut handed = 0;
    for effect in effects {
        match effect {
            Effect::Send(c, frame) if *c == conn => handed += frame.len(),
            Effect::Broadcast { except, frame } if *except != Some(conn) => handed += frame.len(),
            Effect::Close(c, code, reason) if *c == conn => {
                return (handed, Some((*code, reason.clone())));
            }
            _ => {}
        }
    }
    (handed, None)
}

/// The refusals in the order the room made them.
pub fn refusals(sim: &Sim) -> Vec<DocError> {
    sim.trace
        .iter()
        .filter_map(|e| match e {
            Effect::Refused(_, r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

pub fn member(user: &str) -> Member {
    Member {
        user: user.into(),
        read_only: false,
        extensions: false,
        expires: None,
        anonymous: false,
    }
}

/// The text of a document loaded from one update.
pub fn text_of(update: &[u8]) -> String {
    let doc = yrs::Doc::new();
    doc.transact_mut().apply_update(Update::decode_v1(update).unwrap()).unwrap();
    let text = doc.get_or_insert_text("text");
    let s = text.get_string(&doc.transact());
    s
}

/// An empty state vector, as a late joiner sends it.
pub fn empty_sv() -> Vec<u8> {
    StateVector::default().encode_v1()
}
