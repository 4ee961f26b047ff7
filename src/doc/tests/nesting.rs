//! Types nested in types: a member who chains thousands of maps, each in the one before, would
//! exhaust the stack the first time the room deletes, collects, renders or drops them. The
//! room refuses nesting past `MAX_NESTING` before `yrs` sees it, however the chain is spelled
//! (explicit parents or origins, in one update or many, its items in any order, across a
//! reload), and an update `yrs` stops halfway through leaves every editor where the room is.

use super::*;
use crate::doc::MAX_NESTING;
use yrs::{Map, Out};

/// Yjs updates written by hand (lib0 v1): shapes no editor makes, and chains too deep for a
/// test to hold as a document.
mod write {
    use yrs::encoding::write::Write;

    pub fn var(n: u64, out: &mut Vec<u8>) {
        out.write_var(n);
    }

    fn text(s: &str, out: &mut Vec<u8>) {
        var(s.len() as u64, out);
        out.extend(s.as_bytes());
    }

    /// Where a block hangs.
    pub enum At<'a> {
        /// Under key `key` of the named root map.
        Root(&'a str, &'a str),
        /// Under key `key` of the type item `id` holds.
        In((u64, u64), &'a str),
        /// Beside its left origin (in its parent, under its key).
        After((u64, u64)),
    }

    fn place(kind: u8, at: &At<'_>, out: &mut Vec<u8>) {
        match at {
            At::Root(name, key) => {
                out.push(kind | 0x20);
                var(1, out);
                text(name, out);
                text(key, out);
            }
            At::In((c, k), key) => {
                out.push(kind | 0x20);
                var(0, out);
                var(*c, out);
                var(*k, out);
                text(key, out);
            }
            At::After((c, k)) => {
                out.push(kind | 0x80);
                var(*c, out);
                var(*k, out);
            }
        }
    }

    /// A map (one clock).
    pub fn map(at: At<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        place(7, &at, &mut out);
        out.push(1); // type ref: map
        out
    }

    /// A string (one clock a UTF-16 unit).
    pub fn string(at: At<'_>, s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        place(4, &at, &mut out);
        text(s, &mut out);
        out
    }

    /// An update: each client's blocks from its first clock, then an empty delete set.
    pub fn update(clients: &[(u64, u64, Vec<Vec<u8>>)]) -> Vec<u8> {
        let mut out = Vec::new();
        var(clients.len() as u64, &mut out);
        for (client, clock, blocks) in clients {
            var(blocks.len() as u64, &mut out);
            var(*client, &mut out);
            var(*clock, &mut out);
            for b in blocks {
                out.extend(b);
            }
        }
        var(0, &mut out);
        out
    }
}

use write::At;

const ATTACKER: u64 = 5;

/// Maps `from..to` deep in a chain from client `client`, each under key "k" of the one before
/// (clock = depth - 1; depth 1 is in the root map "m").
fn chain(client: u64, from: u64, to: u64) -> Vec<u8> {
    let blocks = (from..=to)
        .map(|depth| {
            if depth == 1 {
                write::map(At::Root("m", "k"))
            } else {
                write::map(At::In((client, depth - 2), "k"))
            }
        })
        .collect();
    write::update(&[(client, from - 1, blocks)])
}

/// How deep the chain under the root map "m" goes, read through `yrs`'s own API one level at a
/// time (no recursion): the truth the room's index must never fall below.
fn depth_of(doc: &yrs::Doc) -> usize {
    let txn = doc.transact();
    let Some(mut map) = txn.get_map("m") else { return 0 };
    let mut depth = 0;
    loop {
        let next = ["k", "s"].iter().find_map(|key| match map.get(&txn, key) {
            Some(Out::YMap(inner)) => Some(inner),
            _ => None,
        });
        match next {
            Some(inner) => {
                depth += 1;
                map = inner;
            }
            None => return depth,
        }
    }
}

