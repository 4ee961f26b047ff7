//! The benchmark (issue 6): for each round, each target in turn (the order
//! rotates every round) in a fresh `wrangler dev`: moderate runs (20
//! publishes/s into 200 clients: latency; the publishers taking turns, then
//! publishing in phase) and fan-out runs (200 clients,
//! publishers flat out, a shallow and a deep window: deliveries/s); then
//! homeroom storm rounds (2,000 clients dropped at once). Medians, ratios
//! homeroom / baseline, and the markdown written to `bench/RESULTS.md`;
//! every run's JSON goes to `target/homeroom-bench/`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::machine::{self, Attachment, Machine};
use crate::report::{HomeIo, Report};
use crate::runtime::{Runtime, BENCH_VARS};
use crate::scenario::{self, Publish, Scenario, Storm};
use crate::stats::median;
use crate::target::{Region, Target};

#[derive(Debug, Clone)]
pub struct SuiteConfig {
    pub rounds: usize,
    /// Extra `--var`s for homeroom's runtime (beyond [`BENCH_VARS`]).
    pub homeroom_vars: Vec<(String, String)>,
    /// Connect to the Worker's own workerd, around wrangler dev's proxy
    /// ([`Runtime::worker_port`]); false: through the public port.
    pub direct: bool,
    pub storm_rounds: usize,
    /// Rounds of the storm that spares the publishers.
    pub live_storm_rounds: usize,
    pub fanout: Shape,
    /// Publishes in flight per publisher, one fan-out run each: a target
    /// that batches needs a deep window to be busy, one that does not
    /// loses to queueing with it; each target is credited its best.
    pub fanout_windows: Vec<usize>,
    pub moderate: Shape,
    pub storm: Shape,
    pub storm_timing: Storm,
    /// Rounds of the distance rows: the direct room and the relayed one with an ocean
    /// ([`SuiteConfig::wan_ms`] each way) between the members and the home.
    pub wan_rounds: usize,
    pub wan: Shape,
    /// One way, between the members' region and the home (ms).
    pub wan_ms: u64,
    /// Cursor signalers in the distance rows, and their signals per second each.
    pub wan_signalers: usize,
    pub wan_signal_rate: f64,
    /// Rounds of the per-object rows: each part of the Worker in a runtime of its own
    /// ([`crate::split`]).
    pub split_rounds: usize,
    pub split: Shape,
}

/// The parts of a [`Scenario`] the suite sets.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub clients: usize,
    pub publishers: usize,
    pub publish: Publish,
    /// Publishers at a rate take turns (false: publish at the same instants).
    pub stagger: bool,
    pub warmup: Duration,
    pub duration: Duration,
    pub connect_concurrency: usize,
}

impl Default for SuiteConfig {
    fn default() -> Self {
        SuiteConfig {
            rounds: 5,
            homeroom_vars: Vec::new(),
            direct: true,
            storm_rounds: 3,
            live_storm_rounds: 2,
            fanout_windows: vec![4, 64],
            fanout: Shape {
                clients: 200,
                publishers: 4,
                publish: Publish::FlatOut { window: 4 },
                stagger: true,
                warmup: Duration::from_secs(2),
                duration: Duration::from_secs(8),
                connect_concurrency: 32,
            },
            moderate: Shape {
                clients: 200,
                publishers: 4,
                publish: Publish::Rate(20.0),
                stagger: true,
                warmup: Duration::from_secs(1),
                // A p99 of 10 s at 20/s rests on the two slowest of 200
                // broadcasts and swung from 1.05x to 1.4x between runs.
                duration: Duration::from_secs(20),
                connect_concurrency: 32,
            },
            storm: Shape {
                clients: 2000,
                publishers: 4,
                publish: Publish::Rate(5.0),
                stagger: true,
                warmup: Duration::from_secs(1),
                duration: Duration::ZERO,
                connect_concurrency: 64,
            },
            storm_timing: Storm {
                pre: Duration::from_secs(5),
                settle_timeout: Duration::from_secs(45),
                tail: Duration::from_secs(8),
                bucket_ms: 250,
                keep_publishers: false,
            },
            wan_rounds: 3,
            wan: Shape {
                clients: 40,
                publishers: 2,
                publish: Publish::Rate(5.0),
                stagger: true,
                warmup: Duration::from_secs(2),
                duration: Duration::from_secs(10),
                connect_concurrency: 16,
            },
            wan_ms: 80,
            wan_signalers: 4,
            wan_signal_rate: 20.0,
            split_rounds: 2,
            // bench/README.md's "Per object" runs: a room big enough that the CPU clock's 10 ms
            // tick is a few percent of each part's window.
            split: Shape {
                clients: 1000,
                publishers: 2,
                publish: Publish::Rate(5.0),
                stagger: true,
                warmup: Duration::from_millis(500),
                duration: Duration::from_secs(10),
                connect_concurrency: 32,
            },
        }
    }
}

impl SuiteConfig {
    /// A small version for trying the suite out (not for RESULTS.md).
    pub fn quick(mut self) -> SuiteConfig {
        self.rounds = 1;
        self.storm_rounds = 1;
        self.live_storm_rounds = 1;
        self.fanout.clients = 50;
        self.fanout.duration = Duration::from_secs(3);
        self.moderate.clients = 50;
        self.moderate.duration = Duration::from_secs(3);
        self.storm.clients = 200;
        self.storm_timing.pre = Duration::from_secs(2);
        self.wan_rounds = 1;
        self.wan.duration = Duration::from_secs(3);
        self.split_rounds = 1;
        self.split.clients = 100;
        self.split.duration = Duration::from_secs(3);
        self
    }
}

/// One run's report with where it came from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub round: usize,
    pub report: Report,
}

