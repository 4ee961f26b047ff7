//! Frames a client sends, parsed and validated into [`ClientFrame`].

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json::{deeper_than, unportable, Unportable};
use super::names;

/// How deeply `data`, `value` and presence `state` may nest arrays and
/// objects. Deeper values are refused with `invalid`: other clients (and
/// recursive JSON parsers in every language) must be able to read what the
/// room relays.
pub const MAX_DEPTH: usize = 32;

/// A valid frame from a client. `data`, `value` and `state` stay raw JSON:
/// the room stores and forwards them byte for byte.
#[derive(Debug)]
pub enum ClientFrame {
    /// Durable message for the room log.
    Publish { id: String, topic: String, data: Box<RawValue> },
    /// Ephemeral message for the other connections.
    Signal { topic: String, data: Box<RawValue> },
    /// Ordered state write, optionally compare-and-set on the key's version.
    Set { id: String, key: String, value: Box<RawValue>, if_version: Option<u64> },
    /// Replace this session's presence state.
    Presence { state: Box<RawValue> },
    /// Ask for the state snapshot.
    GetState,
    /// Liveness probe (normally answered by the runtime without waking the room).
    Ping,
    /// The echo of a server `mark`: the client has read everything sent
    /// before that mark (flow control).
    Mark { mark: String },
}

/// Why a text frame was refused; `id` is echoed when it could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// Not a JSON object, or an unknown `type`.
    BadFrame(String),
    /// A known frame with a missing, ill-typed or out-of-bounds field.
    Invalid { id: Option<String>, message: String },
}

/// Every field any frame may carry, each kept raw so that one ill-typed
/// field becomes a precise `invalid` error instead of a generic parse failure.
#[derive(Deserialize)]
struct Loose<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    topic: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    data: Option<Box<RawValue>>,
    #[serde(borrow)]
    key: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    value: Option<Box<RawValue>>,
    #[serde(borrow)]
    if_version: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    state: Option<Box<RawValue>>,
    #[serde(borrow)]
    mark: Option<&'a RawValue>,
}

/// A field that is present, even as `null` (a plain `Option` would read
/// `null` as absent, and `"data": null` is valid data).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// Parses one text frame.
pub fn parse(text: &str) -> Result<ClientFrame, FrameError> {
    let loose: Loose = serde_json::from_str(text)
        .map_err(|e| FrameError::BadFrame(format!("not a JSON object: {e}")))?;
    let kind: String = match loose.kind {
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|_| FrameError::BadFrame("`type` must be a string".into()))?,
        None => return Err(FrameError::BadFrame("missing `type`".into())),
    };
    match kind.as_str() {
        "publish" => {
            let id = id_field(loose.id)?;
            let fail = |message: String| FrameError::Invalid { id: Some(id.clone()), message };
            let topic = topic_field(loose.topic).map_err(fail)?;
            let data = loose.data.ok_or_else(|| fail("missing `data`".into()))?;
            check_value(&data, "data").map_err(fail)?;
            Ok(ClientFrame::Publish { id, topic, data })
        }
        "signal" => {
            let fail = |message: String| FrameError::Invalid { id: None, message };
            let topic = topic_field(loose.topic).map_err(fail)?;
            let data = loose.data.ok_or_else(|| fail("missing `data`".into()))?;
            check_value(&data, "data").map_err(fail)?;
            Ok(ClientFrame::Signal { topic, data })
        }
        "set" => {
            let id = id_field(loose.id)?;
            let fail = |message: String| FrameError::Invalid { id: Some(id.clone()), message };
            let key: String = string_field(loose.key, "key").map_err(fail)?;
            if !names::bounded(&key) {
                return Err(fail("`key` must be 1-64 characters".into()));
            }
            let value = loose.value.ok_or_else(|| fail("missing `value`".into()))?;
            check_value(&value, "value").map_err(fail)?;
            let if_version = match loose.if_version {
                None => None,
                Some(raw) if raw.get() == "null" => None,
                Some(raw) => Some(
                    serde_json::from_str::<u64>(raw.get())
                        .map_err(|_| fail("`if_version` must be a non-negative integer".into()))?,
                ),
            };
            Ok(ClientFrame::Set { id, key, value, if_version })
        }
        "presence" => {
            let state = loose.state.ok_or_else(|| FrameError::Invalid {
                id: None,
                message: "missing `state`".into(),
            })?;
            if !state.get().starts_with('{') {
                return Err(FrameError::Invalid {
                    id: None,
                    message: "`state` must be an object".into(),
                });
            }
            check_value(&state, "state")
                .map_err(|message| FrameError::Invalid { id: None, message })?;
            Ok(ClientFrame::Presence { state })
        }
        "get_state" => Ok(ClientFrame::GetState),
        "ping" => Ok(ClientFrame::Ping),
        "mark" => {
            let fail = |message: String| FrameError::Invalid { id: None, message };
            let mark = string_field(loose.mark, "mark").map_err(fail)?;
            if !names::bounded(&mark) {
                return Err(fail("`mark` must be 1-64 characters".into()));
            }
            Ok(ClientFrame::Mark { mark })
        }
        other => Err(FrameError::BadFrame(format!(
            "unknown frame type `{}`",
            other.chars().take(names::MAX_NAME).collect::<String>()
        ))),
    }
}

