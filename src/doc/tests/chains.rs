//! Documents of many Yjs clients whose characters follow one another's: one update of a chain
//! of 20,000 exhausted the stack of `yrs` 0.28.1 as it integrated it (once per client, past a
//! Wasm's stack), and integrating one cost n² steps; patched (vendor/README.md). Chains in every
//! order of their clients' ids, taken live, read by a member and loaded again from storage.

use proptest::prelude::*;

use super::*;

/// One update in which client `order[i]` types an `x` right after client `order[i - 1]`'s, and
/// `order[0]` after `after`'s (or at the start of the text): a chain of dependencies across
/// clients, in the order of `order` whatever their ids.
pub fn chain(order: &[u64], after: Option<u64>) -> Vec<u8> {
    use yrs::encoding::write::Write;
    let mut u = Vec::new();
    u.write_var(order.len());
    for (i, &client) in order.iter().enumerate() {
        u.write_var(1u32); // one block
        u.write_var(client);
        u.write_var(0u32); // from clock 0
        match if i == 0 { after } else { Some(order[i - 1]) } {
            None => {
                u.write_u8(4); // a string, no origins: its parent follows
                u.write_var(1u32); // a root type...
                u.write_string("text"); // ...named
            }
            Some(left) => {
                u.write_u8(0x80 | 4); // a string with a left origin: the parent is its
                u.write_var(left);
                u.write_var(0u32);
            }
        }
        u.write_string("x");
    }
    u.write_var(0u32); // no deletions
    u
}

/// The chain `order` sent by a member while another reads; the reader's text, then a late
/// joiner's after the room is loaded again from what it stored.
fn taken_and_loaded(order: &[u64]) -> (String, String) {
    let config = DocConfig { max_doc_bytes: 48 * 1024 * 1024, ..DocConfig::default() };
    let mut sim = Sim::new(config, 3);
    sim.connect(0);
    sim.connect(1);
    sim.send(0, &wire::update(&chain(order, None)));
    assert_eq!(refusals(&sim), vec![]);
    let read = sim.editors[1].text();
    sim.reset();
    sim.connect(2);
    (read, sim.editors[2].text())
}

#[test]
fn a_chain_of_twenty_thousand_clients_in_one_update_is_taken_and_loads_again() {
    // Each client's character follows the one with the id before: yrs took the whole chain as
    // dependencies of the last client's, then recursed once per client it found emptied.
    let order: Vec<u64> = (1..=20_000).collect();
    let all = "x".repeat(20_000);
    assert_eq!(taken_and_loaded(&order), (all.clone(), all));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4))]
    #[test]
    fn chains_in_any_order_of_ids_are_taken_and_load_again(
        n in 2_000..12_000u64,
        how in 0..3u8,
        seed in any::<u64>(),
    ) {
        // Ids rising along the chain, falling, or shuffled (the picker takes clients from the
        // highest id down, so each order walks it differently).
        let mut order: Vec<u64> = (1..=n).collect();
        match how {
            0 => {}
            1 => order.reverse(),
            _ => fastrand::Rng::with_seed(seed).shuffle(&mut order),
        }
        let all = "x".repeat(n as usize);
        let (read, loaded) = taken_and_loaded(&order);
        prop_assert_eq!(read, all.clone());
        prop_assert_eq!(loaded, all);
    }
}
