//! What the room keeps per user, over all of that user's connections: how
//! many sockets they hold, their frame and byte budgets, their reply-byte budget,
//! their connect budget, and the blocks the operator set. One user opening
//! more sockets gets no more of the room than one socket's worth times a
//! small factor, and closing them all and reconnecting gets no fresh budget:
//! a user's budgets outlive their last connection until they would have
//! refilled anyway. A user with no connection at all (one who reads the
//! member list over HTTP, say) is charged the same way.

use std::collections::HashMap;

use super::rate::Bucket;
use super::RoomConfig;

/// Most users without a connection whose spent budgets the room remembers.
/// Past it the ones that left longest ago are forgotten first (they start
/// afresh if they come back): a bound on memory that only a backend minting
/// this many distinct users' tokens can reach.
pub const MAX_ABSENT_USERS: usize = 4096;

/// One user's share of the room.
#[derive(Debug)]
pub struct UserBudget {
    /// Connections the room counts for this user.
    pub conns: usize,
    /// When their last connection went (while they have none).
    left_at: Option<u64>,
    /// Frames over all their connections.
    frames: Bucket,
    /// Bytes of those frames: what the room fans out because of them.
    bytes: Bucket,
    /// Bytes the room sends them because of what they did: `state` and
    /// `resync` replies, catch-up replays, welcomes, the rules' sends, and
    /// member lists read over HTTP.
    replies: Bucket,
    /// Connects, refused ones included.
    connects: Bucket,
}

impl UserBudget {
    /// When all of its buckets are full again (ms).
    fn full_at(&self, c: &RoomConfig) -> u64 {
        let frames = self.frames.full_at(c.user_rate_per_sec, c.user_burst);
        let frames = frames.max(self.bytes.full_at(c.user_bytes_per_sec, c.user_bytes_burst));
        let replies = self.replies.full_at(c.reply_bytes_per_sec, c.reply_burst_bytes);
        let connects = self.connects.full_at(c.user_connects_per_sec, c.user_connect_burst);
        frames.max(replies).max(connects)
    }

    fn full(config: &RoomConfig, now: u64) -> UserBudget {
        UserBudget {
            conns: 0,
            left_at: Some(now),
            frames: Bucket::full(config.user_burst, now),
            bytes: Bucket::full(config.user_bytes_burst, now),
            replies: Bucket::full(config.reply_burst_bytes, now),
            connects: Bucket::full(config.user_connect_burst, now),
        }
    }
}

/// The users of the room, and the ones it refuses for a while.
#[derive(Debug, Default)]
pub struct Users {
    /// Users with connections, and users whose budgets are still refilling.
    present: HashMap<String, UserBudget>,
    /// How many of `present` have no connection.
    absent: usize,
    /// User → when their block ends (ms).
    blocked: HashMap<String, u64>,
}

impl Users {
    /// How many connections `user` holds.
    pub fn conns(&self, user: &str) -> usize {
        self.present.get(user).map_or(0, |u| u.conns)
    }

    /// Distinct users connected.
    pub fn len(&self) -> usize {
        self.present.len() - self.absent
    }

    /// Users the room keeps budgets for without a connection.
    pub fn absent(&self) -> usize {
        self.absent
    }

    /// The most connections any one user holds.
    pub fn most_conns(&self) -> usize {
        self.present.values().map(|u| u.conns).max().unwrap_or(0)
    }

    /// `user`'s budgets: as they left them if they were here lately, else
    /// full ones (a user without a connection, within [`MAX_ABSENT_USERS`]).
    fn budget(&mut self, config: &RoomConfig, user: &str, now: u64) -> &mut UserBudget {
        if !self.present.contains_key(user) {
            if self.absent >= 64 {
                self.forget_refilled(config, now);
            }
            if self.absent >= MAX_ABSENT_USERS {
                self.forget_oldest_absent();
            }
            self.present.insert(user.to_owned(), UserBudget::full(config, now));
            self.absent += 1;
        }
        self.present.get_mut(user).expect("inserted above")
    }

    /// A connection of `user` was added: their budgets, as they left them
    /// if they were here lately.
    pub fn add(&mut self, config: &RoomConfig, user: &str, now: u64) {
        let u = self.budget(config, user, now);
        let was_absent = u.left_at.take().is_some();
        u.conns += 1;
        if was_absent {
            self.absent -= 1;
        }
    }

