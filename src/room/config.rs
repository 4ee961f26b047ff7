//! The room's tunables, each declared once: its field, default, meaning, the deployment
//! variable that sets it and its key in the welcome's `limits`. The declaration makes
//! [`RoomConfig`], its `Default`, [`RoomConfig::from_vars`], [`Limits`] and the room's part of
//! [`crate::settings::VARIABLES`]; `tests/settings.rs` holds the README's table and the
//! client's defaults to it.

use serde::Serialize;

use crate::settings::{Shown, Variable};

/// Declares the room's settings. Each line is `field: type = default, doc "meaning"`, then
/// optionally `, var "NAME"` (the deployment variable; `per N` when the variable counts units
/// of N of the field, `zero ok` when 0 is a value) and `, limit key` (announced in the
/// welcome's `limits` under `key`).
macro_rules! room_settings {
    ($(
        $field:ident: $ty:ty = $default:expr, doc $doc:literal
        $(, var $var:literal $(per $unit:literal)? $(zero $zero:ident)?)?
        $(, limit $limit:ident)?;
    )+) => {
        /// Limits and windows of one room. Defaults are the documented ones.
        #[derive(Debug, Clone)]
        pub struct RoomConfig {
            $(#[doc = $doc] pub $field: $ty,)+
        }

        impl Default for RoomConfig {
            fn default() -> Self {
                RoomConfig { $($field: $default,)+ }
            }
        }

        /// The room's settings a client paces itself by, as the welcome (and `/stats`)
        /// announce them.
        #[derive(Debug, Clone, Serialize, PartialEq, Eq)]
        pub struct Limits {
            $($(#[doc = $doc] pub $limit: u64,)?)+
            /// Deepest nesting of `data`, `value` and presence `state`.
            pub max_depth: u64,
        }

        impl Limits {
            /// What `c` announces.
            pub fn of(c: &RoomConfig) -> Limits {
                Limits {
                    $($($limit: c.$field as u64,)?)+
                    max_depth: crate::protocol::client::MAX_DEPTH as u64,
                }
            }
        }

        /// The room's deployment variables.
        pub const ROOM_VARIABLES: &[Variable] = &[
            $($(Variable {
                name: $var,
                default: Shown::Number({
                    let unit: u64 = 1 $(* $unit)?;
                    let default: $ty = $default;
                    default as u64 / unit
                }),
                meaning: $doc,
            },)?)+
        ];

        impl RoomConfig {
            /// Sets each field from its variable, where `var` has one: a positive integer
            /// (or 0 where that is a value), in the variable's unit. A value that is not is
            /// reported and the default kept, so a typo never takes a room down.
            fn read_vars(&mut self, var: &impl Fn(&str) -> Option<String>) -> Vec<String> {
                let mut problems = Vec::new();
                $($(
                    if let Some(text) = var($var) {
                        let unit: u64 = 1 $(* $unit)?;
                        let zero_ok = false $(|| !stringify!($zero).is_empty())?;
                        match text.trim().parse::<u64>() {
                            Ok(n) if n > 0 || zero_ok => self.$field = n.saturating_mul(unit) as $ty,
                            _ => problems.push(format!(
                                "{}={text:?} is not a {} integer; using {}",
                                $var,
                                if zero_ok { "non-negative" } else { "positive" },
                                self.$field as u64 / unit
                            )),
                        }
                    }
                )?)+
                problems
            }
        }
    };
}

room_settings! {
    replay_limit: u64 = 100, doc "most missed messages a resume replays",
        var "REPLAY_LIMIT";
    log_retain: u64 = 1000,
        doc "messages kept in the room log (and deduplicated); never below `REPLAY_LIMIT`",
        var "LOG_RETAIN";
    rate_per_sec: u64 = 20, doc "frames per second per connection",
        var "RATE_PER_SEC", limit rate;
    burst: u64 = 50, doc "burst per connection",
        var "RATE_BURST", limit burst;
    max_frame: usize = 64 * 1024, doc "larger frames close the socket with 1009",
        var "MAX_FRAME_BYTES", limit max_frame;
    link_grace_ms: u64 = 15_000,
        doc "how long after a closed link's last sign of life (a relay that died, hung or was replaced) its members stay, away, while they come back through its next instance, before they leave";
    presence_ttl_ms: u64 = 60_000,
        doc "silence after which a connection is closed (4008) and leaves",
        var "PRESENCE_TTL_MS";
    summary_interval_ms: u64 = 2_000, doc "shortest time between two `summary` frames",
        var "SUMMARY_INTERVAL_MS";
    large_room: usize = 100, doc "above this many members, summaries only",
        var "LARGE_ROOM";
    presence_window_ms: u64 = 50,
        doc "how long a small room's presence changes after the first one coalesce into one diff (0: each at once)",
        var "PRESENCE_WINDOW_MS";
    batch_window_ms: u64 = 50,
        doc "how long signals to one connection coalesce (the latest per sender and topic)",
        var "BATCH_WINDOW_MS";
    batch_above: u64 = 5_000,
        doc "frames asked for per second (before batching) above which durable frames leave batched at the end of the turn",
        var "BATCH_ABOVE";
    outbound_budget: u64 = 50_000,
        doc "frames sent per second (a batch counts once) above which the room sheds signals and holds presence diffs",
        var "OUTBOUND_BUDGET";
    storm_resumes_per_sec: u64 = 50,
        doc "resumes per second above which catch-up replays are spread over 200-2000 ms",
        var "STORM_RESUMES_PER_SEC";
    user_connections: usize = 10, doc "sockets one user may hold in a room (more: 4429)",
        var "USER_CONNECTIONS", limit user_connections;
    user_rate_per_sec: u64 = 40, doc "frames per second per user, over all their sockets",
        var "USER_RATE_PER_SEC", limit user_rate;
    user_burst: u64 = 100, doc "burst per user",
        var "USER_RATE_BURST", limit user_burst;
    user_bytes_per_sec: u64 = 256 * 1024,
        doc "bytes one user may send the room per second, over all their sockets (past it: `rate_limited`): what one member can make every other member read",
        var "USER_BYTES_PER_SEC", limit user_bytes_per_sec;
    user_bytes_burst: u64 = 1024 * 1024,
        doc "burst of a user's bytes (at least the largest frame); with a reader's window and `MAX_BACKLOG_BYTES` it says how many users' bursts at once close a reader (4013)",
        var "USER_BYTES_BURST", limit user_bytes_burst;
    user_connects_per_sec: u64 = 1,
        doc "connects per second one user may make (refused ones count; past it: 4429 `connect_rate`)",
        var "USER_CONNECTS_PER_SEC", limit user_connects_per_sec;
    user_connect_burst: u64 = 20,
        doc "burst of connects per user (a user's ten tabs after a deploy fit)",
        var "USER_CONNECT_BURST", limit user_connect_burst;
    reconnect_rate: u64 = 100,
        doc "connects per second the room asks of its members when it drops them together (1001, 1012): the client spreads its first reconnect over members / this seconds, at most 60",
        var "RECONNECT_RATE", limit reconnect_rate;
    reply_bytes_per_sec: u64 = 256 * 1024,
        doc "bytes one user is sent per second because of what they did: `state`/`resync`/replay, welcomes, the rules' sends, member lists and rules routes read over HTTP (burst 2 MiB, at least the largest state frame)",
        var "REPLY_BYTES_PER_SEC", limit reply_bytes_per_sec;
    send_window: u64 = 1024 * 1024,
        doc "bytes a connection may leave unconfirmed by mark echoes before frames wait in the room (a mark every quarter)",
        var "SEND_WINDOW_BYTES", limit send_window;
    max_backlog: u64 = 4 * 1024 * 1024,
        doc "bytes that may wait in the room for one connection before it is closed with 4013",
        var "MAX_BACKLOG_BYTES";
    echo_deadline_ms: u64 = 60_000,
        doc "a connection whose frames wait behind its window while it confirms nothing for this long is closed with 4013 (a stuck reader)",
        var "ECHO_DEADLINE_MS";
    log_retain_bytes: u64 = 16 * 1024 * 1024,
        doc "the retained log also stays under this many bytes of message data (never below a full replay)",
        var "LOG_RETAIN_BYTES";
    retention_ms: u64 = 90 * 24 * 3600 * 1000,
        doc "an empty room with no write for this long deletes its storage; 0 keeps rooms forever",
        var "ROOM_RETENTION_DAYS" per 86_400_000 zero ok;
    // Not deployment variables: fixed, or made from the others (`RoomConfig::finish`).
    abuse_drain_per_sec: u64 = 10,
        doc "refused frames drain from a connection's abuse count at this rate";
    abuse_limit: u64 = 100, doc "abuse count at which the connection is closed with 4029";
    presence_max: usize = 1024, doc "largest presence state, in bytes of JSON",
        limit presence_max;
    state_max_keys: usize = 1000, doc "most keys the room state may hold";
    state_max_bytes: usize = 1024 * 1024,
        doc "most bytes (keys plus JSON values) the room state may hold";
    batch_max_bytes: usize = 512 * 1024, doc "largest `batch` frame in bytes";
    storm_jitter_ms: (u64, u64) = (200, 2000),
        doc "the spread of a deferred replay: uniformly in [min, max] ms";
    reply_burst_bytes: u64 = 2 * 1024 * 1024,
        doc "the burst of the reply budget; at least the largest state frame";
    mark_every: u64 = 256 * 1024,
        doc "a `mark` goes to a connection after about this many bytes (a quarter window)";
}

impl RoomConfig {
    /// The defaults, overridden by the deployment's variables where set (see
    /// [`ROOM_VARIABLES`]). Returns the config and what was wrong with the variables.
    ///
    /// ```
    /// use homeroom::room::RoomConfig;
    /// let vars = |name: &str| (name == "REPLAY_LIMIT").then(|| "250".to_string());
    /// let (config, problems) = RoomConfig::from_vars(vars);
    /// assert_eq!((config.replay_limit, problems.len()), (250, 0));
    /// ```
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> (RoomConfig, Vec<String>) {
        let mut config = RoomConfig::default();
        let problems = config.read_vars(&var);
        // The log must hold at least what a resume may replay.
        config.log_retain = config.log_retain.max(config.replay_limit);
        config.finish();
        (config, problems)
    }

    /// Derives the settings that follow from others: a mark every quarter
    /// window; a reply burst that fits the largest state frame (or no state
    /// reply could ever be sent); a log byte bound that holds a full replay.
    pub fn finish(&mut self) {
        self.send_window = self.send_window.max(4096);
        self.mark_every = (self.send_window / 4).max(1024);
        let largest_state = self.state_max_bytes as u64 + self.state_max_keys as u64 * 32 + 1024;
        self.reply_burst_bytes = self.reply_burst_bytes.max(largest_state);
        self.user_bytes_burst = self.user_bytes_burst.max(self.max_frame as u64);
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
            "ROOM_RETENTION_DAYS" => Some("0".to_owned()),
            "MAX_FRAME_BYTES" => Some("0".to_owned()),
            _ => None,
        };
        let (c, problems) = RoomConfig::from_vars(vars);
        assert_eq!(c.replay_limit, 250);
        assert_eq!(c.log_retain, 250, "raised to the replay limit");
        assert_eq!(c.rate_per_sec, 20);
        assert_eq!(c.retention_ms, 0, "0 days keeps rooms forever");
        assert_eq!(c.max_frame, 64 * 1024, "0 bytes is no frame limit: refused");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("RATE_PER_SEC"));
        let (c, _) = RoomConfig::from_vars(|n| (n == "ROOM_RETENTION_DAYS").then(|| "2".into()));
        assert_eq!(c.retention_ms, 2 * 86_400_000);
    }
}
