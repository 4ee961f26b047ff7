//! A relay in a connect storm: its clients' opens cross the link to the home together, one
//! message per [`OPEN_HOLD_MS`] window, not one per client.

use super::hello;
use crate::protocol::link::{Up, UpOp};
use crate::relay::{Input, Output, Relay, OPEN_HOLD_MS};
use crate::room::{RoomConfig, Time};

/// A storm's opens reach the home in one link message per [`OPEN_HOLD_MS`] window, not one per
/// client: the first connect after a quiet window goes up at once, the next ones wait for the
/// window's end (a wake asked for then), and a client's frame takes the held opens with it at
/// once, in order.
#[test]
fn a_storms_opens_go_up_one_message_per_window() {
    let mut relay = Relay::new("oc-0", 1, RoomConfig::default());
    // The turn's end: the wake the relay asked for, when it is due by `now`.
    let turn = |relay: &mut Relay, now: u64, ups: &mut Vec<(u64, Vec<String>)>| {
        let mut wake = None;
        while let Some(out) = relay.poll_output() {
            match out {
                Output::SetWake(at) => wake = Some(at.ms()),
                Output::Up(text) => {
                    let up = Up::parse(&text).unwrap();
                    let ops = up.ops.iter().map(|op| match op {
                        UpOp::Open(o) => format!("open {}", o.conn),
                        UpOp::Text { conn, .. } => format!("text {conn}"),
                        other => format!("{other:?}"),
                    });
                    ups.push((now, ops.collect()));
                }
                _ => {}
            }
        }
        wake
    };
    let mut ups = Vec::new();
    let t0 = 10_000;
    // The first connect after a quiet window: up at once (at the end of its own turn).
    relay.handle(Time::from_ms(t0), Input::Open(hello("oc-0.c0", "ann")));
    assert_eq!(turn(&mut relay, t0, &mut ups), Some(t0));
    relay.handle(Time::from_ms(t0), Input::Wake);
    assert_eq!(turn(&mut relay, t0, &mut ups), None);
    // Ten more, 4 ms apart: held until the window after that message ends.
    let mut wakes = Vec::new();
    for i in 1..=10 {
        let now = t0 + 4 * i;
        relay.handle(Time::from_ms(now), Input::Open(hello(&format!("oc-0.c{i}"), "ann")));
        wakes.extend(turn(&mut relay, now, &mut ups));
    }
    assert_eq!(wakes, [t0 + OPEN_HOLD_MS], "one wake, at the window's end");
    assert_eq!(ups.len(), 1, "nothing more went up meanwhile: {ups:?}");
    let end = t0 + OPEN_HOLD_MS;
    relay.handle(Time::from_ms(end), Input::Wake);
    turn(&mut relay, end, &mut ups);
    let opens = |from: u64, to: u64| (from..=to).map(|i| format!("open oc-0.c{i}")).collect();
    assert_eq!(ups[1], (end, opens(1, 10)), "the window's opens in one message");
    // Two more in the next window, then a client's frame: it goes at once, after them.
    for i in 11..=12 {
        relay.handle(Time::from_ms(end + i), Input::Open(hello(&format!("oc-0.c{i}"), "ann")));
        turn(&mut relay, end + i, &mut ups);
    }
    let at = end + 20;
    let text = r#"{"type":"publish","id":"p1","topic":"chat","data":1}"#;
    relay.handle(Time::from_ms(at), Input::Text { conn: "oc-0.c0", text });
    assert_eq!(turn(&mut relay, at, &mut ups), Some(at), "a frame ends the hold");
    relay.handle(Time::from_ms(at), Input::Wake);
    turn(&mut relay, at, &mut ups);
    let mut want: Vec<String> = opens(11, 12);
    want.push("text oc-0.c0".into());
    assert_eq!(ups[2], (at, want), "the held opens, then the frame");
    assert_eq!(ups.len(), 3, "{ups:?}");
}
