//! The application's rules inside the engine, on virtual time: a refusal
//! leaves nothing behind, a rewrite is what is stored and seen, the rules'
//! own writes are sequenced after the write that caused them and never
//! twice, timers survive eviction, joins can be refused or given info.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::room::rules::{Ctx, Current, Join, Refusal, Request, Response, Rules, Who, Write};
use crate::room::sim::{seqs, Sim};
use crate::room::{Room, RoomConfig, Snapshot, Time};

/// What the test rules saw, for the tests to read.
#[derive(Default)]
struct Seen {
    leaves: Vec<String>,
    loaded: Vec<u64>,
    currents: Vec<Option<(Value, u64)>>,
    infos: Vec<Option<Value>>,
    join_infos: Vec<Option<Value>>,
}

/// Test rules: refuse the topic `forbidden`; rewrite `shout` to upper case;
/// on `bid` sets accept only higher amounts and stamp the bidder; echo
/// `announce` publishes with a rules publish; keep out the user `banned`;
/// give everyone an info; schedule `close` when asked.
struct TestRules {
    seen: Rc<RefCell<Seen>>,
}

fn raw(v: Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(&v).unwrap()
}

impl Rules for TestRules {
    fn join(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
        if who.user == "banned" {
            return Join::Refuse(Refusal::new("banned_here", "not in this room"));
        }
        self.seen
            .borrow_mut()
            .join_infos
            .push(who.info.map(|i| serde_json::from_str(i.get()).unwrap()));
        room.send(who.session, "hello", &json!({"members": room.members().len()}));
        if who.info.is_some() {
            return Join::Accept; // the token's verified info stands
        }
        Join::AcceptWith(raw(json!({"role": if who.user == "host" { "host" } else { "guest" }})))
    }

    fn leave(&mut self, _room: &mut Ctx<'_>, who: &Who<'_>) {
        self.seen.borrow_mut().leaves.push(who.session.to_owned());
    }

    fn publish(
        &mut self,
        room: &mut Ctx<'_>,
        who: &Who<'_>,
        topic: &str,
        data: &RawValue,
    ) -> Write {
        self.seen.borrow_mut().infos.push(who.info.map(|i| serde_json::from_str(i.get()).unwrap()));
        let v: Value = serde_json::from_str(data.get()).unwrap_or(Value::Null);
        match topic {
            "forbidden" => Write::Refuse(Refusal::new("no_such_topic", "nothing goes here")),
            "shout" => Write::Rewrite(raw(json!(v.as_str().unwrap_or("").to_uppercase()))),
            "announce" => {
                room.publish("news", &json!({"by": who.user, "said": v}));
                Write::Accept
            }
            "schedule" => {
                room.schedule("close", Time::from_ms(v.as_u64().unwrap_or(0)));
                Write::Accept
            }
            "bad-topic" => {
                room.publish("$nope", &json!(1));
                Write::Accept
            }
            _ => Write::Accept,
        }
    }

    fn set(
        &mut self,
        _room: &mut Ctx<'_>,
        who: &Who<'_>,
        key: &str,
        value: &RawValue,
        current: Option<Current<'_>>,
    ) -> Write {
        self.seen
            .borrow_mut()
            .currents
            .push(current.map(|c| (serde_json::from_str(c.value.get()).unwrap(), c.version)));
        if key != "bid" {
            return Write::Accept;
        }
        let amount =
            serde_json::from_str::<Value>(value.get()).ok().and_then(|v| v["amount"].as_u64());
        let top = current
            .and_then(|c| serde_json::from_str::<Value>(c.value.get()).ok())
            .and_then(|v| v["amount"].as_u64())
            .unwrap_or(0);
        match amount {
            Some(a) if a > top => Write::Rewrite(raw(json!({"amount": a, "bidder": who.user}))),
            _ => Write::Refuse(Refusal::new("bid_too_low", format!("bid more than {top}"))),
        }
    }

    fn timer(&mut self, room: &mut Ctx<'_>, name: &str) {
        let top: Option<Value> = room.get_as("bid");
        room.set("closed", &json!({"timer": name, "winner": top.map(|t| t["bidder"].clone())}));
        room.publish("news", &json!("closed"));
    }

