//! A history checker: concurrent publishers, compare-and-set bidders and clients that keep dropping and resuming run against one room for about 9 s while every send, ack, error, welcome, resync, state and delivery is recorded with a timestamp; a pure checker then verifies one total order, gapless per-connection delivery and exact resumes, no lost acked write, no duplicate, and linearizable CAS per key (including every conflict's version against its real-time window). The checker itself is tested on hand-made broken histories.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::{interval_at, sleep_until, Instant, MissedTickBehavior};

use crate::check;
use crate::client::{Client, Event};
use crate::harness::{alone, shared, Spec};
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        shared("history::concurrent_history_is_linearizable", |ctx| concurrent_history(ctx, false)),
        crate::edge_support::on(
            "history::a_relayed_history_is_linearizable",
            &crate::relays::RELAYED,
            |ctx| concurrent_history(ctx, true),
        ),
        alone("history::checker_detects_broken_histories", || async { checker_self_test() }),
    ]
}

// ---------------------------------------------------------------------------------------------
// The history and its checker (pure: no I/O, no clock).
// ---------------------------------------------------------------------------------------------

/// A durable message as a client saw it (or as the final log holds it).
#[derive(Clone, Debug, PartialEq)]
pub struct Msg {
    pub seq: u64,
    pub session: String,
    pub id: String,
    pub topic: String,
    pub data: Value,
}

impl Msg {
    fn from_frame(f: &Value) -> Msg {
        Msg {
            seq: support::seq(f),
            session: support::session_of(f).to_string(),
            id: support::id(f).to_string(),
            topic: f["topic"].as_str().unwrap_or_default().to_string(),
            data: f["data"].clone(),
        }
    }

    fn key(&self) -> (String, String) {
        (self.session.clone(), self.id.clone())
    }
}

/// A durable write a client sent.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Publish { topic: String, data: Value },
    Set { key: String, value: Value, if_version: Option<u64> },
}

/// One observable event of one connection of one logical client (a session).
#[derive(Clone, Debug)]
pub enum Ev {
    /// A welcome: the `since` the client asked to resume from (if any) and the room's answer.
    Connect {
        since: Option<u64>,
        epoch: String,
        resumed: bool,
        seq: u64,
    },
    Resync {
        seq: u64,
        state: Value,
    },
    /// A `get_state` answer.
    State {
        seq: u64,
        state: Value,
    },
    Send {
        id: String,
        op: Op,
    },
    Ack {
        id: String,
        seq: u64,
    },
    Error {
        id: Option<String>,
        code: String,
        version: Option<u64>,
    },
    Deliver(Msg),
}

/// An event with its time (µs since the start; sends are stamped before they leave, receipts
/// after they arrive, so every real-time window is at least as wide as the real one).
#[derive(Clone, Debug)]
pub struct Rec {
    pub t: u64,
    pub client: String,
    pub conn: u32,
    pub ev: Ev,
}

/// Everything the checker looks at: the events in the order they were recorded (times
/// non-decreasing), the final log read back in full, and a final `get_state`.
#[derive(Clone, Debug)]
pub struct History {
    pub events: Vec<Rec>,
    pub log: Vec<Msg>,
    pub state: Value,
    pub state_seq: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The final log itself is malformed (gaps, wrong seq) or the epoch changed.
    Log,
    /// Two views disagree on what is at a seq, or something arrived out of order.
    Order,
    /// A connection skipped a seq.
    Gap,
    /// A seq delivered twice, or a (session, id) stored or acked twice.
    Duplicate,
    /// A resume that does not continue from what the client had applied.
    Resume,
    /// An acked or seen write that is not in the final log.
    LostWrite,
    /// A stored or acked write that no client sent (or sent differently).
    Phantom,
    /// Compare-and-set is not linearizable.
    Cas,
    /// A state snapshot that is not the log's state at its seq.
    State,
}

#[derive(Clone, Debug)]
pub struct Violation {
    pub kind: Kind,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.detail)
    }
}

type Key = (String, String);

fn flag(out: &mut Vec<Violation>, kind: Kind, detail: String) {
    out.push(Violation { kind, detail });
}

/// The first send of each (session, id): its time and what it asked for.
struct SendInfo {
    first_t: u64,
    op: Op,
}

/// Checks a history; returns every violation found (empty: the history is correct).
pub fn check_history(h: &History) -> Vec<Violation> {
    let mut out = Vec::new();
    let at = check_log(h, &mut out);
    let sends = collect_sends(h, &mut out);
    let stored = check_stored(h, &sends, &mut out);
    check_acks(h, &at, &sends, &stored, &mut out);
    check_deliveries(h, &at, &mut out);
    check_streams(h, &mut out);
    let versions = check_cas_chain(h, &sends, &mut out);
    check_snapshots(h, &mut out);
    check_conflicts(h, &at, &sends, &stored, &versions, &mut out);
    out
}

/// The final log is 1..=n without gaps, and the final state is at its end.
fn check_log<'a>(h: &'a History, out: &mut Vec<Violation>) -> BTreeMap<u64, &'a Msg> {
    let mut at = BTreeMap::new();
    for (i, m) in h.log.iter().enumerate() {
        let want = i as u64 + 1;
        if m.seq != want {
            flag(
                out,
                Kind::Log,
                format!("the final log has seq {} at position {i}, not {want}", m.seq),
            );
        }
        at.entry(m.seq).or_insert(m);
    }
    if h.state_seq != h.log.len() as u64 {
        flag(
            out,
            Kind::Log,
            format!("the final state is at seq {}, the log ends at {}", h.state_seq, h.log.len()),
        );
    }
    at
}

fn collect_sends(h: &History, out: &mut Vec<Violation>) -> HashMap<Key, SendInfo> {
    let mut sends: HashMap<Key, SendInfo> = HashMap::new();
    for r in &h.events {
        let Ev::Send { id, op } = &r.ev else { continue };
        let key = (r.client.clone(), id.clone());
        match sends.get(&key) {
            Some(s) if s.op != *op => flag(
                out,
                Kind::Phantom,
                format!("{key:?} was sent as {:?} and then as {op:?}", s.op),
            ),
            Some(_) => {}
            None => {
                sends.insert(key, SendInfo { first_t: r.t, op: op.clone() });
            }
        }
    }
    sends
}

