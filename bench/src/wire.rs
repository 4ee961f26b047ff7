//! Frames on the wire. Out: homeroom `publish` and `signal` frames, and the
//! raw text the baselines broadcast. Both carry the same payload
//! `{"t","p","n","pad"}`: publish time (µs since the run's start), publisher
//! index and that publisher's counter, so every receiver measures latency
//! and checks "each publish exactly once, in order" the same way on every
//! target. In: any text, `batch` frames flattened, reduced to [`Event`]s.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::target::Protocol;

/// What a publisher puts in every message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    /// Publish time, µs since the run's start (one clock for all clients).
    pub t: u64,
    /// Publisher index.
    pub p: u32,
    /// The publisher's counter, from 0, +1 per publish.
    pub n: u64,
}

impl Payload {
    /// `{"t":..,"p":..,"n":..,"pad":"..."}` with `pad` bytes of padding.
    pub fn json(&self, pad: usize) -> String {
        let mut s = String::with_capacity(48 + pad);
        s.push_str(&format!(r#"{{"t":{},"p":{},"n":{},"pad":""#, self.t, self.p, self.n));
        s.extend(std::iter::repeat_n('x', pad));
        s.push_str("\"}");
        s
    }
}

/// The client message id of publisher `p`'s `n`th publish.
pub fn publish_id(p: u32, n: u64) -> String {
    format!("p{p}-{n}")
}

/// The `n` back from a [`publish_id`].
pub fn id_counter(id: &str) -> Option<u64> {
    id.rsplit_once('-')?.1.parse().ok()
}

/// The text a publisher sends for `payload` to a target speaking `protocol`.
pub fn publish_text(protocol: Protocol, payload: &Payload, pad: usize) -> String {
    match protocol {
        // Topic `chat` and the payload inside a `text`, so the chat kind's
        // rules (the rules target), which store exactly `{"text"}`, take it
        // and keep it; the open rules take anything.
        Protocol::Homeroom => format!(
            r#"{{"type":"publish","id":"{}","topic":"chat","data":{{"text":"bench t={} p={} n={} {}"}}}}"#,
            publish_id(payload.p, payload.n),
            payload.t,
            payload.p,
            payload.n,
            "x".repeat(pad)
        ),
        // The document rounds (bench/src/docs.rs) speak y-protocols themselves.
        Protocol::Raw | Protocol::Yjs => payload.json(pad),
    }
}

/// A homeroom `signal` (a cursor position, say).
/// The echo of a homeroom `mark` (the mark is 16 hex digits from the room).
pub fn mark_text(mark: &str) -> String {
    let mark = serde_json::to_string(mark).unwrap_or_default();
    format!(r#"{{"type":"mark","mark":{mark}}}"#)
}

pub fn signal_text(topic: &str, x: u64) -> String {
    format!(r#"{{"type":"signal","topic":"{topic}","data":{{"x":{x}}}}}"#)
}

/// One received frame, as far as the load generator cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Welcome {
        seq: u64,
        epoch: String,
        resumed: bool,
        missed: u64,
    },
    /// A durable message (homeroom: with its seq) or a baseline broadcast.
    /// `payload` is `None` for messages that are not the bench's.
    Message {
        seq: Option<u64>,
        payload: Option<Payload>,
    },
    /// `n` is the publish counter read back from the id.
    Ack {
        n: Option<u64>,
        seq: u64,
    },
    /// A signal; `x` is its sender's send time (µs on the run's clock) when it is a bench one.
    Signal {
        x: Option<u64>,
    },
    Resync {
        seq: u64,
    },
    Error {
        code: String,
    },
    /// A flow-control mark: echo it (`mark_text`) or the room stops sending.
    Mark {
        mark: String,
    },
    /// presence, summary, pong, state, anything else.
    Other,
}

#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    epoch: Option<Cow<'a, str>>,
    #[serde(default)]
    resumed: Option<bool>,
    #[serde(default)]
    missed: Option<u64>,
    #[serde(borrow, default)]
    code: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    mark: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(borrow, default)]
    frames: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    t: Option<u64>,
    #[serde(default)]
    p: Option<u32>,
    #[serde(default)]
    n: Option<u64>,
}

#[derive(Deserialize)]
struct TextPayload<'a> {
    #[serde(borrow)]
    text: Cow<'a, str>,
}

/// A bench signal's data: its send time.
#[derive(Deserialize)]
struct SignalData {
    x: u64,
}

/// The payload in a homeroom message's `text`: `bench t=.. p=.. n=.. xxx`.
fn text_payload(text: &str) -> Option<Payload> {
    let mut words = text.split(' ');
    if words.next()? != "bench" {
        return None;
    }
    let mut field = |name: &str| words.next()?.strip_prefix(name)?.parse::<u64>().ok();
    let t = field("t=")?;
    let p = u32::try_from(field("p=")?).ok()?;
    let n = field("n=")?;
    Some(Payload { t, p, n })
}

