//! The rooms under test: homeroom (its own protocol) and the two baselines,
//! which only broadcast the text they receive. Where each lives and how a
//! client reaches it.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// homeroom itself: sequencing, storage, acks, resume.
    Homeroom,
    /// homeroom with every connect through the relay of its region
    /// (`RELAY_ABOVE=0`): the home sends each frame once per relay.
    Relayed,
    /// homeroom hosting rules that inspect every publish: the chat example's
    /// (a `text` check and a per-user quota), at `/chat/...` of the same Worker.
    Rules,
    /// The smallest hibernating Durable Object room in plain JavaScript.
    Plain,
    /// The plain room writing each message to SQLite before the broadcast:
    /// the runtime's own limit for a room that stores before it shows.
    PlainDurable,
    /// The same room on the `partyserver` npm package.
    Partyserver,
    /// The plain room's object written in Rust through workers-rs's `durable_object`
    /// (bench/baselines/rust-floor): what a connect and a frame cost a Rust object before any
    /// of homeroom's work. In the per-object rounds only (not in [`Target::ALL`]).
    PlainRust,
    /// The plain room answering each connect with one text the size of homeroom's welcome
    /// (bench/baselines/plain-welcome): the runtime's own cost of a connect that must tell its
    /// member something. In the per-object rounds only (not in [`Target::ALL`]).
    PlainWelcome,
    /// homeroom's document kind (`/docs/{room}`, y-protocols), in the documents rounds only.
    Document,
    /// A Yjs document on `y-partyserver` with an SQLite `onSave` (bench/baselines/y-partyserver),
    /// in the documents rounds only.
    YPartyserver,
}

/// What the load generator speaks to a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// PROTOCOL.md: welcome, publish/ack/message with seq, signals, batches, resume.
    Homeroom,
    /// Text in, the same text to every socket (sender included).
    Raw,
    /// y-protocols (sync and awareness), binary.
    Yjs,
}

impl Target {
    pub const ALL: [Target; 6] = [
        Target::Homeroom,
        Target::Relayed,
        Target::Rules,
        Target::Plain,
        Target::PlainDurable,
        Target::Partyserver,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::Homeroom => "homeroom",
            Target::Relayed => "homeroom-relayed",
            Target::Rules => "homeroom-rules",
            Target::Plain => "plain",
            Target::PlainDurable => "plain-durable",
            Target::Partyserver => "partyserver",
            Target::PlainRust => "plain-rust",
            Target::PlainWelcome => "plain-welcome",
            Target::Document => "homeroom-document",
            Target::YPartyserver => "y-partyserver",
        }
    }

    pub fn parse(name: &str) -> Result<Target, String> {
        let all = Target::ALL.into_iter().chain([Target::PlainRust, Target::PlainWelcome]);
        all.into_iter().find(|t| t.name() == name).ok_or_else(|| {
            format!(
                "unknown target {name:?} (homeroom, homeroom-relayed, homeroom-rules, plain, plain-durable, partyserver, plain-rust, plain-welcome)"
            )
        })
    }

    pub fn protocol(self) -> Protocol {
        match self {
            Target::Homeroom | Target::Relayed | Target::Rules => Protocol::Homeroom,
            Target::Plain
            | Target::PlainDurable
            | Target::Partyserver
            | Target::PlainRust
            | Target::PlainWelcome => Protocol::Raw,
            Target::Document | Target::YPartyserver => Protocol::Yjs,
        }
    }

    /// The variables the target adds to its runtime's (after the bench's own).
    pub fn vars(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Target::Relayed => &[("RELAY_ABOVE", "0")],
            // The direct room stays direct at any size the bench makes (by default a room of
            // over 1,000 members is relayed: the storm's 2,000 were half relayed, and after
            // the drop all of them, in what was meant as the direct baseline).
            Target::Homeroom => &[("RELAY_ABOVE", "1000000")],
            _ => &[],
        }
    }

    /// The wrangler config, relative to the repository root.
    pub fn wrangler_config(self) -> &'static str {
        match self {
            Target::Homeroom | Target::Relayed | Target::Rules | Target::Document => {
                "wrangler.toml"
            }
            Target::YPartyserver => "bench/baselines/y-partyserver/wrangler.toml",
            Target::Plain => "bench/baselines/plain/wrangler.toml",
            Target::PlainDurable => "bench/baselines/plain-durable/wrangler.toml",
            Target::Partyserver => "bench/baselines/partyserver/wrangler.toml",
            Target::PlainRust => "bench/baselines/rust-floor/wrangler.toml",
            Target::PlainWelcome => "bench/baselines/plain-welcome/wrangler.toml",
        }
    }

    /// The WebSocket path and query for one connection; `resume` is
    /// `(since, epoch)` (homeroom only).
    pub fn ws_path(self, room: &str, session: &str, resume: Option<(u64, &str)>) -> String {
        match self {
            Target::Homeroom | Target::Relayed | Target::Rules => {
                let kind = if self == Target::Rules { "chat" } else { "rooms" };
                let mut p = format!("/{kind}/{room}/ws?session={session}");
                if let Some((since, epoch)) = resume {
                    p.push_str(&format!("&since={since}&epoch={epoch}"));
                }
                p
            }
            Target::Plain | Target::PlainDurable | Target::PlainRust | Target::PlainWelcome => {
                format!("/rooms/{room}/ws")
            }
            Target::Partyserver => format!("/parties/room/{room}?_pk={session}"),
            Target::Document => format!("/docs/{room}?homeroom=1"),
            Target::YPartyserver => format!("/parties/doc/{room}?_pk={session}"),
        }
    }
}

