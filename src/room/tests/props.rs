//! Property tests: for any interleaving of publishes, retries, drops,
//! reconnects, supersedes, evictions and turn ends, every connection sees
//! `seq` strictly increasing without gaps, every acked write is in the log
//! exactly once, and presence counts exactly one member per connected
//! session; in a quiet room and in one loaded past every threshold (frames
//! batched at the end of the turn, signals shed, replays deferred).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::Value;

use crate::room::sim::Sim;
use crate::room::RoomConfig;

#[derive(Debug, Clone)]
enum Op {
    Publish(usize),
    Set(usize, u64),
    Retry(usize, usize),
    Drop(usize),
    Reconnect(usize),
    Supersede(usize),
    Evict,
    Advance(u64),
    /// The event loop has no more events waiting: the flush timer fires.
    TurnEnds,
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0..4usize;
    prop_oneof![
        6 => c.clone().prop_map(Op::Publish),
        2 => (c.clone(), 0..3u64).prop_map(|(c, v)| Op::Set(c, v)),
        3 => (c.clone(), 0..50usize).prop_map(|(c, i)| Op::Retry(c, i)),
        2 => c.clone().prop_map(Op::Drop),
        3 => c.clone().prop_map(Op::Reconnect),
        1 => c.prop_map(Op::Supersede),
        1 => Just(Op::Evict),
        1 => (1..5_000u64).prop_map(Op::Advance),
        3 => Just(Op::TurnEnds),
    ]
}

/// One browser tab: a session that resumes from what it applied.
#[derive(Default)]
struct Client {
    conn: Option<String>,
    epoch: Option<String>,
    /// Highest seq applied; None until the first welcome.
    applied: Option<u64>,
    /// Seqs applied since the last resync, to catch duplicates.
    seen: BTreeSet<u64>,
    /// Every write sent: its id, its frame, the connection it last went out on.
    sent: Vec<(String, String, String)>,
    /// Ids answered with an error (a `set` that lost its compare).
    refused: BTreeSet<String>,
    /// The current connection has had its `welcome` (its first frame).
    welcomed: bool,
}

impl Client {
    fn session(i: usize) -> String {
        format!("session-{i}")
    }

    /// Applies what arrived, checking order on this connection.
    fn apply(&mut self, frames: Vec<Value>, acks: &mut BTreeMap<(String, String), u64>, who: &str) {
        for f in frames {
            let kind = f["type"].as_str().unwrap();
            assert!(self.welcomed || kind == "welcome", "{who}: {kind} before the welcome");
            match kind {
                "welcome" => {
                    self.welcomed = true;
                    self.epoch = Some(f["epoch"].as_str().unwrap().to_owned());
                    if f["resumed"] == false {
                        // fresh view from here: a resync (if any) follows
                        self.applied = Some(f["seq"].as_u64().unwrap());
                        self.seen.clear();
                    }
                }
                "resync" => {
                    self.applied = Some(f["seq"].as_u64().unwrap());
                    self.seen.clear();
                }
                "message" => {
                    let seq = f["seq"].as_u64().unwrap();
                    let expected = self.applied.unwrap() + 1;
                    assert_eq!(seq, expected, "{who}: gap or reorder");
                    assert!(self.seen.insert(seq), "{who}: seq {seq} twice");
                    self.applied = Some(seq);
                }
                "ack" => {
                    let key = (who.to_owned(), f["id"].as_str().unwrap().to_owned());
                    let seq = f["seq"].as_u64().unwrap();
                    let first = *acks.entry(key).or_insert(seq);
                    assert_eq!(first, seq, "{who}: a retry was acked with another seq");
                }
                "error" => {
                    if let Some(id) = f["id"].as_str() {
                        self.refused.insert(id.to_owned());
                    }
                }
                _ => {}
            }
        }
    }
}