/// Reads one text into events (a `batch` becomes its frames, in order).
/// Text that is not JSON becomes `Error { code: "unparsable" }`.
pub fn parse(protocol: Protocol, text: &str, out: &mut Vec<Event>) {
    let frame: Frame = match serde_json::from_str(text) {
        Ok(f) => f,
        Err(_) => {
            out.push(Event::Error { code: "unparsable".into() });
            return;
        }
    };
    if protocol == Protocol::Raw {
        let payload = match (frame.t, frame.p, frame.n) {
            (Some(t), Some(p), Some(n)) => Some(Payload { t, p, n }),
            _ => None,
        };
        out.push(Event::Message { seq: None, payload });
        return;
    }
    let event = match frame.kind.as_deref() {
        Some("batch") => {
            for inner in frame.frames.unwrap_or_default() {
                parse(protocol, inner.get(), out);
            }
            return;
        }
        Some("welcome") => Event::Welcome {
            seq: frame.seq.unwrap_or(0),
            epoch: frame.epoch.map(Cow::into_owned).unwrap_or_default(),
            resumed: frame.resumed.unwrap_or(false),
            missed: frame.missed.unwrap_or(0),
        },
        Some("message") => {
            let payload = frame.data.and_then(|d| {
                let text = serde_json::from_str::<TextPayload>(d.get()).ok()?;
                text_payload(&text.text)
            });
            Event::Message { seq: frame.seq, payload }
        }
        Some("ack") => {
            Event::Ack { n: frame.id.as_deref().and_then(id_counter), seq: frame.seq.unwrap_or(0) }
        }
        Some("signal") => Event::Signal {
            x: frame
                .data
                .and_then(|d| serde_json::from_str::<SignalData>(d.get()).ok())
                .map(|d| d.x),
        },
        Some("resync") => Event::Resync { seq: frame.seq.unwrap_or(0) },
        Some("error") => Event::Error { code: frame.code.map(Cow::into_owned).unwrap_or_default() },
        Some("mark") => Event::Mark { mark: frame.mark.map(Cow::into_owned).unwrap_or_default() },
        _ => Event::Other,
    };
    out.push(event);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(protocol: Protocol, text: &str) -> Vec<Event> {
        let mut out = Vec::new();
        parse(protocol, text, &mut out);
        out
    }

    #[test]
    fn payload_round_trips_through_a_homeroom_message() {
        let p = Payload { t: 123, p: 2, n: 9 };
        let publish: serde_json::Value =
            serde_json::from_str(&publish_text(Protocol::Homeroom, &p, 5)).unwrap();
        assert_eq!(publish["id"], "p2-9");
        assert_eq!(publish["data"]["text"], "bench t=123 p=2 n=9 xxxxx");
        // The room sends the data on as it was sent (the chat's rules keep exactly `text`).
        let message = format!(
            r#"{{"type":"message","seq":43,"id":"p2-9","session":"s","user":"u","region":"OC","topic":"bench","data":{},"ts":1}}"#,
            publish["data"]
        );
        assert_eq!(
            events(Protocol::Homeroom, &message),
            [Event::Message { seq: Some(43), payload: Some(p) }]
        );
        assert_eq!(
            events(Protocol::Raw, &publish_text(Protocol::Raw, &p, 0)),
            [Event::Message { seq: None, payload: Some(p) }]
        );
    }

    #[test]
    fn a_text_that_is_not_a_bench_payload_is_none() {
        for text in
            ["bench", "hello t=1 p=2 n=3", "bench t=1 p=x n=3", "bench t=1 p=9999999999 n=3"]
        {
            assert_eq!(text_payload(text), None, "{text}");
        }
        assert_eq!(text_payload("bench t=1 p=2 n=3"), Some(Payload { t: 1, p: 2, n: 3 }));
    }

    #[test]
    fn batches_flatten_in_order() {
        let text = r#"{"type":"batch","frames":[
            {"type":"ack","id":"p0-7","seq":5},
            {"type":"signal","session":"s","topic":"c","data":{"x":7}},
            {"type":"summary","members":1},
            {"type":"message","seq":6,"id":"x","topic":"$state","data":{"key":"k"}}]}"#;
        assert_eq!(
            events(Protocol::Homeroom, text),
            [
                Event::Ack { n: Some(7), seq: 5 },
                Event::Signal { x: Some(7) },
                Event::Other,
                Event::Message { seq: Some(6), payload: None },
            ]
        );
    }

    #[test]
    fn welcome_resync_error_and_garbage() {
        let w = r#"{"type":"welcome","room":"r","epoch":"e-1","seq":42,"resumed":true,"missed":3,"presence":{"members":{}}}"#;
        assert_eq!(
            events(Protocol::Homeroom, w),
            [Event::Welcome { seq: 42, epoch: "e-1".into(), resumed: true, missed: 3 }]
        );
        assert_eq!(
            events(Protocol::Homeroom, r#"{"type":"resync","reason":"gap","seq":9,"state":{}}"#),
            [Event::Resync { seq: 9 }]
        );
        assert_eq!(
            events(Protocol::Homeroom, r#"{"type":"error","code":"rate_limited"}"#),
            [Event::Error { code: "rate_limited".into() }]
        );
        assert_eq!(events(Protocol::Raw, "nope"), [Event::Error { code: "unparsable".into() }]);
        let mark = r#"{"type":"batch","frames":[{"type":"mark","mark":"00ff"}]}"#;
        assert_eq!(events(Protocol::Homeroom, mark), [Event::Mark { mark: "00ff".into() }]);
        assert_eq!(mark_text("00ff"), r#"{"type":"mark","mark":"00ff"}"#);
        assert_eq!(id_counter("p12-345"), Some(345));
    }
}