fn attacked() -> Sim {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect_as(1, member("mallory"));
    sim.edit(0, "victim's text");
    sim
}

/// The victim types on and is seen: the room is whole.
fn victim_types_on(sim: &mut Sim) {
    sim.edit(0, ", still typing");
    assert_eq!(sim.editors[0].text(), "victim's text, still typing");
    assert_eq!(sim.stored_text(), "victim's text, still typing");
    sim.assert_stored_before_seen();
}

#[test]
fn a_chain_of_five_thousand_maps_is_refused_before_yrs_sees_it() {
    let mut sim = attacked();
    let stored = sim.stored.bytes();
    let update = chain(ATTACKER, 1, 5_000);
    assert!(update.len() < 60_000, "a small update: {} bytes", update.len());
    sim.send(1, &wire::update(&update));
    assert_eq!(refusals(&sim), vec![DocError::TooDeep]);
    assert!(
        sim.editors[1].conn.is_some(),
        "kept open: a stock client would resend it on reconnect"
    );
    assert_eq!(depth_of(sim.room.doc()), 0, "nothing of it applied");
    assert_eq!(sim.stored.bytes(), stored, "nothing of it stored");
    victim_types_on(&mut sim);
}

#[test]
fn a_chain_spelled_with_origins_is_measured_the_same() {
    // Each level: a string under "s" of the map before (an explicit parent), then a map beside
    // that string (its origin), which hangs in the same map under the same key.
    let mut sim = attacked();
    let mut blocks = Vec::new();
    for depth in 1..=500u64 {
        let string_clock = 2 * (depth - 1);
        blocks.push(if depth == 1 {
            write::string(At::Root("m", "s"), "x")
        } else {
            write::string(At::In((ATTACKER, string_clock - 1), "s"), "x")
        });
        blocks.push(write::map(At::After((ATTACKER, string_clock))));
    }
    sim.send(1, &wire::update(&write::update(&[(ATTACKER, 0, blocks)])));
    assert_eq!(refusals(&sim), vec![DocError::TooDeep]);
    assert_eq!(depth_of(sim.room.doc()), 0);
    victim_types_on(&mut sim);
}

#[test]
fn nesting_to_the_bound_is_taken_in_pieces_and_one_level_more_is_refused_even_after_a_reload() {
    let mut sim = attacked();
    let max = u64::from(MAX_NESTING);
    sim.send(1, &wire::update(&chain(ATTACKER, 1, max / 2)));
    sim.send(1, &wire::update(&chain(ATTACKER, max / 2 + 1, max)));
    assert_eq!(refusals(&sim), vec![]);
    assert_eq!(depth_of(sim.room.doc()), max as usize);
    assert_eq!(depth_of(&sim.editors[0].doc), max as usize, "the victim holds it too");
    sim.send(1, &wire::update(&chain(ATTACKER, max + 1, max + 1)));
    assert_eq!(refusals(&sim), vec![DocError::TooDeep]);
    // A reload builds the room's index from the document: the bound still holds.
    sim.reset();
    sim.connect(0);
    sim.connect_as(1, member("mallory"));
    sim.send(1, &wire::update(&chain(ATTACKER, max + 1, max + 1)));
    assert_eq!(refusals(&sim), vec![DocError::TooDeep, DocError::TooDeep]);
    assert_eq!(depth_of(sim.room.doc()), max as usize);
    // A level beside the deepest, not under it, is taken.
    let beside =
        write::update(&[(ATTACKER, max, vec![write::map(At::In((ATTACKER, max - 2), "j"))])]);
    sim.send(1, &wire::update(&beside));
    assert_eq!(refusals(&sim).len(), 2);
    victim_types_on(&mut sim);
}

