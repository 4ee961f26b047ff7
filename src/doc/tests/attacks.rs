//! A member with a valid token who wants to hurt the others: what the room refuses, and
//! what the others see (nothing).

use super::*;

#[test]
fn a_read_only_members_update_is_refused_and_changes_nothing() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect_as(1, Member { read_only: true, ..member("reader") });
    sim.edit(0, "kept");
    let stored = sim.stored.bytes();
    sim.edit(1, "vandal");
    assert_eq!(sim.editors[0].text(), "kept");
    assert_eq!(sim.stored_text(), "kept");
    assert_eq!(sim.stored.bytes(), stored);
    assert_eq!(refusals(&sim), vec![DocError::ReadOnly]);
    assert!(sim.editors[1].conn.is_some(), "kept open: closing would loop a stock client");
}

#[test]
fn an_update_past_the_document_bound_is_refused_whole() {
    let config = DocConfig { max_doc_bytes: 64 * 1024, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, &"a".repeat(40_000));
    let text = sim.editors[1].text();
    sim.edit(0, &"b".repeat(40_000));
    assert_eq!(refusals(&sim), vec![DocError::TooLarge]);
    assert_eq!(sim.editors[1].text(), text, "nothing of it reached the others");
    assert_eq!(sim.stored_text(), text, "nothing of it was stored");
    assert!(sim.stored.bytes() <= 64 * 1024);
}

#[test]
fn garbage_and_hostile_frames_are_refused_without_harm() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, "safe");
    // An update `yrs` refuses (a GC block of length 0): refused, the socket stays.
    sim.send(1, &wire::update(&[1, 1, 5, 0, 0, 0, 0]));
    assert!(sim.editors[1].conn.is_some());
    assert_eq!(refusals(&sim), vec![DocError::BadUpdate]);
    // Counts its bytes cannot hold: closed 4400 before `yrs` sees it.
    sim.send(1, &wire::update(&[1, 1, 200, 200, 200, 1, 0xff, 0xff, 0xff]));
    assert_eq!(sim.editors[1].closed, Some((4400, "malformed".into())));
    // Not a y-protocols message at all: closed 4400.
    sim.connect(1);
    sim.send(1, &[0, 7, 1, 2, 3]);
    assert_eq!(sim.editors[1].closed, Some((4400, "malformed".into())));
    assert_eq!(sim.editors[0].text(), "safe");
    assert_eq!(sim.stored_text(), "safe");
}

#[test]
fn a_flood_is_closed_4029_and_the_edits_it_carried_come_back_with_the_resync() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    for i in 0..600 {
        if sim.editors[1].conn.is_none() {
            break;
        }
        sim.edit(1, &format!("{i},"));
    }
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())));
    // The edits made after the close stayed with the editor; a reconnect's sync carries them.
    sim.edit(1, "after");
    sim.now += 10_000;
    sim.connect(1);
    assert_eq!(sim.editors[0].text(), sim.editors[1].text());
    assert!(sim.editors[0].text().ends_with("after"));
}

#[test]
fn repeated_whole_document_requests_are_paid_from_the_reply_budget() {
    let config = DocConfig { max_doc_bytes: 64 * 1024, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.edit(0, &"x".repeat(50_000));
    sim.connect(1);
    let ask = wire::sync_step1(&empty_sv());
    let mut sent = 0;
    for _ in 0..100 {
        if sim.editors[1].conn.is_none() {
            break;
        }
        sim.send(1, &ask);
        sent += 1;
    }
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())));
    // The burst is twice the largest frame: a few whole documents at once, then closed.
    let most = config.reply_burst() as usize / 50_000 + 1;
    assert!(sent <= most, "{sent} whole documents sent at once (at most {most})");
}

