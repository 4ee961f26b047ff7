//! The engine target's steps: applying each op, the end of a case, and the target itself.

#![allow(clippy::wildcard_imports)]
use super::*;

impl World<'_> {
    /// Runs one step.
    pub(super) fn step(&mut self, op: &Op) {
        let mut ctx = StepCtx { start: self.sim.now.ms(), ..Default::default() };
        self.stats.steps += 1;
        match op {
            Op::Connect { slot, resume, region, exp } => {
                let exp = exp.map(|e| (self.sim.now.ms() as i64 + e).max(0) as u64);
                self.connect_slot(&mut ctx, *slot, *resume, *region, exp);
            }
            Op::Hijack { slot, victim, region } => {
                let session = self.slots[*victim].session.clone();
                let user = user_name(self.slots[*slot].user);
                let r = self.connect(&mut ctx, None, session, user, None, None, *region, None);
                if !self.recs[r].refused && self.slots[*victim].user != self.slots[*slot].user {
                    self.stats.hijacks_taken += 1;
                }
            }
            Op::Send { pick, payload } => {
                let before = self.refusals();
                self.send_payload(&mut ctx, *pick, payload);
                self.check_refusals(before);
            }
            Op::Burst(frames) => {
                let before = self.refusals();
                for (pick, payload) in frames {
                    self.send_payload(&mut ctx, *pick, payload);
                }
                self.check_refusals(before);
            }
            Op::Late { pick, text } => {
                let closed: Vec<usize> =
                    (0..self.recs.len()).filter(|&r| !self.is_open(r)).collect();
                if !closed.is_empty() {
                    let conn = self.recs[closed[pick % closed.len()]].conn.clone();
                    self.stats.frames += 1;
                    let now = self.sim.now.ms();
                    self.sim.room.handle(
                        Time::from_ms(now),
                        crate::room::Input::Text { conn: &conn, text: &text.0 },
                    );
                    self.sim.pump();
                }
            }
            Op::Binary { pick, len } => {
                if let Some(r) = self.pick_open(*pick) {
                    let conn = self.recs[r].conn.clone();
                    let expired = self.recs[r].expires.is_some_and(|e| e <= self.sim.now.ms());
                    if *len > self.config().max_frame {
                        ctx.oversize.insert(r);
                    } else if !expired {
                        self.cost(r);
                    }
                    self.recs[r].active = self.sim.now.ms();
                    self.stats.frames += 1;
                    self.sim.send_binary(&conn, *len);
                }
            }
            Op::Drop { pick } => {
                if let Some(r) = self.pick_open(*pick) {
                    let conn = self.recs[r].conn.clone();
                    self.read(r, false);
                    self.sim.drop_conn(&conn);
                }
            }
            Op::RuntimeClose { pick } => {
                if !self.recs.is_empty() {
                    let r = pick % self.recs.len();
                    let conn = self.recs[r].conn.clone();
                    self.read(r, false);
                    self.sim.runtime_close(&conn);
                }
            }
            Op::Read { pick } => {
                if let Some(r) = self.pick_open(*pick) {
                    self.sim.end_turn();
                    let echo = self.recs[r].mode != Mode::Silent;
                    self.read(r, echo);
                }
            }
            Op::SetMode { pick, mode } => {
                if let Some(r) = self.pick_open(*pick) {
                    self.recs[r].mode = *mode;
                    if let Some(s) = self.recs[r].slot {
                        self.slots[s].mode = *mode;
                    }
                }
            }
            Op::Ping { pick } => {
                if let Some(r) = self.pick_open(*pick) {
                    let conn = self.recs[r].conn.clone();
                    self.sim.ping_runtime(&conn);
                    self.recs[r].active = self.sim.now.ms();
                }
            }
            Op::Evict => {
                // A pending timer keeps the object in memory (the runtime
                // hibernates only objects with none): it is evicted once
                // nothing waits for a turn's end, a window, a hold or a
                // due summary. Frames waiting for a client's echo keep a
                // timer for as long as they wait: no eviction then (finding
                // 1 was evicting anyway, and lost them).
                self.sim.settle();
                self.closures(&ctx);
                if !self.sim.hibernatable() {
                    // Frames wait for an echo (or a timer asked for work
                    // that went since has not fired yet): not now.
                    self.stats.evictions_skipped += 1;
                    return self.after(&ctx);
                }
                self.stats.add_room(&mut self.sim);
                self.stats.evictions += 1;
                self.sim.evict();
                self.departed.clear();
                self.fresh_budgets();
            }
            Op::Reset => {
                // Whatever the memory owed a socket either reaches it after the reload or the
                // socket is closed (1012) to resume: the checks of every step and of the end
                // find any frame lost or doubled.
                let owed = self.sim.room.frames_owed();
                ctx.reset = Some(owed);
                self.stats.add_room(&mut self.sim);
                self.stats.resets += 1;
                self.stats.resets_owing += u64::from(owed);
                self.stats.resets_owing_presence += u64::from(self.sim.room.presence_owed());
                self.sim.reset();
                self.departed.clear();
                self.fresh_budgets();
            }
            Op::Advance(ms) => self.sim.advance(*ms),
            Op::TurnEnds => {
                let now = self.sim.now.ms();
                self.sim.run_until(Time::from_ms(now));
            }
            Op::RunFor(ms) => {
                let until = self.sim.now.ms() + ms;
                self.sim.run_until(Time::from_ms(until));
            }
            Op::Settle => self.sim.settle(),
            Op::EarlyAlarm => self.sim.fire_alarm(),
            Op::Kick { user, block } => {
                let user = user_name(*user);
                let now = self.sim.now.ms();
                let held =
                    self.open_recs().into_iter().filter(|&r| self.recs[r].user == user).count();
                let block = match block {
                    BlockOp::Keep => Block::Keep,
                    BlockOp::For(ms) => {
                        self.blocks.insert(user.clone(), now + ms);
                        Block::Until(Time::from_ms(now + ms))
                    }
                    BlockOp::Lift => {
                        self.blocks.remove(&user);
                        Block::Lift
                    }
                };
                ctx.kick_user = Some(user.clone());
                let closed = self.sim.room.kick(Time::from_ms(now), &user, block);
                self.sim.pump();
                assert_eq!(closed, held, "[kick] closed {closed} of {held} connections");
            }
            Op::Drain => {
                ctx.drain = true;
                let held = self.open_recs().len();
                let now = self.sim.now.ms();
                let closed = self.sim.room.drain(Time::from_ms(now));
                self.sim.pump();
                assert_eq!(closed, held, "[drain] closed {closed} of {held}");
            }
            Op::Delete => {
                ctx.delete = true;
                let held = self.open_recs().len();
                let now = self.sim.now.ms();
                let closed = self.sim.room.delete(Time::from_ms(now));
                self.sim.pump();
                assert_eq!(closed, held, "[delete] closed {closed} of {held}");
            }
            Op::ServerPublish { id, topic, data } => {
                let raw = RawValue::from_string(data.0.clone()).expect("generated JSON");
                let retry = self
                    .log_keys
                    .get(&(crate::room::SERVER_SESSION.to_owned(), id.clone()))
                    .copied();
                let valid = names::bounded(id) && names::valid_topic(topic);
                let deep = deeper_than(&data.0, MAX_DEPTH);
                let now = self.sim.now.ms();
                let result = self.sim.room.server_publish(
                    Time::from_ms(now),
                    id.clone(),
                    topic.to_string(),
                    raw,
                    "EU".into(),
                );
                self.sim.pump();
                self.stats.server_publishes += 1;
                match result {
                    Ok(seq) => {
                        assert!(
                            valid && (retry.is_some() || !deep),
                            "[server_publish] accepted a bad write"
                        );
                        if let Some(before) = retry {
                            assert_eq!(seq, before, "[server_publish] a retry got a new seq");
                        }
                        self.check_ack(
                            crate::room::SERVER_SESSION,
                            crate::room::SERVER_SESSION,
                            id,
                            seq,
                            "server",
                        );
                    }
                    Err(_) => assert!(!valid || deep, "[server_publish] refused a good write"),
                }
            }
        }
        self.after(&ctx);
    }

    /// Advances virtual time to `until` while every open client answers
    /// pings and reads, as live clients do.
    pub(super) fn live_until(&mut self, until: u64) {
        let step = (self.config().presence_ttl_ms / 4).max(1);
        let ctx = StepCtx { start: self.sim.now.ms(), ..Default::default() };
        loop {
            for r in self.open_recs() {
                let conn = self.recs[r].conn.clone();
                self.sim.ping_runtime(&conn);
                self.recs[r].active = self.sim.now.ms();
            }
            let next = match self.sim.wake {
                Some(w) => w.ms().min(self.sim.now.ms() + step),
                None if self.sim.now.ms() < until => until.min(self.sim.now.ms() + step),
                None => break,
            };
            self.sim.run_until(Time::from_ms(next.max(self.sim.now.ms())));
            self.after(&ctx);
            if self.sim.now.ms() >= until && self.sim.wake.is_none() {
                break;
            }
        }
    }

    /// The end: blocks lifted, every client reconnects, reads and settles;
    /// each catches up to the room's seq, and sees the room's presence.
    pub(super) fn finish(&mut self) {
        for rec in &mut self.recs {
            rec.mode = Mode::Reading;
        }
        for slot in &mut self.slots {
            slot.mode = Mode::Reading;
        }
        let now = self.sim.now.ms();
        let blocked: Vec<String> =
            self.blocks.iter().filter(|(_, t)| **t > now).map(|(u, _)| u.clone()).collect();
        for user in blocked {
            let ctx = StepCtx { start: now, kick_user: Some(user.clone()), ..Default::default() };
            self.sim.room.kick(Time::from_ms(now), &user, Block::Lift);
            self.sim.pump();
            self.blocks.remove(&user);
            self.after(&ctx);
        }
        for s in 0..self.slots.len() {
            self.catch_up(s);
        }
        // Summaries and held presence go out within a few intervals.
        let until = self.sim.now.ms() + 3 * self.config().summary_interval_ms + 3_000;
        self.live_until(until);
        let seq = self.sim.room.seq();
        let presence = self.presence();
        for r in self.open_recs() {
            let who = format!("{} ({})", self.recs[r].conn, self.recs[r].session);
            assert_eq!(self.recs[r].applied, Some(seq), "[catch-up] {who} did not catch up");
            let (members_ok, summary_ok) = self.view_matches(r, &presence);
            let view = &self.recs[r].view;
            if !members_ok {
                let want = members_of(&presence, &self.recs[r].session);
                let seen = view_members(view, &self.recs[r].session);
                panic!(
                    "[presence] {who}: its member list against the room's (large: {} / {})\n  seen: {seen:?}\n  room: {want:?}\n  bytes waiting in the room: {}",
                    view.large,
                    presence["large"],
                    waiting_bytes(&mut self.sim)
                );
            }
            if !summary_ok {
                panic!(
                    "[summary] {who}: its last summary against the room's\n  seen: {:?}\n  room: {}\n  bytes waiting in the room: {}; now {}, alarm {:?}, last alarms asked {:?}",
                    view.summary,
                    presence["summary"],
                    waiting_bytes(&mut self.sim),
                    self.sim.now.ms(),
                    self.sim.alarm,
                    &self.sim.alarms_set[self.sim.alarms_set.len().saturating_sub(8)..],
                );
            }
        }
        // Every frame but an echo that confirms something new cost against its connection's
        // budget: what that budget alone could not pay for was refused.
        for r in self.open_recs() {
            let rec = &self.recs[r];
            assert!(
                rec.limited >= rec.must_refuse,
                "[rate] {} ({}): its own budget had to refuse {} frames; {} were",
                rec.conn,
                rec.session,
                rec.must_refuse,
                rec.limited
            );
            self.stats.refusals_owed += rec.must_refuse;
        }
        // Every ack of this incarnation is in the log where it said, or trimmed.
        let first = self.sim.disk.log.keys().next().copied().unwrap_or(u64::MAX);
        for ((session, id), seq) in &self.acks {
            if *seq >= first {
                let e = &self.sim.disk.log[seq];
                assert_eq!(
                    (&e.session, &e.id),
                    (session, id),
                    "[ack] the log moved an acked write"
                );
            }
        }
        let stats: Value = serde_json::from_str(&self.sim.room.stats_json()).unwrap();
        let most = stats["most_connections_of_a_user"].as_u64().unwrap_or(0);
        assert!(most as usize <= self.config().user_connections, "[users] most {most}");
        self.stats.add_room(&mut self.sim);
    }

    /// Brings slot `s` back and reads until it has everything.
    pub(super) fn catch_up(&mut self, s: usize) {
        for _ in 0..16 {
            let open = self.slots[s].rec.is_some_and(|r| self.is_open(r));
            if !open {
                let mut ctx = StepCtx { start: self.sim.now.ms(), ..Default::default() };
                let user = user_name(self.slots[s].user);
                // A user at the connection limit lets one of its tabs go.
                let mine: Vec<usize> =
                    self.open_recs().into_iter().filter(|&r| self.recs[r].user == user).collect();
                if mine.len() >= self.config().user_connections {
                    let conn = self.recs[mine[0]].conn.clone();
                    self.read(mine[0], false);
                    self.sim.drop_conn(&conn);
                    self.after(&ctx);
                }
                self.connect_slot(&mut ctx, s, Resume::Correct, 0, None);
                self.after(&ctx);
                // Paced (4429): the client backs off, long enough for a connect to refill.
                let r = self.slots[s].rec.expect("connected above");
                if self.recs[r].refused && self.sim.sockets[&self.recs[r].conn].closed == Some(4429)
                {
                    let wait = 1_000 / self.config().user_connects_per_sec.max(1) + 1;
                    let until = self.sim.now.ms() + wait;
                    self.live_until(until);
                }
                continue;
            }
            let r = self.slots[s].rec.unwrap();
            let until = self.sim.now.ms();
            self.live_until(until);
            if self.is_open(r)
                && self.recs[r].applied == Some(self.sim.room.seq())
                && self.sim.wake.is_none()
            {
                self.stats.catch_ups += 1;
                return;
            }
            if self.is_open(r) {
                // Time for a held catch-up (reply budget, storm jitter).
                let until = self.sim.now.ms() + 2_500;
                self.live_until(until);
            }
        }
        let r = self.slots[s].rec.map(|r| &self.recs[r]);
        panic!(
            "[catch-up] slot {s} did not catch up to {}: {:?}",
            self.sim.room.seq(),
            r.map(|r| (&r.conn, r.applied, self.sim.sockets[&r.conn].closed))
        );
    }
}

