//! The demo's auction, decided by the room: the browser only displays.
//!
//! - State `lot`: `{"title","start","step","ends_at","open","winner"}`; the
//!   rules open a lot when the room is first loaded, and close it at
//!   `ends_at` with a timer: the winner is written by the room and announced
//!   on the topic `auction`. While anyone is in the room, the next lot opens
//!   a while after one closes (so the demo never stops); an empty room keeps
//!   no timer but a lot's close, so a room nobody visits sleeps until its
//!   retention deletes it.
//! - State `bid`: the top bid. A member bids with `set("bid", {"amount"})`, a
//!   whole number of at most [`MAX_AMOUNT`] (the largest integer every
//!   JavaScript reader reads exactly); the rules refuse a bid on a closed lot
//!   (`auction_closed`), over the maximum (`bad_bid`), under the start or
//!   under the top bid plus the step (`bid_too_low`), and store
//!   `{"amount","bidder","name","session","region","at","history"}`: the
//!   bidder and the name come from the member's verified token (`sub`, and
//!   the `name` of its `info`, else the `sub`), never from the value.
//!   No member may write another key (`read_only`).
//! - Topic `chat` carries members' lines, `{"text"}` of 1-500 characters
//!   (stored as exactly that); no other topic exists.
//! - `POST /auction/{room}/open` (admin key, body `{"title"?,"start"?,"step"?,"seconds"?}`)
//!   opens a new lot now; `POST .../close` (admin) closes it now;
//!   `GET .../lot` (public: anyone, no token) answers the lot and the top bid
//!   with display names only: no user ids, sessions or regions.
//!
//! Settings (deployment variables): `AUCTION_SECONDS` (a lot's length,
//! default 300), `AUCTION_PAUSE_SECONDS` (the wait before the next lot,
//! default 30; 0: no next lot), `AUCTION_START` (100), `AUCTION_STEP` (10).

use homeroom::room::rules::{
    Ctx, Current, Join, Refusal, Request, Response, Rules, Vars, Who, Write,
};
use homeroom::room::{LogEntry, Time};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// Bids kept in the top bid's `history`.
const HISTORY: usize = 30;

/// The largest amount a bid, a start or a step may be: 2^53 - 1, the
/// largest integer a JavaScript number holds exactly (so every browser shows
/// the amount the room stored), and far from where `u64` arithmetic wraps.
pub const MAX_AMOUNT: u64 = (1 << 53) - 1;

/// The longest display name shown, in characters.
const MAX_NAME: usize = 40;

/// The longest chat line, in characters.
const MAX_CHAT: usize = 500;

/// The longest a lot or a pause may last: a week.
const MAX_SECONDS: u64 = 7 * 24 * 3600;

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
    pub ends_at: Time,
    pub open: bool,
    /// The winning bid, once closed (null when nobody bid).
    pub winner: Option<Value>,
}

impl Auction {
    /// The settings from the deployment's variables.
    pub fn from_vars(vars: &Vars<'_>) -> Auction {
        let d = Auction::default();
        Auction {
            seconds: vars.number("AUCTION_SECONDS", d.seconds).clamp(1, MAX_SECONDS),
            pause_seconds: vars.number("AUCTION_PAUSE_SECONDS", d.pause_seconds).min(MAX_SECONDS),
            start: vars.number("AUCTION_START", d.start).min(MAX_AMOUNT),
            step: vars.number("AUCTION_STEP", d.step).clamp(1, MAX_AMOUNT),
            ..d
        }
    }

    /// Opens a lot now, for `seconds`: a fresh lot, no bid, a close timer.
    fn open(&self, room: &mut Ctx<'_>, title: &str, start: u64, step: u64, seconds: u64) -> Lot {
        let ends_at = room.now().plus_secs(seconds.min(MAX_SECONDS));
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
        if !room.members().is_empty() {
            self.reopen_later(room);
        }
        Some(lot)
    }

    /// The next lot opens after the pause (none with a pause of 0).
    fn reopen_later(&self, room: &mut Ctx<'_>) {
        if self.pause_seconds > 0 {
            room.schedule("reopen", room.now().plus_secs(self.pause_seconds));
        }
    }
}

/// A bid as anyone may see it: the amount, the display name, when.
fn public_bid(bid: &Value) -> Value {
    if !bid["amount"].is_u64() {
        return Value::Null;
    }
    let mut shown = json!({"amount": bid["amount"], "name": bid["name"], "at": bid["at"]});
    if let Some(history) = bid["history"].as_array() {
        shown["history"] = history.iter().map(public_bid).collect();
    }
    shown
}

