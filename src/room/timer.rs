//! The one alarm a room has: which wake-up the adapter was last asked for.

/// Tracks the requested alarm so the engine asks again only when it needs
/// an earlier wake-up (or after the last one fired).
#[derive(Debug, Default)]
pub struct Alarm {
    requested: Option<u64>,
}

impl Alarm {
    /// The engine's earliest deadline is `want`; returns the time to arm the
    /// alarm for, when the requested one does not already cover it. A
    /// requested alarm earlier than needed just fires early, a no-op.
    pub fn want(&mut self, want: Option<u64>) -> Option<u64> {
        let want = want?;
        if self.requested.is_some_and(|r| r <= want) {
            return None;
        }
        self.requested = Some(want);
        Some(want)
    }

    /// The alarm went off; nothing is requested any more.
    pub fn fired(&mut self) {
        self.requested = None;
    }
}
