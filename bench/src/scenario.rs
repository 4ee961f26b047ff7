//! One run against one target: N clients in one room spread over regions,
//! publishers (open loop at a rate, or flat out with a window), signalers,
//! a warm-up and a measured window, optionally a storm (every socket
//! dropped at once, then resumed), a drain until every receiver has every
//! publish, and the [`Report`]. Every wait is bounded.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Semaphore};

use crate::client::{self, ClientResult, Control, Phase, PublishMode, Shared, Spec};
use crate::machine;
use crate::report::{HomeIo, Report, StormReport};
use crate::spread::Spread;
use crate::stats::{last_slow_bucket, timeline, Pct};
use crate::target::{Protocol, Region, Target};

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub target: Target,
    pub port: u16,
    pub room: String,
    pub clients: usize,
    pub publishers: usize,
    pub publish: Publish,
    /// Publishers at a rate take turns, evenly spaced (false: all publish
    /// at the same instants, a burst of one per publisher each interval).
    pub stagger: bool,
    pub signalers: usize,
    /// Signals per second, over all signalers (homeroom only).
    pub signal_rate: f64,
    /// Every client in this region (None: spread over [`Region::SPREAD`]).
    pub region: Option<Region>,
    pub warmup: Duration,
    /// The measured window (without a storm).
    pub duration: Duration,
    pub storm: Option<Storm>,
    /// Initial connects in flight at once.
    pub connect_concurrency: usize,
    /// Initial connects started per second, evenly spaced in the clients' order (open loop,
    /// still bounded by `connect_concurrency`): a storm's arrival rate, such as the seeds'
    /// evacuation spread over its relays. `None`: as fast as the bound lets them.
    pub connect_rate: Option<f64>,
    /// Padding bytes in every payload.
    pub pad: usize,
    /// Homeroom's clients ping (off to measure per-frame costs without the heartbeats, which
    /// the plain room's clients do not send).
    pub pings: bool,
    pub seed: u64,
    /// The runtime's process group, to measure its CPU.
    pub server_pgid: Option<u32>,
    /// Runtimes this run did not start, each a part of the Worker in a `wrangler dev` of its
    /// own (`bench/split`: the home, the relays, the edge): (name, process group, public
    /// port). The CPU of each one's Worker workerd is reported under its name.
    pub objects: Vec<(String, u32, u16)>,
    pub drain_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Publish {
    /// Publishes per second over all publishers, open loop.
    Rate(f64),
    /// As fast as the room echoes: `window` publishes in flight per publisher.
    FlatOut { window: usize },
}

#[derive(Debug, Clone, Copy)]
pub struct Storm {
    /// Steady state before the drop, for the normal latency.
    pub pre: Duration,
    /// Longest wait for every client to be back.
    pub settle_timeout: Duration,
    /// Observation after everyone is back (latency back to normal?).
    pub tail: Duration,
    pub bucket_ms: u32,
    /// The publishers keep their sockets (a blip elsewhere): messages go on
    /// during the storm and every resuming client has a replay to apply.
    pub keep_publishers: bool,
}

impl Scenario {
    /// Defaults for a small run; callers set what they vary.
    pub fn new(name: &str, target: Target, port: u16, room: &str) -> Scenario {
        Scenario {
            name: name.into(),
            target,
            port,
            room: room.into(),
            clients: 10,
            publishers: 2,
            publish: Publish::Rate(4.0),
            stagger: true,
            signalers: 0,
            signal_rate: 0.0,
            region: None,
            warmup: Duration::from_millis(500),
            duration: Duration::from_secs(3),
            storm: None,
            connect_concurrency: 32,
            connect_rate: None,
            pad: 64,
            pings: true,
            seed: 1,
            server_pgid: None,
            objects: Vec::new(),
            drain_timeout: Duration::from_secs(15),
        }
    }

