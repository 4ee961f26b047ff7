//! The demo's auction, decided by the room: the browser only displays.
//!
//! - State `lot`: `{"title","start","step","ends_at","open","winner"}`; the
//!   rules open a lot when the room is first loaded (and again a while after
//!   one closes, so the demo never stops), and close it at `ends_at` with a
//!   timer: the winner is written by the room and announced on the topic
//!   `auction`.
//! - State `bid`: the top bid. A member bids with `set("bid", {"amount", "name"?})`;
//!   the rules refuse a bid on a closed lot (`auction_closed`), under the
//!   start or under the top bid plus the step (`bid_too_low`), and store
//!   `{"amount","bidder","name","session","region","at","history"}` with the
//!   bidder taken from the member's verified user, never from the value.
//!   No member may write another key (`read_only`).
//! - Topic `chat` is open to members; no other topic exists.
//! - `POST /auction/{room}/open` (admin key, body `{"title"?,"start"?,"step"?,"seconds"?}`)
//!   opens a new lot now; `POST .../close` (admin) closes it now;
//!   `GET .../lot` (anyone) answers the lot and the top bid.
//!
//! Settings (deployment variables): `AUCTION_SECONDS` (a lot's length,
//! default 300), `AUCTION_PAUSE_SECONDS` (the wait before the next lot,
//! default 30; 0: no next lot), `AUCTION_START` (100), `AUCTION_STEP` (10).

use homeroom::room::rules::{Ctx, Current, Refusal, Request, Response, Rules, Vars, Who, Write};
use homeroom::room::LogEntry;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// Bids kept in the top bid's `history`.
const HISTORY: usize = 30;

/// The auction's settings.
#[derive(Debug, Clone)]
pub struct Auction {
    pub seconds: u64,
    pub pause_seconds: u64,
    pub start: u64,
    pub step: u64,
    pub title: String,
}

impl Default for Auction {
    fn default() -> Self {
        Auction {
            seconds: 300,
            pause_seconds: 30,
            start: 100,
            step: 10,
            title: "Lot 17 · Olivetti Valentine typewriter, 1969".into(),
        }
    }
}

/// The lot under the hammer (state key `lot`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Lot {
    pub title: String,
    pub start: u64,
    pub step: u64,
    pub ends_at: u64,
    pub open: bool,
    /// The winning bid, once closed (null when nobody bid).
    pub winner: Option<Value>,
}

impl Auction {
    /// The settings from the deployment's variables.
    pub fn from_vars(vars: &Vars<'_>) -> Auction {
        let d = Auction::default();
        Auction {
            seconds: vars.number("AUCTION_SECONDS", d.seconds).max(1),
            pause_seconds: vars.number("AUCTION_PAUSE_SECONDS", d.pause_seconds),
            start: vars.number("AUCTION_START", d.start),
            step: vars.number("AUCTION_STEP", d.step).max(1),
            ..d
        }
    }

    /// Opens a lot now, for `seconds`: a fresh lot, no bid, a close timer.
    fn open(&self, room: &mut Ctx<'_>, title: &str, start: u64, step: u64, seconds: u64) -> Lot {
        let ends_at = room.now() + seconds * 1000;
        let lot = Lot { title: title.into(), start, step, ends_at, open: true, winner: None };
        room.set("bid", &Value::Null);
        room.set("lot", &lot);
        room.cancel("reopen");
        room.schedule("close", ends_at);
        room.publish("auction", &json!({"event": "opened", "lot": lot}));
        lot
    }

    /// Closes the open lot: the top bid wins; the next lot comes after the
    /// pause. Returns the closed lot (none was open: `None`).
    fn close(&self, room: &mut Ctx<'_>) -> Option<Lot> {
        let mut lot = room.get_as::<Lot>("lot").filter(|l| l.open)?;
        let winner = room.get_as::<Value>("bid").filter(|b| !b.is_null());
        lot.open = false;
        lot.winner = winner.clone();
        room.set("lot", &lot);
        room.cancel("close");
        room.publish("auction", &json!({"event": "closed", "winner": winner}));
        if self.pause_seconds > 0 {
            room.schedule("reopen", room.now() + self.pause_seconds * 1000);
        }
        Some(lot)
    }
}

