//! The runtime under test: one `wrangler dev` (node + workerd) in its own process group, on free ports, with persistence in a given dir; readiness polling, log capture, stop (TERM) and hard kill (KILL).

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use homeroom_testkit::{address_in_use, group_alive, signal_group, wrangler_dev, DevArgs, Signal};
use serde_json::Value;

use crate::http;

/// How long a start may take (the first start may build the Wasm). Override with
/// `E2E_START_TIMEOUT_SECS`.
fn start_timeout() -> Duration {
    let secs =
        std::env::var("E2E_START_TIMEOUT_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(180);
    Duration::from_secs(secs)
}

/// The config every runtime serves (`scripts/prebuilt-config`: wrangler.toml without its build,
/// so no runtime reloads under a test when wrangler's file watcher gets ready late), once the
/// Wasm is built: by this process, once, with the test-only fault injection, unless the caller
/// built it (`HOMEROOM_PREBUILT`, as scripts/test does).
fn prebuilt_config(root: &Path) -> Result<String, String> {
    static CONFIG: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            if std::env::var_os("HOMEROOM_PREBUILT").is_none() {
                let mut cmd = Command::new("bash");
                cmd.args(["-c", ". scripts/env >/dev/null && scripts/build-worker"]);
                if std::env::var_os("HOMEROOM_FEATURES").is_none() {
                    cmd.env("HOMEROOM_FEATURES", "fault-injection");
                }
                let out = cmd.current_dir(root).output().map_err(|e| e.to_string())?;
                if !out.status.success() {
                    let err = String::from_utf8_lossy(&out.stderr);
                    return Err(format!("scripts/build-worker failed:\n{err}"));
                }
            }
            homeroom_testkit::prebuilt_config(root)
        })
        .clone()
}

/// Process groups that are alive, so a signal handler can kill them all.
static GROUPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Kills every runtime this process started (used on SIGINT/SIGTERM and at exit), then writes the
/// logs of the [`LazyRuntime`]s to `target/tmp/e2e-wrangler-{label}.log` and removes their
/// persistence dirs (nothing else would: statics are never dropped).
pub fn kill_all_groups() {
    let groups = GROUPS.lock().map(|g| g.clone()).unwrap_or_default();
    for pgid in groups {
        signal_group(pgid, Signal::Kill);
    }
    let kept: Vec<(Runtime, tempfile::TempDir)> =
        LAZY_KEPT.lock().map(|mut k| k.drain(..).collect()).unwrap_or_default();
    for (mut rt, dir) in kept {
        rt.kill_now();
        let log_path =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("e2e-wrangler-{}.log", rt.label));
        let _ = std::fs::write(log_path, rt.log.lines().join("\n"));
        // Let workerd go before its dir does, so it cannot write into a removed tree.
        let deadline = Instant::now() + Duration::from_secs(2);
        while group_alive(rt.pgid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(dir);
    }
}

/// The lazily started runtimes and their persistence dirs, kept alive until [`kill_all_groups`].
static LAZY_KEPT: Mutex<Vec<(Runtime, tempfile::TempDir)>> = Mutex::new(Vec::new());

/// A runtime with its own settings that several trials share: started by the first trial that
/// asks for it (a run that selects none of them never starts it), then kept until the test
/// binary exits ([`kill_all_groups`]). A failed start fails every trial that asks.
pub struct LazyRuntime {
    label: &'static str,
    args: fn() -> Vec<String>,
    cell: tokio::sync::OnceCell<Result<(u16, Log), String>>,
}

impl LazyRuntime {
    /// `args` are extra `wrangler dev` arguments, as for [`Runtime::start_with`].
    pub const fn new(label: &'static str, args: fn() -> Vec<String>) -> LazyRuntime {
        LazyRuntime { label, args, cell: tokio::sync::OnceCell::const_new() }
    }

    /// The runtime's port and log, starting it on first use.
    pub async fn ctx(&'static self) -> Result<crate::support::Ctx, String> {
        let started = self
            .cell
            .get_or_init(|| async {
                let dir = tempfile::Builder::new()
                    .prefix(&format!("homeroom-e2e-{}-", self.label))
                    .tempdir()
                    .map_err(|e| format!("temp dir for runtime `{}`: {e}", self.label))?;
                let args = (self.args)();
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let rt = Runtime::start_deferring(self.label, dir.path(), &args).await?;
                let out = (rt.port, rt.log.clone());
                LAZY_KEPT.lock().unwrap().push((rt, dir));
                Ok(out)
            })
            .await;
        match started {
            Ok((port, log)) => Ok(crate::support::Ctx { port: *port, log: log.clone() }),
            Err(e) => Err(format!("the `{}` runtime did not start: {e}", self.label)),
        }
    }
}

