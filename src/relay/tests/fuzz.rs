//! The topology fuzzer: a seeded random walk over whole rooms of a home, four relays and, in
//! half the cases, sockets at the home itself (tests/FUZZ.md records its long runs).

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::sim::{Topo, HOME};
use super::RELAYS;
use crate::protocol::link::LINK_VERSION;
use crate::room::RoomConfig;

/// Where the walk's clients connect: the relays, and in a mixed room the home itself.
const PLACES: [&str; 5] = ["oc-0", "eu-0", "na-0", "as-0", HOME];
const PLACE_REGIONS: [&str; 5] = ["OC", "EU", "NA", "AS", "EU"];

/// A seeded random walk over whole topologies: clients of four relays (and in half the cases
/// of the home itself: a mixed room) connect, write, signal, read, drop and resume, while relays reset, links
/// drop, instances split and the home is evicted and reset. After every
/// read each connection's messages are gapless and after each case every
/// acked write is stored once, every write a client kept retrying is stored,
/// and the home's members are exactly the open clients' sessions.
/// `TOPO_CASES` scales it (default 150); `TOPO_SEED` picks another base seed.
#[test]
fn fuzz_topologies() {
    let cases: u64 = std::env::var("TOPO_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(150);
    let seed: u64 = std::env::var("TOPO_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let (mut ops, mut tails, mut lost, mut mirrored) = (0u64, 0u64, 0u64, 0u64);
    let (mut parked, mut held, mut direct) = (0u64, 0u64, 0u64);
    if let Some(one) = std::env::var("TOPO_CASE")
        .ok()
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
    {
        topo_case(one);
        return;
    }
    for case in 0..cases {
        let case_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ case;
        if std::env::var("TOPO_TRACE").is_ok() {
            eprintln!("case {case}: seed {case_seed:#x}");
        }
        let (n, tail, tail_lost, mirror, (park, hold, home)) = topo_case(case_seed);
        (ops, tails, lost, mirrored) = (ops + n, tails + tail, lost + tail_lost, mirrored + mirror);
        (parked, held, direct) = (parked + park, held + hold, direct + home);
    }
    eprintln!(
        "fuzz_topologies: {cases} cases, {ops} ops, {tails} catch-ups from a relay's tail, \
         {lost} of them lost to newer entries, {mirrored} state replies from a relay's mirror, \
         {parked} frames that waited for a recall's answer, {held} opens held for the answers, \
         {direct} sockets at the home itself"
    );
    // The walk reaches both ways a tail's catch-up goes (not idle: a tail that never claims
    // would make both 0).
    if cases >= 100 {
        assert!(tails > 0 && lost > 0, "tails {tails}, lost {lost}");
        assert!(mirrored > 0, "no state reply came from a relay's mirror");
        assert!(parked > 0, "no frame waited for a recall's answer");
        assert!(held > 0, "no open waited for the links' answers");
        assert!(direct > 0, "no client connected to the home itself");
    }
}

/// A case's room: budgets wide, a replay window drawn (`replay_draw` of 3), coalescing from
/// the seed's bits.
fn topo_config(seed: u64, replay_draw: u64) -> RoomConfig {
    // Budgets wide enough that the walk's reconnects are never paced: what
    // is checked here is ordering and delivery, not the limits.
    RoomConfig {
        user_connect_burst: 10_000,
        user_connections: 100,
        user_burst: 10_000,
        burst: 10_000,
        // A short replay window now and then: resumes past it resync, and a relay's tail
        // loses a catch-up it claimed to the entries that came before the home's word.
        replay_limit: [2, 8, 100][replay_draw as usize],
        // Half the cases coalesce every signal and batch every durable frame (the home's and
        // the relays' windows); the other half are below the threshold, as a small room is.
        // The seed's lowest bit, which the walk's draws ignore (`seed | 1`): each walk runs
        // both ways.
        batch_above: if seed & 1 == 0 { 0 } else { 5_000 },
        ..RoomConfig::default()
    }
}

/// A client as the walk tracks it, across its reconnects.
struct Walker {
    conn: String,
    relay: usize,
    /// The last seq this connection applied, once welcomed.
    last: Option<u64>,
    /// Ids sent and not yet acked (sent again after a reconnect), and acked.
    pending: Vec<String>,
    acked: BTreeSet<String>,
    next_id: u64,
    /// Signals sent, counted; and those its connection heard (sender's session, count): none
    /// twice. Per connection: a session that moves to another relay may hear again there what
    /// its old socket heard from its relay-mates at once, when it crossed the home after the
    /// move (a signal is sent to the connections there are when it comes, PROTOCOL.md).
    signals: u64,
    heard: BTreeSet<(String, u64)>,
}

/// One case of the walk: its steps, the catch-ups the home left to a relay's tail, those a
/// relay no longer held when the home's word came, the state replies from a relay's mirror,
/// and (frames parked, opens held, clients at the home itself).
fn topo_case(seed: u64) -> (u64, u64, u64, u64, (u64, u64, u64)) {
    let mut x = seed | 1;
    let mut rand = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let config = topo_config(seed, rand(3));
    let mut t = Topo::new(config, 1 + rand(60));
    // A third of the cases each under a home that serves its relays in link version 2 (an
    // older home sends whole welcomes) and 3 (it windows each relayed session's signals),
    // without a draw of the walk's. From bits the case number changes (a base seed's cases
    // differ in the low bits only: at bit 8, a run of 150 had one version).
    t.link_version = match (seed >> 2) % 3 {
        0 => LINK_VERSION,
        1 => 3,
        _ => 2,
    };
    // Half the cases a mixed room: clients also connect to the home itself, as a room that
    // crossed the relay threshold keeps its sockets (from the seed, not a draw of the walk's).
    let places = if seed & 0b10 == 0 { 5 } else { 4 };
    let mut walkers: Vec<Walker> = Vec::new();
    let steps = 50 + rand(250);
    let trace = std::env::var("TOPO_CASE").is_ok();
    for _ in 0..steps {
        let op = rand(100);
        if trace {
            let open = t.home.sockets.values().filter(|s| s.open).count();
            let conns = t.home.room.connections();
            eprintln!("t={} op {op} engine conns {conns} sim open {open}", t.now.ms());
        }
        topo_step(&mut t, &mut walkers, (op, places), &mut rand);
        no_ghost(&t, seed);
    }
    // The end: a hung relay's lease runs out, and every grace: the home's members are the
    // open clients' sessions, no ghost left. Then everyone reconnects until their writes are
    // acked.
    t.advance(crate::protocol::link::LEASE_MS);
    t.advance(RoomConfig::default().link_grace_ms);
    t.settle();
    no_ghost(&t, seed);
    let open: BTreeSet<&str> =
        t.clients.values().filter(|c| c.open).map(|c| c.session.as_str()).collect();
    assert_eq!(t.home.room.members(), open.len(), "seed {seed:#x}: a ghost after every grace");
    assert_eq!(t.home.room.away(), 0, "seed {seed:#x}: away after every grace");
    for _ in 0..6 {
        t.settle();
        for w in &mut walkers {
            walk_read(&mut t, w);
            let relay = w.relay;
            walk_resume(&mut t, w, relay);
        }
    }
    t.settle();
    for w in &mut walkers {
        walk_read(&mut t, w);
    }
    let stored: Vec<(String, String)> =
        t.home.disk.log.values().map(|e| (e.session.clone(), e.id.clone())).collect();
    let unique: BTreeSet<&(String, String)> = stored.iter().collect();
    assert_eq!(unique.len(), stored.len(), "seed {seed:#x}: a write stored twice");
    for (n, w) in walkers.iter().enumerate() {
        assert!(w.pending.is_empty(), "seed {seed:#x}: w{n} never got acks for {:?}", w.pending);
        for id in &w.acked {
            assert!(
                unique.contains(&(format!("sess-w{n}"), id.clone())),
                "seed {seed:#x}: acked {id} lost"
            );
        }
    }
    let open: BTreeSet<&str> =
        t.clients.values().filter(|c| c.open).map(|c| c.session.as_str()).collect();
    assert_eq!(t.home.room.members(), open.len(), "seed {seed:#x}: members are the open sessions");
    assert_eq!(t.home.room.away(), 0, "seed {seed:#x}: every away member came back");
    let direct = t.clients.values().filter(|c| c.instance == HOME).count() as u64;
    (steps, t.home.tail_replays, t.tail_lost, t.home.relay_states, (t.parked, t.held, direct))
}

/// No member outlives its clients by more than the grace: a session the home lists with no
/// open client closed its last one at most `link_grace_ms` ago (and the moment its close
/// takes to cross a link). A dead relay's members are away that long, from its last sign of
/// life; a hung relay's last sign is its hang, before any of its clients closed.
fn no_ghost(t: &Topo, seed: u64) {
    const CROSSING_MS: u64 = 1_000;
    let grace = RoomConfig::default().link_grace_ms;
    let presence: Value = serde_json::from_str(&t.home.room.presence_json()).expect("json");
    let Some(members) = presence["members"].as_object() else {
        return;
    };
    for session in members.keys() {
        let theirs = || t.clients.values().filter(|c| &c.session == session);
        if theirs().any(|c| c.open) {
            continue;
        }
        let last = theirs().filter_map(|c| c.closed_at).max().expect("a member had a client");
        assert!(
            t.now.ms() <= last.ms() + grace + CROSSING_MS,
            "seed {seed:#x}: {session} is listed {} ms after its last client closed",
            t.now.ms() - last.ms()
        );
    }
}

/// A walker writes, if its client is open: a message, or every fourth time a write to the
/// state (a relay's mirror hears of it).
fn walk_write(t: &mut Topo, w: &mut Walker) {
    if !t.clients[&w.conn].open {
        return;
    }
    w.next_id += 1;
    let id = format!("m{}", w.next_id);
    w.pending.push(id.clone());
    if w.next_id.is_multiple_of(4) {
        let (key, n) = (w.next_id % 3, w.next_id);
        let set = format!(r#"{{"type":"set","id":"{id}","key":"k{key}","value":{{"n":{n}}}}}"#);
        t.send(&w.conn, &set);
    } else {
        t.publish(&w.conn, &id, r#"{"n":1}"#);
    }
}

/// One op of the walk.
/// `places`: how many of [`PLACES`] the clients connect to (4: the relays only).
fn topo_step(
    t: &mut Topo,
    walkers: &mut Vec<Walker>,
    (op, places): (u64, u64),
    rand: &mut impl FnMut(u64) -> u64,
) {
    match op {
        0..=9 if walkers.len() < 8 => {
            let relay = rand(places) as usize;
            let n = walkers.len();
            let (session, user) = (format!("sess-w{n}"), format!("u{}", n % 3));
            let conn = t.connect(PLACES[relay], &session, &user, PLACE_REGIONS[relay], None);
            walkers.push(Walker {
                conn,
                relay,
                last: None,
                pending: Vec::new(),
                acked: BTreeSet::new(),
                next_id: 0,
                signals: 0,
                heard: BTreeSet::new(),
            });
        }
        10..=39 if !walkers.is_empty() => {
            let i = rand(walkers.len() as u64) as usize;
            walk_write(t, &mut walkers[i]);
        }
        40..=49 if !walkers.is_empty() => {
            let i = rand(walkers.len() as u64) as usize;
            walk_look_or_signal(t, &mut walkers[i]);
        }
        50..=69 if !walkers.is_empty() => {
            let i = rand(walkers.len() as u64) as usize;
            walk_read(t, &mut walkers[i]);
        }
        70..=78 => t.advance(rand(120)),
        // Now and then long enough for a hung relay's lease to run out.
        79 => t.advance(rand(12_000)),
        80..=85 if !walkers.is_empty() => {
            // A closed client reconnects (maybe at another relay) and
            // sends again what was not acked, as our client does.
            let i = rand(walkers.len() as u64) as usize;
            let relay = if rand(3) == 0 { rand(places) as usize } else { walkers[i].relay };
            walk_resume(t, &mut walkers[i], relay);
        }
        86..=88 if !walkers.is_empty() => {
            let w = &walkers[rand(walkers.len() as u64) as usize];
            t.drop_client(&w.conn.clone());
        }
        89 if !walkers.is_empty() => {
            // A binary frame (any size up to past the limit): refused at the relay.
            let w = &walkers[rand(walkers.len() as u64) as usize];
            if t.clients[&w.conn].open {
                t.send_binary(&w.conn.clone(), rand(70_000) as usize);
            }
        }
        90 => t.hang_relay(RELAYS[rand(4) as usize]),
        91 => t.reset_relay(RELAYS[rand(4) as usize]),
        92..=94 => t.drop_link(RELAYS[rand(4) as usize]),
        95 => {
            t.split_relay(RELAYS[rand(4) as usize]);
        }
        96..=97 => {
            t.evict_home();
        }
        98..=99 => t.reset_home(),
        _ => {}
    }
}

/// A walker asks for the state now and then (from the home or the relay's mirror, checked by
/// the topology), or else moves its cursor: a signal of its own count.
fn walk_look_or_signal(t: &mut Topo, w: &mut Walker) {
    if !t.clients[&w.conn].open {
        return;
    }
    if t.now.ms().is_multiple_of(3) {
        t.send(&w.conn, r#"{"type":"get_state"}"#);
    } else {
        w.signals += 1;
        t.signal(&w.conn, &format!(r#"{{"i":{}}}"#, w.signals));
    }
}

fn walk_read(t: &mut Topo, w: &mut Walker) {
    let conn = w.conn.clone();
    for f in t.take(&conn) {
        let seq = f["seq"].as_u64();
        match f["type"].as_str() {
            // A resumed connection continues the last one's seqs.
            Some("welcome") if f["resumed"] != true => w.last = seq,
            Some("resync") => w.last = seq,
            Some("message") => {
                let seq = seq.expect("a seq");
                if let Some(last) = w.last {
                    assert_eq!(seq, last + 1, "{conn}: a gap or a double");
                }
                w.last = Some(seq);
            }
            Some("ack") => {
                let id = f["id"].as_str().expect("an id").to_owned();
                w.pending.retain(|p| *p != id);
                w.acked.insert(id);
            }
            // Coalescing and shedding may leave a signal out; nothing may bring one twice.
            Some("signal") => {
                let from = f["session"].as_str().expect("a sender").to_owned();
                let i = f["data"]["i"].as_u64().expect("a count");
                assert!(w.heard.insert((from, i)), "{conn}: a signal twice: {f}");
            }
            _ => {}
        }
    }
}

fn walk_resume(t: &mut Topo, w: &mut Walker, relay: usize) {
    if t.clients[&w.conn].open {
        return;
    }
    walk_read(t, w);
    w.conn = t.resume(&w.conn, PLACES[relay]);
    w.heard.clear();
    w.relay = relay;
    // `last` carries over: a resumed connection continues it.
    t.settle();
    walk_read(t, w);
    for id in w.pending.clone() {
        if t.clients[&w.conn].open {
            t.publish(&w.conn, &id, r#"{"n":1}"#);
        }
    }
}
