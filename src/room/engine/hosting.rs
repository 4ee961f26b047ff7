//! Hosting the application's rules: calling each hook with a [`Ctx`] over
//! the room, turning its verdict into what the engine does, and applying the
//! writes, sends and timers it asked for, in order, as writes of the rules
//! (sequenced, stored before seen, deduplicated by what triggered them).

use std::rc::Rc;

use serde_json::value::RawValue;

use super::writes::{Author, RULES_SESSION};
use super::Room;
use crate::protocol::names;
use crate::protocol::server::ServerFrame;
use crate::room::ids::{Cause, RuleIds};
use crate::room::io::{Output, StateWrite};
use crate::room::presence::Member;
use crate::room::rules::{self, Ctx, Effect, Join, Request, Response, Rules, Who, Write};
use crate::room::Time;
use crate::room::{CloseCode, Error, LogEntry, ReadRefusal};

/// Largest `info` a rule may attach to a member (bytes of JSON).
pub const MAX_INFO: usize = 1024;

impl Room {
    /// Calls `hook` on the rules with a [`Ctx`] over this room; returns what
    /// it returned and the effects it asked for. Timers are stored at once
    /// (they are the rules' own state, not a write anyone sees).
    fn call<T>(
        &mut self,
        now: u64,
        hook: impl FnOnce(&mut dyn Rules, &mut Ctx<'_>) -> T,
    ) -> (T, Vec<Effect>) {
        let Room { rules, name, state, presence, timers, .. } = self;
        let members = || presence.sessions();
        let mut ctx = Ctx::new(Time::from_ms(now), name, state, &members, timers);
        let out = hook(rules.as_mut(), &mut ctx);
        let (effects, changed, problems) = (ctx.effects, ctx.timers_changed, ctx.problems);
        for problem in problems {
            self.rule_problem(problem);
        }
        if changed {
            let all = self.timers.iter().map(|(n, at)| (n.clone(), *at)).collect();
            self.push(Output::Timers(all));
        }
        (out, effects)
    }

    /// Something a rule asked for that the room could not do (a value over a
    /// limit, a topic that is no topic): counted in `/stats`, the last one kept.
    pub(super) fn rule_problem(&mut self, problem: String) {
        self.stats.rule_problems += 1;
        self.stats.last_rule_problem = Some(problem);
    }

    /// The join hook for a connection the room would admit: the member's
    /// info (the rules' if they attached some, else the token's), and the
    /// effects to apply after the welcome; or the close that refuses it.
    pub(super) fn rules_join(
        &mut self,
        now: u64,
        conn: &str,
        session: &str,
        user: &str,
        region: &str,
        info: Option<Box<RawValue>>,
    ) -> Result<(Option<Box<RawValue>>, Vec<Effect>), CloseCode> {
        let who = Who { session, user, region, info: info.as_deref(), server: false };
        let (verdict, effects) = self.call(now, |r, ctx| r.join(ctx, &who));
        match verdict {
            Join::Accept => Ok((info, effects)),
            Join::AcceptWith(attached) if attached.get().len() > MAX_INFO => {
                self.rule_problem(format!("join info over {MAX_INFO} bytes for {conn}: dropped"));
                Ok((info, effects))
            }
            Join::AcceptWith(attached) => Ok((Some(attached), effects)),
            Join::Refuse(refusal) => {
                // A refused member never joined: what the rule asked for stays
                // (it may have written down the attempt), but nothing is sent
                // to a socket about to close.
                let writes = effects.into_iter().filter(|e| !matches!(e, Effect::Send { .. }));
                self.apply_effects(now, Cause::Join { conn }.ids(), Some(user), writes.collect());
                Err(CloseCode::Rule(refusal.code().to_owned()))
            }
        }
    }

    pub(super) fn rules_publish(
        &mut self,
        now: u64,
        author: &Author,
        topic: &str,
        data: &RawValue,
    ) -> (Write, Vec<Effect>) {
        let who = who(author);
        self.call(now, |r, ctx| r.publish(ctx, &who, topic, data))
    }

    pub(super) fn rules_set(
        &mut self,
        now: u64,
        author: &Author,
        key: &str,
        value: &RawValue,
    ) -> (Write, Vec<Effect>) {
        let who = who(author);
        // Borrow the current value out of the state for the hook: the state
        // is also borrowed by the context, immutably, so both can see it.
        let current = self.state.get(key).map(|(v, n)| (v.to_owned(), n));
        let current = current.as_ref().map(|(v, n)| rules::Current { value: v, version: *n });
        self.call(now, |r, ctx| r.set(ctx, &who, key, value, current))
    }

    /// A member left: the leave hook, and what it asked for.
    pub(super) fn rules_leave(&mut self, now: u64, session: &str, m: &Member) {
        if m.canary {
            return; // the rules never heard of it
        }
        let who = Who {
            session,
            user: &m.user,
            region: &m.region,
            info: m.info.as_deref(),
            server: false,
        };
        let ((), effects) = self.call(now, |r, ctx| r.leave(ctx, &who));
        self.apply_effects(now, Cause::Leave { conn: &m.conn }.ids(), Some(&m.user), effects);
    }

    /// Fires the rules' timers that were due when the alarm came, earliest first, each once. A
    /// timer a hook sets for now or earlier (a timer that sets itself again, with an interval a
    /// member made 0) waits for the next alarm, at least a millisecond later ([`Self::arm`]): fired
    /// in this loop it would spin until the runtime ended the event, and a Wasm instance the
    /// runtime ends takes every room it holds.
    pub(super) fn fire_rule_timers(&mut self, now: u64) {
        let mut due: Vec<(String, Time)> = self
            .timers
            .iter()
            .filter(|(_, at)| at.ms() <= now)
            .map(|(name, at)| (name.clone(), *at))
            .collect();
        due.sort_by_key(|(_, at)| *at);
        for (name, at) in due {
            if self.timers.get(&name) != Some(&at) {
                continue; // cancelled, or set for another time, by a hook fired before it
            }
            self.timers.remove(&name);
            let all = self.timers.iter().map(|(n, at)| (n.clone(), *at)).collect();
            self.push(Output::Timers(all));
            let ((), effects) = self.call(now, |r, ctx| r.timer(ctx, &name));
            // The same timer firing again (its removal lost) writes nothing twice.
            self.apply_effects(now, Cause::Timer { name: &name, at }.ids(), None, effects);
        }
    }

    /// The room was loaded: the loaded hook with the newest part of the log.
    pub(super) fn rules_loaded(&mut self, now: u64, recent: &[LogEntry]) {
        let ((), effects) = self.call(now, |r, ctx| r.loaded(ctx, recent));
        self.apply_effects(now, Cause::Loaded { at: Time::from_ms(now) }.ids(), None, effects);
    }

    /// A request under the room's path that the rules may answer (see
    /// [`Rules::request`]); `None` when they do not claim it. A caller whose
    /// token names a user the operator blocked in this room gets 403
    /// `blocked` without the rules being asked (a kick shuts a user out of
    /// the room's routes as well as its sockets); the admin key passes. A
    /// member pays for the answer from their reply budget, like for
    /// anything else the room sends them: one whose budget is spent gets
    /// 429 `rate_limited` (with `retry_ms`), and the rules are not asked.
    ///
    /// ```
    /// use homeroom::room::rules::Request;
    /// use homeroom::room::{Room, RoomConfig, Snapshot, Time};
    /// let mut room = Room::restore(RoomConfig::default(), Snapshot::default(), Time::EPOCH);
    /// let req = Request {
    ///     method: "GET".into(), path: "anything".into(), query: String::new(),
    ///     body: String::new(), admin: true, user: None,
    ///     info: None, region: String::new(),
    /// };
    /// assert_eq!(room.request(Time::from_ms(1_000), &req), None, "the open rules claim no path");
    /// ```
    pub fn request(&mut self, now: Time, req: &Request) -> Option<Response> {
        let now = now.ms();
        self.now = self.now.max(now);
        let member = req.user.as_deref().filter(|_| !req.admin);
        if let Some(user) = member {
            let who = Who {
                session: super::READER_SESSION,
                user,
                region: &req.region,
                info: req.info.as_deref(),
                server: false,
            };
            if let Err(refused) = self.may_read(user).and_then(|()| self.rules_let_read(now, &who))
            {
                self.stats.refused_reads += 1;
                if let ReadRefusal::Rules(_) = refused {
                    // Asking the rules was a turn of the room's too.
                    let floor = crate::room::READ_FLOOR_BYTES;
                    self.users.reply_after(&self.config, user, floor, self.now);
                }
                let mut body =
                    serde_json::json!({"error": refused.code(), "message": refused.message()});
                if let ReadRefusal::Budget { retry_ms, .. } = refused {
                    body["retry_ms"] = retry_ms.into();
                }
                return Some(Response::json(refused.status(), &body));
            }
        }
        self.requests += 1;
        let (response, effects) = self.call(now, |r, ctx| r.request(ctx, req));
        if let Some(user) = member {
            // A route the rules do not answer (404) was a turn of the room all the same.
            let bytes = response.as_ref().map_or(0, |answer| answer.body.len() as u64);
            let bytes = bytes.max(crate::room::READ_FLOOR_BYTES);
            self.users.reply_after(&self.config, user, bytes, self.now);
        }
        let cause = Cause::Request { at: Time::from_ms(now), n: self.requests };
        self.apply_effects(now, cause.ids(), member, effects);
        self.arm();
        response
    }

    /// Whether the rules let `who`, a reader over HTTP with a room token, read the room
    /// ([`Rules::read`]), asked without consequence: its effects are dropped and the timers
    /// it schedules go on a copy. What the effects weigh is charged to the reader's reply
    /// budget, as the sends of a join are charged to the joiner: a `join` that makes a large
    /// send is not made for free at every read.
    pub(super) fn rules_let_read(&mut self, now: u64, who: &Who<'_>) -> Result<(), ReadRefusal> {
        if self.users.conns(who.user) > 0 {
            // A member connected now is one: a `join` that answers "not now" (a full room)
            // must not shut its own members out of the list.
            return Ok(());
        }
        let (verdict, made) = self.ask_read(now, who);
        if made > 0 {
            self.users.reply_after(&self.config, who.user, made, self.now);
        }
        verdict
    }

    /// [`Rules::read`] on a scratch copy of the timers; its verdict, and the bytes of the
    /// effects it asked for (dropped).
    fn ask_read(&mut self, now: u64, who: &Who<'_>) -> (Result<(), ReadRefusal>, u64) {
        let Room { rules, name, state, presence, timers, .. } = self;
        let members = || presence.sessions();
        let mut scratch = timers.clone(); // at most MAX_TIMERS
        let mut ctx = Ctx::new(Time::from_ms(now), name, state, &members, &mut scratch);
        let verdict = rules.read(&mut ctx, who).map_err(ReadRefusal::Rules);
        let made = ctx.effects.iter().map(Effect::weight).sum();
        (verdict, made)
    }

    /// Whether `user` may be answered over HTTP now: not blocked here, and
    /// with some reply budget left (the answer's size is charged after it is
    /// made, so one answer may take the budget into debt, never two).
    pub(super) fn may_read(&mut self, user: &str) -> Result<(), ReadRefusal> {
        if self.users.blocked(user, self.now) {
            return Err(ReadRefusal::Blocked);
        }
        match self.users.reply_wait(&self.config, user, 1, self.now) {
            0 => Ok(()),
            retry_ms => Err(ReadRefusal::Budget { bytes: 0, retry_ms }),
        }
    }

    /// A rule's verdict on a value: the value to store, or the refusal. A
    /// rewrite is held to the limits a client's value is.
    pub(super) fn decided(
        &mut self,
        verdict: Write,
        value: Box<RawValue>,
    ) -> Result<Box<RawValue>, Error> {
        match verdict {
            Write::Accept => Ok(value),
            Write::Refuse(refusal) => Err(Error::Rule(refusal)),
            Write::Rewrite(new) => match self.fits(&new) {
                Ok(()) => Ok(new),
                Err(problem) => {
                    self.rule_problem(format!("a rewrite was refused: {problem}"));
                    Err(Error::Rule(rules::Refusal::new(
                        "rule_error",
                        "the room's rules produced a value the room cannot store",
                    )))
                }
            },
        }
    }

    /// Whether every write a hook asked for (its publishes and sets) is one the room can store,
    /// its sets together with the write the hook accepted (`own`, a member's `set`). If one is
    /// not, that write is refused with them, `rule_error`, and nothing the hook asked to
    /// publish, set or send happens (timers it scheduled stay): a write must not land without
    /// what the rules made of it (a vote counted into a tally whose list of voters had grown
    /// past what a state value may hold: every later vote was then counted again).
    pub(super) fn writes_fit(
        &mut self,
        own: Option<(&str, &RawValue)>,
        effects: &mut Vec<Effect>,
    ) -> Result<(), Error> {
        let problem = effects.iter().find_map(|effect| match effect {
            Effect::Publish { topic, data } => (!names::valid_topic(topic))
                .then(|| format!("publish to `{topic}`: not a topic"))
                .or_else(|| self.fits(data).err().map(|p| format!("publish to `{topic}`: {p}"))),
            Effect::Set { key, value } => self
                .fits(value)
                .and_then(|()| names::bounded(key).then_some(()).ok_or("not a key".to_owned()))
                .and_then(|()| {
                    self.state.check_fits(&self.config, key, value).map_err(|r| r.message())
                })
                .err()
                .map(|p| format!("set `{key}`: {p}")),
            _ => None,
        });
        let sets = effects.iter().filter_map(|effect| match effect {
            Effect::Set { key, value } => Some((key.as_str(), &**value)),
            _ => None,
        });
        let problem = problem.or_else(|| {
            let all = own.into_iter().chain(sets);
            self.state.check_fits_all(&self.config, all).err().map(|p| format!("sets: {p}"))
        });
        let Some(problem) = problem else { return Ok(()) };
        effects.clear();
        self.rule_problem(format!("{problem}; the write that caused it was refused"));
        Err(Error::Rule(rules::Refusal::new(
            "rule_error",
            "the room's rules produced a write the room cannot store",
        )))
    }

    /// Whether a value a rule made is one the room would take from a client.
    fn fits(&self, value: &RawValue) -> Result<(), String> {
        if value.get().len() > self.config.max_frame {
            return Err(format!("over {} bytes", self.config.max_frame));
        }
        crate::protocol::client::check_value(value, "value")
    }

    /// Applies what a hook asked for, in order: the rules' writes
    /// (sequenced, stored, deduplicated by the ids of their cause),
    /// and sends to one member's connection, paid for by `payer`: the user
    /// whose action caused them (none for the room's own timers and loads,
    /// and the operator's requests).
    pub(super) fn apply_effects(
        &mut self,
        now: u64,
        mut ids: RuleIds,
        payer: Option<&str>,
        effects: Vec<Effect>,
    ) {
        for (k, effect) in effects.into_iter().enumerate() {
            let id = ids.nth(k);
            if let (Some(user), Effect::Publish { .. } | Effect::Set { .. }) = (payer, &effect) {
                // What the rules write because of a member (a route that publishes its body, a
                // hook that writes more than it was given) is theirs to pay for, as their frames.
                self.users.charge_bytes(&self.config, user, effect.weight(), now);
            }
            match effect {
                Effect::Publish { topic, data } => {
                    if !names::valid_topic(&topic) {
                        self.rule_problem(format!("publish to `{topic}`: not a topic"));
                    } else if let Err(problem) = self.fits(&data) {
                        self.rule_problem(format!("publish to `{topic}`: {problem}"));
                    } else {
                        self.rule_write(now, id, topic, data, None);
                    }
                }
                Effect::Set { key, value } => {
                    let checked = self
                        .fits(&value)
                        .and_then(|()| {
                            names::bounded(&key).then_some(()).ok_or("not a key".to_owned())
                        })
                        .and_then(|()| {
                            let fits = self.state.check_fits(&self.config, &key, &value);
                            fits.map_err(|r| r.message())
                        });
                    match checked {
                        Ok(()) => {
                            let data = super::writes::state_data(&key, &value, self.seq + 1);
                            let write = Some(StateWrite { key, value });
                            self.rule_write(now, id, "$state".into(), data, write);
                        }
                        Err(problem) => self.rule_problem(format!("set `{key}`: {problem}")),
                    }
                }
                Effect::Send { session, topic, data } => {
                    let conn = self.presence.get(&session).map(|m| m.conn.clone());
                    let Some(conn) = conn.filter(|c| self.conns.contains_key(c)) else {
                        continue; // not here (any more), or away: a send is ephemeral
                    };
                    let frame: Rc<str> =
                        ServerFrame::Signal { session: RULES_SESSION, topic: &topic, data: &data }
                            .to_text()
                            .into();
                    let most = self.config.reply_burst_bytes.min(self.config.max_backlog);
                    if frame.len() as u64 > most {
                        self.rule_problem(format!("send on `{topic}`: over {most} bytes"));
                    } else if self.pay_for_send(now, payer, &conn, frame.len() as u64) {
                        self.send(&conn, frame);
                    } else {
                        self.stats.rule_sends_dropped += 1;
                    }
                }
            }
        }
    }

    /// Charges a send of the rules (`bytes` to `conn`) to `payer`'s reply
    /// budget. To the payer's own connection it always goes, once the budget
    /// has the bytes (the connection is held until then, like a catch-up: a
    /// newcomer's history arrives whole and in order, later). To anyone
    /// else it goes now if the payer's budget holds the bytes, else not at
    /// all (false): one member's actions never hold up another's frames.
    fn pay_for_send(&mut self, now: u64, payer: Option<&str>, conn: &str, bytes: u64) -> bool {
        let Some(payer) = payer else {
            return true;
        };
        if self.conns.get(conn).is_some_and(|c| c.user == payer) {
            let wait = self.users.reply_after(&self.config, payer, bytes, now);
            if wait > 0 {
                self.stats.held_replies += 1;
                self.hold(conn, now + wait);
            }
            true
        } else {
            self.users.reply(&self.config, payer, bytes, now)
        }
    }
}

fn who(author: &Author) -> Who<'_> {
    Who {
        session: &author.session,
        user: &author.user,
        region: &author.region,
        info: author.info.as_deref(),
        server: author.server,
    }
}