pub async fn run(root: &Path, cfg: &SuiteConfig, out: &Path) -> Result<(), String> {
    let started = Instant::now();
    let stamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let raw_dir = root.join("target/homeroom-bench").join(stamp.to_string());
    std::fs::create_dir_all(&raw_dir).map_err(|e| e.to_string())?;
    let mut runs: Vec<Run> = Vec::new();
    let mut seed = stamp;

    for round in 1..=cfg.rounds {
        let mut order = Target::ALL.to_vec();
        let turn = (round - 1) % order.len();
        order.rotate_left(turn);
        for target in order {
            let rt = start(root, target, cfg).await?;
            let port = port_of(&rt, cfg).await?;
            let in_phase = Shape { stagger: false, ..cfg.moderate };
            let mut shapes = vec![
                ("moderate".to_owned(), cfg.moderate),
                ("moderate-in-phase".to_owned(), in_phase),
            ];
            for &window in &cfg.fanout_windows {
                let publish = Publish::FlatOut { window };
                shapes.push((format!("fanout-w{window}"), Shape { publish, ..cfg.fanout }));
            }
            for (name, shape) in shapes {
                let name = name.as_str();
                seed += 1;
                let sc = scenario_for(name, target, &rt, port, &shape, seed, None);
                let report = scenario::run(&sc).await;
                eprintln!(
                    "[round {round} {:.0}s] {}",
                    started.elapsed().as_secs_f64(),
                    report.summary()
                );
                runs.push(Run { round, report });
            }
            rt.stop().await;
        }
    }
    let storms = (1..=cfg.storm_rounds).map(|r| ("storm", r, false, Target::Homeroom));
    let live = (1..=cfg.live_storm_rounds).map(|r| ("storm-live", r, true, Target::Homeroom));
    // The same storm through relays, beside the direct one in the same run.
    let relayed = (1..=cfg.storm_rounds).map(|r| ("storm-relayed", r, false, Target::Relayed));
    // And the live storm through relays: its members have a catch-up, from their relay's tail.
    let live_relayed =
        (1..=cfg.live_storm_rounds).map(|r| ("storm-live-relayed", r, true, Target::Relayed));
    let all = storms.chain(live).chain(relayed).chain(live_relayed);
    for (name, round, keep_publishers, target) in all {
        let rt = start(root, target, cfg).await?;
        let port = port_of(&rt, cfg).await?;
        seed += 1;
        let timing = Some(Storm { keep_publishers, ..cfg.storm_timing });
        let sc = scenario_for(name, target, &rt, port, &cfg.storm, seed, timing);
        let report = scenario::run(&sc).await;
        eprintln!("[{name} {round} {:.0}s] {}", started.elapsed().as_secs_f64(), report.summary());
        runs.push(Run { round, report });
        rt.stop().await;
    }

    runs.extend(distance_runs(root, cfg, &mut seed, started).await?);
    runs.extend(crate::split::runs(root, cfg, &mut seed, started, &raw_dir).await?);

    let json = serde_json::to_string_pretty(&runs).map_err(|e| e.to_string())?;
    std::fs::write(raw_dir.join("runs.json"), json).map_err(|e| e.to_string())?;
    let when = When { minutes: Some(started.elapsed().as_secs_f64() / 60.0), stamp };
    let when_json = serde_json::to_string(&when).map_err(|e| e.to_string())?;
    std::fs::write(raw_dir.join("when.json"), when_json).map_err(|e| e.to_string())?;
    write_results(root, cfg, &runs, &when, out)?;
    eprintln!("and {}", raw_dir.join("runs.json").display());
    Ok(())
}

/// When a suite ran (its directory's name is `stamp`) and how long it took.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct When {
    pub minutes: Option<f64>,
    pub stamp: u64,
}

/// Writes the markdown of the runs in `dir` (a suite's `runs.json`) to
/// `out` again, with the tables of this version of the suite: for a report
/// changed after a long run, without running it again. `cfg` must be the
/// configuration the runs were made with (the same flags).
pub fn render(root: &Path, cfg: &SuiteConfig, dir: &Path, out: &Path) -> Result<(), String> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{}: {e}", dir.display()))
    };
    let runs: Vec<Run> = serde_json::from_str(&read("runs.json")?).map_err(|e| e.to_string())?;
    // Suites from before `when.json` was written: the stamp is the name.
    let when = match read("when.json") {
        Ok(text) => serde_json::from_str(&text).map_err(|e| e.to_string())?,
        Err(_) => When {
            minutes: None,
            stamp: dir
                .file_name()
                .and_then(|n| n.to_str()?.parse().ok())
                .ok_or("a suite directory is named by its Unix time")?,
        },
    };
    write_results(root, cfg, &runs, &when, out)
}

fn write_results(
    root: &Path,
    cfg: &SuiteConfig,
    runs: &[Run],
    when: &When,
    out: &Path,
) -> Result<(), String> {
    let facts = Facts {
        machine: Machine::read(root),
        wasm: machine::wasm_size(root),
        attachment: machine::attachment(),
        minutes: when.minutes,
        date: date_utc(when.stamp),
    };
    let md = markdown(cfg, runs, &facts);
    std::fs::write(out, &md).map_err(|e| format!("{}: {e}", out.display()))?;
    eprintln!("wrote {}", out.display());
    print!("{md}");
    Ok(())
}

/// The distance rows: all members in one region an ocean from the home, moving cursors and
/// publishing. Direct, every frame crosses it both ways (the bench's own delaying proxy in
/// front of the runtime); through relays, only the link does (`LINK_DELAY_MS`), and a signal
/// between two members of the region stays in it.
async fn distance_runs(
    root: &Path,
    cfg: &SuiteConfig,
    seed: &mut u64,
    started: Instant,
) -> Result<Vec<Run>, String> {
    let mut runs = Vec::new();
    let one_way = cfg.wan_ms.to_string();
    for round in 1..=cfg.wan_rounds {
        for target in [Target::Homeroom, Target::Relayed] {
            let link: &[(&str, &str)] =
                if target == Target::Relayed { &[("LINK_DELAY_MS", &one_way)] } else { &[] };
            let rt = start_with(root, target, cfg, link).await?;
            let mut port = port_of(&rt, cfg).await?;
            if target == Target::Homeroom {
                let wan = Duration::from_millis(cfg.wan_ms);
                port = crate::distance::start(port, wan).await.map_err(|e| e.to_string())?;
            }
            *seed += 1;
            let mut sc = scenario_for("wan", target, &rt, port, &cfg.wan, *seed, None);
            sc.region = Some(Region::SPREAD[0]);
            sc.signalers = cfg.wan_signalers;
            sc.signal_rate = cfg.wan_signal_rate * cfg.wan_signalers as f64;
            let report = scenario::run(&sc).await;
            eprintln!("[wan {round} {:.0}s] {}", started.elapsed().as_secs_f64(), report.summary());
            runs.push(Run { round, report });
            rt.stop().await;
        }
    }
    Ok(runs)
}

async fn start(root: &Path, target: Target, cfg: &SuiteConfig) -> Result<Runtime, String> {
    start_with(root, target, cfg, &[]).await
}

/// [`start`] with `extra` variables last.
async fn start_with(
    root: &Path,
    target: Target,
    cfg: &SuiteConfig,
    extra: &[(&str, &str)],
) -> Result<Runtime, String> {
    let vars = vars_for(target, cfg, extra);
    Runtime::start(root, target, &vars, Duration::from_secs(240)).await
}

/// A runtime's variables: the bench's, the suite's for homeroom, the target's, then `extra`.
pub(crate) fn vars_for<'a>(
    target: Target,
    cfg: &'a SuiteConfig,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut vars: Vec<(&str, &str)> = BENCH_VARS.to_vec();
    if matches!(target, Target::Homeroom | Target::Relayed | Target::Rules) {
        vars.extend(cfg.homeroom_vars.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    }
    vars.extend(target.vars());
    vars.extend(extra);
    vars
}

/// The port the clients use: the Worker's own (direct) or the public one.
async fn port_of(rt: &Runtime, cfg: &SuiteConfig) -> Result<u16, String> {
    if !cfg.direct {
        return Ok(rt.port);
    }
    rt.worker_port()
        .await
        .ok_or_else(|| format!("cannot find the Worker's own port ({})", rt.target))
}

