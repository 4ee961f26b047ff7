//! The engine target's inputs: what clients and the operator do, and the generated cases.

#![allow(clippy::wildcard_imports)]
use super::*;

// ---- the engine target: what clients and the operator do ---------------------

/// How a connection reads what the room sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Reads after every step and echoes each mark.
    Reading,
    /// Reads only when told to (its frames pile up in the runtime).
    Lazy,
    /// Reads but never echoes a mark (a hostile or broken reader).
    Silent,
}

/// What a reconnect says about where the client left off.
#[derive(Debug, Clone, Copy)]
pub(super) enum Resume {
    Fresh,
    Correct,
    /// `since` this far behind what it applied.
    Stale(u64),
    /// `since` this far past it.
    Future(u64),
    BogusEpoch,
    NoEpoch,
}

/// Which mark an echo carries.
#[derive(Debug, Clone)]
pub(super) enum MarkPick {
    Latest,
    Oldest,
    /// One already echoed.
    Stale,
    /// One another connection received.
    Foreign,
    Forged(Txt),
}

/// One frame a client sends.
#[derive(Debug, Clone)]
pub(super) enum Payload {
    Text(Txt),
    /// A `set` whose `if_version` is the key's version now (plus `delta`).
    SetCurrent {
        id: String,
        key: String,
        value: Txt,
        delta: i64,
    },
    Mark(MarkPick),
}

#[derive(Debug, Clone, Copy)]
pub(super) enum BlockOp {
    Keep,
    For(u64),
    Lift,
}

/// One step. `pick` chooses among the open connections (or, for `Late`
/// and `RuntimeClose`, among all), modulo their number.
#[derive(Debug, Clone)]
pub(super) enum Op {
    Connect {
        slot: usize,
        resume: Resume,
        region: usize,
        exp: Option<i64>,
    },
    /// `slot`'s user opens a connection with `victim`'s session.
    Hijack {
        slot: usize,
        victim: usize,
        region: usize,
    },
    Send {
        pick: usize,
        payload: Payload,
    },
    /// Several frames in one turn.
    Burst(Vec<(usize, Payload)>),
    /// A frame that arrives after the room closed the socket.
    Late {
        pick: usize,
        text: Txt,
    },
    Binary {
        pick: usize,
        len: usize,
    },
    Drop {
        pick: usize,
    },
    RuntimeClose {
        pick: usize,
    },
    Read {
        pick: usize,
    },
    SetMode {
        pick: usize,
        mode: Mode,
    },
    Ping {
        pick: usize,
    },
    Evict,
    /// A Wasm reset at any moment (a panic elsewhere in the instance): see [`Sim::reset`].
    Reset,
    Advance(u64),
    TurnEnds,
    RunFor(u64),
    Settle,
    EarlyAlarm,
    Kick {
        user: usize,
        block: BlockOp,
    },
    Drain,
    Delete,
    ServerPublish {
        id: String,
        topic: String,
        data: Txt,
    },
}

/// A generated case: the room's config, who the clients are, what they do.
#[derive(Debug, Clone)]
pub(super) struct Setup {
    pub(super) config: RoomConfig,
    /// Rules that send (else the open rules).
    pub(super) rules: Option<Sender>,
    pub(super) users: usize,
    /// The user of each client slot (a browser tab).
    pub(super) slot_users: Vec<usize>,
    /// How each slot reads at first.
    pub(super) slot_modes: Vec<Mode>,
}

pub(super) const REGIONS: &[&str] = &["EU", "NA", "OC"];
/// How long a departed member's session stays its user's (admission.rs).
pub(super) const DEPARTED_MS: u64 = 10 * 60 * 1000;
pub(super) const CLOSE_CODES: &[u16] =
    &[1001, 1009, 1012, 4001, 4008, 4013, 4029, 4401, 4403, 4404, 4409, 4429];
