//! The one alarm a room has: which wake-up the adapter was last asked for.

/// Tracks the requested alarm so the engine asks again only when it needs
/// an earlier wake-up (or after the last one fired, or when one long past
/// never fired: the adapter lost the request, e.g. a response that failed
/// after the engine ran, and a room must not wait forever).
#[derive(Debug)]
pub struct Alarm {
    requested: Option<u64>,
    /// How late (ms) a requested wake-up may be before it counts as lost.
    grace: u64,
}

impl Alarm {
    /// A tracker for a timer that may fire up to `grace` ms late.
    pub fn new(grace: u64) -> Alarm {
        Alarm { requested: None, grace }
    }

    /// The engine's earliest deadline is `want`; returns the time to arm the
    /// alarm for, when the requested one does not already cover it. A
    /// requested alarm earlier than needed just fires early, a no-op.
    pub fn want(&mut self, want: Option<u64>, now: u64) -> Option<u64> {
        let want = want?;
        // Saturating: a wake-up may be asked for at the end of time (a rules' timer set there).
        let pending = self.requested.is_some_and(|r| r.saturating_add(self.grace) >= now);
        if pending && self.requested.is_some_and(|r| r <= want) {
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

#[cfg(test)]
mod tests {
    use super::Alarm;

    #[test]
    fn asks_only_for_earlier_wake_ups_until_one_is_overdue() {
        let mut a = Alarm::new(100);
        assert_eq!(a.want(Some(1_000), 0), Some(1_000));
        assert_eq!(a.want(Some(2_000), 500), None, "covered by the pending one");
        assert_eq!(a.want(Some(900), 500), Some(900), "an earlier one is asked for");
        assert_eq!(a.want(Some(2_000), 1_000), None, "late, within the grace");
        assert_eq!(a.want(Some(2_000), 1_001), Some(2_000), "900 never fired: lost");
        a.fired();
        assert_eq!(a.want(None, 3_000), None);
        assert_eq!(a.want(Some(3_000), 3_000), Some(3_000));
    }
}
