//! The attack review of the room engine's write path (session 33): a blocked user's socket
//! taken back on a load, rule effects lost to their ids, timers a member can push out or spin.
//! Each test plays the attacker's sequence and asserts what the others are left with.

use serde_json::json;
use serde_json::value::RawValue;

use crate::room::rules::{Ctx, Join, Refusal, Rules, Who, Write};
use crate::room::sim::Sim;
use crate::room::{CloseCode, Output, Peer, Room, RoomConfig, Snapshot, Time};

/// A socket's record as the adapter keeps it (the attachment).
fn peer(conn: &str, user: &str) -> Peer {
    let record = json!({
        "conn": conn, "session": format!("s-{conn}"), "user": user, "region": "EU",
        "opened": 1_000, "since": 1_000, "seen": 1_000, "state": {"name": user},
    });
    serde_json::from_value(record).expect("a peer record")
}

/// Mallory, blocked, never answered the close the room sent her: the runtime still lists her
/// socket when the room loads again. The load closes it (4403 `blocked`) and lists only Bob.
/// (The adapter also writes over a closed socket's record, so this is the second wall.)
#[test]
fn a_load_takes_no_blocked_users_socket_back() {
    let snap = Snapshot {
        room: "r".into(),
        epoch: "e".into(),
        peers: vec![peer("c-bob", "bob"), peer("c-mal", "mallory")],
        blocks: vec![("mallory".into(), Time::from_ms(600_000))],
        ..Snapshot::default()
    };
    let mut room = Room::restore(RoomConfig::default(), snap, Time::from_ms(2_000));
    let mut closed = Vec::new();
    while let Some(out) = room.poll_output() {
        if let Output::Close { conn, code } = out {
            closed.push((conn, code));
        }
    }
    assert_eq!(closed, vec![("c-mal".to_owned(), CloseCode::Blocked)]);
    assert_eq!(room.members(), 1, "only bob is a member");
}

/// Rules whose timer sets itself again at once: an interval a member set to 0. Each publish
/// (re)starts it; each firing publishes a tick.
struct Ticker;

impl Rules for Ticker {
    fn publish(&mut self, room: &mut Ctx<'_>, _: &Who<'_>, _: &str, _: &RawValue) -> Write {
        room.schedule("tick", room.now());
        Write::Accept
    }

    fn timer(&mut self, room: &mut Ctx<'_>, name: &str) {
        room.publish("tick", &json!(name));
        room.schedule(name, room.now());
    }
}

/// Fired in one loop until nothing was due, such a timer never let the event end: the
/// runtime would end it, and the Wasm instance with every room in it. Now each alarm fires
/// what was due when it came, once, and a timer set again for now waits 100 ms.
#[test]
fn a_timer_that_sets_itself_for_now_fires_once_an_alarm_not_in_a_loop() {
    let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(Ticker));
    let a = s.connect("a", "EU", None);
    s.publish(&a, "go", "1");
    let start = s.now;
    s.run_until(start.plus_ms(1_000));
    let ticks = s.take(&a).iter().filter(|f| f["topic"] == "tick").count();
    assert!((2..=11).contains(&ticks), "{ticks} ticks in 1 s: one an alarm, 100 ms apart");
}

/// Rules that keep a timer per bid (`outbid:{bid}`), and one of the room's own, `reopen`,
/// whose name sorts after them all.
struct Outbid;

impl Rules for Outbid {
    fn join(&mut self, room: &mut Ctx<'_>, _: &Who<'_>) -> Join {
        if room.scheduled("reopen").is_none() {
            room.schedule("reopen", room.now().plus_secs(40));
        }
        Join::Accept
    }

    fn publish(&mut self, room: &mut Ctx<'_>, _: &Who<'_>, _: &str, data: &RawValue) -> Write {
        room.schedule(&format!("outbid:{}", data.get()), room.now().plus_secs(600));
        Write::Accept
    }

    fn timer(&mut self, room: &mut Ctx<'_>, name: &str) {
        room.publish("news", &json!(name));
    }
}

