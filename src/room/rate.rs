//! Per-connection token bucket, plus the abuse count that turns a persistent
//! flood into a 4029 close. Integer milli-tokens keep it exact and deterministic.

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

#[derive(Debug, Clone)]
pub struct RateLimiter {
    tokens: u64,
    abuse: u64,
    last_ms: u64,
}

impl RateLimiter {
    /// A full bucket at `now`.
    pub fn new(config: &RoomConfig, now: u64) -> Self {
        RateLimiter { tokens: config.burst * 1000, abuse: 0, last_ms: now }
    }

    /// Accounts for one frame arriving at `now`.
    pub fn check(&mut self, config: &RoomConfig, now: u64) -> Verdict {
        let elapsed = now.saturating_sub(self.last_ms);
        self.last_ms = self.last_ms.max(now);
        // rate per second == milli-tokens per millisecond
        self.tokens = (self.tokens + elapsed * config.rate_per_sec).min(config.burst * 1000);
        self.abuse = self.abuse.saturating_sub(elapsed * config.abuse_drain_per_sec);
        if self.tokens >= 1000 {
            self.tokens -= 1000;
            return Verdict::Allow;
        }
        self.abuse += 1000;
        if self.abuse >= config.abuse_limit * 1000 {
            Verdict::Abuse
        } else {
            Verdict::Refuse
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
}
