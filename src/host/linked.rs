//! The home's link route and link events: a relay dials the home (`Inbound::Link`), the home
//! admits the instance or refuses it as stale, and then takes the relay's clients' opens,
//! frames and closes as sessions over that link. A direct connect to a room that is relayed
//! now is sent back to the Worker to go through a relay.

use worker::{Response, Result, WebSocketPair};

use super::links::{LinkTag, Links};
use super::{error_response, random_u64, Effects, Inner, Live, Origin};
use crate::forward::{Forwarded, USE_RELAY};
use crate::logline::log;
use crate::protocol::link::{Open, Up, UpOp};
use crate::relay::{Admit, Downlinks, Held, Policy, Relays};
use crate::room::{Input, Room as Engine, Time};

/// The close code and reason of a link the home will not listen to.
const STALE_LINK: (u16, &str) = (1008, "relay_stale");
/// The close code and reason of a link a newer socket of its relay replaced.
const REPLACED_LINK: (u16, &str) = (1012, "relay_replaced");
/// The close code and reason of a link whose lease ran out.
const EXPIRED_LINK: (u16, &str) = (1011, "relay_lease_expired");
/// The close code and reason of a link whose relay fell behind it (more than
/// [`crate::protocol::link::LINK_WINDOW`] in flight).
const BEHIND_LINK: (u16, &str) = (1013, "relay_behind");

/// The link's lease ([`crate::protocol::link::LEASE_MS`]): the home looks every half lease,
/// so the sessions of a relay that hangs with its link open leave within 15 s of its last sign
/// of life.
pub const LINK_LEASE_MS: u64 = crate::protocol::link::LEASE_MS;

/// How long after the room's last event (a frame, a connect, a close, from a client or a
/// relay; not a ping the runtime answered, not the home's own alarm) the home keeps looking at
/// its links every half lease. A room quiet for longer looks at them only as often as at its
/// direct members' silence (`PRESENCE_TTL_MS`), so that it can hibernate with relays attached;
/// a relay that dies closes its link, which wakes it.
pub const LINK_REST_MS: u64 = 20_000;

impl Inner {
    /// `Some` answer when a direct connect should go through a relay: the kind has relays and
    /// the room is at `RELAY_ABOVE` members (or was, and is still above half of it); and what
    /// the engine asked for while it was asked (it may have just been loaded).
    pub(super) fn use_relay(
        &self,
        origin: Origin<'_>,
        fwd: &Forwarded,
    ) -> Result<(Option<Result<Response>>, Effects)> {
        let Some(above) = fwd.relay_above else {
            return Ok((None, Effects::default()));
        };
        // In memory (the usual case), the count is read as it is; else the room is loaded,
        // once, for this connect and the accept after it.
        let count = |live: &Live| (live.engine.connections(), live.links.recalling());
        let known = self.live.borrow().as_ref().map(count);
        let ((members, recalling), fx) = match known {
            Some(n) => (n, Effects::default()),
            None => self.run(Some(origin), |live, _| count(live))?,
        };
        // A home just rebuilt does not know its relays' sessions until they answer: it was
        // relayed, and its count is not yet one to decide by (nor is an open decided before).
        let relayed = recalling || Policy { above }.relayed(self.relaying.get(), members);
        if relayed != self.relaying.get() {
            log(
                "relaying",
                serde_json::json!({"room": origin.room, "on": relayed, "members": members}),
            );
        }
        self.relaying.set(relayed);
        if !relayed {
            return Ok((None, fx));
        }
        let answer = Response::empty().and_then(|r| {
            let r = r.with_status(307);
            r.headers().set(USE_RELAY, "1")?;
            Ok(r)
        });
        Ok((Some(answer), fx))
    }

