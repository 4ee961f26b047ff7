//! Who may connect and what each frame costs: a session belongs to the user
//! who opened it, a user holds a bounded number of connections, connects at
//! a bounded pace and shares one budget over them, a blocked user stays
//! out, a token's `exp` ends its connection, and a mark echo that confirms
//! something new opens a connection's flow window again (the only free frame).

use super::{Conn, Room};
use crate::room::flow::Echo;
use crate::room::rate::Verdict;
use crate::room::{CloseCode, Error};

/// How long a departed member's session stays its user's (ms): long enough
/// for a dropped tab to come back.
const DEPARTED_MS: u64 = 10 * 60 * 1000;
/// Most departed sessions remembered; the oldest go first.
const DEPARTED_MAX: usize = 4096;

impl Room {
    /// Why a new connection of (`session`, `user`) must be turned away, if
    /// it must.
    pub(super) fn refuse_open(
        &mut self,
        now: u64,
        session: &str,
        user: &str,
        expires: Option<u64>,
        canary: bool,
    ) -> Option<CloseCode> {
        // The Worker's own canary is the only one let into its room, at most one run an isolate
        // at a time (edge/health.rs), every run as the one user `canary`: paced as a member,
        // anyone who called `/health` from enough places spent that one user's connect budget
        // and every canary after was closed 4429 (`/health` said 503 at `welcome`).
        if canary {
            return None;
        }
        // Every attempt costs one from the user's connect budget, a refused
        // one too: a connect is the most expensive thing a member can ask
        // of the room, and a loop of them must not be free.
        if !self.users.connect(&self.config, user, now) {
            self.stats.paced_connects += 1;
            return Some(CloseCode::ConnectRate);
        }
        if expires.is_some_and(|at| at <= now) {
            return Some(CloseCode::TokenExpired);
        }
        if self.users.blocked(user, now) {
            return Some(CloseCode::Blocked);
        }
        if self.owner_of(session, now).is_some_and(|owner| owner != user) {
            return Some(CloseCode::SessionTaken);
        }
        // A reconnect of a present session replaces its connection (an away member's is
        // gone already, and not counted).
        let live = self.presence.get(session).is_some_and(|m| self.conns.contains_key(&m.conn));
        if self.users.conns(user).saturating_sub(usize::from(live)) >= self.config.user_connections
        {
            return Some(CloseCode::TooManyConnections);
        }
        None
    }

    /// The user a session belongs to: its present member's, else the one
    /// whose writes under it are in the retained log (its ids must not
    /// collide with anyone else's), else the one whose member left lately.
    pub(super) fn owner_of(&self, session: &str, now: u64) -> Option<&str> {
        if let Some(m) = self.presence.get(session) {
            return Some(&m.user);
        }
        if let Some(user) = self.history.owner(session) {
            return Some(user);
        }
        self.departed
            .get(session)
            .filter(|(_, at)| now.saturating_sub(*at) < DEPARTED_MS)
            .map(|(user, _)| user.as_str())
    }

    /// Remembers that `session` of `user` left at `now`.
    pub(super) fn departed(&mut self, session: &str, user: &str, now: u64) {
        if self.departed.len() >= DEPARTED_MAX {
            self.departed.retain(|_, (_, at)| now.saturating_sub(*at) < DEPARTED_MS);
            if self.departed.len() >= DEPARTED_MAX {
                let oldest = self.departed.iter().min_by_key(|(_, (_, at))| *at);
                if let Some(key) = oldest.map(|(k, _)| k.clone()) {
                    self.departed.remove(&key);
                }
            }
        }
        self.departed.insert(session.to_owned(), (user.to_owned(), now));
    }

    /// Tracks a new connection: its user's count and its token's expiry.
    pub(super) fn add_conn(&mut self, id: &str, conn: Conn, now: u64) {
        self.users.add(&self.config, &conn.user, now);
        if let Some(at) = conn.expires {
            self.expiries.insert((at, id.to_owned()));
        }
        self.relayed.add(&conn);
        if let Some(old) = self.conns.insert(id.to_owned(), conn) {
            self.relayed.remove(&old);
        }
    }

