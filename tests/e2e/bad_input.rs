//! Bad input over a live socket, one trial per case: malformed/non-object JSON, unknown types, binary frames, invalid fields and names (with the name-length boundaries), frames over 64 KiB (1009), rate limiting and the 4029 flood close; the sender stays usable and a bystander in the same room sees an undisturbed sequence.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::check;
use crate::client::{short, Client};
use crate::harness::{shared, Spec};
use crate::support::{self, check_contiguous, id, seq, Ctx, R};

/// The largest accepted text frame.
const MAX_FRAME: usize = 65_536;

#[derive(Clone)]
enum Input {
    Text(String),
    Binary(Vec<u8>),
}

#[derive(Clone)]
enum Expect {
    /// An `error` with one of these codes; `id` echoed when given.
    Error(&'static [&'static str], Option<&'static str>),
    /// Accepted: an `ack` for this id.
    Ack(&'static str),
    /// The connection is closed with this code.
    Close(u16),
}

const BAD_FRAME: &[&str] = &["bad_frame"];
const INVALID: &[&str] = &["invalid"];
const EITHER: &[&str] = &["bad_frame", "invalid"];

fn text(s: &str) -> Input {
    Input::Text(s.to_string())
}

fn publish_with(id: Value, topic: Value) -> Input {
    Input::Text(json!({"type": "publish", "id": id, "topic": topic, "data": 1}).to_string())
}

/// A publish whose serialized frame is exactly `len` bytes.
fn publish_of_len(id: &str, len: usize) -> Input {
    let empty = json!({"type": "publish", "id": id, "topic": "big", "data": ""}).to_string();
    let pad = "x".repeat(len - empty.len());
    let s = json!({"type": "publish", "id": id, "topic": "big", "data": pad}).to_string();
    assert_eq!(s.len(), len);
    Input::Text(s)
}

fn cases() -> Vec<(&'static str, Input, Expect)> {
    let t64 = "t".repeat(64);
    let t65 = "t".repeat(65);
    let i64_ = "i".repeat(64);
    let i65 = "i".repeat(65);
    vec![
        ("malformed_json", text(r#"{"type":"publish","id":"x""#), Expect::Error(BAD_FRAME, None)),
        ("not_json", text("hello there"), Expect::Error(BAD_FRAME, None)),
        ("empty_text", text(""), Expect::Error(BAD_FRAME, None)),
        ("json_array", text("[1,2,3]"), Expect::Error(BAD_FRAME, None)),
        ("json_string", text(r#""publish""#), Expect::Error(BAD_FRAME, None)),
        ("json_number", text("42"), Expect::Error(BAD_FRAME, None)),
        ("json_null", text("null"), Expect::Error(BAD_FRAME, None)),
        ("unknown_type", text(r#"{"type":"explode","id":"u1"}"#), Expect::Error(BAD_FRAME, None)),
        ("missing_type", text(r#"{"id":"u2","topic":"t","data":1}"#), Expect::Error(EITHER, None)),
        ("type_not_a_string", text(r#"{"type":7}"#), Expect::Error(EITHER, None)),
        (
            "binary_frame",
            Input::Binary(vec![0x7b, 0x00, 0xff, 0x10]),
            Expect::Error(BAD_FRAME, None),
        ),
        (
            "publish_missing_topic",
            text(r#"{"type":"publish","id":"i1","data":1}"#),
            Expect::Error(INVALID, Some("i1")),
        ),
        (
            "publish_missing_id",
            text(r#"{"type":"publish","topic":"t","data":1}"#),
            Expect::Error(INVALID, None),
        ),
        (
            "publish_id_not_a_string",
            publish_with(json!(5), json!("t")),
            Expect::Error(INVALID, None),
        ),
        (
            "publish_topic_not_a_string",
            publish_with(json!("i2"), json!(["t"])),
            Expect::Error(INVALID, Some("i2")),
        ),
        (
            "publish_topic_65_chars",
            publish_with(json!("i3"), json!(t65)),
            Expect::Error(INVALID, Some("i3")),
        ),
        (
            "publish_topic_64_chars_ok",
            publish_with(json!("ok64t"), json!(t64)),
            Expect::Ack("ok64t"),
        ),
        ("publish_id_65_chars", publish_with(json!(i65), json!("t")), Expect::Error(INVALID, None)),
        (
            "publish_id_64_chars_ok",
            publish_with(json!(i64_.clone()), json!("t")),
            Expect::Ack(leak(i64_)),
        ),
        (
            "publish_empty_topic",
            publish_with(json!("i4"), json!("")),
            Expect::Error(INVALID, Some("i4")),
        ),
        ("publish_empty_id", publish_with(json!(""), json!("t")), Expect::Error(INVALID, None)),
        (
            "publish_reserved_topic",
            publish_with(json!("i5"), json!("$state")),
            Expect::Error(INVALID, Some("i5")),
        ),
        (
            "set_missing_key",
            text(r#"{"type":"set","id":"i6","value":1}"#),
            Expect::Error(INVALID, Some("i6")),
        ),
        (
            "set_if_version_string",
            text(r#"{"type":"set","id":"i7","key":"k","value":1,"if_version":"abc"}"#),
            Expect::Error(INVALID, Some("i7")),
        ),
        (
            "set_if_version_negative",
            text(r#"{"type":"set","id":"i8","key":"k","value":1,"if_version":-1}"#),
            Expect::Error(INVALID, Some("i8")),
        ),
        ("frame_of_64_kib_ok", publish_of_len("big-ok", MAX_FRAME), Expect::Ack("big-ok")),
        (
            "frame_over_64_kib_closes_1009",
            publish_of_len("big-no", MAX_FRAME + 1),
            Expect::Close(1009),
        ),
    ]
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

pub fn trials() -> Vec<Spec> {
    let mut v: Vec<Spec> = cases()
        .into_iter()
        .map(|(name, input, expect)| {
            shared(&format!("bad_input::{name}"), move |ctx| one_case(ctx, name, input, expect))
        })
        .collect();
    v.push(shared("bad_input::rate_limited_frames_are_refused_not_applied", rate_limited));
    v.push(shared("bad_input::sustained_flood_closes_4029", flood));
    v
}

/// A room with a bystander that has published once; returns (room, bystander, victim, seq).
async fn setup(ctx: &Ctx, tag: &str) -> R<(String, Client, Client, u64)> {
    let room = support::room(&format!("bad-{}", tag.replace('_', "-")));
    let mut by = ctx.dial(&room, &support::session("bystander")).connect().await?;
    let victim = ctx.dial(&room, &support::session("victim")).connect().await?;
    let s0 = by.publish_acked("b0", "chat", json!("before")).await?;
    Ok((room, by, victim, s0))
}

/// The bystander publishes again and must see exactly `expected_ids` after b0, then b1, gapless,
/// with no error frame and no close.
async fn bystander_undisturbed(by: &mut Client, s0: u64, expected_ids: &[String]) -> R {
    let b1 = by.publish_acked("b1", "chat", json!("after")).await?;
    check!(
        b1 == s0 + expected_ids.len() as u64 + 1,
        "bystander's b1 at {b1}, expected {}",
        s0 + expected_ids.len() as u64 + 1
    );
    by.message("b1").await?;
    let msgs = by.messages();
    check_contiguous("bystander", &msgs, s0)?;
    let mut want = vec!["b0".to_string()];
    want.extend(expected_ids.iter().cloned());
    want.push("b1".to_string());
    let got: Vec<String> = msgs.iter().map(|m| id(m).to_string()).collect();
    check!(got == want, "bystander saw {got:?}, expected {want:?}");
    let errors: Vec<&Value> = by.history.iter().filter(|f| f["type"] == "error").collect();
    check!(errors.is_empty(), "the bystander got error frames: {errors:?}");
    check!(by.closed.is_none(), "the bystander was closed: {:?}", by.closed);
    Ok(())
}

async fn one_case(ctx: Ctx, name: &'static str, input: Input, expect: Expect) -> R {
    let (room, mut by, mut v, s0) = setup(&ctx, name).await?;
    match &input {
        Input::Text(t) => v.send_text(t.clone()).await?,
        Input::Binary(b) => v.send_binary(b.clone()).await?,
    }
    let mut applied: Vec<String> = Vec::new();
    match expect {
        Expect::Error(codes, want_id) => {
            let f = v.until("the error", |f| f["type"] == "error" || f["type"] == "ack").await?;
            check!(f["type"] == "error", "expected an error {codes:?}, got {}", short(&f));
            let code = f["code"].as_str().unwrap_or_default();
            check!(codes.contains(&code), "expected error code {codes:?}, got {}", short(&f));
            check!(f["message"].is_string(), "error without a message text: {}", short(&f));
            if let Some(i) = want_id {
                check!(f["id"] == i, "the error should echo id {i}: {}", short(&f));
            }
        }
        Expect::Ack(i) => {
            let s = v.ack(i).await?;
            check!(s == s0 + 1, "{i} acked at {s}, expected {}", s0 + 1);
            applied.push(i.to_string());
        }
        Expect::Close(code) => {
            let got = v.expect_close(Duration::from_secs(10)).await?;
            check!(got == Some(code), "expected close code {code}, got {got:?}");
            let errors: Vec<&Value> = v
                .history
                .iter()
                .filter(|f| f["type"] == "message" && f["id"] == "big-no")
                .collect();
            check!(errors.is_empty(), "the oversized frame was applied: {errors:?}");
            // The session can come back and work.
            v = ctx.dial(&room, &v.session.clone()).connect().await?;
        }
    }
    // The sender's connection works afterwards and no seq was consumed by the bad frame.
    v.ping().await?;
    let next = v.publish_acked("after", "chat", json!("ok")).await?;
    let want = s0 + applied.len() as u64 + 1;
    check!(next == want, "publish after the bad frame at {next}, expected {want}");
    applied.push("after".to_string());
    bystander_undisturbed(&mut by, s0, &applied).await
}

/// Sends `n` publishes back-to-back (one flush).
async fn burst(c: &mut Client, prefix: &str, n: usize) -> R<Vec<String>> {
    let ids: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    for i in &ids {
        c.feed(json!({"type": "publish", "id": i, "topic": "flood", "data": i})).await?;
    }
    c.flush().await?;
    Ok(ids)
}

async fn rate_limited(ctx: Ctx) -> R {
    const N: usize = 80; // burst is 50
    let (_room, mut by, mut v, s0) = setup(&ctx, "rate").await?;
    let ids = burst(&mut v, "r", N).await?;
    let mut acked: Vec<(u64, String)> = Vec::new();
    let mut limited = 0usize;
    while acked.len() + limited < N {
        let f = v
            .until("acks and rate_limited errors", |f| f["type"] == "ack" || f["type"] == "error")
            .await?;
        if f["type"] == "ack" {
            acked.push((seq(&f), id(&f).to_string()));
        } else if f["code"] == "rate_limited" {
            if let Some(i) = f["id"].as_str() {
                check!(ids.iter().any(|x| x == i), "rate_limited for an unknown id: {f}");
            }
            limited += 1;
        } else {
            return Err(format!("unexpected error: {f}"));
        }
    }
    check!(limited >= 10, "{N} frames back-to-back should exceed burst 50: only {limited} refused");
    check!(acked.len() >= 50, "the burst of 50 should be accepted: only {} acks", acked.len());
    acked.sort();
    for (k, (s, _)) in acked.iter().enumerate() {
        check!(*s == s0 + 1 + k as u64, "accepted frames are not gapless: {acked:?}");
    }
    check!(v.closed.is_none(), "a short burst must not close the connection: {:?}", v.closed);
    // Refused frames were not applied: a retry of a refused id is new, not a duplicate ack.
    let acked_ids: BTreeSet<&str> = acked.iter().map(|a| a.1.as_str()).collect();
    let refused = ids.iter().find(|i| !acked_ids.contains(i.as_str())).cloned().unwrap();
    let after = v.publish_patiently(&refused, "flood", json!(refused)).await?;
    check!(
        after == s0 + acked.len() as u64 + 1,
        "the retried refused frame {refused} got seq {after}, expected a new seq {}",
        s0 + acked.len() as u64 + 1
    );
    v.ping().await?;
    let mut expected: Vec<String> = acked.iter().map(|a| a.1.clone()).collect();
    expected.push(refused);
    bystander_undisturbed(&mut by, s0, &expected).await
}

async fn flood(ctx: Ctx) -> R {
    const N: usize = 300;
    let (_room, mut by, mut v, s0) = setup(&ctx, "flood").await?;
    // Back-to-back in chunks, reading what has arrived in between, until the server closes
    // (so we stop writing into a closed connection). Write errors just mean it closed.
    let mut sent = 0;
    while sent < N && v.closed.is_none() {
        for i in sent..(sent + 25).min(N) {
            if v.feed(
                json!({"type": "publish", "id": format!("f{i}"), "topic": "flood", "data": i}),
            )
            .await
            .is_err()
            {
                break;
            }
        }
        sent = (sent + 25).min(N);
        if v.flush().await.is_err() {
            break;
        }
        // Drain whatever is already there without waiting for more.
        while let Ok(crate::client::Event::Frame(_)) =
            v.next_event_within(Duration::from_millis(1)).await
        {}
    }
    let code = v.expect_close(Duration::from_secs(15)).await?;
    check!(code == Some(4029), "a sustained flood should be closed with 4029, got {code:?}");
    let mut acked: Vec<(u64, String)> = v
        .history
        .iter()
        .filter(|f| f["type"] == "ack")
        .map(|f| (seq(f), id(f).to_string()))
        .collect();
    let limited =
        v.history.iter().filter(|f| f["type"] == "error" && f["code"] == "rate_limited").count();
    let others: Vec<&Value> =
        v.history.iter().filter(|f| f["type"] == "error" && f["code"] != "rate_limited").collect();
    check!(others.is_empty(), "unexpected errors: {others:?}");
    check!(limited > 0, "closed without any rate_limited error first");
    check!(acked.len() >= 50 && acked.len() < N, "{} of {N} accepted", acked.len());
    acked.sort();
    let expected: Vec<String> = acked.iter().map(|a| a.1.clone()).collect();
    bystander_undisturbed(&mut by, s0, &expected).await
}
