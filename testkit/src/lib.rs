//! What the end-to-end tests (`tests/e2e/`) and the benchmark (`bench/`)
//! share to run `wrangler dev`: ports nobody else was given, and the process
//! group a runtime runs in (wrangler, its node children and workerd), to
//! signal it and to know when it is gone.

use std::net::TcpListener;
use std::path::Path;
use std::sync::Mutex;

/// A local `wrangler dev` on ports of its own: where it will listen, and
/// the arguments that say so (callers add theirs: `--var`, `--config`).
#[derive(Debug, Clone)]
pub struct DevArgs {
    /// The public port (wrangler's proxy in front of the Worker).
    pub port: u16,
    /// The DevTools inspector port (never left to its default, 9229, which
    /// two runtimes would both take).
    pub inspector: u16,
    pub args: Vec<String>,
}

/// `wrangler dev` on 127.0.0.1 with fresh ports, persisting to `persist`,
/// without the interactive keys, at `log_level`.
pub fn wrangler_dev(persist: &Path, log_level: &str) -> DevArgs {
    let port = free_port();
    let inspector = free_port();
    let args = [
        "dev",
        "--ip",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--inspector-port",
        &inspector.to_string(),
        "--persist-to",
        &persist.display().to_string(),
        "--show-interactive-dev-session=false",
        "--log-level",
        log_level,
    ]
    .map(str::to_owned)
    .to_vec();
    DevArgs { port, inspector, args }
}

/// The config for a `wrangler dev` of this repository that serves the Wasm already built:
/// `scripts/prebuilt-config` writes it (wrangler.toml without its `[build]`, whose command
/// wrangler runs again when its file watcher is ready, reloading the Worker under whatever
/// runs by then) and this returns its path, relative to `root`.
pub fn prebuilt_config(root: &Path) -> Result<String, String> {
    let out = std::process::Command::new(root.join("scripts/prebuilt-config"))
        .current_dir(root)
        .output()
        .map_err(|e| format!("scripts/prebuilt-config: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    match out.status.success() {
        true => Ok(text),
        false => Err(format!("scripts/prebuilt-config: {}", String::from_utf8_lossy(&out.stderr))),
    }
}

/// A free TCP port on 127.0.0.1, never one this process handed out before,
/// and outside the kernel's ephemeral range (below it, as a rule).
///
/// Why outside: a port picked by binding port 0 comes from the ephemeral
/// range, the same range the kernel draws from for the local end of every
/// outgoing connection (the tests' own clients open thousands) and for the
/// ports workerd binds inside `wrangler dev`. Between our check and
/// wrangler's bind, any of those could take it, and `wrangler dev` then
/// failed with "Address already in use" (seen in CI). Outside the range only
/// a listener can hold a port, and we check for one by binding it (a machine
/// whose ephemeral range leaves no room outside it gets a port-0 pick).
///
/// Why never twice: two runtimes starting at once must not both get a port
/// (one's `--port` as the other's `--inspector-port` made a test talk to the
/// DevTools inspector). The scan starts at a place drawn per process, so that
/// two test processes rarely try the same ports; [`address_in_use`] lets a
/// caller start again on fresh ports if one still loses the race.
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    for range in outside_ephemeral() {
        if let Some(port) = first_free(range, scan_start(), &handed_out) {
            handed_out.push(port);
            return port;
        }
    }
    // A machine whose ephemeral range leaves no room: let the kernel pick.
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("no free port on 127.0.0.1");
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

/// The first port of `range`, scanning round from offset `start`, that is
/// not in `taken` and that nobody listens on (we can bind it).
fn first_free(range: std::ops::Range<u16>, start: u32, taken: &[u16]) -> Option<u16> {
    let span = u32::from(range.end.checked_sub(range.start)?);
    (0..span)
        .map(|i| range.start + ((start % span.max(1) + i) % span) as u16)
        .find(|p| !taken.contains(p) && TcpListener::bind(("127.0.0.1", *p)).is_ok())
}

/// The lowest port [`free_port`] hands out (well above the well-known and
/// registered ports services usually take).
const PORTS_FROM: u16 = 20_000;

/// The kernel's ephemeral range, first and last port (Linux's default,
/// 32768 to 60999, when it cannot be read).
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|p| p.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32_768, 60_999))
}

