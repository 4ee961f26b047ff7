//! Presence in the room: members keyed by session (the newest connection of a
//! session wins), joins and leaves, throttled per-region summaries, the
//! large-room switch, the heartbeat sweep and the alarm that drives them.

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::value::RawValue;

use super::{empty_object, Conn, Room};
use crate::protocol::server::{PresenceList, ServerFrame};
use crate::room::flow::Flow;
use crate::room::io::{Output, Peer};
use crate::room::presence::Member;
use crate::room::rate::RateLimiter;
use crate::room::rules::Who;
use crate::room::Time;
use crate::room::{CloseCode, ReadRefusal};

/// What happened to the member list, for the frame that tells the others.
enum Change<'a> {
    /// A member came or changed (`listed`: the others knew it before).
    Joined {
        session: &'a str,
        listed: bool,
    },
    Left(&'a str),
    /// Nothing others need to hear about (same member reconnected as it was).
    Quiet,
}

impl Room {
    /// Re-admits the sockets that stayed open while the object was away.
    pub(super) fn restore_peers(&mut self, mut peers: Vec<Peer>, nonce: u64, now: u64) {
        // Oldest first, so that for a session seen twice the newest wins.
        peers.sort_by_key(|p| p.opened);
        for p in peers {
            if self.users.blocked(&p.user, now) {
                // A block reaches every socket: one the runtime still lists after the room
                // closed it (its client never answered), or one whose close a reset cut off.
                self.push(Output::Close { conn: p.conn, code: CloseCode::Blocked });
                continue;
            }
            self.away.remove(&p.session);
            if let Some(old) = self.presence.get(&p.session).map(|m| m.conn.clone()) {
                // An away member's connection is gone already: nothing to close.
                if self.drop_conn(&old).is_some() {
                    self.push(Output::Close { conn: old, code: CloseCode::Superseded });
                }
            }
            let seen = p.seen.max(p.opened).ms();
            let conn = Conn {
                session: p.session.clone(),
                user: p.user.clone(),
                limiter: RateLimiter::new(&self.config, now),
                last_seen: seen,
                seen_saved: seen,
                out: Default::default(),
                // What was outstanding before the eviction is forgotten: the
                // window starts empty, which bounds the runtime's buffer the
                // same. Its marks come from a key of this load: none repeats
                // one the client may still hold from before.
                flow: Flow::for_conn(
                    Flow::key_of_load(p.key, nonce),
                    p.relay_flow && p.link.is_some(),
                ),
                expires: p.exp.map(Time::ms),
                stalled_since: None,
                mirror: p.relay_mirror && p.link.is_some(),
                signals_at_link: p.relay_signals && p.link.is_some(),
                // Its client saw what it saw: any diff still owed to it is whole.
                presence_seen: 0,
                link: p.link,
            };
            self.add_conn(&p.conn, conn, now);
            let member = Member {
                conn: p.conn,
                user: p.user,
                region: p.region,
                state: p.state,
                since: p.since.ms(),
                opened: p.opened.ms(),
                info: p.info,
                canary: p.canary,
            };
            self.presence.insert(p.session, member);
        }
        self.large = self.presence.len() > self.config.large_room;
        self.sweep_at = self.next_sweep();
        if !self.conns.is_empty() {
            // Not empty: a retention counted from a load that found no socket of its own (a
            // relayed room, whose sessions its relays give back after it) must not run.
            self.retain_at = None;
        }
    }

