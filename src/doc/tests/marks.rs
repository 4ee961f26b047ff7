//! The marks ([`crate::doc::flow`]): readers answer every one whatever the document holds, and
//! a socket that answers without reading (Mallory's, who reads the document on another socket
//! of hers and knows all of it) is closed within its window.

use proptest::prelude::*;
use yrs::{Array, ClientID, GetString, Map, Transact, WriteTxn, XmlFragment, XmlTextPrelim};

use super::chains::chain;
use super::*;
use crate::doc::flow::WINDOW;

/// An edit of any of the kinds a document holds, large enough that marks come often.
#[derive(Debug, Clone)]
enum Edit {
    /// Text with characters outside the basic plane (two UTF-16 units each).
    Type(usize, String),
    /// A map entry holding a string of this many bytes.
    Set(usize, u8, usize),
    /// A picture (binary) of this many bytes pushed to an array.
    Picture(usize, usize),
    /// An XML paragraph with text.
    Paragraph(usize, String),
    /// The first `n` characters of the text deleted.
    Delete(usize, u32),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (0..3usize, "[a-z😀é ]{1,60}", 1..1200usize)
            .prop_map(|(i, s, n)| Edit::Type(i, s.repeat(n))),
        2 => (0..3usize, 0..8u8, 1..6000usize).prop_map(|(i, k, n)| Edit::Set(i, k, n)),
        1 => (0..3usize, 1..9000usize).prop_map(|(i, n)| Edit::Picture(i, n)),
        1 => (0..3usize, "[a-z😀 ]{1,30}").prop_map(|(i, s)| Edit::Paragraph(i, s)),
        2 => (0..3usize, 1..5000u32).prop_map(|(i, n)| Edit::Delete(i, n)),
    ]
}

/// Editor `i` makes the edit; returns the update to send.
fn make(editor: &super::Editor, edit: &Edit) -> Vec<u8> {
    let doc = &editor.doc;
    let mut txn = doc.transact_mut();
    match edit {
        Edit::Type(_, s) => {
            let text = txn.get_or_insert_text("text");
            let len = text.len(&txn);
            text.insert(&mut txn, len, s);
        }
        Edit::Set(_, key, n) => {
            let map = txn.get_or_insert_map("map");
            map.insert(&mut txn, key.to_string(), "m".repeat(*n));
        }
        Edit::Picture(_, n) => {
            let array = txn.get_or_insert_array("pictures");
            array.push_back(&mut txn, vec![7u8; *n]);
        }
        Edit::Paragraph(_, s) => {
            let xml = txn.get_or_insert_xml_fragment("xml");
            let len = xml.len(&txn);
            xml.insert(&mut txn, len, XmlTextPrelim::new(s.as_str()));
        }
        Edit::Delete(_, n) => {
            // The editor's offsets are UTF-8 bytes: cut on a character's boundary.
            let text = txn.get_or_insert_text("text");
            let s = text.get_string(&txn);
            let n = s.char_indices().nth(*n as usize).map_or(s.len(), |(at, _)| at);
            text.remove_range(&mut txn, 0, n as u32);
        }
    }
    txn.encode_update_v1()
}

fn who(edit: &Edit) -> usize {
    match edit {
        Edit::Type(i, _)
        | Edit::Set(i, ..)
        | Edit::Picture(i, _)
        | Edit::Paragraph(i, _)
        | Edit::Delete(i, _) => *i,
    }
}

