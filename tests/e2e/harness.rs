//! The harness: one shared tokio runtime, one shared `wrangler dev` per test binary (started only if a selected trial needs it), trial builders with an overall timeout, signal-safe cleanup and the runtime log on failure.

use std::future::Future;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use libtest_mimic::{Arguments, Failed, Trial};

use crate::runtime::{self, Runtime};
use crate::support::{Ctx, R};

/// No single test may run longer than this (once its runtime answers, for [`after_start`]).
const TEST_TIMEOUT: Duration = Duration::from_secs(100);

/// How long a trial may wait for its runtime to start: lazy runtimes start one at a time,
/// after the eager ones, so on 2 busy cores the last of them can wait most of a minute.
const START_TIMEOUT: Duration = Duration::from_secs(300);

static SHARED: OnceLock<Ctx> = OnceLock::new();

/// Every failed trial's name and message, printed again as the run's very last lines: CI keeps
/// only the end of a long output, and libtest prints the messages before the runtime's log.
static FAILURES: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

fn record(name: &str, r: R) -> Result<(), Failed> {
    r.map_err(|msg| {
        if let Ok(mut f) = FAILURES.lock() {
            f.push((name.to_string(), msg.clone()));
        }
        Failed::from(msg)
    })
}

/// The tokio runtime every trial's future runs on (`block_on` from the trial's thread).
pub fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

/// A trial plus whether it needs the shared runtime.
pub struct Spec {
    pub trial: Trial,
    pub needs_shared: bool,
}

fn run_future(name: &str, fut: impl Future<Output = R> + Send + 'static) -> Result<(), Failed> {
    let r = rt().block_on(async move {
        match tokio::time::timeout(TEST_TIMEOUT, fut).await {
            Ok(r) => r,
            Err(_) => Err(format!("test timed out after {TEST_TIMEOUT:?}")),
        }
    });
    record(name, r)
}

/// A trial against the shared runtime.
pub fn shared<F, Fut>(name: &str, f: F) -> Spec
where
    F: FnOnce(Ctx) -> Fut + Send + 'static,
    Fut: Future<Output = R> + Send + 'static,
{
    let owned = name.to_string();
    Spec {
        trial: Trial::test(name, move || {
            let ctx = SHARED
                .get()
                .cloned()
                .ok_or_else(|| Failed::from("the shared runtime is not running"))?;
            run_future(&owned, f(ctx))
        }),
        needs_shared: true,
    }
}

/// A trial that starts (and stops) runtimes of its own.
pub fn alone<F, Fut>(name: &str, f: F) -> Spec
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = R> + Send + 'static,
{
    let owned = name.to_string();
    Spec { trial: Trial::test(name, move || run_future(&owned, f())), needs_shared: false }
}

/// A trial on a runtime started on first use (`start`): its [`TEST_TIMEOUT`] counts from when
/// the runtime answers, not from when the trial began waiting for its turn to start it (a
/// trial that sleeps past a 16 s auction timed out while it waited).
pub fn after_start<S, SFut, F, Fut>(name: &str, start: S, f: F) -> Spec
where
    S: FnOnce() -> SFut + Send + 'static,
    SFut: Future<Output = R<Ctx>> + Send + 'static,
    F: FnOnce(Ctx) -> Fut + Send + 'static,
    Fut: Future<Output = R> + Send + 'static,
{
    let owned = name.to_string();
    let trial = Trial::test(name, move || {
        let r = rt().block_on(async move {
            let ctx = match tokio::time::timeout(START_TIMEOUT, start()).await {
                Ok(ctx) => ctx?,
                Err(_) => return Err(format!("the runtime did not start in {START_TIMEOUT:?}")),
            };
            match tokio::time::timeout(TEST_TIMEOUT, f(ctx)).await {
                Ok(r) => r,
                Err(_) => Err(format!("test timed out after {TEST_TIMEOUT:?}")),
            }
        });
        record(&owned, r)
    });
    Spec { trial, needs_shared: false }
}

fn install_signal_cleanup() {
    rt().spawn(async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
        eprintln!("e2e: interrupted; stopping wrangler dev");
        runtime::kill_all_groups();
        std::process::exit(130);
    });
}

/// Runs the selected trials; never returns.
pub fn main(specs: Vec<Spec>) -> ! {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        // The trials are I/O bound and several wait on purpose (idle eviction, restarts):
        // run them all at once.
        args.test_threads = Some(64);
    }
    let needs_shared = !args.list
        && specs.iter().any(|s| {
            s.needs_shared && !args.is_filtered_out(&s.trial) && !args.is_ignored(&s.trial)
        });
    let trials: Vec<Trial> = specs.into_iter().map(|s| s.trial).collect();

    install_signal_cleanup();
    let mut main_rt: Option<Runtime> = None;
    let persist = tempfile::Builder::new().prefix("homeroom-e2e-").tempdir().expect("temp dir");
    if needs_shared {
        match rt().block_on(Runtime::start("main", persist.path())) {
            Ok(r) => {
                let _ = SHARED.set(Ctx { port: r.port, log: r.log.clone() });
                main_rt = Some(r);
            }
            Err(e) => {
                eprintln!("e2e: cannot start the runtime under test:\n{e}");
                runtime::kill_all_groups();
                std::process::exit(1);
            }
        }
    }

    let conclusion = libtest_mimic::run(&args, trials);

    if let Some(mut r) = main_rt.take() {
        rt().block_on(r.stop());
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e-wrangler.log");
        let _ = std::fs::write(&path, r.log.lines().join("\n"));
        if conclusion.has_failed() || std::env::var_os("E2E_SHOW_LOG").is_some() {
            eprintln!(
                "\n--- wrangler dev log (last 150 lines; full log in {}) ---\n{}\n--- end of log ---",
                path.display(),
                r.log.tail(150)
            );
        }
    }
    runtime::kill_all_groups();
    drop(persist);
    if let Ok(failures) = FAILURES.lock() {
        for (name, msg) in failures.iter() {
            eprintln!("\n--- failed: {name} ---\n{msg}");
        }
        // CI keeps only the tail, and a message may carry a log tail of its own: every
        // failure's own words once more, last, without the logs.
        if !failures.is_empty() {
            eprintln!("\n--- {} failed, in short ---", failures.len());
        }
        for (name, msg) in failures.iter() {
            eprintln!("{name}: {}", head(msg));
        }
    }
    conclusion.exit()
}

/// A failure's message without the runtime log it may carry (each adds one after a `\n--- `
/// line), cut to 1,500 characters.
fn head(msg: &str) -> String {
    let own = msg.split("\n--- ").next().unwrap_or(msg);
    own.chars().take(1500).collect()
}
