//! The engine target's model: what each client saw, and the invariants checked against it.

#![allow(clippy::wildcard_imports)]
use super::*;

// ---- the engine target: the model it checks against ----------------------------

/// What one client has seen of the presence.
#[derive(Default, Debug)]
pub(super) struct View {
    pub(super) members: BTreeMap<String, Value>,
    pub(super) large: bool,
    pub(super) summary: Option<Value>,
}

/// One connection, as its client knows it.
#[derive(Debug)]
pub(super) struct Rec {
    pub(super) conn: String,
    pub(super) slot: Option<usize>,
    pub(super) session: String,
    pub(super) user: String,
    pub(super) since: Option<u64>,
    pub(super) epoch_sent: Option<String>,
    pub(super) expires: Option<u64>,
    /// Which incarnation of the room (deletes start a new one) it joined.
    pub(super) incarnation: u64,
    pub(super) mode: Mode,
    pub(super) welcomed: bool,
    pub(super) refused: bool,
    /// Its close was looked at.
    pub(super) closed_seen: bool,
    pub(super) welcome_seq: u64,
    /// The seq it has applied (after its welcome).
    pub(super) applied: Option<u64>,
    pub(super) epoch: Option<String>,
    /// A `resync` must come next, with this reason.
    pub(super) resync: Option<&'static str>,
    /// Marks received and not echoed yet, oldest first; and those echoed.
    pub(super) marks: Vec<String>,
    pub(super) echoed: Vec<String>,
    /// Its last frame, or the last ping the runtime answered (ms).
    pub(super) active: u64,
    pub(super) view: View,
    /// Its frame budget as the engine keeps it, the frames that budget alone must have
    /// refused (every frame costs but an echo that confirms something new), and the
    /// `rate_limited` answers it got.
    pub(super) bucket: ModelBucket,
    pub(super) must_refuse: u64,
    pub(super) limited: u64,
}

pub(super) struct Slot {
    pub(super) user: usize,
    pub(super) session: String,
    pub(super) generation: u32,
    pub(super) rec: Option<usize>,
    pub(super) mode: Mode,
    /// Where it left off: the seq it applied, in which epoch.
    pub(super) known: Option<(u64, String)>,
}

/// What the current step did, to judge the closes it caused.
#[derive(Default)]
pub(super) struct StepCtx {
    pub(super) start: u64,
    pub(super) connect: Option<usize>,
    pub(super) oversize: BTreeSet<usize>,
    pub(super) kick_user: Option<String>,
    pub(super) drain: bool,
    pub(super) delete: bool,
    /// A Wasm reset, and whether the room's memory owed its sockets frames then.
    pub(super) reset: Option<bool>,
}

/// Coverage and volume of the engine run.
#[derive(Default)]
pub(super) struct EngineStats {
    pub(super) cases: u64,
    pub(super) steps: u64,
    pub(super) frames: u64,
    pub(super) connects: u64,
    pub(super) closes: BTreeMap<u16, u64>,
    pub(super) refusals: BTreeMap<u16, u64>,
    pub(super) resumed: u64,
    pub(super) resync_epoch: u64,
    pub(super) resync_gap: u64,
    pub(super) state_frames: u64,
    pub(super) conflicts: u64,
    pub(super) rate_limited_frames: u64,
    pub(super) signals_seen: u64,
    pub(super) large_resets: u64,
    pub(super) hijacks_taken: u64,
    pub(super) marks_echoed: u64,
    pub(super) evictions: u64,
    /// Wasm resets, and those that found frames owed (their sockets closed 1012 to resume).
    pub(super) resets: u64,
    pub(super) resets_owing: u64,
    /// Wasm resets inside a presence window (every reader then gets the whole list).
    pub(super) resets_owing_presence: u64,
    /// Evictions not done because the room kept a timer (frames wait for
    /// an echo): the runtime does not hibernate it then.
    pub(super) evictions_skipped: u64,
    pub(super) deletes: u64,
    pub(super) trims: u64,
    pub(super) server_publishes: u64,
    pub(super) acks: u64,
    pub(super) messages: u64,
    pub(super) catch_ups: u64,
    /// Sends of the rules received, and refusals a connection's own budget owed (checked).
    pub(super) rule_sends: u64,
    pub(super) refusals_owed: u64,
    pub(super) step_refusals_owed: u64,
    /// From the room's own counters (`stats_json`), summed.
    pub(super) room: BTreeMap<String, u64>,
}

impl EngineStats {
    pub(super) fn add_room(&mut self, sim: &mut Sim) {
        let v: Value = serde_json::from_str(&sim.room.stats_json()).expect("stats are JSON");
        for key in [
            "batches",
            "signals_dropped",
            "signals_coalesced",
            "deferred_replays",
            "held_replies",
            "rate_limited",
            "refused_opens",
            "expired",
            "backlog_closes",
            "stalled_closes",
            "paced_connects",
            "rule_sends_dropped",
        ] {
            *self.room.entry(key.to_owned()).or_default() += v[key].as_u64().unwrap_or(0);
        }
    }
}

