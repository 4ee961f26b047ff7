//! Engine tests on virtual time, on the simulated adapter ([`crate::room::sim::Sim`]): scenario
//! tests for each protocol behaviour, and property tests over interleavings.

mod attacks;
mod fuzz;
mod holes;
mod links;
mod load;
mod operator;
mod presence;
mod props;
mod rules;
mod scenarios;
mod write_path;

use crate::room::sim::Sim;
use crate::room::RoomConfig;

/// A publisher (user `pub`) and a reader (`ann`) in a room of 4 KiB flow windows (a mark every
/// 1,024 bytes), after three 3 KB messages the reader has not read: the first went out, the
/// others wait in the room's memory for its echo of the mark that followed it. `adapt` sets
/// the simulated adapter up before anyone connects. Returns (sim, publisher, reader).
fn reader_behind_its_window(adapt: impl FnOnce(&mut Sim)) -> (Sim, String, String) {
    let mut config = RoomConfig { send_window: 4096, ..RoomConfig::default() };
    config.finish();
    let mut s = Sim::new(config);
    adapt(&mut s);
    let p = s.connect_as("sess-publisher", "pub", "EU", None);
    let r = s.connect_as("sess-reader", "ann", "EU", None);
    s.take(&p);
    s.take(&r);
    let pad = "p".repeat(3_000);
    for i in 0..3 {
        s.publish(&p, &format!("m{i}"), &format!(r#""{pad}""#));
    }
    (s, p, r)
}
