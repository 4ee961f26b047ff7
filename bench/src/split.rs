//! The per-object rows of the suite (issue 19; bench/README.md, "Per object"): each part of
//! the Worker in a `wrangler dev` (one workerd, one thread) of its own, so that each part's
//! CPU per connect and per delivered frame is its own: the home, the relays, the edge; and the
//! plain room's object and Worker split the same way. The parts reach each other through
//! wrangler's dev registry (Durable Object bindings with a `script_name`), one registry per
//! runtime set. `bench/split` does the same by hand.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::runtime::{Part, Runtime};
use crate::scenario;
use crate::suite::{med, publishing, scenario_for, vars_for, Run, SuiteConfig};
use crate::target::Target;

/// The parts of `target`'s Worker, the edge (where clients connect) last.
fn parts(target: Target) -> &'static [&'static str] {
    match target {
        Target::Plain | Target::PlainRust | Target::PlainWelcome => &["home", "edge"],
        _ => &["home", "relays", "edge"],
    }
}

/// One Durable Object binding, of this part's own class or of `script`'s.
fn binding(name: &str, class: &str, script: Option<&str>) -> String {
    let script = script.map(|s| format!("script_name = \"{s}\"\n")).unwrap_or_default();
    format!("[[durable_objects.bindings]]\nname = \"{name}\"\nclass_name = \"{class}\"\n{script}")
}

/// The plain room's object in Rust, as bench/run builds it (bench/baselines/rust-floor).
const RUST_FLOOR: &str = "bench/baselines/rust-floor/build/index.js";

/// The config of `part` of `target`'s Worker: its script's name, its code, its bindings.
fn config(root: &Path, target: Target, part: &str) -> String {
    let plain = root.join("bench/baselines/plain/src/index.js");
    let (prefix, main) = match (target, part) {
        (Target::Plain, _) => ("plain", plain),
        // The object in Rust, under the plain room's JavaScript Worker.
        (Target::PlainRust, "home") => ("plain-rust", root.join(RUST_FLOOR)),
        (Target::PlainRust, _) => ("plain-rust", plain),
        // The plain object that sends a welcome-sized text on connect, under the plain Worker.
        (Target::PlainWelcome, "home") => {
            ("plain-welcome", root.join("bench/baselines/plain-welcome/src/index.js"))
        }
        (Target::PlainWelcome, _) => ("plain-welcome", plain),
        _ => ("homeroom", root.join("worker/build/index.js")),
    };
    let script = |p: &str| format!("{prefix}-{p}");
    let mut text = format!(
        "name = \"{}\"\nmain = \"{}\"\ncompatibility_date = \"2026-04-01\"\n",
        script(part),
        main.display()
    );
    let home = script("home");
    let relays = script("relays");
    let (bindings, classes): (Vec<String>, &[&str]) = match (target, part) {
        (Target::Plain | Target::PlainWelcome, "home") => {
            (vec![binding("ROOMS", "Room", None)], &["Room"])
        }
        (Target::Plain | Target::PlainWelcome, _) => {
            (vec![binding("ROOMS", "Room", Some(&home))], &[])
        }
        (Target::PlainRust, "home") => (vec![binding("ROOMS", "Floor", None)], &["Floor"]),
        (Target::PlainRust, _) => (vec![binding("ROOMS", "Floor", Some(&home))], &[]),
        (_, "home") => (
            vec![binding("ROOMS", "Room", None), binding("ROOM_RELAYS", "RoomRelay", None)],
            &["Room", "RoomRelay"],
        ),
        (_, "relays") => (
            vec![binding("ROOMS", "Room", Some(&home)), binding("ROOM_RELAYS", "RoomRelay", None)],
            &["RoomRelay"],
        ),
        _ => (
            vec![
                binding("ROOMS", "Room", Some(&home)),
                binding("ROOM_RELAYS", "RoomRelay", Some(&relays)),
            ],
            &[],
        ),
    };
    for b in bindings {
        text.push_str(&b);
    }
    if !classes.is_empty() {
        let list: Vec<String> = classes.iter().map(|c| format!("\"{c}\"")).collect();
        text.push_str(&format!(
            "[[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [{}]\n",
            list.join(", ")
        ));
    }
    text
}

