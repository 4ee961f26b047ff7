//! Random interleavings of edits, reconnects, resets and compactions: every editor converges
//! to what storage holds, and storage stays under its bound.

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Step {
    Type(usize, String),
    Delete(usize, u32),
    Connect(usize),
    Disconnect(usize),
    Reset,
    Compact,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..3usize, "[a-z ]{1,40}").prop_map(|(i, s)| Step::Type(i, s)),
        1 => (0..3usize, 1..20u32).prop_map(|(i, n)| Step::Delete(i, n)),
        2 => (0..3usize).prop_map(Step::Connect),
        1 => (0..3usize).prop_map(Step::Disconnect),
        1 => Just(Step::Reset),
        1 => Just(Step::Compact),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn every_editor_converges_to_what_is_stored(steps in proptest::collection::vec(step(), 1..60)) {
        let config = DocConfig { max_doc_bytes: 64 * 1024, compact_above: 2 * 1024, ..DocConfig::default() };
        let mut sim = Sim::new(config, 3);
        for step in steps {
            match step {
                Step::Type(i, s) => sim.edit(i, &s),
                Step::Delete(i, n) => {
                    let update = sim.editors[i].delete_front(n);
                    if sim.editors[i].conn.is_some() {
                        sim.send(i, &wire::update(&update));
                    }
                }
                Step::Connect(i) if sim.editors[i].conn.is_none() => sim.connect(i),
                Step::Connect(_) => {}
                Step::Disconnect(i) => sim.disconnect(i),
                Step::Reset => sim.reset(),
                Step::Compact => {
                    sim.room.compact();
                    sim.apply();
                }
            }
            prop_assert!(sim.stored.bytes() <= config.max_doc_bytes + config.max_frame());
            sim.now += 10;
        }
        // Everyone reconnects after a last reset: all converge on what storage holds.
        sim.reset();
        for i in 0..3 {
            sim.connect(i);
        }
        let stored = sim.stored_text();
        for e in &sim.editors {
            prop_assert_eq!(e.text(), stored.clone());
        }
        sim.assert_stored_before_seen();
    }
}