#[test]
fn a_socket_is_closed_when_its_token_expires_and_its_awareness_goes() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    let at = sim.now + 60_000;
    let expires = Some(at);
    sim.connect_as(1, Member { expires, ..member("leaver") });
    sim.send(
        1,
        &wire::awareness([crate::doc::Entry { client: 101, clock: 1, json: "{}".into() }].iter()),
    );
    assert_eq!(sim.room.tick(sim.now), Some(sim.now + 30_000), "the awareness timeout comes first");
    sim.now += 40_000; // renewed (no tick came between): now the token goes first
    sim.send(
        1,
        &wire::awareness([crate::doc::Entry { client: 101, clock: 2, json: "{}".into() }].iter()),
    );
    assert_eq!(sim.room.tick(sim.now), expires, "then the token's expiry");
    sim.now = at;
    sim.room.tick(sim.now);
    sim.apply();
    assert_eq!(sim.editors[1].closed, Some((4401, "token_expired".into())));
    let last = sim.editors[0].inbox.last().map(|f| wire::decode(f).ok());
    assert!(
        matches!(last, Some(Some(Message::Awareness(ref e))) if e[0].is_removal()),
        "the others see the leaver's awareness go"
    );
}

#[test]
fn an_editor_past_her_tokens_expiry_changes_nothing_before_the_alarm_runs() {
    // The room closed expired sockets only when its alarm ran (`tick`): every frame before it
    // was applied, stored and sent on. The rooms' engine closes at the frame (`admit`).
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    let at = sim.now + 60_000;
    sim.connect_as(1, Member { expires: Some(at), ..member("leaver") });
    sim.edit(1, "before ");
    sim.now = at; // no tick: the alarm has not run
    sim.edit(1, "after");
    sim.apply();
    assert_eq!(sim.editors[1].closed, Some((4401, "token_expired".into())));
    assert_eq!(sim.stored_text(), "before ");
    assert_eq!(sim.editors[0].text(), "before ", "the others never see it");
}

#[test]
fn a_member_closed_4029_who_reconnects_at_once_finds_the_budget_they_left() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    let mut sent = 0;
    while sim.editors[1].conn.is_some() {
        sim.edit(1, "x");
        sent += 1;
    }
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())));
    // Back at once (100 ms later): a fresh budget would take another burst of 400 frames.
    sim.now += 100;
    sim.connect(1);
    let mut again = 0;
    while sim.editors[1].conn.is_some() && again < 400 {
        sim.edit(1, "y");
        again += 1;
    }
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())));
    assert!(again < 40, "{again} frames after the reconnect (the first burst took {sent})");
    // Once the budget is full again it is forgotten and the member starts afresh.
    sim.now += 60_000;
    sim.connect(1);
    sim.edit(1, "z");
    assert!(sim.editors[1].conn.is_some());
    assert!(sim.editors[0].text().ends_with('z'));
}

/// The victim's text, typed in one insertion per editor (one block each).
fn long_insertions(sim: &mut Sim, chars: usize) {
    sim.edit(0, &"a".repeat(chars));
    sim.edit(0, &"b".repeat(chars));
}

#[test]
fn an_update_of_many_small_blocks_is_refused_before_yrs_decodes_it() {
    // 70,000 empty maps: a 420 KB update that `yrs` would hold in about 28 MB (natively).
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, "kept");
    let stored = sim.stored.bytes();
    let attacker = yrs::Doc::with_client_id(9);
    let update = {
        use yrs::{Array, WriteTxn};
        let mut txn = attacker.transact_mut();
        let array = txn.get_or_insert_array("a");
        for _ in 0..70_000 {
            array.insert(&mut txn, 0, yrs::MapPrelim::default());
        }
        txn.encode_update_v1()
    };
    sim.send(1, &wire::update(&update));
    assert_eq!(refusals(&sim), vec![DocError::TooLarge]);
    assert_eq!(sim.stored.bytes(), stored, "nothing stored");
    assert!(sim.room.doc().transact().get_array("a").is_none_or(|a| {
        use yrs::Array;
        a.len(&sim.room.doc().transact()) == 0
    }));
    sim.edit(0, ", typing on");
    assert_eq!(sim.stored_text(), "kept, typing on");
    assert!(sim.editors[1].conn.is_some(), "kept open, as for any document too large");
}

