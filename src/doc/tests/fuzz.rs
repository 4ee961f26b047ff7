//! Random interleavings of edits, reconnects, resets and compactions: every editor converges
//! to what storage holds, and storage stays under its bound. Under rules that refuse and edit:
//! their bound holds and the copy they decide on stays in step with the document.

use proptest::prelude::*;

use super::*;
use crate::doc::rules::{
    Change, DocCtx, DocRules, Editor as Who, Refusal, Request, Response, Verdict,
};
use yrs::WriteTxn;

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

/// Plays one step on the simulated room.
fn play(sim: &mut Sim, step: Step) {
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
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn every_editor_converges_to_what_is_stored(steps in proptest::collection::vec(step(), 1..60)) {
        let config = DocConfig { max_doc_bytes: 64 * 1024, compact_above: 2 * 1024, ..DocConfig::default() };
        let mut sim = Sim::new(config, 3);
        for step in steps {
            play(&mut sim, step);
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

/// The text holds at most 120 characters (decided on the document after the update); `trim`
/// deletes its first 10 characters as the room.
#[derive(Clone)]
struct Bounded;

const BOUND: usize = 120;

impl DocRules for Bounded {
    fn update(&mut self, _doc: &mut DocCtx<'_>, _who: &Who<'_>, change: &Change<'_>) -> Verdict {
        let after = change.after();
        if after.get_text("text").map_or(0, |t| t.get_string(&after).chars().count()) > BOUND {
            return Verdict::Refuse(Refusal::new("too_long", "at most 120 characters"));
        }
        Verdict::Accept
    }

    fn request(&mut self, doc: &mut DocCtx<'_>, _req: &Request) -> Option<Response> {
        doc.edit(|txn| {
            let text = txn.get_or_insert_text("text");
            let n = text.len(txn).min(10);
            text.remove_range(txn, 0, n);
        });
        Some(Response::json(200, &"trimmed"))
    }
}

fn trim() -> Request {
    Request {
        method: "POST".into(),
        path: "trim".into(),
        query: String::new(),
        body: String::new(),
        admin: true,
        user: None,
        info: None,
        region: String::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn under_rules_their_bound_holds_and_the_copy_they_decide_on_stays_in_step(
        steps in proptest::collection::vec(step(), 1..60),
        trims in proptest::collection::vec(0..60usize, 0..8),
    ) {
        let config = DocConfig { max_doc_bytes: 64 * 1024, compact_above: 2 * 1024, ..DocConfig::default() };
        let mut sim = Sim::new(config, 3).with_rules(|| Box::new(Bounded));
        for (n, step) in steps.into_iter().enumerate() {
            play(&mut sim, step);
            if trims.contains(&n) {
                sim.room.request(sim.now, &trim());
                sim.apply();
            }
            prop_assert!(sim.room.copy_in_step(), "the rules' copy drifted at step {}", n);
            let live = sim.room.doc().get_or_insert_text("text").get_string(&sim.room.doc().transact());
            prop_assert!(live.chars().count() <= BOUND, "{} characters: {:?}", live.chars().count(), live);
            prop_assert!(sim.stored.bytes() <= config.max_doc_bytes + config.max_frame());
            sim.now += 10;
        }
        // What is stored is what the room held: a reset loads the same text.
        let live = sim.room.doc().get_or_insert_text("text").get_string(&sim.room.doc().transact());
        prop_assert_eq!(sim.stored_text(), live);
        sim.assert_stored_before_seen();
    }
}