#[test]
fn a_chain_whose_children_come_before_their_parents_is_measured_the_same() {
    // Two clients take turns: each level names the level before, from the other client,
    // and the update lists the client holding the deeper halves first.
    let levels = |n: u64| {
        let (mut odd, mut even) = (Vec::new(), Vec::new());
        for depth in 1..=n {
            let theirs = if depth % 2 == 1 { 8 } else { 7 };
            let block = if depth == 1 {
                write::map(At::Root("m", "k"))
            } else {
                write::map(At::In((theirs, (depth - 2) / 2), "k"))
            };
            if depth % 2 == 1 {
                odd.push(block)
            } else {
                even.push(block)
            }
        }
        write::update(&[(8, 0, even), (7, 0, odd)])
    };
    let mut sim = attacked();
    sim.send(1, &wire::update(&levels(400)));
    assert_eq!(refusals(&sim), vec![DocError::TooDeep]);
    assert_eq!(depth_of(sim.room.doc()), 0);
    sim.send(1, &wire::update(&levels(100)));
    assert_eq!(refusals(&sim), vec![DocError::TooDeep], "100 levels are taken");
    assert_eq!(depth_of(sim.room.doc()), 100);
    assert_eq!(depth_of(&sim.editors[0].doc), 100);
    victim_types_on(&mut sim);
}

#[test]
fn items_that_hang_in_each_other_are_refused_as_malformed() {
    let mut sim = attacked();
    let stored = sim.stored.bytes();
    let update = write::update(&[
        (7, 0, vec![write::map(At::In((8, 0), "k"))]),
        (8, 0, vec![write::map(At::In((7, 0), "k"))]),
    ]);
    sim.send(1, &wire::update(&update));
    assert_eq!(refusals(&sim), vec![DocError::Malformed]);
    assert_eq!(sim.editors[1].closed, Some((4400, "malformed".into())));
    assert_eq!(sim.stored.bytes(), stored);
    victim_types_on(&mut sim);
}

#[test]
fn an_update_yrs_stops_halfway_through_reaches_every_editor_as_far_as_the_room_took_it() {
    // A string in the root text `yrs` takes, then an item naming that string as its parent,
    // which it refuses after integrating the first: the room holds the first, so storage and
    // every editor must hold it too.
    let mut sim = attacked();
    // The plain insert, as an editor writes it (beside the victim's last character), then the
    // item under it.
    let last = {
        let txn = sim.editors[0].doc.transact();
        let sv = txn.state_vector();
        (100u64, u64::from(sv.get(&yrs::ClientID::new(100))) - 1)
    };
    let update = write::update(&[(
        ATTACKER,
        0,
        vec![write::string(At::After(last), "!"), write::string(At::In((ATTACKER, 0), "k"), "x")],
    )]);
    sim.send(1, &wire::update(&update));
    assert_eq!(refusals(&sim), vec![DocError::BadUpdate]);
    let room = sim.room.doc().get_or_insert_text("text").get_string(&sim.room.doc().transact());
    assert_eq!(room, "victim's text!", "yrs took the first block");
    assert_eq!(sim.editors[0].text(), room, "the victim holds what the room holds");
    assert_eq!(sim.stored_text(), room, "storage holds what the room holds");
    sim.assert_stored_before_seen();
    sim.edit(0, ", on");
    assert_eq!(sim.editors[0].text(), "victim's text!, on");
    assert_eq!(sim.stored_text(), "victim's text!, on");
}