    /// A link's sessions, given back after a rebuild: restored as they were, but a session
    /// that reconnected since (the room knows a newer connection of it) keeps the newer one,
    /// and the recalled connection is closed. Each catches up from the `seq` it has had nothing
    /// after, and the whole member list goes out after, as after any shedding: a member
    /// welcomed in between was told a list without them, and they heard no presence change.
    pub(super) fn recalled(&mut self, now: u64, link: &str, peers: Vec<(Peer, u64)>) {
        let mut back = Vec::new();
        let mut from = Vec::new();
        for (p, after) in peers {
            if p.link.as_deref() != Some(link) || self.conns.contains_key(&p.conn) {
                continue; // not this link's to give, or known already
            }
            if self.users.blocked(&p.user, now) {
                // Blocked while its relay had not answered: a block reaches every socket.
                self.push(Output::Close { conn: p.conn, code: CloseCode::Blocked });
                continue;
            }
            let other = self.presence.get(&p.session).filter(|m| m.user != p.user);
            if let Some(taker) = other.map(|m| m.conn.clone()) {
                // Another user's connection of this session, decided while this one was not
                // known (the adapter holds opens until every link has answered, so only a
                // fault comes this way): the session was this one's first.
                self.close(now, &taker, CloseCode::SessionTaken);
            }
            if self.presence.get(&p.session).is_some_and(|m| m.opened > p.opened.ms()) {
                self.push(Output::Close { conn: p.conn, code: CloseCode::Superseded });
                continue;
            }
            from.push((p.conn.clone(), p.user.clone(), after));
            back.push(p);
        }
        if back.is_empty() {
            return;
        }
        self.restore_peers(back, self.nonce, now);
        for (conn, user, after) in from {
            if !self.conns.contains_key(&conn) || after >= self.seq {
                continue;
            }
            let missed: Option<Vec<Rc<str>>> =
                self.history.replay_after(after, self.seq).map(|f| f.cloned().collect());
            let resync = missed.is_none().then_some("gap");
            let missed = missed.unwrap_or_else(|| vec![self.state_reply("gap")]);
            let from = super::CatchUpFrom { tail: None, resync };
            self.catch_up(now, &conn, &user, missed, None, from);
        }
        self.presence_stale = true;
        self.summary_changed(now, None);
    }

    /// Makes `conn` the connection of `session`, superseding an older one
    /// (of the same user: [`Room::refuse_open`] turned any other away).
    pub(super) fn join(&mut self, now: u64, joining: Joining<'_>) {
        let Joining {
            conn,
            session,
            user,
            region,
            key,
            expires,
            info,
            canary,
            link,
            relay_flow,
            relay_mirror,
            relay_signals,
        } = joining;
        self.retain_at = None;
        let previous = self.presence.remove(session);
        // Back from away (its link closed): the member never left.
        self.away.remove(session);
        let change = match &previous {
            Some(old) => {
                // Newest wins: the old socket goes, the member stays. (An away member's is
                // gone already.)
                if self.drop_conn(&old.conn).is_some() {
                    let code = CloseCode::Superseded;
                    self.push(Output::Close { conn: old.conn.clone(), code });
                }
                if old.region != region || old.user != user {
                    Change::Joined { session, listed: true }
                } else {
                    Change::Quiet
                }
            }
            None => Change::Joined { session, listed: false },
        };
        let record = Conn {
            session: session.to_owned(),
            user: user.clone(),
            limiter: RateLimiter::new(&self.config, now),
            last_seen: now,
            seen_saved: now,
            out: Default::default(),
            flow: Flow::for_conn(key, relay_flow && link.is_some()),
            expires,
            stalled_since: None,
            mirror: relay_mirror && link.is_some(),
            signals_at_link: relay_signals && link.is_some(),
            link,
            // Owed nothing before its welcome (below), which must be its first frame.
            presence_seen: u64::MAX,
        };
        let member = Member {
            conn: conn.to_owned(),
            user,
            region,
            state: previous.as_ref().map_or_else(empty_object, |m| m.state.clone()),
            since: previous.as_ref().map_or(now, |m| m.since),
            opened: now,
            info,
            canary,
        };
        self.add_conn(conn, record, now);
        self.remember(session, &member, now);
        self.presence.insert(session.to_owned(), member);
        self.sweep_at.get_or_insert(now + self.config.presence_ttl_ms);
        self.members_changed(now, change, Some(conn));
        // The welcome, made next, lists every member as they are now.
        let seen = self.window.seen();
        if let Some(c) = self.conns.get_mut(conn) {
            c.presence_seen = seen;
        }
    }

    /// A `presence` frame: replace the session's state and tell the others.
    pub(super) fn set_presence(&mut self, now: u64, conn: &str, state: Box<RawValue>) {
        if state.get().len() > self.config.presence_max {
            let limit = self.config.presence_max;
            let refusal =
                crate::room::Error::TooLarge(format!("presence state is over {limit} bytes"));
            return self.refuse(conn, None, refusal);
        }
        let session = self.conns[conn].session.clone();
        let Some(member) = self.presence.set_state(&session, state).cloned() else {
            return;
        };
        self.remember(&session, &member, now);
        if !self.large {
            self.presence_changed(now, &session, true, Some(conn));
        }
    }

