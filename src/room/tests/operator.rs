//! What the operator does through the Worker's admin routes: server-side
//! publish, drain, stats.

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::room::sim::{seqs, Sim};
use crate::room::RoomConfig;

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.into()).unwrap()
}

#[test]
fn a_server_publish_is_sequenced_idempotent_and_seen_by_all() {
    let mut s = Sim::new(RoomConfig::default());
    let a = s.connect("sess-aaaa", "EU", None);
    s.publish(&a, "m1", "1");
    s.take(&a);
    let seq =
        s.room.server_publish(s.now, "srv-1".into(), "news".into(), raw(r#"{"x":1}"#), "NA".into());
    s.pump();
    assert_eq!(seq, Ok(2));
    let again =
        s.room.server_publish(s.now, "srv-1".into(), "news".into(), raw(r#"{"x":1}"#), "NA".into());
    s.pump();
    assert_eq!(again, Ok(2), "a retry returns the original seq");
    let f = s.take(&a);
    assert_eq!(seqs(&f), [2], "seen once, and no ack (the server is not a socket)");
    assert_eq!(
        (f[0]["session"].as_str(), f[0]["region"].as_str(), f[0]["topic"].as_str()),
        (Some("$server"), Some("NA"), Some("news"))
    );
    assert_eq!(s.disk.log[&2].id, "srv-1");
    let bad = s.room.server_publish(s.now, "srv-2".into(), "$state".into(), raw("1"), "NA".into());
    assert_eq!(bad.map_err(|r| r.code().to_owned()), Err("invalid".to_owned()));
    // the id space is the server's own: a client id "srv-1" is another write
    s.publish(&a, "srv-1", "1");
    assert_eq!(s.take_type(&a, "ack")[0]["seq"], 3);
}

#[test]
fn drain_closes_every_socket_with_1001_and_they_resume() {
    let mut s = Sim::new(RoomConfig::default());
    let conns: Vec<String> =
        (0..5).map(|i| s.connect(&format!("sess-{i:04}"), "EU", None)).collect();
    s.publish(&conns[0], "m1", "1");
    for c in &conns {
        s.take(c);
    }
    assert_eq!(s.room.drain(s.now), 5);
    s.pump();
    assert!(conns.iter().all(|c| s.sockets[c].closed == Some(1001)));
    assert!(conns.iter().all(|c| s.sockets[c].inbox.is_empty()), "no leave storm on the way out");
    assert_eq!((s.room.members(), s.room.connections()), (0, 0));
    s.room.server_publish(s.now, "srv".into(), "news".into(), raw("2"), "NA".into()).unwrap();
    s.pump();
    let back = s.connect("sess-0001", "EU", Some((1, "e-1")));
    let f = s.take(&back);
    assert_eq!((f[0]["resumed"].clone(), seqs(&f)), (json!(true), vec![2]));
}

#[test]
fn stats_count_deliveries_across_regions() {
    let mut s = Sim::new(RoomConfig::default());
    let eu = s.connect("sess-eu01", "EU", None);
    s.connect("sess-eu02", "EU", None);
    s.connect("sess-oc01", "OC", None);
    s.connect("sess-na01", "NA", None);
    s.publish(&eu, "m1", "1"); // 4 deliveries, 2 cross-region
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["connections_by_region"], json!({"EU":2,"NA":1,"OC":1}));
    assert_eq!((stats["messages"].clone(), stats["deliveries"].clone()), (json!(1), json!(4)));
    assert_eq!(stats["cross_region_deliveries"], 2);
    assert_eq!(stats["cross_region_ratio"], 0.5);
    assert_eq!(stats["seq"], 1);
}