impl Target {
    /// The room's `/stats` path, for the targets that are homeroom.
    pub fn stats_path(self, room: &str) -> Option<String> {
        match self {
            Target::Homeroom | Target::Relayed => Some(format!("/rooms/{room}/stats")),
            Target::Rules => Some(format!("/chat/{room}/stats")),
            Target::Plain
            | Target::PlainDurable
            | Target::Partyserver
            | Target::PlainRust
            | Target::PlainWelcome
            | Target::Document
            | Target::YPartyserver => None,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a client "connects from": the `MF-CF-Blob` header that sets
/// `request.cf` in `wrangler dev`.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    pub colo: &'static str,
    pub continent: &'static str,
    pub country: &'static str,
}

impl Region {
    pub const SPREAD: [Region; 4] = [
        Region { colo: "SYD", continent: "OC", country: "AU" },
        Region { colo: "LHR", continent: "EU", country: "GB" },
        Region { colo: "IAD", continent: "NA", country: "US" },
        Region { colo: "NRT", continent: "AS", country: "JP" },
    ];

    /// The region of [`Region::SPREAD`] on this continent (`OC`, `EU`, `NA`, `AS`).
    pub fn on(continent: &str) -> Result<Region, String> {
        Region::SPREAD
            .into_iter()
            .find(|r| r.continent.eq_ignore_ascii_case(continent))
            .ok_or_else(|| format!("no region on {continent:?}: OC, EU, NA or AS"))
    }

    pub fn cf_blob(self) -> String {
        format!(
            r#"{{"colo":"{}","continent":"{}","country":"{}"}}"#,
            self.colo, self.continent, self.country
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            Target::Homeroom.ws_path("r", "s-00000001", Some((5, "e-1"))),
            "/rooms/r/ws?session=s-00000001&since=5&epoch=e-1"
        );
        assert_eq!(Target::Plain.ws_path("r", "s", None), "/rooms/r/ws");
        assert_eq!(Target::Rules.ws_path("r", "s-00000001", None), "/chat/r/ws?session=s-00000001");
        assert_eq!(Target::Partyserver.ws_path("r", "s", None), "/parties/room/r?_pk=s");
        assert_eq!(Target::parse("plain").unwrap(), Target::Plain);
        assert!(Target::parse("x").is_err());
        let blob: serde_json::Value = serde_json::from_str(&Region::SPREAD[0].cf_blob()).unwrap();
        assert_eq!(blob["continent"], "OC");
        assert_eq!(Region::on("eu").unwrap().colo, "LHR");
        assert!(Region::on("AF").is_err());
    }
}