    /// Stops tracking a connection.
    pub(super) fn drop_conn(&mut self, id: &str) -> Option<Conn> {
        let conn = self.conns.remove(id)?;
        self.relayed.remove(&conn);
        self.users.remove(&conn.user, self.now);
        if let Some(at) = conn.expires {
            self.expiries.remove(&(at, id.to_owned()));
        }
        Some(conn)
    }

    /// Rate-limits one frame (any frame is also a sign of life): the
    /// connection's budget, then its user's over all their connections.
    /// False when it must not be applied. A connection whose token expired
    /// is closed here, whether or not the alarm has fired yet.
    pub(super) fn admit(&mut self, now: u64, conn: &str, bytes: u64) -> bool {
        self.seen(now, conn);
        let Some(c) = self.conns.get_mut(conn) else {
            return false;
        };
        if c.expires.is_some_and(|at| at <= now) {
            self.stats.expired += 1;
            self.close(now, conn, CloseCode::TokenExpired);
            return false;
        }
        let mut verdict = c.limiter.check(&self.config, now);
        let mut why = Error::RateLimited;
        // The canary's user (every isolate's) is spared the user's budgets, as its connects are
        // (`refuse_open`): asked only when a budget says no, so other frames pay no lookup.
        let presence = &self.presence;
        let spared = || presence.get(&c.session).is_some_and(|m| m.canary);
        if verdict == Verdict::Allow && !self.users.frame(&self.config, &c.user, now) && !spared() {
            verdict = c.limiter.refused(&self.config, now);
        }
        // Bytes too: at 40 frames a second of 64 KiB, one member made every reader take 2.6
        // MB a second, and a burst of 100 (6.4 MB at once) was more than a reader may have
        // waiting (its window and `max_backlog`): every reader of the room closed 4013.
        // Not counted toward 4029: the budget is the user's, and another tab's traffic (or an
        // older client that paces frames only) spends it; refusing costs no fan-out.
        if verdict == Verdict::Allow
            && !self.users.bytes(&self.config, &c.user, bytes, now)
            && !spared()
        {
            verdict = Verdict::Refuse;
            why = Error::BytesLimited { per_sec: self.config.user_bytes_per_sec };
        }
        match verdict {
            Verdict::Allow => true,
            Verdict::Refuse => {
                self.stats.rate_limited += 1;
                self.refuse(conn, None, why);
                false
            }
            Verdict::Abuse => {
                self.close(now, conn, CloseCode::Abuse);
                false
            }
        }
    }

    /// An echoed mark: true when it confirms something new (the
    /// connection's window opens as far as the mark; frames waiting for it
    /// go). A spent or forged echo confirms nothing and is not free.
    pub(super) fn confirm(&mut self, conn: &str, mark: &str) -> bool {
        let Some(c) = self.conns.get_mut(conn) else {
            return false;
        };
        match c.flow.echo(mark) {
            Echo::Advanced => {
                c.stalled_since = None;
                self.release(conn);
                true
            }
            Echo::Spent => false,
        }
    }

    /// Whether `mark` is one the room sent `conn` (a spent echo, not a
    /// forged one): a few hashes, asked only of a frame already paid for.
    pub(super) fn issued(&self, conn: &str, mark: &str) -> bool {
        self.conns.get(conn).is_some_and(|c| c.flow.was_issued(mark))
    }

    /// Closes the connections whose token expired by `now`.
    pub(super) fn expire(&mut self, now: u64) {
        while let Some((at, conn)) = self.expiries.first().cloned() {
            if at > now {
                break;
            }
            self.expiries.pop_first();
            if self.conns.contains_key(&conn) {
                self.stats.expired += 1;
                self.close(now, &conn, CloseCode::TokenExpired);
            }
        }
    }

    /// The earliest token expiry, for the alarm.
    pub(super) fn next_expiry(&self) -> Option<u64> {
        self.expiries.first().map(|(at, _)| *at)
    }
}