/// Each stored write once, and as it was sent; returns where each (session, id) is stored.
fn check_stored(
    h: &History,
    sends: &HashMap<Key, SendInfo>,
    out: &mut Vec<Violation>,
) -> HashMap<Key, u64> {
    let mut stored: HashMap<Key, u64> = HashMap::new();
    for m in &h.log {
        let key = m.key();
        if let Some(prev) = stored.insert(key.clone(), m.seq) {
            flag(
                out,
                Kind::Duplicate,
                format!("{key:?} is stored twice: seq {prev} and {}", m.seq),
            );
        }
        let Some(sent) = sends.get(&key) else {
            flag(out, Kind::Phantom, format!("seq {} holds {key:?}, which no client sent", m.seq));
            continue;
        };
        let ok = match &sent.op {
            Op::Publish { topic, data } => m.topic == *topic && m.data == *data,
            Op::Set { key: k, value, .. } => {
                m.topic == "$state" && m.data == json!({"key": k, "value": value, "version": m.seq})
            }
        };
        if !ok {
            flag(
                out,
                Kind::Phantom,
                format!("seq {} stores {m:?}, but {key:?} was sent as {:?}", m.seq, sent.op),
            );
        }
    }
    stored
}

/// Every ack is for a write that was sent, is in the final log at the acked seq, and a
/// (session, id) is always acked at the same seq.
fn check_acks(
    h: &History,
    at: &BTreeMap<u64, &Msg>,
    sends: &HashMap<Key, SendInfo>,
    stored: &HashMap<Key, u64>,
    out: &mut Vec<Violation>,
) {
    let mut acked: HashMap<Key, u64> = HashMap::new();
    for r in &h.events {
        let Ev::Ack { id, seq } = &r.ev else { continue };
        let key = (r.client.clone(), id.clone());
        if let Some(prev) = acked.insert(key.clone(), *seq) {
            if prev != *seq {
                flag(out, Kind::Duplicate, format!("{key:?} acked at seq {prev} and at {seq}"));
            }
        }
        if sends.get(&key).is_none_or(|s| s.first_t > r.t) {
            flag(out, Kind::Phantom, format!("ack of {key:?} at seq {seq} before any send of it"));
        }
        if at.get(seq).is_some_and(|m| m.key() == key) {
            continue;
        }
        match stored.get(&key) {
            Some(s) => flag(out, Kind::Order, format!("{key:?} acked at seq {seq}, stored at {s}")),
            None => flag(
                out,
                Kind::LostWrite,
                format!("{key:?} was acked at seq {seq} but is not in the final log"),
            ),
        }
    }
}

/// Every delivery matches the final log at its seq: one total order for everyone.
fn check_deliveries(h: &History, at: &BTreeMap<u64, &Msg>, out: &mut Vec<Violation>) {
    for r in &h.events {
        let Ev::Deliver(m) = &r.ev else { continue };
        match at.get(&m.seq) {
            None => flag(
                out,
                Kind::LostWrite,
                format!(
                    "{}#{} saw {m:?}, but the final log ends at {}",
                    r.client,
                    r.conn,
                    h.log.len()
                ),
            ),
            Some(l) if **l != *m => flag(
                out,
                Kind::Order,
                format!("{}#{} saw {m:?} at seq {}, the log has {l:?}", r.client, r.conn, m.seq),
            ),
            Some(_) => {}
        }
    }
}

/// Per connection: deliveries strictly increasing and gapless from the welcome's seq (a fresh
/// connect), the `since` (a resume) or the resync's seq. Per logical client: a resume starts
/// from what the client had applied, and no seq is delivered to it twice.
fn check_streams(h: &History, out: &mut Vec<Violation>) {
    // (client, conn) -> last seq this connection accounts for; None: a resync must come first.
    let mut last: HashMap<(String, u32), Option<u64>> = HashMap::new();
    let mut applied: HashMap<String, u64> = HashMap::new();
    let mut delivered: HashMap<String, BTreeSet<u64>> = HashMap::new();
    let mut epoch: Option<&str> = None;
    for r in &h.events {
        let ck = (r.client.clone(), r.conn);
        match &r.ev {
            Ev::Connect { since, epoch: e, resumed, seq } => {
                match epoch {
                    None => epoch = Some(e),
                    Some(first) if first != e.as_str() => flag(
                        out,
                        Kind::Log,
                        format!("{}#{}: epoch {e}, was {first}", r.client, r.conn),
                    ),
                    Some(_) => {}
                }
                if let (Some(s), Some(a)) = (since, applied.get(&r.client)) {
                    if s != a {
                        flag(
                            out,
                            Kind::Resume,
                            format!("{}#{} resumed from {s}, having applied {a}", r.client, r.conn),
                        );
                    }
                }
                if *resumed {
                    match since {
                        None => flag(
                            out,
                            Kind::Resume,
                            format!("{}#{} resumed without since", r.client, r.conn),
                        ),
                        Some(s) if s > seq => flag(
                            out,
                            Kind::Resume,
                            format!(
                                "{}#{} resumed from {s}, beyond the room's {seq}",
                                r.client, r.conn
                            ),
                        ),
                        Some(_) => {}
                    }
                    last.insert(ck, Some(since.unwrap_or(*seq)));
                } else if since.is_some() {
                    last.insert(ck, None);
                } else {
                    last.insert(ck, Some(*seq));
                    applied.insert(r.client.clone(), *seq);
                }
            }
            Ev::Resync { seq, .. } => {
                if let Some(a) = applied.get(&r.client) {
                    if seq < a {
                        flag(
                            out,
                            Kind::Order,
                            format!(
                                "{}#{}: resync to seq {seq}, behind {a} applied",
                                r.client, r.conn
                            ),
                        );
                    }
                }
                last.insert(ck, Some(*seq));
                applied.insert(r.client.clone(), *seq);
            }
            Ev::Deliver(m) => {
                let who = format!("{}#{}", r.client, r.conn);
                let prev = match last.get(&ck) {
                    None => {
                        flag(out, Kind::Order, format!("{who}: seq {} on no connection", m.seq));
                        None
                    }
                    Some(None) => {
                        flag(out, Kind::Order, format!("{who}: seq {} before the resync", m.seq));
                        None
                    }
                    Some(Some(l)) => Some(*l),
                };
                if let Some(l) = prev {
                    if m.seq <= l {
                        flag(out, Kind::Duplicate, format!("{who}: seq {} after seq {l}", m.seq));
                    } else if m.seq > l + 1 {
                        flag(
                            out,
                            Kind::Gap,
                            format!(
                                "{who}: seq {} after seq {l} ({} skipped)",
                                m.seq,
                                m.seq - l - 1
                            ),
                        );
                    }
                }
                last.insert(ck, Some(prev.map_or(m.seq, |l| l.max(m.seq))));
                if !delivered.entry(r.client.clone()).or_default().insert(m.seq) {
                    flag(
                        out,
                        Kind::Duplicate,
                        format!("{} got seq {} a second time (#{})", r.client, m.seq, r.conn),
                    );
                }
                let a = applied.entry(r.client.clone()).or_insert(0);
                *a = (*a).max(m.seq);
            }
            _ => {}
        }
    }
}

