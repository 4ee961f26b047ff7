//! The live sockets of a room and how the engine's outputs reach them.

use std::collections::{HashMap, HashSet};

use worker::wasm_bindgen::prelude::*;
use worker::wasm_bindgen::JsCast;
use worker::{js_sys, web_sys, SqlStorage, WebSocket};

use super::links::{LinkTag, Links, Signal};
use super::storage;
use crate::room::{Output, Peer, Room as Engine, Time};

/// The timers the engine asked for while its outputs were applied.
#[derive(Debug, Default)]
pub struct Effects {
    /// The storage alarm (durable; presence sweeps and summaries).
    pub alarm: Option<Time>,
    /// The in-memory flush timer (coalescing windows, replay holds).
    pub wake: Option<Time>,
    /// The room's storage is to be deleted; the engine is spent.
    pub delete: bool,
}

impl Effects {
    /// Both turns' timers: the earlier of each.
    pub fn and(self, later: Effects) -> Effects {
        let min = |a: Option<Time>, b: Option<Time>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Effects {
            alarm: min(self.alarm, later.alarm),
            wake: min(self.wake, later.wake),
            delete: self.delete || later.delete,
        }
    }
}

/// Open sockets by connection id.
pub struct Sockets {
    by_conn: HashMap<String, WebSocket>,
    /// The same sockets as a JS `Set`: a broadcast loops over them in JavaScript
    /// ([`super::upgrade::fanout`]).
    all: js_sys::Set,
    /// Texts sent to the home's own sockets since the room was loaded (one per socket), for
    /// `/stats`: with the links' messages, what the home sends per durable message.
    pub sends: u64,
}

/// The connection id of a socket, from its attachment. Runs for every
/// inbound frame, so only the id is parsed out of the peer record.
pub fn conn_of(ws: &WebSocket) -> Option<String> {
    match attached(ws)? {
        Attached::Conn(conn) => Some(conn),
        Attached::Link(_) => None,
    }
}

/// What a socket of the home is, by its attachment.
pub enum Attached {
    /// A client's socket: its connection id.
    Conn(String),
    /// A relay's link.
    Link(LinkTag),
}