/// The deepest map a document holds, through `yrs`'s own API (an explicit stack, no
/// recursion).
fn deepest_map(doc: &yrs::Doc) -> usize {
    let txn = doc.transact();
    let Some(root) = txn.get_map("m") else { return 0 };
    let mut deepest = 0;
    let mut stack = vec![(root, 0usize)];
    while let Some((map, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        for (_, value) in map.iter(&txn) {
            if let Out::YMap(inner) = value {
                stack.push((inner, depth + 1));
            }
        }
    }
    deepest
}

mod property {
    use proptest::prelude::*;
    use yrs::{Map, MapPrelim, MapRef, Transact, WriteTxn};

    use super::*;

    #[derive(Debug, Clone)]
    enum Step {
        /// Editor `i` adds up to `n` levels under the end of its chain (key "k" from "m").
        Nest(usize, u16),
        /// Editor `i` deletes what hangs under "k" of the map `at` levels down its chain.
        Cut(usize, u16),
        Type(usize),
        Connect(usize),
        Disconnect(usize),
        Reset,
        Compact,
    }

    /// The map `at` levels down editor `doc`'s chain (or its end), and its depth.
    fn down(txn: &mut yrs::TransactionMut<'_>, at: u16) -> (MapRef, u16) {
        let mut map = txn.get_or_insert_map("m");
        let mut depth = 0;
        while depth < at {
            match map.get(txn, "k") {
                Some(Out::YMap(inner)) => {
                    map = inner;
                    depth += 1;
                }
                _ => break,
            }
        }
        (map, depth)
    }

    fn play(sim: &mut Sim, step: Step, room_may_refuse: bool) {
        let send = |sim: &mut Sim, i: usize, update: Vec<u8>| {
            if sim.editors[i].conn.is_some() {
                sim.send(i, &wire::update(&update));
            }
        };
        match step {
            Step::Nest(i, n) => {
                let doc = sim.editors[i].doc.clone();
                let update = {
                    let mut txn = doc.transact_mut();
                    let (mut map, depth) = down(&mut txn, u16::MAX);
                    // An honest editor stops at the bound; the other kind goes past it.
                    let levels = if room_may_refuse { n } else { n.min(MAX_NESTING - depth) };
                    for _ in 0..levels {
                        map = map.insert(&mut txn, "k", MapPrelim::default());
                    }
                    txn.encode_update_v1()
                };
                send(sim, i, update);
            }
            Step::Cut(i, at) => {
                let doc = sim.editors[i].doc.clone();
                let update = {
                    let mut txn = doc.transact_mut();
                    let (map, _) = down(&mut txn, at);
                    map.remove(&mut txn, "k");
                    txn.encode_update_v1()
                };
                send(sim, i, update);
            }
            Step::Type(i) => sim.edit(i, "t"),
            Step::Connect(i) if sim.editors[i].conn.is_none() => sim.connect(i),
            Step::Connect(_) => {}
            Step::Disconnect(i) => sim.disconnect(i),
            Step::Reset => sim.reset(),
            Step::Compact => {
                sim.room.compact();
                sim.apply();
            }
        }
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0..3usize, 1..60u16).prop_map(|(i, n)| Step::Nest(i, n)),
            2 => (0..3usize, 0..140u16).prop_map(|(i, at)| Step::Cut(i, at)),
            1 => (0..3usize).prop_map(Step::Type),
            2 => (0..3usize).prop_map(Step::Connect),
            1 => (0..3usize).prop_map(Step::Disconnect),
            1 => Just(Step::Reset),
            1 => Just(Step::Compact),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]
        /// Editors who stay within the bound (concurrently, offline, cutting each other's
        /// chains, across reloads and compactions) are never refused, and converge.
        #[test]
        fn honest_editors_at_the_bound_are_never_refused(steps in proptest::collection::vec(step(), 1..50)) {
            let mut sim = Sim::new(DocConfig::default(), 3);
            for step in steps {
                play(&mut sim, step, false);
                prop_assert_eq!(refusals(&sim), vec![]);
                prop_assert!(deepest_map(sim.room.doc()) <= usize::from(MAX_NESTING));
                sim.now += 10;
            }
            sim.reset();
            for i in 0..3 {
                sim.connect(i);
            }
            prop_assert_eq!(refusals(&sim), vec![]);
            let room = deepest_map(sim.room.doc());
            for e in &sim.editors {
                prop_assert_eq!(deepest_map(&e.doc), room);
                prop_assert_eq!(e.text(), sim.stored_text());
            }
            sim.assert_stored_before_seen();
        }

        /// Editors who go past it are refused `too_deep`, and the room never holds more.
        #[test]
        fn past_the_bound_the_room_never_holds_more(steps in proptest::collection::vec(step(), 1..50)) {
            let mut sim = Sim::new(DocConfig::default(), 3);
            for step in steps {
                play(&mut sim, step, true);
                prop_assert!(deepest_map(sim.room.doc()) <= usize::from(MAX_NESTING));
                for r in refusals(&sim) {
                    prop_assert!(matches!(r, DocError::TooDeep | DocError::MissingDependencies), "{:?}", r);
                }
                sim.now += 10;
            }
            sim.reset();
            prop_assert!(deepest_map(sim.room.doc()) <= usize::from(MAX_NESTING));
            sim.assert_stored_before_seen();
        }
    }
}

