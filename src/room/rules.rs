//! The application's rules, hosted where the room orders its writes.
//!
//! A [`Rules`] implementation is a plain Rust value the engine calls inside
//! the write path: after a write is parsed, deduplicated and compare-checked,
//! before it is sequenced and stored. It sees who is writing (their verified
//! user, session, region and info), the room's state and the time the engine
//! was given, and answers with a value: accept, rewrite, or refuse with a
//! code of its own. It can also make writes of its own ([`Ctx::publish`],
//! [`Ctx::set`]), which the engine sequences and stores like any other,
//! schedule named timers that survive eviction ([`Ctx::schedule`]), and send
//! a connection something ephemeral ([`Ctx::send`]).
//!
//! Rules get no clock, no randomness and no runtime: the same inputs give
//! the same outputs, so the simulated tests drive them like the engine.
//!
//! **A panic resets the whole Wasm instance** (Rust on wasm32 cannot unwind):
//! every room in it reloads from storage and its sockets' attachments, so
//! nothing acked is lost and every member stays, but every room of the
//! instance pays a reload. Refuse with a value instead of panicking on input.
//!
//! ```
//! use homeroom::room::rules::{Ctx, Refusal, Rules, Who, Write};
//! use serde_json::value::RawValue;
//!
//! /// A room where only the topic `chat` exists and messages carry text.
//! struct ChatOnly;
//!
//! impl Rules for ChatOnly {
//!     fn publish(&mut self, _room: &mut Ctx<'_>, _who: &Who<'_>, topic: &str, data: &RawValue) -> Write {
//!         if topic != "chat" {
//!             return Write::Refuse(Refusal::new("no_such_topic", "this room has the topic chat only"));
//!         }
//!         match serde_json::from_str::<serde_json::Value>(data.get()) {
//!             Ok(v) if v["text"].is_string() => Write::Accept,
//!             _ => Write::Refuse(Refusal::new("bad_message", "a message is {\"text\": string}")),
//!         }
//!     }
//! }
//! ```

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::value::RawValue;

use super::state::RoomState;
use super::{LogEntry, Time};

/// Who is acting: a connected member, the operator's backend (admin key),
/// or the rules themselves.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    /// The member's session; `$server` for the backend, `$rules` for the rules,
    /// `$reader` for a reader over HTTP ([`Rules::read`]).
    pub session: &'a str,
    /// The verified user: the token's `sub` (in anonymous dev mode, the session).
    pub user: &'a str,
    /// Where the member connected from (the backend's caller region).
    pub region: &'a str,
    /// Verified information about the member: what [`Rules::join`] attached
    /// (JSON), if anything.
    pub info: Option<&'a RawValue>,
    /// A write from the operator's backend (an admin route), not a member.
    pub server: bool,
}

/// A key's current value and version, as a rule sees it before a write.
#[derive(Debug, Clone, Copy)]
pub struct Current<'a> {
    pub value: &'a RawValue,
    /// The `seq` of the write that set it.
    pub version: u64,
}

/// A rule's refusal: a stable code the client acts on and a message for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    code: String,
    message: String,
}

