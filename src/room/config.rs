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
        }
    }
}
