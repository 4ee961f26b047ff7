//! The standing attack suite: one module per hole a member with a valid token of their own
//! could use to hurt the others (issue 11; the second round, issue 17, in `holes` and
//! `budgets`), each written as the attacker's sequence against the real runtime and asserting
//! what the victim experiences. `tests/README.md` tables them.

use crate::harness::Spec;

mod amplification;
mod budgets;
mod canary;
mod config;
mod holes;
mod links;
mod memory;
mod recall;
mod rooms;
mod sessions;
mod tokens;
mod users;

/// Every attack trial.
pub fn trials() -> Vec<Spec> {
    [
        sessions::trials(),
        memory::trials(),
        tokens::trials(),
        canary::trials(),
        users::trials(),
        rooms::trials(),
        amplification::trials(),
        config::trials(),
        holes::trials(),
        budgets::trials(),
        links::trials(),
        recall::trials(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Resident memory (KiB) of the workerd processes of the runtime listening on `port`: the
/// process group of the `wrangler dev` started with `--port <port>`. `None` if not found.
pub fn runtime_rss_kb(port: u16) -> Option<u64> {
    let want = format!("--port\0{port}\0");
    let mut pgid = None;
    let mut procs = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).into_owned();
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid pgrp ...: fields after the last ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else { continue };
        let group: Option<u32> = rest.split(' ').nth(2).and_then(|g| g.parse().ok());
        if cmdline.contains("wrangler") && cmdline.contains(&want) {
            pgid = group;
        }
        procs.push((pid, group, cmdline));
    }
    let pgid = pgid?;
    let mut total = 0;
    let mut found = false;
    for (pid, group, cmdline) in procs {
        if group == Some(pgid) && cmdline.contains("workerd") {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let kb = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())?;
            total += kb;
            found = true;
        }
    }
    found.then_some(total)
}