    fn specs(&self) -> Vec<Spec> {
        let mode = match self.publish {
            Publish::Rate(rate) => PublishMode::Every {
                every: Duration::from_secs_f64(self.publishers as f64 / rate.max(1e-3)),
                phase: Duration::ZERO,
            },
            Publish::FlatOut { window } => PublishMode::Window(window.max(1)),
        };
        let phase_of = |i: usize| match mode {
            PublishMode::Every { every, .. } if self.stagger => PublishMode::Every {
                every,
                phase: every.mul_f64(i as f64 / self.publishers.max(1) as f64),
            },
            other => other,
        };
        let signal_every = (self.signalers > 0 && self.signal_rate > 0.0)
            .then(|| Duration::from_secs_f64(self.signalers as f64 / self.signal_rate));
        let first_signaler = self.clients.saturating_sub(self.signalers);
        (0..self.clients)
            .map(|i| Spec {
                index: i,
                session: format!("b{:08x}-{i:05}", self.seed as u32),
                region: self.region.unwrap_or(Region::SPREAD[i % Region::SPREAD.len()]),
                publisher: (i < self.publishers).then(|| (i as u32, phase_of(i))),
                signal_every: signal_every.filter(|_| i >= first_signaler),
                spared: i < self.publishers && self.storm.is_some_and(|s| s.keep_publishers),
                seed: self.seed.wrapping_mul(0x9E37_79B9).wrapping_add(i as u64),
            })
            .collect()
    }
}

