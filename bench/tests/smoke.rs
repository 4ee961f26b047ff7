//! The bench smoke, part of the normal test command (scripts/test): a
//! short run against its own homeroom `wrangler dev` with the default rate
//! limits, then a 10-client reconnect storm. Asserts correctness counters
//! only, never speed: every client connected, zero gaps, zero duplicates,
//! every publish acked and delivered to every receiver, signals delivered,
//! every storm client resumed without a gap.

use std::path::PathBuf;
use std::time::Duration;

use homeroom_bench::machine;
use homeroom_bench::report::Report;
use homeroom_bench::runtime::Runtime;
use homeroom_bench::scenario::{self, Publish, Scenario, Storm};
use homeroom_bench::target::Target;

fn check(report: &Report, what: &str, ok: bool) {
    assert!(ok, "{what}\n{}", report.summary());
}

fn common(r: &Report, clients: usize) {
    check(r, "every client connected", r.connected == clients);
    check(r, "no gaps", r.gaps == 0 && r.missing == 0);
    check(r, "no duplicates", r.duplicates == 0);
    check(r, "no resyncs", r.resyncs == 0);
    check(r, "something was published", r.published > 0);
    check(r, "every publish acked", r.acked == r.published && r.unacked == 0);
    check(r, "every receiver has every publish", r.complete == clients);
    check(r, "no error frames", r.errors.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_load_then_a_storm_lose_and_double_nothing() {
    machine::raise_nofile();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    // Default limits: only anonymous mode, so the smoke also shows that a
    // normal client (under 20 frames/s) is never rate limited.
    let rt = Runtime::start(
        &root,
        Target::Homeroom,
        &[("ANONYMOUS_DEV", "true")],
        Duration::from_secs(240),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let tag = std::process::id();

    // Steady: 10 clients over four regions, 2 publishers at 4/s in all, 2
    // signalers at 6/s in all, 3 s.
    let mut sc = Scenario::new("smoke", Target::Homeroom, rt.port, &format!("smoke-{tag}"));
    sc.clients = 10;
    sc.publishers = 2;
    sc.publish = Publish::Rate(4.0);
    sc.signalers = 2;
    sc.signal_rate = 6.0;
    sc.duration = Duration::from_secs(3);
    sc.seed = tag as u64;
    sc.server_pgid = Some(rt.pgid);
    let steady = scenario::run(&sc).await;
    print!("{}", steady.summary());
    common(&steady, 10);
    check(&steady, "no unexpected closes", steady.unexpected_closes == 0);
    check(&steady, "signals reached the others", steady.signals_received > 0);
    check(&steady, "live latency samples", steady.latency_ms.count > 0);

    // Storm: 10 clients, every socket reset at once, back with full jitter
    // and since/epoch while the publishers go on.
    let mut sc =
        Scenario::new("smoke-storm", Target::Homeroom, rt.port, &format!("smoke-storm-{tag}"));
    sc.clients = 10;
    sc.publishers = 2;
    sc.publish = Publish::Rate(4.0);
    sc.seed = tag as u64 + 1;
    sc.server_pgid = Some(rt.pgid);
    sc.storm = Some(Storm {
        pre: Duration::from_secs(1),
        settle_timeout: Duration::from_secs(20),
        tail: Duration::from_secs(1),
        bucket_ms: 250,
        keep_publishers: false,
    });
    let storm = scenario::run(&sc).await;
    print!("{}", storm.summary());
    common(&storm, 10);
    let st = storm.storm.as_ref().expect("a storm report");
    check(&storm, "every socket dropped", st.dropped == 10);
    check(&storm, "every client resumed", st.resumed == 10 && st.not_resumed == 0);
    check(&storm, "every client resumed without a gap", st.resumed_without_gap == 10);
    check(&storm, "every client back", st.back == 10 && st.all_back_s.is_some());
    check(&storm, "replays are what the welcomes announced", st.replayed == st.missed_announced);
    rt.stop().await;
}