#[test]
fn deletions_that_cut_a_text_into_blocks_count_as_blocks() {
    // Deleting every other character of one long insertion cuts it into as many blocks, with
    // three bytes a range: counted, so the second such cut is refused.
    let config = DocConfig { frames_per_sec: 10_000, frame_burst: 10_000, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.connect(1);
    let chars = 120_000;
    long_insertions(&mut sim, chars);
    sim.apply();
    let cut = |from: u64| every_other(from, chars as u64);
    let first = cut(0);
    sim.send(1, &wire::update(&first));
    assert_eq!(refusals(&sim), vec![], "the first cut, 120,000 blocks, is taken");
    let text = sim.stored_text();
    assert_eq!(text.len(), chars / 2 + chars);
    assert_eq!(sim.editors[0].text(), text, "the victim holds what the room holds");
    let second = cut(chars as u64);
    sim.send(1, &wire::update(&second));
    assert_eq!(refusals(&sim), vec![DocError::TooLarge], "the second would pass the bound");
    assert_eq!(sim.stored_text(), text, "nothing of it applied");
    let blocks = sim.room.census_blocks().expect("counted");
    assert!(blocks <= crate::doc::MAX_BLOCKS, "{blocks} blocks");
}

/// Every other character of `n` of the victim's (editor 0's) run from `from`, as an update
/// of deletions only.
fn every_other(from: u64, n: u64) -> Vec<u8> {
    use yrs::encoding::write::Write;
    let mut u = Vec::new();
    u.write_var(0u32); // no blocks
    u.write_var(1u32); // deletions of one client: the victim's
    u.write_var(100u64);
    u.write_var(n / 2);
    for i in 0..n / 2 {
        u.write_var(from + 2 * i);
        u.write_var(1u32);
    }
    u
}

#[test]
fn an_editor_back_online_is_not_counted_for_the_deletions_its_sync_repeats() {
    // A document cut into 60,000 pieces, near its size bound. Its editor typed "!" offline and
    // reconnects: its sync step 2 repeats its whole delete set (60,000 ranges, 240 KB). Counted
    // as new, that was 120,000 blocks and 240 KB past the bound: refused
    // `document_too_large` at every reconnect, the "!" never taken.
    let config = DocConfig {
        frames_per_sec: 10_000,
        frame_burst: 10_000,
        max_doc_bytes: 1_200_000, // the document cut below is 1.1 MB
        ..DocConfig::default()
    };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.connect(1);
    let chars = 120_000;
    long_insertions(&mut sim, chars);
    sim.send(1, &wire::update(&every_other(0, chars as u64)));
    sim.room.compact();
    sim.apply();
    assert_eq!(refusals(&sim), vec![], "the cut is taken");
    let blocks = sim.room.census_blocks().expect("counted");
    assert!(blocks > crate::doc::MAX_BLOCKS / 2, "{blocks} blocks: the repeat would pass");
    let size = sim.room.stored_bytes();
    assert!(size + 240_000 > config.max_doc_bytes, "{size} bytes: the repeat would pass");
    sim.disconnect(0);
    sim.edit(0, "!");
    let deleted = sim.editors[0].delete_front(1); // and one deletion of its own, also offline
    assert!(!deleted.is_empty());
    sim.connect(0);
    assert_eq!(refusals(&sim), vec![], "the editor's sync is taken");
    let text = sim.stored_text();
    assert!(text.ends_with('!'), "the offline edit is stored");
    assert_eq!(text.len(), chars / 2 + chars, "and its deletion: one 'b' for the '!'");
    assert_eq!(sim.editors[1].text(), text, "and shown");
    // A deletion the document does not hold yet still counts: the second cut is refused.
    sim.now += 10_000; // (its sender paid for the measures at the bound in the first)
    sim.send(1, &wire::update(&every_other(chars as u64, chars as u64)));
    assert_eq!(refusals(&sim), vec![DocError::TooLarge]);
}

#[test]
fn a_member_who_makes_the_room_measure_at_the_bound_pays_for_it() {
    // At the size bound, an accepted update and one past the bound by turns made the room
    // fold (encode and store) the whole document for each pair. The member pays the
    // document's size for each fold: closed 4029 after a few, not never.
    let config = DocConfig { max_doc_bytes: 256 * 1024, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, &"v".repeat(250_000)); // 12 KB under the bound
    let mut folds = 0;
    for round in 0..200u64 {
        if sim.editors[1].conn.is_none() {
            break;
        }
        sim.edit(1, "y"); // taken: the log is not empty
        if sim.editors[1].conn.is_none() {
            break;
        }
        let before = sim.trace.len();
        // Past the bound (from a Yjs client of its own, so the next "y" does not need it):
        // the room folds the log to measure, then refuses.
        let big = Editor::new(10_000 + round).type_text(&"x".repeat(20_000));
        sim.send(1, &wire::update(&big));
        folds += sim.trace[before..].iter().filter(|e| matches!(e, Effect::Compact(_))).count();
        sim.now += 100; // what the member sends is refilled in the time: 25 KB a round
    }
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())));
    assert!(folds <= 40, "{folds} whole-document folds before the member was closed");
    sim.edit(0, "!");
    assert!(sim.stored_text().ends_with('!'), "the victim types on");
}

