//! Facts for the results: CPU time used by a process group (the runtime)
//! and by this process (the load generator), the machine, tool versions,
//! the Wasm size and the size of the room's per-connection attachment.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// CPU seconds (user + system) used so far by every live process in group
/// `pgid` (read from /proc).
pub fn group_cpu_secs(pgid: u32) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|stat| parse_stat(&stat))
        .filter(|(pgrp, _)| *pgrp == pgid)
        .map(|(_, ticks)| ticks as f64 / clock_ticks())
        .sum()
}

/// CPU seconds used so far per process of group `pgid`, by role: `node`
/// (wrangler), `proxy` (the workerd that listens on `port` and forwards to
/// the Worker), `workerd` (the one running the Worker and its objects),
/// `other`.
pub fn group_cpu_by_role(pgid: u32, port: u16) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    let entry = format!("entry=127.0.0.1:{port} ");
    for e in dir.flatten() {
        let Some((pgrp, ticks)) =
            std::fs::read_to_string(e.path().join("stat")).ok().and_then(|s| parse_stat(&s))
        else {
            continue;
        };
        if pgrp != pgid {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let role = if cmd.contains("workerd") && cmd.contains(&entry) {
            "proxy"
        } else if cmd.contains("workerd") {
            "workerd"
        } else if cmd.contains("node") {
            "node"
        } else {
            "other"
        };
        *out.entry(role.to_owned()).or_default() += ticks as f64 / clock_ticks();
    }
    out
}

/// CPU seconds all processes of the machine used so far (busy time of
/// every core, from /proc/stat).
pub fn machine_busy_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let f: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest is inside user)
    let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    busy as f64 / clock_ticks()
}

/// CPU seconds used so far by this process (all threads).
pub fn self_cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_stat(&s))
        .map_or(0.0, |(_, ticks)| ticks as f64 / clock_ticks())
}

/// (process group, utime + stime ticks) from a /proc/<pid>/stat line.
fn parse_stat(stat: &str) -> Option<(u32, u64)> {
    // pid (comm) state ppid pgrp ... utime(14) stime(15); comm may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let pgrp = fields.get(2)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((pgrp, utime + stime))
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Raises the open-files soft limit to the hard limit (2,000 sockets need
/// more than the usual 1,024). Returns the limit in force.
pub fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: lim is a valid rlimit for the duration of the calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim = want;
            }
        }
    }
    lim.rlim_cur
}

/// The machine and the tools, for the results' header.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_gib: f64,
    pub kernel: String,
    pub node: String,
    pub rustc: String,
    pub wrangler: String,
    pub workerd: String,
    pub partyserver: String,
}

impl Machine {
    pub fn read(root: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name").map(|r| r.trim_start_matches([' ', '\t', ':']))
            })
            .unwrap_or("unknown")
            .to_owned();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        Machine {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model,
            memory_gib: (mem_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            node: command_version("node", &["--version"]),
            rustc: command_version("rustc", &["--version"]),
            wrangler: package_version(root, "wrangler"),
            workerd: package_version(root, "workerd"),
            partyserver: package_version(root, "partyserver"),
        }
    }
}

fn command_version(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}

/// The `version` of `node_modules/<name>/package.json`.
pub fn package_version(root: &Path, name: &str) -> String {
    std::fs::read_to_string(root.join("node_modules").join(name).join("package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

/// The Worker's Wasm: bytes and bytes after `gzip -9`.
pub fn wasm_size(root: &Path) -> Option<(u64, u64)> {
    let path = root.join("worker/build/index_bg.wasm");
    let raw = std::fs::metadata(&path).ok()?.len();
    let out = Command::new("gzip").args(["-9", "-c"]).arg(&path).output().ok()?;
    out.status.success().then_some((raw, out.stdout.len() as u64))
}

/// The socket attachment homeroom stores per connection: a
/// `homeroom::room::Peer` serialized as JSON, exactly as the Durable Object
/// does (`serde_json::to_string(&peer)` in src/durable/sockets.rs).
#[derive(Debug, Clone, Serialize)]
pub struct Attachment {
    /// A browser tab in anonymous dev mode: session `s-` + 20 characters
    /// (client/src/session.ts), user = session, region `OC`, empty state.
    pub typical: usize,
    /// The same with a small presence state `{"name":"Ada Lovelace","color":"#e91e63"}`.
    pub with_state: usize,
    /// Every name at its limit (session and user 64, region 32), empty state.
    pub longest_names: usize,
    pub example: String,
}

pub fn attachment() -> Attachment {
    use homeroom::room::{Peer, Time};
    use serde_json::value::RawValue;
    let ms = Time::from_ms(1_764_460_000_123);
    let peer = |session: &str, user: &str, region: &str, state: &str| Peer {
        conn: format!("c-{:016x}", 0x0123_4567_89ab_cdefu64),
        session: session.into(),
        user: user.into(),
        region: region.into(),
        opened: ms,
        since: ms,
        seen: ms,
        state: RawValue::from_string(state.into()).expect("valid JSON"),
        // A token's expiry and the connection's mark key, as a deployment has them.
        exp: Some(ms.plus_secs(3_600)),
        key: 0xfedc_ba98_7654_3210,
        info: None,
        canary: false,
        link: None,
        relay_flow: false,
        relay_mirror: false,
        relay_signals: false,
    };
    let session = "s-Xq3v9TzK0bLm2Wc8RyJd";
    let size = |p: &Peer| serde_json::to_string(p).expect("serializes").len();
    let typical = peer(session, session, "OC", "{}");
    let long = "x".repeat(64);
    Attachment {
        typical: size(&typical),
        with_state: size(&peer(
            session,
            session,
            "OC",
            r##"{"name":"Ada Lovelace","color":"#e91e63"}"##,
        )),
        longest_names: size(&peer(&long, &long, &"r".repeat(32), "{}")),
        example: serde_json::to_string(&typical).expect("serializes"),
    }
}

/// The processes of group `pgid`.
pub fn group_pids(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            (parse_stat(&stat)?.0 == pgid).then_some(pid)
        })
        .collect()
}

/// The TCP ports process `pid` listens on (IPv4, from /proc/net/tcp and its fds).
pub fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            if f.get(3) != Some(&"0A") || !inodes.iter().any(|i| Some(&i.as_str()) == f.get(9)) {
                return None;
            }
            u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_spaces_in_the_name() {
        let line = "123 (work erd) S 1 77 77 0 -1 4194560 10 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(parse_stat(line), Some((77, 300)));
        assert!(self_cpu_secs() >= 0.0);
    }

    #[test]
    fn attachment_is_the_peer_json() {
        let a = attachment();
        let v: serde_json::Value = serde_json::from_str(&a.example).unwrap();
        assert_eq!(v["session"], "s-Xq3v9TzK0bLm2Wc8RyJd");
        assert_eq!(a.typical, a.example.len());
        assert!(a.with_state > a.typical && a.longest_names > a.typical);
        eprintln!("attachment bytes: {a:?}");
    }
}
