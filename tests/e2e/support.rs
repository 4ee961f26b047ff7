//! Shared test plumbing: the result type, the per-binary context (shared runtime's port and log), unique room/session names, the `check!` macro and small frame accessors.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::client::Dial;
use crate::runtime::Log;

/// Test result: the error is the failure message.
pub type R<T = ()> = Result<T, String>;

/// Fails the test with a message unless `cond` holds.
#[macro_export]
macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// What a test gets: the shared runtime's address and log.
#[derive(Clone)]
pub struct Ctx {
    pub port: u16,
    pub log: Log,
}

impl Ctx {
    pub fn dial(&self, room: &str, session: &str) -> Dial {
        Dial::new(self.port, room, session)
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn suffix() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos =
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let mix = nanos ^ ((std::process::id() as u64) << 40) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    format!("{}{n}", base36(mix % 36u64.pow(6)))
}

fn base36(mut n: u64) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap()
}

/// A room name unique to this run: `{prefix}-{suffix}` (valid room characters only).
pub fn room(prefix: &str) -> String {
    format!("{prefix}-{}", suffix())
}

/// A session name unique to this run (8-64 chars of `A-Za-z0-9_-`).
pub fn session(prefix: &str) -> String {
    format!("s_{prefix}-{}", suffix())
}

/// `seq` of a frame (message, ack, state, resync, welcome).
pub fn seq(f: &Value) -> u64 {
    f["seq"].as_u64().unwrap_or(u64::MAX)
}

pub fn id(f: &Value) -> &str {
    f["id"].as_str().unwrap_or_default()
}

pub fn session_of(f: &Value) -> &str {
    f["session"].as_str().unwrap_or_default()
}

/// Checks that `messages` have seqs `first, first+1, ...` (strictly increasing, no gaps).
pub fn check_contiguous(who: &str, messages: &[Value], first: u64) -> R {
    for (i, m) in messages.iter().enumerate() {
        let want = first + i as u64;
        if seq(m) != want {
            return Err(format!(
                "{who}: message #{i} has seq {} but {want} was expected (strictly increasing, no gaps): {m}",
                seq(m)
            ));
        }
    }
    Ok(())
}