    /// The runtime reports a socket gone. Only the member's current
    /// connection takes the member with it; a superseded one is long forgotten.
    pub(super) fn closed(&mut self, now: u64, conn: &str) {
        let Some(c) = self.drop_conn(conn) else {
            return;
        };
        self.dropped(now, conn, c);
        self.maybe_emptied(now);
    }

    /// What a connection's going means for its member, once it is dropped.
    fn dropped(&mut self, now: u64, conn: &str, c: Conn) {
        if self.presence.get(&c.session).is_some_and(|m| m.conn == conn) {
            self.left(now, &c.session);
        }
    }

    /// `session`'s member leaves: the others are told, and the rules.
    fn left(&mut self, now: u64, session: &str) {
        let Some(m) = self.presence.remove(session) else {
            return;
        };
        self.departed(session, &m.user, now);
        self.members_changed(now, Change::Left(session), None);
        self.rules_leave(now, session, &m);
    }

    /// The last connection went, if it did, and no member is away: the sweep stops, and the
    /// room's retention starts counting.
    fn maybe_emptied(&mut self, now: u64) {
        if self.conns.is_empty() && self.away.is_empty() {
            self.sweep_at = None;
            self.emptied(now);
        }
    }

    /// A link went, last heard from at `heard`: each of its members is away until
    /// `link_grace_ms` after that and leaves then unless its session comes back (at once, as
    /// if its own socket had closed, if that time has passed). In the order of their
    /// connection ids.
    pub(super) fn link_closed(&mut self, now: u64, link: &str, heard: u64) {
        // The link's next relay instance says anew what its tail holds.
        self.tails.remove(link);
        let mut carried: Vec<String> = self
            .conns
            .iter()
            .filter(|(_, c)| c.link.as_deref() == Some(link))
            .map(|(id, _)| id.clone())
            .collect();
        carried.sort();
        // All of them go before any leave is told: a leave must not be sent
        // to a session of the link that is gone too.
        let gone: Vec<(String, Conn)> =
            carried.into_iter().filter_map(|id| self.drop_conn(&id).map(|c| (id, c))).collect();
        if gone.is_empty() {
            return;
        }
        let until = heard.min(now).saturating_add(self.config.link_grace_ms);
        for (conn, c) in gone {
            let current = self.presence.get(&c.session).is_some_and(|m| m.conn == conn);
            if current && until > now {
                self.away.insert(c.session, until);
            } else {
                self.dropped(now, &conn, c);
            }
        }
        self.maybe_emptied(now);
    }

    /// The away members whose grace ended leave (in the order of their sessions).
    pub(super) fn expire_away(&mut self, now: u64) {
        let due: Vec<String> =
            self.away.iter().filter(|(_, until)| **until <= now).map(|(s, _)| s.clone()).collect();
        if due.is_empty() {
            return;
        }
        for session in &due {
            self.away.remove(session);
            self.left(now, session);
        }
        self.maybe_emptied(now);
    }

    /// When the next away member's grace ends, if one is away.
    pub(super) fn next_away(&self) -> Option<u64> {
        self.away.values().min().copied()
    }

    /// The away members of `user` leave now (a kick: they must not come back quietly).
    pub(super) fn expel_away(&mut self, now: u64, user: &str) {
        let theirs: Vec<String> = self
            .away
            .keys()
            .filter(|s| self.presence.get(s.as_str()).is_some_and(|m| m.user == user))
            .cloned()
            .collect();
        for session in &theirs {
            self.away.remove(session);
            self.left(now, session);
        }
        if !theirs.is_empty() {
            self.maybe_emptied(now);
        }
    }

    /// The last connection went: the room's retention starts counting.
    pub(super) fn emptied(&mut self, now: u64) {
        self.push(Output::Idle(Time::from_ms(now)));
        self.retain_from(now);
    }

    /// An empty room, idle since `since`, deletes its storage after the
    /// retention (if the deployment sets one).
    pub(super) fn retain_from(&mut self, since: u64) {
        if self.config.retention_ms > 0 {
            self.retain_at = Some(since.saturating_add(self.config.retention_ms));
        }
    }