    /// A connection of `user` went away. The budgets stay after the last one
    /// (until [`Users::forget_refilled`]): leaving is no way to refill them.
    pub fn remove(&mut self, user: &str, now: u64) {
        if let Some(u) = self.present.get_mut(user) {
            u.conns = u.conns.saturating_sub(1);
            if u.conns == 0 && u.left_at.is_none() {
                u.left_at = Some(now);
                self.absent += 1;
            }
        }
    }

    /// Forgets the budgets of users without connections that have had the
    /// time to refill completely, debts included: a new budget for them is
    /// the same.
    pub fn forget_refilled(&mut self, config: &RoomConfig, now: u64) {
        let before = self.present.len();
        self.present.retain(|_, u| u.left_at.is_none() || u.full_at(config) > now);
        self.absent -= before - self.present.len();
    }

    /// Forgets the user without a connection who left longest ago.
    fn forget_oldest_absent(&mut self) {
        let oldest = self
            .present
            .iter()
            .filter_map(|(user, u)| Some((u.left_at?, user)))
            .min()
            .map(|(_, user)| user.clone());
        if let Some(user) = oldest {
            self.present.remove(&user);
            self.absent -= 1;
        }
    }

    /// Takes one frame from `user`'s budget.
    pub fn frame(&mut self, config: &RoomConfig, user: &str, now: u64) -> bool {
        match self.present.get_mut(user) {
            Some(u) => u.frames.take(config.user_rate_per_sec, config.user_burst, 1, now),
            None => true,
        }
    }

    /// Takes a frame's `bytes` from `user`'s byte budget.
    pub fn bytes(&mut self, config: &RoomConfig, user: &str, bytes: u64, now: u64) -> bool {
        let (rate, burst) = (config.user_bytes_per_sec, config.user_bytes_burst);
        match self.present.get_mut(user) {
            Some(u) => u.bytes.take(rate, burst, bytes, now),
            None => true,
        }
    }

    /// Charges `bytes` to `user`'s byte budget whether it holds them or not (into debt): what
    /// the rules wrote because of what the user did.
    pub fn charge_bytes(&mut self, config: &RoomConfig, user: &str, bytes: u64, now: u64) {
        let (rate, burst) = (config.user_bytes_per_sec, config.user_bytes_burst);
        if let Some(u) = self.present.get_mut(user) {
            u.bytes.charge(rate, burst, bytes, now);
        }
    }

    /// Takes one connect from `user`'s connect budget, if it holds one.
    pub fn connect(&mut self, config: &RoomConfig, user: &str, now: u64) -> bool {
        let (rate, burst) = (config.user_connects_per_sec, config.user_connect_burst);
        self.budget(config, user, now).connects.take(rate, burst, 1, now)
    }

    /// Takes `bytes` of reply from `user`'s budget, if it holds them.
    pub fn reply(&mut self, config: &RoomConfig, user: &str, bytes: u64, now: u64) -> bool {
        let (rate, burst) = (config.reply_bytes_per_sec, config.reply_burst_bytes);
        self.budget(config, user, now).replies.take(rate, burst, bytes, now)
    }

    /// How long `user` must wait until `bytes` of reply fit (0: now), without
    /// taking them: what a refused HTTP read tells its caller to wait.
    pub fn reply_wait(&mut self, config: &RoomConfig, user: &str, bytes: u64, now: u64) -> u64 {
        let (rate, burst) = (config.reply_bytes_per_sec, config.reply_burst_bytes);
        self.budget(config, user, now).replies.wait_for(rate, burst, bytes, now)
    }

    /// How long `user` must wait until `bytes` of reply fit; charges them
    /// (the reply will go out after that wait, whatever happens meanwhile).
    /// A reply that goes out at once anyway (a welcome) is charged the same
    /// way: what comes after it waits for the bytes it took.
    pub fn reply_after(&mut self, config: &RoomConfig, user: &str, bytes: u64, now: u64) -> u64 {
        let (rate, burst) = (config.reply_bytes_per_sec, config.reply_burst_bytes);
        let u = self.budget(config, user, now);
        let wait = u.replies.wait_for(rate, burst, bytes, now);
        u.replies.charge(rate, burst, bytes, now);
        wait
    }

    /// Whether `user` is blocked at `now`.
    pub fn blocked(&self, user: &str, now: u64) -> bool {
        self.blocked.get(user).is_some_and(|until| *until > now)
    }

    /// Blocks `user` until `until` (ms), or lifts the block (`None`).
    pub fn block(&mut self, user: &str, until: Option<u64>) {
        match until {
            Some(t) => {
                self.blocked.insert(user.to_owned(), t);
            }
            None => {
                self.blocked.remove(user);
            }
        }
    }