    /// A relay's link: an accepted (hibernatable) socket, admitted as the relay's newest
    /// instance, or told it is stale and closed.
    pub(super) fn link(
        &self,
        origin: Origin<'_>,
        relay: &str,
        epoch: u64,
        version: u32,
    ) -> Result<(Result<Response>, Effects)> {
        if !crate::relay::valid_relay(relay) {
            return Ok((error_response(400, "invalid", "no such relay"), Effects::default()));
        }
        let pair = WebSocketPair::new()?;
        let response = Response::from_websocket(pair.client)?;
        let opened = super::now().ms();
        let link = Relays::link(relay, epoch);
        let tag = LinkTag { link, nonce: random_u64(), opened, version };
        let text = serde_json::to_string(&tag).unwrap_or_default();
        let server = pair.server;
        let sql = &self.sql;
        let (admitted, fx) = self.run(Some(origin), |live, now| {
            // Accepted once the room is loaded: a room loaded by this very link would
            // otherwise find it among its sockets and take it for a link it had before
            // (and ask its relay for sessions it never had).
            self.state.accept_web_socket(&server);
            super::upgrade::attach(&server, &text)?;
            let old = match live.links.registry.admit(relay, epoch) {
                Admit::Stale { current } => {
                    let mut refusal = Downlinks::default();
                    refusal.stale(&tag.link, current);
                    for (_, text) in refusal.take() {
                        let _ = server.send_with_str(&text);
                    }
                    let _ = server.close(Some(STALE_LINK.0), Some(STALE_LINK.1));
                    return Ok(false);
                }
                // The same instance dialing again replaces its own socket.
                Admit::Current { link } => Some(link),
                Admit::Newer { replaced, .. } => replaced,
            };
            if let Some(old) = old {
                let answered = |ws: &_| self.answered(ws);
                drop_link(&mut live.links, &mut live.engine, &old, now, REPLACED_LINK, answered);
            }
            live.links.open(&tag, server.clone());
            // The first things the relay hears: which log the entries it learns are of, and
            // (version 3 on) what it makes its clients' welcomes and state replies from.
            live.links.down.accepted(&tag.link, version, &mut live.engine);
            live.links.store_registry(sql)?;
            Ok(true)
        })?;
        let admitted: Result<bool> = admitted;
        log(
            "link",
            serde_json::json!({"room": origin.room, "link": tag.link, "admitted": admitted?}),
        );
        Ok((Ok(response), fx))
    }

    /// A message from a relay over its link: its clients' opens, frames and closes, each
    /// decided by the engine as for the home's own sockets. A relay speaks only for the
    /// sessions it opened over this link; anything else it says is dropped.
    pub(super) fn link_message(&self, tag: &LinkTag, text: &str) -> Result<Effects> {
        let up = match Up::parse(text) {
            Ok(up) if Relays::link(&up.relay, up.epoch) == tag.link => up,
            _ => {
                log("link_refused", serde_json::json!({"link": tag.link, "bytes": text.len()}));
                return Ok(Effects::default());
            }
        };
        // What a relay's clients did wakes the room from rest; its answer to the home's recall
        // after a wake does not (else every wake would keep the home awake for the rest).
        if up.ops.iter().any(|op| !matches!(op, UpOp::Peers { .. })) {
            self.event();
        }
        let prefix = format!("{}.", up.relay);
        let (done, fx) = self.run(None, |live, now| -> Result<()> {
            if !live.links.is_current(tag) {
                return Ok(()); // a replaced socket's last words
            }
            live.links.heard(&tag.link, now.ms());
            live.links.down.heard(&tag.link, up.heard);
            live.links.messages_in += 1;
            for op in up.ops {
                match op {
                    UpOp::Open(open) if open.conn.starts_with(&prefix) => {
                        // Until every link has answered, nobody's open is decided: the room
                        // cannot yet tell whose session it names, nor count its user's sockets.
                        if let Some(open) = live.links.hold(&tag.link, open, now.ms()) {
                            open_relayed(&mut live.links, &mut live.engine, &tag.link, open, now);
                        }
                    }
                    UpOp::Text { conn, text } if live.links.owns(&tag.link, &conn) => {
                        live.engine.handle(now, Input::Text { conn: &conn, text: &text });
                    }
                    UpOp::Closed { conn } if live.links.owns(&tag.link, &conn) => {
                        live.links.drop_held(&conn);
                        live.links.remove(&conn);
                        live.engine.handle(now, Input::Closed { conn: &conn });
                    }
                    UpOp::Text { conn, text } if conn.starts_with(&prefix) => {
                        // Its relay has not given it back yet, or its open waits: it waits too.
                        live.links.stranger(&tag.link, &conn, text, now.ms());
                    }
                    UpOp::Closed { conn } if conn.starts_with(&prefix) => {
                        live.links.drop_held(&conn); // gone before its open was decided
                    }
                    UpOp::Peers { recall, peers, opens } => {
                        let answer = (peers, opens);
                        let Some(back) = live.links.recalled(&tag.link, recall, &prefix, answer)
                        else {
                            continue; // an answer to an earlier load's recall
                        };
                        let fields = serde_json::json!({"link": tag.link, "sessions": back.peers.len(), "opens": back.opens.len()});
                        log("relay_recalled", fields);
                        let link = tag.link.as_str();
                        live.engine.handle(now, Input::Recalled { link, peers: back.peers });
                        for open in back.opens {
                            if let Some(open) = live.links.hold(link, open, now.ms()) {
                                open_relayed(&mut live.links, &mut live.engine, link, open, now);
                            }
                        }
                        for (conn, text) in back.parked {
                            if live.links.owns(link, &conn) {
                                live.engine.handle(now, Input::Text { conn: &conn, text: &text });
                            } else {
                                live.links.hold_text(link, &conn, text);
                            }
                        }
                        // The last answer: what waited is decided before the message's next
                        // operations, which may speak for it.
                        release_held(&mut live.links, &mut live.engine, now);
                    }
                    UpOp::Open(_) | UpOp::Text { .. } | UpOp::Closed { .. } | UpOp::Unknown => {}
                }
            }
            release_held(&mut live.links, &mut live.engine, now);
            Ok(())
        })?;
        done?;
        Ok(fx)
    }

