//! The room's tunables, with the defaults PROTOCOL.md and the issues fix.

/// Limits and windows of one room. Defaults are the documented ones.
#[derive(Debug, Clone)]
pub struct RoomConfig {
    /// Most missed messages a resume replays; past it the client gets `resync`.
    pub replay_limit: u64,
    /// How many of the latest messages the log keeps (and deduplicates ids for).
    pub log_retain: u64,
    /// Largest accepted text frame in bytes; larger closes the socket with 1009.
    pub max_frame: usize,
    /// Sustained frames per second per connection.
    pub rate_per_sec: u64,
    /// Frames a connection may send at once before the rate applies.
    pub burst: u64,
    /// Refused frames drain from a connection's abuse count at this rate.
    pub abuse_drain_per_sec: u64,
    /// Abuse count at which the connection is closed with 4029.
    pub abuse_limit: u64,
    /// Largest presence state, in bytes of JSON.
    pub presence_max: usize,
    /// Most keys the room state may hold.
    pub state_max_keys: usize,
    /// Most bytes (keys plus JSON values) the room state may hold.
    pub state_max_bytes: usize,
    /// A connection with no frame and no answered heartbeat for this long
    /// (ms) is closed and its member leaves.
    pub presence_ttl_ms: u64,
    /// Shortest time between two `summary` frames (ms).
    pub summary_interval_ms: u64,
    /// Above this many members the room sends summaries only.
    pub large_room: usize,
    /// How long frames to one connection coalesce once it is receiving
    /// quickly (ms).
    pub batch_window_ms: u64,
    /// Largest `batch` frame in bytes.
    pub batch_max_bytes: usize,
    /// Outbound frames per second above which durable frames leave at the
    /// end of the turn, batched per connection, instead of one by one.
    pub batch_above: u64,
    /// Outbound frames per second above which the room sheds signals and
    /// holds presence diffs.
    pub outbound_budget: u64,
    /// Resumes per second above which catch-up replays are spread out.
    pub storm_resumes_per_sec: u64,
    /// The spread of a deferred replay: uniformly in [min, max] ms.
    pub storm_jitter_ms: (u64, u64),
    /// Most connections one user may hold in the room at once.
    pub user_connections: usize,
    /// Frames per second one user may send, over all their connections.
    pub user_rate_per_sec: u64,
    /// The burst of the per-user budget.
    pub user_burst: u64,
    /// Connects one user may make per second (refused ones count too), and
    /// the burst of that budget: a user's tabs all reconnecting after a
    /// deploy fit in the burst; a reconnect loop does not.
    pub user_connects_per_sec: u64,
    pub user_connect_burst: u64,
    /// Bytes one user may be sent per second because of what they did:
    /// `state`, `resync` and catch-up replays, welcomes, the rules' sends to
    /// them and member lists they read (each costs its size, not one frame).
    pub reply_bytes_per_sec: u64,
    /// The burst of the reply budget; at least the largest state frame.
    pub reply_burst_bytes: u64,
    /// Bytes a connection may have been sent without confirming them (by
    /// echoing a `mark`); past it, frames wait in the room.
    pub send_window: u64,
    /// A `mark` goes to a connection after about this many bytes.
    pub mark_every: u64,
    /// Bytes that may wait in the room for one connection (its window is
    /// full, or its catch-up is held); past it the socket is closed (4013).
    pub max_backlog: u64,
    /// A connection with frames waiting behind its flow window whose
    /// client confirms nothing for this long (ms) is closed (4013): a
    /// reader that is stuck, not slow (a slow one echoes a mark every
    /// `mark_every` bytes it reads). Checked every 5 s.
    pub echo_deadline_ms: u64,
    /// Longest token lifetime accepted (`exp` at most this far ahead), s.
    pub token_max_ttl_secs: u64,
    /// The retained log also stays under this many bytes of message data.
    pub log_retain_bytes: u64,
    /// A room with no connection and no write for this long (ms) deletes
    /// its storage; 0 keeps rooms forever.
    pub retention_ms: u64,
}

impl Default for RoomConfig {
    fn default() -> Self {
        RoomConfig {
            replay_limit: 100,
            log_retain: 1000,
            max_frame: 64 * 1024,
            rate_per_sec: 20,
            burst: 50,
            abuse_drain_per_sec: 10,
            abuse_limit: 100,
            presence_max: 1024,
            state_max_keys: 1000,
            state_max_bytes: 1024 * 1024,
            presence_ttl_ms: 60_000,
            summary_interval_ms: 2_000,
            large_room: 100,
            batch_window_ms: 50,
            batch_max_bytes: 512 * 1024,
            batch_above: 5_000,
            outbound_budget: 50_000,
            storm_resumes_per_sec: 50,
            storm_jitter_ms: (200, 2000),
            user_connections: 10,
            user_rate_per_sec: 40,
            user_burst: 100,
            user_connects_per_sec: 1,
            user_connect_burst: 20,
            reply_bytes_per_sec: 256 * 1024,
            reply_burst_bytes: 2 * 1024 * 1024,
            send_window: 1024 * 1024,
            mark_every: 256 * 1024,
            max_backlog: 4 * 1024 * 1024,
            echo_deadline_ms: 60_000,
            token_max_ttl_secs: 24 * 3600,
            log_retain_bytes: 16 * 1024 * 1024,
            retention_ms: 90 * 24 * 3600 * 1000,
        }
    }
}