/// The simulated room, the clients and the model the invariants compare with.
pub(super) struct World<'a> {
    pub(super) setup: &'a Setup,
    pub(super) sim: Sim,
    pub(super) slots: Vec<Slot>,
    pub(super) recs: Vec<Rec>,
    /// The connections whose close has not been looked at yet (the rest
    /// are closed for good), oldest first.
    pub(super) live: Vec<usize>,
    pub(super) incarnation: u64,
    pub(super) deleted_seen: usize,
    /// (session, id) -> seq acked, this incarnation.
    pub(super) acks: HashMap<(String, String), u64>,
    /// The retained log as checked so far: seq -> (session, id, user, bytes).
    pub(super) log: BTreeMap<u64, (String, String, String, u64)>,
    pub(super) log_keys: HashMap<(String, String), u64>,
    pub(super) log_bytes: u64,
    pub(super) log_checked: u64,
    /// user -> blocked until (ms).
    pub(super) blocks: HashMap<String, u64>,
    /// session -> (user, left no earlier than, left no later than).
    pub(super) departed: HashMap<String, (String, u64, u64)>,
    /// user -> their connect budget, as the engine keeps it (each load starts afresh).
    pub(super) connects: HashMap<String, ModelBucket>,
    /// user -> what the rules sent because of them.
    pub(super) accounts: HashMap<String, Account>,
    /// Times the room was loaded again (evicted).
    pub(super) loads: u64,
    pub(super) stats: &'a mut EngineStats,
    pub(super) trace: bool,
}

pub(super) fn summary_of(v: &Value) -> Value {
    let mut s = v.clone();
    if let Some(o) = s.as_object_mut() {
        o.remove("type");
    }
    s
}

