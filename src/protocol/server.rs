//! Frames the server sends, serialized once and shared by every recipient.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::value::RawValue;

/// A durable message as it travels on the wire (`type: "message"`).
#[derive(Serialize)]
pub struct Message<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub seq: u64,
    pub id: &'a str,
    pub session: &'a str,
    pub user: &'a str,
    pub region: &'a str,
    pub topic: &'a str,
    pub data: &'a RawValue,
    pub ts: u64,
}

/// One key of the room state as clients see it.
#[derive(Serialize)]
pub struct StateValue<'a> {
    pub value: &'a RawValue,
    pub version: u64,
}

/// The room state snapshot: key to value and version, in key order.
pub type StateMap<'a> = BTreeMap<&'a str, StateValue<'a>>;

/// A presence member as in `welcome` and `presence` frames.
#[derive(Serialize)]
pub struct Member<'a> {
    pub user: &'a str,
    pub region: &'a str,
    pub state: &'a RawValue,
    pub since: u64,
    /// Verified information the room's rules attached (an added field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info: Option<&'a RawValue>,
}

/// Counts for one region in a summary.
#[derive(Serialize, Default, Clone, PartialEq, Eq, Debug)]
pub struct RegionCount {
    pub members: usize,
    pub users: usize,
}

/// The body of a `summary` frame (also embedded in `welcome`).
#[derive(Serialize, Default, Clone, PartialEq, Eq, Debug)]
pub struct Summary {
    pub members: usize,
    pub users: usize,
    pub connections: usize,
    pub regions: BTreeMap<String, RegionCount>,
}

/// Members by session, as `welcome` and `presence` frames list them.
pub type Joins<'a> = BTreeMap<&'a str, Member<'a>>;

/// `presence` inside `welcome`. In a large room `members` is empty and
/// `large` is true: the summary is all a client gets.
#[derive(Serialize)]
pub struct PresenceView<'a> {
    pub members: Joins<'a>,
    pub summary: &'a Summary,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub large: bool,
}

/// The body of `GET /rooms/{room}/presence`: every member, always.
#[derive(Serialize)]
pub struct PresenceList<'a> {
    pub members: Joins<'a>,
    pub summary: &'a Summary,
    pub large: bool,
}

/// The room's limits, as `welcome` announces them (an added field), so a
/// client can pace itself by the deployment's settings: declared with the
/// settings they come from (`room/config.rs`).
pub use crate::room::Limits;

/// The `welcome` frame: a connection's first. Not a [`ServerFrame`] variant so that a relay can
/// make it too (from the session's part the home sends it, [`crate::protocol::link::Welcome`],
/// and the room's parts it holds): both serialize this one struct, so a welcome is the same
/// bytes whichever object made it.
#[derive(Serialize)]
pub struct Welcome<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub room: &'a str,
    pub session: &'a str,
    pub user: &'a str,
    pub conn: &'a str,
    pub region: &'a str,
    pub epoch: &'a str,
    /// Where the room lives (the location hint it was created with).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home: Option<&'a str>,
    pub seq: u64,
    pub resumed: bool,
    pub missed: u64,
    /// A [`PresenceView`], serialized.
    pub presence: &'a RawValue,
    /// The room's [`Limits`], serialized (an added field).
    pub limits: &'a RawValue,
    /// When the room will close this connection because its token
    /// expires, ms (an added field; absent without a token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// The relay that holds this connection for the room, e.g. `EU-0`
    /// (an added field; absent for a socket of the room's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relay: Option<&'a str>,
}

impl Welcome<'_> {
    /// The frame as JSON text (see [`ServerFrame::to_text`]).
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A `state` frame (`reason` `None`) or a `resync` frame with the whole room state at `seq`
/// (`state`: the room state as JSON, [`StateMap`]): the home and a relay that mirrors its
/// state make the same bytes.
pub fn state_frame(reason: Option<&str>, seq: u64, state: &str) -> String {
    match reason {
        None => format!(r#"{{"type":"state","seq":{seq},"state":{state}}}"#),
        Some(reason) => {
            let reason = serde_json::to_string(reason).unwrap_or_default();
            format!(r#"{{"type":"resync","reason":{reason},"seq":{seq},"state":{state}}}"#)
        }
    }
}

/// Every other frame the server sends.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame<'a> {
    Resync {
        reason: &'static str,
        seq: u64,
        state: StateMap<'a>,
    },
    Ack {
        id: &'a str,
        seq: u64,
    },
    Signal {
        session: &'a str,
        topic: &'a str,
        data: &'a RawValue,
    },
    /// A presence diff. With `reset`, `joins` is the whole member list
    /// (empty when the room turned `large`): drop every member not in it.
    Presence {
        joins: Joins<'a>,
        leaves: Vec<&'a str>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        reset: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        large: bool,
    },
    Summary(&'a Summary),
    State {
        seq: u64,
        state: StateMap<'a>,
    },
    Error {
        code: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a str>,
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        version: Option<u64>,
    },
    Pong,
}

impl ServerFrame<'_> {
    /// The frame as JSON text. Serializing these types cannot fail (string
    /// keys, no non-finite floats), so a failure is reported, never a panic.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(r#"{{"type":"error","code":"internal","message":"encode: {e}"}}"#)
        })
    }
}

impl Message<'_> {
    /// The message frame as JSON text (see [`ServerFrame::to_text`]).
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Whether a server text carries a frame of type `kind`, on its own or
/// inside a `batch` (a frame queued behind others arrives packed): for the
/// Worker's own client, the health canary. Reads only the frame types
/// ([`super::json::frame_types`]), so no member's data can make it fail.
pub fn carries(text: &str, kind: &str) -> bool {
    super::json::frame_types(text).is_some_and(|types| types.iter().any(|t| t == kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_found_alone_or_in_a_batch() {
        assert!(carries(r#"{"type":"pong"}"#, "pong"));
        let batch = r#"{"type":"batch","frames":[{"type":"join","members":{}},{"type":"pong"}]}"#;
        assert!(carries(batch, "pong"));
        assert!(!carries(batch, "welcome"));
        assert!(!carries(r#"{"type":"message","frames":[{"type":"pong"}]}"#, "pong"));
        assert!(!carries("not json", "pong"));
    }

    #[test]
    fn frames_match_the_protocol_text() {
        assert_eq!(ServerFrame::Pong.to_text(), r#"{"type":"pong"}"#);
        assert_eq!(
            ServerFrame::Ack { id: "m1", seq: 43 }.to_text(),
            r#"{"type":"ack","id":"m1","seq":43}"#
        );
        let e =
            ServerFrame::Error { code: "conflict", id: Some("m2"), message: "x", version: Some(7) };
        assert_eq!(
            e.to_text(),
            r#"{"type":"error","code":"conflict","id":"m2","message":"x","version":7}"#
        );
        let s = Summary::default();
        assert_eq!(
            ServerFrame::Summary(&s).to_text(),
            r#"{"type":"summary","members":0,"users":0,"connections":0,"regions":{}}"#
        );
    }
}