/// Bytes the room holds for connections (their windows are full, or they wait).
pub(super) fn waiting_bytes(sim: &mut Sim) -> u64 {
    let v: Value = serde_json::from_str(&sim.room.stats_json()).expect("stats are JSON");
    v["waiting_bytes"].as_u64().unwrap_or(0)
}

impl Txt {
    pub(super) fn short(&self) -> String {
        format!("{self:?}")
    }
}

/// Runs one engine case; panics at the first broken invariant.
pub(super) fn run_case(setup: &Setup, ops: &[Op], stats: &mut EngineStats, trace: bool) {
    let mut w = World::new(setup, stats, trace);
    for (i, op) in ops.iter().enumerate() {
        if trace {
            println!("  step {i} (t={}): {op:?}", w.sim.now.ms());
        }
        w.step(op);
    }
    if trace {
        println!("  finish (t={})", w.sim.now.ms());
    }
    w.finish();
    w.stats.cases += 1;
}

#[test]
pub(super) fn fuzz_engine() {
    let s = settings(100 - PARSER_SHARE);
    let start = Instant::now();
    let mut stats = EngineStats::default();
    let (mut first, mut last, mut index) = (None, 0u64, 0u64);
    while stats.frames < s.inputs {
        let seed = s.case.unwrap_or_else(|| case_seed(s.base, 2, index));
        first.get_or_insert(seed);
        last = seed;
        let (setup, ops) = gen_case(seed);
        let trace = s.case.is_some();
        if trace {
            println!("case {seed:#x}: {setup:#?}");
        }
        if let Err(message) = catch(|| run_case(&setup, &ops, &mut stats, trace)) {
            let sig = signature(&message);
            let mut scratch = EngineStats::default();
            let small = shrink(ops.clone(), 4_000, |cand| {
                catch(|| run_case(&setup, cand, &mut scratch, false))
                    .err()
                    .is_some_and(|m| signature(&m) == sig)
            });
            if std::env::var("FUZZ_TRACE").is_ok() {
                println!("trace of the shrunk case:");
                let again = catch(|| run_case(&setup, &small, &mut scratch, true));
                println!("trace result: {again:?}");
            }
            let steps: String =
                small.iter().enumerate().map(|(i, op)| format!("\n    {i:3}: {op:?}")).collect();
            panic!(
                "engine fuzz failure in case #{index}\n  case seed: {seed:#x} (replay: FUZZ_CASE={seed:#x} cargo test --lib fuzz_engine -- --nocapture)\n  \
                 message: {message}\n  config: {:?}\n  users {}, slot users {:?}, slot modes {:?}\n  {} ops, shrunk to {}:{steps}",
                setup.config,
                setup.users,
                setup.slot_users,
                setup.slot_modes,
                ops.len(),
                small.len()
            );
        }
        index += 1;
        if s.case.is_some() {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz_engine: {} frames fed in {} cases, {} steps, {} connects ({secs:.1} s, {:.0} frames/s); base seed {:#x}, case seeds {:#x}..{:#x}\n  \
         closes {:?}\n  refused opens {:?}\n  resumed {}, resync epoch {}, resync gap {}, state {}, conflicts {}, rate-limited {}, \
         signals {}, large resets {}, hijacks taken {}, marks echoed {}, evictions {} (skipped: a timer kept {}), resets {} ({} owing frames, {} presence), deletes {}, steps with a trimmed log {}, \
         server publishes {}, acks {}, messages {}, catch-ups {}, rule sends {}, refusals owed by a connection's own budget {} (checked at the end) and {} (checked per step)\n  room counters {:?}",
        stats.frames,
        stats.cases,
        stats.steps,
        stats.connects,
        stats.frames as f64 / secs,
        s.base,
        first.unwrap_or(0),
        last,
        stats.closes,
        stats.refusals,
        stats.resumed,
        stats.resync_epoch,
        stats.resync_gap,
        stats.state_frames,
        stats.conflicts,
        stats.rate_limited_frames,
        stats.signals_seen,
        stats.large_resets,
        stats.hijacks_taken,
        stats.marks_echoed,
        stats.evictions,
        stats.evictions_skipped,
        stats.resets,
        stats.resets_owing,
        stats.resets_owing_presence,
        stats.deletes,
        stats.trims,
        stats.server_publishes,
        stats.acks,
        stats.messages,
        stats.catch_ups,
        stats.rule_sends,
        stats.refusals_owed,
        stats.step_refusals_owed,
        stats.room,
    );
    if s.case.is_none() && s.inputs >= 10_000 {
        // Everything the generator is meant to reach was reached.
        for code in CLOSE_CODES.iter().filter(|c| ![4409, 4429].contains(*c)) {
            assert!(stats.closes.contains_key(code), "no close with {code}");
        }
        for code in [4401, 4403, 4409, 4429] {
            assert!(stats.refusals.contains_key(&code), "no connect refused with {code}");
        }
        for key in [
            "batches",
            "signals_dropped",
            "signals_coalesced",
            "deferred_replays",
            "held_replies",
            "backlog_closes",
            "stalled_closes",
            "rate_limited",
            "paced_connects",
            "rule_sends_dropped",
        ] {
            assert!(stats.room.get(key).is_some_and(|n| *n > 0), "room counter {key} never moved");
        }
        let reached = [
            ("resumes", stats.resumed),
            ("resyncs by epoch", stats.resync_epoch),
            ("resyncs by gap", stats.resync_gap),
            ("state replies", stats.state_frames),
            ("conflicts", stats.conflicts),
            ("large-room resets", stats.large_resets),
            ("sessions taken over", stats.hijacks_taken),
            ("evictions", stats.evictions),
            ("resets owing frames", stats.resets_owing),
            ("resets owing presence", stats.resets_owing_presence),
            ("deletes", stats.deletes),
            ("trimmed logs", stats.trims),
            ("final catch-ups", stats.catch_ups),
            ("sends of the rules", stats.rule_sends),
            ("refusals owed by a connection's own budget", stats.refusals_owed),
        ];
        for (what, n) in reached {
            assert!(n > 0, "never reached: {what}");
        }
    }
}