/// The room's members as `presence_json` lists them, but `own`.
pub(super) fn members_of(presence: &Value, own: &str) -> BTreeMap<String, Value> {
    presence["members"]
        .as_object()
        .expect("members")
        .iter()
        .filter(|(k, _)| *k != own)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A client's member list, but its own session (its own presence updates
/// are not echoed to it).
pub(super) fn view_members(view: &View, own: &str) -> BTreeMap<String, Value> {
    view.members.iter().filter(|(k, _)| *k != own).map(|(k, v)| (k.clone(), v.clone())).collect()
}

impl<'a> World<'a> {
    pub(super) fn presence(&self) -> Value {
        serde_json::from_str(&self.sim.room.presence_json()).expect("presence is JSON")
    }

    /// Whether `r`'s member list and summary are the room's.
    pub(super) fn view_matches(&self, r: usize, presence: &Value) -> (bool, bool) {
        let rec = &self.recs[r];
        let large = presence["large"] == true;
        let members_ok = rec.view.large == large
            && (large
                || view_members(&rec.view, &rec.session) == members_of(presence, &rec.session));
        let summary_ok = rec.view.summary.as_ref() == Some(&presence["summary"]);
        (members_ok, summary_ok)
    }

    pub(super) fn new(setup: &'a Setup, stats: &'a mut EngineStats, trace: bool) -> World<'a> {
        let slots = setup
            .slot_users
            .iter()
            .enumerate()
            .map(|(i, &user)| Slot {
                user,
                session: format!("sess-slot{i}-g0"),
                generation: 0,
                rec: None,
                mode: setup.slot_modes[i],
                known: None,
            })
            .collect();
        let mut sim = match setup.rules {
            Some(rules) => Sim::with_rules(setup.config.clone(), move || Box::new(rules)),
            None => Sim::new(setup.config.clone()),
        };
        // The control of `Op::Reset` (tests/FUZZ.md): an adapter that forgets what the
        // memory owed, which the checks must catch.
        sim.keeps_owed = std::env::var_os("FUZZ_FORGET_OWED").is_none();
        World {
            setup,
            sim,
            slots,
            recs: Vec::new(),
            live: Vec::new(),
            incarnation: 0,
            deleted_seen: 0,
            acks: HashMap::new(),
            log: BTreeMap::new(),
            log_keys: HashMap::new(),
            log_bytes: 0,
            log_checked: 0,
            blocks: HashMap::new(),
            departed: HashMap::new(),
            connects: HashMap::new(),
            accounts: HashMap::new(),
            loads: 0,
            stats,
            trace,
        }
    }

    pub(super) fn config(&self) -> &RoomConfig {
        &self.setup.config
    }

    pub(super) fn is_open(&self, r: usize) -> bool {
        self.sim.sockets[&self.recs[r].conn].open
    }

    pub(super) fn open_recs(&self) -> Vec<usize> {
        self.live.iter().copied().filter(|&r| self.is_open(r)).collect()
    }

    pub(super) fn pick_open(&self, pick: usize) -> Option<usize> {
        let open = self.open_recs();
        (!open.is_empty()).then(|| open[pick % open.len()])
    }

    /// The user a session belongs to, as the room must see it: `Err` when
    /// the model cannot tell (a departure near the end of its window).
    pub(super) fn owner(&self, session: &str) -> Result<Option<String>, ()> {
        if let Some(r) = self.open_recs().into_iter().find(|&r| self.recs[r].session == session) {
            return Ok(Some(self.recs[r].user.clone()));
        }
        if let Some((_, _, user, _)) = self.log.values().find(|(s, _, _, _)| s == session) {
            return Ok(Some(user.clone()));
        }
        match self.departed.get(session) {
            Some((user, lo, hi)) => {
                let now = self.sim.now.ms();
                if now.saturating_sub(*hi) >= DEPARTED_MS {
                    Ok(None)
                } else if now.saturating_sub(*lo) < DEPARTED_MS {
                    Ok(Some(user.clone()))
                } else {
                    Err(())
                }
            }
            None => Ok(None),
        }
    }

    /// The close code a connect of (`session`, `user`) must get, if any.
    pub(super) fn expected_refusal(
        &self,
        session: &str,
        user: &str,
        exp: Option<u64>,
    ) -> Result<Option<u16>, ()> {
        let now = self.sim.now.ms();
        if exp.is_some_and(|e| e <= now) {
            return Ok(Some(4401));
        }
        if self.blocks.get(user).is_some_and(|until| *until > now) {
            return Ok(Some(4403));
        }
        if self.owner(session)?.is_some_and(|o| o != user) {
            return Ok(Some(4409));
        }
        let open = self.open_recs();
        let held = open.iter().filter(|&&r| self.recs[r].user == user).count();
        let replaces = usize::from(open.iter().any(|&r| self.recs[r].session == session));
        if held - replaces >= self.config().user_connections {
            return Ok(Some(4429));
        }
        Ok(None)
    }

    #[allow(clippy::too_many_arguments)] // what one connect brings
    pub(super) fn connect(
        &mut self,
        ctx: &mut StepCtx,
        slot: Option<usize>,
        session: String,
        user: String,
        since: Option<u64>,
        epoch: Option<String>,
        region: usize,
        expires: Option<u64>,
    ) -> usize {
        // Every attempt costs one from the user's connect budget, first.
        let now = self.sim.now.ms();
        let c = self.config();
        let (rate, burst) = (c.user_connects_per_sec, c.user_connect_burst);
        let loads = self.loads;
        self.accounts.entry(user.clone()).or_insert(Account {
            since: now,
            loads_then: loads,
            bytes: 0,
        });
        let paced = !self
            .connects
            .entry(user.clone())
            .or_insert_with(|| ModelBucket::full(burst, now))
            .take(rate, burst, now);
        let expected =
            if paced { Ok(Some(4429)) } else { self.expected_refusal(&session, &user, expires) };
        let previous = self.open_recs().into_iter().find(|&r| self.recs[r].session == session);
        let conn = self.sim.connect_hello(
            &session,
            &user,
            REGIONS[region],
            since,
            epoch.as_deref(),
            expires.map(Time::from_ms),
        );
        self.stats.connects += 1;
        let r = self.recs.len();
        let mode = slot.map_or(Mode::Reading, |s| self.slots[s].mode);
        self.recs.push(Rec {
            conn: conn.clone(),
            slot,
            session,
            user,
            since,
            epoch_sent: epoch,
            expires,
            incarnation: self.incarnation,
            mode,
            welcomed: false,
            refused: false,
            closed_seen: false,
            welcome_seq: 0,
            applied: None,
            epoch: None,
            resync: None,
            marks: Vec::new(),
            echoed: Vec::new(),
            active: self.sim.now.ms(),
            view: View::default(),
            bucket: ModelBucket::full(self.setup.config.burst, self.sim.now.ms()),
            must_refuse: 0,
            limited: 0,
        });
        self.live.push(r);
        ctx.connect = Some(r);
        let socket = &self.sim.sockets[&conn];
        if self.trace {
            let kinds: Vec<String> =
                socket.inbox.iter().map(|f| Txt(f.to_string()).short()).collect();
            println!(
                "    {conn} opened at {}: {kinds:?}, closed {:?}",
                self.sim.now.ms(),
                socket.closed
            );
        }
        let refused = socket.inbox.is_empty() && socket.closed.is_some();
        let code = socket.closed.filter(|_| refused);
        if let Some(code) = code {
            assert!(
                [4401, 4403, 4409, 4429].contains(&code),
                "[open] a connect refused with {code} and no welcome"
            );
            self.recs[r].refused = true;
            self.recs[r].closed_seen = true;
            self.live.retain(|&l| l != r);
            *self.stats.refusals.entry(code).or_default() += 1;
        }
        if let Ok(expected) = expected {
            assert_eq!(code, expected, "[open] refusal of a connect (None: accepted)");
        }
        if let Some(p) = previous {
            let closed = self.sim.sockets[&self.recs[p].conn].closed;
            match code {
                None => assert_eq!(
                    closed,
                    Some(4001),
                    "[supersede] the session's older socket must go with 4001"
                ),
                Some(_) => assert!(self.is_open(p), "[supersede] a refused connect closed {p}"),
            }
        }
        if let Some(s) = slot {
            self.slots[s].rec = Some(r);
            if code == Some(4409) {
                // The client takes a new session (its user's tab id is taken).
                let sl = &mut self.slots[s];
                sl.generation += 1;
                sl.session = format!("sess-slot{s}-g{}", sl.generation);
            }
        }
        r
    }

    pub(super) fn connect_slot(
        &mut self,
        ctx: &mut StepCtx,
        s: usize,
        resume: Resume,
        region: usize,
        exp: Option<u64>,
    ) {
        // Whatever reached the old socket was read before it closed.
        if let Some(r) = self.slots[s].rec {
            self.read(r, false);
        }
        let known = self.slots[s].known.clone();
        let (since, epoch) = match (resume, known) {
            (Resume::Fresh, _) => (None, None),
            (Resume::Correct, Some((a, e))) => (Some(a), Some(e)),
            (Resume::Stale(k), Some((a, e))) => (Some(a.saturating_sub(k)), Some(e)),
            (Resume::Future(k), Some((a, e))) => (Some(a + k + 1), Some(e)),
            (Resume::Future(k), None) => {
                (Some(self.sim.room.seq() + k + 1), Some(self.sim.room.epoch().to_owned()))
            }
            (Resume::BogusEpoch, k) => (Some(k.map_or(0, |k| k.0)), Some("e-bogus".to_owned())),
            (Resume::NoEpoch, k) => (Some(k.map_or(0, |k| k.0)), None),
            (_, None) => (None, None),
        };
        let user = user_name(self.slots[s].user);
        let session = self.slots[s].session.clone();
        self.connect(ctx, Some(s), session, user, since, epoch, region, exp);
    }

    /// Sends one text on an open connection, as its client does; `free` when it is an echo
    /// of a mark outstanding (the one frame that costs nothing).
    pub(super) fn send_text(&mut self, ctx: &mut StepCtx, r: usize, text: &str, free: bool) {
        let now = self.sim.now.ms();
        let max = self.config().max_frame;
        let conn = self.recs[r].conn.clone();
        let expired = self.recs[r].expires.is_some_and(|e| e <= now);
        let is_mark = matches!(parse(text), Ok(ClientFrame::Mark { .. }));
        if text.len() > max {
            ctx.oversize.insert(r);
        } else if !free && !expired {
            self.cost(r);
        }
        self.recs[r].active = now;
        self.stats.frames += 1;
        self.sim.send(&conn, text);
        if text.len() > max {
            assert_eq!(self.sim.sockets[&conn].closed, Some(1009), "[1009] a frame over the limit");
        } else if expired && !is_mark {
            assert_eq!(
                self.sim.sockets[&conn].closed,
                Some(4401),
                "[4401] a frame on a connection whose token expired"
            );
        }
    }

    /// (refusals the connections' own budgets owe, refusals the room counted, connections
    /// closed 4029): before and after the frames of one step.
    pub(super) fn refusals(&mut self) -> (u64, u64, usize) {
        let owed = self.recs.iter().map(|r| r.must_refuse).sum();
        let v: Value = serde_json::from_str(&self.sim.room.stats_json()).expect("stats are JSON");
        let counted = v["rate_limited"].as_u64().expect("rate_limited");
        let closed = self.sim.sockets.values().filter(|s| s.closed == Some(4029)).count();
        (owed, counted, closed)
    }

    /// Every frame but an echo that confirms something new costs against its connection's
    /// budget: the frames of a step that the budgets could not pay for were refused
    /// (`rate_limited`, or the one that closed a flood with 4029).
    pub(super) fn check_refusals(&mut self, (owed, counted, closed): (u64, u64, usize)) {
        let (owed_now, counted_now, closed_now) = self.refusals();
        let owed = owed_now - owed;
        let refused = counted_now.saturating_sub(counted) + (closed_now - closed) as u64;
        self.stats.step_refusals_owed += owed;
        assert!(
            refused >= owed,
            "[rate] the connections' own budgets could not pay for {owed} frames of this step; the room refused {refused}"
        );
    }

    /// The room was loaded again (after an eviction or a delete): every budget starts
    /// afresh, the connections' and the users'.
    pub(super) fn fresh_budgets(&mut self) {
        self.loads += 1;
        self.connects.clear();
        let (burst, now) = (self.setup.config.burst, self.sim.now.ms());
        for r in self.open_recs() {
            self.recs[r].bucket = ModelBucket::full(burst, now);
        }
    }

    /// One frame against `r`'s own budget: one its bucket cannot pay for must be refused.
    pub(super) fn cost(&mut self, r: usize) {
        let (rate, burst) = (self.setup.config.rate_per_sec, self.setup.config.burst);
        let now = self.sim.now.ms();
        if !self.recs[r].bucket.take(rate, burst, now) {
            self.recs[r].must_refuse += 1;
        }
    }

    pub(super) fn send_payload(&mut self, ctx: &mut StepCtx, pick: usize, payload: &Payload) {
        let Some(r) = self.pick_open(pick) else { return };
        let mut free = false;
        let text = match payload {
            Payload::Text(t) => t.0.clone(),
            Payload::SetCurrent { id, key, value, delta } => {
                let version = self.sim.disk.state.get(key).map_or(0, |(_, v)| *v);
                let v = (version as i64 + delta).max(0);
                format!(
                    r#"{{"type":"set","id":"{id}","key":"{key}","value":{},"if_version":{v}}}"#,
                    value.0
                )
            }
            Payload::Mark(pick) => {
                let rec = &self.recs[r];
                let token = match pick {
                    MarkPick::Latest => rec.marks.last().cloned(),
                    MarkPick::Oldest => rec.marks.first().cloned(),
                    MarkPick::Stale => rec.echoed.last().cloned(),
                    MarkPick::Foreign => self
                        .recs
                        .iter()
                        .filter(|o| o.conn != rec.conn)
                        .find_map(|o| o.marks.first().or(o.echoed.first()).cloned()),
                    MarkPick::Forged(t) => Some(t.0.clone()),
                };
                let token = token.unwrap_or_else(|| "feedfacecafebeef".into());
                if let Some(i) = self.recs[r].marks.iter().position(|m| *m == token) {
                    let echoed: Vec<String> = self.recs[r].marks.drain(..=i).collect();
                    self.recs[r].echoed.extend(echoed);
                    free = true;
                }
                serde_json::json!({"type": "mark", "mark": token}).to_string()
            }
        };
        self.send_text(ctx, r, &text, free);
    }

    /// Reads what reached `r`'s socket, checking it frame by frame; echoes
    /// the marks when `echo` (and the socket is open).
    pub(super) fn read(&mut self, r: usize, echo: bool) {
        let conn = self.recs[r].conn.clone();
        let frames = std::mem::take(&mut self.sim.sockets.get_mut(&conn).unwrap().inbox);
        let mut marks = Vec::new();
        for f in frames {
            if f["type"] == "mark" {
                let token = f["mark"].as_str().expect("[mark] a token").to_owned();
                assert!(self.recs[r].welcomed, "[mark] before the welcome");
                marks.push(token);
            } else {
                self.apply(r, &f);
            }
        }
        self.recs[r].marks.extend(marks);
        if echo && self.is_open(r) && !self.recs[r].marks.is_empty() {
            let marks = std::mem::take(&mut self.recs[r].marks);
            for m in marks {
                if !self.is_open(r) {
                    break;
                }
                let text = format!(r#"{{"type":"mark","mark":"{m}"}}"#);
                self.stats.marks_echoed += 1;
                self.stats.frames += 1;
                self.recs[r].active = self.sim.now.ms();
                self.sim.send(&conn, &text);
                self.recs[r].echoed.push(m);
            }
        }
    }

    /// Checks one frame a connection received, in order, against the model.
    pub(super) fn apply(&mut self, r: usize, f: &Value) {
        let current = self.recs[r].incarnation == self.incarnation;
        let kind = f["type"].as_str().expect("[frame] a type").to_owned();
        let who = format!("{} ({})", self.recs[r].conn, self.recs[r].session);
        if !self.recs[r].welcomed {
            assert_eq!(kind, "welcome", "[welcome] {who}: the first frame must be the welcome");
        }
        if self.trace {
            println!("    {who} <- (t={}) {}", self.sim.now.ms(), Txt(f.to_string()).short());
        }
        match kind.as_str() {
            "welcome" => {
                let rec = &mut self.recs[r];
                assert!(!rec.welcomed, "[welcome] {who}: a second welcome");
                rec.welcomed = true;
                assert_eq!(f["session"], rec.session.as_str(), "[welcome] {who}: session");
                assert_eq!(f["user"], rec.user.as_str(), "[welcome] {who}: user");
                assert_eq!(f["conn"], rec.conn.as_str(), "[welcome] {who}: conn");
                let seq = f["seq"].as_u64().expect("[welcome] seq");
                let epoch = f["epoch"].as_str().expect("[welcome] epoch").to_owned();
                let resumed = f["resumed"].as_bool().expect("[welcome] resumed");
                let missed = f["missed"].as_u64().expect("[welcome] missed");
                rec.welcome_seq = seq;
                let limit = self.setup.config.replay_limit;
                match rec.since {
                    None => {
                        assert!(!resumed && missed == 0, "[welcome] {who}: resumed without since");
                        rec.applied = Some(seq);
                    }
                    Some(since) => {
                        let epoch_ok = rec.epoch_sent.as_deref() == Some(epoch.as_str());
                        let can = epoch_ok && since <= seq && seq - since <= limit;
                        assert_eq!(resumed, can, "[resume] {who}: since {since}, seq {seq}, limit {limit}, epoch ok {epoch_ok}");
                        if resumed {
                            assert_eq!(missed, seq - since, "[resume] {who}: missed");
                            rec.applied = Some(since);
                            self.stats.resumed += 1;
                        } else {
                            assert_eq!(missed, 0, "[resume] {who}: missed without a replay");
                            let reason = if !epoch_ok || since > seq { "epoch" } else { "gap" };
                            rec.resync = Some(reason);
                            rec.applied = Some(seq);
                        }
                    }
                }
                rec.epoch = Some(epoch);
                let p = &f["presence"];
                rec.view.large = p["large"] == true;
                rec.view.members = p["members"]
                    .as_object()
                    .expect("[welcome] members")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                rec.view.summary = Some(p["summary"].clone());
                if current {
                    assert!(seq <= self.sim.disk.seq, "[welcome] {who}: seq past the log");
                }
            }
            "resync" => {
                let rec = &mut self.recs[r];
                let reason = rec
                    .resync
                    .take()
                    .expect("[resync] only right after a welcome that did not resume");
                assert_eq!(f["reason"], reason, "[resync] {who}: reason");
                assert_eq!(f["seq"], rec.welcome_seq, "[resync] {who}: seq of the welcome");
                rec.applied = Some(rec.welcome_seq);
                if reason == "epoch" {
                    self.stats.resync_epoch += 1;
                } else {
                    self.stats.resync_gap += 1;
                }
            }
            "state" => {
                let rec = &mut self.recs[r];
                assert!(rec.resync.is_none(), "[state] {who}: before the resync");
                let seq = f["seq"].as_u64().expect("[state] seq");
                let applied = rec.applied.expect("welcomed");
                assert!(seq >= applied, "[state] {who}: state at {seq} after message {applied}");
                rec.applied = Some(seq);
                self.stats.state_frames += 1;
            }
            "message" => {
                let rec = &mut self.recs[r];
                assert!(rec.resync.is_none(), "[resync] {who}: a message before the resync");
                let seq = f["seq"].as_u64().expect("[message] seq");
                let applied = rec.applied.expect("welcomed");
                assert_eq!(seq, applied + 1, "[gap] {who}: message {seq} after {applied}");
                rec.applied = Some(seq);
                self.stats.messages += 1;
                if current {
                    if let Some(e) = self.sim.disk.log.get(&seq) {
                        assert_eq!(
                            (f["session"].as_str(), f["id"].as_str(), f["user"].as_str()),
                            (Some(e.session.as_str()), Some(e.id.as_str()), Some(e.user.as_str())),
                            "[message] {who}: seq {seq} is another write in the log"
                        );
                    }
                }
            }
            "ack" => {
                let rec = &self.recs[r];
                let id = f["id"].as_str().expect("[ack] id").to_owned();
                let seq = f["seq"].as_u64().expect("[ack] seq");
                self.stats.acks += 1;
                if current {
                    self.check_ack(&rec.session.clone(), &rec.user.clone(), &id, seq, &who);
                }
            }
            "signal" => {
                let rec = &self.recs[r];
                assert_ne!(f["session"], rec.session.as_str(), "[signal] {who}: its own signal");
                let topic = f["topic"].as_str().expect("[signal] topic");
                assert!(names::valid_topic(topic), "[signal] {who}: topic {topic:?}");
                self.stats.signals_seen += 1;
                if f["session"] == crate::room::RULES_SESSION {
                    self.rules_sent(f, &who);
                }
            }
            "presence" => {
                let rec = &mut self.recs[r];
                let joins = f["joins"].as_object().expect("[presence] joins");
                let leaves = f["leaves"].as_array().expect("[presence] leaves");
                assert!(
                    !leaves.iter().any(|s| *s == rec.session.as_str()),
                    "[presence] {who}: told of its own leave"
                );
                // A diff tells a reader what changed among the others; its own state is its own.
                assert!(
                    f["reset"] == true || !joins.contains_key(&rec.session),
                    "[presence] {who}: a diff names its own session"
                );
                assert!(
                    !leaves.iter().any(|s| s.as_str().is_some_and(|s| joins.contains_key(s))),
                    "[presence] {who}: a session joins and leaves in one diff"
                );
                if f["reset"] == true {
                    rec.view.large = f["large"] == true;
                    rec.view.members.clear();
                    if rec.view.large {
                        self.stats.large_resets += 1;
                        assert!(joins.is_empty(), "[presence] {who}: a large reset with joins");
                    }
                }
                for (s, m) in joins {
                    rec.view.members.insert(s.clone(), m.clone());
                }
                for s in leaves {
                    rec.view.members.remove(s.as_str().expect("[presence] a session"));
                }
            }
            "summary" => {
                self.recs[r].view.summary = Some(summary_of(f));
            }
            "error" => {
                let code = f["code"].as_str().expect("[error] code");
                assert!(ERROR_CODES.contains(&code), "[error] {who}: code {code}");
                match code {
                    "conflict" => {
                        assert!(f["version"].is_u64(), "[error] conflict without version");
                        self.stats.conflicts += 1;
                    }
                    "rate_limited" => {
                        self.stats.rate_limited_frames += 1;
                        self.recs[r].limited += 1;
                    }
                    _ => {}
                }
            }
            "pong" => {}
            other => panic!("[frame] {who}: unexpected frame type {other:?}"),
        }
        if let (Some(s), Some(a), Some(e)) =
            (self.recs[r].slot, self.recs[r].applied, self.recs[r].epoch.clone())
        {
            if self.recs[r].resync.is_none() && self.slots[s].rec == Some(r) {
                self.slots[s].known = Some((a, e));
            }
        }
    }

    /// A send of the rules reached a client: it is paid for by who caused it, within their
    /// reply budget's burst (one per load of the room) and rate.
    pub(super) fn rules_sent(&mut self, f: &Value, who: &str) {
        self.stats.rule_sends += 1;
        let by = f["data"]["by"].as_str().expect("[rules] a send says who caused it").to_owned();
        if by == crate::room::SERVER_SESSION {
            return; // the operator's backend pays nothing
        }
        let c = &self.setup.config;
        let (burst, rate, now, loads) =
            (c.reply_burst_bytes, c.reply_bytes_per_sec, self.sim.now.ms(), self.loads);
        let account = self
            .accounts
            .get_mut(&by)
            .expect("[rules] a send caused by a user who never connected");
        account.bytes += f.to_string().len() as u64;
        let bound = account.bound(burst, rate, now, loads);
        assert!(
            account.bytes <= bound,
            "[rules] {who}: the rules sent {} bytes because of {by}, whose reply budget allows {bound}",
            account.bytes
        );
    }

    pub(super) fn check_ack(&mut self, session: &str, user: &str, id: &str, seq: u64, who: &str) {
        if let Some(e) = self.sim.disk.log.get(&seq) {
            assert_eq!(
                (e.session.as_str(), e.id.as_str(), e.user.as_str()),
                (session, id, user),
                "[ack] {who}: acked at {seq}, which the log holds for another write"
            );
        } else {
            let first = self.sim.disk.log.keys().next().copied().unwrap_or(u64::MAX);
            assert!(seq < first, "[ack] {who}: acked at {seq}, not in the log");
        }
        let key = (session.to_owned(), id.to_owned());
        if let Some(&before) = self.acks.get(&key) {
            if before != seq {
                assert!(
                    !self.sim.disk.log.contains_key(&before),
                    "[dedup] {who}: ({session}, {id}) acked at {before} and again at {seq} while {before} is retained"
                );
                assert!(seq > before, "[dedup] {who}: re-acked at an older seq");
            }
        }
        self.acks.insert(key, seq);
    }

    /// After a step: reads, closes, and every invariant of the room.
    pub(super) fn after(&mut self, ctx: &StepCtx) {
        if self.sim.disk.deleted != self.deleted_seen {
            // The adapter drops a deleted room's engine; the next event
            // loads an empty one with a new epoch.
            self.closures(ctx);
            self.stats.add_room(&mut self.sim);
            self.deleted_seen = self.sim.disk.deleted;
            self.stats.deletes += 1;
            self.sim.reload();
            self.incarnation += 1;
            self.acks.clear();
            self.log.clear();
            self.log_keys.clear();
            self.log_bytes = 0;
            self.log_checked = 0;
            self.blocks.clear();
            self.departed.clear();
            self.fresh_budgets();
        }
        // Closed sockets: what reached them before the close.
        for r in self.live.clone() {
            if !self.is_open(r) && !self.sim.sockets[&self.recs[r].conn].inbox.is_empty() {
                self.read(r, false);
            }
        }
        let readers: Vec<usize> =
            self.open_recs().into_iter().filter(|&r| self.recs[r].mode != Mode::Lazy).collect();
        if !readers.is_empty() {
            self.sim.end_turn();
            for r in readers {
                let echo = self.recs[r].mode == Mode::Reading;
                self.read(r, echo);
            }
        }
        self.closures(ctx);
        self.check_room();
    }

    /// Judges every close since the last step.
    pub(super) fn closures(&mut self, ctx: &StepCtx) {
        let now = self.sim.now.ms();
        if self.trace {
            for &r in &self.live {
                if !self.is_open(r) && !self.recs[r].closed_seen {
                    let code = self.sim.sockets[&self.recs[r].conn].closed;
                    println!("    {} closed by {now}: {code:?}", self.recs[r].conn);
                }
            }
        }
        let ttl = self.config().presence_ttl_ms;
        for r in self.live.clone() {
            if self.recs[r].closed_seen || self.is_open(r) {
                continue;
            }
            self.recs[r].closed_seen = true;
            self.live.retain(|&l| l != r);
            let rec = &self.recs[r];
            let who = format!("{} ({}, {})", rec.conn, rec.session, rec.user);
            let code = self.sim.sockets[&rec.conn].closed;
            if let Some(code) = code {
                *self.stats.closes.entry(code).or_default() += 1;
                assert!(CLOSE_CODES.contains(&code), "[close] {who}: undocumented code {code}");
                match code {
                    1001 => assert!(ctx.drain, "[close] {who}: 1001 without a drain"),
                    1012 => assert_eq!(
                        ctx.reset,
                        Some(true),
                        "[close] {who}: 1012 without a reset that owed frames"
                    ),
                    1009 => assert!(
                        ctx.oversize.contains(&r),
                        "[close] {who}: 1009 without a large frame"
                    ),
                    4001 => {
                        let by = ctx.connect.map(|c| &self.recs[c]);
                        assert!(
                            by.is_some_and(|b| b.session == rec.session
                                && b.user == rec.user
                                && !b.refused),
                            "[close] {who}: 4001 without a connect of its session by its user"
                        );
                    }
                    4008 => assert!(
                        now.saturating_sub(rec.active) >= ttl - ttl / 2,
                        "[close] {who}: 4008 after {} ms of silence (ttl {ttl})",
                        now.saturating_sub(rec.active)
                    ),
                    4401 => assert!(
                        rec.expires.is_some_and(|e| e <= now),
                        "[close] {who}: 4401 before its token expired"
                    ),
                    4403 => assert!(
                        ctx.kick_user.as_deref() == Some(rec.user.as_str()),
                        "[close] {who}: 4403 without a kick of its user"
                    ),
                    4404 => assert!(ctx.delete, "[close] {who}: 4404 without a delete"),
                    4409 | 4429 => panic!("[close] {who}: {code} after the open"),
                    _ => {}
                }
            }
            // A member left (not a superseded socket): its session stays
            // its user's for a while.
            if code != Some(4001) && !rec.refused {
                let (session, user) = (rec.session.clone(), rec.user.clone());
                self.departed.insert(session, (user, ctx.start, now));
            }
        }
    }

    /// The room against the model: presence, users, the log.
    pub(super) fn check_room(&mut self) {
        let open = self.open_recs();
        let sessions: BTreeSet<&str> =
            open.iter().map(|&r| self.recs[r].session.as_str()).collect();
        assert_eq!(sessions.len(), open.len(), "[presence] two open sockets of one session");
        assert_eq!(
            (self.sim.room.members(), self.sim.room.connections()),
            (sessions.len(), open.len()),
            "[presence] members and connections against the open sockets"
        );
        let mut per_user: BTreeMap<&str, usize> = BTreeMap::new();
        for &r in &open {
            *per_user.entry(self.recs[r].user.as_str()).or_default() += 1;
        }
        let limit = self.config().user_connections;
        for (user, n) in per_user {
            assert!(n <= limit, "[users] {user} holds {n} connections, limit {limit}");
        }
        self.check_log();
    }

    /// The log on the disk: gapless, within its bounds, each (session, id)
    /// once, each session one user's.
    pub(super) fn check_log(&mut self) {
        let disk = &self.sim.disk;
        let first = disk.log.keys().next().copied();
        while let Some((&seq, _)) = self.log.first_key_value() {
            if first.is_some_and(|f| seq >= f) {
                break;
            }
            let (s, id, _, bytes) = self.log.remove(&seq).unwrap();
            self.log_keys.remove(&(s, id));
            self.log_bytes -= bytes;
        }
        if disk.seq > self.log_checked {
            for (&seq, e) in disk.log.range(self.log_checked + 1..) {
                let key = (e.session.clone(), e.id.clone());
                if let Some(before) = self.log_keys.get(&key) {
                    panic!(
                        "[log] ({}, {}) is in the log twice: {before} and {seq}",
                        e.session, e.id
                    );
                }
                if let Some((_, (_, _, user, _))) =
                    self.log.iter().find(|(_, (s, ..))| *s == e.session)
                {
                    assert_eq!(user, &e.user, "[log] session {} written by two users", e.session);
                }
                if e.topic == "$state" {
                    let d: Value = serde_json::from_str(e.data.get()).expect("[log] $state data");
                    assert_eq!(d["version"], seq, "[log] a $state version is its seq");
                }
                let bytes = e.data.get().len() as u64;
                self.log_keys.insert(key.clone(), seq);
                self.log.insert(seq, (key.0, key.1, e.user.clone(), bytes));
                self.log_bytes += bytes;
            }
            self.log_checked = disk.seq;
        }
        if disk.seq > 0 {
            let (f, l) = (first.expect("[log] empty at seq > 0"), *disk.log.keys().last().unwrap());
            assert_eq!(l, disk.seq, "[log] the newest entry is the room's seq");
            assert_eq!(disk.log.len() as u64, l - f + 1, "[log] a hole in the log");
            if f > 1 {
                self.stats.trims += 1;
            }
        }
        let c = &self.setup.config;
        let n = disk.log.len() as u64;
        assert!(
            n <= c.log_retain.max(c.replay_limit),
            "[log] {n} entries kept, retain {}",
            c.log_retain
        );
        assert!(
            self.log_bytes <= c.log_retain_bytes || n <= c.replay_limit.max(1),
            "[log] {} bytes kept in {n} entries, bound {}",
            self.log_bytes,
            c.log_retain_bytes
        );
    }
}