/// Starts every part of `target`'s Worker (the edge last) with the suite's variables.
async fn start(
    root: &Path,
    target: Target,
    cfg: &SuiteConfig,
    dir: &Path,
) -> Result<Vec<(String, Runtime)>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let registry = dir.join("registry");
    let vars = vars_for(target, cfg, &[]);
    let mut started = Vec::new();
    for name in parts(target) {
        let path: PathBuf = dir.join(format!("{name}.toml"));
        std::fs::write(&path, config(root, target, name)).map_err(|e| e.to_string())?;
        let part = Part { name: (*name).to_owned(), config: path, registry: registry.clone() };
        let rt = Runtime::start_part(root, target, Some(&part), &vars, Duration::from_secs(240));
        started.push(((*name).to_owned(), rt.await?));
    }
    // The registry tells each part where the others are.
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok(started)
}

/// The scenario of a round's first run, into runtimes just started.
const COLD: &str = "split";
/// The scenario of its second run, into the same runtimes, warm.
const WARM: &str = "split-warm";
/// Through relays, a third run: the seeds' evacuation as one relay sees it.
const EVACUATION: &str = "split-evacuation";

/// The seeds' evacuation: 40,000 sockets over a 12 s jitter window, spread over 27 relays
/// (1,500 members each), so each relay takes 3,333 / 27 = 123 connects a second.
pub const EVACUATION_PER_SECOND: f64 = 40_000.0 / 12.0;
/// Connects a second at each relay in the evacuation.
pub const EVACUATION_PER_RELAY: f64 = EVACUATION_PER_SECOND / 27.0;

/// The evacuation run: 1,500 clients over the four regions' relays, arriving evenly at the
/// evacuation's rate per relay (the home's work per join depends on how many joins share a
/// link message, bench/README.md, "The evacuation at its own rate"), into the warm runtimes.
fn evacuation(mut sc: scenario::Scenario) -> scenario::Scenario {
    sc.clients = 1_500;
    sc.connect_rate = Some(4.0 * EVACUATION_PER_RELAY);
    sc.connect_concurrency = 256;
    sc.duration = Duration::from_secs(2);
    sc
}

/// The per-object rounds: homeroom direct, homeroom through relays, the plain room (also in
/// Rust, and answering each connect with a welcome-sized text), each split.
pub async fn runs(
    root: &Path,
    cfg: &SuiteConfig,
    seed: &mut u64,
    started: Instant,
    dir: &Path,
) -> Result<Vec<Run>, String> {
    let mut runs = Vec::new();
    for round in 1..=cfg.split_rounds {
        let floor = root.join(RUST_FLOOR).exists();
        if !floor && round == 1 {
            eprintln!("[split] {RUST_FLOOR} not built: no rounds of the plain object in Rust");
        }
        let targets = [
            Target::Homeroom,
            Target::Relayed,
            Target::Plain,
            Target::PlainRust,
            Target::PlainWelcome,
        ];
        for target in targets.into_iter().filter(|t| floor || *t != Target::PlainRust) {
            let set = dir.join(format!("split-{round}-{}", target.name()));
            let parts = start(root, target, cfg, &set).await?;
            let (_, edge) = parts.last().ok_or("no parts")?;
            // First into runtimes just started (their Wasm compiled on the first requests),
            // then the same again into a room of its own once they are warm, as a storm finds
            // an object that is already serving its room.
            let names: &[&str] =
                if target == Target::Relayed { &[COLD, WARM, EVACUATION] } else { &[COLD, WARM] };
            for &name in names {
                if name != COLD {
                    // The first run's closes are the runtime's to finish before the next starts.
                    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
                }
                *seed += 1;
                let mut sc = scenario_for(name, target, edge, edge.port, &cfg.split, *seed, None);
                if name == EVACUATION {
                    sc = evacuation(sc);
                }
                sc.server_pgid = None; // measured part by part instead
                sc.objects = parts.iter().map(|(n, rt)| (n.clone(), rt.pgid, rt.port)).collect();
                let report = scenario::run(&sc).await;
                eprintln!(
                    "[{name} {round} {:.0}s] {}",
                    started.elapsed().as_secs_f64(),
                    report.summary()
                );
                runs.push(Run { round, report });
            }
            for (_, rt) in parts {
                rt.stop().await;
            }
            let _ = std::fs::remove_dir_all(&set);
        }
    }
    Ok(runs)
}

