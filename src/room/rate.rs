//! Token buckets: a connection's frames, a user's frames over all their
//! connections, a user's reply bytes; plus the abuse count that turns a
//! persistent flood into a 4029 close; and the meter of events per second.
//! Integer milli-units keep them exact and deterministic.

use super::RoomConfig;

/// What the limiter says about one incoming frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within the rate: apply the frame.
    Allow,
    /// Over the rate: refuse the frame with `rate_limited`.
    Refuse,
    /// Over the rate for too long: close the connection.
    Abuse,
}

/// A token bucket in thousandths of a unit (frames or bytes), so that
/// refills are exact integers at any rate. It may go below empty: a charge
/// for something sent anyway (a welcome, a reply sent after the wait it
/// imposed) is a debt that later costs wait for.
#[derive(Debug, Clone)]
pub struct Bucket {
    /// What the bucket holds at `last_ms` (negative: owed).
    milli: i64,
    last_ms: u64,
}

/// `units` in thousandths, as a level the bucket can hold.
fn milli(units: u64) -> i64 {
    i64::try_from(units.saturating_mul(1000)).unwrap_or(i64::MAX)
}

impl Bucket {
    /// A full bucket of `burst` units at `now`.
    pub fn full(burst: u64, now: u64) -> Bucket {
        Bucket { milli: milli(burst), last_ms: now }
    }

    fn refill(&mut self, per_sec: u64, burst: u64, now: u64) {
        let elapsed = now.saturating_sub(self.last_ms);
        self.last_ms = self.last_ms.max(now);
        // units per second == milli-units per millisecond
        let gained = i64::try_from(elapsed.saturating_mul(per_sec)).unwrap_or(i64::MAX);
        self.milli = self.milli.saturating_add(gained).min(milli(burst));
    }

    /// Takes `cost` units if the bucket holds them.
    pub fn take(&mut self, per_sec: u64, burst: u64, cost: u64, now: u64) -> bool {
        self.refill(per_sec, burst, now);
        let cost = milli(cost);
        if self.milli >= cost {
            self.milli -= cost;
            true
        } else {
            false
        }
    }

    /// How long (ms) until `cost` units are there (0: now), debts paid
    /// first. A cost over the burst never fits whole; it waits for a full
    /// bucket.
    pub fn wait_for(&mut self, per_sec: u64, burst: u64, cost: u64, now: u64) -> u64 {
        self.refill(per_sec, burst, now);
        let want = milli(cost.min(burst));
        let short = u64::try_from(want.saturating_sub(self.milli)).unwrap_or(0);
        short.div_ceil(per_sec.max(1))
    }

    /// When the bucket is full again at `per_sec` (ms), its debts paid.
    pub fn full_at(&self, per_sec: u64, burst: u64) -> u64 {
        let short = u64::try_from(milli(burst).saturating_sub(self.milli)).unwrap_or(0);
        self.last_ms.saturating_add(short.div_ceil(per_sec.max(1)))
    }

    /// Takes `cost` units whatever the bucket holds, into debt if it holds
    /// fewer: a reply the room sends anyway, or after the wait it imposed.
    pub fn charge(&mut self, per_sec: u64, burst: u64, cost: u64, now: u64) {
        self.refill(per_sec, burst, now);
        self.milli = self.milli.saturating_sub(milli(cost));
    }
}

/// One connection's frame budget, plus the abuse count that turns a
/// persistent flood into a 4029 close.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    bucket: Bucket,
    abuse: u64,
    last_ms: u64,
}

impl RateLimiter {
    /// A full bucket at `now`.
    pub fn new(config: &RoomConfig, now: u64) -> Self {
        RateLimiter { bucket: Bucket::full(config.burst, now), abuse: 0, last_ms: now }
    }

    /// Accounts for one frame arriving at `now`.
    pub fn check(&mut self, config: &RoomConfig, now: u64) -> Verdict {
        if self.bucket.take(config.rate_per_sec, config.burst, 1, now) {
            self.drain(config, now);
            return Verdict::Allow;
        }
        self.refused(config, now)
    }