pub(crate) fn scenario_for(
    name: &str,
    target: Target,
    rt: &Runtime,
    port: u16,
    shape: &Shape,
    seed: u64,
    storm: Option<Storm>,
) -> Scenario {
    let room = format!("{name}-{seed:x}");
    let mut sc = Scenario::new(name, target, port, &room);
    sc.clients = shape.clients;
    sc.publishers = shape.publishers;
    sc.publish = shape.publish;
    sc.stagger = shape.stagger;
    sc.warmup = shape.warmup;
    sc.duration = shape.duration;
    sc.connect_concurrency = shape.connect_concurrency;
    sc.storm = storm;
    sc.seed = seed;
    sc.server_pgid = Some(rt.pgid);
    sc
}

struct Facts {
    machine: Machine,
    wasm: Option<(u64, u64)>,
    attachment: Attachment,
    minutes: Option<f64>,
    date: String,
}

/// `YYYY-MM-DD` of a Unix time (civil from days, proleptic Gregorian).
fn date_utc(secs: u64) -> String {
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The median of `f` over the runs of one scenario and target.
pub(crate) fn med(
    runs: &[Run],
    scenario: &str,
    target: Target,
    f: impl Fn(&Report) -> Option<f64>,
) -> Option<f64> {
    let values: Vec<f64> = runs
        .iter()
        .filter(|r| r.report.scenario == scenario && r.report.target == target.name())
        .filter_map(|r| f(&r.report))
        .collect();
    median(&values)
}

/// A figure of each round, by round.
type ByRound = BTreeMap<usize, f64>;

/// `f` of the run of one scenario and target in each round, by round.
fn per_round(
    runs: &[Run],
    scenario: &str,
    target: Target,
    f: impl Fn(&Report) -> Option<f64>,
) -> ByRound {
    runs.iter()
        .filter(|r| r.report.scenario == scenario && r.report.target == target.name())
        .filter_map(|r| Some((r.round, f(&r.report)?)))
        .collect()
}

/// `a / b` in each round both ran, in round order.
fn paired(a: &ByRound, b: &ByRound) -> Vec<f64> {
    a.iter().filter_map(|(round, x)| ratio(Some(*x), b.get(round).copied())).collect()
}

/// How much one target's figures move from round to round, and the ratios
/// taken within each round: a difference between two medians smaller than
/// a target's own spread is not a finding.
fn noise(md: &mut String, runs: &[Run]) {
    use Target::{Homeroom as H, Plain as P, Rules};
    let mut w = |line: String| {
        md.push_str(&line);
        md.push('\n');
    };
    let moderate_p99 = |t| per_round(runs, "moderate", t, |r| Some(r.latency_ms.p99));
    let connect_cpu = |t| per_round(runs, "moderate", t, |r| r.connect_cpu_ms);
    let list = |v: &mut dyn Iterator<Item = f64>, d: usize| {
        v.map(|x| format!("{x:.d$}")).collect::<Vec<_>>().join(" · ")
    };
    w("## Noise: the same target from round to round".into());
    w(String::new());
    w("Each round runs every target once, minutes apart; the machine's speed drifts between rounds and between runs of `bench/run` (compare a baseline's figures across versions of this file). *Spread* is a target's largest round over its smallest. A ratio taken within each round compares runs minutes apart; its median over the rounds is the steadier figure.".into());
    w(String::new());
    w("| measure | target | each round | spread |".into());
    w("|---|---|---|---:|".into());
    let all = |f: &dyn Fn(Target) -> ByRound| Target::ALL.map(|t| (t, f(t)));
    let measures = [
        ("moderate p99", 1, all(&moderate_p99)),
        ("runtime CPU per connect", 2, all(&connect_cpu)),
    ];
    for (name, d, by_target) in &measures {
        for (t, v) in by_target {
            let lo = v.values().copied().fold(f64::INFINITY, f64::min);
            let hi = v.values().copied().fold(0.0, f64::max);
            let spread = if v.is_empty() { None } else { ratio(Some(hi), Some(lo)) };
            w(format!(
                "| {name} (ms) | {} | {} | {} |",
                t.name(),
                list(&mut v.values().copied(), *d),
                num(spread, 2)
            ));
        }
    }
    w(String::new());
    w("| measure | ratio | each round | median |".into());
    w("|---|---|---|---:|".into());
    for (name, _, by_target) in &measures {
        let of = |t: Target| by_target.iter().find(|(x, _)| *x == t).map(|(_, v)| v);
        for (label, a, b) in [("homeroom / plain", H, P), ("chat rules / open", Rules, H)] {
            let (Some(a), Some(b)) = (of(a), of(b)) else { continue };
            let r = paired(a, b);
            w(format!(
                "| {name} | {label} | {} | {} |",
                list(&mut r.iter().copied(), 2),
                num(median(&r), 2)
            ));
        }
    }
    w(String::new());
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn mark(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "–",
    }
}

fn markdown(cfg: &SuiteConfig, runs: &[Run], facts: &Facts) -> String {
    use Target::{Homeroom as H, Partyserver as S, Plain as P, PlainDurable as D};
    let mut md = String::new();
    let m = &facts.machine;
    let w = |md: &mut String, line: String| {
        md.push_str(&line);
        md.push('\n');
    };
    w(&mut md, "# Benchmark results".into());
    w(&mut md, String::new());
    w(&mut md, format!(
        "Written by `bench/run` on {} ({}): {} rounds of fan-out and moderate load, each round every target in turn (the order rotates), each in a fresh `wrangler dev`; then {} + {} homeroom storm rounds. Figures are medians over the rounds; every run is listed at the end. Do not edit by hand: run `bench/run` again.",
        facts.date,
        facts.minutes.map_or("time not recorded".into(), |m| format!("{m:.1} minutes")),
        cfg.rounds,
        cfg.storm_rounds,
        cfg.live_storm_rounds
    ));
    w(&mut md, String::new());
    w(&mut md, "## Machine and settings".into());
    w(&mut md, String::new());
    w(&mut md, format!(
        "- Machine: {} × {}, {:.1} GiB memory, Linux {}. The load generator runs on the same machine and shares its cores with the runtime.",
        m.cpus, m.cpu_model, m.memory_gib, m.kernel
    ));
    w(&mut md, format!(
        "- Runtime: wrangler {} (workerd {}), Node {}, compatibility date 2026-04-01 for all four; `wrangler dev --ip 127.0.0.1 --log-level warn`, persistence in a fresh directory under {}.",
        m.wrangler, m.workerd, m.node, crate::runtime::state_base().display()
    ));
    if cfg.direct {
        w(&mut md, "- Clients connect to the port of the workerd process that runs the Worker and its Durable Objects, around the second workerd that `wrangler dev` puts in front as a dev proxy (it relays every request and every WebSocket frame, and took 0.3-0.6 of the 2 cores in fan-out). Same Worker, same objects, same `MF-CF-Blob` handling; `bench/run --via-proxy` measures through the public port instead.".into());
    } else {
        w(&mut md, "- Clients connect to `wrangler dev`'s public port, through its proxy workerd (it relays every request and every WebSocket frame).".into());
    }
    w(&mut md, format!(
        "- Targets: **homeroom** (this repository's Worker and Room Durable Object, release Wasm); **plain**: the smallest hibernating Durable Object room in JavaScript ([`baselines/plain`](baselines/plain/src/index.js): `acceptWebSocket`, on message send the text to every socket of `getWebSockets()`); **plain + SQLite**: the same room writing each message to SQLite (one `INSERT`) before it sends ([`baselines/plain-durable`](baselines/plain-durable/src/index.js)): the runtime's own limit for a room that stores before it shows, as homeroom must; **partyserver** {} ([`baselines/partyserver`](baselines/partyserver/src/index.js): a hibernating `Server` whose `onMessage` calls `broadcast`).",
        m.partyserver
    ));
    w(&mut md, "- Every target is started with `--var ANONYMOUS_DEV:true --var RATE_PER_SEC:100000 --var RATE_BURST:100000 --var USER_RATE_PER_SEC:100000 --var USER_RATE_BURST:100000 --var LOG_CONNECTIONS:off` and an `ADMIN_KEY` (each homeroom run reads its home's `/stats` counters): homeroom's per-connection and per-user rate limits (default 20 frames/s, burst 50; 40 and 100 per user) would otherwise refuse a load test's publishers, and its per-connection log lines are off because the baselines write none (locally each line also crosses into wrangler's node process: about 1.3 ms of runtime CPU per connect here, which a deployment does not pay); the baselines ignore the variables.".into());
    if cfg.homeroom_vars.is_empty() {
        w(&mut md, "- homeroom runs with its defaults otherwise (e.g. `BATCH_ABOVE` 5000 frames/s, `OUTBOUND_BUDGET` 50000 frames/s, `BATCH_WINDOW_MS` 50, `STORM_RESUMES_PER_SEC` 50).".into());
    } else {
        let extra: Vec<String> =
            cfg.homeroom_vars.iter().map(|(n, v)| format!("`{n}={v}`")).collect();
        w(&mut md, format!("- homeroom also gets {} (not its defaults).", extra.join(", ")));
    }
    w(&mut md, format!(
        "- Load generator: `homeroom-bench` ({}; tokio, tokio-tungstenite, TCP_NODELAY), clients spread over four regions with `MF-CF-Blob` (SYD/OC, LHR/EU, IAD/NA, NRT/AS), payload `{{\"t\",\"p\",\"n\",\"pad\"}}` with 64 bytes of padding.",
        m.rustc
    ));
    let fo = &cfg.fanout;
    let mo = &cfg.moderate;
    let st = &cfg.storm;
    let windows: Vec<String> = cfg.fanout_windows.iter().map(|w| w.to_string()).collect();
    let rate = match mo.publish {
        Publish::Rate(r) => r,
        Publish::FlatOut { .. } => 0.0,
    };
    let storm_rate = match st.publish {
        Publish::Rate(r) => r,
        Publish::FlatOut { .. } => 0.0,
    };
    w(&mut md, format!(
        "- Fan-out: {} clients, {} of them publishing flat out with a window of {} publishes in flight each (one run per window; a publish is done when its own broadcast comes back), {:.0} s warm-up, {:.0} s measured. Moderate: {} clients, {rate} publishes/s from {} publishers taking turns (evenly spaced, one publish every {:.0} ms), {:.0} s measured; *in phase*: the same with the publishers publishing at the same instants (a burst of {} publishes every {:.0} ms). Storm: {} clients, {storm_rate} publishes/s from {} publishers, {:.0} s steady, then every socket reset at once.",
        fo.clients, fo.publishers, windows.join(" or "), fo.warmup.as_secs_f64(), fo.duration.as_secs_f64(),
        mo.clients, mo.publishers, 1000.0 / rate.max(1e-3), mo.duration.as_secs_f64(),
        mo.publishers, 1000.0 * mo.publishers as f64 / rate.max(1e-3),
        st.clients, st.publishers, cfg.storm_timing.pre.as_secs_f64()
    ));
    w(&mut md, String::new());

    // Main table.
    let fan: Vec<String> = cfg.fanout_windows.iter().map(|w| format!("fanout-w{w}")).collect();
    let p50 = |t| med(runs, "moderate", t, |r| Some(r.latency_ms.p50));
    let p99 = |t| med(runs, "moderate", t, |r| Some(r.latency_ms.p99));
    let c50 = |t| med(runs, "moderate", t, |r| Some(r.connect_ms.p50));
    let c95 = |t| med(runs, "moderate", t, |r| Some(r.connect_ms.p95));
    let ccpu = |t| med(runs, "moderate", t, |r| r.connect_cpu_ms);
    let best = |t| {
        fan.iter()
            .filter_map(|f| med(runs, f, t, |r| Some(r.deliveries_per_sec)))
            .max_by(|a, b| a.total_cmp(b))
    };
    w(&mut md, "## Results (medians)".into());
    w(&mut md, String::new());
    w(&mut md, "| measure | homeroom | plain JS | plain JS + SQLite | partyserver | homeroom / plain | homeroom / plain + SQLite | homeroom / partyserver | target | met |".into());
    w(&mut md, "|---|---:|---:|---:|---:|---:|---:|---:|---|---|".into());
    let row = |md: &mut String,
               name: &str,
               f: &dyn Fn(Target) -> Option<f64>,
               d: usize,
               target: &str,
               met: Option<bool>| {
        // Ratios of CPU shares or of the background say nothing.
        let ratios = !name.contains("CPU during") && !name.starts_with("anything else");
        let r = |a, b| if ratios { num(ratio(a, b), 2) } else { "–".into() };
        w(
            md,
            format!(
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {target} | {} |",
                num(f(H), d),
                num(f(P), d),
                num(f(D), d),
                num(f(S), d),
                r(f(H), f(P)),
                r(f(H), f(D)),
                r(f(H), f(S)),
                mark(met)
            ),
        );
    };
    let fan_met = match (ratio(best(H), best(S)), ratio(best(H), best(P))) {
        (Some(s), Some(p)) => Some(s >= 1.5 && p >= 1.0),
        _ => None,
    };
    row(
        &mut md,
        &format!("**fan-out deliveries/s ({} clients), each target's best window**", fo.clients),
        &best,
        0,
        "≥ 1.5× partyserver and ≥ 1.0× plain",
        fan_met,
    );
    for (f, window) in fan.iter().zip(&cfg.fanout_windows) {
        let dps = |t| med(runs, f, t, |r| Some(r.deliveries_per_sec));
        let scpu = |t| med(runs, f, t, |r| r.server_cpu);
        row(&mut md, &format!("fan-out deliveries/s, window {window}"), &dps, 0, "", None);
        let per_core = |t| ratio(dps(t), scpu(t));
        row(
            &mut md,
            &format!("fan-out deliveries per runtime CPU-second, window {window}"),
            &per_core,
            0,
            "",
            None,
        );
        let p99 = |t| med(runs, f, t, |r| Some(r.latency_ms.p99));
        row(
            &mut md,
            &format!("fan-out publish→deliver p99 (ms), window {window}"),
            &p99,
            1,
            "",
            None,
        );
        row(
            &mut md,
            &format!("runtime CPU during fan-out (cores), window {window}"),
            &scpu,
            2,
            "",
            None,
        );
        let lcpu = |t| med(runs, f, t, |r| Some(r.loadgen_cpu));
        row(
            &mut md,
            &format!("load generator CPU during fan-out (cores), window {window}"),
            &lcpu,
            2,
            "",
            None,
        );
        let ocpu = |t| med(runs, f, t, |r| Some(r.other_cpu));
        row(
            &mut md,
            &format!("anything else on the machine (cores), window {window}"),
            &ocpu,
            2,
            "≈ 0 for a clean run",
            None,
        );
    }
    row(
        &mut md,
        &format!("moderate publish→deliver p50 (ms), {rate}/s into {}", mo.clients),
        &p50,
        1,
        "",
        None,
    );
    let p99_met = ratio(p99(H), p99(P)).map(|r| r <= 1.2);
    row(
        &mut md,
        &format!("moderate publish→deliver p99 (ms), {rate}/s into {}", mo.clients),
        &p99,
        1,
        "≤ 1.2× plain",
        p99_met,
    );
    let first = |t| med(runs, "moderate", t, |r| r.first_receiver_ms.map(|f| f.p50));
    let last = |t| med(runs, "moderate", t, |r| r.last_receiver_ms.map(|l| l.p50));
    let first_name = "moderate, per publish: first receiver p50 (ms), until the broadcast starts";
    row(&mut md, first_name, &first, 1, "", None);
    row(&mut md, "moderate, per publish: last receiver p50 (ms)", &last, 1, "", None);
    let bursts = |t| med(runs, "moderate-in-phase", t, |r| Some(r.latency_ms.p99));
    let bursts_name = format!(
        "moderate in phase publish→deliver p99 (ms), {} at once every {:.0} ms",
        mo.publishers,
        1000.0 * mo.publishers as f64 / rate.max(1e-3)
    );
    row(&mut md, &bursts_name, &bursts, 1, "", None);
    row(&mut md, "connect p50 (ms), TCP + upgrade", &c50, 1, "", None);
    row(&mut md, "connect p95 (ms), TCP + upgrade", &c95, 1, "", None);
    row(&mut md, "runtime CPU per connect (ms)", &ccpu, 2, "", None);
    let welcome50 = med(runs, "moderate", H, |r| r.welcome_ms.map(|w| w.p50));
    let welcome95 = med(runs, "moderate", H, |r| r.welcome_ms.map(|w| w.p95));
    w(&mut md, String::new());
    w(&mut md, format!(
        "homeroom's connect until its `welcome` frame: p50 {} ms, p95 {} ms (the baselines send nothing on connect). Correctness in these runs: {}.",
        num(welcome50, 1), num(welcome95, 1), correctness(runs, &["moderate", "fanout-w"])
    ));
    w(&mut md, String::new());

    // Hosting rules: the same room with the chat example's rules.
    let rules = Target::Rules;
    w(&mut md, "## Hosting rules".into());
    w(&mut md, String::new());
    w(&mut md, "The same Worker, its `chat` kind: rules ([`examples/chat`](../examples/chat/src/lib.rs)) that parse every publish, check its `text` and count it against a per-user quota in the room (set high enough that the load is never refused, `CHAT_QUOTA` 10⁹), against the open rules at `/rooms/...`. Same runs, same rounds.".into());
    w(&mut md, String::new());
    w(&mut md, "| measure | open rules | chat rules | chat / open | target | met |".into());
    w(&mut md, "|---|---:|---:|---:|---|---|".into());
    let pair = |md: &mut String,
                name: &str,
                f: &dyn Fn(Target) -> Option<f64>,
                d: usize,
                target: &str,
                met: Option<bool>| {
        w(
            md,
            format!(
                "| {name} | {} | {} | {} | {target} | {} |",
                num(f(H), d),
                num(f(rules), d),
                num(ratio(f(rules), f(H)), 2),
                mark(met)
            ),
        );
    };
    pair(&mut md, &format!("moderate p99 (ms), {rate}/s into {}", mo.clients), &p99, 1, "", None);
    // The cost of the rules: the two run back to back in every round, so
    // their ratio in each round is free of the machine's drift between
    // rounds (see "Noise" below); its median is the figure held to the bar.
    let p99_of = |t| per_round(runs, "moderate", t, |r| Some(r.latency_ms.p99));
    let rules_paired = median(&paired(&p99_of(rules), &p99_of(H)));
    w(
        &mut md,
        format!(
            "| moderate p99, chat / open in each round (median of the rounds' ratios) | – | – | {} | ≤ 1.10 | {} |",
            num(rules_paired, 2),
            mark(rules_paired.map(|r| r <= 1.10))
        ),
    );
    pair(&mut md, "moderate p50 (ms)", &p50, 1, "", None);
    pair(&mut md, "moderate, first receiver p50 (ms)", &first, 1, "", None);
    pair(
        &mut md,
        &format!("fan-out deliveries/s ({} clients), best window", fo.clients),
        &best,
        0,
        "",
        None,
    );
    let fan_cpu = |t| {
        fan.iter()
            .filter_map(|f| {
                let dps = med(runs, f, t, |r| Some(r.deliveries_per_sec))?;
                let cpu = med(runs, f, t, |r| r.server_cpu)?;
                Some(dps / cpu)
            })
            .max_by(|a, b| a.total_cmp(b))
    };
    pair(&mut md, "fan-out deliveries per runtime CPU-second, best window", &fan_cpu, 0, "", None);
    pair(&mut md, "runtime CPU per connect (ms)", &ccpu, 2, "", None);
    w(&mut md, String::new());
    w(
        &mut md,
        format!(
            "Correctness of the rules runs: {}.",
            correctness_of(runs, rules, &["moderate", "fanout-w"])
        ),
    );
    w(&mut md, String::new());
    relays(&mut md, cfg, runs);
    distance(&mut md, cfg, runs);
    crate::split::markdown(&mut md, cfg, runs);
    noise(&mut md, runs);

    // Storm.
    w(&mut md, format!("## Reconnect storm (homeroom, {} clients)", st.clients));
    w(&mut md, String::new());
    w(&mut md, format!(
        "The baselines have no resume, so only homeroom runs it. After {:.0} s of steady state with {storm_rate} publishes/s, sockets are reset at once (TCP RST, no close frame: the server sees 1006); each client waits a full-jitter delay random(0, min(20 s, 2 s × 2^attempt)) as the browser client does and reconnects with `since`/`epoch`. *storm*: every socket, publishers included (a publish not yet acked is sent again with the same id once back). *storm-live*: every socket but the {} publishers', so messages keep coming during the storm and resuming clients have a replay to apply. Every receiver checks that `seq` is exactly +1 across the replay and the live messages, and that each publish arrives once. *All back*: first drop → the last client has its welcome and its replay applied. *Settle*: first drop → all back and publish→deliver p99 under the normal bound max(2 × pre-storm p99, pre-storm p99 + 25 ms) in every 250 ms bucket from then on (seen calm for at least 1 s; \"never\" when it was not within the run, {:.0} s after all were back).",
        cfg.storm_timing.pre.as_secs_f64(), st.publishers, cfg.storm_timing.tail.as_secs_f64()
    ));
    w(&mut md, String::new());
    w(&mut md, "| variant | round | dropped | resumed | resumed without gap | gaps | duplicates | resyncs | replayed | reconnect p50 / p95 (ms) | pre-storm p99 (ms) | storm p99 / max (ms) | all back (s) | settle (s) |".into());
    w(&mut md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|".into());
    let variants = ["storm", "storm-live", "storm-relayed", "storm-live-relayed"];
    for r in runs.iter().filter(|r| variants.contains(&r.report.scenario.as_str())) {
        let rep = &r.report;
        let never = |v: Option<f64>| v.map_or("never".into(), |v| format!("{v:.2}"));
        if let Some(s) = &rep.storm {
            w(&mut md, format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} / {:.0} | {:.1} | {:.0} / {:.0} | {} | {} |",
                rep.scenario, r.round, s.dropped, s.resumed, s.resumed_without_gap, rep.gaps, rep.duplicates,
                rep.resyncs, s.replayed, s.reconnect_ms.p50, s.reconnect_ms.p95, s.pre_p99_ms,
                s.storm_latency_ms.p99, s.storm_latency_ms.max, never(s.all_back_s), never(s.settle_s)
            ));
        } else {
            w(
                &mut md,
                format!(
                    "| {} | {} | – | – | – | {} | {} | {} | – | – | – | – | – | – |",
                    rep.scenario, r.round, rep.gaps, rep.duplicates, rep.resyncs
                ),
            );
        }
    }
    w(&mut md, String::new());
    for variant in variants {
        let storms: Vec<&Run> = runs.iter().filter(|r| r.report.scenario == variant).collect();
        if storms.is_empty() {
            continue;
        }
        let clean = storms.iter().all(|r| {
            r.report.problems.iter().all(|p| p.contains("normal"))
                && r.report
                    .storm
                    .as_ref()
                    .is_some_and(|s| s.resumed_without_gap == s.dropped && s.dropped > 0)
                && r.report.gaps == 0
                && r.report.duplicates == 0
        });
        let settle = median_or_never(
            storms.iter().map(|r| r.report.storm.as_ref().and_then(|s| s.settle_s)).collect(),
        );
        let back = median_or_never(
            storms.iter().map(|r| r.report.storm.as_ref().and_then(|s| s.all_back_s)).collect(),
        );
        let dropped = storms
            .iter()
            .filter_map(|r| r.report.storm.as_ref())
            .map(|s| s.dropped)
            .max()
            .unwrap_or(0);
        w(&mut md, format!(
            "- *{variant}*: all {dropped} dropped clients resumed with zero gaps and zero duplicates in every round: {}. All back, median: {} s. Settle, median: {} s (target under 10 s: {}).",
            mark(Some(clean)),
            back.map_or("never".into(), |v| format!("{v:.2}")),
            settle.map_or("never".into(), |v| format!("{v:.2}")),
            mark(Some(settle.is_some_and(|s| s < 10.0)))
        ));
    }
    w(&mut md, String::new());

    // Memory.
    let a = &facts.attachment;
    w(&mut md, "## Memory and size".into());
    w(&mut md, String::new());
    w(&mut md, format!(
        "- Per-connection attachment: **{} bytes** for a typical connection (target under 512: {}). Measured by serializing a `homeroom::room::Peer` exactly as the Durable Object stores it (`serde_json::to_string(&peer)` in `src/durable/sockets.rs`) in `homeroom-bench` ([`src/machine.rs`](src/machine.rs), `attachment()`): session `s-` + 20 characters as the browser client makes them, user = session (anonymous mode), region `OC`, 13-digit millisecond times, empty presence state. With a small presence state (`{{\"name\":\"Ada Lovelace\",\"color\":\"#e91e63\"}}`): {} bytes; with every name at its limit (64-character session and user, 32-character region): {} bytes; the presence state itself may add up to 1 KiB. Example: `{}`.",
        a.typical, mark(Some(a.typical < 512)), a.with_state, a.longest_names, a.example
    ));
    match facts.wasm {
        Some((raw, gz)) => w(&mut md, format!(
            "- Wasm (`worker/build/index_bg.wasm`, release): {raw} bytes, **{gz} bytes gzip -9** ({:.0} KiB).",
            gz as f64 / 1024.0
        )),
        None => w(&mut md, "- Wasm: worker/build/index_bg.wasm not found.".into()),
    }
    w(&mut md, String::new());

    // Every run.
    w(&mut md, "## Every run".into());
    w(&mut md, String::new());
    w(&mut md, "| round | scenario | target | connected | deliveries/s | p50 (ms) | p99 (ms) | max (ms) | publishes per publisher | connect p50 / p95 (ms) | runtime CPU | load-gen CPU | other CPU | gaps | dups | complete | problems |".into());
    w(
        &mut md,
        "|---:|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|".into(),
    );
    for r in runs {
        let rep = &r.report;
        w(&mut md, format!(
            "| {} | {} | {} | {}/{} | {:.0} | {:.1} | {:.1} | {:.1} | {} | {:.1} / {:.1} | {} | {:.2} | {:.2} | {} | {} | {}/{} | {} |",
            r.round, rep.scenario, rep.target, rep.connected, rep.clients, rep.deliveries_per_sec,
            rep.latency_ms.p50, rep.latency_ms.p99, rep.latency_ms.max,
            rep.per_publisher.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" "),
            rep.connect_ms.p50, rep.connect_ms.p95,
            num(rep.server_cpu, 2), rep.loadgen_cpu, rep.other_cpu, rep.gaps, rep.duplicates, rep.complete, rep.connected,
            if rep.problems.is_empty() { "none".to_owned() } else { rep.problems.join("; ").replace('|', "/") }
        ));
    }
    w(&mut md, String::new());
    w(&mut md, "## How it is measured".into());
    w(&mut md, String::new());
    for line in [
        "- *Deliveries/s*: bench messages received by all clients (publishers included: every target echoes to the sender) while the window is open, divided by its length. homeroom's count is of `message` frames after flattening `batch` frames; the baselines' of broadcast texts.",
        "- *Publish→deliver latency*: the publisher writes its clock (µs since the run's start, one clock for every client in the process) into the payload; each receiver subtracts it on arrival. Nearest-rank percentiles over every delivery in the window. Replayed messages after a resume are not latency samples.",
        "- *First / last receiver* (runs at a rate): per publish, the smallest and the largest latency over its receivers, over the publishes every receiver got inside the window. The first is the time until the broadcast starts (the hop into the runtime, the room's own work, the wait for storage); last − first is the broadcast itself.",
        "- *Publishers taking turns*: publisher i of P first publishes i/P of an interval after the others, so 20/s arrive one every 50 ms. *In phase*, all publish at the same instants: the runtime gets a burst of P publishes, and the last of them waits for the broadcasts of the others.",
        "- *Connect*: TCP connect + WebSocket upgrade, the first connect of every client, 32 in flight at once (64 for the storm).",
        "- *CPU*: user + system seconds of the runtime's process group (node and workerd) and of the load generator over the window, divided by its length (2.00 = both cores). *Other* is the rest of the machine's busy time (/proc/stat) in the same window: other work on the machine (builds, tests) when it is not near 0. *Per connect*: the runtime's CPU from the start of a run until every client is in, divided by the clients.",
        "- *Correctness* (every run): homeroom receivers check `seq` strictly +1 and that no publish is delivered twice; baseline receivers check each publisher's counter strictly +1. After publishing stops the run waits until every receiver has every publish, and homeroom publishers check that every publish was acked.",
        "- *Publishes per publisher* shows whether the runtime served the publishers evenly. Under saturation every target often processes one publisher's socket while the other publishers' frames wait until it goes quiet (e.g. `64 64 2833 64`: three publishers never got their first 64 publishes back during the window; their messages are sequenced and delivered in the drain, so correctness holds). Whether a run falls into that mode changes its deliveries/s a lot so look at the per-run rows, not only the medians.",
        "- Fan-out numbers swing widely between runs of the same target (the mode above; the runtime, the load generator and the kernel share 2 cores; batching in socket buffers changes with queue depth), hence 5 rounds and medians.",
        "- The runtime is `wrangler dev` (workerd on one machine with the load generator), not Cloudflare's network: absolute numbers are this machine's, the ratios are the point.",
    ] {
        w(&mut md, line.into());
    }
    md
}

