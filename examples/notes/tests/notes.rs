//! The notes rules in a document room driven directly (no runtime): what a member may change,
//! and what the backend's routes do. The same rules run in the Worker at `/notes`
//! (tests/e2e/docs.rs plays stock editors against them).

use homeroom::doc::rules::Request;
use homeroom::doc::yrs::{Doc, GetString, Map, ReadTxn, Text, Transact, WriteTxn};
use homeroom::doc::{wire, DocConfig, DocError, DocRoom, Effect, Member};
use homeroom_notes::Notes;

fn room() -> DocRoom {
    DocRoom::new(DocConfig::default(), 1).with_rules(Box::new(Notes::with_title_max(10)))
}

fn member(user: &str) -> Member {
    Member {
        user: user.into(),
        read_only: false,
        extensions: false,
        expires: None,
        anonymous: false,
    }
}

/// An editor's change, as the update it sends.
fn change(doc: &Doc, edit: impl FnOnce(&mut homeroom::doc::yrs::TransactionMut<'_>)) -> Vec<u8> {
    let mut txn = doc.transact_mut();
    edit(&mut txn);
    wire::update(&txn.encode_update_v1())
}

/// What the room did with a frame: whether it stored something, and what it refused.
fn send(room: &mut DocRoom, conn: u64, frame: &[u8]) -> (bool, Vec<String>) {
    room.message(0, conn, frame);
    let effects = room.take_effects();
    let stored = effects.iter().any(|e| matches!(e, Effect::Store(_)));
    let refused = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Refused(_, why) => Some(why.code().to_owned()),
            _ => None,
        })
        .collect();
    (stored, refused)
}

fn admin(method: &str, path: &str, body: &str) -> Request {
    Request {
        method: method.into(),
        path: path.into(),
        query: String::new(),
        body: body.into(),
        admin: true,
        user: None,
        info: None,
        region: String::new(),
    }
}

fn text(room: &DocRoom, name: &str) -> String {
    let txn = room.doc().transact();
    txn.get_text(name).map(|t| t.get_string(&txn)).unwrap_or_default()
}

#[test]
fn a_title_past_its_bound_and_a_members_write_to_meta_are_refused() {
    let mut room = room();
    room.open(0, 1, member("ann"));
    room.take_effects();
    let ann = Doc::with_client_id(11);
    let title = ann.get_or_insert_text("title");
    let ok = change(&ann, |txn| title.insert(txn, 0, "Minutes"));
    assert_eq!(send(&mut room, 1, &ok), (true, vec![]));
    // A fresh client each time, so no update depends on one refused before.
    let long = Doc::with_client_id(12);
    let frame = change(&long, |txn| txn.get_or_insert_text("title").insert(txn, 0, "!!!!"));
    assert_eq!(send(&mut room, 1, &frame), (false, vec!["title_too_long".to_owned()]));
    let meddler = Doc::with_client_id(13);
    let frame = change(&meddler, |txn| {
        txn.get_or_insert_map("meta").insert(txn, "locked", false);
    });
    assert_eq!(send(&mut room, 1, &frame), (false, vec!["meta_is_the_rooms".to_owned()]));
    assert_eq!(text(&room, "title"), "Minutes");
}

#[test]
fn a_locked_note_refuses_every_member_and_opens_read_only() {
    let mut room = room();
    room.open(0, 1, member("ann"));
    room.take_effects();
    let answer = room.request(0, &admin("POST", "lock", "")).expect("answered");
    assert_eq!(answer.status, 200);
    let effects = room.take_effects();
    assert!(matches!(effects[..2], [Effect::Store(_), Effect::Broadcast { except: None, .. }]));
    let ann = Doc::with_client_id(21);
    let frame = change(&ann, |txn| txn.get_or_insert_text("body").insert(txn, 0, "late"));
    assert_eq!(send(&mut room, 1, &frame), (false, vec!["locked".to_owned()]));
    room.open(0, 2, member("bob"));
    assert!(room.record(2).expect("bob is in").member.read_only, "bob opens read-only");
    let frame = change(&Doc::with_client_id(22), |txn| {
        txn.get_or_insert_text("body").insert(txn, 0, "bob");
    });
    room.take_effects();
    assert_eq!(send(&mut room, 2, &frame), (false, vec![DocError::ReadOnly.code().to_owned()]));
    room.request(0, &admin("POST", "unlock", ""));
    room.take_effects();
    let frame = change(&Doc::with_client_id(23), |txn| {
        txn.get_or_insert_text("body").insert(txn, 0, "again");
    });
    assert_eq!(send(&mut room, 1, &frame), (true, vec![]), "ann writes again");
}

#[test]
fn the_backend_appends_as_the_room_and_members_read_the_outline() {
    let mut room = room();
    let answer = room.request(0, &admin("POST", "append", "Written by the room.")).unwrap();
    assert_eq!((answer.status, answer.body.as_str()), (200, r#"{"appended":20}"#));
    assert_eq!(text(&room, "body"), "Written by the room.");
    let stranger =
        Request { admin: false, user: Some("eve".into()), ..admin("POST", "append", "x") };
    assert_eq!(room.request(0, &stranger).unwrap().status, 403, "members may not append");
    let reader = Request { admin: false, user: Some("ann".into()), ..admin("GET", "outline", "") };
    let outline: serde_json::Value =
        serde_json::from_str(&room.request(0, &reader).unwrap().body).unwrap();
    assert_eq!(outline, serde_json::json!({"title": "", "body_chars": 20, "locked": false}));
    let nobody = Request { admin: false, user: None, ..admin("GET", "outline", "") };
    assert!(room.request(0, &nobody).is_none(), "404 to a caller without a token");
}