/// Held from choosing a runtime's ports until it answers, so that no other runtime of this
/// process takes one of them (bound-then-released ports are free for anyone) in between.
static STARTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How many [`Runtime::start_with`] calls are waiting for [`STARTING`] (lazy starts yield to them).
static EAGER_WAITING: AtomicUsize = AtomicUsize::new(0);

/// Counts one waiting start while alive (dropped also when the waiting future is cancelled).
struct EagerWaiting;

impl EagerWaiting {
    fn new() -> EagerWaiting {
        EAGER_WAITING.fetch_add(1, Ordering::SeqCst);
        EagerWaiting
    }
}

impl Drop for EagerWaiting {
    fn drop(&mut self) {
        EAGER_WAITING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The captured output (stdout and stderr, line by line) of one runtime.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The last `n` lines, joined, for failure messages.
    pub fn tail(&self, n: usize) -> String {
        let lines = self.0.lock().unwrap();
        let start = lines.len().saturating_sub(n);
        lines[start..].join("\n")
    }

    /// Every structured JSON log line (an object somewhere on the line) whose `event` is `event`.
    pub fn events(&self, event: &str) -> Vec<Value> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(event))
            .filter_map(|l| json_in_line(l))
            .filter(|v| v["event"] == event)
            .collect()
    }

    /// The `room_loaded` lines of one room, in order.
    pub fn room_loaded(&self, room: &str) -> Vec<Value> {
        self.events("room_loaded").into_iter().filter(|v| v["room"] == room).collect()
    }

    /// Polls until `room` has at least `count` `room_loaded` lines; returns them.
    pub async fn wait_room_loaded(
        &self,
        room: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<Value>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let loaded = self.room_loaded(room);
            if loaded.len() >= count {
                return Ok(loaded);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "expected at least {count} `room_loaded` log lines for room {room}, found {}: {loaded:?}",
                    loaded.len()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Parses the JSON object on a log line (wrangler may prefix or decorate worker output).
fn json_in_line(line: &str) -> Option<Value> {
    let line = strip_ansi(line);
    let start = line.find('{')?;
    let end = line.rfind('}')?;
    if end < start {
        return None;
    }
    serde_json::from_str(&line[start..=end]).ok()
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn capture<R: Read + Send + 'static>(stream: R, log: Log, label: String, echo: bool) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = strip_ansi(line.trim_end_matches(['\r', '\n']));
                    if echo {
                        eprintln!("[{label}] {line}");
                    }
                    log.push(line);
                }
            }
        }
    });
}

/// One running `wrangler dev`.
pub struct Runtime {
    pub label: String,
    pub port: u16,
    pub log: Log,
    child: Option<Child>,
    pgid: u32,
}

impl Runtime {
    /// Starts `wrangler dev` from the repository root on fresh ports, persisting to `persist`,
    /// and waits until it answers HTTP.
    pub async fn start(label: &str, persist: &Path) -> Result<Runtime, String> {
        Runtime::start_with(label, persist, &[]).await
    }

    /// Like [`Runtime::start`], with extra `wrangler dev` arguments (e.g.
    /// `["--var", "PRESENCE_TTL_MS:3000"]`).
    pub async fn start_with(
        label: &str,
        persist: &Path,
        extra_args: &[&str],
    ) -> Result<Runtime, String> {
        let _starting = {
            let _waiting = EagerWaiting::new();
            STARTING.lock().await
        };
        Runtime::start_locked(label, persist, extra_args).await
    }