fn run(ops: Vec<Op>, loaded: bool) {
    let mut config = RoomConfig {
        rate_per_sec: 100_000,
        burst: 100_000,
        user_rate_per_sec: 100_000,
        user_burst: 100_000,
        ..RoomConfig::default()
    };
    if loaded {
        config.batch_above = 1;
        config.outbound_budget = 1;
        config.storm_resumes_per_sec = 1;
    }
    let mut sim = Sim::new(config);
    let mut clients: Vec<Client> = (0..4).map(|_| Client::default()).collect();
    let mut acks = BTreeMap::new();
    let mut next_id = 0;
    for op in ops {
        match op {
            Op::Publish(c) | Op::Set(c, _) if clients[c].conn.is_some() => {
                next_id += 1;
                let id = format!("m{next_id}");
                let conn = clients[c].conn.clone().unwrap();
                let text = match op {
                    Op::Set(_, v) => format!(
                        r#"{{"type":"set","id":"{id}","key":"k","value":{v},"if_version":{v}}}"#
                    ),
                    _ => format!(r#"{{"type":"publish","id":"{id}","topic":"chat","data":{{}}}}"#),
                };
                sim.send(&conn, &text);
                clients[c].sent.push((id, text, conn));
            }
            Op::Retry(c, i) if clients[c].conn.is_some() && !clients[c].sent.is_empty() => {
                // The same frame again, as the client's outbox resends it.
                let conn = clients[c].conn.clone().unwrap();
                let n = clients[c].sent.len();
                let entry = &mut clients[c].sent[i % n];
                entry.2 = conn.clone();
                let text = entry.1.clone();
                sim.send(&conn, &text);
            }
            Op::Drop(c) => {
                if let Some(conn) = clients[c].conn.take() {
                    sim.drop_conn(&conn);
                }
            }
            Op::Reconnect(c) if clients[c].conn.is_none() => connect(&mut sim, &mut clients[c], c),
            Op::Supersede(c) => {
                let old = clients[c].conn.clone();
                connect(&mut sim, &mut clients[c], c);
                if let Some(old) = old {
                    assert_eq!(sim.sockets[&old].closed, Some(4001));
                }
            }
            Op::Evict => {
                // A pending timer keeps the object in memory: it is evicted
                // only once nothing waits for the end of a turn or a hold.
                sim.settle();
                sim.evict()
            }
            Op::Advance(ms) => sim.advance(ms),
            Op::TurnEnds => sim.run_until(sim.now),
            _ => {}
        }
        // Presence is exact at every step: one member per connected tab.
        let connected = clients.iter().filter(|c| c.conn.is_some()).count();
        assert_eq!((sim.room.members(), sim.room.connections()), (connected, connected));
        for (i, client) in clients.iter_mut().enumerate() {
            if let Some(conn) = client.conn.clone() {
                let frames = sim.take(&conn);
                client.apply(frames, &mut acks, &Client::session(i));
            }
        }
    }
    // Everyone comes back and catches up.
    for (i, client) in clients.iter_mut().enumerate() {
        if client.conn.is_none() {
            connect(&mut sim, client, i);
        }
    }
    sim.settle();
    // A connection that stayed open has an answer for everything sent on it.
    // What was sent on one that closed may have lost its ack with it: as the
    // client's outbox does, it is sent again and gets the original ack.
    for (i, client) in clients.iter_mut().enumerate() {
        let conn = client.conn.clone().unwrap();
        client.apply(sim.take(&conn), &mut acks, &Client::session(i));
        for (id, text, on) in &client.sent {
            if acks.contains_key(&(Client::session(i), id.clone())) {
                continue;
            }
            if on == &conn {
                assert!(
                    client.refused.contains(id),
                    "client {i}: no answer to {id} on an open connection"
                );
                continue;
            }
            sim.send(&conn, text);
        }
    }
    sim.settle();
    for (i, client) in clients.iter_mut().enumerate() {
        client.apply(sim.take(client.conn.as_ref().unwrap()), &mut acks, &Client::session(i));
        assert_eq!(client.applied, Some(sim.room.seq()), "client {i} caught up");
    }
    // Every acked write is in the log once, at the seq its ack named.
    let mut in_log = BTreeMap::new();
    for e in sim.disk.log.values() {
        let dup = in_log.insert((e.session.clone(), e.id.clone()), e.seq);
        assert!(dup.is_none(), "({}, {}) sequenced twice", e.session, e.id);
    }
    let unacked: Vec<_> = in_log.iter().filter(|(k, _)| !acks.contains_key(*k)).collect();
    let phantom: Vec<_> = acks.iter().filter(|(k, _)| !in_log.contains_key(*k)).collect();
    assert!(
        unacked.is_empty() && phantom.is_empty(),
        "in the log, never acked: {unacked:?}; acked, not in the log: {phantom:?}"
    );
    assert_eq!(in_log, acks);
    assert_eq!(sim.disk.log.len() as u64, sim.room.seq());
}

fn connect(sim: &mut Sim, client: &mut Client, i: usize) {
    // Frames already delivered to the old socket were applied; now resume.
    let since = client.applied.zip(client.epoch.clone());
    let conn =
        sim.connect(&Client::session(i), "EU", since.as_ref().map(|(s, e)| (*s, e.as_str())));
    client.conn = Some(conn);
    client.welcomed = false;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_connection_sees_every_write_once_in_order(ops in prop::collection::vec(op(), 1..300)) {
        run(ops, false);
    }

    #[test]
    fn under_load_every_connection_still_sees_every_write_once_in_order(
        ops in prop::collection::vec(op(), 1..300)
    ) {
        run(ops, true);
    }
}

#[test]
fn a_long_outage_resyncs_and_still_converges() {
    let mut ops = vec![Op::Reconnect(0), Op::Reconnect(1), Op::Publish(0), Op::Drop(1)];
    ops.extend((0..150).map(|_| Op::Publish(0)));
    ops.push(Op::Evict);
    run(ops.clone(), false);
    run(ops, true);
}