/// The median where `None` ("never") counts as larger than any value.
/// The same room through relays (`RELAY_ABOVE=0`: every client through the relay of its
/// region, four relays), beside the direct room in the same rounds and storms.
fn relays(md: &mut String, cfg: &SuiteConfig, runs: &[Run]) {
    use Target::{Homeroom as H, Relayed as L};
    let mut w = |line: String| {
        md.push_str(&line);
        md.push('\n');
    };
    let mo = &cfg.moderate;
    w("## Relays".into());
    w(String::new());
    w(format!(
        "The same Worker with `RELAY_ABOVE=0`: each of the {} clients connects through the relay of its region (four relays, one per region of the load generator), which holds its socket and speaks for it to the home over one link; the home sends each frame once per relay. Locally every object of the Worker runs on one thread, so this measures what a relay costs here (an extra hop and its CPU on the same core), not the parallel speed-up relays bring where each object has its own thread (bench/README.md, \"Relays\").",
        mo.clients
    ));
    w(String::new());
    w("| measure | direct | through relays | relays / direct |".into());
    w("|---|---:|---:|---:|".into());
    let fan: Vec<String> = cfg.fanout_windows.iter().map(|w| format!("fanout-w{w}")).collect();
    let best = |t| {
        fan.iter()
            .filter_map(|f| med(runs, f, t, |r| Some(r.deliveries_per_sec)))
            .max_by(|a, b| a.total_cmp(b))
    };
    type Measure<'a> = Box<dyn Fn(Target) -> Option<f64> + 'a>;
    let rows: Vec<(&str, Measure, usize)> = vec![
        (
            "moderate publish→deliver p50 (ms)",
            Box::new(|t| med(runs, "moderate", t, |r| Some(r.latency_ms.p50))),
            1,
        ),
        (
            "moderate publish→deliver p99 (ms)",
            Box::new(|t| med(runs, "moderate", t, |r| Some(r.latency_ms.p99))),
            1,
        ),
        ("fan-out deliveries/s, best window", Box::new(best), 0),
        (
            "runtime CPU per connect (ms)",
            Box::new(|t| med(runs, "moderate", t, |r| r.connect_cpu_ms)),
            2,
        ),
        (
            "connect until welcome p50 (ms)",
            Box::new(|t| med(runs, "moderate", t, |r| r.welcome_ms.map(|w| w.p50))),
            1,
        ),
        (
            "home texts out per durable message, moderate (sockets + link messages)",
            Box::new(|t| med(runs, "moderate", t, |r| r.home_io.and_then(|h| h.out_per_message()))),
            2,
        ),
    ];
    for (name, f, d) in &rows {
        w(format!(
            "| {name} | {} | {} | {} |",
            num(f(H), *d),
            num(f(L), *d),
            num(ratio(f(L), f(H)), 2)
        ));
    }
    let settle = |scenario: &str| {
        median_or_never(
            runs.iter()
                .filter(|r| r.report.scenario == scenario)
                .map(|r| r.report.storm.as_ref().and_then(|s| s.settle_s))
                .collect(),
        )
    };
    let (sd, sr) = (settle("storm"), settle("storm-relayed"));
    w(format!(
        "| storm settle (s), {} clients | {} | {} | {} |",
        cfg.storm.clients,
        num(sd, 2),
        num(sr, 2),
        num(ratio(sr, sd), 2)
    ));
    // The storm's rows: its members before the drop, then the drop until all are back.
    let storm = |t: Target, f: &dyn Fn(&Report) -> Option<f64>| {
        med(runs, if t == L { "storm-relayed" } else { "storm" }, t, f)
    };
    let out = |r: &Report| r.home_io.and_then(|h| h.out_per_message());
    let (od, or) = (storm(H, &out), storm(L, &out));
    w(format!(
        "| home texts out per durable message, {} members before the storm | {} | {} | {} |",
        cfg.storm.clients,
        num(od, 2),
        num(or, 2),
        num(ratio(or, od), 2)
    ));
    let link_in = |r: &Report| {
        let dropped = r.storm.as_ref()?.dropped.max(1) as f64;
        r.home_io_storm.map(|h| h.link_in as f64 / dropped)
    };
    w(format!(
        "| link messages into the home per resuming member, storm (joins batched by the relays) | — | {} | — |",
        num(storm(L, &link_in), 3)
    ));
    // Through relays a resume's catch-up comes from its relay's tail: the home names it.
    let per_member = |f: fn(&HomeIo) -> u64| {
        move |r: &Report| {
            let dropped = r.storm.as_ref()?.dropped.max(1) as f64;
            r.home_io_storm.map(|h| f(&h) as f64 / dropped)
        }
    };
    // Through relays every welcome is the relay's to make: the home sends the session's part.
    let made = per_member(|h| h.welcomes);
    let (wd, wr) = (storm(H, &made), storm(L, &made));
    w(format!(
        "| welcomes the home made whole per resuming member, storm (relays make their own) | {} | {} | {} |",
        num(wd, 2),
        num(wr, 2),
        num(ratio(wr, wd), 3)
    ));
    // The live storm (its publishers stay and publish on): every resume has a catch-up.
    let live = |t: Target, f: &dyn Fn(&Report) -> Option<f64>| {
        med(runs, if t == L { "storm-live-relayed" } else { "storm-live" }, t, f)
    };
    let frames = per_member(|h| h.catch_up_frames);
    let (fd, fr) = (live(H, &frames), live(L, &frames));
    w(format!(
        "| catch-up frames the home sent per resuming member, live storm | {} | {} | {} |",
        num(fd, 2),
        num(fr, 2),
        num(ratio(fr, fd), 3)
    ));
    w(format!(
        "| catch-ups from a relay's own tail per resuming member, live storm | — | {} | — |",
        num(live(L, &per_member(|h| h.tail_replays)), 3)
    ));
    let (ld, lr) = (settle("storm-live"), settle("storm-live-relayed"));
    w(format!(
        "| live storm settle (s), {} clients | {} | {} | {} |",
        cfg.storm.clients,
        num(ld, 2),
        num(lr, 2),
        num(ratio(lr, ld), 2)
    ));
    w(String::new());
    w(format!(
        "Correctness through relays: {}.",
        correctness_of(runs, L, &["moderate", "fanout-w", "storm-relayed", "storm-live-relayed"])
    ));
    w(String::new());
}