    /// The links whose lease ran out (checked when the alarm fires): each is closed, and its
    /// sessions leave as if it had closed. Returns what the engine asked for meanwhile.
    pub(super) fn expire_links(&self) -> Result<Vec<Effects>> {
        let now = super::now().ms();
        let silent = match self.live.borrow().as_ref() {
            Some(live) => live.links.silent(now, LINK_LEASE_MS, |ws| self.answered(ws)),
            None => return Ok(Vec::new()),
        };
        let mut effects = Vec::new();
        for tag in silent {
            log("link_expired", serde_json::json!({"link": tag.link}));
            effects.push(self.link_gone(&tag, EXPIRED_LINK)?);
        }
        Ok(effects)
    }

    /// Closes (1013) each link whose relay fell more than the link's window behind what this
    /// home sent it, as its lease would (its sessions are away for the grace), and applies
    /// what the engine asked for meanwhile: the runtime would otherwise buffer without end
    /// what the home sends a relay that does not keep up.
    pub(super) fn close_behind(
        &self,
        live: &mut Live,
        sql: &worker::SqlStorage,
        now: Time,
    ) -> Result<Effects> {
        let mut effects = Effects::default();
        for link in live.links.down.behind() {
            let in_flight = live.links.down.in_flight(&link);
            log("link_behind", serde_json::json!({"link": link, "in_flight": in_flight}));
            live.links.behind_closes += 1;
            let answered = |ws: &_| self.answered(ws);
            drop_link(&mut live.links, &mut live.engine, &link, now, BEHIND_LINK, answered);
            let more = live.sockets.apply(&mut live.engine, &mut live.links, sql, now)?;
            effects = effects.and(more);
        }
        Ok(effects)
    }

    /// When the runtime last answered a ping on link socket `ws` without waking the home (ms):
    /// a sign of life for its lease and its members' grace.
    fn answered(&self, ws: &worker::WebSocket) -> Option<u64> {
        super::heartbeat::last_answered(&self.state, ws).map(Time::ms)
    }

    /// A link's socket closed or failed, or its lease ran out: if it is the link's current
    /// socket, its sessions are gone with it (away for the grace while they resume through
    /// the relay's next link).
    pub(super) fn link_gone(&self, tag: &LinkTag, why: (u16, &str)) -> Result<Effects> {
        let ((), fx) = self.run(None, |live, now| {
            if live.links.is_current(tag) {
                let answered = |ws: &_| self.answered(ws);
                drop_link(&mut live.links, &mut live.engine, &tag.link, now, why, answered);
            }
        })?;
        Ok(fx)
    }
}

/// A relay's client opened: the engine decides it as a socket of the home's own, unless the
/// home knows the connection already (a recall's answer opens again those it had not
/// addressed) or it is not the relay's to open.
fn open_relayed(links: &mut Links, engine: &mut Engine, link: &str, open: Open, now: Time) {
    let ours = link.rsplit_once('#').is_some_and(|(relay, _)| {
        open.conn.strip_prefix(relay).is_some_and(|rest| rest.starts_with('.'))
    });
    if links.link_of(&open.conn).is_some() || !ours {
        return;
    }
    if let Ok(hello) = open.into_hello(link, links.version(link)) {
        links.opening(&hello.conn, link);
        engine.handle(now, Input::Open(hello));
    }
}

/// Once no link owes the room its sessions, the opens that waited for their answers are
/// decided, each followed by what its client said meanwhile, in the order they came.
fn release_held(links: &mut Links, engine: &mut Engine, now: Time) {
    for held in links.release() {
        match held {
            Held::Open { link, open } => open_relayed(links, engine, &link, open, now),
            Held::Text { link, conn, text } if links.owns(&link, &conn) => {
                engine.handle(now, Input::Text { conn: &conn, text: &text });
            }
            Held::Text { .. } => {}
        }
    }
}

/// Forgets `link` (closing its socket with `code` and `reason` if it is still open) and tells
/// the engine its sessions are gone, with the link's last sign of life (a message, or a ping
/// the runtime answered for it: `answered`), from which its members' grace counts.
fn drop_link(
    links: &mut Links,
    engine: &mut Engine,
    link: &str,
    now: Time,
    why: (u16, &str),
    answered: impl Fn(&worker::WebSocket) -> Option<u64>,
) {
    let heard = links.last_sign(link, answered).map_or(now, Time::from_ms);
    if let Some(ws) = links.close(link) {
        let _ = ws.close(Some(why.0), Some(why.1));
    }
    engine.handle(now, Input::LinkClosed { link, heard });
    // It may have been the last link that owed the room its sessions.
    release_held(links, engine, now);
}
