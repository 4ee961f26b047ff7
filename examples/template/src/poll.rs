//! A live poll, decided by the room: the page only shows it.
//!
//! - Members only: a token whose `info` says `"member": true` (what your backend vouches
//!   for); anyone else is refused when they join (closed 4403 `members_only`).
//! - `POST /poll/{room}/open` with the admin key, body `{"question","options","seconds"}`,
//!   opens a poll: state `poll` = `{"question","options","closes_at","open"}`, state `tally`
//!   = a count per option, and a timer that closes it.
//! - A member votes by publishing `{"option"}` on the topic `vote`: once per user, while the
//!   poll is open, for one of its options (`already_voted`, `poll_closed`, `no_such_option`).
//!   The room stores the vote as exactly `{"option"}` and counts it into `tally` itself: no
//!   member can write the tally (`read_only`), or any other state.
//! - At `closes_at` the room closes the poll and publishes `{"event":"closed","tally"}` on
//!   the topic `poll`.

use std::collections::BTreeMap;

use homeroom::room::rules::{Ctx, Join, Refusal, Request, Response, Rules, Who, Write};
use homeroom::room::Time;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// The longest question and option, in characters; the most options; the longest poll.
const MAX_QUESTION: usize = 200;
const MAX_OPTION: usize = 60;
const MAX_OPTIONS: usize = 10;
const MAX_SECONDS: u64 = 24 * 3600;
/// The most votes a poll takes (its voters are kept in the room's state).
pub const MAX_VOTES: usize = 1_000;

/// The rules of a poll room (no settings).
#[derive(Debug, Clone, Default)]
pub struct Poll;

/// The poll under way (state key `poll`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Question {
    pub question: String,
    pub options: Vec<String>,
    pub closes_at: Time,
    pub open: bool,
}

fn refuse(code: &str, message: &str) -> Write {
    Write::Refuse(Refusal::new(code, message))
}

fn raw(value: &Value) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(value).ok()
}

impl Poll {
    /// Opens a poll from the admin route's body, or says what is wrong with it.
    fn open(&self, room: &mut Ctx<'_>, body: &str) -> Result<Question, String> {
        let b: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
        let question = b["question"].as_str().map(str::trim).unwrap_or_default();
        let options: Vec<String> = b["options"]
            .as_array()
            .map(|o| o.iter().filter_map(|v| v.as_str().map(|s| s.trim().to_owned())).collect())
            .unwrap_or_default();
        let bounded = |s: &str, max: usize| !s.is_empty() && s.chars().count() <= max;
        if !bounded(question, MAX_QUESTION) {
            return Err(format!("question: 1-{MAX_QUESTION} characters"));
        }
        let distinct: std::collections::BTreeSet<&String> = options.iter().collect();
        if !(2..=MAX_OPTIONS).contains(&options.len())
            || distinct.len() != options.len()
            || !options.iter().all(|o| bounded(o, MAX_OPTION))
        {
            return Err(format!("options: 2-{MAX_OPTIONS} distinct, 1-{MAX_OPTION} characters each"));
        }
        let seconds = b["seconds"].as_u64().unwrap_or(60).clamp(1, MAX_SECONDS);
        let q = Question {
            question: question.to_owned(),
            options,
            closes_at: room.now().plus_secs(seconds),
            open: true,
        };
        let tally: BTreeMap<&str, u64> = q.options.iter().map(|o| (o.as_str(), 0)).collect();
        room.set("poll", &q);
        room.set("tally", &tally);
        room.set("voted", &json!({}));
        room.schedule("close", q.closes_at);
        room.publish("poll", &json!({"event": "opened", "poll": q}));
        Ok(q)
    }
}

impl Rules for Poll {
    fn join(&mut self, _room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
        let info: Value = who.info.and_then(|i| serde_json::from_str(i.get()).ok()).unwrap_or_default();
        if info["member"] == true {
            Join::Accept
        } else {
            Join::Refuse(Refusal::new("members_only", "this poll is for members"))
        }
    }

    fn publish(&mut self, room: &mut Ctx<'_>, who: &Who<'_>, topic: &str, data: &RawValue) -> Write {
        if who.server {
            return Write::Accept;
        }
        if topic != "vote" {
            return refuse("no_such_topic", "this room has the topic `vote` only");
        }
        let Some(q) = room.get_as::<Question>("poll").filter(|q| q.open && room.now() < q.closes_at) else {
            return refuse("poll_closed", "no poll is open");
        };
        let vote: Value = serde_json::from_str(data.get()).unwrap_or_default();
        let Some(option) = vote["option"].as_str().filter(|o| q.options.iter().any(|x| x == o)) else {
            return refuse("no_such_option", "vote {\"option\"} for one of the poll's options");
        };
        let mut voted: BTreeMap<String, bool> = room.get_as("voted").unwrap_or_default();
        if voted.contains_key(who.user) {
            return refuse("already_voted", "one vote per member");
        }
        if voted.len() >= MAX_VOTES {
            return refuse("poll_full", "the poll has all the votes it takes");
        }
        let mut tally: BTreeMap<String, u64> = room.get_as("tally").unwrap_or_default();
        *tally.entry(option.to_owned()).or_default() += 1;
        voted.insert(who.user.to_owned(), true);
        room.set("tally", &tally);
        room.set("voted", &voted);
        match raw(&json!({ "option": option })) {
            Some(checked) => Write::Rewrite(checked),
            None => refuse("no_such_option", "unreadable vote"),
        }
    }

    fn set(
        &mut self,
        _room: &mut Ctx<'_>,
        who: &Who<'_>,
        _key: &str,
        _value: &RawValue,
        _current: Option<homeroom::room::rules::Current<'_>>,
    ) -> Write {
        if who.server {
            Write::Accept
        } else {
            refuse("read_only", "the room keeps the poll and its tally; members vote")
        }
    }

    fn timer(&mut self, room: &mut Ctx<'_>, name: &str) {
        if name != "close" {
            return;
        }
        if let Some(mut q) = room.get_as::<Question>("poll").filter(|q| q.open) {
            q.open = false;
            let tally: Value = room.get_as("tally").unwrap_or_default();
            room.set("poll", &q);
            room.publish("poll", &json!({"event": "closed", "tally": tally}));
        }
    }

    fn request(&mut self, room: &mut Ctx<'_>, req: &Request) -> Option<Response> {
        match (req.method.as_str(), req.path.as_str()) {
            ("POST", "open") if !req.admin => {
                Some(Response::json(403, &json!({"error": "admin_only", "message": "needs the admin key"})))
            }
            ("POST", "open") => Some(match self.open(room, &req.body) {
                Ok(q) => Response::json(200, &json!({ "poll": q })),
                Err(why) => Response::json(400, &json!({"error": "bad_poll", "message": why})),
            }),
            _ => None,
        }
    }
}
