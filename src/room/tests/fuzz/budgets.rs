//! The fuzzer's model of what a member's actions cost (issue 17): token buckets kept the way
//! the engine keeps them, so the fuzzer knows how many frames a connection's own budget must
//! refuse and how many connects a user's budget must turn away; and rules whose sends the
//! fuzzer can attribute to the member who caused them, to hold them to that member's reply
//! budget.

use serde_json::json;
use serde_json::value::RawValue;

use crate::room::rules::{Ctx, Join, Rules, Who, Write};

/// A token bucket in thousandths, as `room::rate::Bucket` refills it (integer, exact).
#[derive(Debug, Clone)]
pub(super) struct ModelBucket {
    milli: u64,
    last: u64,
}

impl ModelBucket {
    pub(super) fn full(burst: u64, now: u64) -> ModelBucket {
        ModelBucket { milli: burst * 1000, last: now }
    }

    /// Takes one unit at `now` if there is one.
    pub(super) fn take(&mut self, per_sec: u64, burst: u64, now: u64) -> bool {
        let elapsed = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        self.milli = (self.milli + elapsed * per_sec).min(burst * 1000);
        if self.milli >= 1000 {
            self.milli -= 1000;
            true
        } else {
            false
        }
    }
}

/// The topic of a publish that makes the rules send its data's session a frame.
pub(super) const POKE: &str = "poke";

/// Rules that send: a newcomer gets `join_blob` bytes (its history, say), and a publish on
/// [`POKE`] sends the session its data names `poke_blob` bytes. Each send says who caused it
/// (`by`), so the fuzzer can add it to that member's account.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sender {
    pub join_blob: usize,
    pub poke_blob: usize,
}

impl Rules for Sender {
    fn join(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
        if self.join_blob > 0 {
            let data = json!({"by": who.user, "blob": "h".repeat(self.join_blob)});
            room.send(who.session, "history", &data);
        }
        Join::Accept
    }

    fn publish(
        &mut self,
        room: &mut Ctx<'_>,
        who: &Who<'_>,
        topic: &str,
        data: &RawValue,
    ) -> Write {
        if topic == POKE {
            if let Ok(to) = serde_json::from_str::<String>(data.get()) {
                let data = json!({"by": who.user, "blob": "p".repeat(self.poke_blob)});
                room.send(&to, POKE, &data);
            }
        }
        Write::Accept
    }
}

/// What the rules sent because of one user, as their receivers counted it.
#[derive(Debug, Clone)]
pub(super) struct Account {
    /// When the user first asked anything of the room (their budget's start), ms.
    pub since: u64,
    /// The room's loads (evictions) before then: each load starts budgets afresh.
    pub loads_then: u64,
    /// Bytes of the rules' sends received.
    pub bytes: u64,
}

impl Account {
    /// The most the reply budget lets the rules send because of this user by `now`, with
    /// `loads` loads of the room so far.
    pub(super) fn bound(&self, burst: u64, per_sec: u64, now: u64, loads: u64) -> u64 {
        let bursts = 1 + loads.saturating_sub(self.loads_then);
        bursts * burst + (now.saturating_sub(self.since) * per_sec).div_ceil(1000)
    }
}
