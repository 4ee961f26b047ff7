//! The numbers of one run: serializable to JSON (for the suite and
//! scripts) and printable as a short human summary. `problems` lists every
//! correctness expectation the run broke; a clean run has none.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::stats::Pct;

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Report {
    pub scenario: String,
    pub target: String,
    pub room: String,
    pub clients: usize,
    pub publishers: usize,
    /// "rate 20/s" or "flat out, window 16 per publisher".
    pub publish: String,
    pub signal_rate: f64,
    /// The measured window (s).
    pub window_s: f64,
    pub connected: usize,
    /// TCP + upgrade of the first connects.
    pub connect_ms: Pct,
    /// Until the welcome (homeroom only).
    pub welcome_ms: Option<Pct>,
    /// Runtime CPU per connect (ms): its CPU time from the start until every
    /// client was in, divided by the clients.
    pub connect_cpu_ms: Option<f64>,
    /// The same by process: node (wrangler), proxy (wrangler's proxy
    /// workerd in front), workerd (the Worker and its objects).
    pub connect_cpu_ms_by: BTreeMap<String, f64>,
    pub published: u64,
    /// Publishes per publisher (fairness: a room that serves one socket
    /// while the others wait shows [1780, 64, 64, 64]).
    pub per_publisher: Vec<u64>,
    pub acked: u64,
    pub unacked: u64,
    pub resent: u64,
    /// Bench messages delivered to receivers in the measured window.
    pub delivered: u64,
    pub deliveries_per_sec: f64,
    /// Publish → deliver, live messages in the measured window.
    pub latency_ms: Pct,
    /// Per publish (runs at a rate): its first receiver's latency, the
    /// time until the broadcast starts, and its last receiver's.
    pub first_receiver_ms: Option<Pct>,
    pub last_receiver_ms: Option<Pct>,
    pub gaps: u64,
    pub missing: u64,
    pub duplicates: u64,
    pub resyncs: u64,
    pub errors: BTreeMap<String, u64>,
    pub unexpected_closes: u64,
    pub close_codes: BTreeMap<String, u64>,
    pub failed_connects: u64,
    /// Why connects failed, counted (a few reasons at most per client).
    #[serde(default)]
    pub connect_errors: BTreeMap<String, u64>,
    pub signals_sent: u64,
    pub signals_received: u64,
    /// A signal's send to each receipt, while recording.
    #[serde(default)]
    pub signal_ms: Option<Pct>,
    /// Receivers that had every publish at the end.
    pub complete: usize,
    /// CPU cores busy in the measured window: the runtime (node + workerd)
    /// and the load generator.
    pub server_cpu: Option<f64>,
    pub server_cpu_by: BTreeMap<String, f64>,
    pub loadgen_cpu: f64,
    /// Cores busy with anything else on the machine in the window (other
    /// work disturbs the run when this is not near 0).
    pub other_cpu: f64,
    pub storm: Option<StormReport>,
    /// Live-message latency per 500 ms of the measured window: (s into the
    /// window, deliveries, p50 ms, p99 ms).
    pub timeline: Vec<(f64, usize, f64, f64)>,
    /// What the room's home sent and heard in the measured window (homeroom targets: from its
    /// `/stats`); in a storm, the members' window before the drop.
    #[serde(default)]
    pub home_io: Option<HomeIo>,
    /// In a storm, what the home sent and heard from the drop until everyone was back.
    #[serde(default)]
    pub home_io_storm: Option<HomeIo>,
    /// What the home sent and heard while the clients connected (the room is new: its counters
    /// from zero until everyone was in), e.g. how many link messages a storm's joins took.
    #[serde(default)]
    pub home_io_connect: Option<HomeIo>,
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct StormReport {
    pub dropped: u64,
    /// Welcomes after the drop with `resumed: true` / `false`.
    pub resumed: u64,
    pub not_resumed: u64,
    /// Clients that resumed and never saw a gap or a duplicate.
    pub resumed_without_gap: u64,
    /// Clients back (welcome + replay applied) before the end.
    pub back: u64,
    pub replayed: u64,
    /// What the resumed welcomes announced (`missed`), to compare with `replayed`.
    pub missed_announced: u64,
    pub reconnect_ms: Pct,
    /// First drop → the last client back (s).
    pub all_back_s: Option<f64>,
    /// Pre-storm p99 and the threshold for "back to normal" (ms).
    pub pre_p99_ms: f64,
    pub normal_ms: f64,
    /// Live-message latency from the drop on.
    pub storm_latency_ms: Pct,
    /// First drop → all back and latency back to normal (s); None when
    /// either never happened in the run.
    pub settle_s: Option<f64>,
    /// Live-message latency per bucket from the drop on: (s after the drop,
    /// deliveries, p50 ms, p99 ms).
    pub timeline: Vec<(f64, usize, f64, f64)>,
}

impl Report {
    /// Each part's CPU over the window per frame the room delivered in it (µs): `bench/split`'s
    /// per-object figure, and the whole runtime's in a run that started its own.
    pub fn cpu_per_frame_us(&self) -> BTreeMap<String, f64> {
        if self.delivered == 0 {
            return BTreeMap::new();
        }
        let frames = self.delivered as f64;
        self.server_cpu_by
            .iter()
            .map(|(part, cores)| (part.clone(), cores * self.window_s * 1e6 / frames))
            .collect()
    }

    /// A few lines for people.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} / {}: {} clients ({} connected), {} publishers, {}, signals {}/s, {:.1} s window",
            self.scenario,
            self.target,
            self.clients,
            self.connected,
            self.publishers,
            self.publish,
            self.signal_rate,
            self.window_s
        );
        let _ = writeln!(
            s,
            "  connect p50 {:.1} ms p95 {:.1} ms{}",
            self.connect_ms.p50,
            self.connect_ms.p95,
            self.welcome_ms
                .map(|w| format!(" (welcome p50 {:.1} ms p95 {:.1} ms)", w.p50, w.p95))
                .unwrap_or_default()
        );
        if self.connect_cpu_ms.is_some() || !self.connect_cpu_ms_by.is_empty() {
            let _ = writeln!(
                s,
                "  runtime CPU per connect {} ms {}",
                self.connect_cpu_ms.map_or("?".into(), |c| format!("{c:.2}")),
                roles(&self.connect_cpu_ms_by)
            );
        }
        let _ = writeln!(
            s,
            "  deliveries {} = {:.0}/s; latency p50 {:.1} ms p99 {:.1} ms max {:.1} ms",
            self.delivered,
            self.deliveries_per_sec,
            self.latency_ms.p50,
            self.latency_ms.p99,
            self.latency_ms.max
        );
        let per_frame = self.cpu_per_frame_us();
        if !per_frame.is_empty() {
            let _ = writeln!(s, "  runtime CPU per delivered frame (µs) {}", roles(&per_frame));
        }
        if let (Some(f), Some(l)) = (self.first_receiver_ms, self.last_receiver_ms) {
            let _ = writeln!(
                s,
                "  per publish ({}): first receiver p50 {:.1} ms p99 {:.1} ms; last receiver p50 {:.1} ms p99 {:.1} ms",
                f.count, f.p50, f.p99, l.p50, l.p99
            );
        }
        let _ = writeln!(
            s,
            "  published {} {:?} acked {} resent {}; gaps {} (missing {}) duplicates {} resyncs {}; complete {}/{}; signals {} sent {} received",
            self.published,
            self.per_publisher,
            self.acked,
            self.resent,
            self.gaps,
            self.missing,
            self.duplicates,
            self.resyncs,
            self.complete,
            self.connected,
            self.signals_sent,
            self.signals_received
        );
        if let Some(p) = self.signal_ms {
            let _ = writeln!(
                s,
                "  signal latency p50 {:.1} ms p99 {:.1} ms ({} receipts)",
                p.p50, p.p99, p.count
            );
        }
        let _ = writeln!(
            s,
            "  cpu: runtime {} cores {}, load generator {:.2} cores, other {:.2} cores",
            self.server_cpu.map_or("?".into(), |c| format!("{c:.2}")),
            roles(&self.server_cpu_by),
            self.loadgen_cpu,
            self.other_cpu
        );
        let ios = [
            ("connect", self.home_io_connect),
            ("window", self.home_io),
            ("storm", self.home_io_storm),
        ];
        for (when, io) in ios {
            if let Some(io) = io {
                let _ = writeln!(
                    s,
                    "  home ({when}): {} messages, {} socket sends, {} link messages out, {} in, \
                     {} catch-up frames sent, {} catch-ups left to relays' tails, {} welcomes made, \
                     {} left to relays",
                    io.messages,
                    io.socket_sends,
                    io.link_out,
                    io.link_in,
                    io.catch_up_frames,
                    io.tail_replays,
                    io.welcomes,
                    io.relay_welcomes
                );
            }
        }
        if let Some(st) = &self.storm {
            let _ = writeln!(
                s,
                "  storm: dropped {} resumed {} (without gap {}) not resumed {} back {} replayed {}; reconnect p50 {:.1} ms p95 {:.1} ms",
                st.dropped,
                st.resumed,
                st.resumed_without_gap,
                st.not_resumed,
                st.back,
                st.replayed,
                st.reconnect_ms.p50,
                st.reconnect_ms.p95
            );
            let opt = |v: Option<f64>| v.map_or("never".into(), |v| format!("{v:.2} s"));
            let _ = writeln!(
                s,
                "  storm: all back after {}, settled after {} (normal ≤ {:.1} ms, pre p99 {:.1} ms, storm p99 {:.1} ms max {:.1} ms)",
                opt(st.all_back_s),
                opt(st.settle_s),
                st.normal_ms,
                st.pre_p99_ms,
                st.storm_latency_ms.p99,
                st.storm_latency_ms.max
            );
        }
        if self.failed_connects > 0 {
            let _ =
                writeln!(s, "  failed connects {} {:?}", self.failed_connects, self.connect_errors);
        }
        if !self.errors.is_empty() || !self.close_codes.is_empty() {
            let _ = writeln!(s, "  errors {:?} closes {:?}", self.errors, self.close_codes);
        }
        if self.problems.is_empty() {
            let _ = writeln!(s, "  correctness: ok");
        } else {
            for p in &self.problems {
                let _ = writeln!(s, "  PROBLEM: {p}");
            }
        }
        s
    }
}

