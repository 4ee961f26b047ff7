//! A chat room: messages on the topic `chat` carry a `text` of 1-2000
//! characters, stored as exactly `{"text"}` (who wrote it is the message's
//! `user`, from the token; nothing else the writer adds is kept); each user may send `CHAT_QUOTA` messages per 10 s (default
//! 20); whoever joins gets the last 50 messages at once (a `signal` from
//! `$rules` on the topic `history`), so a first connect has history too.
//! `GET /chat/{room}/quota` with the caller's token answers how many they
//! may still send now (`{"user","left","resets_in_ms"}`; 401 without one).

use std::collections::{HashMap, VecDeque};

use homeroom::room::rules::{Ctx, Join, Refusal, Request, Response, Rules, Vars, Who, Write};
use homeroom::room::{LogEntry, Time};
use serde_json::value::RawValue;
use serde_json::{json, Value};

const KEEP: usize = 50;
const MAX_TEXT: usize = 2000;
const WINDOW_MS: u64 = 10_000;

#[derive(Clone)]
pub struct Chat {
    /// The last messages, oldest first: what a newcomer is sent.
    recent: VecDeque<Value>,
    /// Per user: when their current 10 s window started and how many they sent in it.
    sent: HashMap<String, (Time, u64)>,
    quota: u64,
}

impl Chat {
    /// The rules, with the quota from `CHAT_QUOTA`.
    pub fn from_vars(vars: &Vars<'_>) -> Chat {
        Chat::with_quota(vars.number("CHAT_QUOTA", 20))
    }

    pub fn with_quota(quota: u64) -> Chat {
        Chat { recent: VecDeque::new(), sent: HashMap::new(), quota }
    }

    fn remember(&mut self, user: &str, text: &str, at: Time) {
        self.recent.push_back(json!({ "user": user, "text": text, "at": at }));
        if self.recent.len() > KEEP {
            self.recent.pop_front();
        }
    }
}

impl Rules for Chat {
    fn loaded(&mut self, _room: &mut Ctx<'_>, log: &[LogEntry]) {
        for e in log.iter().filter(|e| e.topic == "chat") {
            let data: Value = serde_json::from_str(e.data.get()).unwrap_or_default();
            self.remember(&e.user, data["text"].as_str().unwrap_or_default(), e.ts);
        }
    }

    fn join(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
        room.send(who.session, "history", &self.recent);
        Join::Accept
    }

    // Whoever the token admits reads the member list: nothing to ask `join`, whose history
    // would be made (and dropped, its bytes charged to the reader) at every read.
    fn read(&mut self, _room: &mut Ctx<'_>, _who: &Who<'_>) -> Result<(), Refusal> {
        Ok(())
    }

    fn request(&mut self, room: &mut Ctx<'_>, req: &Request) -> Option<Response> {
        if (req.method.as_str(), req.path.as_str()) != ("GET", "quota") {
            return None;
        }
        // Who is asking is what the token says (the room checked it), never
        // a query parameter.
        let Some(user) = req.user.as_deref() else {
            let body = json!({"error": "token_required", "message": "send your room token"});
            return Some(Response::json(401, &body));
        };
        let now = room.now();
        let (left, resets_in_ms) = match self.sent.get(user) {
            Some(&(since, count)) if now < since.plus_ms(WINDOW_MS) => {
                (self.quota.saturating_sub(count), since.plus_ms(WINDOW_MS).since(now))
            }
            _ => (self.quota, 0),
        };
        Some(Response::json(
            200,
            &json!({"user": user, "left": left, "resets_in_ms": resets_in_ms}),
        ))
    }

    fn publish(
        &mut self,
        room: &mut Ctx<'_>,
        who: &Who<'_>,
        topic: &str,
        data: &RawValue,
    ) -> Write {
        if topic != "chat" {
            return Write::Refuse(Refusal::new(
                "no_such_topic",
                "this room has the topic `chat` only",
            ));
        }
        let data: Value = serde_json::from_str(data.get()).unwrap_or_default();
        let text = data["text"].as_str().map(str::trim).unwrap_or_default();
        if text.is_empty() || text.chars().count() > MAX_TEXT {
            return Write::Refuse(Refusal::new(
                "bad_message",
                "a message is {\"text\": 1-2000 characters}",
            ));
        }
        let now = room.now();
        if self.sent.len() > 1000 {
            self.sent.retain(|_, (since, _)| now < since.plus_ms(WINDOW_MS)); // forget quiet users
        }
        let (since, count) = self.sent.entry(who.user.to_owned()).or_insert((now, 0));
        if now >= since.plus_ms(WINDOW_MS) {
            (*since, *count) = (now, 0);
        }
        if *count >= self.quota {
            let wait = since.plus_ms(WINDOW_MS).since(now).div_ceil(1000);
            return Write::Refuse(Refusal::new(
                "slow_down",
                format!("too many messages: wait {wait} s"),
            ));
        }
        *count += 1;
        self.remember(who.user, text, now);
        // What is stored and relayed is exactly what was checked: the text,
        // not whatever else the writer put beside it (a name of someone
        // else's, 60 kB of padding). Who wrote it is the message's `user`.
        match serde_json::value::to_raw_value(&json!({ "text": text })) {
            Ok(raw) => Write::Rewrite(raw),
            Err(_) => Write::Refuse(Refusal::new("bad_message", "unreadable text")),
        }
    }
}