#[test]
fn a_member_holds_at_most_ten_sockets_and_connects_at_a_pace() {
    let mut sim = Sim::new(DocConfig::default(), 1);
    sim.connect(0);
    let opened = |sim: &mut Sim, conn: u64| -> Option<(u16, String)> {
        sim.room.open(sim.now, conn, member("mallory"));
        sim.room.take_effects().into_iter().find_map(|e| match e {
            Effect::Close(c, code, reason) if c == conn => Some((code, reason)),
            _ => None,
        })
    };
    for conn in 100..110 {
        assert_eq!(opened(&mut sim, conn), None, "socket {conn} of ten");
    }
    assert_eq!(opened(&mut sim, 110), Some((4429, "too_many_connections".into())));
    // One closes: one more may open.
    sim.room.close(sim.now, 100);
    sim.room.take_effects();
    assert_eq!(opened(&mut sim, 111), None);
    // Connecting in a loop spends the connect budget (refused connects too): 20 at once,
    // then one a second, closed 4029 so a stock client comes back after its backoff.
    let mut refused = 0;
    for conn in 112..140 {
        if opened(&mut sim, conn) == Some((4029, "connect_rate".into())) {
            refused += 1;
        }
    }
    assert_eq!(refused, 28 - (20 - 11 - 1), "past the burst of 20, every connect is paced");
    sim.now += 60_000;
    sim.room.close(sim.now, 101);
    sim.room.take_effects();
    assert_eq!(opened(&mut sim, 200), None, "a minute later, a free socket opens");
    // The victim never noticed.
    sim.edit(0, "fine");
    assert_eq!(sim.stored_text(), "fine");
    assert_eq!(sim.room.sockets(), 11);
}

#[test]
fn a_socket_that_never_reads_is_closed_4013_at_its_window_and_readers_are_not() {
    // Mallory opens a socket and never reads (never answers the room's sync steps 1), while
    // the victim and a writer exchange 6 MB (each 50 KB typed, then deleted: the document
    // stays small): the room would hand the runtime all of it to buffer for her. She is
    // closed 4013 at the window; the readers, who answer, never are.
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    let hog = 999;
    sim.room.open(sim.now, hog, member("mallory"));
    let (mut handed, mut closed) = (0usize, None);
    for i in 0..120 {
        let before = sim.trace.len();
        sim.edit(i % 2, &"w".repeat(50_000));
        let gone = sim.editors[i % 2].delete_front(50_000);
        sim.send(i % 2, &wire::update(&gone));
        if closed.is_none() {
            let (bytes, close) = handed_to(&sim.trace[before..], hog);
            handed += bytes;
            closed = close.map(|(code, reason)| (code, reason, i));
        }
        sim.now += 100;
    }
    let (code, reason, at) = closed.expect("the hog was closed");
    assert_eq!((code, reason.as_str()), (4013, "slow_reader"));
    assert!(at < 90, "closed after {at} of 120 edits");
    assert!(handed as u64 <= crate::doc::flow::WINDOW + 64 * 1024, "{handed} bytes handed to her");
    assert!(sim.editors.iter().all(|e| e.closed.is_none()), "the readers stay");
    assert_eq!(sim.editors[0].text(), sim.editors[1].text());
    assert_eq!(sim.stored_text(), sim.editors[0].text());
}