/// Mallory bids 300 times, a timer each: past the room's 256 the newest are not set, and the
/// room's own timer still fires (it was the one dropped, by its name, when the limit was met).
#[test]
fn timers_a_member_makes_cannot_push_out_the_rooms_own() {
    let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(Outbid));
    let bob = s.connect("bob", "EU", None);
    let mallory = s.connect("mallory", "EU", None);
    for i in 0..300 {
        s.publish(&mallory, &format!("b{i}"), &i.to_string());
        s.advance(100);
    }
    s.take(&bob);
    let start = s.now;
    s.run_until(start.plus_secs(15)); // within the members' 60 s of silence
    let news: Vec<_> = s.take(&bob).into_iter().filter(|f| f["topic"] == "news").collect();
    assert_eq!(news.len(), 1, "{news:?}");
    assert_eq!(news[0]["data"], "reopen");
}

/// Rules that keep `eve` out and write down each time she tries.
struct Doorkeeper;

impl Rules for Doorkeeper {
    fn join(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
        if who.user != "eve" {
            return Join::Accept;
        }
        room.publish("door", &json!({"turned_away": who.user, "members": room.members().len()}));
        Join::Refuse(Refusal::new("members_only", "not a member"))
    }
}

/// Eve, whom the rules keep out, read what the rules wrote when they refused her (the
/// message went to every socket, hers included, before her close): now only the members
/// hear it, and her socket gets nothing but its close.
#[test]
fn a_refused_joiner_hears_nothing_the_rules_write_about_it() {
    let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(Doorkeeper));
    let bob = s.connect("bob", "EU", None);
    s.take(&bob);
    let eve = s.connect("eve", "EU", None);
    let heard = s.take(&eve);
    assert!(heard.is_empty(), "eve heard {heard:?}");
    assert_eq!(s.sockets[&eve].closed, Some(4403));
    let door = s.take_type(&bob, "message");
    assert_eq!(door.len(), 1, "bob hears of it: {door:?}");
    assert_eq!(door[0]["data"]["turned_away"], "eve");
}

/// Rules of a vote: refused while the room is not `open`, the attempt written down (`audit`);
/// once open, each vote counts in `tally`.
struct Vote;

impl Rules for Vote {
    fn publish(&mut self, room: &mut Ctx<'_>, who: &Who<'_>, _: &str, _: &RawValue) -> Write {
        if room.get_as::<bool>("open") != Some(true) {
            room.publish("audit", &json!({"refused": who.user}));
            return Write::Refuse(Refusal::new("closed", "the vote is not open"));
        }
        let tally = room.get_as::<u64>("tally").unwrap_or(0);
        room.set("tally", &json!(tally + 1));
        Write::Accept
    }
}

/// Ann votes while the vote is closed (refused; the attempt written down under her write's
/// id), then sends the same vote again once it opens: it is taken, and it counts. Before, the
/// tally's write took the id the attempt's note already had and was dropped as a retry of it:
/// a vote stored without what the rules made of it.
#[test]
fn a_write_taken_when_sent_again_after_a_refusal_lands_with_its_rules_writes() {
    let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(Vote));
    let ann = s.connect("ann", "EU", None);
    let vote = r#"{"type":"publish","id":"v1","topic":"vote","data":"yes"}"#;
    s.send(&ann, vote);
    let refused: Vec<_> = s.take_type(&ann, "error");
    assert_eq!(refused[0]["code"], "closed");
    s.send(&ann, r#"{"type":"set","id":"open","key":"open","value":true}"#);
    s.send(&ann, vote);
    let acks = s.take_type(&ann, "ack");
    let seq = acks.iter().find(|a| a["id"] == "v1").expect("the vote is taken")["seq"].clone();
    let tally: Vec<_> = s
        .disk
        .log
        .values()
        .filter(|e| e.topic == "$state" && e.data.get().contains("tally"))
        .collect();
    assert_eq!(tally.len(), 1, "the vote's tally is stored");
    assert!(
        tally[0].id.starts_with(&format!("s{seq}-")),
        "named by the vote's seq: {}",
        tally[0].id
    );
    assert_eq!(s.disk.state.get("tally").map(|(v, _)| v.get()), Some("1"));
}

/// A 60 KB value, numbered.
fn big(i: usize) -> String {
    format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(60_000))
}

/// The seqs of the messages in `frames`.
fn message_seqs(frames: &[serde_json::Value]) -> Vec<u64> {
    frames.iter().filter(|f| f["type"] == "message").filter_map(|f| f["seq"].as_u64()).collect()
}

