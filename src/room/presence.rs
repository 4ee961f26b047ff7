//! Who is in the room: members keyed by session (one per tab, never one per
//! socket), and the per-region counts derived from them.

use std::collections::{BTreeMap, HashMap};

use serde_json::value::RawValue;

use crate::protocol::server::{self, RegionCount, Summary};

/// A present session and the connection that currently carries it.
#[derive(Debug, Clone)]
pub struct Member {
    pub conn: String,
    pub user: String,
    pub region: String,
    pub state: Box<RawValue>,
    /// When the session joined (ms); kept across supersedes.
    pub since: u64,
    /// When its current connection opened (ms).
    pub opened: u64,
    /// Verified information the room's rules attached when it joined.
    pub info: Option<Box<RawValue>>,
    /// The health canary, whom the rules never hear of.
    pub canary: bool,
}

impl Member {
    pub fn view(&self) -> server::Member<'_> {
        server::Member {
            user: &self.user,
            region: &self.region,
            state: &self.state,
            since: self.since,
            info: self.info.as_deref(),
        }
    }
}

/// When the last `summary` went out and what it said, so that the next one
/// is sent only when the counts changed and the interval has passed.
#[derive(Debug, Default)]
pub struct SummaryThrottle {
    pub sent: Option<Summary>,
    pub sent_at: Option<u64>,
    /// A summary is held back until then.
    pub due: Option<u64>,
    /// Connections welcomed since `sent` with other counts than it: they
    /// get the next summary even when it equals `sent`.
    pub behind: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Presence {
    members: BTreeMap<String, Member>,
    /// Members per region, kept as members come and go so that stats need
    /// no scan.
    by_region: HashMap<String, usize>,
    /// Members per user, and per region the members of each user: the
    /// distinct-user counts of a summary without a scan of every member (a
    /// summary goes into every welcome, so a scan made joins O(n²)).
    users: Tally,
    region_users: HashMap<String, Tally>,
}

/// How many members each user has (a user with two tabs counts once).
type Tally = HashMap<String, usize>;

fn count(tally: &mut Tally, user: &str) {
    match tally.get_mut(user) {
        Some(n) => *n += 1,
        None => {
            tally.insert(user.to_owned(), 1);
        }
    }
}

/// Removes one member of `user`; true when the user has none left.
fn uncount(tally: &mut Tally, user: &str) -> bool {
    let Some(n) = tally.get_mut(user) else {
        return tally.is_empty();
    };
    *n -= 1;
    if *n == 0 {
        tally.remove(user);
    }
    tally.is_empty()
}

impl Presence {
    pub fn get(&self, session: &str) -> Option<&Member> {
        self.members.get(session)
    }

    /// Replaces a member's presence state; returns the updated member.
    pub fn set_state(&mut self, session: &str, state: Box<RawValue>) -> Option<&Member> {
        let member = self.members.get_mut(session)?;
        member.state = state;
        Some(member)
    }

    pub fn insert(&mut self, session: String, member: Member) -> Option<Member> {
        *self.by_region.entry(member.region.clone()).or_default() += 1;
        count(&mut self.users, &member.user);
        count(self.region_users.entry(member.region.clone()).or_default(), &member.user);
        let old = self.members.insert(session, member);
        if let Some(old) = &old {
            self.forget(old.region.clone(), old.user.clone());
        }
        old
    }

    pub fn remove(&mut self, session: &str) -> Option<Member> {
        let old = self.members.remove(session);
        if let Some(old) = &old {
            self.forget(old.region.clone(), old.user.clone());
        }
        old
    }

    /// Removes every member at once (a drain).
    /// Every (session, user) present.
    pub fn sessions(&self) -> Vec<(String, String)> {
        self.members.iter().map(|(s, m)| (s.clone(), m.user.clone())).collect()
    }

    pub fn clear(&mut self) {
        self.members.clear();
        self.by_region.clear();
        self.users.clear();
        self.region_users.clear();
    }

    /// Members connected from `region`.
    pub fn in_region(&self, region: &str) -> usize {
        self.by_region.get(region).copied().unwrap_or(0)
    }

    /// Members per region.
    pub fn regions(&self) -> &HashMap<String, usize> {
        &self.by_region
    }

    fn forget(&mut self, region: String, user: String) {
        if let Some(n) = self.by_region.get_mut(&region) {
            *n -= 1;
            if *n == 0 {
                self.by_region.remove(&region);
            }
        }
        uncount(&mut self.users, &user);
        if self.region_users.get_mut(&region).is_some_and(|t| uncount(t, &user)) {
            self.region_users.remove(&region);
        }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Every member as the wire shows it.
    pub fn view(&self) -> BTreeMap<&str, server::Member<'_>> {
        self.members.iter().map(|(s, m)| (s.as_str(), m.view())).collect()
    }

    /// Exact counts: members, distinct users, connections, and per region.
    /// O(regions): the counts are kept as members come and go.
    pub fn summary(&self, connections: usize) -> Summary {
        Summary {
            members: self.members.len(),
            users: self.users.len(),
            connections,
            regions: self
                .by_region
                .iter()
                .map(|(r, &members)| {
                    let users = self.region_users.get(r).map_or(0, HashMap::len);
                    (r.clone(), RegionCount { members, users })
                })
                .collect(),
        }
    }

    /// The same counts by a scan of every member: what the kept ones must equal.
    #[cfg(test)]
    pub fn summary_by_scan(&self, connections: usize) -> Summary {
        use std::collections::BTreeSet;
        let mut users = BTreeSet::new();
        let mut regions: BTreeMap<String, (usize, BTreeSet<&str>)> = BTreeMap::new();
        for m in self.members.values() {
            users.insert(m.user.as_str());
            let r = regions.entry(m.region.clone()).or_default();
            r.0 += 1;
            r.1.insert(m.user.as_str());
        }
        Summary {
            members: self.members.len(),
            users: users.len(),
            connections,
            regions: regions
                .into_iter()
                .map(|(r, (members, users))| (r, RegionCount { members, users: users.len() }))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn member(user: u8, region: u8) -> Member {
        Member {
            canary: false,
            conn: "c".into(),
            user: format!("u{user}"),
            region: format!("r{region}"),
            state: RawValue::from_string("{}".into()).unwrap(),
            since: 0,
            opened: 0,
            info: None,
        }
    }

    proptest! {
        /// Joins (new or replacing a session, possibly from another region
        /// or as another user), leaves and drains in any order: the kept
        /// counts always equal a scan of the members.
        #[test]
        fn kept_counts_equal_a_scan(
            ops in prop::collection::vec((0..3u8, 0..6u8, 0..4u8, 0..3u8), 1..200)
        ) {
            let mut p = Presence::default();
            for (op, session, user, region) in ops {
                let session = format!("s{session}");
                match op {
                    0 | 1 => {
                        p.insert(session, member(user, region));
                    }
                    _ if user == 0 && region == 0 => p.clear(),
                    _ => {
                        p.remove(&session);
                    }
                }
                prop_assert_eq!(p.summary(7), p.summary_by_scan(7));
                let scanned: usize = p.summary_by_scan(0).regions.values().map(|r| r.members).sum();
                prop_assert_eq!(p.regions().values().sum::<usize>(), scanned);
            }
        }
    }
}