#[test]
fn resyncs_that_repeat_a_long_delete_set_do_not_count_as_blocks() {
    // A sync step 2 repeats the client's whole delete set: 10,000 ranges here. Counted each
    // time, thirty reconnects would have made an honest document "too large".
    let config = DocConfig { frames_per_sec: 10_000, frame_burst: 10_000, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, &"a".repeat(20_000));
    let cut = {
        use yrs::encoding::write::Write;
        let mut u = Vec::new();
        u.write_var(0u32);
        u.write_var(1u32);
        u.write_var(100u64);
        u.write_var(10_000u64);
        for i in 0..10_000u64 {
            u.write_var(2 * i);
            u.write_var(1u32);
        }
        u
    };
    sim.send(1, &wire::update(&cut));
    let counted = sim.room.census_blocks().expect("counted");
    for _ in 0..30 {
        sim.disconnect(1);
        sim.now += 2_000;
        sim.connect(1);
    }
    assert_eq!(refusals(&sim), vec![]);
    let after = sim.room.census_blocks().expect("counted");
    assert!(after <= counted + 100, "{counted} blocks, then {after} after thirty resyncs");
    sim.edit(1, "!");
    assert!(sim.stored_text().ends_with('!'));
}

/// An update (lib0 v1) with one string item `text` in the root `t` from `client` at `clock`,
/// for each `(client, clock, text)`, each under a header of its own, and no deletions.
fn headers(runs: &[(u8, u8, &str)]) -> Vec<u8> {
    let mut update = vec![runs.len() as u8];
    for &(client, clock, text) in runs {
        // One block, the client, its clock; a string item (info 4) in the named root `t`.
        update.extend([1, client, clock, 4, 1, 1, b't', text.len() as u8]);
        update.extend(text.bytes());
    }
    update.push(0); // the delete set: no client
    update
}

#[test]
fn an_update_that_names_one_client_in_two_headers_is_refused_before_yrs_sees_it() {
    // Either order: `yrs` 0.28 integrated the second run untrimmed and dropped a block the
    // document still linked (a freed item), or wrapped a clock past the first run's end;
    // stock Yjs keeps only the last header, so the editors would hold another text for ever.
    for runs in [[(7, 0, "abc"), (7, 0, "xyz")], [(7, 3, "abcde"), (7, 0, "xyz")]] {
        let mut sim = Sim::new(DocConfig::default(), 2);
        sim.connect(0);
        sim.connect(1);
        sim.edit(0, "safe");
        let stored = sim.stored.bytes();
        sim.send(1, &wire::update(&headers(&runs)));
        assert_eq!(sim.editors[1].closed, Some((4400, "malformed".into())), "{runs:?}");
        assert_eq!(sim.editors[0].text(), "safe");
        assert_eq!(sim.stored.bytes(), stored, "nothing of it stored");
        assert!(!sim.room.doc().transact().state_vector().contains_client(&yrs::ClientID::new(7)));
    }
    // The same bytes with one header each are an ordinary update, taken.
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.send(0, &wire::update(&headers(&[(7, 0, "abc"), (8, 0, "xyz")])));
    assert!(sim.editors[0].closed.is_none());
    assert!(refusals(&sim).is_empty());
    assert_eq!(sim.room.doc().transact().state_vector().get(&yrs::ClientID::new(8)), 3);
}

/// The update a forger makes by writing `text` at the front under Yjs client `client`, after
/// taking the whole of what the room holds.
fn forged(room: &DocRoom, client: u64, text: &str) -> Vec<u8> {
    let forger = yrs::Doc::with_client_id(client);
    let all = Update::decode_v1(&room.encoded()).expect("the room's document");
    forger.transact_mut().apply_update(all).expect("applies");
    let root = forger.get_or_insert_text("text");
    let mut txn = forger.transact_mut();
    root.insert(&mut txn, 0, text);
    txn.encode_update_v1()
}

