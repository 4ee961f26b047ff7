//! Named versions: a restore is a forward transaction, so an editor that still has the newer
//! state does not bring it back when it syncs.

use yrs::{Map, WriteTxn};

use super::*;

#[test]
fn a_restored_version_stays_restored_when_an_editor_with_the_newer_state_syncs() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, "the first draft");
    sim.room
        .server_edit(|txn| {
            let map = txn.get_or_insert_map("meta");
            map.insert(txn, "title", "Draft");
        })
        .unwrap();
    sim.apply();
    let version = sim.room.encoded();
    // Later: the text is rewritten, the map changed, and Bob goes offline holding all of it.
    let rewrite = sim.editors[0].delete_front(100);
    sim.send(0, &wire::update(&rewrite));
    sim.edit(0, "a rewrite nobody liked");
    sim.room
        .server_edit(|txn| {
            let map = txn.get_or_insert_map("meta");
            map.insert(txn, "title", "Final");
            map.insert(txn, "extra", 1);
        })
        .unwrap();
    sim.apply();
    assert_eq!(sim.editors[1].text(), "a rewrite nobody liked");
    sim.disconnect(1);
    let roots = [("text".to_string(), "text".to_string()), ("meta".to_string(), "map".to_string())];
    sim.room.restore_version(&version, &roots).unwrap();
    sim.apply();
    assert_eq!(sim.editors[0].text(), "the first draft");
    // Bob comes back with the newer state: the restore holds.
    sim.connect(1);
    assert_eq!(sim.editors[1].text(), "the first draft");
    assert_eq!(sim.editors[0].text(), "the first draft");
    assert_eq!(sim.stored_text(), "the first draft");
    let json = sim.room.json(&roots).unwrap();
    assert_eq!(
        json["meta"],
        serde_json::json!({"title": "Draft"}),
        "the map too, its later key gone"
    );
    sim.assert_stored_before_seen();
}

#[test]
fn a_version_that_does_not_decode_or_an_unknown_type_changes_nothing() {
    let mut sim = Sim::new(DocConfig::default(), 1);
    sim.connect(0);
    sim.edit(0, "kept");
    let stored = sim.stored.bytes();
    let roots = [("text".to_string(), "text".to_string())];
    assert_eq!(sim.room.restore_version(&[1, 2, 3], &roots), Err(DocError::BadUpdate));
    let version = sim.room.encoded();
    let xml = [("x".to_string(), "xml".to_string())];
    assert!(sim.room.restore_version(&version, &xml).is_err());
    sim.apply();
    assert_eq!(sim.editors[0].text(), "kept");
    assert_eq!(sim.stored.bytes(), stored);
}