/// The successful sets of each key, in seq order, form a chain: each `if_version` is the
/// previous set's seq (0 for the first). Returns each key's versions in order.
fn check_cas_chain(
    h: &History,
    sends: &HashMap<Key, SendInfo>,
    out: &mut Vec<Violation>,
) -> HashMap<String, Vec<u64>> {
    let mut versions: HashMap<String, Vec<u64>> = HashMap::new();
    for m in h.log.iter().filter(|m| m.topic == "$state") {
        let Some(key) = m.data["key"].as_str() else {
            flag(out, Kind::Log, format!("a $state message without a key: {m:?}"));
            continue;
        };
        if m.data["version"] != m.seq {
            flag(out, Kind::Cas, format!("a $state version is not its seq: {m:?}"));
        }
        let chain = versions.entry(key.to_string()).or_default();
        let prev = chain.last().copied().unwrap_or(0);
        if let Some(SendInfo { op: Op::Set { if_version: Some(iv), .. }, .. }) = sends.get(&m.key())
        {
            if *iv != prev {
                flag(
                    out,
                    Kind::Cas,
                    format!(
                        "{:?} with if_version {iv} succeeded at seq {}, but `{key}` was at \
                         version {prev} (a lost update)",
                        m.key(),
                        m.seq
                    ),
                );
            }
        }
        chain.push(m.seq);
    }
    versions
}

/// The room state after the log's first `seq` messages.
fn state_at(log: &[Msg], seq: u64) -> Value {
    let mut state = serde_json::Map::new();
    for m in log.iter().filter(|m| m.seq <= seq && m.topic == "$state") {
        if let Some(key) = m.data["key"].as_str() {
            state.insert(key.to_string(), json!({"value": m.data["value"], "version": m.seq}));
        }
    }
    Value::Object(state)
}

/// Every state a client was given (resync, get_state, the final one) is the log's state at
/// that seq: the last successful set of each key.
fn check_snapshots(h: &History, out: &mut Vec<Violation>) {
    let n = h.log.len() as u64;
    let want = state_at(&h.log, h.state_seq);
    if h.state != want {
        flag(out, Kind::State, format!("the final state is {}, the log says {want}", h.state));
    }
    for r in &h.events {
        let (Ev::Resync { seq, state } | Ev::State { seq, state }) = &r.ev else { continue };
        if *seq > n {
            flag(
                out,
                Kind::LostWrite,
                format!("{}#{} got a state at seq {seq}; the log ends at {n}", r.client, r.conn),
            );
            continue;
        }
        let want = state_at(&h.log, *seq);
        if *state != want {
            flag(
                out,
                Kind::State,
                format!(
                    "{}#{} got state {state} at seq {seq}, the log says {want}",
                    r.client, r.conn
                ),
            );
        }
    }
}

