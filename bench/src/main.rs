//! homeroom-bench: the command line.
//!
//! ```text
//! homeroom-bench load  --target homeroom|plain|partyserver [--port P] ...   one run
//! homeroom-bench suite [--rounds 5] [--storm-rounds 3] [--live-storm-rounds 2] [--wan-rounds 3]
//!                      [--split-rounds 2]
//!                      [--out bench/RESULTS.md] [--quick] [--via-proxy] [--vars N:v,..]
//! homeroom-bench render --runs target/homeroom-bench/<time> [the suite's flags]
//!                                       RESULTS.md again from a suite's saved runs
//! homeroom-bench attachment                                                 the Peer size
//! ```
//!
//! `load` without `--port` starts its own `wrangler dev` for the target.
//! It prints a human summary, and the JSON report to `--json PATH` (or to
//! stdout with `--json -`). Exit status 1 when the run broke a correctness
//! expectation (gaps, duplicates, missing deliveries or acks, a storm
//! client not resumed).

use std::path::PathBuf;
use std::time::Duration;

use homeroom_bench::args::Args;
use homeroom_bench::runtime::{Runtime, BENCH_VARS};
use homeroom_bench::scenario::{self, Publish, Scenario, Storm};
use homeroom_bench::target::{Region, Target};
use homeroom_bench::{machine, suite};

const USAGE: &str =
    "usage: homeroom-bench load|suite|render|docs|doc-engine|attachment [--flag value ...] (see bench/src/main.rs)";

fn main() {
    let mut argv = std::env::args().skip(1);
    let command = argv.next().unwrap_or_default();
    let args = match Args::parse(argv) {
        Ok(a) => a,
        Err(e) => fail(&e),
    };
    machine::raise_nofile();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    // Interrupted: stop the runtimes this process started, then exit.
    rt.spawn(async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) =
            (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
        else {
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        eprintln!("homeroom-bench: interrupted; stopping the runtimes it started");
        homeroom_bench::runtime::kill_all();
        std::process::exit(130);
    });
    let code = match command.as_str() {
        "load" => rt.block_on(load(&args)),
        "suite" => rt.block_on(suite_cmd(&args)),
        "render" => render_cmd(&args),
        "docs" => rt.block_on(docs_cmd(&args)),
        "doc-engine" => {
            let rows = homeroom_bench::doc_engine::measure();
            println!("{}", homeroom_bench::doc_engine::section(&rows));
            Ok(0)
        }
        "attachment" => {
            let a = machine::attachment();
            println!("{}", serde_json::to_string_pretty(&a).expect("json"));
            Ok(0)
        }
        _ => Err(USAGE.to_owned()),
    };
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => fail(&e),
    }
}

fn fail(message: &str) -> ! {
    eprintln!("homeroom-bench: {message}");
    std::process::exit(2)
}

/// The repository root: `HOMEROOM_ROOT`, else the parent of this crate.
pub fn root() -> PathBuf {
    let root = std::env::var_os("HOMEROOM_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."));
    root.canonicalize().unwrap_or(root)
}

fn secs(args: &Args, name: &str, default: f64) -> Result<Duration, String> {
    Ok(Duration::from_secs_f64(args.get(name, default)?))
}