/// The marks in `trace` that asked for a run of one client: a state vector naming every
/// client at the highest clock but one.
fn runs_asked(trace: &[Effect]) -> usize {
    trace
        .iter()
        .filter_map(|e| match e {
            Effect::Send(_, frame) => match wire::decode(frame) {
                Ok(Message::SyncStep1(sv)) => Some(sv),
                _ => None,
            },
            _ => None,
        })
        .filter(|sv| {
            let short = sv.iter().filter(|(_, &clock)| clock < u32::MAX).count();
            short == 1 && sv.len() > 1
        })
        .count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    #[test]
    fn readers_answer_every_mark_whatever_the_document_holds(
        seed in any::<u64>(),
        edits in proptest::collection::vec(edit(), 120..200),
    ) {
        // Room for everything they write (a refused update would close its editor later, for
        // the edits on top of it: not what this is about).
        let config = DocConfig {
            frames_per_sec: 10_000,
            frame_burst: 10_000,
            max_doc_bytes: 48 * 1024 * 1024,
            ..DocConfig::default()
        };
        let mut sim = Sim::new(config, 3);
        sim.room = DocRoom::new(config, ROOM_CLIENT).with_seed(seed);
        for i in 0..3 {
            sim.connect(i);
        }
        for edit in &edits {
            let i = who(edit);
            if sim.editors[i].conn.is_none() {
                break; // closed: the check below says why
            }
            let update = make(&sim.editors[i], edit);
            sim.send(i, &wire::update(&update));
            sim.now += 10;
        }
        let closes: Vec<_> = sim.editors.iter().filter_map(|e| e.closed.clone()).collect();
        prop_assert!(closes.is_empty(), "readers closed: {closes:?}");
        prop_assert_eq!(refusals(&sim), vec![]);
        let asked = runs_asked(&sim.trace);
        let bytes: usize = sim.trace.iter().map(|e| match e {
            Effect::Broadcast { frame, .. } => frame.len(),
            _ => 0,
        }).sum();
        // Each socket is handed a mark every 256 KiB: most of them ask for a run.
        prop_assert!(
            asked as u64 >= bytes as u64 / crate::doc::flow::MARK_EVERY,
            "{asked} runs asked, {bytes} bytes broadcast"
        );
        let text = sim.editors[0].text();
        prop_assert!(sim.editors.iter().all(|e| e.text() == text));
    }
}

/// What Mallory's socket that reads nothing sends, after every edit, as its answer.
#[derive(Debug, Clone, Copy)]
enum Blind {
    /// An empty sync step 2.
    Nothing,
    /// The whole document, as her reading socket has it.
    Whole,
    /// Her best guess: the last writer's last unit.
    Guess,
}

/// Mallory's answer: what her reading editor (2) has.
fn blind_answer(sim: &Sim, blind: Blind, writer: u64) -> Vec<u8> {
    let txn = sim.editors[2].doc.transact();
    match blind {
        Blind::Nothing => yrs::Update::new().encode_v1(),
        Blind::Whole => txn.encode_state_as_update_v1(&StateVector::default()),
        Blind::Guess => {
            let sv = txn.state_vector();
            let short = |client: &ClientID| {
                let clock = sv.get(client);
                if client.get() == writer {
                    clock - 1
                } else {
                    clock
                }
            };
            let guess: StateVector = sv.iter().map(|(c, _)| (*c, short(c))).collect();
            txn.encode_diff_v1(&guess)
        }
    }
}

/// Mallory's socket that reads nothing (her reading editor is 2).
const BLIND: u64 = 999;

/// A room drawing its marks from `seed`, with two editors, Mallory's reading editor and her
/// socket that reads nothing ([`BLIND`]).
fn with_mallory(seed: u64) -> Sim {
    let config = DocConfig { frames_per_sec: 1_000, frame_burst: 1_000, ..DocConfig::default() };
    let mut sim = Sim::new(config, 3);
    sim.room = DocRoom::new(config, ROOM_CLIENT).with_seed(seed);
    sim.connect(0);
    sim.connect(1);
    sim.connect_as(2, member("mallory"));
    sim.room.open(sim.now, BLIND, member("mallory"));
    sim
}