    /// Like [`Runtime::start_with`], but yields to every start a trial is waiting for (a lazy
    /// runtime serves several trials that can wait; a restart test in the middle of its run
    /// should not queue behind it).
    async fn start_deferring(
        label: &str,
        persist: &Path,
        extra_args: &[&str],
    ) -> Result<Runtime, String> {
        let _starting = loop {
            let guard = STARTING.lock().await;
            if EAGER_WAITING.load(Ordering::SeqCst) == 0 {
                break guard;
            }
            drop(guard);
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        Runtime::start_locked(label, persist, extra_args).await
    }

    /// The start itself, with [`STARTING`] held by the caller.
    async fn start_locked(
        label: &str,
        persist: &Path,
        extra_args: &[&str],
    ) -> Result<Runtime, String> {
        // E2E_WORKER_DIR points the harness at another wrangler project (e.g. a stand-in
        // worker while developing the tests); by default the repository itself.
        let root_buf = std::env::var_os("E2E_WORKER_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        let root = root_buf.as_path();
        let wrangler = root.join("node_modules/.bin/wrangler");
        if !wrangler.exists() {
            return Err(format!(
                "{} is missing: run scripts/test (it installs the tools)",
                wrangler.display()
            ));
        }
        // A port may be taken between our check and wrangler's bind (see
        // `homeroom_testkit::free_port`): start again on fresh ports, a few times.
        let mut attempt = 1;
        loop {
            match Runtime::spawn(root, label, persist, extra_args).await {
                Err(e) if attempt < 3 && address_in_use(&e) => {
                    eprintln!("e2e: runtime `{label}` lost a port to another process; again");
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    /// One try at starting `wrangler dev` in `root` on fresh ports.
    async fn spawn(
        root: &Path,
        label: &str,
        persist: &Path,
        extra_args: &[&str],
    ) -> Result<Runtime, String> {
        let wrangler = root.join("node_modules/.bin/wrangler");
        // "log", not "info": wrangler filters the Worker's console.log (the room's
        // `room_loaded` lines) at --log-level info.
        let DevArgs { port, mut args, .. } = wrangler_dev(persist, "log");
        args.extend(["--config".into(), prebuilt_config(root)?]);
        // No AUTH_SECRET: the Worker refuses rooms unless told this is local dev.
        args.extend(["--var".into(), "ANONYMOUS_DEV:true".into()]);
        args.extend(extra_args.iter().map(|a| a.to_string()));
        // Use the project's tool environment when there is one (scripts/env is sourced by
        // bash), otherwise put node_modules/.bin first on PATH.
        let env_script = root.join("scripts/env");
        let mut cmd = if env_script.exists() {
            let mut c = Command::new("bash");
            c.arg("-c")
                .arg(". scripts/env >/dev/null && exec node_modules/.bin/wrangler \"$@\"")
                .arg("wrangler")
                .args(&args);
            c
        } else {
            let mut c = Command::new(&wrangler);
            c.args(&args);
            c
        };
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.current_dir(root)
            .env("PATH", format!("{}:{path}", root.join("node_modules/.bin").display()))
            .env("NO_COLOR", "1")
            .env("FORCE_COLOR", "0")
            .env("WRANGLER_SEND_METRICS", "false")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| format!("cannot start wrangler dev: {e}"))?;
        let pgid = child.id();
        GROUPS.lock().unwrap().push(pgid);
        let log = Log::default();
        let echo = std::env::var_os("E2E_ECHO_LOG").is_some();
        capture(child.stdout.take().unwrap(), log.clone(), label.to_string(), echo);
        capture(child.stderr.take().unwrap(), log.clone(), label.to_string(), echo);
        let mut rt = Runtime { label: label.to_string(), port, log, child: Some(child), pgid };
        rt.wait_ready().await?;
        Ok(rt)
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        let deadline = started + start_timeout();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "wrangler dev ({}) exited during startup with {status}\n--- log ---\n{}",
                        self.label,
                        self.log.tail(80)
                    ));
                }
            }
            if address_in_use(&self.log.tail(80)) {
                let tail = self.log.tail(80);
                self.kill_now();
                return Err(format!(
                    "wrangler dev ({}) could not bind its ports\n--- log ---\n{tail}",
                    self.label
                ));
            }
            // Any HTTP answer from the worker means the runtime is up.
            if let Ok(resp) =
                http::get(self.port, "/__e2e_ready", &[], Duration::from_secs(5)).await
            {
                if resp.status != 502 && resp.status != 503 {
                    eprintln!(
                        "e2e: runtime `{}` ready on port {} after {:.1}s",
                        self.label,
                        self.port,
                        started.elapsed().as_secs_f64()
                    );
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                let tail = self.log.tail(80);
                self.kill_now();
                return Err(format!(
                    "wrangler dev ({}) did not answer on port {} within {:?}\n--- log ---\n{tail}",
                    self.label,
                    self.port,
                    start_timeout()
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// SIGKILL to the whole group, no waiting.
    fn kill_now(&mut self) {
        if self.child.is_some() {
            signal_group(self.pgid, Signal::Kill);
            if let Some(mut c) = self.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            GROUPS.lock().unwrap().retain(|g| *g != self.pgid);
        }
    }

    /// Hard kill (SIGKILL to node and workerd at once), then waits for the exit.
    pub async fn kill_hard(&mut self) {
        self.kill_now();
        self.wait_group_gone(Duration::from_secs(5)).await;
    }

    /// Clean stop: SIGTERM to the group, wait up to 10 s, then SIGKILL.
    /// Returns whether the runtime exited on SIGTERM alone.
    pub async fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        signal_group(self.pgid, Signal::Term);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut clean = false;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                clean = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Whatever is left of the group (workerd) goes now.
        signal_group(self.pgid, Signal::Kill);
        let _ = child.kill();
        let _ = child.wait();
        GROUPS.lock().unwrap().retain(|g| *g != self.pgid);
        self.wait_group_gone(Duration::from_secs(5)).await;
        clean
    }

    /// Waits until no process of the group is left (so the persist dir is released).
    async fn wait_group_gone(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let alive = group_alive(self.pgid);
            if !alive {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.kill_now();
    }
}