async fn load(args: &Args) -> Result<i32, String> {
    let target = Target::parse(&args.get_str("target").unwrap_or_else(|| "homeroom".into()))?;
    let seed: u64 = args.get("seed", std::process::id() as u64)?;
    let room = args.get_str("room").unwrap_or_else(|| format!("bench-{seed:x}"));
    let port: Option<u16> =
        args.get_str("port").map(|p| p.parse()).transpose().map_err(|_| "--port")?;
    let mut sc = Scenario::new("load", target, port.unwrap_or(0), &room);
    sc.seed = seed;
    // "name:pgid:port,...": runtimes started by `bench/split`, measured one by one.
    for item in args.get_str("objects").unwrap_or_default().split(',').filter(|i| !i.is_empty()) {
        let parts: Vec<&str> = item.split(':').collect();
        let parsed = match parts[..] {
            [name, pgid, port] => {
                pgid.parse().ok().zip(port.parse().ok()).map(|(g, p)| (name, g, p))
            }
            _ => None,
        };
        let (name, pgid, port) = parsed.ok_or("--objects is name:pgid:port,...")?;
        sc.objects.push((name.to_owned(), pgid, port));
    }
    sc.clients = args.get("clients", 10)?;
    sc.publishers = args.get("publishers", 2)?;
    sc.publish = match args.get_str("flat-out") {
        Some(w) => Publish::FlatOut { window: w.parse().map_err(|_| "--flat-out window")? },
        None => Publish::Rate(args.get("rate", 4.0)?),
    };
    // Publishers at a rate take turns unless told to publish together.
    sc.stagger = !args.get("in-phase", false)?;
    sc.signal_rate = args.get("signal-rate", 0.0)?;
    sc.signalers = args.get("signalers", if sc.signal_rate > 0.0 { 2 } else { 0 })?;
    sc.warmup = secs(args, "warmup", 0.5)?;
    sc.duration = secs(args, "duration", 3.0)?;
    sc.pad = args.get("pad", 64)?;
    sc.pings = args.get("pings", true)?;
    sc.connect_concurrency = args.get("connect-concurrency", 32)?;
    // Every client in one region (one relay holds them all in a relayed room).
    sc.region = args.get_str("region").map(|c| Region::on(&c)).transpose()?;
    let rate: f64 = args.get("connect-rate", 0.0)?;
    sc.connect_rate = (rate > 0.0).then_some(rate);
    if args.get("storm", false)? {
        sc.storm = Some(Storm {
            pre: secs(args, "storm-pre", 2.0)?,
            settle_timeout: secs(args, "settle-timeout", 30.0)?,
            tail: secs(args, "tail", 2.0)?,
            bucket_ms: args.get("bucket-ms", 250)?,
            keep_publishers: args.get("keep-publishers", false)?,
        });
    }
    let json = args.get_str("json");
    // Around wrangler dev's proxy, straight to the Worker's workerd.
    let direct: bool = args.get("direct", false)?;
    // Extra `--var`s for a runtime this command starts: "NAME:value,NAME:value".
    let extra = args.get_str("vars").unwrap_or_default();
    args.finish()?;
    let mut vars: Vec<(String, String)> =
        BENCH_VARS.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    vars.extend(target.vars().iter().map(|(n, v)| (n.to_string(), v.to_string())));
    for pair in extra.split(',').filter(|p| !p.is_empty()) {
        let (n, v) = pair.split_once(':').ok_or("--vars is NAME:value,NAME:value")?;
        vars.push((n.to_owned(), v.to_owned()));
    }
    let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    if sc.publishers > sc.clients {
        return Err("--publishers must not exceed --clients".into());
    }
    let runtime = match port {
        Some(_) => None,
        None => {
            let rt = Runtime::start(&root(), target, &vars, Duration::from_secs(240)).await?;
            sc.port = rt.port;
            sc.server_pgid = Some(rt.pgid);
            eprintln!("started wrangler dev ({target}) on port {}", rt.port);
            if direct {
                sc.port = rt.worker_port().await.ok_or("cannot find the Worker's own port")?;
                eprintln!("connecting to the Worker's workerd directly on port {}", sc.port);
            }
            Some(rt)
        }
    };
    let report = scenario::run(&sc).await;
    if let Some(rt) = runtime {
        rt.stop().await;
    }
    print!("{}", report.summary());
    let text = serde_json::to_string_pretty(&report).expect("json");
    match json.as_deref() {
        Some("-") => println!("{text}"),
        Some(path) => std::fs::write(path, text).map_err(|e| format!("{path}: {e}"))?,
        None => {}
    }
    Ok(if report.problems.is_empty() { 0 } else { 1 })
}

