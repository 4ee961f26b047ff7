//! Editors converge, late joiners get the whole document, and what was stored is the
//! document after a reset.

use yrs::WriteTxn;

use super::*;

#[test]
fn two_editors_converge_and_a_late_joiner_gets_the_whole_document() {
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, "hello ");
    sim.edit(1, "world");
    assert_eq!(sim.editors[0].text(), sim.editors[1].text());
    assert_eq!(sim.editors[0].text().len(), "hello world".len());
    sim.connect(2);
    assert_eq!(sim.editors[2].text(), sim.editors[0].text());
    sim.assert_stored_before_seen();
}

#[test]
fn an_offline_edit_merges_on_reconnect() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, "base ");
    sim.disconnect(1);
    sim.edit(1, "offline ");
    sim.edit(0, "online ");
    assert_ne!(sim.editors[0].text(), sim.editors[1].text());
    sim.connect(1);
    assert_eq!(sim.editors[0].text(), sim.editors[1].text());
    assert!(sim.editors[0].text().contains("offline"));
    assert_eq!(sim.stored_text(), sim.editors[0].text());
}

#[test]
fn a_reset_loses_nothing_stored_and_an_empty_editor_reads_it_all() {
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect(0);
    for i in 0..50 {
        sim.edit(0, &format!("{i} "));
    }
    let before = sim.editors[0].text();
    sim.reset();
    // A fresh, empty editor connects first: no old editor can hide a loss by resending.
    sim.connect(2);
    assert_eq!(sim.editors[2].text(), before);
    sim.assert_stored_before_seen();
}

#[test]
fn the_log_is_folded_into_a_snapshot_by_size_and_when_the_room_empties() {
    let config = DocConfig { compact_above: 4 * 1024, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    for i in 0..400 {
        sim.edit(0, &format!("line {i}\n"));
        sim.now += 20; // typing speed: within the frame budget
    }
    assert!(sim.editors[0].closed.is_none());
    let compactions = sim.trace.iter().filter(|e| matches!(e, Effect::Compact(_))).count();
    assert!(compactions >= 1, "a 4 KiB log is folded");
    assert!(sim.stored.log.iter().map(Vec::len).sum::<usize>() <= 4 * 1024 + 64);
    assert_eq!(sim.stored_text(), sim.editors[0].text());
    sim.edit(0, "last");
    assert!(!sim.stored.log.is_empty());
    sim.disconnect(0);
    assert!(sim.stored.log.is_empty(), "the last one out folds the log");
    assert_eq!(text_of(&sim.stored.snapshot), sim.editors[0].text());
}

#[test]
fn a_server_edit_is_stored_and_reaches_every_editor() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, "abc");
    sim.room
        .server_edit(|txn| {
            let text = txn.get_or_insert_text("text");
            text.insert(txn, 0, ">> ");
        })
        .unwrap();
    sim.apply();
    assert_eq!(sim.editors[0].text(), ">> abc");
    assert_eq!(sim.editors[1].text(), ">> abc");
    assert_eq!(sim.stored_text(), ">> abc");
    sim.assert_stored_before_seen();
}

#[test]
fn saved_counts_every_update_in_order_for_clients_that_ask() {
    let mut sim = Sim::new(DocConfig::default(), 1);
    sim.connect_as(0, Member { extensions: true, ..member("ann") });
    sim.edit(0, "a");
    sim.edit(0, "b");
    let saved: Vec<u64> = sim.editors[0]
        .inbox
        .iter()
        .filter_map(|f| {
            let mut cur = yrs::encoding::read::Cursor::new(f);
            use yrs::encoding::read::Read;
            (cur.read_var::<u64>().ok()? == wire::SAVED).then(|| cur.read_var::<u64>().unwrap())
        })
        .collect();
    // The sync step 2 that answered the room's step 1 was empty (nothing to send), yet
    // counted: every update message gets one answer.
    assert_eq!(saved, vec![1, 2, 3]);
}

#[test]
fn a_refused_update_is_counted_in_the_record_that_survives_hibernation() {
    let mut sim = Sim::new(DocConfig::default(), 1);
    sim.connect_as(0, Member { extensions: true, read_only: true, ..member("reader") });
    let conn = sim.editors[0].conn.unwrap();
    sim.trace.clear();
    sim.edit(0, "x"); // refused read_only: its second update message
    let after_refusal = sim.trace.iter().position(|e| matches!(e, Effect::Refused(..))).unwrap();
    let remembered = sim.trace.iter().rposition(|e| *e == Effect::Remember(conn));
    assert!(remembered.is_some_and(|at| at < after_refusal), "{:?}", sim.trace);
    assert_eq!(sim.room.record(conn).unwrap().updates, 2);
}