/// Refuses a value nested deeper than [`MAX_DEPTH`], or one that not every
/// JSON reader takes ([`unportable`]): a member must not be able to hand
/// the others a frame their reader refuses whole.
pub fn check_value(value: &RawValue, name: &str) -> Result<(), String> {
    if deeper_than(value.get(), MAX_DEPTH) {
        return Err(format!("`{name}` nests deeper than {MAX_DEPTH} levels"));
    }
    match unportable(value.get()) {
        Some(Unportable::LoneSurrogate) => Err(format!(
            "`{name}` holds a \\u escape of half a surrogate pair, which not every JSON reader takes"
        )),
        Some(Unportable::NumberOutOfRange) => Err(format!(
            "`{name}` holds a number beyond a 64-bit float's range, which not every JSON reader takes"
        )),
        None => Ok(()),
    }
}

fn string_field(raw: Option<&RawValue>, name: &str) -> Result<String, String> {
    let raw = raw.ok_or_else(|| format!("missing `{name}`"))?;
    serde_json::from_str(raw.get()).map_err(|_| format!("`{name}` must be a string"))
}

fn id_field(raw: Option<&RawValue>) -> Result<String, FrameError> {
    let id =
        string_field(raw, "id").map_err(|message| FrameError::Invalid { id: None, message })?;
    if !names::bounded(&id) {
        return Err(FrameError::Invalid {
            id: None,
            message: "`id` must be 1-64 characters".into(),
        });
    }
    Ok(id)
}