    /// Counts a frame refused for another budget (the user's) against the
    /// abuse count, as if this connection's own budget had refused it.
    pub fn refused(&mut self, config: &RoomConfig, now: u64) -> Verdict {
        self.drain(config, now);
        self.abuse += 1000;
        if self.abuse >= config.abuse_limit * 1000 {
            Verdict::Abuse
        } else {
            Verdict::Refuse
        }
    }

    fn drain(&mut self, config: &RoomConfig, now: u64) {
        let elapsed = now.saturating_sub(self.last_ms);
        self.last_ms = self.last_ms.max(now);
        self.abuse = self.abuse.saturating_sub(elapsed * config.abuse_drain_per_sec);
    }
}

/// Events per second (frames sent, resumes), counted in whole-second buckets.
#[derive(Debug, Default)]
pub struct Meter {
    second: u64,
    this: u64,
    last: u64,
}

impl Meter {
    pub fn add(&mut self, now: u64, n: u64) {
        self.roll(now);
        self.this += n;
    }

    /// The rate over the last full second or the current one, whichever is higher.
    pub fn rate(&mut self, now: u64) -> u64 {
        self.roll(now);
        self.this.max(self.last)
    }

    fn roll(&mut self, now: u64) {
        let second = now / 1000;
        if second != self.second {
            self.last = if second == self.second + 1 { self.this } else { 0 };
            self.this = 0;
            self.second = second;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let c = RoomConfig::default();
        let mut r = RateLimiter::new(&c, 0);
        for _ in 0..50 {
            assert_eq!(r.check(&c, 0), Verdict::Allow);
        }
        assert_eq!(r.check(&c, 0), Verdict::Refuse);
        // 20/s: one token every 50 ms
        assert_eq!(r.check(&c, 49), Verdict::Refuse);
        assert_eq!(r.check(&c, 100), Verdict::Allow);
    }

    #[test]
    fn a_steady_sender_at_the_rate_is_never_refused() {
        let c = RoomConfig::default();
        let mut r = RateLimiter::new(&c, 0);
        for i in 0..10_000 {
            assert_eq!(r.check(&c, i * 50), Verdict::Allow);
        }
    }

    #[test]
    fn a_flood_is_closed_and_a_short_spike_is_not() {
        let c = RoomConfig::default();
        let mut r = RateLimiter::new(&c, 0);
        let mut verdicts = (0..149).map(|_| r.check(&c, 0)).collect::<Vec<_>>();
        assert!(!verdicts.contains(&Verdict::Abuse), "99 refusals are not abuse yet");
        verdicts.push(r.check(&c, 0));
        assert_eq!(verdicts.last(), Some(&Verdict::Abuse));

        let mut r = RateLimiter::new(&c, 0);
        for _ in 0..120 {
            assert_ne!(r.check(&c, 0), Verdict::Abuse);
        }
        // After a quiet 10 s the abuse count has drained away.
        for _ in 0..140 {
            assert_ne!(r.check(&c, 10_000), Verdict::Abuse);
        }
    }

    #[test]
    fn a_byte_bucket_says_how_long_a_cost_must_wait() {
        let mut b = Bucket::full(1000, 0);
        assert!(b.take(100, 1000, 800, 0));
        assert!(!b.take(100, 1000, 800, 0), "200 left");
        assert_eq!(b.wait_for(100, 1000, 800, 0), 6_000, "600 more at 100/s");
        assert_eq!(b.wait_for(100, 1000, 800, 6_000), 0);
        assert_eq!(b.wait_for(100, 1000, 5_000, 6_000), 2_000, "past the burst: a full bucket");
        b.charge(100, 1000, 5_000, 6_000);
        assert_eq!(b.wait_for(100, 1000, 1, 6_000), 42_010, "4,200 owed, then 1 unit");
        assert!(!b.take(100, 1000, 1, 48_000), "still owed at 48 s");
        assert_eq!(b.full_at(100, 1000), 6_000 + 42_000 + 10_000, "debt, then a whole burst");
        assert!(b.take(100, 1000, 1, 48_010), "paid off");
    }
}