pub(super) const ERROR_CODES: &[&str] =
    &["bad_frame", "too_large", "rate_limited", "conflict", "invalid"];

pub(super) fn user_name(u: usize) -> String {
    format!("user-{u}")
}

/// A room config with small windows, backlogs, limits and thresholds, so
/// that flow control, backlog closes, batching, shedding, storms, trims,
/// large rooms and rate limits all happen in a few hundred steps.
pub(super) fn gen_config(rng: &mut Rng) -> RoomConfig {
    let mut c = RoomConfig::default();
    if rng.chance(85) {
        c.replay_limit = rng.pick(&[1, 2, 3, 5, 8, 13, 20]);
        c.log_retain = c.replay_limit + rng.below(30);
        c.max_frame = rng.pick(&[300, 512, 1024, 2048, 4096]) + rng.below(200) as usize;
        c.log_retain_bytes = rng.range(100, 20_000);
        c.batch_max_bytes = rng.range(200, 8_000) as usize;
        c.presence_max = rng.range(20, 400) as usize;
        c.state_max_keys = rng.range(1, 12) as usize;
        c.state_max_bytes = rng.range(50, 3_000) as usize;
        c.send_window = rng.range(1, 16_000);
        c.reply_bytes_per_sec = rng.range(100, 20_000);
        c.reply_burst_bytes = rng.range(100, 50_000);
    }
    if rng.chance(55) {
        c.rate_per_sec = rng.range(1, 20);
        c.burst = rng.range(1, 20);
        c.abuse_drain_per_sec = rng.range(1, 10);
        c.abuse_limit = rng.range(3, 30);
        c.user_rate_per_sec = rng.range(1, 40);
        c.user_burst = rng.range(1, 40);
        // About 2 KB a frame (no draw of its own: a seed's cases stay as they were).
        c.user_bytes_per_sec = c.user_rate_per_sec * 2_000;
        c.user_bytes_burst = c.user_burst * 2_000;
    } else {
        c.rate_per_sec = 10_000;
        c.burst = 10_000;
        c.user_rate_per_sec = 10_000;
        c.user_burst = 10_000;
        c.user_bytes_per_sec = 1 << 30;
        c.user_bytes_burst = 1 << 30;
    }
    c.presence_ttl_ms = rng.pick(&[1_000, 5_000, 30_000, 60_000, 300_000]);
    c.summary_interval_ms = rng.range(1, 5_000);
    c.large_room = rng.range(1, 8) as usize;
    c.presence_window_ms = if rng.chance(30) { 0 } else { rng.range(1, 200) };
    c.batch_window_ms = rng.range(1, 200);
    c.batch_above = if rng.chance(50) { rng.range(1, 30) } else { 5_000 };
    c.outbound_budget = if rng.chance(40) { rng.range(1, 40) } else { 50_000 };
    c.storm_resumes_per_sec = if rng.chance(50) { rng.range(1, 3) } else { 50 };
    let lo = rng.range(1, 500);
    c.storm_jitter_ms = (lo, lo + rng.below(2_000));
    c.user_connections = rng.range(1, 4) as usize;
    if rng.chance(50) {
        c.user_connects_per_sec = rng.range(1, 4);
        c.user_connect_burst = rng.range(1, 30);
    }
    c.retention_ms = rng.pick(&[0, 10_000, 120_000, 3_600_000, 90 * 24 * 3_600_000]);
    c.echo_deadline_ms = rng.pick(&[3_000, 20_000, 60_000]);
    c.log_retain = c.log_retain.max(c.replay_limit);
    c.finish();
    // The backlog a reader may have waiting: often at least the largest
    // catch-up (a replay or a resync); sometimes less (but at least a
    // frame: a held catch-up is allowed on top of it), so that silent
    // readers reach it (4013).
    let replay = c.replay_limit * (2 * c.max_frame as u64 + 2_000);
    let state = 2 * c.state_max_bytes as u64 + c.state_max_keys as u64 * 300 + 2_000;
    c.max_backlog = if rng.chance(50) {
        replay.max(state) + rng.below(30_000)
    } else {
        c.max_frame as u64 + rng.range(200, 6_000)
    };
    c
}