/// What `ws` is, from its attachment read once (out of the Wasm, and parsed): every frame
/// and close of a socket asks, a relay's link messages as often as a client's frames.
pub fn attached(ws: &WebSocket) -> Option<Attached> {
    #[derive(serde::Deserialize)]
    struct Conn {
        conn: String,
    }
    let text = super::upgrade::attachment(ws)?;
    // A link's tag is written with `link` first and a peer record with `conn` first, so the
    // usual case is one parse that succeeds (a failed one builds an error message).
    let link_first = text.starts_with(r#"{"link""#);
    if !link_first {
        if let Ok(c) = serde_json::from_str::<Conn>(&text) {
            return Some(Attached::Conn(c.conn));
        }
    }
    serde_json::from_str::<LinkTag>(&text).ok().map(Attached::Link)
}

fn peer_of(ws: &WebSocket) -> Option<Peer> {
    let text = super::upgrade::attachment(ws)?;
    serde_json::from_str(&text).ok()
}

impl Default for Sockets {
    fn default() -> Self {
        Sockets { by_conn: HashMap::new(), all: js_sys::Set::new(&JsValue::UNDEFINED), sends: 0 }
    }
}

impl Sockets {
    /// Rebuilds the map from the runtime's sockets, collecting their peers.
    pub fn restore(all: &[WebSocket], peers: &mut Vec<Peer>) -> Sockets {
        let mut sockets = Sockets::default();
        for ws in all {
            if let Some(peer) = peer_of(ws) {
                sockets.add(peer.conn.clone(), ws.clone());
                peers.push(peer);
            }
        }
        sockets
    }

    pub fn add(&mut self, conn: String, ws: WebSocket) {
        // An old socket of the same id leaves the set first (were it this one, it stays in).
        if let Some(old) = self.by_conn.remove(&conn) {
            self.all.delete(old.as_ref());
        }
        self.all.add(ws.as_ref());
        self.by_conn.insert(conn, ws);
    }

    /// A socket the engine has not admitted yet: what is sent to it alone reaches it (its
    /// welcome, or a refusal before its close), a broadcast only once its record is written
    /// ([`Output::Remember`]). A join the rules refuse may still publish (the attempt written
    /// down), and that message is the members', not the socket's about to be closed.
    pub fn add_pending(&mut self, conn: String, ws: WebSocket) {
        if let Some(old) = self.by_conn.remove(&conn) {
            self.all.delete(old.as_ref());
        }
        self.by_conn.insert(conn, ws);
    }

    pub fn remove(&mut self, conn: &str) -> Option<WebSocket> {
        let ws = self.by_conn.remove(conn)?;
        self.all.delete(ws.as_ref());
        Some(ws)
    }

    /// Closes every socket (the engine is about to be dropped).
    pub fn close_all(&mut self, code: u16, reason: &str) {
        self.all.clear();
        for (_, ws) in self.by_conn.drain() {
            let _ = ws.close(Some(code), Some(reason));
        }
    }

    /// Applies the engine's outputs in order and returns the alarm it asked
    /// for. A failed write stops here, so nothing after it (the ack, the
    /// broadcast) is sent: what the turn owes the relays' links goes at the
    /// end, and only if every output before it was applied.
    pub fn apply(
        &mut self,
        engine: &mut Engine,
        links: &mut Links,
        sql: &SqlStorage,
        now: Time,
    ) -> worker::Result<Effects> {
        let effects = self.apply_outputs(engine, links, sql, now)?;
        links.flush();
        Ok(effects)
    }

    /// A frame for every socket and every link's session but those in `skip`; a signal
    /// (`signal`: its key and the links that take it once, [`Output::Signal`]) once to each of
    /// those links instead of their sessions.
    fn broadcast(
        &mut self,
        links: &mut Links,
        frame: &str,
        skip: &[String],
        signal: Option<Signal>,
    ) {
        self.sends += u64::from(self.send_all_but(frame, skip));
        let skip: HashSet<&str> = skip.iter().map(String::as_str).collect();
        links.broadcast(&skip, frame, signal);
    }

    /// Sends `frame` to every socket but those of the connections in `skip`; returns how many
    /// sends the runtime took.
    pub fn send_all_but(&self, frame: &str, skip: &[String]) -> u32 {
        // One JS string for every socket (passing `&str` would copy and decode the frame once
        // per receiver), one call for the loop. Usually nobody or only the sender is skipped;
        // connections with frames queued (a signal window, a held replay) may be many.
        let text = JsValue::from_str(frame);
        let skipped = js_sys::Set::new(&JsValue::UNDEFINED);
        for ws in skip.iter().filter_map(|conn| self.by_conn.get(conn)) {
            skipped.add(ws.as_ref());
        }
        let skipped = (skipped.size() > 0).then_some(&skipped);
        super::upgrade::fanout(&self.all, &text, skipped)
    }

    /// Writes a session's record where it is kept: on its socket here (which broadcasts reach
    /// from its first record on: it is admitted), or at its relay.
    fn remember(&mut self, links: &mut Links, peer: &Peer) {
        if links.remember(peer) {
            return; // a relay's session: its relay keeps the record, as it holds the socket
        }
        if let Some(ws) = self.by_conn.get(&peer.conn) {
            let text = serde_json::to_string(peer).unwrap_or_default();
            // Only fails past 16 KiB; a peer is far smaller.
            let _ = super::upgrade::attach(ws, &text);
            self.all.add(ws.as_ref()); // a no-op after the first
        }
    }

    /// The socket of connection `conn`.
    pub fn get(&self, conn: &str) -> Option<&WebSocket> {
        self.by_conn.get(conn)
    }

    fn apply_outputs(
        &mut self,
        engine: &mut Engine,
        links: &mut Links,
        sql: &SqlStorage,
        now: Time,
    ) -> worker::Result<Effects> {
        let mut effects = Effects::default();
        while let Some(out) = engine.poll_output() {
            match out {
                Output::Persist(commit) => {
                    storage::commit(sql, &commit)?;
                    if let Some(w) = &commit.state {
                        // The relays that mirror the state hear of the write (stored now).
                        links.down.state_write(&w.key, w.value.get(), commit.entry.seq);
                    }
                }
                Output::Send { conn, frame } => {
                    if let Some(ws) = self.by_conn.get(&conn) {
                        // A socket closing under us reports its close event next.
                        let _ = ws.send_with_str(&*frame);
                        self.sends += 1;
                    } else if let Some(link) = links.link_of(&conn).map(str::to_owned) {
                        links.welcomed(&conn); // a session's first frame is its welcome
                        links.down.send([(conn.as_str(), Some(link.as_str()))], &frame);
                    }
                }
                Output::Multicast { conns, frame } => {
                    let text = JsValue::from_str(&frame);
                    let mut relayed: Vec<(&str, Option<String>)> = Vec::new();
                    for conn in &conns {
                        if let Some(ws) = self.by_conn.get(conn) {
                            send_shared(ws, &text);
                            self.sends += 1;
                        } else if let Some(link) = links.link_of(conn) {
                            relayed.push((conn, Some(link.to_owned())));
                        }
                    }
                    if !relayed.is_empty() {
                        let to = relayed.iter().map(|(c, l)| (*c, l.as_deref()));
                        links.down.send(to, &frame);
                    }
                }
                Output::Broadcast { frame, skip } => self.broadcast(links, &frame, &skip, None),
                Output::Signal { frame, key, skip, links: to, origin } => {
                    let signal = Signal { key: &key, links: &to, origin: origin.as_deref() };
                    self.broadcast(links, &frame, &skip, Some(signal))
                }
                out @ (Output::Replay { .. }
                | Output::CatchUp { .. }
                | Output::Entries { .. }
                | Output::Welcome(_)
                | Output::State { .. }) => link_work(links, out),
                Output::Close { conn, code } => {
                    if let Some(ws) = self.remove(&conn) {
                        super::upgrade::close_for_good(&ws, code.code(), code.reason());
                    } else if let Some(link) = links.link_of(&conn).map(str::to_owned) {
                        links.down.close(&link, &conn, &code);
                        links.remove(&conn);
                    }
                    let fields = serde_json::json!({"room": engine.name(), "conn": conn, "code": code.code()});
                    crate::logline::log("closed_by_room", fields);
                }
                Output::Remember(peer) => self.remember(links, &peer),
                Output::Block { user, until } => storage::block(sql, &user, until, now)?,
                Output::Idle(since) => storage::idle(sql, since)?,
                Output::Timers(all) => storage::timers(sql, &all)?,
                Output::Delete => effects.delete = true,
                Output::SetAlarm(at) => effects.alarm = Some(at),
                Output::SetWake(at) => {
                    effects.wake = Some(effects.wake.map_or(at, |w: Time| w.min(at)))
                }
            }
        }
        Ok(effects)
    }
}

#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen)]
extern "C" {
    /// The same `WebSocket`, with `send` taking a string already in JS.
    #[wasm_bindgen(extends = js_sys::Object)]
    type SharedSend;

    #[wasm_bindgen(method, catch, js_name = send)]
    fn send_value(this: &SharedSend, data: &JsValue) -> Result<(), JsValue>;
}

/// Sends a frame already converted to a JS string. A socket closing under
/// us reports its close event next, so a refused send is not an error here.
pub fn send_shared(ws: &WebSocket, text: &JsValue) {
    let socket: &web_sys::WebSocket = ws.as_ref();
    let _ = socket.unchecked_ref::<SharedSend>().send_value(text);
}

/// What the room asks of a relayed connection's relay rather than of a socket: a catch-up from
/// its tail ([`Output::Replay`]), entries its tail lacks ([`Output::Entries`]), a catch-up the
/// room sends itself ([`Output::CatchUp`]), a welcome its relay makes ([`Output::Welcome`]), a
/// state reply from its relay's mirror ([`Output::State`]).
/// Nothing for a connection no link carries.
fn link_work(links: &mut Links, out: Output) {
    let Some(link) = out.link_conn().and_then(|c| links.link_of(c)).map(str::to_owned) else {
        return;
    };
    match out {
        Output::Replay { conn, after, upto } => links.down.replay(&link, &conn, after, upto),
        Output::CatchUp { conn, bytes } => links.down.catch_up(&link, &conn, bytes),
        Output::Entries { frame, .. } => links.down.entries(&link, &frame),
        Output::Welcome(part) => {
            links.welcomed(&part.conn);
            links.down.welcome(&link, *part);
        }
        Output::State { conn, seq, reason } => links.down.state(&link, &conn, seq, reason),
        _ => {}
    }
}
