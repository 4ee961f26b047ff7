//! Who is in the room: members keyed by session (one per tab, never one per
//! socket), and the per-region counts derived from them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

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
}

impl Member {
    pub fn view(&self) -> server::Member<'_> {
        server::Member {
            user: &self.user,
            region: &self.region,
            state: &self.state,
            since: self.since,
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
}

#[derive(Debug, Default)]
pub struct Presence {
    members: BTreeMap<String, Member>,
    /// Members (each with its one connection) per region, kept as members
    /// come and go so that stats need no scan.
    by_region: HashMap<String, usize>,
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
        let old = self.members.insert(session, member);
        if let Some(old) = &old {
            self.forget_region(&old.region);
        }
        old
    }

    pub fn remove(&mut self, session: &str) -> Option<Member> {
        let old = self.members.remove(session);
        if let Some(old) = &old {
            self.forget_region(&old.region);
        }
        old
    }

    /// Removes every member at once (a drain).
    pub fn clear(&mut self) {
        self.members.clear();
        self.by_region.clear();
    }

    /// Members connected from `region`.
    pub fn in_region(&self, region: &str) -> usize {
        self.by_region.get(region).copied().unwrap_or(0)
    }

    /// Members per region.
    pub fn regions(&self) -> &HashMap<String, usize> {
        &self.by_region
    }

    fn forget_region(&mut self, region: &str) {
        if let Some(n) = self.by_region.get_mut(region) {
            *n -= 1;
            if *n == 0 {
                self.by_region.remove(region);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Every member as the wire shows it.
    pub fn view(&self) -> BTreeMap<&str, server::Member<'_>> {
        self.members.iter().map(|(s, m)| (s.as_str(), m.view())).collect()
    }

    /// Exact counts: members, distinct users, connections, and per region.
    pub fn summary(&self, connections: usize) -> Summary {
        let mut users = BTreeSet::new();
        let mut regions: HashMap<&str, (usize, BTreeSet<&str>)> = HashMap::new();
        for m in self.members.values() {
            users.insert(m.user.as_str());
            let r = regions.entry(m.region.as_str()).or_default();
            r.0 += 1;
            r.1.insert(m.user.as_str());
        }
        Summary {
            members: self.members.len(),
            users: users.len(),
            connections,
            regions: regions
                .into_iter()
                .map(|(r, (members, users))| {
                    (r.to_owned(), RegionCount { members, users: users.len() })
                })
                .collect(),
        }
    }
}