impl Refusal {
    /// `code` is 1-32 characters of `a-z 0-9 _` (anything else becomes
    /// `refused`); `message` is cut at 256 bytes.
    pub fn new(code: &str, message: impl Into<String>) -> Refusal {
        let ok = (1..=32).contains(&code.len())
            && code.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        let mut message: String = message.into();
        if message.len() > 256 {
            let mut cut = 256;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        Refusal { code: if ok { code.to_owned() } else { "refused".into() }, message }
    }

    pub fn code(&self) -> &str {
        &self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// What [`Rules::join`] decides about a connecting member.
#[derive(Debug)]
pub enum Join {
    /// Let them in.
    Accept,
    /// Let them in with this verified information (a JSON value of at most
    /// 1 KiB, shown in their presence record as `info` and given to later
    /// hooks as [`Who::info`]).
    AcceptWith(Box<RawValue>),
    /// Keep them out: the socket is closed with 4403 and the refusal's code
    /// as the reason; they never become a member.
    Refuse(Refusal),
}

/// What [`Rules::publish`] and [`Rules::set`] decide about a write.
#[derive(Debug)]
pub enum Write {
    /// Sequence and store it as sent.
    Accept,
    /// Sequence and store this value instead (what everyone receives).
    Rewrite(Box<RawValue>),
    /// Do not store, sequence or show it: the sender gets an `error` frame
    /// with the refusal's code and message and its `id`.
    Refuse(Refusal),
}

/// A request to a path under a room that no built-in route takes
/// (`/{kind}/{room}/{path}`, see the README), which the rules may answer.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path after the room, e.g. `close` for `/auction/r1/close`.
    pub path: String,
    /// The raw query string, without `?`.
    pub query: String,
    pub body: String,
    /// The caller gave the admin key.
    pub admin: bool,
    /// The user of a valid room token the caller gave, if any: checked as a
    /// connect's (signature, `exp`, the room, `TOKEN_MAX_TTL_SECS`); a user
    /// the operator blocked in the room, or one [`Rules::read`] keeps out,
    /// never reaches the rules (403).
    pub user: Option<String>,
    /// That token's `info` claim (JSON), as a connect's [`Who::info`] starts.
    pub info: Option<Box<RawValue>>,
    /// Where the caller is, as a connect's [`Who::region`].
    pub region: String,
}

/// The rules' answer to a [`Request`]: a status and a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, body: &impl Serialize) -> Response {
        Response { status, body: serde_json::to_string(body).unwrap_or_else(|_| "null".into()) }
    }
}

/// The application's rules for one kind of room. Every hook has a default
/// that accepts, so a rule implements only what it decides.
pub trait Rules: 'static {
    /// A member connects (after the token and the room's own checks).
    fn join(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
        let _ = (room, who);
        Join::Accept
    }

    /// Someone with a valid room token but no socket asks to read the room
    /// over HTTP: the member list (`GET /{kind}/{room}/presence`) or one of
    /// [`Rules::request`]'s routes. `who.session` is [`READER_SESSION`];
    /// `who.info` is the token's. A refusal answers 403 with its code.
    ///
    /// By default, whoever [`Rules::join`] would let in may read, asked
    /// without consequence: what it sends and sets is dropped (its bytes
    /// charged to the reader's reply budget), and timers it schedules go on a
    /// copy. A `join` that changes the rules' own fields, or makes a large
    /// send, should say here who may read instead.
    ///
    /// [`READER_SESSION`]: crate::room::READER_SESSION
    fn read(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) -> Result<(), Refusal> {
        match self.join(room, who) {
            Join::Refuse(refusal) => Err(refusal),
            Join::Accept | Join::AcceptWith(_) => Ok(()),
        }
    }

    /// A member left (its connection closed, timed out or was refused later).
    fn leave(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) {
        let _ = (room, who);
    }

    /// A `publish` on `topic` (not a retry: retries get their original ack
    /// without asking again).
    fn publish(
        &mut self,
        room: &mut Ctx<'_>,
        who: &Who<'_>,
        topic: &str,
        data: &RawValue,
    ) -> Write {
        let _ = (room, who, topic, data);
        Write::Accept
    }

    /// A `set` of `key`, which holds `current` now (its `if_version`, if
    /// any, already matched).
    fn set(
        &mut self,
        room: &mut Ctx<'_>,
        who: &Who<'_>,
        key: &str,
        value: &RawValue,
        current: Option<Current<'_>>,
    ) -> Write {
        let _ = (room, who, key, value, current);
        Write::Accept
    }

    /// A timer set with [`Ctx::schedule`] is due.
    fn timer(&mut self, room: &mut Ctx<'_>, name: &str) {
        let _ = (room, name);
    }

    /// A request to a path of the room no built-in route takes; `None`
    /// answers 404.
    fn request(&mut self, room: &mut Ctx<'_>, req: &Request) -> Option<Response> {
        let _ = (room, req);
        None
    }

    /// The room was loaded into memory (created, or after an eviction or a
    /// reset): `recent` is the newest part of its log, oldest first, for a
    /// rule that keeps something derived from it in memory.
    fn loaded(&mut self, room: &mut Ctx<'_>, recent: &[LogEntry]) {
        let _ = (room, recent);
    }
}