    /// Closes every socket with 1001 (the operator drains the room; clients
    /// come back on their own). No leaves are sent: nobody stays to read them.
    pub fn drain(&mut self, now: Time) -> usize {
        let now = now.ms();
        self.now = self.now.max(now);
        let mut conns: Vec<String> = self.conns.keys().cloned().collect();
        conns.sort();
        let had_away = !self.away.is_empty();
        let now = self.now;
        for conn in &conns {
            // What was waiting in a window goes out before the close; what is
            // held (a catch-up or a send waiting for the user's reply budget,
            // a storm's spread) does not: it was not paid for yet, and the
            // client resumes and is sent it again.
            let held =
                self.conns.get(conn).is_some_and(|c| c.out.hold_until.is_some_and(|t| t > now));
            let frames = self.conns.get_mut(conn).map(|c| c.out.take()).unwrap_or_default();
            if !frames.is_empty() && !held {
                self.emit(conn, frames);
            }
            self.push(Output::Close { conn: conn.clone(), code: CloseCode::GoingAway });
        }
        for conn in &conns {
            self.drop_conn(conn);
        }
        for (session, user) in self.presence.sessions() {
            self.departed(&session, &user, now);
        }
        self.turn.clear();
        self.deadlines.clear();
        self.presence.clear();
        self.away.clear();
        self.large = false;
        self.sweep_at = None;
        if !conns.is_empty() || had_away {
            self.emptied(now);
        }
        self.arm();
        conns.len()
    }

    /// The room closes a socket: forget it (a leave for its member) and say so.
    pub(super) fn close(&mut self, now: u64, conn: &str, code: CloseCode) {
        if !self.conns.contains_key(conn) {
            return; // closed already (a sweep or kick listing it, and a cascade)
        }
        // The close goes first, so the adapter has let the socket go before
        // the leave is broadcast: a closed client is not told of its own leave.
        self.push(Output::Close { conn: conn.to_owned(), code });
        self.closed(now, conn);
    }

    /// A frame from `conn` is a sign of life. The attachment learns it at
    /// most twice per TTL, so a restored room does not expire a chatty client.
    pub(super) fn seen(&mut self, now: u64, conn: &str) {
        let half_ttl = self.config.presence_ttl_ms / 2;
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        c.last_seen = c.last_seen.max(now);
        if now.saturating_sub(c.seen_saved) < half_ttl {
            return;
        }
        c.seen_saved = now;
        let session = c.session.clone();
        if let Some(member) = self.presence.get(&session).cloned() {
            self.remember(&session, &member, now);
        }
    }

    /// The alarm fired (possibly early: then nothing is due and it re-arms).
    pub(super) fn timer(&mut self, now: u64) {
        self.alarm.fired();
        self.expire(now);
        self.expire_away(now);
        self.fire_rule_timers(now);
        if self.retain_at.is_some_and(|at| at <= now) && self.presence.is_empty() {
            // Nobody came back within the retention: the room goes.
            self.retain_at = None;
            self.push(Output::Delete);
            return;
        }
        if self.summary.due.is_some_and(|due| due <= now) {
            self.flush_summary(now, None);
        }
        if self.sweep_at.is_some_and(|at| at <= now) {
            let ttl = self.config.presence_ttl_ms;
            let mut expired: Vec<String> = self
                .conns
                .iter()
                .filter(|(_, c)| c.link.is_none() && c.last_seen + ttl <= now)
                .map(|(id, _)| id.clone())
                .collect();
            expired.sort(); // deterministic order of leaves
            for conn in expired {
                self.close(now, &conn, CloseCode::Timeout);
            }
            self.sweep_at = self.next_sweep();
        }
    }

    /// Asks the adapter for an alarm at the earliest deadline, if the one
    /// already requested is not early enough.
    pub(super) fn arm(&mut self) {
        self.close_doomed();
        // A rules' timer due already was set by a hook of this event (the alarm fired the
        // others): it fires with the next one, never in this event ([`Self::fire_rule_timers`]),
        // and not sooner than `RETIMER_MS`: one that sets itself again for now (an interval a
        // member made 0) is ten firings a second, each a write, not a thousand.
        let soonest = self.now.saturating_add(crate::room::rules::RETIMER_MS);
        let rule_timer = self.timers.values().min().map(|at| at.ms().max(soonest));
        let want = [
            self.sweep_at,
            self.summary.due,
            self.next_expiry(),
            self.retain_at,
            rule_timer,
            self.next_away(),
        ]
        .into_iter()
        .flatten()
        .min();
        let flush = self.next_flush();
        if let Some(at) = self.wake.want(flush, self.now) {
            self.push(Output::SetWake(Time::from_ms(at)));
        }
        if let Some(at) = self.alarm.want(want, self.now) {
            self.push(Output::SetAlarm(Time::from_ms(at)));
        }
    }

