//! What the operator sees at `GET /rooms/{room}/stats`: connections by
//! region and message counts since the room was loaded into memory.

use serde::Serialize;

use super::Room;

/// Counters since the engine was (re)built; eviction resets them.
#[derive(Debug, Default, Serialize)]
pub struct Counters {
    /// When counting started (ms).
    pub since: u64,
    /// Messages sequenced.
    pub messages: u64,
    /// Message frames delivered (one per receiving connection).
    pub deliveries: u64,
    /// Deliveries whose sender's region differs from the receiver's.
    pub cross_region: u64,
    /// Signal deliveries shed because the room was over its budget.
    pub signals_dropped: u64,
    /// Signals replaced by a newer one from the same sender and topic.
    pub signals_coalesced: u64,
    /// `batch` frames sent.
    pub batches: u64,
    /// Frames the room sent as catch-ups (replays and resyncs) itself.
    pub catch_up_frames: u64,
    /// Catch-ups a relay sent from its own tail of the log, at the room's word
    /// ([`crate::room::Output::Replay`]), and their frames.
    pub tail_replays: u64,
    pub tail_frames: u64,
    /// Welcomes the room made whole (for sockets of its own, and over links to relays that do
    /// not make them).
    pub welcomes: u64,
    /// Welcomes a relay made from the session's part the room sent it ([`crate::room::Output::Welcome`]).
    pub relay_welcomes: u64,
    /// `state` and `resync` frames a relay sent from its mirror of the state, at the room's word
    /// ([`crate::room::Output::State`]).
    pub mirror_replies: u64,
    /// Ranges of the log the room sent a relay's tail because it lacked them (once per link
    /// and range, however many members resume through it).
    pub tail_fills: u64,
    /// Catch-up replays spread out because resumes came in a storm.
    pub deferred_replays: u64,
    /// Catch-ups and the rules' sends held until the user's reply budget
    /// had their bytes.
    pub held_replies: u64,
    /// Frames refused for a connection's or a user's budget.
    pub rate_limited: u64,
    /// Connects refused (session of another user, blocked, too many
    /// connections, connecting too fast, expired token).
    pub refused_opens: u64,
    /// Of those, connects refused because the user's connect budget was
    /// spent (4429 `connect_rate`).
    pub paced_connects: u64,
    /// Sends of the rules to a member that the reply budget of the member
    /// whose action caused them could not pay for, dropped (a send is
    /// ephemeral); sends to the one who caused them wait instead.
    pub rule_sends_dropped: u64,
    /// Member lists (`GET /presence`) refused: the reader was blocked, or
    /// their reply budget was spent.
    pub refused_reads: u64,
    /// Connections closed because their token expired.
    pub expired: u64,
    /// Connections closed because too much waited for them (4013).
    pub backlog_closes: u64,
    /// Of those, connections closed because they confirmed nothing for
    /// `echo_deadline_ms` while frames waited (a stuck reader).
    pub stalled_closes: u64,
    /// Things the rules asked for that the room could not do, and the last.
    pub rule_problems: u64,
    pub last_rule_problem: Option<String>,
}

impl Counters {
    pub fn since(now: u64) -> Counters {
        Counters { since: now, ..Counters::default() }
    }
}

impl Room {
    /// The stats as JSON.
    pub fn stats_json(&mut self) -> String {
        let outbound_per_sec = self.outbound.rate(self.now);
        let frames_per_sec = self.asked.rate(self.now);
        let c = &self.stats;
        let ratio =
            if c.deliveries == 0 { 0.0 } else { c.cross_region as f64 / c.deliveries as f64 };
        let regions: std::collections::BTreeMap<&str, usize> =
            self.presence.regions().iter().map(|(r, n)| (r.as_str(), *n)).collect();
        let mut stats = serde_json::json!({
            "room": self.name,
            "epoch": self.epoch,
            "home": self.home,
            "seq": self.seq,
            "connections": self.conns.len(),
            "members": self.presence.len(),
            "connections_by_region": regions,
            "counted_since": c.since,
            "messages": c.messages,
            "deliveries": c.deliveries,
            "cross_region_deliveries": c.cross_region,
            "cross_region_ratio": ratio,
            "outbound_per_sec": outbound_per_sec,
            "frames_per_sec": frames_per_sec,
            "signals_dropped": c.signals_dropped,
            "signals_coalesced": c.signals_coalesced,
            "batches": c.batches,
            "catch_up_frames": c.catch_up_frames,
            "tail_replays": c.tail_replays,
            "tail_frames": c.tail_frames,
            "tail_fills": c.tail_fills,
            "deferred_replays": c.deferred_replays,
            "held_replies": c.held_replies,
            "rate_limited": c.rate_limited,
            "refused_opens": c.refused_opens,
            "paced_connects": c.paced_connects,
            "rule_sends_dropped": c.rule_sends_dropped,
            "refused_reads": c.refused_reads,
            "expired": c.expired,
            "backlog_closes": c.backlog_closes,
            "stalled_closes": c.stalled_closes,
            "rule_problems": c.rule_problems,
            "last_rule_problem": c.last_rule_problem,
            "rule_timers": self.timers.len(),
            "users": self.users.len(),
            "users_without_connections": self.users.absent(),
            "most_connections_of_a_user": self.users.most_conns(),
            "blocked_users": self.users.blocked_count(self.now),
            "waiting_bytes": self.conns.values().map(|c| c.out.bytes()).sum::<u64>(),
            "unconfirmed_bytes": self.conns.values().map(|c| c.flow.unconfirmed()).sum::<u64>(),
            "limits": &self.limits,
        });
        // What the room left to its relays to make (one `json!` holds only so many fields).
        stats["welcomes"] = c.welcomes.into();
        stats["relay_welcomes"] = c.relay_welcomes.into();
        stats["mirror_replies"] = c.mirror_replies.into();
        stats.to_string()
    }
}
