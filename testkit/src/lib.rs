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

/// A free TCP port on 127.0.0.1 (bound, then released), never one this
/// process handed out before: the kernel may give a released port out
/// again, and two runtimes starting at once must not both get it (one's
/// `--port` as the other's `--inspector-port` made a test talk to the
/// DevTools inspector).
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
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