fn topic_field(raw: Option<&RawValue>) -> Result<String, String> {
    let topic = string_field(raw, "topic")?;
    if !names::valid_topic(&topic) {
        return Err("`topic` must be 1-64 characters and not start with `$`".into());
    }
    Ok(topic)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> &'static str {
        match parse(text) {
            Ok(_) => "ok",
            Err(FrameError::BadFrame(_)) => "bad_frame",
            Err(FrameError::Invalid { .. }) => "invalid",
        }
    }

    #[test]
    fn accepts_every_frame_of_the_protocol() {
        for text in [
            r#"{"type":"publish","id":"m1","topic":"chat","data":{"t":"hi"}}"#,
            r#"{"type":"signal","topic":"cursor","data":[1,2]}"#,
            r#"{"type":"set","id":"m2","key":"bid","value":10,"if_version":7}"#,
            r#"{"type":"set","id":"m2","key":"bid","value":null}"#,
            r#"{"type":"presence","state":{"name":"ann"}}"#,
            r#"{"type":"get_state"}"#,
            r#"{"type":"ping","extra":"ignored"}"#,
            r#"{"type":"publish","id":"m3","topic":"chat","data":null}"#,
        ] {
            assert_eq!(code(text), "ok", "{text}");
        }
    }

    #[test]
    fn keeps_data_bytes_exactly() {
        let Ok(ClientFrame::Publish { data, .. }) =
            parse(r#"{"type":"publish","id":"m","topic":"t","data":{"n":1.50, "s":"\u00e9"}}"#)
        else {
            panic!("publish expected")
        };
        assert_eq!(data.get(), r#"{"n":1.50, "s":"\u00e9"}"#);
    }

    #[test]
    fn refuses_malformed_frames_with_the_right_code() {
        assert_eq!(code("not json"), "bad_frame");
        assert_eq!(code("[1,2]"), "bad_frame");
        assert_eq!(code("42"), "bad_frame");
        assert_eq!(code(r#"{"type":"nope"}"#), "bad_frame");
        assert_eq!(code(r#"{"type":7}"#), "bad_frame");
        assert_eq!(code(r#"{"id":"m"}"#), "bad_frame");
        assert_eq!(code(r#"{"type":"ping","type":"ping"}"#), "bad_frame");
        assert_eq!(code(r#"{"type":"publish","topic":"t","data":1}"#), "invalid");
        assert_eq!(code(r#"{"type":"publish","id":5,"topic":"t","data":1}"#), "invalid");
        assert_eq!(code(r#"{"type":"publish","id":"m","topic":"$x","data":1}"#), "invalid");
        assert_eq!(code(r#"{"type":"publish","id":"m","topic":"t"}"#), "invalid");
        let long = "x".repeat(65);
        assert_eq!(
            code(&format!(r#"{{"type":"publish","id":"{long}","topic":"t","data":1}}"#)),
            "invalid"
        );
        assert_eq!(
            code(&format!(r#"{{"type":"publish","id":"m","topic":"{long}","data":1}}"#)),
            "invalid"
        );
        assert_eq!(
            code(r#"{"type":"set","id":"m","key":"k","value":1,"if_version":-1}"#),
            "invalid"
        );
        assert_eq!(code(r#"{"type":"set","id":"m","key":"k"}"#), "invalid");
        assert_eq!(code(r#"{"type":"presence","state":[1]}"#), "invalid");
        assert_eq!(code(r#"{"type":"signal","topic":"c"}"#), "invalid");
        assert_eq!(code(r#"{"type":"mark"}"#), "invalid");
        assert_eq!(code(r#"{"type":"mark","mark":7}"#), "invalid");
        assert_eq!(code(r#"{"type":"mark","mark":"a1"}"#), "ok");
    }

    #[test]
    fn refuses_values_nested_past_the_limit_without_recursing() {
        let nest = |n: usize| "[".repeat(n) + &"]".repeat(n);
        let at = nest(MAX_DEPTH);
        let over = nest(MAX_DEPTH + 1);
        let far = nest(30_000);
        for (v, want) in [(&at, "ok"), (&over, "invalid"), (&far, "invalid")] {
            assert_eq!(
                code(&format!(r#"{{"type":"publish","id":"m","topic":"t","data":{v}}}"#)),
                want
            );
            assert_eq!(code(&format!(r#"{{"type":"signal","topic":"t","data":{v}}}"#)), want);
            assert_eq!(code(&format!(r#"{{"type":"set","id":"m","key":"k","value":{v}}}"#)), want);
        }
        let state = |d: &str| format!(r#"{{"type":"presence","state":{{"a":{d}}}}}"#);
        assert_eq!(code(&state(&nest(MAX_DEPTH - 1))), "ok");
        assert_eq!(code(&state(&nest(MAX_DEPTH))), "invalid");
        let err = parse(&format!(r#"{{"type":"publish","id":"m7","topic":"t","data":{far}}}"#));
        assert!(matches!(err, Err(FrameError::Invalid { id: Some(ref id), .. }) if id == "m7"));
    }

    #[test]
    fn refuses_values_a_strict_json_reader_would_not_read() {
        // A member must not put in front of the others a frame their
        // reader refuses whole (fuzzer finding 4).
        for v in [r#""\ud800""#, r#"["\udfff",1]"#, r#"{"n":1e999}"#, r#"-2e308"#, r#""\ud83dx""#] {
            assert_eq!(
                code(&format!(r#"{{"type":"publish","id":"m","topic":"t","data":{v}}}"#)),
                "invalid",
                "{v}"
            );
            assert_eq!(
                code(&format!(r#"{{"type":"set","id":"m","key":"k","value":{v}}}"#)),
                "invalid",
                "{v}"
            );
            assert_eq!(
                code(&format!(r#"{{"type":"presence","state":{{"a":{v}}}}}"#)),
                "invalid",
                "{v}"
            );
        }
        // Pairs, escapes of other characters, big and tiny numbers are fine.
        for v in [
            r#""\ud83d\ude00""#,
            r#""\u00e9\n""#,
            "1e308",
            "1e-999",
            "123456789012345678901234567890",
        ] {
            assert_eq!(
                code(&format!(r#"{{"type":"publish","id":"m","topic":"t","data":{v}}}"#)),
                "ok",
                "{v}"
            );
        }
    }

    #[test]
    fn echoes_the_id_when_it_was_readable() {
        let err = parse(r#"{"type":"publish","id":"m9","topic":"$x","data":1}"#).unwrap_err();
        assert!(matches!(err, FrameError::Invalid { id: Some(ref id), .. } if id == "m9"));
    }
}