#[test]
fn a_socket_that_answers_marks_without_reading_them_is_closed_4013_at_its_window() {
    // Mallory reads the document on one socket and knows all of it; her second socket reads
    // nothing but answers after every edit, as the marks cannot tell when it is asked. Before
    // marks asked for what only a reader has, any sync step 2 confirmed one, and she made the
    // runtime buffer without end.
    for blind in [Blind::Nothing, Blind::Whole, Blind::Guess] {
        for seed in 0..6 {
            let mut sim = with_mallory(seed);
            let (mut handed, mut closed) = (0usize, None);
            for i in 0..150 {
                let before = sim.trace.len();
                sim.edit(i % 2, &"w".repeat(50_000));
                let gone = sim.editors[i % 2].delete_front(50_000);
                sim.send(i % 2, &wire::update(&gone));
                let answer = blind_answer(&sim, blind, 100 + (i % 2) as u64);
                sim.room.message(sim.now, BLIND, &wire::sync_step2(&answer));
                sim.apply();
                let (bytes, close) = handed_to(&sim.trace[before..], BLIND);
                handed += bytes;
                closed = close;
                if closed.is_some() {
                    break;
                }
                sim.now += 100;
            }
            let (code, reason) = closed.unwrap_or_else(|| panic!("{blind:?} {seed}: never closed"));
            assert_eq!(code, 4013, "{blind:?} {seed}");
            assert!(
                reason == "mark_unread" || reason == "slow_reader",
                "{blind:?} {seed}: {reason}"
            );
            assert!(handed as u64 <= WINDOW + 64 * 1024, "{blind:?} {seed}: {handed} bytes handed");
            assert!(sim.editors.iter().all(|e| e.closed.is_none()), "the readers stay");
            assert_eq!(sim.stored_text(), sim.editors[2].text(), "Mallory's reader has it all");
        }
    }
}

/// An update that repeats the last unit of each client `sv` names, as a picture of 5 KB: the
/// room has those clocks, so it changes nothing.
fn repeats_as_pictures(sv: &StateVector) -> Vec<u8> {
    use yrs::encoding::write::Write;
    let mut u = Vec::new();
    u.write_var(sv.len());
    for (client, &clock) in sv.iter() {
        u.write_var(1u32); // one block
        u.write_var(client.get());
        u.write_var(clock - 1);
        u.write_u8(3); // binary content, no origins: its parent follows
        u.write_var(1u32); // a root type...
        u.write_string("text"); // ...named
        u.write_buf(vec![7u8; 5_000]);
    }
    u.write_var(0u32); // no deletions
    u
}

#[test]
fn repeated_blocks_cannot_make_the_marks_ask_for_nothing() {
    // Mallory re-sends each client's last unit, declared a 5 KB picture, after every edit: had
    // the room believed her, no client's tail would be cheap to send back, every mark would
    // ask for nothing, and her blind socket's empty answers would confirm them all.
    let mut sim = with_mallory(0);
    let mut closed = None;
    for i in 0..150 {
        sim.edit(i % 2, &"w".repeat(50_000));
        let gone = sim.editors[i % 2].delete_front(50_000);
        sim.send(i % 2, &wire::update(&gone));
        let sv = sim.editors[2].doc.transact().state_vector();
        sim.send(2, &wire::update(&repeats_as_pictures(&sv)));
        let before = sim.trace.len();
        sim.room.message(sim.now, BLIND, &wire::sync_step2(&yrs::Update::new().encode_v1()));
        sim.apply();
        closed = handed_to(&sim.trace[before..], BLIND).1.map(|(code, reason)| (code, reason, i));
        if closed.is_some() {
            break;
        }
        sim.now += 100;
    }
    let (code, reason, at) = closed.expect("the blind socket was never closed");
    assert_eq!((code, reason.as_str()), (4013, "mark_unread"), "after {at} edits");
    assert_eq!(refusals(&sim).iter().filter(|r| **r != DocError::MarkUnread).count(), 0);
    assert!(sim.editors.iter().all(|e| e.closed.is_none()), "the readers stay");
    assert_eq!(sim.stored_text(), sim.editors[0].text(), "her repeats changed nothing");
}