/// The rules every room had before rules existed: everything is accepted.
#[derive(Debug, Default, Clone, Copy)]
pub struct Open;

impl Rules for Open {}

/// The deployment's variables (`[vars]` in `wrangler.toml`, `--var`
/// locally, or secrets), for rules that take settings from them.
pub struct Vars<'a>(&'a dyn Fn(&str) -> Option<String>);

impl<'a> Vars<'a> {
    /// Variables looked up by `get` (the host passes the Worker's env).
    pub fn new(get: &'a dyn Fn(&str) -> Option<String>) -> Vars<'a> {
        Vars(get)
    }

    /// The variable `name`, if set.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }

    /// The variable `name` as a number, else `default`.
    ///
    /// ```
    /// use homeroom::room::rules::Vars;
    /// let env = |name: &str| (name == "QUOTA").then(|| "30".to_string());
    /// let vars = Vars::new(&env);
    /// assert_eq!(vars.number("QUOTA", 10), 30);
    /// assert_eq!(vars.number("OTHER", 10), 10);
    /// ```
    pub fn number(&self, name: &str, default: u64) -> u64 {
        self.get(name).and_then(|v| v.trim().parse().ok()).unwrap_or(default)
    }
}

/// How a kind of room gets its rules each time one of its rooms is loaded:
/// a rules value that is `Clone` is copied; [`with_vars`] makes them from
/// the deployment's variables.
pub trait Make: 'static {
    fn make(&self, vars: &Vars<'_>) -> Box<dyn Rules>;
}

impl<R: Rules + Clone> Make for R {
    fn make(&self, _vars: &Vars<'_>) -> Box<dyn Rules> {
        Box::new(self.clone())
    }
}

/// Rules made from the deployment's variables by `make`.
pub struct WithVars<F>(pub(crate) F);

/// Makes a kind's rules from the deployment's variables each time a room
/// is loaded (see [`Make`]; a document kind's rules too, with the crate
/// feature `documents`).
///
/// ```
/// use homeroom::room::rules::{with_vars, Make, Open, Vars};
/// let make = with_vars(|_vars: &Vars<'_>| Open);
/// let env = |_: &str| None;
/// let _rules = make.make(&Vars::new(&env));
/// ```
pub fn with_vars<F, R>(make: F) -> WithVars<F>
where
    F: Fn(&Vars<'_>) -> R + 'static,
{
    WithVars(make)
}

impl<F, R> Make for WithVars<F>
where
    F: Fn(&Vars<'_>) -> R + 'static,
    R: Rules,
{
    fn make(&self, vars: &Vars<'_>) -> Box<dyn Rules> {
        Box::new((self.0)(vars))
    }
}

/// What a hook asked for besides its verdict, applied by the engine in order
/// once the hook returns.
#[derive(Debug)]
pub(crate) enum Effect {
    Publish { topic: String, data: Box<RawValue> },
    Set { key: String, value: Box<RawValue> },
    Send { session: String, topic: String, data: Box<RawValue> },
}

impl Effect {
    /// Its value's bytes.
    pub(crate) fn weight(&self) -> u64 {
        let value = match self {
            Effect::Publish { data, .. } | Effect::Send { data, .. } => data,
            Effect::Set { value, .. } => value,
        };
        value.get().len() as u64
    }
}

/// Most timers the rules may keep at once ([`Ctx::schedule`]).
pub(crate) const MAX_TIMERS: usize = 256;

/// How soon a timer set for now or earlier fires, at the earliest (ms): with the next alarm.
pub(crate) const RETIMER_MS: u64 = 100;

/// The room as a hook sees it: read the state and members, write, schedule.
pub struct Ctx<'a> {
    pub(crate) now: Time,
    pub(crate) room: &'a str,
    pub(crate) state: &'a RoomState,
    pub(crate) members: &'a dyn Fn() -> Vec<(String, String)>,
    pub(crate) effects: Vec<Effect>,
    pub(crate) timers: &'a mut BTreeMap<String, Time>,
    pub(crate) timers_changed: bool,
    /// A value that could not be encoded (a rule bug); reported, not panicked.
    pub(crate) problems: Vec<String>,
}

impl<'a> Ctx<'a> {
    /// A hook's view of the room at `now`, with no effects asked for yet.
    pub(crate) fn new(
        now: Time,
        room: &'a str,
        state: &'a RoomState,
        members: &'a dyn Fn() -> Vec<(String, String)>,
        timers: &'a mut BTreeMap<String, Time>,
    ) -> Ctx<'a> {
        let (effects, problems) = (Vec::new(), Vec::new());
        Ctx { now, room, state, members, effects, timers, timers_changed: false, problems }
    }
}

impl Ctx<'_> {
    /// The time of the event being handled.
    pub fn now(&self) -> Time {
        self.now
    }

