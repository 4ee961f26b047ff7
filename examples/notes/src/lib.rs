//! A shared note: a Yjs document with a `title` (text, at most `NOTES_TITLE_MAX` characters,
//! default 120), a `body` (text) and a map `meta` that only the room writes. A member's update
//! that breaks either rule is refused (`title_too_long`, `meta_is_the_rooms`) and nobody sees
//! it. The operator's backend (admin key) may:
//!
//! - `POST /notes/{room}/lock` and `.../unlock`: a locked note opens read-only for everyone and
//!   refuses every member's update (`locked`), sockets already open included (a socket opened
//!   while locked stays read-only after the unlock, until it reconnects);
//! - `POST /notes/{room}/append` with a text body: appends it to `body` as the room (an
//!   assistant writing into the note), stored and sent to every editor like a member's edit;
//!
//! and anyone with a token for the note may `GET /notes/{room}/outline`: its title, the
//! body's length in characters and whether it is locked.

use homeroom::doc::rules::{
    Access, Change, DocCtx, DocRules, Editor, Refusal, Request, Response, Vars, Verdict,
};
use homeroom::doc::yrs::types::ToJson;
use homeroom::doc::yrs::{Any, GetString, Map, ReadTxn, Text, WriteTxn};
use serde_json::json;

/// The longest text `POST append` takes (bytes).
const MAX_APPEND: usize = 16 * 1024;

/// The rules of the `notes` kind.
#[derive(Debug, Clone)]
pub struct Notes {
    title_max: usize,
}

impl Notes {
    /// The rules, with the title's bound from `NOTES_TITLE_MAX`.
    pub fn from_vars(vars: &Vars<'_>) -> Notes {
        Notes::with_title_max(vars.number("NOTES_TITLE_MAX", 120) as usize)
    }

    pub fn with_title_max(title_max: usize) -> Notes {
        Notes { title_max }
    }
}

/// The note's `meta` as JSON-like values (`Any::Null` when there is none).
fn meta<T: ReadTxn>(txn: &T) -> Any {
    txn.get_map("meta").map_or(Any::Null, |m| m.to_json(txn))
}

fn locked<T: ReadTxn>(txn: &T) -> bool {
    txn.get_map("meta")
        .and_then(|m| m.get(txn, "locked"))
        .is_some_and(|v| v.to_string(txn) == "true")
}

fn text<T: ReadTxn>(txn: &T, name: &str) -> String {
    txn.get_text(name).map(|t| t.get_string(txn)).unwrap_or_default()
}

impl DocRules for Notes {
    fn join(&mut self, doc: &mut DocCtx<'_>, _who: &Editor<'_>) -> Access {
        if locked(&doc.read()) {
            Access::ReadOnly
        } else {
            Access::Write
        }
    }

    fn update(&mut self, _doc: &mut DocCtx<'_>, _who: &Editor<'_>, change: &Change<'_>) -> Verdict {
        let before = change.before();
        if locked(&before) {
            return Verdict::Refuse(Refusal::new("locked", "the note is locked"));
        }
        let after = change.after();
        if meta(&after) != meta(&before) {
            return Verdict::Refuse(Refusal::new("meta_is_the_rooms", "only the room writes meta"));
        }
        if text(&after, "title").chars().count() > self.title_max {
            let why = format!("a title holds at most {} characters", self.title_max);
            return Verdict::Refuse(Refusal::new("title_too_long", why));
        }
        Verdict::Accept
    }

    fn request(&mut self, doc: &mut DocCtx<'_>, req: &Request) -> Option<Response> {
        match (req.method.as_str(), req.path.as_str()) {
            ("POST", "lock" | "unlock") if req.admin => {
                let lock = req.path == "lock";
                doc.edit(move |txn| {
                    txn.get_or_insert_map("meta").insert(txn, "locked", lock);
                });
                Some(Response::json(200, &json!({ "locked": lock })))
            }
            ("POST", "append") if req.admin => {
                if req.body.len() > MAX_APPEND {
                    return Some(Response::json(413, &json!({ "error": "too_large" })));
                }
                let body = req.body.clone();
                let appended = body.chars().count();
                doc.edit(move |txn| {
                    let text = txn.get_or_insert_text("body");
                    let end = text.len(txn);
                    text.insert(txn, end, &body);
                });
                Some(Response::json(200, &json!({ "appended": appended })))
            }
            ("POST", "lock" | "unlock" | "append") => {
                Some(Response::json(403, &json!({ "error": "admin_only" })))
            }
            ("GET", "outline") if req.admin || req.user.is_some() => {
                let txn = doc.read();
                let outline = json!({
                    "title": text(&txn, "title"),
                    "body_chars": text(&txn, "body").chars().count(),
                    "locked": locked(&txn),
                });
                Some(Response::json(200, &outline))
            }
            _ => None,
        }
    }
}
