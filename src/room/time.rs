//! [`Time`]: a moment as the engine and the rules see it, so its unit lives in its type and not
//! in every doc comment. The engine has no clock: the adapter reads one and passes the time in.

use serde::{Deserialize, Serialize};

/// A moment, in whole milliseconds since the Unix epoch (what `Date.now()` gives, and the
/// unit of every `ts` on the wire). Arithmetic saturates: no moment is before the epoch or
/// past `u64::MAX` ms, so a far deadline never wraps to the past.
///
/// ```
/// use homeroom::room::Time;
/// let opened = Time::from_ms(1_700_000_000_000);
/// let closes = opened.plus_secs(90);
/// assert_eq!(closes.since(opened), 90_000);
/// assert_eq!(opened.since(closes), 0, "never negative");
/// assert!(closes > opened);
/// ```
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Time(u64);

impl Time {
    /// The Unix epoch.
    pub const EPOCH: Time = Time(0);
    /// The last representable moment ("never").
    pub const NEVER: Time = Time(u64::MAX);

    /// The moment `ms` milliseconds after the Unix epoch.
    pub const fn from_ms(ms: u64) -> Time {
        Time(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn ms(self) -> u64 {
        self.0
    }

    /// `ms` milliseconds later.
    pub const fn plus_ms(self, ms: u64) -> Time {
        Time(self.0.saturating_add(ms))
    }

    /// `secs` seconds later.
    pub const fn plus_secs(self, secs: u64) -> Time {
        self.plus_ms(secs.saturating_mul(1000))
    }

    /// `ms` milliseconds earlier (never before the epoch).
    pub const fn minus_ms(self, ms: u64) -> Time {
        Time(self.0.saturating_sub(ms))
    }

    /// Milliseconds from `earlier` to this moment; 0 when `earlier` is not earlier.
    pub const fn since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl std::fmt::Display for Time {
    /// Shown as the milliseconds it is (the wire's `ts`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