    /// The room's name.
    pub fn room(&self) -> &str {
        self.room
    }

    /// A state key's value and version.
    pub fn get(&self, key: &str) -> Option<Current<'_>> {
        self.state.get(key).map(|(value, version)| Current { value, version })
    }

    /// A state key's value, decoded.
    pub fn get_as<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.get(key).and_then(|c| serde_json::from_str(c.value.get()).ok())
    }

    /// The present members: (session, user) pairs.
    pub fn members(&self) -> Vec<(String, String)> {
        (self.members)()
    }

    /// Publishes `data` on `topic` as the rules (session and user `$rules`):
    /// sequenced and stored after the write being decided, before anyone sees
    /// either.
    pub fn publish(&mut self, topic: &str, data: &impl Serialize) {
        if let Some(data) = self.encode(data) {
            self.effects.push(Effect::Publish { topic: topic.to_owned(), data });
        }
    }

    /// Sets a state key as the rules, after the write being decided.
    pub fn set(&mut self, key: &str, value: &impl Serialize) {
        if let Some(value) = self.encode(value) {
            self.effects.push(Effect::Set { key: key.to_owned(), value });
        }
    }

    /// Sends `data` to the connection of `session` only, now: an ephemeral
    /// `signal` frame from session `$rules` (not stored, not sequenced).
    pub fn send(&mut self, session: &str, topic: &str, data: &impl Serialize) {
        if let Some(data) = self.encode(data) {
            self.effects.push(Effect::Send {
                session: session.to_owned(),
                topic: topic.to_owned(),
                data,
            });
        }
    }

    /// Calls [`Rules::timer`] with `name` at `at`, or soon after; replaces
    /// a timer of the same name. Stored with the room: it fires after an
    /// eviction too. `room.schedule("close", room.now().plus_secs(60))`.
    ///
    /// A room keeps at most 256 timers: past that a new name is not set (a problem in
    /// `/stats`), and every timer already set stays, so timers made per member cannot push out
    /// the room's own set before them. A timer set for now or earlier fires with the next
    /// alarm, 100 ms later at the earliest.
    pub fn schedule(&mut self, name: &str, at: Time) {
        let max = MAX_TIMERS;
        if self.timers.len() >= max && !self.timers.contains_key(name) {
            self.problems.push(format!("more than {max} timers: `{name}` not set"));
            return;
        }
        self.timers.insert(name.to_owned(), at);
        self.timers_changed = true;
    }

    /// Cancels the timer `name`, if set.
    pub fn cancel(&mut self, name: &str) {
        if self.timers.remove(name).is_some() {
            self.timers_changed = true;
        }
    }

    /// When the timer `name` is due, if set.
    pub fn scheduled(&self, name: &str) -> Option<Time> {
        self.timers.get(name).copied()
    }

    fn encode(&mut self, value: &impl Serialize) -> Option<Box<RawValue>> {
        match serde_json::value::to_raw_value(value) {
            Ok(raw) => Some(raw),
            Err(e) => {
                self.problems.push(format!("a rule's value did not encode: {e}"));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_codes_are_kept_stable_and_short() {
        assert_eq!(Refusal::new("bid_too_low", "x").code(), "bid_too_low");
        assert_eq!(Refusal::new("Bid Too Low", "x").code(), "refused");
        assert_eq!(Refusal::new("", "x").code(), "refused");
        assert_eq!(Refusal::new(&"a".repeat(33), "x").code(), "refused");
        assert_eq!(Refusal::new("x", "é".repeat(200)).message().len(), 256);
    }
}
