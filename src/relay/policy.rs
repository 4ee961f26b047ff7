//! [`Policy`]: when a room of a kind with relays takes its new connects through them, and
//! which relay a client's session belongs to. The edge keeps no state, so both answers are
//! functions of what a connect carries (the room's member count, known to the home; the
//! client's region and session, known to the edge).

/// When a room is relayed, from `RELAY_ABOVE`: at `above` members the home starts sending new
/// connects to relays, and goes back to taking them itself below half of that (the hysteresis
/// keeps a room near the threshold from flapping). `above == 0`: every connect of the kind
/// goes through a relay.
///
/// ```
/// use homeroom::relay::Policy;
///
/// let policy = Policy { above: 1000 };
/// assert!(!policy.relayed(false, 999));
/// assert!(policy.relayed(false, 1000));
/// assert!(policy.relayed(true, 500)); // relayed until below half
/// assert!(!policy.relayed(true, 499));
/// assert!(Policy { above: 0 }.relayed(false, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub above: u64,
}

impl Policy {
    /// Whether a room with `members` connections takes new connects through relays, given
    /// whether it did until now (`was`).
    pub fn relayed(&self, was: bool, members: usize) -> bool {
        let members = members as u64;
        match (self.above, was) {
            (0, _) => true,
            (above, false) => members >= above,
            (above, true) => members >= above / 2,
        }
    }
}

/// The relay a session of `region` belongs to, one of `shards` per region (at least one):
/// `{region}-{shard}`, the shard a hash of the session, so that a resume (the same session
/// from the same region) lands on the same relay.
///
/// ```
/// use homeroom::relay::relay_for;
///
/// assert_eq!(relay_for("EU", "s-ann1", 1), "EU-0");
/// assert_eq!(relay_for("EU", "s-ann1", 4), relay_for("EU", "s-ann1", 4));
/// assert!(relay_for("OC", "s-bob2", 4).starts_with("OC-"));
/// ```
pub fn relay_for(region: &str, session: &str, shards: u64) -> String {
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let hash = session
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("{region}-{}", hash % shards.max(1))
}

/// Whether `name` is a relay's name as [`relay_for`] makes them: a region, `-`, a shard.
///
/// ```
/// use homeroom::relay::valid_relay;
///
/// assert!(valid_relay("EU-0"));
/// assert!(valid_relay("oc-syd-12"));
/// assert!(!valid_relay("EU"));
/// assert!(!valid_relay("EU-x"));
/// assert!(!valid_relay("E U-0"));
/// ```
pub fn valid_relay(name: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(region, shard)| {
        crate::edge::regions::valid_region(region)
            && !shard.is_empty()
            && shard.len() <= 2
            && shard.bytes().all(|b| b.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_spread_sessions_and_keep_each_in_one_place() {
        let names: std::collections::BTreeSet<String> =
            (0..200).map(|i| relay_for("EU", &format!("s-{i}"), 4)).collect();
        assert_eq!(names.len(), 4, "200 sessions over 4 shards use every shard: {names:?}");
        for i in 0..50 {
            let s = format!("s-{i}");
            assert_eq!(relay_for("EU", &s, 4), relay_for("EU", &s, 4));
        }
    }

    #[test]
    fn a_room_near_the_threshold_does_not_flap() {
        let p = Policy { above: 10 };
        let mut relayed = false;
        let mut changes = 0;
        for members in [9, 10, 9, 8, 6, 5, 6, 9, 10, 4, 5] {
            let next = p.relayed(relayed, members);
            changes += usize::from(next != relayed);
            relayed = next;
        }
        // On at 10, off at 4, on at... never again within the run.
        assert_eq!(changes, 2);
        assert!(!relayed);
    }
}