async fn suite_cmd(args: &Args) -> Result<i32, String> {
    let (cfg, out) = suite_config(args)?;
    args.finish()?;
    let root = root();
    let out = if out.is_absolute() { out } else { root.join(out) };
    suite::run(&root, &cfg, &out).await?;
    Ok(0)
}

/// `docs [--doc-rounds 3] [--out bench/RESULTS.md] [--wasm-without RAW,GZIP] [--wasm-with
/// RAW,GZIP]`: the documents rounds, alternating targets; their section replaces the one in
/// `--out` (or is appended), and each round's JSON goes to
/// target/homeroom-bench/docs-<unix time>.json. The Wasm sizes are the Worker's without the
/// document kind and with it alone (default: the Wasm built now).
async fn docs_cmd(args: &Args) -> Result<i32, String> {
    use homeroom_bench::docs;
    let rounds: usize = args.get("doc-rounds", 3)?;
    let out = PathBuf::from(args.get_str("out").unwrap_or_else(|| "bench/RESULTS.md".into()));
    let size = |flag: &str| {
        args.get_str(flag).and_then(|t| {
            let (raw, gzip) = t.split_once(',')?;
            Some((raw.parse().ok()?, gzip.parse().ok()?))
        })
    };
    let (without, with) = (size("wasm-without"), size("wasm-with"));
    args.finish()?;
    let root = root();
    let out = if out.is_absolute() { out } else { root.join(out) };
    let mut results = Vec::new();
    for n in 0..rounds {
        for target in [Target::Document, Target::YPartyserver] {
            eprintln!("docs round {} of {rounds}: {target}", n + 1);
            results.push(docs::round(&root, target, n).await?);
        }
    }
    let dir = root.join("target/homeroom-bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let json = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(format!("docs-{stamp}.json")), json).map_err(|e| e.to_string())?;
    let with = with.or_else(|| machine::wasm_size(&root));
    let engine = homeroom_bench::doc_engine::measure();
    let mut section = docs::section(&root, &results, with, without);
    section.push_str(&homeroom_bench::doc_engine::section(&engine));
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let head = text.split("\n## Documents:").next().unwrap_or_default().trim_end().to_owned();
    std::fs::write(&out, format!("{head}\n{section}")).map_err(|e| e.to_string())?;
    println!("{section}");
    Ok(0)
}

fn render_cmd(args: &Args) -> Result<i32, String> {
    let (cfg, out) = suite_config(args)?;
    let dir = PathBuf::from(args.get_str("runs").ok_or("render needs --runs DIR")?);
    args.finish()?;
    let root = root();
    let out = if out.is_absolute() { out } else { root.join(out) };
    suite::render(&root, &cfg, &dir, &out)?;
    Ok(0)
}

/// The suite's configuration from its flags, and where its markdown goes.
fn suite_config(args: &Args) -> Result<(suite::SuiteConfig, PathBuf), String> {
    let mut cfg = suite::SuiteConfig::default();
    cfg.rounds = args.get("rounds", cfg.rounds)?;
    cfg.storm_rounds = args.get("storm-rounds", cfg.storm_rounds)?;
    cfg.live_storm_rounds = args.get("live-storm-rounds", cfg.live_storm_rounds)?;
    cfg.wan_rounds = args.get("wan-rounds", cfg.wan_rounds)?;
    cfg.split_rounds = args.get("split-rounds", cfg.split_rounds)?;
    if args.get("quick", false)? {
        cfg = cfg.quick();
    }
    cfg.direct = !args.get("via-proxy", false)?;
    for pair in args.get_str("vars").unwrap_or_default().split(',').filter(|p| !p.is_empty()) {
        let (n, v) = pair.split_once(':').ok_or("--vars is NAME:value,NAME:value")?;
        cfg.homeroom_vars.push((n.to_owned(), v.to_owned()));
    }
    let out = PathBuf::from(args.get_str("out").unwrap_or_else(|| "bench/RESULTS.md".into()));
    Ok((cfg, out))
}
