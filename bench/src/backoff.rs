//! When a dropped client reconnects, as the browser client does
//! (client/src/backoff.ts): full jitter, delay = random(0, min(20 s,
//! 2 s × 2^attempt)) after an abnormal close; random(0, 1 s) after 1001.
//! And a small PRNG (xorshift64*), so every client draws its own delays.

use std::time::Duration;

pub const BASE_MS: u64 = 2_000;
pub const CAP_MS: u64 = 20_000;
pub const PROMPT_MS: u64 = 1_000;

/// xorshift64*: fast, seedable, good enough for jitter.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, never zero
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, n) (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        (((self.next_u64() >> 11) as u128 * n as u128) >> 53) as u64
    }
}

/// Full jitter after the `attempt`th failure in a row (0 for the first).
pub fn full_jitter(attempt: u32, rng: &mut Rng) -> Duration {
    let window = CAP_MS.min(BASE_MS << attempt.min(10));
    Duration::from_millis(rng.below(window))
}

/// A prompt reconnect (close 1001, the room is being drained on purpose).
pub fn prompt(rng: &mut Rng) -> Duration {
    Duration::from_millis(rng.below(PROMPT_MS))
}

/// What to do after a socket ended with `code` (None: no close frame, a
/// reset or a failed connect). `None` means do not reconnect.
pub fn after_close(code: Option<u16>, attempt: u32, rng: &mut Rng) -> Option<Duration> {
    match code {
        Some(1000) | Some(4001) => None,
        Some(1001) => Some(prompt(rng)),
        Some(4029) => Some(Duration::from_millis(30_000 + rng.below(30_000))),
        _ => Some(full_jitter(attempt, rng)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_grow_to_the_cap_and_spread() {
        let mut rng = Rng::new(7);
        for attempt in 0..12 {
            let window = CAP_MS.min(BASE_MS << attempt.min(10));
            let draws: Vec<u64> =
                (0..2000).map(|_| full_jitter(attempt, &mut rng).as_millis() as u64).collect();
            assert!(draws.iter().all(|d| *d < window));
            let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
            assert!((mean - window as f64 / 2.0).abs() < window as f64 * 0.05, "{attempt}: {mean}");
        }
        assert!(after_close(Some(1000), 0, &mut rng).is_none());
        assert!(after_close(Some(4001), 0, &mut rng).is_none());
        assert!(after_close(Some(1001), 5, &mut rng).unwrap() < Duration::from_secs(1));
        assert!(after_close(None, 0, &mut rng).unwrap() < Duration::from_secs(2));
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