/// Runs the scenario to the end and reports.
pub async fn run(sc: &Scenario) -> Report {
    let shared = Arc::new(Shared {
        start: Instant::now(),
        target: sc.target,
        port: sc.port,
        room: sc.room.clone(),
        pad: sc.pad,
        pings: sc.pings,
        publishers: sc.publishers,
        connected: AtomicUsize::new(0),
        back: AtomicUsize::new(0),
        complete: AtomicUsize::new(0),
        final_sent: (0..sc.publishers).map(|_| AtomicU64::new(0)).collect(),
        finals_set: AtomicUsize::new(0),
        connect_gate: Semaphore::new(sc.connect_concurrency.max(1)),
        connect_every: sc.connect_rate.map(|r| Duration::from_secs_f64(1.0 / r.max(1e-3))),
        spread: spread_for(sc),
    });
    let cpu_at_start = sc.server_pgid.map(machine::group_cpu_secs);
    let roles_at_start = roles(sc);
    let (tx, rx) = watch::channel(Control { phase: Phase::Connect, record: false, drops: 0 });
    let mut tasks = Vec::with_capacity(sc.clients);
    for spec in sc.specs() {
        let shared = shared.clone();
        let rx = rx.clone();
        tasks.push(tokio::spawn(async move { client::run(spec, &shared, rx).await }));
    }
    let mut problems = Vec::new();

    // Everyone in.
    let connect_limit = Duration::from_secs(20) + Duration::from_millis(25 * sc.clients as u64);
    let all_in = wait_for(&shared.connected, sc.clients, connect_limit).await;
    if !all_in {
        problems.push(format!(
            "only {} of {} clients connected within {connect_limit:?}",
            shared.connected.load(Ordering::Acquire),
            sc.clients
        ));
    }
    let connect_cpu = match (cpu_at_start, sc.server_pgid) {
        (Some(before), Some(pgid)) if all_in => {
            Some((machine::group_cpu_secs(pgid) - before) * 1000.0 / sc.clients.max(1) as f64)
        }
        _ => None,
    };
    let connect_cpu_by = if all_in {
        per(&roles(sc), &roles_at_start, sc.clients.max(1) as f64 / 1000.0)
    } else {
        BTreeMap::new()
    };
    // The room was made by the first connect: its counters so far are the connect phase's.
    let io_connect = if all_in { home_io(sc).await } else { None };
    tokio::time::sleep(Duration::from_millis(500)).await; // presence settles

    let mut window = (0.0, 0.0, 0.0, 0.0); // (start s, cpu server, cpu self, cpu all)
    let mut end = (0.0, 0.0, 0.0, 0.0);
    let mut drop_ms = None;
    let mut window_roles = BTreeMap::new();
    let mut end_roles = BTreeMap::new();
    let mut back_in_time = false;
    // The home's counters: at the window's start, at its end (a storm's drop), when the storm's
    // clients are all back.
    let mut io: [Option<HomeIo>; 3] = [None; 3];
    if all_in {
        tx.send_modify(|c| c.phase = Phase::Publish);
        tokio::time::sleep(sc.warmup).await;
        tx.send_modify(|c| c.record = true);
        window = snapshot(&shared, sc.server_pgid);
        window_roles = roles(sc);
        io[0] = home_io(sc).await;
        match sc.storm {
            None => tokio::time::sleep(sc.duration).await,
            Some(storm) => {
                tokio::time::sleep(storm.pre).await;
                io[1] = home_io(sc).await;
                drop_ms = Some(shared.now_ms());
                tx.send_modify(|c| c.drops += 1);
                let dropped = sc.clients - sc.specs().iter().filter(|s| s.spared).count();
                back_in_time = wait_for(&shared.back, dropped, storm.settle_timeout).await;
                io[2] = home_io(sc).await;
                tokio::time::sleep(storm.tail).await;
            }
        }
        end = snapshot(&shared, sc.server_pgid);
        end_roles = roles(sc);
        if sc.storm.is_none() {
            io[1] = home_io(sc).await;
        }
        tx.send_modify(|c| c.record = false);
        tx.send_modify(|c| c.phase = Phase::Drain);
        let connected = shared.connected.load(Ordering::Acquire);
        wait_for(&shared.complete, connected, sc.drain_timeout).await;
    }
    tx.send_modify(|c| c.phase = Phase::Stop);

    let mut results = Vec::with_capacity(tasks.len());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut stuck = 0;
    for task in tasks {
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(r)) => results.push(r),
            Ok(Err(e)) => problems.push(format!("a client task failed: {e}")),
            Err(_) => stuck += 1,
        }
    }
    if stuck > 0 {
        // Most often a connect the runtime never answered, or one waiting behind those.
        problems.push(format!("{stuck} clients did not stop in time (their counts are lost)"));
    }
    let secs = (end.0 - window.0).max(1e-9);
    let server_cpu = sc.server_pgid.map(|_| (end.1 - window.1) / secs);
    let loadgen_cpu = (end.2 - window.2) / secs;
    let mut report = aggregate(sc, &results, secs, drop_ms, back_in_time);
    if let Some((first, last)) = shared.spread.first_and_last() {
        report.first_receiver_ms = Some(first);
        report.last_receiver_ms = Some(last);
    }
    report.timeline = {
        let all: Vec<(u32, u32)> = results.iter().flat_map(|r| r.samples.iter().copied()).collect();
        timeline(&all, (window.0 * 1000.0) as u32, 500)
    };
    if std::env::var_os("HOMEROOM_BENCH_DEBUG").is_some() {
        let mut worst: Vec<(u32, usize)> = results
            .iter()
            .enumerate()
            .map(|(i, r)| (r.samples.iter().map(|s| s.1).max().unwrap_or(0), i))
            .collect();
        worst.sort_unstable_by(|a, b| b.cmp(a));
        for (lat, i) in worst.iter().take(8) {
            let slow = results[*i].samples.iter().filter(|s| s.1 > 1_000_000).count();
            eprintln!(
                "debug: client {i} max latency {:.1} ms, {slow} deliveries over 1 s",
                *lat as f64 / 1000.0
            );
        }
        for t in &report.timeline {
            eprintln!("debug: timeline {t:?}");
        }
        let published: Vec<u64> = results.iter().take(sc.publishers).map(|r| r.published).collect();
        eprintln!("debug: published per publisher {published:?}");
        if let Some((_, i)) = worst.get(worst.len() / 2) {
            for s in results[*i].slow.iter().take(40) {
                eprintln!("debug: client {i} slow (recv ms, latency ms, p, n, seq) {s:?}");
            }
        }
    }
    report.server_cpu = server_cpu.filter(|_| all_in);
    report.connect_cpu_ms = connect_cpu;
    report.connect_cpu_ms_by = connect_cpu_by;
    report.server_cpu_by = per(&end_roles, &window_roles, secs);
    report.loadgen_cpu = if all_in { loadgen_cpu } else { 0.0 };
    if all_in {
        let busy = (end.3 - window.3) / secs;
        report.other_cpu = (busy - report.loadgen_cpu - report.server_cpu.unwrap_or(0.0)).max(0.0);
    }
    let between = |a: Option<HomeIo>, b: Option<HomeIo>| Some(a?.until(b?));
    report.home_io = between(io[0], io[1]);
    report.home_io_storm = between(io[1], io[2]);
    report.home_io_connect = io_connect;
    problems.extend(std::mem::take(&mut report.problems));
    report.problems = problems;
    report
}

