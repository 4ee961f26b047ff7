//! A `wrangler dev` per target: started from the repository root with the
//! target's config on free ports, persistence in a fresh temp dir, output
//! to a log file; ready when it answers HTTP; stopped (TERM, then KILL) as a
//! whole process group, and never left behind (Drop kills it).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use homeroom_testkit::{
    address_in_use, group_alive, prebuilt_config, signal_group, wrangler_dev, DevArgs, Signal,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::target::Target;

/// The variables every benchmark run gets: anonymous dev mode (homeroom
/// refuses rooms without auth otherwise), per-connection and per-user rate
/// limits out of the way of a load test (default 20 frames/s, burst 50; 40
/// and 100 per user), and no per-connection log lines (the baselines write
/// none; locally each line also crosses into wrangler's node process, which
/// a deployment does not).
pub const BENCH_VARS: [(&str, &str); 7] = [
    ("ANONYMOUS_DEV", "true"),
    ("ADMIN_KEY", BENCH_ADMIN_KEY),
    ("RATE_PER_SEC", "100000"),
    ("RATE_BURST", "100000"),
    ("USER_RATE_PER_SEC", "100000"),
    ("USER_RATE_BURST", "100000"),
    ("LOG_CONNECTIONS", "off"),
];

/// The admin key every runtime is started with, for reading a room's `/stats` (the home's
/// counters of what it sent and heard); the baselines ignore it.
pub const BENCH_ADMIN_KEY: &str = "bench-admin-key-not-a-secret-but-32-bytes-long";

/// Process groups and state dirs of the runtimes alive now, for [`kill_all`].
static GROUPS: std::sync::Mutex<Vec<(u32, PathBuf)>> = std::sync::Mutex::new(Vec::new());