#[test]
fn where_nothing_can_be_asked_every_socket_is_held_to_its_window() {
    // A document of pictures only: every client's last block costs more than a mark may ask a
    // reader for, so a mark can ask for nothing and an answer proves nothing. Mallory's socket
    // that answers blind is closed at its window (before, her empty answers confirmed every
    // mark); so is a reader, which reconnects, and its resync brings it everything.
    let config = DocConfig {
        frames_per_sec: 1_000,
        frame_burst: 1_000,
        max_doc_bytes: 32 * 1024 * 1024,
        ..DocConfig::default()
    };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.connect(1);
    let hog = 999;
    sim.room.open(sim.now, hog, member("mallory"));
    let (mut handed, mut closed, mut reconnects) = (0usize, None, 0);
    for _ in 0..80 {
        let before = sim.trace.len();
        let picture = make(&sim.editors[0], &Edit::Picture(0, 100_000));
        sim.send(0, &wire::update(&picture));
        if closed.is_none() {
            sim.room.message(sim.now, hog, &wire::sync_step2(&yrs::Update::new().encode_v1()));
            sim.apply();
        }
        if closed.is_none() {
            let (bytes, close) = handed_to(&sim.trace[before..], hog);
            handed += bytes;
            closed = close;
        }
        if sim.editors[1].conn.is_none() {
            assert_eq!(sim.editors[1].closed, Some((4013, "slow_reader".into())));
            reconnects += 1;
            sim.connect(1);
        }
        sim.now += 100;
    }
    let (code, reason) = closed.expect("the blind socket was never closed");
    assert_eq!((code, reason.as_str()), (4013, "slow_reader"));
    assert!(handed as u64 <= WINDOW + 128 * 1024, "{handed} bytes handed to her");
    assert!(reconnects >= 1, "the reader was held to its window too");
    let pictures = |e: &super::Editor| {
        e.doc.transact().get_array("pictures").map(|a| a.len(&e.doc.transact()))
    };
    assert_eq!(pictures(&sim.editors[1]), Some(80), "the reader has every picture");
    assert!(sim.editors[0].closed.is_none(), "the writer stays");
}

#[test]
fn a_document_of_many_clients_costs_a_reader_at_most_a_fifth_in_marks() {
    // A writer gives the document 20,000 clients (about 140 KiB of state vector, which every
    // mark names): marks every 256 KiB were a third of what a reader was handed.
    let config = DocConfig {
        frames_per_sec: 10_000,
        frame_burst: 10_000,
        max_doc_bytes: 48 * 1024 * 1024,
        ..DocConfig::default()
    };
    let mut sim = Sim::new(config, 2);
    sim.room = DocRoom::new(config, ROOM_CLIENT).with_seed(7);
    sim.connect(0);
    sim.connect(1);
    for k in 0..20 {
        let clients: Vec<u64> = (1 + k * 1_000..1 + (k + 1) * 1_000).collect();
        let update = chain(&clients, (k > 0).then_some(k * 1_000));
        sim.editors[0]
            .doc
            .transact_mut()
            .apply_update(yrs::Update::decode_v1(&update).unwrap())
            .unwrap();
        sim.send(0, &wire::update(&update));
        sim.now += 10;
    }
    assert_eq!(refusals(&sim), vec![]);
    let before = sim.trace.len();
    for _ in 0..60 {
        sim.edit(0, &"w".repeat(50_000));
        sim.now += 10;
    }
    let reader = sim.editors[1].conn.expect("the reader is connected");
    let (handed, closed) = handed_to(&sim.trace[before..], reader);
    assert_eq!(closed, None, "the reader answers every mark");
    let marks: Vec<usize> = sim.trace[before..]
        .iter()
        .filter_map(|e| match e {
            Effect::Send(c, frame) if *c == reader => match wire::decode(frame) {
                Ok(Message::SyncStep1(_)) => Some(frame.len()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let (count, bytes) = (marks.len(), marks.iter().sum::<usize>());
    assert!(marks.iter().all(|&m| m > 120_000), "every mark names the 20,000 clients: {marks:?}");
    assert!(count >= 2, "{count} marks for {handed} bytes");
    assert!(bytes * 5 <= handed + bytes / 4, "marks {bytes} of {handed} bytes handed ({count})");
    let text = sim.editors[1].text();
    assert_eq!(text.len(), 20_000 + 60 * 50_000, "the reader has every client's and the text");
    // Loaded from storage (the snapshot names every client in one update): the same.
    assert_eq!(sim.stored_text(), text);
}