impl Rules for Auction {
    fn loaded(&mut self, room: &mut Ctx<'_>, _recent: &[LogEntry]) {
        // A room without a lot opens one: the demo's first visitor starts it.
        if room.get("lot").is_none() {
            self.open(room, &self.title.clone(), self.start, self.step, self.seconds);
        }
    }

    fn set(
        &mut self,
        room: &mut Ctx<'_>,
        who: &Who<'_>,
        key: &str,
        value: &RawValue,
        current: Option<Current<'_>>,
    ) -> Write {
        if who.server {
            return Write::Accept; // the operator's backend may correct anything
        }
        if key != "bid" {
            return Write::Refuse(Refusal::new("read_only", "members may only bid"));
        }
        let lot = match room.get_as::<Lot>("lot") {
            Some(lot) if lot.open && room.now() < lot.ends_at => lot,
            _ => return Write::Refuse(Refusal::new("auction_closed", "the auction is closed")),
        };
        let bid: Value = serde_json::from_str(value.get()).unwrap_or_default();
        let Some(amount) = bid["amount"].as_u64() else {
            return Write::Refuse(Refusal::new("bad_bid", "a bid is {\"amount\": whole number}"));
        };
        let top: Value =
            current.and_then(|c| serde_json::from_str(c.value.get()).ok()).unwrap_or_default();
        let minimum = top["amount"].as_u64().map_or(lot.start, |a| a + lot.step);
        if amount < minimum {
            let why = format!("bid at least {minimum}");
            return Write::Refuse(Refusal::new("bid_too_low", why));
        }
        let mut history: Vec<Value> = top["history"].as_array().cloned().unwrap_or_default();
        if top["amount"].is_u64() {
            let mut previous = top.clone();
            if let Some(o) = previous.as_object_mut() {
                o.remove("history");
            }
            previous["version"] = json!(current.map_or(0, |c| c.version));
            history.insert(0, previous);
            history.truncate(HISTORY);
        }
        let name: String = bid["name"].as_str().unwrap_or(who.user).chars().take(40).collect();
        let stored = json!({
            "amount": amount,
            "bidder": who.user,
            "name": name,
            "session": who.session,
            "region": who.region,
            "at": room.now(),
            "history": history,
        });
        match serde_json::value::to_raw_value(&stored) {
            Ok(raw) => Write::Rewrite(raw),
            Err(_) => Write::Refuse(Refusal::new("bad_bid", "unreadable bid")),
        }
    }

    fn publish(
        &mut self,
        _room: &mut Ctx<'_>,
        who: &Who<'_>,
        topic: &str,
        _data: &RawValue,
    ) -> Write {
        if topic == "chat" || who.server {
            Write::Accept
        } else {
            Write::Refuse(Refusal::new("no_such_topic", "this room has the topic `chat` only"))
        }
    }

    fn timer(&mut self, room: &mut Ctx<'_>, name: &str) {
        match name {
            "close" => {
                self.close(room);
            }
            "reopen" => {
                let title = self.title.clone();
                self.open(room, &title, self.start, self.step, self.seconds);
            }
            _ => {}
        }
    }

    fn request(&mut self, room: &mut Ctx<'_>, req: &Request) -> Option<Response> {
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "lot") => {
                let body =
                    json!({"lot": room.get_as::<Value>("lot"), "bid": room.get_as::<Value>("bid")});
                Some(Response::json(200, &body))
            }
            ("POST", "open" | "close") if !req.admin => Some(Response::json(
                403,
                &json!({"error": "admin_only", "message": "needs the admin key"}),
            )),
            ("POST", "open") => {
                let o: Value = serde_json::from_str(&req.body).unwrap_or_default();
                let title = o["title"].as_str().unwrap_or(&self.title).to_owned();
                let start = o["start"].as_u64().unwrap_or(self.start);
                let step = o["step"].as_u64().unwrap_or(self.step).max(1);
                let seconds = o["seconds"].as_u64().unwrap_or(self.seconds).clamp(1, 7 * 24 * 3600);
                let lot = self.open(room, &title, start, step, seconds);
                Some(Response::json(200, &json!({ "lot": lot })))
            }
            ("POST", "close") => match self.close(room) {
                Some(lot) => Some(Response::json(200, &json!({ "lot": lot }))),
                None => Some(Response::json(
                    409,
                    &json!({"error": "not_open", "message": "no lot is open"}),
                )),
            },
            _ => None,
        }
    }
}