    /// `GET /{kind}/{room}/presence` as `reader` (the token's user, as
    /// [`Rules::read`](crate::room::rules::Rules::read) sees them; `None` in
    /// anonymous dev mode): the member list, paid for from the reader's reply
    /// budget like any other answer the room sends them (at least 4 KiB). A
    /// user the operator blocked here, or one the rules keep out, reads nothing.
    ///
    /// ```
    /// use homeroom::room::rules::Who;
    /// use homeroom::room::{ReadRefusal, Room, RoomConfig, Snapshot, Time, READER_SESSION};
    /// let mut room = Room::restore(RoomConfig::default(), Snapshot::default(), Time::EPOCH);
    /// let ann =
    ///     Who { session: READER_SESSION, user: "ann", region: "EU", info: None, server: false };
    /// assert!(room.presence_read(Time::from_ms(1_000), Some(&ann)).is_ok());
    /// // 2 MiB of member lists at once is more than one user's burst.
    /// let refused = (0..100_000).find_map(|_| room.presence_read(Time::from_ms(1_000), Some(&ann)).err());
    /// assert!(matches!(refused, Some(ReadRefusal::Budget { .. })));
    /// ```
    pub fn presence_read(
        &mut self,
        now: Time,
        reader: Option<&Who<'_>>,
    ) -> Result<String, ReadRefusal> {
        let now = now.ms();
        self.now = self.now.max(now);
        let Some(who) = reader else {
            return Ok(self.presence_json());
        };
        let user = who.user;
        // Refused before the list is made: a read refused after making it cost the room a
        // list of every member for nothing, as often as the reader liked. And only to whom
        // the rules let read: a list of a members-only room is the members' own.
        if let Err(refused) = self.may_read(user).and_then(|()| self.rules_let_read(now, who)) {
            self.stats.refused_reads += 1;
            if let ReadRefusal::Rules(_) = refused {
                let floor = crate::room::READ_FLOOR_BYTES;
                self.users.reply_after(&self.config, user, floor, self.now);
            }
            return Err(refused);
        }
        let body = self.presence_json();
        let bytes = (body.len() as u64).max(crate::room::READ_FLOOR_BYTES);
        self.users.reply_after(&self.config, user, bytes, self.now);
        Ok(body)
    }

    /// The whole presence for `GET /rooms/{room}/presence`: every member,
    /// even in a large room, and the summary (nobody charged for it: see
    /// [`Room::presence_read`]).
    pub fn presence_json(&self) -> String {
        let summary = self.presence.summary(self.conns.len());
        let list =
            PresenceList { members: self.presence.view(), summary: &summary, large: self.large };
        serde_json::to_string(&list).unwrap_or_default()
    }

    fn next_sweep(&self) -> Option<u64> {
        let ttl = self.config.presence_ttl_ms;
        // A link's sessions live as long as the link: its far end, not the
        // room, watches their clients' heartbeats.
        self.conns.values().filter(|c| c.link.is_none()).map(|c| c.last_seen + ttl).min()
    }

    /// Tells the others what changed: a diff in a small room, a full reset
    /// when the room crosses the large-room line, then a (throttled) summary.
    fn members_changed(&mut self, now: u64, change: Change<'_>, except: Option<&str>) {
        let was_large = self.large;
        let n = self.presence.len();
        let large_room = self.config.large_room;
        // Hysteresis: a room hovering at the line does not flap.
        if !self.large && n > large_room {
            self.large = true;
        } else if self.large && n <= large_room - large_room / 10 {
            self.large = false;
        }
        if self.large != was_large {
            self.presence_stale = false; // the reset below is the whole list
            self.window.forget();
            let joins = if self.large { BTreeMap::new() } else { self.presence.view() };
            let frame =
                ServerFrame::Presence { joins, leaves: Vec::new(), reset: true, large: self.large }
                    .to_text();
            self.broadcast(frame.into(), except);
        } else if !self.large && self.busy() {
            // Shedding: the diff waits; the next summary sends the whole list.
            self.presence_stale = true;
        } else if !self.large {
            match change {
                Change::Joined { session, listed } => {
                    self.presence_changed(now, session, listed, except)
                }
                Change::Left(session) => self.presence_changed(now, session, true, None),
                Change::Quiet => {}
            }
        }
        // A joining connection reads the summary in its welcome, which must
        // be its first frame.
        self.summary_changed(now, except);
    }