#[test]
fn a_member_cannot_write_for_another_editors_yjs_client_even_after_a_reload() {
    // Without it, Mallory writing at the clocks Ann's offline tab uses next made Ann's own
    // edits arrive as already known: trimmed, never shown, and still answered saved.
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect(0); // Ann: Yjs client 100
    sim.connect(1);
    sim.connect(2); // Mallory
    sim.edit(0, "hello");
    sim.disconnect(0);
    for reload in [false, true] {
        if reload {
            sim.reset();
            sim.connect(1);
            sim.connect(2);
        }
        let stored = sim.stored.bytes();
        sim.send(2, &wire::update(&forged(&sim.room, 100, "EVIL")));
        assert_eq!(refusals(&sim).last(), Some(&DocError::NotYourClient), "reload {reload}");
        assert_eq!(sim.stored.bytes(), stored, "nothing of it stored");
        assert_eq!(sim.editors[1].text(), "hello");
        assert!(sim.editors[2].conn.is_some(), "refused, not closed: a stock client would loop");
    }
    // The room's own client is nobody's to write for either.
    let own = sim.room.doc().client_id().get();
    sim.send(2, &wire::update(&forged(&sim.room, own, "ROOM")));
    assert_eq!(refusals(&sim).last(), Some(&DocError::NotYourClient));
    // Ann typed on offline; she comes back and her words reach everyone.
    let _ = sim.editors[0].type_text(" world");
    sim.connect(0);
    assert_eq!(sim.editors[1].text(), "hello world");
    assert_eq!(sim.stored_text(), "hello world");
    // Her other tab (another Yjs client, the same user) writes too.
    sim.send(0, &wire::update(&forged(&sim.room, 900, "> ")));
    assert_eq!(sim.editors[1].text(), "> hello world");
    sim.assert_stored_before_seen();
}

