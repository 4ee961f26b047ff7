//! The chat rules on the simulated adapter: bad messages and other topics
//! are refused and stored nowhere; a user over the quota waits; a newcomer
//! gets the last 50 messages, also after the room was evicted.

use homeroom::room::sim::Sim;
use homeroom::room::RoomConfig;
use homeroom_chat::Chat;
use serde_json::Value;

fn room(quota: u64) -> Sim {
    Sim::with_rules(RoomConfig::default(), move || Box::new(Chat::with_quota(quota)))
}

fn said(s: &mut Sim, conn: &str, id: &str, text: &str) -> Value {
    let frame =
        serde_json::json!({"type": "publish", "id": id, "topic": "chat", "data": {"text": text}});
    s.send(conn, &frame.to_string());
    let frames = s.take(conn);
    frames.into_iter().find(|f| f["id"] == id && f["type"] != "message").expect("an answer")
}

#[test]
fn messages_are_checked_and_refusals_store_nothing() {
    let mut s = room(20);
    let ann = s.connect_as("sess-ann1", "ann", "EU", None);
    assert_eq!(said(&mut s, &ann, "m1", "hello")["type"], "ack");
    assert_eq!(said(&mut s, &ann, "m2", "   ")["code"], "bad_message");
    assert_eq!(said(&mut s, &ann, "m3", &"x".repeat(2001))["code"], "bad_message");
    s.send(&ann, r#"{"type":"publish","id":"m4","topic":"news","data":{"text":"hi"}}"#);
    let refused = s.take(&ann).into_iter().find(|f| f["id"] == "m4").unwrap();
    assert_eq!(refused["code"], "no_such_topic");
    assert_eq!(s.room.seq(), 1, "only the good message was sequenced");
    assert_eq!(s.disk.log.len(), 1);
}

#[test]
fn a_user_over_the_quota_is_told_to_wait() {
    let mut s = room(3);
    let ann = s.connect_as("sess-ann1", "ann", "EU", None);
    let ann2 = s.connect_as("sess-ann2", "ann", "EU", None); // a second tab: same user
    for i in 0..3 {
        assert_eq!(said(&mut s, &ann, &format!("m{i}"), "hi")["type"], "ack");
    }
    let refused = said(&mut s, &ann2, "m9", "hi");
    assert_eq!(refused["code"], "slow_down");
    assert_eq!(refused["message"], "too many messages: wait 10 s");
    let bob = s.connect_as("sess-bob1", "bob", "EU", None);
    assert_eq!(said(&mut s, &bob, "b1", "hi")["type"], "ack", "another user is not affected");
    s.advance(10_000);
    assert_eq!(said(&mut s, &ann2, "m9", "hi")["type"], "ack", "a new window");
}

#[test]
fn a_newcomer_gets_the_last_fifty_messages_even_after_an_eviction() {
    let mut s = room(1000);
    let ann = s.connect_as("sess-ann1", "ann", "EU", None);
    for i in 0..60 {
        s.advance(100); // within the room's own rate limits (20/s per connection)
        assert_eq!(said(&mut s, &ann, &format!("m{i}"), &format!("line {i}"))["type"], "ack");
    }
    let history = |s: &mut Sim, conn: &str| -> Vec<Value> {
        let frames = s.take(conn);
        let h = frames.iter().find(|f| f["type"] == "signal" && f["topic"] == "history").unwrap();
        assert_eq!(h["session"], "$rules");
        h["data"].as_array().unwrap().clone()
    };
    let bob = s.connect_as("sess-bob1", "bob", "EU", None);
    let lines = history(&mut s, &bob);
    assert_eq!(lines.len(), 50);
    assert_eq!(
        (lines[0]["text"].as_str(), lines[49]["text"].as_str()),
        (Some("line 10"), Some("line 59"))
    );
    assert_eq!(lines[49]["user"], "ann");
    // Evicted: the rules are made anew and rebuild the history from the log.
    s.evict();
    let cy = s.connect_as("sess-cy01", "cy", "EU", None);
    let lines = history(&mut s, &cy);
    assert_eq!(lines.len(), 50);
    assert_eq!(lines[49]["text"], "line 59");
}

#[test]
fn a_user_asks_how_many_messages_they_may_still_send() {
    use homeroom::room::rules::Request;
    let mut s = room(3);
    let ann = s.connect_as("sess-ann1", "ann", "EU", None);
    let quota = |s: &mut Sim, user: Option<&str>| -> (u16, Value) {
        let req = Request {
            method: "GET".into(),
            path: "quota".into(),
            query: String::new(),
            body: String::new(),
            admin: false,
            user: user.map(str::to_owned),
            info: None,
            region: String::new(),
        };
        let r = s.room.request(s.now, &req).expect("the chat rules answer it");
        (r.status, serde_json::from_str(&r.body).unwrap())
    };
    assert_eq!(quota(&mut s, Some("ann")).1["left"], 3);
    said(&mut s, &ann, "m1", "hi");
    s.advance(4_000);
    let (status, q) = quota(&mut s, Some("ann"));
    assert_eq!(
        (status, &q["user"], &q["left"], &q["resets_in_ms"]),
        (200, &"ann".into(), &2.into(), &6_000.into())
    );
    assert_eq!(quota(&mut s, Some("bob")).1["left"], 3, "each user has their own");
    // Without a token the room names nobody: there is nobody to answer for.
    let (status, q) = quota(&mut s, None);
    assert_eq!((status, &q["error"]), (401, &"token_required".into()));
    s.advance(6_000);
    assert_eq!(quota(&mut s, Some("ann")).1["left"], 3, "a new window");
}

/// What is stored is what the rule checked: a message with a name of
/// someone else's and 60 kB of padding beside its text is stored, and
/// relayed, as its text alone, under the writer's own user.
#[test]
fn a_message_is_stored_as_exactly_its_checked_text() {
    let mut s = room(20);
    let mallory = s.connect_as("sess-mal1", "mallory", "EU", None);
    let victim = s.connect_as("sess-vic1", "vic", "EU", None);
    let data = serde_json::json!({"text": " hi ", "name": "Victor", "pad": "p".repeat(60_000)});
    let frame = serde_json::json!({"type": "publish", "id": "m1", "topic": "chat", "data": data});
    s.send(&mallory, &frame.to_string());
    s.take(&mallory);
    let stored = &s.disk.log[&1];
    assert_eq!(stored.data.get(), r#"{"text":"hi"}"#);
    assert_eq!(stored.user, "mallory");
    let got = s.take(&victim);
    let message = got.iter().find(|f| f["type"] == "message").expect("relayed");
    assert_eq!(message["data"], serde_json::json!({"text": "hi"}));
    assert!(message.to_string().len() < 300, "no padding relayed");
}