    fn request(&mut self, room: &mut Ctx<'_>, req: &Request) -> Option<Response> {
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "top") => Some(Response::json(200, &room.get_as::<Value>("bid"))),
            ("POST", "announce") if req.admin => {
                room.publish("news", &json!(req.body));
                Some(Response::json(202, &json!({"ok": true})))
            }
            ("POST", "announce") => Some(Response::json(403, &json!({"error": "admin only"}))),
            _ => None,
        }
    }

    fn loaded(&mut self, _room: &mut Ctx<'_>, recent: &[crate::room::LogEntry]) {
        self.seen.borrow_mut().loaded.push(recent.len() as u64);
    }
}

fn sim() -> (Sim, Rc<RefCell<Seen>>) {
    let seen = Rc::new(RefCell::new(Seen::default()));
    let shared = seen.clone();
    let s = Sim::with_rules(RoomConfig::default(), move || {
        Box::new(TestRules { seen: shared.clone() }) as Box<dyn Rules>
    });
    (s, seen)
}

fn of_type(frames: &[Value], kind: &str) -> Vec<Value> {
    frames.iter().filter(|f| f["type"] == kind).cloned().collect()
}

#[test]
fn a_refused_publish_leaves_seq_storage_and_everyone_else_untouched() {
    let (mut s, _) = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    let b = s.connect_as("sess-bbbb", "bob", "EU", None);
    s.take(&a);
    s.take(&b);
    s.publish(&a, "m1", "1");
    s.send(&a, r#"{"type":"publish","id":"m2","topic":"forbidden","data":{"x":1}}"#);
    let f = s.take(&a);
    let err = &of_type(&f, "error")[0];
    assert_eq!(
        (err["code"].as_str(), err["id"].as_str(), err["message"].as_str()),
        (Some("no_such_topic"), Some("m2"), Some("nothing goes here"))
    );
    assert_eq!(s.room.seq(), 1, "not sequenced");
    assert_eq!(s.disk.log.len(), 1, "not stored");
    assert_eq!(seqs(&s.take(&b)), [1], "nobody else saw anything of it");
    // The refused id is not taken: the next write with it is decided afresh.
    s.send(&a, r#"{"type":"publish","id":"m2","topic":"chat","data":2}"#);
    assert_eq!(of_type(&s.take(&a), "ack")[0]["seq"], 2);
}

#[test]
fn a_rewrite_is_what_is_stored_and_what_everyone_receives() {
    let (mut s, _) = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    let b = s.connect_as("sess-bbbb", "bob", "EU", None);
    s.take(&a);
    s.take(&b);
    s.send(&a, r#"{"type":"publish","id":"m1","topic":"shout","data":"hello"}"#);
    assert_eq!(s.disk.log[&1].data.get(), r#""HELLO""#);
    for conn in [&a, &b] {
        let m = &of_type(&s.take(conn), "message")[0];
        assert_eq!(m["data"], "HELLO");
    }
    // After an eviction, a resume replays the stored (rewritten) value.
    s.evict();
    let c = s.connect_as("sess-cccc", "cy", "EU", Some((0, "e-1")));
    assert_eq!(of_type(&s.take(&c), "message")[0]["data"], "HELLO");
}

#[test]
fn a_set_rule_sees_the_current_value_refuses_low_bids_and_stamps_the_bidder() {
    let (mut s, seen) = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    let m = s.connect_as("sess-mmmm", "mallory", "EU", None);
    s.send(&a, r#"{"type":"set","id":"b1","key":"bid","value":{"amount":10,"bidder":"x"}}"#);
    // Mallory bids lower, and in someone else's name: refused.
    s.send(&m, r#"{"type":"set","id":"b2","key":"bid","value":{"amount":5,"bidder":"ann"}}"#);
    let err = &of_type(&s.take(&m), "error")[0];
    assert_eq!((err["code"].as_str(), err["id"].as_str()), (Some("bid_too_low"), Some("b2")));
    // Higher, in someone else's name: the rule writes the real bidder.
    s.send(&m, r#"{"type":"set","id":"b3","key":"bid","value":{"amount":20,"bidder":"ann"}}"#);
    assert_eq!(s.disk.state["bid"].0.get(), r#"{"amount":20,"bidder":"mallory"}"#);
    let currents = seen.borrow().currents.clone();
    assert_eq!(currents[0], None);
    assert_eq!(currents[2], Some((json!({"amount":10,"bidder":"ann"}), 1)));
    let msgs = of_type(&s.take(&a), "message");
    assert_eq!(msgs.last().unwrap()["data"]["value"]["bidder"], "mallory");
    assert_eq!(s.room.seq(), 2, "the refused bid took no seq");
}

#[test]
fn the_rules_writes_follow_the_write_that_caused_them_and_a_retry_repeats_nothing() {
    let (mut s, _) = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    let b = s.connect_as("sess-bbbb", "bob", "EU", None);
    s.take(&a);
    s.take(&b);
    s.send(&a, r#"{"type":"publish","id":"m1","topic":"announce","data":"hi"}"#);
    let f = s.take(&b);
    let msgs = of_type(&f, "message");
    assert_eq!(seqs(&f), [1, 2]);
    assert_eq!(
        (msgs[0]["topic"].as_str(), msgs[1]["topic"].as_str()),
        (Some("announce"), Some("news"))
    );
    assert_eq!(
        (msgs[1]["session"].as_str(), msgs[1]["user"].as_str()),
        (Some("$rules"), Some("$rules"))
    );
    assert_eq!(msgs[1]["data"], json!({"by":"ann","said":"hi"}));
    // The client lost the ack and retries: its original ack; the rule does not run again.
    s.take(&a);
    s.send(&a, r#"{"type":"publish","id":"m1","topic":"announce","data":"hi"}"#);
    assert_eq!(of_type(&s.take(&a), "ack")[0]["seq"], 1);
    assert!(seqs(&s.take(&b)).is_empty());
    assert_eq!(s.disk.log.len(), 2);
}

#[test]
fn a_timer_fires_after_an_eviction_and_its_writes_are_stored_once() {
    let (mut s, _) = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    s.send(&a, r#"{"type":"set","id":"b1","key":"bid","value":{"amount":10}}"#);
    let at = s.now.plus_ms(60_000);
    s.send(&a, &format!(r#"{{"type":"publish","id":"m1","topic":"schedule","data":{at}}}"#));
    assert_eq!(s.disk.timers, [("close".to_string(), at)], "stored with the room");
    s.drop_conn(&a);
    s.evict(); // nobody left: the object goes; the alarm stays
    s.run_until(at.minus_ms(1));
    assert!(!s.disk.state.contains_key("closed"));
    s.run_until(at);
    assert_eq!(s.disk.state["closed"].0.get(), r#"{"timer":"close","winner":"ann"}"#);
    let seq = s.room.seq();
    assert_eq!(s.disk.log[&seq].topic, "news");
    assert!(s.disk.timers.is_empty(), "fired once: gone");
    // Were its removal lost (the same timer firing again), nothing is written twice.
    s.disk.timers = vec![("close".to_string(), at)];
    s.evict();
    s.run_until(at.plus_ms(1));
    assert_eq!(s.room.seq(), seq, "the same timer's writes are deduplicated");
}

#[test]
fn joins_can_be_refused_or_given_info_that_later_hooks_see() {
    let (mut s, seen) = sim();
    let obs = s.connect_as("sess-obs0", "host", "EU", None);
    s.take(&obs);
    let banned = s.connect_as("sess-bann", "banned", "EU", None);
    assert_eq!(s.sockets[&banned].closed, Some(4403));
    assert!(s.sockets[&banned].inbox.is_empty(), "no welcome");
    assert!(s.take(&obs).is_empty(), "nobody saw them come or go");
    assert!(seen.borrow().leaves.is_empty(), "never a member, so no leave");
    let g = s.connect_as("sess-gues", "guest", "EU", None);
    let f = s.take(&g);
    assert_eq!(f[0]["type"], "welcome");
    assert_eq!(f[0]["presence"]["members"]["sess-gues"]["info"], json!({"role":"guest"}));
    let hello = &of_type(&f, "signal")[0];
    assert_eq!(
        (hello["session"].as_str(), hello["topic"].as_str()),
        (Some("$rules"), Some("hello"))
    );
    assert_eq!(hello["data"]["members"], 1, "sent to the newcomer after its welcome");
    assert!(of_type(&s.take(&obs), "signal").is_empty(), "a send goes to one member only");
    s.publish(&g, "m1", "1");
    assert_eq!(seen.borrow().infos.last().unwrap(), &Some(json!({"role":"guest"})));
    // The info survives an eviction (it is in the socket's attachment).
    s.evict();
    s.publish(&g, "m2", "1");
    assert_eq!(seen.borrow().infos.last().unwrap(), &Some(json!({"role":"guest"})));
    s.drop_conn(&g);
    assert_eq!(seen.borrow().leaves, ["sess-gues"]);
}

/// A token's `info` claim arrives as the hello's info: the rules see it at the join and in
/// every later hook, and it is the member's `info` in presence unless the rules replace it.
#[test]
fn a_tokens_info_is_the_verified_identity_the_rules_see() {
    let (mut s, seen) = sim();
    let c = s.connect_with_info("sess-caro", "carol", "EU", r#"{"name":"Carol","tier":"gold"}"#);
    let f = s.take(&c);
    let info = json!({"name": "Carol", "tier": "gold"});
    assert_eq!(seen.borrow().join_infos, [Some(info.clone())]);
    assert_eq!(f[0]["presence"]["members"]["sess-caro"]["info"], info);
    s.publish(&c, "m1", "1");
    assert_eq!(seen.borrow().infos.last().unwrap(), &Some(info.clone()));
    // Without one, the join sees none.
    let d = s.connect_as("sess-dave", "dave", "EU", None);
    s.take(&d);
    assert_eq!(seen.borrow().join_infos.last().unwrap(), &None);
}

#[test]
fn the_rules_answer_requests_under_the_room_and_write_from_them() {
    let (mut s, _) = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    s.send(&a, r#"{"type":"set","id":"b1","key":"bid","value":{"amount":10}}"#);
    s.take(&a);
    let req = |method: &str, path: &str, admin: bool| Request {
        method: method.into(),
        path: path.into(),
        query: String::new(),
        body: "closing soon".into(),
        admin,
        user: None,
        info: None,
        region: String::new(),
    };
    let top = s.room.request(s.now, &req("GET", "top", false)).unwrap();
    assert_eq!((top.status, top.body.as_str()), (200, r#"{"amount":10,"bidder":"ann"}"#));
    assert_eq!(s.room.request(s.now, &req("POST", "announce", false)).unwrap().status, 403);
    assert_eq!(s.room.request(s.now, &req("POST", "announce", true)).unwrap().status, 202);
    s.pump();
    assert_eq!(of_type(&s.take(&a), "message")[0]["data"], "closing soon");
    assert_eq!(s.room.request(s.now, &req("GET", "nothing", true)), None);
}

#[test]
fn a_blocked_user_cannot_act_through_the_rules_routes() {
    // Kicked and blocked, mallory still holds a valid token; the rules'
    // HTTP routes are part of the room, so the block holds there too.
    let (mut s, _) = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    s.send(&a, r#"{"type":"set","id":"b1","key":"bid","value":{"amount":10}}"#);
    let m = s.connect_as("sess-mall", "mallory", "EU", None);
    s.take(&a);
    s.take(&m);
    let req = |user: &str, admin: bool| Request {
        method: "GET".into(),
        path: "top".into(),
        query: String::new(),
        body: String::new(),
        admin,
        user: Some(user.into()),
        info: None,
        region: String::new(),
    };
    let until = s.now.plus_ms(60_000);
    assert_eq!(s.room.kick(s.now, "mallory", crate::room::Block::Until(until)), 1);
    s.pump();
    let r = s.room.request(s.now, &req("mallory", false)).unwrap();
    assert_eq!(r.status, 403);
    assert_eq!(serde_json::from_str::<Value>(&r.body).unwrap()["error"], "blocked");
    // The block outlives an eviction, like the block of connects.
    s.evict();
    assert_eq!(s.room.request(s.now, &req("mallory", false)).unwrap().status, 403);
    // Others are not touched, and the operator's key passes.
    assert_eq!(s.room.request(s.now, &req("ann", false)).unwrap().status, 200);
    assert_eq!(s.room.request(s.now, &req("mallory", true)).unwrap().status, 200);
    // Once the block ends, mallory is an ordinary caller again.
    s.advance(60_001);
    assert_eq!(s.room.request(s.now, &req("mallory", false)).unwrap().status, 200);
}

#[test]
fn what_a_rule_cannot_do_refuses_the_write_that_asked_for_it_and_is_counted() {
    let (mut s, _) = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    s.pump();
    s.take(&a);
    s.send(&a, r#"{"type":"publish","id":"m1","topic":"bad-topic","data":1}"#);
    s.pump();
    assert_eq!(s.room.seq(), 0, "neither the member's write nor the rule's bad one lands");
    let got = s.take(&a);
    let error = got.iter().find(|f| f["type"] == "error").expect("an error frame");
    assert_eq!((error["code"].as_str(), error["id"].as_str()), (Some("rule_error"), Some("m1")));
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["rule_problems"], 1);
    assert!(stats["last_rule_problem"].as_str().unwrap().contains("$nope"));
}

#[test]
fn the_loaded_hook_gets_the_newest_log_after_an_eviction() {
    let (mut s, seen) = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    for i in 0..5 {
        s.publish(&a, &format!("m{i}"), "1");
    }
    s.evict();
    assert_eq!(seen.borrow().loaded.last(), Some(&5));
}

#[test]
fn a_room_without_rules_accepts_everything_as_before() {
    let mut room = Room::restore(RoomConfig::default(), Snapshot::default(), Time::EPOCH);
    assert_eq!(
        room.request(
            Time::EPOCH,
            &Request {
                method: "GET".into(),
                path: "x".into(),
                query: String::new(),
                body: String::new(),
                admin: true,
                user: None,
                info: None,
                region: String::new(),
            }
        ),
        None
    );
}

/// The Worker's health canary connects to the first kind's canary room: the rules are not
/// asked about it, so a `join` that refuses strangers keeps `/health` green, and its leave is
/// no member's leave.
#[test]
fn the_health_canary_passes_a_join_that_refuses_strangers() {
    #[derive(Clone, Default)]
    struct MembersOnly {
        leaves: std::rc::Rc<std::cell::Cell<u32>>,
    }
    impl Rules for MembersOnly {
        fn join(&mut self, _room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
            if who.user.starts_with("member-") {
                Join::Accept
            } else {
                Join::Refuse(Refusal::new("members_only", "members only"))
            }
        }
        fn leave(&mut self, _room: &mut Ctx<'_>, _who: &Who<'_>) {
            self.leaves.set(self.leaves.get() + 1);
        }
    }
    let rules = MembersOnly::default();
    let leaves = rules.leaves.clone();
    let mut s = Sim::with_rules(RoomConfig::default(), move || Box::new(rules.clone()));
    let stranger = s.connect_as("sess-stranger", "stranger", "EU", None);
    assert_eq!(s.sockets[&stranger].closed, Some(4403), "a stranger is refused");
    let canary = s.connect_canary("canary-1-abcdef");
    let got = s.take(&canary);
    assert_eq!(got[0]["type"], "welcome", "the canary is welcomed");
    s.send(&canary, r#"{"type":"ping"}"#);
    assert!(s.take(&canary).iter().any(|f| f["type"] == "pong"));
    s.drop_conn(&canary);
    assert_eq!(leaves.get(), 0, "the rules heard nothing of the canary");
}

#[test]
fn canaries_from_many_isolates_at_once_are_each_welcomed() {
    // Each isolate runs its own canary (one at a time each), all as the user `canary`: anyone
    // calling `/health` from enough places made more canaries than one user's connect burst
    // (and connections), and the room closed the rest 4429 before their welcome.
    let mut s = Sim::new(RoomConfig::default());
    let burst = RoomConfig::default().user_connect_burst as usize;
    let canaries: Vec<String> =
        (0..burst * 3).map(|i| s.connect_canary(&format!("canary-{i}-abcdef"))).collect();
    for c in &canaries {
        assert_eq!(s.sockets[c].closed, None, "{c}");
        assert_eq!(s.take(c)[0]["type"], "welcome", "{c}");
    }
    // And each is answered: the canary's ping (not the exact ping text the runtime answers)
    // spent the one user's frame budget, and past 100 of them `/health` failed at `pong`.
    for round in 0..3 {
        for c in &canaries {
            s.send(c, r#"{"type":"ping","canary":true}"#);
            let got = s.take(c);
            assert!(got.iter().any(|f| f["type"] == "pong"), "{c}, round {round}: {got:?}");
        }
    }
}