/// Three editors; the first typed "hello"; Bob (the second, Yjs client 101) shows his cursor
/// and has not written; Mallory is the third.
fn bob_shows_his_cursor() -> Sim {
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect(0);
    sim.connect(1);
    sim.connect(2);
    sim.edit(0, "hello");
    let cursor = [wire::Entry { client: 101, clock: 1, json: r#"{"name":"bob"}"#.into() }];
    sim.send(1, &wire::awareness(cursor.iter()));
    sim
}

#[test]
fn an_editor_that_has_not_written_yet_keeps_its_client_from_the_moment_its_cursor_shows() {
    // Bob's awareness names his Yjs client before his first edit; Mallory, reading it, wrote one
    // block for it first, and every edit of Bob's was then another user's client's.
    let mut sim = bob_shows_his_cursor();
    sim.send(2, &wire::update(&forged(&sim.room, 101, "EVIL ")));
    assert_eq!(refusals(&sim), vec![DocError::NotYourClient]);
    sim.edit(1, "!");
    assert_eq!(sim.editors[0].text(), "hello!", "Bob's edit is his own");
}

#[test]
fn an_update_yrs_stops_in_binds_only_the_clients_it_took() {
    // Client 900's item is taken; client 800's names a string as its parent and stops `yrs`;
    // client 5 (lower, never reached) is not the sender's for it.
    let mut update = vec![3];
    update.extend([1, 0x84, 0x07, 0, 4, 1, 1, b't', 3, b'a', b'b', b'c']); // 900 = 0x84 0x07
    update.extend([1, 0xa0, 0x06, 0, 4, 0, 0x84, 0x07, 0, 1, b'x']); // 800 = 0xa0 0x06
    update.extend([1, 5, 0, 0, 1]); // client 5: a GC block of one
    update.push(0);
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect(0);
    sim.connect(1);
    sim.send(0, &wire::update(&update));
    let sv = sim.room.doc().transact().state_vector();
    assert_eq!(refusals(&sim), vec![DocError::BadUpdate]);
    assert_eq!(sv.get(&yrs::ClientID::new(900)), 3, "the first client was taken");
    assert_eq!(sv.get(&yrs::ClientID::new(5)), 0, "the last never reached");
    // Another user writes for client 5: it was never the first sender's.
    sim.send(1, &wire::update(&[1, 1, 5, 0, 4, 1, 1, b'u', 1, b'y', 0]));
    assert_eq!(refusals(&sim), vec![DocError::BadUpdate], "taken: {:?}", refusals(&sim));
    assert_eq!(sim.room.doc().transact().state_vector().get(&yrs::ClientID::new(5)), 1);
}

#[test]
fn a_client_shown_before_its_first_edit_stays_its_editors_after_a_reload() {
    // Bob's tab shows his cursor (Yjs client 101) and sleeps before his first edit. The room
    // reloads (an eviction, a reset): his cursor is gone. Mallory, who read the id from it,
    // writes for client 101 first; Bob's tab wakes and types: his edits were the client of
    // another user, refused `not_your_client`, and what he typed never reached anyone.
    let mut sim = bob_shows_his_cursor();
    sim.disconnect(1);
    sim.reset();
    sim.connect(0);
    sim.connect(2);
    sim.send(2, &wire::update(&forged(&sim.room, 101, "EVIL ")));
    assert_eq!(refusals(&sim), vec![DocError::NotYourClient]);
    sim.connect(1);
    sim.edit(1, "!");
    assert_eq!(sim.editors[0].text(), "hello!", "Bob's edit is his own");
    assert_eq!(sim.stored_text(), "hello!");
}

#[test]
fn a_member_who_shows_new_clients_keeps_one_a_socket_and_only_her_newest_bound() {
    // Each shown client is a stored row. Mallory shows 200 clients one after another on one
    // socket: only the first is bound (a tab is one client), no row a frame. Then she
    // reconnects 40 times, a new client each: she keeps her newest 16 (those never written
    // for), the rows of the rest go; Bob's stays.
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect(1); // Bob: Yjs client 101
    sim.connect(2); // Mallory
    let cursor = [wire::Entry { client: 101, clock: 1, json: r#"{"name":"bob"}"#.into() }];
    sim.send(1, &wire::awareness(cursor.iter()));
    let show = |sim: &mut Sim, client: u64| {
        let old = wire::Entry { client: client - 1, clock: 2, json: "null".into() };
        let new = wire::Entry { client, clock: 1, json: r#"{"name":"m"}"#.into() };
        sim.send(2, &wire::awareness([old, new].iter()));
    };
    let rows = |sim: &Sim| sim.stored.writers.iter().filter(|(_, u)| u == "user2").count();
    for client in 5_000..5_200u64 {
        show(&mut sim, client);
    }
    assert_eq!(rows(&sim), 1, "{:?}", sim.stored.writers);
    for client in 6_000..6_040u64 {
        sim.disconnect(2);
        sim.now += 1_000; // her connects are paced
        sim.connect(2);
        show(&mut sim, client);
    }
    assert_eq!(rows(&sim), crate::doc::writers::SHOWN_PER_USER, "{:?}", sim.stored.writers);
    assert!(sim.stored.writers.contains(&(101, "user1".into())), "Bob's stays");
    assert!(sim.stored.writers.contains(&(6_039, "user2".into())), "her newest stays");
    assert_eq!(refusals(&sim), vec![]);
    // After a reload, the rows she has are counted: 16 more make way for as many.
    sim.reset();
    for client in 7_000..7_016u64 {
        sim.disconnect(2);
        sim.now += 1_000;
        sim.connect(2);
        show(&mut sim, client);
    }
    assert_eq!(rows(&sim), crate::doc::writers::SHOWN_PER_USER, "{:?}", sim.stored.writers);
    assert!(sim.stored.writers.contains(&(7_015, "user2".into())), "her newest is bound");
    assert!(sim.stored.writers.contains(&(101, "user1".into())), "Bob's stays");
    assert_eq!(refusals(&sim), vec![]);
}

#[test]
fn a_client_that_wrote_without_a_token_is_not_bound_by_a_cursor() {
    // Carol (no token: anonymous dev mode) wrote as client 102 and left; her removed state is
    // anyone's to set. Mallory shows client 102 in her awareness: it is not bound to her (her
    // cursor holds it while it lives, as before), so after a reload Carol's tab, back as
    // another socket, still writes for it.
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect(0);
    let carol = Member { anonymous: true, ..member("carol-socket-1") };
    sim.connect_as(2, carol);
    sim.edit(2, "hi");
    sim.disconnect(2);
    sim.connect(1); // Mallory
    let cursor = [wire::Entry { client: 102, clock: 5, json: r#"{"name":"m"}"#.into() }];
    sim.send(1, &wire::awareness(cursor.iter()));
    assert!(sim.stored.writers.iter().all(|(c, _)| *c != 102), "{:?}", sim.stored.writers);
    sim.reset();
    sim.connect_as(2, Member { anonymous: true, ..member("carol-socket-2") });
    sim.edit(2, "!");
    assert_eq!(sim.stored_text(), "hi!");
}

#[test]
fn repeating_a_deletion_at_the_bound_makes_the_room_walk_the_document_once() {
    // At the block bound each update that deletes is counted again with only its new
    // deletions, which takes the document's deleted ranges: a walk over all of it. Mallory sends
    // one deletion the document holds already, frame after frame: the walk is kept until the
    // document changes, and she pays for it once (as for a fold), not the room for each frame.
    let config = DocConfig { frames_per_sec: 10_000, frame_burst: 10_000, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.connect(1);
    long_insertions(&mut sim, 120_000);
    sim.send(1, &wire::update(&every_other(0, 120_000)));
    sim.room.compact();
    sim.apply();
    // Cut the second run up to the bound, exactly (each cut is two blocks more).
    let left = crate::doc::MAX_BLOCKS - sim.room.census_blocks().expect("counted");
    sim.send(1, &wire::update(&every_other(120_000, 2 * (left as u64 / 2))));
    sim.room.compact();
    sim.apply();
    assert_eq!(refusals(&sim), vec![]);
    assert!(sim.room.census_blocks().expect("counted") + 2 > crate::doc::MAX_BLOCKS);
    let repeat = every_other(0, 2); // the first character, deleted already
    let (_, walks) = sim.room.deleted_ranges();
    for _ in 0..50 {
        sim.send(1, &wire::update(&repeat));
        sim.now += 10;
    }
    let (held, after) = sim.room.deleted_ranges();
    assert!(held && after <= walks + 1, "{} walks for 50 repeats", after - walks);
    assert_eq!(refusals(&sim), vec![], "each repeat is taken (it changes nothing)");
    assert!(sim.editors.iter().all(|e| e.conn.is_some()), "nobody was closed");
    // A change lets them go (here the room's own: at the bound no member's adds a block): the
    // next count walks the document as it is then.
    sim.room
        .server_edit(|txn| {
            use yrs::{Text, WriteTxn};
            let text = txn.get_or_insert_text("text");
            text.insert(txn, 0, "z");
        })
        .expect("the room's own edit");
    sim.apply();
    assert!(!sim.room.deleted_ranges().0, "let go at the change");
    assert!(sim.editors[0].text().starts_with('z'));
}

#[test]
fn gc_blocks_the_document_holds_already_add_nothing_to_its_count() {
    // GC blocks of a client the document holds up to a clock are trimmed away by `yrs`:
    // counted, a member could grow the count for free (400 KB of them to the bound), and the
    // next editor's keystroke pay for the recount.
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, &"a".repeat(1_000)); // client 100, clocks 0..1000
    sim.edit(0, "b");
    let counted = sim.room.census_blocks().expect("counted");
    let repeat = {
        use yrs::encoding::write::Write;
        let mut u = Vec::new();
        u.write_var(1u32);
        u.write_var(1_000u32); // 1,000 GC blocks of one unit, clocks 0..1000
        u.write_var(100u64);
        u.write_var(0u32);
        for _ in 0..1_000 {
            u.write_u8(0);
            u.write_var(1u32);
        }
        u.write_var(0u32);
        u
    };
    sim.send(1, &wire::update(&repeat));
    assert_eq!(refusals(&sim), vec![]);
    assert_eq!(sim.room.census_blocks(), Some(counted), "nothing new, nothing counted");
    assert_eq!(sim.stored_text(), format!("{}b", "a".repeat(1_000)));
}