/// Pools of names a case draws from, so that ids repeat (retries), topics
/// and keys collide (coalescing, CAS).
pub(super) struct Pools {
    pub(super) ids: u64,
    pub(super) max_frame: usize,
    pub(super) presence_max: usize,
}

pub(super) fn small_data(rng: &mut Rng) -> String {
    let mut out = String::new();
    gen_value(rng, &mut out, 3, true);
    out
}

/// Any frame from the parser's generator, mutated or not.
pub(super) fn any_frame(rng: &mut Rng) -> String {
    let bad = rng.chance(20);
    let frame = gen_frame(rng, bad);
    let text = frame.text(rng);
    match rng.below(4) {
        0 => mutate(rng, &text),
        1 if rng.chance(20) => noise(rng),
        _ => text,
    }
}

pub(super) fn gen_payload(rng: &mut Rng, pools: &Pools) -> Payload {
    let id = |rng: &mut Rng| {
        if rng.chance(85) {
            format!("m{}", rng.below(pools.ids))
        } else {
            format!("u{}", rng.next() % 1_000_000)
        }
    };
    let text = match rng.weighted(&[30, 10, 6, 12, 8, 5, 5, 8, 10, 3, 3]) {
        0 => {
            let data = match rng.below(100) {
                0..=79 => small_data(rng),
                80..=94 => {
                    let n = rng.range(pools.max_frame as u64 / 4, pools.max_frame as u64);
                    format!(r#"{{"pad":"{}"}}"#, "p".repeat(n as usize))
                }
                95..=97 => {
                    let n = rng.range(30, 36) as usize;
                    nest(rng, n, "1", 0).0
                }
                _ => {
                    let n = pools.max_frame + rng.below(200) as usize;
                    format!(r#""{}""#, "o".repeat(n))
                }
            };
            let topic = rng.pick(&["chat", "t", "news", "$state", "🦀"]);
            format!(r#"{{"type":"publish","id":"{}","topic":"{topic}","data":{data}}}"#, id(rng))
        }
        1 => {
            let key = format!("k{}", rng.below(5));
            let value = if rng.chance(15) {
                format!(r#""{}""#, "v".repeat(rng.below(pools.max_frame as u64) as usize))
            } else {
                small_data(rng)
            };
            return Payload::SetCurrent {
                id: id(rng),
                key,
                value: Txt(value),
                delta: rng.pick(&[0, 0, 0, 0, 1, -1, 5]),
            };
        }
        2 => {
            let key = format!("k{}", rng.below(5));
            let v = match rng.below(4) {
                0 => String::new(),
                1 => r#","if_version":0"#.into(),
                _ => format!(r#","if_version":{}"#, rng.below(40)),
            };
            let value = small_data(rng);
            format!(r#"{{"type":"set","id":"{}","key":"{key}","value":{value}{v}}}"#, id(rng))
        }
        3 => {
            let topic = rng.pick(&["cursor", "typing", "t", "$x"]);
            format!(r#"{{"type":"signal","topic":"{topic}","data":{}}}"#, small_data(rng))
        }
        4 => {
            let state = match rng.below(10) {
                0 => format!(r#"{{"pad":"{}"}}"#, "s".repeat(pools.presence_max)),
                1 => "[1]".into(),
                _ => format!(r#"{{"name":"n{}","n":{}}}"#, rng.below(9), small_data(rng)),
            };
            format!(r#"{{"type":"presence","state":{state}}}"#)
        }
        5 => r#"{"type":"get_state"}"#.into(),
        6 => r#"{"type":"ping"}"#.into(),
        7 => {
            let pick = match rng.below(10) {
                0..=4 => MarkPick::Latest,
                5 => MarkPick::Oldest,
                6 => MarkPick::Stale,
                7 => MarkPick::Foreign,
                8 => MarkPick::Forged(Txt(format!("{:016x}", rng.next()))),
                _ => MarkPick::Forged(Txt(gen_str(rng, 70, false).decoded.unwrap())),
            };
            return Payload::Mark(pick);
        }
        8 | 9 => any_frame(rng),
        _ => {
            // over the frame limit
            let n = pools.max_frame + rng.below(100) as usize;
            format!(r#"{{"type":"ping","pad":"{}"}}"#, "x".repeat(n))
        }
    };
    Payload::Text(Txt(text))
}

pub(super) fn gen_case(seed: u64) -> (Setup, Vec<Op>) {
    let mut rng = Rng::new(seed);
    let config = gen_config(&mut rng);
    let users = rng.range(3, 4) as usize;
    let slots = rng.range(4, 8) as usize;
    let slot_users =
        (0..slots).map(|i| if rng.chance(70) { i % users } else { rng.idx(users) }).collect();
    let slot_modes = (0..slots)
        .map(|_| match rng.below(10) {
            0 => Mode::Silent,
            1 | 2 => Mode::Lazy,
            _ => Mode::Reading,
        })
        .collect();
    let pools = Pools {
        ids: rng.range(5, 200),
        max_frame: config.max_frame,
        presence_max: config.presence_max,
    };
    // Rules that send, sized against the reply budget (a send over it is refused as a rule
    // problem; one near it takes the user's whole burst).
    let burst = config.reply_burst_bytes as usize;
    let rules = rng.chance(35).then(|| Sender {
        join_blob: *rng.pick(&[&0, &100, &(burst / 8), &(burst / 3)]),
        poke_blob: *rng.pick(&[&10, &(burst / 16), &(burst / 4)]),
    });
    let n = rng.range(20, 350) as usize;
    let mut ops = Vec::with_capacity(n + slots);
    // Most slots start connected.
    for slot in 0..slots {
        if rng.chance(80) {
            ops.push(Op::Connect { slot, resume: Resume::Fresh, region: rng.idx(3), exp: None });
        }
    }
    let pick = |rng: &mut Rng| rng.idx(64);
    for _ in 0..n {
        let op = match rng
            .weighted(&[35, 3, 9, 2, 1, 1, 3, 1, 3, 2, 2, 1, 6, 3, 3, 2, 1, 1, 1, 1, 2, 2, 3])
        {
            0 => Op::Send { pick: pick(&mut rng), payload: gen_payload(&mut rng, &pools) },
            1 => {
                let k = rng.range(2, 12);
                let frames = if rng.chance(35) {
                    // one sender's signals (and the odd write) in one turn
                    let who = pick(&mut rng);
                    (0..k)
                        .map(|_| {
                            let p = if rng.chance(80) {
                                let topic = rng.pick(&["cursor", "typing"]);
                                let data = small_data(&mut rng);
                                let t = format!(
                                    r#"{{"type":"signal","topic":"{topic}","data":{data}}}"#
                                );
                                Payload::Text(Txt(t))
                            } else {
                                gen_payload(&mut rng, &pools)
                            };
                            (who, p)
                        })
                        .collect()
                } else {
                    (0..k).map(|_| (pick(&mut rng), gen_payload(&mut rng, &pools))).collect()
                };
                Op::Burst(frames)
            }
            2 => {
                let resume = match rng.below(22) {
                    0..=11 => Resume::Correct,
                    12..=13 => Resume::Fresh,
                    14..=17 => Resume::Stale(rng.range(1, 30)),
                    18 => Resume::Future(rng.below(5)),
                    19..=20 => Resume::BogusEpoch,
                    _ => Resume::NoEpoch,
                };
                let exp = rng.chance(15).then(|| rng.range(0, 120_000) as i64 - 2_000);
                Op::Connect { slot: rng.idx(slots), resume, region: rng.idx(3), exp }
            }
            3 => Op::Hijack { slot: rng.idx(slots), victim: rng.idx(slots), region: rng.idx(3) },
            4 => Op::Late { pick: pick(&mut rng), text: Txt(r#"{"type":"ping"}"#.into()) },
            5 => Op::Binary {
                pick: pick(&mut rng),
                len: rng.below(2 * config.max_frame as u64) as usize,
            },
            6 => Op::Drop { pick: pick(&mut rng) },
            7 => Op::RuntimeClose { pick: pick(&mut rng) },
            8 => Op::Read { pick: pick(&mut rng) },
            9 => {
                let mode = rng.pick(&[Mode::Reading, Mode::Lazy, Mode::Silent]);
                Op::SetMode { pick: pick(&mut rng), mode }
            }
            10 => Op::Ping { pick: pick(&mut rng) },
            11 => Op::Evict,
            12 => Op::Advance(match rng.below(100) {
                0..=49 => rng.range(1, 100),
                50..=84 => rng.range(100, 5_000),
                _ => rng.range(5_000, 200_000),
            }),
            13 => Op::TurnEnds,
            14 => Op::RunFor(rng.range(1, 10_000)),
            15 => Op::Settle,
            16 => Op::EarlyAlarm,
            17 => {
                let block = match rng.below(3) {
                    0 => BlockOp::Keep,
                    1 => BlockOp::For(rng.range(1, 300_000)),
                    _ => BlockOp::Lift,
                };
                Op::Kick { user: rng.idx(users), block }
            }
            18 => {
                if rng.chance(60) {
                    Op::Drain
                } else {
                    Op::Delete
                }
            }
            19 => {
                if rng.chance(50) {
                    Op::Evict
                } else {
                    Op::Reset
                }
            }
            20 => {
                // Echoes of marks, most of them spent (the connection read and echoed what it
                // had first): repeated, interleaved with live ones.
                let who = pick(&mut rng);
                ops.push(Op::Read { pick: who });
                let k = rng.range(5, 200) as usize;
                let frames = (0..k)
                    .map(|_| {
                        let pick = match rng.below(20) {
                            0..=9 => MarkPick::Stale,
                            10..=12 => MarkPick::Oldest,
                            13..=15 => MarkPick::Latest,
                            16..=17 => MarkPick::Foreign,
                            _ => MarkPick::Forged(Txt(format!("{:016x}", rng.next()))),
                        };
                        (who, Payload::Mark(pick))
                    })
                    .collect();
                Op::Burst(frames)
            }
            21 => {
                // Publishes the sending rules answer with a send to a slot's session (or to
                // nobody), from one sender in one turn.
                let who = pick(&mut rng);
                let frames = (0..rng.range(1, 12))
                    .map(|_| {
                        let to = format!("sess-slot{}-g{}", rng.idx(slots), rng.below(2) / 2);
                        // Mostly new ids: a retry gets its ack without asking the rules.
                        let id = format!("poke{}", rng.below(1_000_000));
                        let t = format!(
                            r#"{{"type":"publish","id":"{id}","topic":"{POKE}","data":"{to}"}}"#
                        );
                        (who, Payload::Text(Txt(t)))
                    })
                    .collect();
                Op::Burst(frames)
            }
            _ => {
                let id = if rng.chance(80) {
                    format!("srv{}", rng.below(20))
                } else {
                    let n = name_len(&mut rng).min(66);
                    gen_str(&mut rng, n, false).decoded.unwrap()
                };
                let topic = rng.pick(&["news", "$x", "", "t"]).to_owned();
                Op::ServerPublish { id, topic, data: Txt(small_data(&mut rng)) }
            }
        };
        ops.push(op);
    }
    (Setup { config, rules, users, slot_users, slot_modes }, ops)
}