/// How a shape's publishers publish, in words.
pub(crate) fn publishing(publish: Publish) -> String {
    match publish {
        Publish::Rate(r) => format!("{r} messages/s in all"),
        Publish::FlatOut { window } => format!("flat out (window {window})"),
    }
}

/// The distance rows' section: the same members an ocean from the home, direct and through
/// relays.
fn distance(md: &mut String, cfg: &SuiteConfig, runs: &[Run]) {
    use Target::{Homeroom as H, Relayed as L};
    if !runs.iter().any(|r| r.report.scenario == "wan") {
        return; // a suite without its distance rounds (`--wan-rounds 0`, or saved before them)
    }
    let mut w = |line: String| {
        md.push_str(&line);
        md.push('\n');
    };
    w("## Distance: members an ocean from the home".into());
    w(String::new());
    w(format!(
        "{} clients in one region, {} ms one way from the room's home: direct, every frame crosses that distance both ways (a delaying TCP proxy in front of the runtime, `bench/src/distance.rs`); through relays, the members are near their region's relay and only its link crosses (`LINK_DELAY_MS={}`). {} of them move cursors at {}/s each while {} publishers send {}; {} rounds, medians. Goals (issue 19): a signal between two members of one region at most 0.1× the direct room's p50; a durable message at most 1.1×.",
        cfg.wan.clients,
        cfg.wan_ms,
        cfg.wan_ms,
        cfg.wan_signalers,
        cfg.wan_signal_rate,
        cfg.wan.publishers,
        publishing(cfg.wan.publish),
        cfg.wan_rounds
    ));
    w(String::new());
    w("| measure | direct | through relays | relays / direct | goal |".into());
    w("|---|---:|---:|---:|---:|".into());
    type Measure<'a> = Box<dyn Fn(Target) -> Option<f64> + 'a>;
    let rows: Vec<(&str, Measure, Option<f64>)> = vec![
        (
            "signal between two members of the region, p50 (ms)",
            Box::new(|t| med(runs, "wan", t, |r| r.signal_ms.map(|p| p.p50))),
            Some(0.1),
        ),
        (
            "signal between two members of the region, p99 (ms)",
            Box::new(|t| med(runs, "wan", t, |r| r.signal_ms.map(|p| p.p99))),
            None,
        ),
        (
            "durable message publish→deliver p50 (ms)",
            Box::new(|t| med(runs, "wan", t, |r| Some(r.latency_ms.p50))),
            Some(1.1),
        ),
        (
            "durable message publish→deliver p99 (ms)",
            Box::new(|t| med(runs, "wan", t, |r| Some(r.latency_ms.p99))),
            None,
        ),
    ];
    for (name, f, goal) in &rows {
        let r = ratio(f(L), f(H));
        let verdict = match goal {
            Some(g) => format!("≤ {g:.2}× {}", mark(r.map(|r| r <= *g))),
            None => "—".into(),
        };
        w(format!("| {name} | {} | {} | {} | {verdict} |", num(f(H), 1), num(f(L), 1), num(r, 2)));
    }
    w(String::new());
    w(format!("Correctness at a distance: {}.", correctness(runs, &["wan"])));
    w(String::new());
}