/// The section of RESULTS.md: each part's CPU, homeroom's against the plain room's object.
pub fn markdown(md: &mut String, cfg: &SuiteConfig, runs: &[Run]) {
    use Target::{Homeroom as H, Plain as P, PlainRust as R, PlainWelcome as W, Relayed as L};
    if !runs.iter().any(|r| r.report.scenario == COLD) {
        return; // a suite without per-object rounds
    }
    let mut w = |line: String| {
        md.push_str(&line);
        md.push('\n');
    };
    w("## Per object: each part of the Worker in a runtime of its own".into());
    w(String::new());
    w(format!(
        "Each part in a `wrangler dev` of its own (the home, the relays, the edge; the plain room's object and its Worker), through wrangler's dev registry: {} clients over four regions, {} publishers, {}; {} rounds, medians. Each round runs twice on the same runtimes: first just after they start (the Wasm compiles on the first requests), then, 8 s later, into a room of its own (warm, as a storm finds an object that already serves its room). The CPU is each part's workerd over the warm run's window per frame the room delivered, and from the start until every client was in per connect. Goals (issue 19): per delivered frame, the home and a relay at most the plain object's; per connect, at most 1.5×. See bench/README.md, \"Per object\".",
        cfg.split.clients,
        cfg.split.publishers,
        publishing(cfg.split.publish),
        cfg.split_rounds
    ));
    w(String::new());
    w("The column \"plain in Rust\" is the plain room's object written in Rust through workers-rs's `durable_object` (homeroom's objects use workers-rs's types, but answer at once when a handler does not wait) (bench/baselines/rust-floor, under the plain room's JavaScript Worker): what the same work costs a Rust object, before any of homeroom's. The column \"plain + welcome\" is the plain room answering each connect with one text the size of homeroom's welcome (bench/baselines/plain-welcome): the runtime's own cost of a connect that must tell its member something, with no room logic at all.".into());
    w(String::new());
    w("| per part | homeroom direct | homeroom relayed | plain | plain in Rust | plain + welcome | homeroom / plain | plain in Rust / plain | homeroom / (plain + welcome) | goal |".into());
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|".into());
    let frame = |t: Target, part: &'static str| {
        med(runs, WARM, t, move |r| r.cpu_per_frame_us().get(part).copied())
    };
    let connect = |sc: &'static str, t: Target, part: &'static str| {
        med(runs, sc, t, move |r| r.connect_cpu_ms_by.get(part).copied())
    };
    let cell = |v: Option<f64>, digits: usize| v.map_or(String::new(), |v| format!("{v:.digits$}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => String::new(),
    };
    let frames = (frame(P, "home"), frame(R, "home"), frame(W, "home"));
    let connects = |sc| (connect(sc, P, "home"), connect(sc, R, "home"), connect(sc, W, "home"));
    let edges = |sc| (connect(sc, P, "edge"), connect(sc, R, "edge"), connect(sc, W, "edge"));
    let mut rows = vec![
        (
            "home: CPU per delivered frame (µs)".to_owned(),
            [frame(H, "home"), frame(L, "home")],
            1,
            "≤ 1×",
            frames,
        ),
        (
            "a relay's CPU per delivered frame (µs)".to_owned(),
            [None, frame(L, "relays")],
            1,
            "≤ 1×",
            frames,
        ),
    ];
    // Per connect, warm (the goals) and then on runtimes just started.
    for (sc, when, goal) in [(WARM, "warm", "≤ 1.5×"), (COLD, "fresh runtime", "")] {
        let home = [connect(sc, H, "home"), connect(sc, L, "home")];
        rows.push((format!("home: CPU per connect, {when} (ms)"), home, 2, goal, connects(sc)));
        let relay = [None, connect(sc, L, "relays")];
        rows.push((
            format!("a relay's CPU per connect, {when} (ms)"),
            relay,
            2,
            goal,
            connects(sc),
        ));
        let edge = [connect(sc, H, "edge"), connect(sc, L, "edge")];
        rows.push((format!("edge: CPU per connect, {when} (ms)"), edge, 2, "", edges(sc)));
    }
    for (name, [direct, relayed], digits, goal, (plain, rust, welcome)) in rows {
        // The ratio of the row's object: the direct home's, or the relay's when there is none.
        let ours = direct.or(relayed);
        w(format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {goal} |",
            cell(direct, digits),
            cell(relayed, digits),
            cell(plain, digits),
            cell(rust, digits),
            cell(welcome, digits),
            ratio(ours, plain),
            ratio(rust, plain),
            ratio(ours, welcome)
        ));
    }
    w(String::new());
    let home = connect(EVACUATION, L, "home");
    let relay = connect(EVACUATION, L, "relays");
    if home.is_some() || relay.is_some() {
        w(format!(
            "The seeds' evacuation (40,000 sockets in 12 s over 27 relays: {:.0} connects a second at each) as the relays and the home see it: a third run into the warm relayed runtimes, 1,500 clients arriving evenly at {:.0} a second over the four regions' relays ({:.0} at each). One core is 1,000 ms a second; the goal (the capacity model, bench/README.md) is at most half a core for the home.",
            EVACUATION_PER_RELAY,
            4.0 * EVACUATION_PER_RELAY,
            EVACUATION_PER_RELAY
        ));
        w(String::new());
        let per_link = med(runs, EVACUATION, L, |r| {
            r.home_io_connect.map(|h| r.clients as f64 / h.link_in.max(1) as f64)
        });
        w(format!(
            "Joins per link message into the home: {} (a relay holds a message of only opens up to `OPEN_HOLD_MS` after its last).",
            cell(per_link, 1)
        ));
        w(String::new());
        w("| the evacuation, warm | CPU per connect (ms) | cores at the evacuation's rate | goal |".into());
        w("|---|---:|---:|---:|".into());
        let cores = |v: Option<f64>, rate: f64| {
            v.map_or(String::new(), |ms| format!("{:.2}", ms * rate / 1000.0))
        };
        w(format!(
            "| the home (every join, {},{:03} a second) | {} | {} | ≤ 0.5 |",
            EVACUATION_PER_SECOND as u64 / 1000,
            EVACUATION_PER_SECOND as u64 % 1000,
            cell(home, 2),
            cores(home, EVACUATION_PER_SECOND)
        ));
        w(format!(
            "| a relay ({:.0} connects a second) | {} | {} | |",
            EVACUATION_PER_RELAY,
            cell(relay, 2),
            cores(relay, EVACUATION_PER_RELAY)
        ));
        w(String::new());
    }
    let correct = |t: Target| crate::suite::correctness_of(runs, t, &[COLD, WARM]);
    w(format!(
        "Correctness of these runs: homeroom direct, {}; through relays, {}; plain, {}; plain in Rust, {}; plain + welcome, {}.",
        correct(H),
        correct(L),
        correct(P),
        correct(R),
        correct(W)
    ));
    w(String::new());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_binds_the_others_classes_by_script() {
        let root = Path::new("/r");
        let edge = config(root, Target::Relayed, "edge");
        assert!(edge.contains("name = \"homeroom-edge\""));
        assert!(edge.contains("main = \"/r/worker/build/index.js\""));
        assert!(edge.contains("class_name = \"Room\"\nscript_name = \"homeroom-home\""));
        assert!(edge.contains("class_name = \"RoomRelay\"\nscript_name = \"homeroom-relays\""));
        assert!(!edge.contains("migrations"), "the edge defines no class: {edge}");
        let relays = config(root, Target::Relayed, "relays");
        assert!(relays.contains("new_sqlite_classes = [\"RoomRelay\"]"), "{relays}");
        assert!(relays.contains("script_name = \"homeroom-home\""));
        let home = config(root, Target::Homeroom, "home");
        assert!(!home.contains("script_name"), "the home is all its own: {home}");
        let plain_edge = config(root, Target::Plain, "edge");
        assert!(plain_edge.contains("bench/baselines/plain/src/index.js"));
        assert!(plain_edge.contains("script_name = \"plain-home\""));
        assert_eq!(parts(Target::Plain), ["home", "edge"]);
        let welcome = config(root, Target::PlainWelcome, "home");
        assert!(welcome.contains("bench/baselines/plain-welcome/src/index.js"), "{welcome}");
        assert!(welcome.contains("new_sqlite_classes = [\"Room\"]"), "{welcome}");
        let welcome_edge = config(root, Target::PlainWelcome, "edge");
        assert!(welcome_edge.contains("bench/baselines/plain/src/index.js"), "{welcome_edge}");
        assert!(welcome_edge.contains("script_name = \"plain-welcome-home\""), "{welcome_edge}");
        assert_eq!(parts(Target::Relayed).last(), Some(&"edge"), "clients connect to the last");
    }
}
