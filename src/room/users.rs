//! What the room keeps per user, over all of that user's connections: how
//! many sockets they hold, their frame budget, their reply-byte budget, and
//! the blocks the operator set. One user opening more sockets gets no more
//! of the room than one socket's worth times a small factor, and closing
//! them all and reconnecting gets no fresh budget: a user's budgets outlive
//! their last connection until they would have refilled anyway.

use std::collections::HashMap;

use super::rate::Bucket;
use super::RoomConfig;

/// One user's share of the room.
#[derive(Debug)]
pub struct UserBudget {
    /// Connections the room counts for this user.
    pub conns: usize,
    /// When their last connection went (while they have none).
    left_at: Option<u64>,
    /// Frames over all their connections.
    frames: Bucket,
    /// Bytes of `state`/`resync` replies and catch-up replays.
    replies: Bucket,
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

    /// The most connections any one user holds.
    pub fn most_conns(&self) -> usize {
        self.present.values().map(|u| u.conns).max().unwrap_or(0)
    }

    /// A connection of `user` was added: their budgets, as they left them
    /// if they were here lately.
    pub fn add(&mut self, config: &RoomConfig, user: &str, now: u64) {
        if self.absent > 64 {
            self.forget_refilled(config, now);
        }
        match self.present.get_mut(user) {
            Some(u) => {
                if u.left_at.take().is_some() {
                    self.absent -= 1;
                }
                u.conns += 1;
            }
            None => {
                let budget = UserBudget {
                    conns: 1,
                    left_at: None,
                    frames: Bucket::full(config.user_burst, now),
                    replies: Bucket::full(config.reply_burst_bytes, now),
                };
                self.present.insert(user.to_owned(), budget);
            }
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
    /// time to refill completely: a new budget for them is the same.
    pub fn forget_refilled(&mut self, config: &RoomConfig, now: u64) {
        let frames = config.user_burst * 1000 / config.user_rate_per_sec.max(1);
        let replies = config.reply_burst_bytes * 1000 / config.reply_bytes_per_sec.max(1);
        let refill = frames.max(replies) + 1;
        let before = self.present.len();
        self.present.retain(|_, u| u.left_at.is_none_or(|at| now.saturating_sub(at) < refill));
        self.absent -= before - self.present.len();
    }

    /// Takes one frame from `user`'s budget.
    pub fn frame(&mut self, config: &RoomConfig, user: &str, now: u64) -> bool {
        match self.present.get_mut(user) {
            Some(u) => u.frames.take(config.user_rate_per_sec, config.user_burst, 1, now),
            None => true,
        }
    }

    /// Takes `bytes` of reply from `user`'s budget, if it holds them.
    pub fn reply(&mut self, config: &RoomConfig, user: &str, bytes: u64, now: u64) -> bool {
        match self.present.get_mut(user) {
            Some(u) => {
                u.replies.take(config.reply_bytes_per_sec, config.reply_burst_bytes, bytes, now)
            }
            None => true,
        }
    }

    /// How long `user` must wait until `bytes` of reply fit; charges them
    /// (the reply will go out after that wait, whatever happens meanwhile).
    pub fn reply_after(&mut self, config: &RoomConfig, user: &str, bytes: u64, now: u64) -> u64 {
        let (rate, burst) = (config.reply_bytes_per_sec, config.reply_burst_bytes);
        match self.present.get_mut(user) {
            Some(u) => {
                let wait = u.replies.wait_for(rate, burst, bytes, now);
                u.replies.charge(rate, burst, bytes, now + wait);
                wait
            }
            None => 0,
        }
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
        u.remove("eve", 10);
        // Once they would have refilled anyway, they are forgotten.
        let refill = c.reply_burst_bytes * 1000 / c.reply_bytes_per_sec;
        u.forget_refilled(&c, 10 + refill - 1);
        assert_eq!(u.present.len(), 1);
        u.forget_refilled(&c, 10 + refill + 1);
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