impl RoomConfig {
    /// The defaults, overridden by deployment variables where set
    /// (`REPLAY_LIMIT`, `LOG_RETAIN`, `MAX_FRAME_BYTES`, `RATE_PER_SEC`,
    /// `RATE_BURST`, `PRESENCE_TTL_MS`, `SUMMARY_INTERVAL_MS`, `LARGE_ROOM`,
    /// `BATCH_WINDOW_MS`, `BATCH_ABOVE`, `OUTBOUND_BUDGET`,
    /// `STORM_RESUMES_PER_SEC`, `USER_CONNECTIONS`, `USER_RATE_PER_SEC`,
    /// `USER_RATE_BURST`, `USER_CONNECTS_PER_SEC`, `USER_CONNECT_BURST`,
    /// `REPLY_BYTES_PER_SEC`, `SEND_WINDOW_BYTES`,
    /// `MAX_BACKLOG_BYTES`, `ECHO_DEADLINE_MS`, `TOKEN_MAX_TTL_SECS`, `LOG_RETAIN_BYTES`,
    /// `ROOM_RETENTION_DAYS` (0 allowed: keep forever)). A value that is not
    /// a positive integer is reported and the default kept, so a typo never
    /// takes a room down.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> (RoomConfig, Vec<String>) {
        let mut config = RoomConfig::default();
        let mut problems = Vec::new();
        let mut read = |name: &str, slot: &mut u64| {
            if let Some(text) = var(name) {
                match text.trim().parse::<u64>() {
                    Ok(n) if n > 0 => *slot = n,
                    _ => problems
                        .push(format!("{name}={text:?} is not a positive integer; using {slot}")),
                }
            }
        };
        read("REPLAY_LIMIT", &mut config.replay_limit);
        read("LOG_RETAIN", &mut config.log_retain);
        read("RATE_PER_SEC", &mut config.rate_per_sec);
        read("RATE_BURST", &mut config.burst);
        read("PRESENCE_TTL_MS", &mut config.presence_ttl_ms);
        read("SUMMARY_INTERVAL_MS", &mut config.summary_interval_ms);
        read("BATCH_WINDOW_MS", &mut config.batch_window_ms);
        read("BATCH_ABOVE", &mut config.batch_above);
        read("OUTBOUND_BUDGET", &mut config.outbound_budget);
        read("STORM_RESUMES_PER_SEC", &mut config.storm_resumes_per_sec);
        read("USER_RATE_PER_SEC", &mut config.user_rate_per_sec);
        read("USER_RATE_BURST", &mut config.user_burst);
        read("USER_CONNECTS_PER_SEC", &mut config.user_connects_per_sec);
        read("USER_CONNECT_BURST", &mut config.user_connect_burst);
        read("REPLY_BYTES_PER_SEC", &mut config.reply_bytes_per_sec);
        read("SEND_WINDOW_BYTES", &mut config.send_window);
        read("MAX_BACKLOG_BYTES", &mut config.max_backlog);
        read("ECHO_DEADLINE_MS", &mut config.echo_deadline_ms);
        read("TOKEN_MAX_TTL_SECS", &mut config.token_max_ttl_secs);
        read("LOG_RETAIN_BYTES", &mut config.log_retain_bytes);
        let mut user_connections = config.user_connections as u64;
        read("USER_CONNECTIONS", &mut user_connections);
        config.user_connections = user_connections as usize;
        let mut days = config.retention_ms / (24 * 3600 * 1000);
        match var("ROOM_RETENTION_DAYS").map(|t| t.trim().parse::<u64>()) {
            Some(Ok(0)) => days = 0,
            Some(_) => read("ROOM_RETENTION_DAYS", &mut days),
            None => {}
        }
        config.retention_ms = days.saturating_mul(24 * 3600 * 1000);
        let mut max_frame = config.max_frame as u64;
        read("MAX_FRAME_BYTES", &mut max_frame);
        config.max_frame = max_frame as usize;
        let mut large_room = config.large_room as u64;
        read("LARGE_ROOM", &mut large_room);
        config.large_room = large_room as usize;
        // The log must hold at least what a resume may replay.
        config.log_retain = config.log_retain.max(config.replay_limit);
        config.finish();
        (config, problems)
    }
}

impl RoomConfig {
    /// Derives the settings that follow from others: a mark every quarter
    /// window; a reply burst that fits the largest state frame (or no state
    /// reply could ever be sent); a log byte bound that holds a full replay.
    pub fn finish(&mut self) {
        self.send_window = self.send_window.max(4096);
        self.mark_every = (self.send_window / 4).max(1024);
        let largest_state = self.state_max_bytes as u64 + self.state_max_keys as u64 * 32 + 1024;
        self.reply_burst_bytes = self.reply_burst_bytes.max(largest_state);
        let full_replay = self.replay_limit.saturating_mul(self.max_frame as u64);
        self.log_retain_bytes = self.log_retain_bytes.max(full_replay);
        self.user_connections = self.user_connections.max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vars_override_defaults_and_bad_values_are_reported() {
        let vars = |name: &str| match name {
            "REPLAY_LIMIT" => Some("250".to_owned()),
            "RATE_PER_SEC" => Some("fast".to_owned()),
            "LOG_RETAIN" => Some("10".to_owned()),
            _ => None,
        };
        let (c, problems) = RoomConfig::from_vars(vars);
        assert_eq!(c.replay_limit, 250);
        assert_eq!(c.log_retain, 250, "raised to the replay limit");
        assert_eq!(c.rate_per_sec, 20);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("RATE_PER_SEC"));
    }
}