/// Every `conflict` is for a set that was not applied, with an `if_version` other than the
/// reported version, and the reported version was the key's version at some instant between
/// the set's send and the error's arrival: its set was sent before the error arrived, and the
/// next version of the key was not yet observed anywhere when the set was sent.
fn check_conflicts(
    h: &History,
    at: &BTreeMap<u64, &Msg>,
    sends: &HashMap<Key, SendInfo>,
    stored: &HashMap<Key, u64>,
    versions: &HashMap<String, Vec<u64>>,
    out: &mut Vec<Violation>,
) {
    // (time, seq): by then, everything up to seq had been applied.
    let observed: Vec<(u64, u64)> = h
        .events
        .iter()
        .filter_map(|r| match &r.ev {
            Ev::Ack { seq, .. }
            | Ev::Resync { seq, .. }
            | Ev::State { seq, .. }
            | Ev::Connect { seq, .. } => Some((r.t, *seq)),
            Ev::Deliver(m) => Some((r.t, m.seq)),
            _ => None,
        })
        .collect();
    // Latest time `seq` can have been applied: when something at or after it was first seen.
    let applied_by = |seq: u64| observed.iter().filter(|(_, s)| *s >= seq).map(|(t, _)| *t).min();
    let empty = Vec::new();
    let mut last_send: HashMap<Key, (u64, &Op)> = HashMap::new();
    for r in &h.events {
        let (id, version) = match &r.ev {
            Ev::Send { id, op } => {
                last_send.insert((r.client.clone(), id.clone()), (r.t, op));
                continue;
            }
            Ev::Error { id: Some(id), code, version } if code == "conflict" => (id, version),
            _ => continue,
        };
        let key = (r.client.clone(), id.clone());
        let Some((ts, Op::Set { key: k, if_version, .. })) = last_send.get(&key).copied() else {
            flag(
                out,
                Kind::Phantom,
                format!("a conflict for {key:?}, which was not sent as a set"),
            );
            continue;
        };
        let tr = r.t;
        let Some(v) = *version else {
            flag(out, Kind::Cas, format!("the conflict for {key:?} carries no version"));
            continue;
        };
        match if_version {
            None => flag(out, Kind::Cas, format!("an unconditional set {key:?} got a conflict")),
            Some(iv) if *iv == v => flag(
                out,
                Kind::Cas,
                format!("{key:?} with if_version {iv} got a conflict reporting the same version"),
            ),
            Some(_) => {}
        }
        if let Some(s) = stored.get(&key) {
            flag(out, Kind::Cas, format!("{key:?} got a conflict but is stored at seq {s}"));
        }
        let chain = versions.get(k).unwrap_or(&empty);
        let next = if v == 0 {
            chain.first().copied()
        } else {
            let Some(pos) = chain.iter().position(|x| *x == v) else {
                flag(
                    out,
                    Kind::Cas,
                    format!(
                        "the conflict for {key:?} reports version {v}, which `{k}` never had \
                         (versions {chain:?})"
                    ),
                );
                continue;
            };
            // Set at v: it cannot be the current version before its set was even sent.
            let sent_at = at.get(&v).and_then(|m| sends.get(&m.key())).map(|s| s.first_t);
            if let Some(e) = sent_at.filter(|e| *e > tr) {
                flag(
                    out,
                    Kind::Cas,
                    format!(
                        "the conflict for {key:?} (answered at t={tr}) reports version {v}, \
                         whose set was only sent at t={e}"
                    ),
                );
            }
            chain.get(pos + 1).copied()
        };
        if let Some(nx) = next {
            if let Some(by) = applied_by(nx).filter(|by| *by < ts) {
                flag(
                    out,
                    Kind::Cas,
                    format!(
                        "the conflict for {key:?} (sent at t={ts}) reports version {v} of `{k}`, \
                         but version {nx} had replaced it by t={by}"
                    ),
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The checker's own test: a correct hand-made history passes, broken ones are caught.
// ---------------------------------------------------------------------------------------------

fn msg(seq: u64, session: &str, id: &str, topic: &str, data: Value) -> Msg {
    Msg { seq, session: session.into(), id: id.into(), topic: topic.into(), data }
}

fn publish_op(data: Value) -> Op {
    Op::Publish { topic: "t".into(), data }
}

fn set_op(value: Value, if_version: u64) -> Op {
    Op::Set { key: "k".into(), value, if_version: Some(if_version) }
}

fn rec(t: u64, client: &str, conn: u32, ev: Ev) -> Rec {
    Rec { t, client: client.into(), conn, ev }
}

/// A correct history: A publishes m1 and m2, B sets k from 0, C's stale set conflicts and its
/// next one wins; R reads, drops and resumes; Q comes back with a wrong epoch and resyncs.
fn good_history() -> History {
    let m1 = msg(1, "A", "m1", "t", json!(1));
    let b1 = msg(2, "B", "b1", "$state", json!({"key": "k", "value": 10, "version": 2}));
    let m2 = msg(3, "A", "m2", "t", json!(2));
    let c2 = msg(4, "C", "c2", "$state", json!({"key": "k", "value": 30, "version": 4}));
    let connect = |since, resumed, seq| Ev::Connect { since, epoch: "e1".into(), resumed, seq };
    let send = |id: &str, op| Ev::Send { id: id.into(), op };
    let ack = |id: &str, seq| Ev::Ack { id: id.into(), seq };
    let final_state = json!({"k": {"value": 30, "version": 4}});
    let events = vec![
        rec(1, "A", 0, connect(None, false, 0)),
        rec(1, "B", 0, connect(None, false, 0)),
        rec(1, "C", 0, connect(None, false, 0)),
        rec(1, "R", 0, connect(None, false, 0)),
        rec(2, "A", 0, send("m1", publish_op(json!(1)))),
        rec(3, "A", 0, ack("m1", 1)),
        rec(3, "R", 0, Ev::Deliver(m1.clone())),
        rec(4, "B", 0, send("b1", set_op(json!(10), 0))),
        rec(5, "B", 0, ack("b1", 2)),
        rec(5, "R", 0, Ev::Deliver(b1.clone())),
        rec(6, "C", 0, send("c1", set_op(json!(20), 0))),
        rec(
            7,
            "C",
            0,
            Ev::Error { id: Some("c1".into()), code: "conflict".into(), version: Some(2) },
        ),
        rec(8, "R", 1, connect(Some(2), true, 2)),
        rec(9, "A", 0, send("m2", publish_op(json!(2)))),
        rec(10, "A", 0, ack("m2", 3)),
        rec(10, "R", 1, Ev::Deliver(m2.clone())),
        rec(11, "C", 0, send("c2", set_op(json!(30), 2))),
        rec(12, "C", 0, ack("c2", 4)),
        rec(12, "R", 1, Ev::Deliver(c2.clone())),
        rec(13, "Q", 0, connect(Some(1), false, 4)),
        rec(13, "Q", 0, Ev::Resync { seq: 4, state: final_state.clone() }),
        rec(14, "Q", 0, Ev::State { seq: 4, state: final_state.clone() }),
    ];
    History { events, log: vec![m1, b1, m2, c2], state: final_state, state_seq: 4 }
}

/// Index of the event of `client` on `conn` matching `pred` in `h`.
fn find(h: &History, client: &str, conn: u32, pred: impl Fn(&Ev) -> bool) -> usize {
    h.events
        .iter()
        .position(|r| r.client == client && r.conn == conn && pred(&r.ev))
        .expect("the event exists in the hand-made history")
}

fn delivers(seq: u64) -> impl Fn(&Ev) -> bool {
    move |e| matches!(e, Ev::Deliver(m) if m.seq == seq)
}

fn checker_self_test() -> R {
    let good = good_history();
    let v = check_history(&good);
    check!(v.is_empty(), "the checker flags a correct history: {}", render(&v));

    type Breaker = fn(&mut History);
    let broken: Vec<(&str, Kind, Breaker)> = vec![
        ("a seq delivered twice on one connection", Kind::Duplicate, |h| {
            let i = find(h, "R", 1, delivers(3));
            let again = h.events[i].clone();
            h.events.insert(i + 1, again);
        }),
        ("a resume that replays an applied seq again", Kind::Duplicate, |h| {
            let i = find(h, "R", 1, delivers(3));
            let mut replayed = h.events[find(h, "R", 0, delivers(2))].clone();
            replayed.conn = 1;
            h.events.insert(i, replayed);
        }),
        ("a resume that skips a seq", Kind::Gap, |h| {
            let i = find(h, "R", 1, delivers(3));
            h.events.remove(i);
        }),
        ("a client resuming from a seq it never applied", Kind::Resume, |h| {
            let i = find(h, "R", 1, |e| matches!(e, Ev::Connect { .. }));
            h.events[i].ev =
                Ev::Connect { since: Some(1), epoch: "e1".into(), resumed: true, seq: 2 };
        }),
        ("an acked write lost from the log's tail", Kind::LostWrite, |h| {
            h.log.truncate(2);
            h.state_seq = 2;
            h.state = json!({"k": {"value": 10, "version": 2}});
            h.events.retain(|r| !matches!(&r.ev, Ev::Deliver(m) if m.seq > 2));
            h.events.retain(|r| !matches!(r.ev, Ev::Resync { .. } | Ev::State { .. }));
        }),
        ("a write acked at one seq and stored at another", Kind::Order, |h| {
            let i = find(h, "A", 0, |e| matches!(e, Ev::Ack { id, .. } if id == "m2"));
            h.events[i].ev = Ev::Ack { id: "m2".into(), seq: 4 };
        }),
        ("two clients seeing different data at one seq", Kind::Order, |h| {
            let i = find(h, "R", 0, delivers(1));
            h.events[i].ev = Ev::Deliver(msg(1, "A", "m1", "t", json!("forged")));
        }),
        ("a (session, id) stored twice", Kind::Duplicate, |h| {
            h.log.push(msg(5, "A", "m1", "t", json!(1)));
            h.state_seq = 5;
        }),
        ("stored data that was never sent", Kind::Phantom, |h| {
            h.log[2].data = json!(99);
        }),
        ("two sets from version 0 both applied (lost update)", Kind::Cas, |h| {
            let i = find(h, "C", 0, |e| matches!(e, Ev::Send { id, .. } if id == "c2"));
            h.events[i].ev = Ev::Send { id: "c2".into(), op: set_op(json!(30), 0) };
        }),
        ("a conflict reporting a version set only later", Kind::Cas, |h| {
            let i = find(h, "C", 0, |e| matches!(e, Ev::Error { .. }));
            h.events[i].ev =
                Ev::Error { id: Some("c1".into()), code: "conflict".into(), version: Some(4) };
        }),
        ("a conflict reporting a version already replaced", Kind::Cas, |h| {
            // c1 asked for version 7 and was told the key does not exist (version 0),
            // after B's set had been acked: 0 was not the version at any time in its window.
            let i = find(h, "C", 0, |e| matches!(e, Ev::Send { id, .. } if id == "c1"));
            h.events[i].ev = Ev::Send { id: "c1".into(), op: set_op(json!(20), 7) };
            let j = find(h, "C", 0, |e| matches!(e, Ev::Error { .. }));
            h.events[j].ev =
                Ev::Error { id: Some("c1".into()), code: "conflict".into(), version: Some(0) };
        }),
        ("a conflicting set that was applied anyway", Kind::Cas, |h| {
            // c2 is acked and stored, and (a second answer) also refused as a conflict.
            let i = find(h, "C", 0, |e| matches!(e, Ev::Ack { .. }));
            let conflict =
                Ev::Error { id: Some("c2".into()), code: "conflict".into(), version: Some(4) };
            h.events.insert(i + 1, rec(12, "C", 0, conflict));
        }),
        ("a resync with a stale state", Kind::State, |h| {
            let i = find(h, "Q", 0, |e| matches!(e, Ev::Resync { .. }));
            h.events[i].ev =
                Ev::Resync { seq: 4, state: json!({"k": {"value": 10, "version": 2}}) };
        }),
        ("a final state that is not the last set", Kind::State, |h| {
            h.state = json!({"k": {"value": 20, "version": 4}});
        }),
        ("a delivery before the resync it needs", Kind::Order, |h| {
            let i = find(h, "Q", 0, |e| matches!(e, Ev::Resync { .. }));
            h.events.insert(i, rec(13, "Q", 0, Ev::Deliver(h.log[3].clone())));
        }),
    ];
    for (what, kind, breaker) in broken {
        let mut h = good_history();
        breaker(&mut h);
        let v = check_history(&h);
        check!(
            v.iter().any(|x| x.kind == kind),
            "the checker misses {what} (expected a {kind:?} violation), found: {}",
            render(&v)
        );
    }
    Ok(())
}

fn render(v: &[Violation]) -> String {
    if v.is_empty() {
        return "nothing".into();
    }
    let mut s: Vec<String> = v.iter().take(30).map(|x| format!("\n  {x}")).collect();
    if v.len() > 30 {
        s.push(format!("\n  ... and {} more", v.len() - 30));
    }
    s.concat()
}

// ---------------------------------------------------------------------------------------------
// The live run.
// ---------------------------------------------------------------------------------------------

/// How long the clients run.
const RUN: Duration = Duration::from_secs(9);
/// Writes in all (publishes and successful sets), so one `since=0` resume (at most 100
/// messages) reads the whole log back; a conflicting set gives its budget back.
const WRITE_BUDGET: i64 = 95;
const PUBLISHERS: usize = 3;
const SETTERS: usize = 3;
const READERS: usize = 2;
const KEYS: [&str; 2] = ["lot-a", "lot-b"];
const PUB_PERIOD: Duration = Duration::from_millis(600);
/// Every setter ticks at the same instants, so their read-then-set races.
const SET_PERIOD: Duration = Duration::from_millis(600);
/// Time to wait for a frame while the run is on (there is traffic every few ms).
const FRAME_WAIT: Duration = Duration::from_secs(15);
/// Time to wait for the last replies once the run is over.
const DRAIN: Duration = Duration::from_secs(10);
const TOPIC: &str = "hist";
const BOGUS_EPOCH: &str = "not-this-rooms-epoch";

/// Where every client records its events (one lock, so the order is the time order).
#[derive(Clone)]
struct Recorder {
    t0: std::time::Instant,
    events: Arc<Mutex<Vec<Rec>>>,
}

impl Recorder {
    fn new() -> Recorder {
        Recorder { t0: std::time::Instant::now(), events: Arc::default() }
    }

    fn push(&self, client: &str, conn: u32, ev: Ev) {
        let mut events = self.events.lock().unwrap();
        let t = self.t0.elapsed().as_micros() as u64;
        events.push(Rec { t, client: client.to_string(), conn, ev });
    }

    fn take(&self) -> Vec<Rec> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}

/// Caps the writes of the whole run.
struct Budget(AtomicI64);

impl Budget {
    fn take(&self) -> bool {
        if self.0.fetch_sub(1, Ordering::SeqCst) > 0 {
            return true;
        }
        self.0.fetch_add(1, Ordering::SeqCst);
        false
    }

    fn give_back(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// What every actor shares.
struct Plan {
    ctx: Ctx,
    room: String,
    /// Every client connects with a token, from one of four regions (a runtime where every
    /// connect goes through a relay: `relays::RELAYED`).
    relayed: bool,
    rec: Recorder,
    budget: Budget,
    /// When the writers' tickers start (everyone is connected by then).
    start: Instant,
    until: Instant,
}

/// A small deterministic generator for jitter (seeded per actor).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + self.0 % (hi - lo + 1)
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.between(lo, hi))
    }
}

/// One logical client (a session) over its successive connections, recording everything.
struct Live {
    plan: Arc<Plan>,
    session: String,
    conn: u32,
    c: Option<Client>,
    /// The last seq applied (delivered, or the resync's / first welcome's seq).
    applied: u64,
    epoch: String,
    /// The version of each key, as far as this client knows.
    view: BTreeMap<String, u64>,
}

impl Live {
    async fn connect(plan: &Arc<Plan>, session: String) -> R<Live> {
        let mut live = Live {
            plan: plan.clone(),
            session,
            conn: 0,
            c: None,
            applied: 0,
            epoch: String::new(),
            view: BTreeMap::new(),
        };
        live.open(None).await?;
        Ok(live)
    }

    async fn open(&mut self, since: Option<(u64, String)>) -> R {
        let mut dial = self.plan.ctx.dial(&self.plan.room, &self.session);
        if self.plan.relayed {
            let n = self.session.bytes().map(usize::from).sum::<usize>();
            let (place, _) = crate::relays::PLACES[n % crate::relays::PLACES.len()];
            // The user is the session, as in anonymous mode.
            dial = dial
                .token(&crate::edge_support::token(&self.plan.room, &self.session))
                .via(place.0, place.1, place.2);
        }
        if let Some((s, e)) = &since {
            dial = dial.since(*s, e);
        }
        let c = dial.connect().await?;
        let (resumed, seq) = (c.welcome["resumed"] == true, c.welcome_seq());
        let ev = Ev::Connect { since: since.as_ref().map(|s| s.0), epoch: c.epoch(), resumed, seq };
        self.plan.rec.push(&self.session, self.conn, ev);
        if self.epoch.is_empty() {
            self.epoch = c.epoch();
        }
        if since.is_none() {
            self.applied = seq;
        }
        self.c = Some(c);
        Ok(())
    }

    fn c(&mut self) -> &mut Client {
        self.c.as_mut().expect("connected")
    }

    /// Goes away (dropping TCP, or with a close frame) and resumes from what was applied;
    /// `epoch` overrides the epoch to resume in (a wrong one asks for a resync).
    async fn reconnect(&mut self, abrupt: bool, epoch: Option<&str>) -> R {
        if let Some(c) = self.c.take() {
            if abrupt {
                c.drop_tcp();
            } else {
                c.close().await;
            }
        }
        self.conn += 1;
        let epoch = epoch.map_or_else(|| self.epoch.clone(), str::to_string);
        self.open(Some((self.applied, epoch))).await
    }

    async fn close(mut self) {
        if let Some(c) = self.c.take() {
            c.close().await;
        }
    }

    /// The next frame, recorded; the connection ending is an error (nobody closes them but
    /// the client itself).
    async fn next(&mut self, timeout: Duration) -> R<Value> {
        let who = format!("{}#{}", self.session, self.conn);
        match self.c().next_event_within(timeout).await.map_err(|e| format!("{who}: {e}"))? {
            Event::Frame(f) => {
                self.record(&f);
                Ok(f)
            }
            Event::Closed(code) => Err(format!("{who}: the connection closed ({code:?})")),
        }
    }

    fn see_version(&mut self, key: &str, version: u64) {
        let v = self.view.entry(key.to_string()).or_insert(0);
        *v = (*v).max(version);
    }

    fn see_state(&mut self, state: &Value) {
        if let Some(map) = state.as_object() {
            for (k, v) in map {
                self.see_version(k, v["version"].as_u64().unwrap_or(0));
            }
        }
    }

    fn record(&mut self, f: &Value) {
        let ev = match f["type"].as_str() {
            Some("message") => {
                let m = Msg::from_frame(f);
                self.applied = m.seq;
                if m.topic == "$state" {
                    let key = m.data["key"].as_str().unwrap_or_default().to_string();
                    self.see_version(&key, m.seq);
                }
                Ev::Deliver(m)
            }
            Some("resync") => {
                self.applied = support::seq(f);
                self.see_state(&f["state"]);
                Ev::Resync { seq: support::seq(f), state: f["state"].clone() }
            }
            Some("state") => {
                self.see_state(&f["state"]);
                Ev::State { seq: support::seq(f), state: f["state"].clone() }
            }
            Some("ack") => Ev::Ack { id: support::id(f).to_string(), seq: support::seq(f) },
            Some("error") => Ev::Error {
                id: f["id"].as_str().map(str::to_string),
                code: f["code"].as_str().unwrap_or_default().to_string(),
                version: f["version"].as_u64(),
            },
            _ => return,
        };
        self.plan.rec.push(&self.session, self.conn, ev);
    }

    /// Records the send, then sends.
    async fn send_op(&mut self, id: &str, op: Op) -> R {
        let frame = match &op {
            Op::Publish { topic, data } => {
                json!({"type": "publish", "id": id, "topic": topic, "data": data})
            }
            Op::Set { key, value, if_version } => {
                let mut f = json!({"type": "set", "id": id, "key": key, "value": value});
                if let Some(v) = if_version {
                    f["if_version"] = json!(v);
                }
                f
            }
        };
        self.plan.rec.push(&self.session, self.conn, Ev::Send { id: id.to_string(), op });
        self.c().send(frame).await
    }
}

fn unexpected(live: &Live, f: &Value) -> String {
    // Every client stays far under the rate (at most a few frames a second each).
    format!("{}#{}: unexpected {f}", live.session, live.conn)
}

/// A new publish, if the budget allows; false when it is spent.
async fn publish_new(
    live: &mut Live,
    budget: &Budget,
    idx: usize,
    n: &mut usize,
    unacked: &mut BTreeMap<String, Value>,
) -> R<bool> {
    if !budget.take() {
        return Ok(false);
    }
    let mid = format!("p{idx}-{n}");
    let data = json!({"p": idx, "n": *n});
    *n += 1;
    unacked.insert(mid.clone(), data.clone());
    live.send_op(&mid, Op::Publish { topic: TOPIC.into(), data }).await?;
    Ok(true)
}

/// Publishes every `PUB_PERIOD`; a flaky one publishes and at once drops its connection every
/// 1-2 s, then resends what was not acked (same id, same data) on the new one.
async fn publisher(plan: Arc<Plan>, idx: usize, flaky: bool) -> R {
    let mut live = Live::connect(&plan, support::session(&format!("hpub{idx}"))).await?;
    let mut rng = Rng::new(idx as u64 + 11);
    let mut unacked: BTreeMap<String, Value> = BTreeMap::new();
    let mut ticker = interval_at(plan.start + rng.ms(0, 150), PUB_PERIOD);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let far = plan.until + Duration::from_secs(3600);
    let mut next_drop = if flaky { plan.start + rng.ms(800, 1600) } else { far };
    let (mut n, mut drops) = (0usize, 0usize);
    loop {
        tokio::select! {
            _ = sleep_until(plan.until) => break,
            _ = ticker.tick() => {
                if !publish_new(&mut live, &plan.budget, idx, &mut n, &mut unacked).await? {
                    break;
                }
            }
            _ = sleep_until(next_drop) => {
                // A publish, and gone before its ack: resent (same id, same data) below.
                publish_new(&mut live, &plan.budget, idx, &mut n, &mut unacked).await?;
                live.reconnect(drops % 2 == 0, None).await?;
                drops += 1;
                for (mid, data) in &unacked {
                    let op = Op::Publish { topic: TOPIC.into(), data: data.clone() };
                    live.send_op(mid, op).await?;
                }
                next_drop = Instant::now() + rng.ms(1000, 2000);
            }
            f = live.next(FRAME_WAIT) => {
                let f = f?;
                match f["type"].as_str() {
                    Some("ack") => { unacked.remove(support::id(&f)); }
                    Some("error") => return Err(unexpected(&live, &f)),
                    _ => {}
                }
            }
        }
    }
    let deadline = Instant::now() + DRAIN;
    while !unacked.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let f = live.next(left).await.map_err(|e| format!("waiting for {unacked:?}: {e}"))?;
        match f["type"].as_str() {
            Some("ack") => {
                unacked.remove(support::id(&f));
            }
            Some("error") => return Err(unexpected(&live, &f)),
            _ => {}
        }
    }
    live.close().await;
    Ok(())
}

/// A new set on one of the keys with `if_version` the version this client last observed
/// (every fourth attempt deliberately stale: 0 for a key it knows exists); None when the
/// budget is spent.
async fn start_set(
    live: &mut Live,
    budget: &Budget,
    idx: usize,
    attempt: &mut usize,
) -> R<Option<(String, Op)>> {
    let key = KEYS[(*attempt + idx) % KEYS.len()];
    let seen = live.view.get(key).copied().unwrap_or(0);
    let if_version = if *attempt % 4 == 3 && seen > 0 { 0 } else { seen };
    if !budget.take() {
        return Ok(None);
    }
    let sid = format!("s{idx}-{attempt}");
    let value = json!({"by": idx, "n": *attempt});
    *attempt += 1;
    let op = Op::Set { key: key.into(), value, if_version: Some(if_version) };
    live.send_op(&sid, op.clone()).await?;
    Ok(Some((sid, op)))
}

/// Read-then-set bidder: every `SET_PERIOD` a set ([`start_set`]), one in flight at a time.
/// A flaky one sets and at once drops its connection every 1.5-2.5 s, resumes and resends the
/// set still waiting for its answer.
async fn setter(plan: Arc<Plan>, idx: usize, flaky: bool) -> R {
    let mut live = Live::connect(&plan, support::session(&format!("hset{idx}"))).await?;
    live.c().send(json!({"type": "get_state"})).await?;
    let mut rng = Rng::new(idx as u64 + 101);
    let mut pending: Option<(String, Op)> = None;
    let mut ticker = interval_at(plan.start, SET_PERIOD);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let far = plan.until + Duration::from_secs(3600);
    let mut next_drop = if flaky { plan.start + rng.ms(1200, 2000) } else { far };
    let (mut attempt, mut drops) = (0usize, 0usize);
    loop {
        tokio::select! {
            _ = sleep_until(plan.until) => break,
            _ = ticker.tick() => {
                if pending.is_some() {
                    continue;
                }
                pending = start_set(&mut live, &plan.budget, idx, &mut attempt).await?;
                if pending.is_none() {
                    break;
                }
            }
            _ = sleep_until(next_drop) => {
                // A set, and gone before its answer: resent (same id, same set) below.
                if pending.is_none() {
                    pending = start_set(&mut live, &plan.budget, idx, &mut attempt).await?;
                }
                live.reconnect(drops % 2 == 1, None).await?;
                drops += 1;
                if let Some((sid, op)) = &pending {
                    live.send_op(sid, op.clone()).await?;
                }
                next_drop = Instant::now() + rng.ms(1500, 2500);
            }
            f = live.next(FRAME_WAIT) => {
                let f = f?;
                on_set_reply(&mut live, &f, &mut pending, &plan.budget)?;
            }
        }
    }
    let deadline = Instant::now() + DRAIN;
    while pending.is_some() {
        let left = deadline.saturating_duration_since(Instant::now());
        let f = live.next(left).await.map_err(|e| format!("waiting for {pending:?}: {e}"))?;
        on_set_reply(&mut live, &f, &mut pending, &plan.budget)?;
    }
    live.close().await;
    Ok(())
}

fn on_set_reply(
    live: &mut Live,
    f: &Value,
    pending: &mut Option<(String, Op)>,
    budget: &Budget,
) -> R {
    let is_reply = f["type"] == "ack" || f["type"] == "error";
    if !is_reply {
        return Ok(());
    }
    let key = match pending.as_ref() {
        Some((sid, Op::Set { key, .. })) if f["id"] == sid.as_str() => key.clone(),
        _ => return Err(unexpected(live, f)),
    };
    match (f["type"].as_str(), f["code"].as_str()) {
        (Some("ack"), _) => live.see_version(&key, support::seq(f)),
        (Some("error"), Some("conflict")) => {
            live.see_version(&key, f["version"].as_u64().unwrap_or(0));
            budget.give_back(); // not applied
        }
        _ => return Err(unexpected(live, f)),
    }
    *pending = None;
    Ok(())
}

/// Reads for 0.4-1.2 s, goes away (alternately dropping TCP and closing), resumes from what it
/// applied; reader 0 resumes once in a wrong epoch (a resync replaces its state).
async fn reader(plan: Arc<Plan>, idx: usize) -> R {
    let mut live = Live::connect(&plan, support::session(&format!("hread{idx}"))).await?;
    let mut rng = Rng::new(idx as u64 + 1001);
    let mut hops = 0u32;
    loop {
        let stay = Instant::now() + rng.ms(400, 1200);
        loop {
            tokio::select! {
                _ = sleep_until(stay) => break,
                _ = sleep_until(plan.until) => break,
                f = live.next(FRAME_WAIT) => {
                    let f = f?;
                    if f["type"] == "error" {
                        return Err(unexpected(&live, &f));
                    }
                }
            }
        }
        if Instant::now() >= plan.until {
            break;
        }
        hops += 1;
        let bogus = (idx == 0 && hops == 3).then_some(BOGUS_EPOCH);
        live.reconnect(hops % 2 == 1, bogus).await?;
    }
    live.close().await;
    Ok(())
}

/// Counts that show the run exercised what the checker checks.
#[derive(Debug, Default)]
struct Coverage {
    acks: usize,
    deliveries: usize,
    sets: usize,
    conflicts: usize,
    resumes: usize,
    resyncs: usize,
    resends: usize,
}

fn coverage(h: &History) -> Coverage {
    let mut c = Coverage::default();
    let mut sent: BTreeSet<Key> = BTreeSet::new();
    for r in &h.events {
        match &r.ev {
            Ev::Ack { .. } => c.acks += 1,
            Ev::Deliver(_) => c.deliveries += 1,
            Ev::Error { code, .. } if code == "conflict" => c.conflicts += 1,
            Ev::Connect { resumed: true, .. } => c.resumes += 1,
            Ev::Resync { .. } => c.resyncs += 1,
            Ev::Send { id, .. } if !sent.insert((r.client.clone(), id.clone())) => c.resends += 1,
            _ => {}
        }
    }
    c.sets = h.log.iter().filter(|m| m.topic == "$state").count();
    c
}

async fn concurrent_history(ctx: Ctx, relayed: bool) -> R {
    // The checker must catch broken histories before a clean verdict means anything.
    checker_self_test()?;

    let room = support::room("history");
    let now = Instant::now();
    let start = now + Duration::from_millis(800);
    let plan = Arc::new(Plan {
        ctx: ctx.clone(),
        room: room.clone(),
        relayed,
        rec: Recorder::new(),
        budget: Budget(AtomicI64::new(WRITE_BUDGET)),
        start,
        until: start + RUN,
    });
    let mut tasks = Vec::new();
    for i in 0..PUBLISHERS {
        tasks.push(("publisher", tokio::spawn(publisher(plan.clone(), i, i == PUBLISHERS - 1))));
    }
    for i in 0..SETTERS {
        tasks.push(("setter", tokio::spawn(setter(plan.clone(), i, i == 1))));
    }
    for i in 0..READERS {
        tasks.push(("reader", tokio::spawn(reader(plan.clone(), i))));
    }
    let mut failures = Vec::new();
    for (what, t) in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{what}: {e}")),
            Err(e) => failures.push(format!("{what} task: {e}")),
        }
    }
    check!(failures.is_empty(), "clients failed:\n{}", failures.join("\n"));

    let events = plan.rec.take();
    let epoch = events
        .iter()
        .find_map(|r| match &r.ev {
            Ev::Connect { epoch, .. } => Some(epoch.clone()),
            _ => None,
        })
        .ok_or("no client ever connected")?;
    // The final log, whole, by a fresh client resuming from 0.
    let mut fin = ctx.dial(&room, &support::session("hfinal")).since(0, &epoch);
    if relayed {
        fin = fin.token(&crate::edge_support::token(&room, "hfinal"));
    }
    let mut fin = fin.connect().await?;
    let n = fin.welcome_seq();
    check!(
        fin.welcome["resumed"] == true && fin.welcome["missed"] == n,
        "a resume from 0 of {n} ≤ {WRITE_BUDGET} messages must replay them all: {}",
        fin.welcome
    );
    let mut log = Vec::new();
    for _ in 0..n {
        log.push(Msg::from_frame(&fin.expect_type("message").await?));
    }
    let st = fin.get_state().await?;
    fin.close().await;
    let h = History { events, log, state: st["state"].clone(), state_seq: support::seq(&st) };

    let violations = check_history(&h);
    check!(
        violations.is_empty(),
        "{} violations in a history of {} events and {n} messages:{}",
        violations.len(),
        h.events.len(),
        render(&violations)
    );
    let c = coverage(&h);
    eprintln!("history: {n} messages, {} events, {c:?}", h.events.len());
    // The run really exercised what was checked.
    check!(c.acks >= 30 && n >= 30, "too few writes to mean anything: {n} messages, {c:?}");
    check!(c.sets >= 5, "too few successful sets: {c:?}");
    check!(c.conflicts >= 3, "too few conflicts (stale sets always conflict): {c:?}");
    check!(c.resumes >= 8, "too few resumes: {c:?}");
    check!(c.resyncs >= 1, "the wrong-epoch resume did not resync: {c:?}");
    check!(c.resends >= 2, "too few writes resent after a drop: {c:?}");
    check!(c.deliveries >= 5 * n as usize, "too few deliveries: {c:?}");
    Ok(())
}