/// Where [`free_port`] looks, in order: from [`PORTS_FROM`] up to the
/// ephemeral range, then above it; each only if it holds at least 100 ports
/// (some containers give the kernel nearly every port).
fn outside_ephemeral() -> Vec<std::ops::Range<u16>> {
    let (low, high) = ephemeral_range();
    [PORTS_FROM..low, high.saturating_add(1)..u16::MAX]
        .into_iter()
        .filter(|r| r.end > r.start && r.end - r.start >= 100)
        .collect()
}

/// Where this process starts scanning for ports: different per process
/// (std's randomly keyed hasher, fed the pid), the same within one.
fn scan_start() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::OnceLock;
    static START: OnceLock<u32> = OnceLock::new();
    *START.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish() as u32
    })
}

/// Whether a runtime's output says it could not bind a port it was given
/// (another process took the port after [`free_port`] checked it): the
/// caller should start again on fresh ports.
pub fn address_in_use(output: &str) -> bool {
    output.contains("Address already in use") || output.contains("EADDRINUSE")
}

/// A signal for a runtime's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Ask it to stop (wrangler shuts workerd down).
    Term,
    /// Stop it now (a crash, as far as storage is concerned).
    Kill,
}

/// Sends `sig` to every process in group `pgid` (a group this process
/// started with `process_group(0)`); a group already gone is not an error.
pub fn signal_group(pgid: u32, sig: Signal) {
    let sig = match sig {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: kill has no memory preconditions; the negative pid names the
    // process group.
    unsafe {
        libc::kill(-(pgid as i32), sig);
    }
}

/// Whether any process that is not a zombie is left in group `pgid` (read
/// from /proc).
pub fn group_alive(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp ...; comm may contain spaces, so split after ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let _ppid = fields.next();
        let pgrp = fields.next().and_then(|p| p.parse::<u32>().ok());
        pgrp == Some(pgid) && state != Some("Z") && state != Some("X")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_never_handed_out_twice() {
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len());
        // Outside the ephemeral range, where no outgoing connection takes one
        // (when the machine leaves room outside it, as Linux's default does).
        let outside = outside_ephemeral();
        if !outside.is_empty() {
            assert!(ports.iter().all(|p| outside.iter().any(|r| r.contains(p))), "{ports:?}");
        }
    }

    #[test]
    fn a_port_someone_listens_on_is_skipped() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = held.local_addr().unwrap().port();
        let got = first_free(port..port.saturating_add(50), 0, &[]).unwrap();
        assert_ne!(got, port, "the scan starts at the held port and must pass it");
        assert!(got > port);
        // Nor one already handed out.
        let next = first_free(port..port.saturating_add(50), 0, &[got]).unwrap();
        assert!(next != port && next != got);
    }

    #[test]
    fn wranglers_port_clash_is_recognised() {
        let line = "✘ [ERROR] Address already in use (127.0.0.1:42919). Please check that you are not already running a server on this address";
        assert!(address_in_use(line));
        assert!(address_in_use("Error: listen EADDRINUSE: address already in use 127.0.0.1:9229"));
        assert!(!address_in_use("[wrangler:info] Ready on http://127.0.0.1:8787"));
    }

    #[test]
    fn dev_args_name_two_distinct_ports_and_the_state_dir() {
        let dev = wrangler_dev(Path::new("/tmp/state"), "warn");
        assert_ne!(dev.port, dev.inspector);
        let after = |flag: &str| {
            let i = dev.args.iter().position(|a| a == flag).expect(flag);
            dev.args[i + 1].clone()
        };
        assert_eq!(after("--port"), dev.port.to_string());
        assert_eq!(after("--inspector-port"), dev.inspector.to_string());
        assert_eq!(after("--persist-to"), "/tmp/state");
        assert_eq!((dev.args[0].as_str(), after("--log-level").as_str()), ("dev", "warn"));
    }

    #[test]
    fn a_group_is_alive_until_killed() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep runs");
        let pgid = child.id();
        assert!(group_alive(pgid));
        signal_group(pgid, Signal::Kill);
        child.wait().expect("reaped");
        assert!(!group_alive(pgid), "a killed and reaped group is gone");
    }
}