/// Kills every runtime this process started and removes its state (on
/// SIGINT/SIGTERM: Drop does not run when the process is killed).
pub fn kill_all() {
    let groups = GROUPS.lock().map(|g| g.clone()).unwrap_or_default();
    for (pgid, dir) in groups {
        signal_group(pgid, Signal::Kill);
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// One part of a Worker split over several `wrangler dev`s (`bench/split`, the suite's per-object
/// rounds): its config, and the dev registry through which the parts find each other.
#[derive(Debug, Clone)]
pub struct Part {
    pub name: String,
    pub config: PathBuf,
    pub registry: PathBuf,
}

pub struct Runtime {
    pub target: Target,
    pub port: u16,
    pub pgid: u32,
    pub log_path: PathBuf,
    child: Option<Child>,
    dir: PathBuf,
}

/// Where runtimes keep their state: memory (`/dev/shm`) when there is
/// one, so the benchmark measures the runtime and not a shared disk's
/// flushes; else the temp dir. `HOMEROOM_BENCH_STATE` overrides.
pub fn state_base() -> PathBuf {
    if let Some(dir) = std::env::var_os("HOMEROOM_BENCH_STATE") {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    let writable = shm.is_dir()
        && std::fs::metadata(shm).map(|m| !m.permissions().readonly()).unwrap_or(false);
    if writable {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

impl Runtime {
    /// Starts `wrangler dev` for `target` and waits (up to `ready_within`)
    /// until it answers. `vars` become `--var NAME:value`.
    pub async fn start(
        root: &Path,
        target: Target,
        vars: &[(&str, &str)],
        ready_within: Duration,
    ) -> Result<Runtime, String> {
        Runtime::start_part(root, target, None, vars, ready_within).await
    }

    /// [`Runtime::start`] for one `part` of a split Worker (its config instead of the target's).
    pub async fn start_part(
        root: &Path,
        target: Target,
        part: Option<&Part>,
        vars: &[(&str, &str)],
        ready_within: Duration,
    ) -> Result<Runtime, String> {
        // A port may be taken between our check and wrangler's bind (see
        // `homeroom_testkit::free_port`): start again on fresh ports, a few times.
        let mut attempt = 1;
        loop {
            match Runtime::spawn(root, target, part, vars, ready_within).await {
                Err(e) if attempt < 3 && address_in_use(&e) => attempt += 1,
                done => return done,
            }
        }
    }

    /// One try at starting `wrangler dev` for `target` on fresh ports.
    async fn spawn(
        root: &Path,
        target: Target,
        part: Option<&Part>,
        vars: &[(&str, &str)],
        ready_within: Duration,
    ) -> Result<Runtime, String> {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = state_base().join(format!(
            "homeroom-bench-{}{}-{}-{}",
            target.name(),
            part.map(|p| format!("-{}", p.name)).unwrap_or_default(),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let log_path = dir.join("wrangler.log");
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let level = std::env::var("HOMEROOM_BENCH_LOG_LEVEL").unwrap_or_else(|_| "warn".into());
        let DevArgs { port, mut args, .. } = wrangler_dev(&dir.join("state"), &level);
        let config = match part {
            Some(p) => p.config.display().to_string(),
            // bench/run built the Wasm: served as built, with no reload when wrangler's file
            // watcher gets ready in the middle of a round. (A tree older than the script, as
            // `bench/ab` checks one out, is served as it was.)
            None if target.wrangler_config() == "wrangler.toml"
                && root.join("scripts/prebuilt-config").exists() =>
            {
                prebuilt_config(root)?
            }
            None => target.wrangler_config().to_owned(),
        };
        args.extend(["--config".into(), config]);
        for (name, value) in vars {
            args.push("--var".into());
            args.push(format!("{name}:{value}"));
        }
        if target == Target::Rules {
            // The chat's quota is per user, 20 per 10 s by default; each bench
            // client is its own user, so a publisher flat out would be refused.
            // The check still runs on every publish.
            args.extend(["--var".into(), "CHAT_QUOTA:1000000000".into()]);
        }
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(". scripts/env >/dev/null && exec node_modules/.bin/wrangler \"$@\"")
            .arg("wrangler")
            .args(&args)
            .current_dir(root)
            .env("NO_COLOR", "1")
            .env("FORCE_COLOR", "0")
            .env("WRANGLER_SEND_METRICS", "false")
            .envs(part.map(|p| ("WRANGLER_REGISTRY_PATH", p.registry.clone())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn().map_err(|e| format!("cannot start wrangler dev: {e}"))?;
        let pgid = child.id();
        GROUPS.lock().unwrap().push((pgid, dir.clone()));
        let mut rt = Runtime { target, port, pgid, log_path, child: Some(child), dir };
        rt.wait_ready(ready_within).await?;
        Ok(rt)
    }

    async fn wait_ready(&mut self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                return Err(format!(
                    "wrangler dev ({}) exited with {status}:\n{}",
                    self.target,
                    self.log_tail(40)
                ));
            }
            let tail = self.log_tail(40);
            if address_in_use(&tail) {
                self.kill();
                return Err(format!(
                    "wrangler dev ({}) could not bind its ports:\n{tail}",
                    self.target
                ));
            }
            if let Some(status) = http_status(self.port, "/__bench_ready").await {
                if status != 502 && status != 503 {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                let tail = self.log_tail(40);
                self.kill();
                return Err(format!(
                    "wrangler dev ({}) did not answer on port {} within {within:?}:\n{tail}",
                    self.target, self.port
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The port of the workerd process that runs the Worker itself, behind
    /// the proxy workerd that `wrangler dev` puts on the public port (the
    /// proxy forwards every request and pumps every WebSocket frame; going
    /// around it measures the runtime without the dev tool's relay). Found
    /// from the process's listening sockets (/proc) and the one that
    /// answers like the Worker (its 404 for an unknown path).
    pub async fn worker_port(&self) -> Option<u16> {
        let inner = crate::machine::group_pids(self.pgid).into_iter().find(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains("workerd") && cmd.contains("entry=127.0.0.1:0 ")
        })?;
        for port in crate::machine::listening_ports(inner) {
            if let Some((404, text)) = http_get(port, "/__bench_ready").await {
                if text.contains("not found") || text.contains("not_found") {
                    return Some(port);
                }
            }
        }
        None
    }

    /// CPU seconds used so far by the runtime (node and workerd).
    pub fn cpu_secs(&self) -> f64 {
        crate::machine::group_cpu_secs(self.pgid)
    }

    /// TERM to the group, up to 5 s to exit, then KILL.
    pub async fn stop(mut self) {
        if self.child.is_some() {
            signal_group(self.pgid, Signal::Term);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        self.kill();
        // Let workerd go before the next runtime starts.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && group_alive(self.pgid) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal_group(self.pgid, Signal::Kill);
            let _ = child.kill();
            let _ = child.wait();
            GROUPS.lock().unwrap().retain(|g| g.0 != self.pgid);
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.kill();
        if std::env::var_os("HOMEROOM_BENCH_KEEP").is_some() {
            eprintln!("kept {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The status of `GET path`, or None when nothing answers.
pub async fn http_status(port: u16, path: &str) -> Option<u16> {
    http_get(port, path).await.map(|(status, _)| status)
}

/// `GET path`: the status and the head and body of the answer (the body
/// as far as `Content-Length` says; a server may keep the connection open).
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    get_with(port, path, "").await
}

/// `GET path` with `headers` (each line ending in CRLF) added.
async fn get_with(port: u16, path: &str, headers: &str) -> Option<(u16, String)> {
    let mut text = String::new();
    let attempt = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = [0u8; 4096];
        loop {
            let n = s.read(&mut buf).await.ok()?;
            if n == 0 {
                return Some(());
            }
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0usize);
                if text.len() >= head_end + 4 + length || text.len() > 64 * 1024 {
                    return Some(());
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), attempt).await;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text))
}

/// `GET path` with the bench's admin key: the JSON body of a 200 answer.
pub async fn admin_json(port: u16, path: &str) -> Option<serde_json::Value> {
    let auth = format!("Authorization: Bearer {BENCH_ADMIN_KEY}\r\n");
    let (status, text) = get_with(port, path, &auth).await?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    (status == 200).then(|| serde_json::from_str(body).ok()).flatten()
}