    /// Leading and trailing edge: a change right after a quiet interval goes
    /// out at once; changes within the interval coalesce into one summary at
    /// its end.
    pub(super) fn summary_changed(&mut self, now: u64, except: Option<&str>) {
        if self.summary.due.is_some() {
            return;
        }
        match self.summary.sent_at {
            Some(at) if now < at + self.config.summary_interval_ms => {
                self.summary.due = Some(at + self.config.summary_interval_ms);
            }
            _ => self.flush_summary(now, except),
        }
    }

    /// Sends the summary if it differs from the last one sent (and, once the
    /// room is under its budget again, the member list diffs were held from).
    pub(super) fn flush_summary(&mut self, now: u64, except: Option<&str>) {
        self.summary.due = None;
        if self.presence_stale && !self.large && self.busy() {
            // still shedding: look again one interval later
            self.summary.due = Some(now + self.config.summary_interval_ms);
        } else if self.presence_stale && !self.large {
            self.presence_stale = false;
            self.window.forget();
            let joins = self.presence.view();
            let frame =
                ServerFrame::Presence { joins, leaves: Vec::new(), reset: true, large: false }
                    .to_text();
            self.broadcast(frame.into(), None);
        }
        let summary = self.presence.summary(self.conns.len());
        let behind = std::mem::take(&mut self.summary.behind);
        if self.summary.sent.as_ref() == Some(&summary) {
            // Nothing changed for those who had the last one; those welcomed
            // with other counts since still need it.
            let behind: Vec<String> = behind
                .into_iter()
                .filter(|c| Some(c.as_str()) != except && self.conns.contains_key(c))
                .collect();
            if !behind.is_empty() {
                let frame: Rc<str> = ServerFrame::Summary(&summary).to_text().into();
                for conn in behind {
                    self.send(&conn, frame.clone());
                }
            }
            return;
        }
        let frame = ServerFrame::Summary(&summary).to_text();
        self.broadcast(frame.into(), except);
        self.summary.sent = Some(summary);
        self.summary.sent_at = Some(now);
    }

    fn remember(&mut self, session: &str, m: &Member, now: u64) {
        let (exp, key, link) = match self.conns.get(&m.conn) {
            Some(c) => (c.expires, c.flow.key(), c.link.clone()),
            None => (None, 0, None),
        };
        let c = self.conns.get(&m.conn);
        let relay_flow = c.is_some_and(|c| !c.flow.metered());
        let relay_mirror = c.is_some_and(|c| c.mirror);
        let relay_signals = c.is_some_and(|c| c.signals_at_link);
        self.push(Output::Remember(Peer {
            conn: m.conn.clone(),
            session: session.to_owned(),
            user: m.user.clone(),
            region: m.region.clone(),
            opened: Time::from_ms(m.opened),
            since: Time::from_ms(m.since),
            seen: Time::from_ms(now),
            state: m.state.clone(),
            exp: exp.map(Time::from_ms),
            key,
            info: m.info.clone(),
            canary: m.canary,
            link,
            relay_flow,
            relay_mirror,
            relay_signals,
        }));
    }
}

/// What an accepted connection brings to its membership (from its [`Hello`](crate::room::Hello)).
pub(super) struct Joining<'a> {
    pub conn: &'a str,
    pub session: &'a str,
    pub user: String,
    pub region: String,
    /// The key of its flow-control marks.
    pub key: u64,
    pub expires: Option<u64>,
    pub info: Option<Box<RawValue>>,
    pub canary: bool,
    pub link: Option<String>,
    /// Its link's far end keeps its flow window ([`crate::room::Hello::relay_flow`]).
    pub relay_flow: bool,
    /// Its link's far end mirrors the room ([`crate::room::Hello::relay_mirror`]).
    pub relay_mirror: bool,
    /// Its link's far end coalesces its signals ([`crate::room::Hello::relay_signals`]).
    pub relay_signals: bool,
}