/// The home's counters now, for the targets that are homeroom.
async fn home_io(sc: &Scenario) -> Option<HomeIo> {
    let path = sc.target.stats_path(&sc.room)?;
    HomeIo::of(&crate::runtime::admin_json(sc.port, &path).await?)
}

/// Room to note every publish of a run at a rate; none for flat out (too
/// many) or a storm (a publish's receivers are not all live).
fn spread_for(sc: &Scenario) -> Spread {
    match (sc.publish, sc.storm) {
        (Publish::Rate(rate), None) => {
            let secs = (sc.warmup + sc.duration).as_secs_f64() + 5.0;
            let each = (secs * rate / sc.publishers.max(1) as f64).ceil() as usize + 16;
            Spread::new(sc.publishers, each)
        }
        _ => Spread::new(0, 0),
    }
}

/// The runtime's CPU seconds so far by process role.
fn roles(sc: &Scenario) -> BTreeMap<String, f64> {
    let mut all =
        sc.server_pgid.map(|g| machine::group_cpu_by_role(g, sc.port)).unwrap_or_default();
    for (name, pgid, port) in &sc.objects {
        let workerd = machine::group_cpu_by_role(*pgid, *port).get("workerd").copied();
        all.insert(name.clone(), workerd.unwrap_or(0.0));
    }
    all
}

/// (after − before) / divisor, per role.
fn per(
    after: &BTreeMap<String, f64>,
    before: &BTreeMap<String, f64>,
    divisor: f64,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), (v - before.get(k).copied().unwrap_or(0.0)) / divisor))
        .collect()
}

/// (seconds since start, runtime CPU s, own CPU s, machine busy s).
fn snapshot(shared: &Shared, pgid: Option<u32>) -> (f64, f64, f64, f64) {
    (
        shared.start.elapsed().as_secs_f64(),
        pgid.map_or(0.0, machine::group_cpu_secs),
        machine::self_cpu_secs(),
        machine::machine_busy_secs(),
    )
}