    /// Forgets blocks that ended by `now`.
    pub fn prune_blocks(&mut self, now: u64) {
        self.blocked.retain(|_, until| *until > now);
    }

    /// How many users are blocked now.
    pub fn blocked_count(&self, now: u64) -> usize {
        self.blocked.values().filter(|until| **until > now).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_budget_is_shared_by_their_connections_and_ends_with_them() {
        let c = RoomConfig::default();
        let mut u = Users::default();
        u.add(&c, "ann", 0);
        u.add(&c, "ann", 0);
        assert_eq!(u.conns("ann"), 2);
        let allowed = (0..1000).filter(|_| u.frame(&c, "ann", 0)).count();
        assert_eq!(allowed as u64, c.user_burst, "one burst for both connections");
        u.remove("ann", 0);
        assert!(!u.frame(&c, "ann", 0), "the remaining connection shares the spent budget");
        u.remove("ann", 0);
        assert_eq!(u.len(), 0);
    }

    #[test]
    fn leaving_and_coming_back_refills_nothing() {
        let c = RoomConfig::default();
        let mut u = Users::default();
        u.add(&c, "eve", 0);
        assert!(u.reply(&c, "eve", c.reply_burst_bytes, 0));
        u.remove("eve", 0);
        u.add(&c, "eve", 10);
        assert!(!u.reply(&c, "eve", 100_000, 10), "the spent reply budget is still spent");
        // A reply held for its bytes takes the budget into debt.
        assert!(u.reply_after(&c, "eve", 100_000, 10) > 0);
        u.remove("eve", 10);
        // Once they would have refilled anyway, debts included, they are forgotten: the
        // reply budget was emptied at 0 and owes 100 kB more since 10.
        let refill = (c.reply_burst_bytes + 100_000) * 1000 / c.reply_bytes_per_sec;
        u.forget_refilled(&c, refill - 1);
        assert_eq!(u.present.len(), 1, "still refilling");
        u.forget_refilled(&c, refill + 2);
        assert_eq!((u.present.len(), u.absent), (0, 0));
    }

    #[test]
    fn replies_wait_for_their_bytes() {
        let c = RoomConfig::default();
        let mut u = Users::default();
        u.add(&c, "ann", 0);
        assert!(u.reply(&c, "ann", c.reply_burst_bytes, 0));
        assert!(!u.reply(&c, "ann", 1024, 0));
        let wait = u.reply_after(&c, "ann", c.reply_bytes_per_sec, 0);
        assert_eq!(wait, 1000, "one second of budget");
        assert!(!u.reply(&c, "ann", 1, 1000), "that second was spent on the held reply");
    }

    #[test]
    fn connects_are_paced_and_leaving_does_not_refill_them() {
        let c = RoomConfig::default();
        let mut u = Users::default();
        let allowed = (0..100).filter(|_| u.connect(&c, "eve", 0)).count();
        assert_eq!(allowed as u64, c.user_connect_burst, "a burst of connects");
        assert!(!u.connect(&c, "eve", 999), "then one a second");
        assert!(u.connect(&c, "eve", 1_000));
        // Another user's budget is their own.
        assert!(u.connect(&c, "ann", 1_000));
    }

    #[test]
    fn users_without_connections_are_charged_and_bounded() {
        let c = RoomConfig::default();
        let mut u = Users::default();
        // A reader with no socket pays like anyone else.
        assert!(u.reply(&c, "eve", c.reply_burst_bytes, 0));
        assert!(!u.reply(&c, "eve", 1, 0), "spent, socket or not");
        assert_eq!((u.len(), u.absent()), (0, 1));
        // However many distinct users read, the room keeps at most the bound.
        for i in 0..(MAX_ABSENT_USERS + 100) {
            u.reply(&c, &format!("reader-{i}"), 1, 1);
        }
        assert_eq!(u.absent(), MAX_ABSENT_USERS);
        assert_eq!(u.present.len(), MAX_ABSENT_USERS);
        // A user with a connection is never the one forgotten.
        u.add(&c, "ann", 2);
        for i in 0..200 {
            u.reply(&c, &format!("later-{i}"), 1, 3);
        }
        assert_eq!(u.conns("ann"), 1);
    }

    #[test]
    fn blocks_end_on_time() {
        let mut u = Users::default();
        u.block("eve", Some(5_000));
        assert!(u.blocked("eve", 4_999));
        assert!(!u.blocked("eve", 5_000));
        u.prune_blocks(5_000);
        assert_eq!(u.blocked_count(0), 0);
        u.block("eve", Some(9_000));
        u.block("eve", None);
        assert!(!u.blocked("eve", 0));
    }
}