fn median_or_never(mut values: Vec<Option<f64>>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(|a, b| match (a, b) {
        (Some(a), Some(b)) => a.total_cmp(b),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        Some((values[n / 2 - 1]? + values[n / 2]?) / 2.0)
    }
}

/// The problems of the runs whose scenario starts with one of `scenarios`.
/// [`correctness`] of one target's runs.
pub(crate) fn correctness_of(runs: &[Run], target: Target, scenarios: &[&str]) -> String {
    let mine: Vec<Run> =
        runs.iter().filter(|r| r.report.target == target.name()).cloned().collect();
    correctness(&mine, scenarios)
}

fn correctness(runs: &[Run], scenarios: &[&str]) -> String {
    let bad: Vec<String> = runs
        .iter()
        .filter(|r| {
            let named = scenarios.iter().any(|s| r.report.scenario.starts_with(s));
            named && !r.report.problems.is_empty()
        })
        .map(|r| {
            format!(
                "round {} {} {}: {}",
                r.round,
                r.report.scenario,
                r.report.target,
                r.report.problems.join("; ")
            )
        })
        .collect();
    if bad.is_empty() {
        "no gaps, no duplicates, every publish delivered to every client (and acked, homeroom) in every run".into()
    } else {
        format!("problems in {} runs: {}", bad.len(), bad.join(" / "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_taken_within_a_round() {
        let run = |round, target: Target, p99| Run {
            round,
            report: Report {
                scenario: "moderate".into(),
                target: target.name().into(),
                latency_ms: crate::stats::Pct { p99, ..Default::default() },
                ..Default::default()
            },
        };
        // The machine slows down in round 2: both targets take twice as
        // long, and the rules cost 10% in every round.
        let runs = [
            run(1, Target::Homeroom, 10.0),
            run(1, Target::Rules, 11.0),
            run(2, Target::Homeroom, 20.0),
            run(2, Target::Rules, 22.0),
            run(3, Target::Rules, 99.0), // its pair is missing: no ratio
        ];
        let p99 = |t| per_round(&runs, "moderate", t, |r| Some(r.latency_ms.p99));
        let r = paired(&p99(Target::Rules), &p99(Target::Homeroom));
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|x| (x - 1.1).abs() < 1e-9), "{r:?}");
    }

    #[test]
    fn medians_with_never() {
        assert_eq!(median_or_never(vec![Some(3.0), None, Some(1.0)]), Some(3.0));
        assert_eq!(median_or_never(vec![None, None, Some(1.0)]), None);
        assert_eq!(median_or_never(vec![Some(2.0), Some(4.0)]), Some(3.0));
        assert_eq!(median_or_never(vec![]), None);
    }

    #[test]
    fn correctness_names_scenarios_by_prefix() {
        let run = |scenario: &str, problems: Vec<String>| Run {
            round: 1,
            report: Report { scenario: scenario.into(), problems, ..Report::default() },
        };
        let clean = vec![run("moderate", vec![]), run("fanout-w4", vec![])];
        assert!(correctness(&clean, &["moderate", "fanout-w"]).starts_with("no gaps"));
        let bad = vec![run("moderate", vec![]), run("fanout-w64", vec!["gaps 3".into()])];
        let said = correctness(&bad, &["moderate", "fanout-w"]);
        assert!(said.contains("fanout-w64") && said.contains("gaps 3"), "{said}");
        assert!(correctness(&bad, &["storm"]).starts_with("no gaps"));
    }

    #[test]
    fn dates() {
        assert_eq!(date_utc(0), "1970-01-01");
        assert_eq!(date_utc(1_764_460_800), "2025-11-30");
    }
}