/// `(workerd 0.81, proxy 0.40, node 0.02)`.
fn roles(by: &BTreeMap<String, f64>) -> String {
    if by.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = by.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
    format!("({})", parts.join(", "))
}

/// The home's counters over a window (`/stats`: `messages` and `io`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct HomeIo {
    /// Durable messages sequenced.
    pub messages: u64,
    /// Texts sent to the home's own sockets (a socket's each).
    pub socket_sends: u64,
    /// Messages sent over relays' links.
    pub link_out: u64,
    /// Messages heard over relays' links.
    pub link_in: u64,
    /// Catch-up frames (replays, resyncs) the home sent itself.
    #[serde(default)]
    pub catch_up_frames: u64,
    /// Catch-ups the home left to a relay's own tail of the log.
    #[serde(default)]
    pub tail_replays: u64,
    /// Welcomes the home made whole, and welcomes it left to relays to make.
    #[serde(default)]
    pub welcomes: u64,
    #[serde(default)]
    pub relay_welcomes: u64,
}

impl HomeIo {
    /// The counters in a `/stats` body.
    pub fn of(stats: &serde_json::Value) -> Option<HomeIo> {
        let io = &stats["io"];
        Some(HomeIo {
            messages: stats["messages"].as_u64()?,
            socket_sends: io["socket_sends"].as_u64()?,
            link_out: io["link_messages_out"].as_u64()?,
            link_in: io["link_messages_in"].as_u64()?,
            // A server from before the relays' tails has neither: 0.
            catch_up_frames: stats["catch_up_frames"].as_u64().unwrap_or(0),
            tail_replays: stats["tail_replays"].as_u64().unwrap_or(0),
            // A server from before the relays' welcomes has neither: 0.
            welcomes: stats["welcomes"].as_u64().unwrap_or(0),
            relay_welcomes: stats["relay_welcomes"].as_u64().unwrap_or(0),
        })
    }

    /// What happened between `self` and `later`.
    pub fn until(self, later: HomeIo) -> HomeIo {
        HomeIo {
            messages: later.messages.saturating_sub(self.messages),
            socket_sends: later.socket_sends.saturating_sub(self.socket_sends),
            link_out: later.link_out.saturating_sub(self.link_out),
            link_in: later.link_in.saturating_sub(self.link_in),
            catch_up_frames: later.catch_up_frames.saturating_sub(self.catch_up_frames),
            tail_replays: later.tail_replays.saturating_sub(self.tail_replays),
            welcomes: later.welcomes.saturating_sub(self.welcomes),
            relay_welcomes: later.relay_welcomes.saturating_sub(self.relay_welcomes),
        }
    }

    /// Texts the home sent (to sockets and links) per durable message.
    pub fn out_per_message(&self) -> Option<f64> {
        (self.messages > 0)
            .then(|| (self.socket_sends + self.link_out) as f64 / self.messages as f64)
    }
}