/// Waits until `counter` reaches `want` (true) or `limit` passes (false).
async fn wait_for(counter: &AtomicUsize, want: usize, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while counter.load(Ordering::Acquire) < want {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

fn aggregate(
    sc: &Scenario,
    results: &[ClientResult],
    secs: f64,
    drop_ms: Option<u32>,
    back_in_time: bool,
) -> Report {
    let sum = |f: &dyn Fn(&ClientResult) -> u64| results.iter().map(f).sum::<u64>();
    let mut connect: Vec<u32> = results.iter().flat_map(|r| r.connect_us.iter().copied()).collect();
    let mut welcome: Vec<u32> = results.iter().flat_map(|r| r.welcome_us.iter().copied()).collect();
    let mut samples: Vec<(u32, u32)> =
        results.iter().flat_map(|r| r.samples.iter().copied()).collect();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut close_codes: BTreeMap<String, u64> = BTreeMap::new();
    let mut connect_errors: BTreeMap<String, u64> = BTreeMap::new();
    for r in results {
        for (k, v) in &r.connect_errors {
            *connect_errors.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &r.errors {
            *errors.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &r.close_codes {
            *close_codes.entry(k.clone()).or_default() += v;
        }
    }
    let homeroom = sc.target.protocol() == Protocol::Homeroom;
    let connected = results.iter().filter(|r| r.connected).count();
    let complete = results.iter().filter(|r| r.complete).count();
    let delivered = sum(&|r| r.delivered_recorded);

    // Latency: the whole window, or before the drop when there is a storm.
    let (mut normal, storm_part): (Vec<u32>, Vec<(u32, u32)>) = match drop_ms {
        None => (samples.iter().map(|s| s.1).collect(), Vec::new()),
        Some(d) => {
            let before = samples.iter().filter(|s| s.0 < d).map(|s| s.1).collect();
            let after = samples.iter().filter(|s| s.0 >= d).copied().collect();
            (before, after)
        }
    };
    let latency = Pct::of_us(&mut normal);
    samples.clear();

    let mut report = Report {
        scenario: sc.name.clone(),
        target: sc.target.name().into(),
        room: sc.room.clone(),
        clients: sc.clients,
        publishers: sc.publishers,
        publish: match sc.publish {
            Publish::Rate(r) if sc.stagger => format!("rate {r}/s"),
            Publish::Rate(r) => format!("rate {r}/s, publishers in phase"),
            Publish::FlatOut { window } => format!("flat out, window {window} per publisher"),
        },
        signal_rate: sc.signal_rate,
        window_s: secs,
        connected,
        connect_ms: Pct::of_us(&mut connect),
        welcome_ms: homeroom.then(|| Pct::of_us(&mut welcome)),
        connect_cpu_ms: None,
        connect_cpu_ms_by: BTreeMap::new(),
        published: sum(&|r| r.published),
        per_publisher: results.iter().take(sc.publishers).map(|r| r.published).collect(),
        acked: sum(&|r| r.acked),
        unacked: sum(&|r| r.unacked),
        resent: sum(&|r| r.resent),
        delivered,
        deliveries_per_sec: delivered as f64 / secs,
        latency_ms: latency,
        first_receiver_ms: None,
        last_receiver_ms: None,
        gaps: sum(&|r| r.gaps),
        missing: sum(&|r| r.missing),
        duplicates: sum(&|r| r.duplicates),
        resyncs: sum(&|r| r.resyncs),
        errors,
        unexpected_closes: sum(&|r| r.unexpected_closes as u64),
        close_codes,
        failed_connects: sum(&|r| r.failed_connects as u64),
        connect_errors,
        signals_sent: sum(&|r| r.signals_sent),
        signals_received: sum(&|r| r.signals_received),
        signal_ms: {
            let mut all: Vec<u32> =
                results.iter().flat_map(|r| r.signal_us.iter().copied()).collect();
            (!all.is_empty()).then(|| Pct::of_us(&mut all))
        },
        complete,
        server_cpu: None,
        server_cpu_by: BTreeMap::new(),
        loadgen_cpu: 0.0,
        other_cpu: 0.0,
        storm: None,
        timeline: Vec::new(),
        home_io: None,
        home_io_storm: None,
        home_io_connect: None,
        problems: Vec::new(),
    };

    if let (Some(storm), Some(drop_at)) = (sc.storm, drop_ms) {
        let mut reconnect: Vec<u32> =
            results.iter().flat_map(|r| r.reconnect_us.iter().copied()).collect();
        let back: Vec<u32> = results.iter().filter_map(|r| r.back_at_ms).collect();
        let dropped_clients = results.iter().filter(|r| r.drops > 0).count();
        let all_back_ms = (back.len() >= dropped_clients && back_in_time)
            .then(|| back.iter().copied().max().unwrap_or(drop_at));
        let pre_p99_us = (latency.p99 * 1000.0) as u32;
        let normal_us = (pre_p99_us * 2).max(pre_p99_us + 25_000);
        let (slow_end, calm) =
            last_slow_bucket(&storm_part, drop_at, storm.bucket_ms, normal_us, 4);
        let settle_ms = match all_back_ms {
            Some(b) if calm => Some(b.max(slow_end.unwrap_or(drop_at)) - drop_at),
            _ => None,
        };
        let mut storm_lat: Vec<u32> = storm_part.iter().map(|s| s.1).collect();
        let st = StormReport {
            dropped: sum(&|r| r.drops as u64),
            resumed: sum(&|r| r.resumed as u64),
            not_resumed: sum(&|r| r.not_resumed as u64),
            resumed_without_gap: results
                .iter()
                .filter(|r| {
                    r.resumed > 0
                        && r.not_resumed == 0
                        && r.gaps == 0
                        && r.duplicates == 0
                        && r.resyncs == 0
                })
                .count() as u64,
            back: back.len() as u64,
            replayed: sum(&|r| r.replayed),
            missed_announced: sum(&|r| r.missed_announced),
            reconnect_ms: Pct::of_us(&mut reconnect),
            all_back_s: all_back_ms.map(|b| (b - drop_at) as f64 / 1000.0),
            pre_p99_ms: latency.p99,
            normal_ms: normal_us as f64 / 1000.0,
            storm_latency_ms: Pct::of_us(&mut storm_lat),
            settle_s: settle_ms.map(|s| s as f64 / 1000.0),
            timeline: timeline(&storm_part, drop_at, 500),
        };
        let spared = if storm.keep_publishers { sc.publishers } else { 0 };
        let to_drop = connected.saturating_sub(spared) as u64;
        if st.dropped < to_drop {
            report.problems.push(format!("only {} of {to_drop} sockets dropped", st.dropped));
        }
        if st.resumed_without_gap < st.dropped {
            report.problems.push(format!(
                "{} of {} dropped clients resumed without a gap",
                st.resumed_without_gap, st.dropped
            ));
        }
        if st.all_back_s.is_none() {
            report.problems.push(format!(
                "{} of {} clients back within {:?}",
                st.back, dropped_clients, storm.settle_timeout
            ));
        } else if st.settle_s.is_none() {
            report.problems.push("latency never back to normal in the run".into());
        }
        report.storm = Some(st);
    }

    let p = &mut report.problems;
    if report.gaps > 0 || report.duplicates > 0 {
        p.push(format!(
            "{} gaps ({} missing), {} duplicates",
            report.gaps, report.missing, report.duplicates
        ));
    }
    if report.resyncs > 0 {
        p.push(format!("{} resyncs", report.resyncs));
    }
    if report.complete < report.connected {
        p.push(format!(
            "{} of {} receivers had every publish at the end",
            report.complete, report.connected
        ));
    }
    if homeroom && (report.unacked > 0 || report.acked < report.published) {
        p.push(format!("{} of {} publishes acked", report.acked, report.published));
    }
    if !report.errors.is_empty() {
        p.push(format!("error frames: {:?}", report.errors));
    }
    if sc.storm.is_none() && report.unexpected_closes > 0 {
        p.push(format!("{} unexpected closes {:?}", report.unexpected_closes, report.close_codes));
    }
    if report.published == 0 && sc.publishers > 0 && report.connected == sc.clients {
        p.push("nothing was published".into());
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phases(sc: &Scenario) -> Vec<(Duration, Duration)> {
        sc.specs()
            .iter()
            .filter_map(|s| match s.publisher {
                Some((_, PublishMode::Every { every, phase })) => Some((every, phase)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn each_part_of_a_split_runtime_is_measured_under_its_name() {
        let mut sc = Scenario::new("t", Target::Homeroom, 0, "r");
        // No such process group: measured, as nothing.
        sc.objects = vec![("home".into(), u32::MAX - 1, 1), ("relays".into(), u32::MAX - 2, 2)];
        let parts = roles(&sc);
        assert_eq!(parts.keys().collect::<Vec<_>>(), ["home", "relays"]);
        assert!(parts.values().all(|cpu| *cpu == 0.0));

        let mut report = aggregate(&sc, &[], 10.0, None, false);
        assert!(report.cpu_per_frame_us().is_empty(), "no frame delivered, no figure");
        report.delivered = 50_000;
        report.window_s = 10.0;
        report.server_cpu_by = [("home".to_owned(), 0.24), ("relays".to_owned(), 0.28)].into();
        let per_frame = report.cpu_per_frame_us();
        assert!((per_frame["home"] - 48.0).abs() < 1e-9, "{per_frame:?}");
        assert!((per_frame["relays"] - 56.0).abs() < 1e-9, "{per_frame:?}");
        assert!(report.summary().contains("per delivered frame (µs) (home 48.00, relays 56.00)"));
    }

    #[test]
    fn publishers_at_a_rate_take_turns_unless_in_phase() {
        let mut sc = Scenario::new("t", Target::Homeroom, 0, "r");
        sc.clients = 10;
        sc.publishers = 4;
        sc.publish = Publish::Rate(20.0);
        let ms = |d: Duration| d.as_millis();
        let turns: Vec<(u128, u128)> =
            phases(&sc).into_iter().map(|(e, p)| (ms(e), ms(p))).collect();
        assert_eq!(turns, [(200, 0), (200, 50), (200, 100), (200, 150)], "one every 50 ms");
        sc.stagger = false;
        assert!(phases(&sc).iter().all(|(e, p)| ms(*e) == 200 && p.is_zero()), "all at once");
        sc.publish = Publish::FlatOut { window: 4 };
        assert!(phases(&sc).is_empty(), "flat out has no schedule");
    }
}