#[test]
fn the_index_is_rebuilt_from_the_document_when_it_grows_and_the_bound_still_holds() {
    use crate::doc::nesting::REBUILD_SLACK;
    use yrs::{Text, TextPrelim, TextRef, WriteTxn};
    let config =
        DocConfig { frames_per_sec: 1_000_000, frame_burst: 1_000_000, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.connect(1);
    let max = u64::from(MAX_NESTING);
    // Editor 1 changes its document and sends what changed.
    fn change<R>(sim: &mut Sim, f: impl FnOnce(&mut yrs::TransactionMut<'_>) -> R) -> R {
        let doc = sim.editors[1].doc.clone();
        let (r, update) = {
            let mut txn = doc.transact_mut();
            let r = f(&mut txn);
            (r, txn.encode_update_v1())
        };
        sim.send(1, &wire::update(&update));
        r
    }
    // A chain 127 maps deep under `key` of the root map, with a text in the deepest (level
    // 128); then typing there and in the root text by turns, so that every nested character
    // is a run of its own in the index.
    let grow = |sim: &mut Sim, key: &str, chars: usize| -> yrs::MapRef {
        let (deepest, text): (yrs::MapRef, TextRef) = change(sim, |txn| {
            let mut map = txn.get_or_insert_map("m").insert(txn, key, yrs::MapPrelim::default());
            for _ in 2..max {
                map = map.insert(txn, "k", yrs::MapPrelim::default());
            }
            let text = map.insert(txn, "t", TextPrelim::new(""));
            (map, text)
        });
        for i in 0..2 * chars {
            change(sim, |txn| {
                if i % 2 == 0 {
                    text.insert(txn, 0, "x");
                } else {
                    txn.get_or_insert_text("text").insert(txn, 0, "y");
                }
            });
        }
        deepest
    };
    let chars = REBUILD_SLACK / 2;
    grow(&mut sim, "a", chars);
    let before = sim.room.nesting_entries().expect("built");
    assert!(before > chars, "{before} entries");
    // The first chain goes (its items are collected), a second grows: past the slack the
    // index is rebuilt from the document, which no longer holds the first.
    change(&mut sim, |txn| txn.get_or_insert_map("m").remove(txn, "a"));
    let deepest = grow(&mut sim, "b", chars);
    let after = sim.room.nesting_entries().expect("built");
    assert!(before + chars > REBUILD_SLACK, "enough was added to pass the slack");
    assert!(after < before + chars / 2, "rebuilt without the first chain: {after} entries");
    assert_eq!(refusals(&sim), vec![]);
    // A map in the deepest map (level 128) is taken; one in that (129) is not.
    let at_bound = change(&mut sim, |txn| deepest.insert(txn, "j", yrs::MapPrelim::default()));
    assert_eq!(refusals(&sim), vec![]);
    change(&mut sim, |txn| at_bound.insert(txn, "j", yrs::MapPrelim::default()));
    assert_eq!(refusals(&sim), vec![DocError::TooDeep]);
    assert_eq!(deepest_map(sim.room.doc()), max as usize);
}