/// The name a member is shown under: the `name` of their verified `info`
/// (what the token's issuer vouched for), else their user id.
fn display_name(who: &Who<'_>) -> String {
    let info: Value = who.info.and_then(|i| serde_json::from_str(i.get()).ok()).unwrap_or_default();
    let name = info["name"].as_str().map(str::trim).filter(|n| !n.is_empty()).unwrap_or(who.user);
    name.chars().take(MAX_NAME).collect()
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
        let Some(amount) = bid["amount"].as_u64().filter(|a| *a <= MAX_AMOUNT) else {
            let why = format!("a bid is {{\"amount\": a whole number up to {MAX_AMOUNT}}}");
            return Write::Refuse(Refusal::new("bad_bid", why));
        };
        let top: Value =
            current.and_then(|c| serde_json::from_str(c.value.get()).ok()).unwrap_or_default();
        // Checked: a top bid stored before the maximum existed cannot make
        // the minimum wrap around to a small number.
        let minimum = match top["amount"].as_u64() {
            None => Some(lot.start),
            Some(top) => top.checked_add(lot.step),
        };
        let Some(minimum) = minimum.filter(|m| *m <= MAX_AMOUNT) else {
            let why = "the top bid is the highest a bid may be";
            return Write::Refuse(Refusal::new("bid_too_low", why));
        };
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
        let stored = json!({
            "amount": amount,
            "bidder": who.user,
            "name": display_name(who),
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
        data: &RawValue,
    ) -> Write {
        if who.server {
            return Write::Accept;
        }
        if topic != "chat" {
            return Write::Refuse(Refusal::new(
                "no_such_topic",
                "this room has the topic `chat` only",
            ));
        }
        // What is stored is what was checked: the text, nothing a writer
        // adds (a name of someone else's, a 60 kB field).
        let data: Value = serde_json::from_str(data.get()).unwrap_or_default();
        let text = data["text"].as_str().map(str::trim).unwrap_or_default();
        if text.is_empty() || text.chars().count() > MAX_CHAT {
            let why = format!("a chat line is {{\"text\": 1-{MAX_CHAT} characters}}");
            return Write::Refuse(Refusal::new("bad_message", why));
        }
        match serde_json::value::to_raw_value(&json!({ "text": text })) {
            Ok(raw) => Write::Rewrite(raw),
            Err(_) => Write::Refuse(Refusal::new("bad_message", "unreadable text")),
        }
    }

    fn join(&mut self, room: &mut Ctx<'_>, _who: &Who<'_>) -> Join {
        // Someone came to a closed lot with no next one scheduled (the room
        // was empty when it closed): the next one opens after the pause.
        let closed = room.get_as::<Lot>("lot").is_some_and(|l| !l.open);
        if closed && room.scheduled("reopen").is_none() {
            self.reopen_later(room);
        }
        Join::Accept
    }

    fn leave(&mut self, room: &mut Ctx<'_>, _who: &Who<'_>) {
        // The last one left: no next lot for nobody.
        if room.members().is_empty() {
            room.cancel("reopen");
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
            // A public route: display names only, whoever asks.
            ("GET", "lot") => {
                let mut lot = room.get_as::<Value>("lot").unwrap_or_default();
                if let Some(winner) = lot.get("winner").map(public_bid) {
                    lot["winner"] = winner;
                }
                let bid = room.get_as::<Value>("bid").map_or(Value::Null, |b| public_bid(&b));
                Some(Response::json(200, &json!({"lot": lot, "bid": bid})))
            }
            ("POST", "open" | "close") if !req.admin => Some(Response::json(
                403,
                &json!({"error": "admin_only", "message": "needs the admin key"}),
            )),
            ("POST", "open") => {
                let o: Value = serde_json::from_str(&req.body).unwrap_or_default();
                let title = o["title"].as_str().unwrap_or(&self.title).to_owned();
                let start = o["start"].as_u64().unwrap_or(self.start).min(MAX_AMOUNT);
                let step = o["step"].as_u64().unwrap_or(self.step).clamp(1, MAX_AMOUNT);
                let seconds = o["seconds"].as_u64().unwrap_or(self.seconds).clamp(1, MAX_SECONDS);
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