/// Mallory, with two sockets, sends 100 publishes of 60 KB back to back (her frame budget's
/// whole burst), again every 2.5 s: 6 MB at once each time, more than a reader may have in
/// flight and waiting. Every reader of the room was closed 4013 at the first burst, and again
/// at each reconnect. Now her bytes are budgeted like her frames: most of each burst is refused
/// `rate_limited`, and Bob, who reads after each burst, stays, with every message once and
/// in order.
#[test]
fn one_member_cannot_flood_every_reader_out_of_the_room() {
    let mut s = Sim::new(RoomConfig::default());
    let bob = s.connect_as("sess-bob", "bob", "EU", None);
    let mut mallory = Vec::new();
    let (mut seen, mut refused, mut taken) = (Vec::new(), 0, 0);
    for round in 0..8 {
        // Her sockets, again (a flood of refused frames closes one 4029: she comes back).
        mallory.retain(|m: &String| s.sockets[m].closed.is_none());
        while mallory.len() < 2 {
            let session = format!("sess-m{round}-{}", mallory.len());
            mallory.push(s.connect_as(&session, "mallory", "EU", None));
        }
        for i in 0..50 {
            for (k, m) in mallory.iter().enumerate() {
                if s.sockets[m].closed.is_none() {
                    s.publish(m, &format!("r{round}-{k}-{i}"), &big(i));
                }
            }
        }
        for m in &mallory {
            let frames = s.take(m);
            refused += frames.iter().filter(|f| f["code"] == "rate_limited").count();
            taken += frames.iter().filter(|f| f["type"] == "ack").count();
        }
        seen.extend(message_seqs(&s.take(&bob))); // Bob reads what the burst left him
        assert_eq!(s.sockets[&bob].closed, None, "bob closed in round {round}");
        s.run_until(s.now.plus_ms(2_500));
    }
    seen.extend(message_seqs(&s.take(&bob)));
    let all: Vec<u64> = (1..=s.room.seq()).collect();
    assert_eq!(seen, all, "every message once, in order");
    // Her first burst took at most the byte burst (1 MiB), each later one what 2.5 s refill.
    let most = (1 << 20) / 60_000 + 8 * (2_500 * 256 * 1024 / 1000) / 60_000 + 1;
    assert!(taken <= most && refused > 500, "taken {taken} (at most {most}), refused {refused}");
}

/// Rules that publish what a member sends on `echo` ten times over (a route or hook that
/// writes more than it was given).
struct Echo;

impl Rules for Echo {
    fn publish(&mut self, room: &mut Ctx<'_>, _: &Who<'_>, topic: &str, data: &RawValue) -> Write {
        if topic == "echo" {
            for _ in 0..10 {
                room.publish("echoed", &data);
            }
        }
        Write::Accept
    }
}

/// Mallory's 20 KB publishes each made the rules write 200 KB for everyone to read, and only her
/// 20 KB counted against her byte budget. What the rules write because of her is hers to pay
/// for now: after about a megabyte of it her next frame is refused.
#[test]
fn what_the_rules_write_because_of_a_member_is_paid_from_their_bytes() {
    let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(Echo));
    let mallory = s.connect("mallory", "EU", None);
    let pad = "x".repeat(20_000);
    let (mut acked, mut refused) = (0, 0);
    for i in 0..10 {
        s.send(
            &mallory,
            &format!(r#"{{"type":"publish","id":"e{i}","topic":"echo","data":"{pad}"}}"#),
        );
        let frames = s.take(&mallory); // she reads (and confirms) all along
        acked += frames.iter().filter(|f| f["type"] == "ack").count();
        refused += frames.iter().filter(|f| f["code"] == "rate_limited").count();
    }
    assert!(acked <= 6 && refused >= 4, "{acked} acked, {refused} refused");
}

/// A client that paces its frames but not its bytes (one from before the byte budget) sends a
/// 60 KB frame 18 times a second (under the frame rate) for a minute: most are refused for the
/// bytes, and the socket stays. Counted as abuse, like refusals for the frame rate, they closed
/// it 4029 within half a minute.
#[test]
fn refusals_for_bytes_do_not_close_a_client_that_keeps_its_frame_rate() {
    let mut s = Sim::new(RoomConfig::default());
    let ann = s.connect("ann", "EU", None);
    for i in 0..1_100 {
        s.publish(&ann, &format!("u{i}"), &big(i));
        s.advance(55);
        s.take(&ann); // she reads what she is sent
        assert_eq!(s.sockets[&ann].closed, None, "closed after {i} frames");
    }
}
