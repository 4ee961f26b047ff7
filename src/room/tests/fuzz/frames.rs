//! Client frames with each field right, wrong or missing, and the answer the protocol fixes
//! for each; server and `batch` frames for `frame_types`; mutations and noise.

#![allow(clippy::wildcard_imports)]
use super::*;

// ---- client frames with an oracle -------------------------------------------

pub(super) const KNOWN: &[&str] =
    &["type", "id", "topic", "data", "key", "value", "if_version", "state", "mark"];

/// A field value as generated.
#[derive(Clone, Debug)]
pub(super) enum Fv {
    Null,
    Str(GStr),
    /// Any other JSON value, with its depth.
    Val(String, usize),
}

impl Fv {
    pub(super) fn text(&self) -> &str {
        match self {
            Fv::Null => "null",
            Fv::Str(s) => &s.lit,
            Fv::Val(t, _) => t,
        }
    }

    pub(super) fn depth(&self) -> usize {
        match self {
            Fv::Val(_, d) => *d,
            _ => 0,
        }
    }

    pub(super) fn syntax_ok(&self) -> bool {
        match self {
            Fv::Str(s) => s.syntax_ok,
            _ => true,
        }
    }

    /// The decoded string, when it is a readable one.
    pub(super) fn string(&self) -> Option<&str> {
        match self {
            Fv::Str(s) => s.decoded.as_deref(),
            _ => None,
        }
    }
}

/// A frame as generated: its fields in order (names decoded).
#[derive(Clone, Debug)]
pub(super) struct GFrame {
    pub(super) fields: Vec<(String, String, Fv)>,
}

/// What `parse` must answer.
#[derive(Debug, PartialEq)]
pub(super) enum Expect {
    Publish { id: String, topic: String, data: String },
    Signal { topic: String, data: String },
    Set { id: String, key: String, value: String, if_version: Option<u64> },
    Presence { state: String },
    GetState,
    Ping,
    Mark { mark: String },
    Bad,
    Invalid(Option<String>),
}

impl GFrame {
    pub(super) fn text(&self, rng: &mut Rng) -> String {
        let mut out = String::new();
        ws(rng, &mut out);
        out.push('{');
        for (i, (lit, _, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            ws(rng, &mut out);
            out.push_str(lit);
            ws(rng, &mut out);
            out.push(':');
            ws(rng, &mut out);
            out.push_str(v.text());
            ws(rng, &mut out);
        }
        out.push('}');
        ws(rng, &mut out);
        out
    }

    pub(super) fn get(&self, name: &str) -> Option<&Fv> {
        self.fields.iter().find(|(_, n, _)| n == name).map(|(_, _, v)| v)
    }

    /// The answer PROTOCOL.md and the README fix for this frame.
    pub(super) fn expect(&self) -> Expect {
        if self.fields.iter().any(|(_, _, v)| !v.syntax_ok()) {
            return Expect::Bad;
        }
        let mut names = BTreeSet::new();
        for (_, name, _) in &self.fields {
            if KNOWN.contains(&name.as_str()) && !names.insert(name.as_str()) {
                return Expect::Bad; // duplicate field
            }
        }
        let kind = match self.get("type") {
            Some(v) => match v.string() {
                Some(k) => k.to_owned(),
                None => return Expect::Bad,
            },
            None => return Expect::Bad,
        };
        // A field a reader must find: absent or `null` are the same.
        let name = |f: &str| -> Option<String> {
            self.get(f).and_then(Fv::string).filter(|s| names::bounded(s)).map(str::to_owned)
        };
        let topic = || self.get("topic").and_then(Fv::string).filter(|t| names::valid_topic(t));
        // Nested at most MAX_DEPTH, and readable by a strict reader
        // (serde_json refuses lone surrogates and numbers past f64, as the
        // room does since finding 4).
        let shallow = |f: &str| {
            self.get(f).filter(|v| {
                v.depth() <= MAX_DEPTH && serde_json::from_str::<Value>(v.text()).is_ok()
            })
        };
        match kind.as_str() {
            "publish" => {
                let Some(id) = name("id") else { return Expect::Invalid(None) };
                match (topic(), shallow("data")) {
                    (Some(topic), Some(data)) => Expect::Publish {
                        id,
                        topic: topic.to_owned(),
                        data: data.text().to_owned(),
                    },
                    _ => Expect::Invalid(Some(id)),
                }
            }
            "signal" => match (topic(), shallow("data")) {
                (Some(topic), Some(data)) => {
                    Expect::Signal { topic: topic.to_owned(), data: data.text().to_owned() }
                }
                _ => Expect::Invalid(None),
            },
            "set" => {
                let Some(id) = name("id") else { return Expect::Invalid(None) };
                let if_version = match self.get("if_version") {
                    None | Some(Fv::Null) => Some(None),
                    Some(Fv::Val(t, _)) if t == "null" => Some(None),
                    Some(Fv::Val(t, _))
                        if !t.is_empty()
                            && t.bytes().all(|b| b.is_ascii_digit())
                            && (t == "0" || !t.starts_with('0')) =>
                    {
                        t.parse::<u64>().ok().map(Some)
                    }
                    Some(_) => None,
                };
                match (name("key"), shallow("value"), if_version) {
                    (Some(key), Some(value), Some(if_version)) => {
                        Expect::Set { id, key, value: value.text().to_owned(), if_version }
                    }
                    _ => Expect::Invalid(Some(id)),
                }
            }
            "presence" => match shallow("state") {
                Some(state) if state.text().starts_with('{') => {
                    Expect::Presence { state: state.text().to_owned() }
                }
                _ => Expect::Invalid(None),
            },
            "get_state" => Expect::GetState,
            "ping" => Expect::Ping,
            "mark" => match name("mark") {
                Some(mark) => Expect::Mark { mark },
                None => Expect::Invalid(None),
            },
            _ => Expect::Bad,
        }
    }
}

/// What `parse` answered, in the oracle's terms.
pub(super) fn answered(result: &Result<ClientFrame, FrameError>) -> Expect {
    match result {
        Ok(ClientFrame::Publish { id, topic, data }) => {
            Expect::Publish { id: id.clone(), topic: topic.clone(), data: data.get().to_owned() }
        }
        Ok(ClientFrame::Signal { topic, data }) => {
            Expect::Signal { topic: topic.clone(), data: data.get().to_owned() }
        }
        Ok(ClientFrame::Set { id, key, value, if_version }) => Expect::Set {
            id: id.clone(),
            key: key.clone(),
            value: value.get().to_owned(),
            if_version: *if_version,
        },
        Ok(ClientFrame::Presence { state }) => Expect::Presence { state: state.get().to_owned() },
        Ok(ClientFrame::GetState) => Expect::GetState,
        Ok(ClientFrame::Ping) => Expect::Ping,
        Ok(ClientFrame::Mark { mark }) => Expect::Mark { mark: mark.clone() },
        Err(FrameError::BadFrame(_)) => Expect::Bad,
        Err(FrameError::Invalid { id, .. }) => Expect::Invalid(id.clone()),
    }
}

/// The literal of a field name: usually plain, sometimes with an escape.
pub(super) fn key_lit(rng: &mut Rng, name: &str) -> String {
    if rng.chance(8) && !name.is_empty() {
        let first = name.chars().next().unwrap();
        format!("\"\\u{:04x}{}\"", first as u32, &name[first.len_utf8()..])
    } else {
        format!("\"{name}\"")
    }
}

/// A string field (`id`, `topic`, `key`, `mark`, `type`): usually a
/// readable name, else anything.
pub(super) fn name_value(rng: &mut Rng, bad: bool, good: &str) -> Fv {
    match rng.below(100) {
        0..=54 => Fv::Str(GStr {
            lit: format!("\"{good}\""),
            decoded: Some(good.into()),
            syntax_ok: true,
        }),
        55..=84 => {
            let n = name_len(rng);
            Fv::Str(gen_str(rng, n, bad))
        }
        85..=89 => Fv::Null,
        _ => {
            let mut out = String::new();
            let d = gen_value(rng, &mut out, 2, true);
            if out.starts_with('"') {
                Fv::Val("7".into(), 0)
            } else {
                Fv::Val(out, d)
            }
        }
    }
}

pub(super) fn data_value(rng: &mut Rng, bad: bool, object: bool) -> Fv {
    match rng.below(100) {
        0..=4 => Fv::Null,
        5..=9 => {
            let n = name_len(rng);
            Fv::Str(gen_str(rng, n, bad))
        }
        _ => {
            let (text, d) = gen_data(rng, !bad);
            let v = if object && rng.chance(80) && !text.starts_with('{') {
                (format!("{{\"v\":{text}}}"), d + 1)
            } else {
                (text, d)
            };
            v.into()
        }
    }
}

impl From<(String, usize)> for Fv {
    fn from((text, d): (String, usize)) -> Fv {
        if text.starts_with('"') {
            // (only a known field the frame's type does not read, or data,
            // get here; what a name decodes to matters only for the former)
            let decoded = serde_json::from_str::<String>(&text).ok();
            Fv::Str(GStr { decoded, lit: text, syntax_ok: true })
        } else {
            Fv::Val(text, d)
        }
    }
}

/// A client frame of any kind, with each field right, wrong or missing.
pub(super) fn gen_frame(rng: &mut Rng, bad: bool) -> GFrame {
    let kind = rng.pick(&[
        "publish",
        "publish",
        "signal",
        "set",
        "set",
        "presence",
        "get_state",
        "ping",
        "mark",
        "other",
    ]);
    let mut fields: Vec<(String, Fv)> = Vec::new();
    match rng.below(100) {
        0..=84 => {
            let name = if kind == "other" {
                rng.pick(&["publishx", "", "PUBLISH", "pub lish", "join", "batch"])
            } else {
                kind
            };
            let v = if rng.chance(5) && !name.is_empty() {
                // the same type, spelled with an escape
                let first = name.chars().next().unwrap();
                let lit = format!("\"\\u{:04x}{}\"", first as u32, &name[1..]);
                Fv::Str(GStr { lit, decoded: Some(name.into()), syntax_ok: true })
            } else {
                Fv::Str(GStr {
                    lit: format!("\"{name}\""),
                    decoded: Some(name.into()),
                    syntax_ok: true,
                })
            };
            fields.push(("type".into(), v));
        }
        85..=89 => {}
        _ => fields.push(("type".into(), name_value(rng, bad, "publish"))),
    }
    let want = |rng: &mut Rng| rng.chance(92);
    let topic_good = rng.pick(&["chat", "cursor", "t", "a/b", "🦀", "x$"]);
    let id_good = format!("m{}", rng.below(1000));
    match kind {
        "publish" => {
            if want(rng) {
                fields.push(("id".into(), name_value(rng, bad, &id_good)));
            }
            if want(rng) {
                fields.push(("topic".into(), name_value(rng, bad, topic_good)));
            }
            if want(rng) {
                fields.push(("data".into(), data_value(rng, bad, false)));
            }
        }
        "signal" => {
            if want(rng) {
                fields.push(("topic".into(), name_value(rng, bad, topic_good)));
            }
            if want(rng) {
                fields.push(("data".into(), data_value(rng, bad, false)));
            }
        }
        "set" => {
            if want(rng) {
                fields.push(("id".into(), name_value(rng, bad, &id_good)));
            }
            if want(rng) {
                fields.push(("key".into(), name_value(rng, bad, "k")));
            }
            if want(rng) {
                fields.push(("value".into(), data_value(rng, bad, false)));
            }
            if rng.chance(50) {
                let v = match rng.below(12) {
                    0 => Fv::Null,
                    1 => Fv::Str(GStr {
                        lit: "\"7\"".into(),
                        decoded: Some("7".into()),
                        syntax_ok: true,
                    }),
                    k => Fv::Val(
                        [
                            "0",
                            "7",
                            "18446744073709551615",
                            "18446744073709551616",
                            "-1",
                            "1.5",
                            "1e3",
                            "true",
                            "[]",
                            "12345678901",
                        ][k as usize - 2]
                            .into(),
                        0,
                    ),
                };
                let v = match &v {
                    Fv::Val(t, _) if t == "[]" => Fv::Val(t.clone(), 1),
                    _ => v,
                };
                fields.push(("if_version".into(), v));
            }
        }
        "presence" if want(rng) => fields.push(("state".into(), data_value(rng, bad, true))),
        "mark" if want(rng) => {
            fields.push(("mark".into(), name_value(rng, bad, "0123456789abcdef")));
        }
        _ => {}
    }
    // Known fields the type does not read, and unknown ones: any value,
    // however deep (they are skipped, never parsed into values).
    for _ in 0..rng.below(3) {
        let name = if rng.chance(30) {
            rng.pick(KNOWN).to_owned()
        } else {
            let n = rng.range(1, 8) as usize;
            let s = gen_str(rng, n, false).decoded.unwrap();
            if KNOWN.contains(&s.as_str()) {
                format!("{s}_")
            } else {
                s
            }
        };
        if fields.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let v = data_value(rng, bad, false);
        fields.push((name, v));
    }
    // Shuffle.
    for i in (1..fields.len()).rev() {
        let j = rng.idx(i + 1);
        fields.swap(i, j);
    }
    let fields = fields
        .into_iter()
        .map(|(name, v)| {
            let lit = if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                key_lit(rng, &name)
            } else {
                serde_json::to_string(&name).unwrap()
            };
            (lit, name, v)
        })
        .collect();
    GFrame { fields }
}

/// The rules every frame `parse` accepts must keep, whatever the text.
pub(super) fn check_accepted(frame: &ClientFrame) {
    let shallow = |raw: &RawValue, what: &str| {
        let text = raw.get();
        assert!(scan_depth(text) <= MAX_DEPTH, "[parse] {what} nests deeper than {MAX_DEPTH}");
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            assert!(value_depth(&v) <= MAX_DEPTH, "[parse] {what} nests deeper (serde)");
        }
        assert!(serde_json::from_str::<&RawValue>(text).is_ok(), "[parse] {what} is not JSON");
        assert!(
            serde_json::from_str::<Value>(text).is_ok(),
            "[parse] {what} is not readable by a strict JSON reader"
        );
    };
    match frame {
        ClientFrame::Publish { id, topic, data } => {
            assert!(names::bounded(id), "[parse] publish id {id:?} out of bounds");
            assert!(names::valid_topic(topic), "[parse] publish topic {topic:?}");
            shallow(data, "data");
        }
        ClientFrame::Signal { topic, data } => {
            assert!(names::valid_topic(topic), "[parse] signal topic {topic:?}");
            shallow(data, "data");
        }
        ClientFrame::Set { id, key, value, .. } => {
            assert!(names::bounded(id), "[parse] set id {id:?} out of bounds");
            assert!(names::bounded(key), "[parse] set key {key:?} out of bounds");
            shallow(value, "value");
        }
        ClientFrame::Presence { state } => {
            let t = state.get();
            assert!(t.starts_with('{') && t.ends_with('}'), "[parse] presence state not an object");
            shallow(state, "state");
        }
        ClientFrame::Mark { mark } => assert!(names::bounded(mark), "[parse] mark {mark:?}"),
        ClientFrame::GetState | ClientFrame::Ping => {}
    }
}

/// Every text goes through every reader: no panic, and what they say holds.
pub(super) fn check_text(text: &str) -> Result<ClientFrame, FrameError> {
    check_parsed(text, parse(text))
}

/// [`check_text`] with `parse(text)` already done.
pub(super) fn check_parsed(
    text: &str,
    result: Result<ClientFrame, FrameError>,
) -> Result<ClientFrame, FrameError> {
    if let Ok(frame) = &result {
        check_accepted(frame);
    }
    let d = depth(text);
    assert_eq!(d, scan_depth(text), "[depth] differs from the reference walk");
    for m in [MAX_DEPTH, d.saturating_sub(1), d] {
        assert_eq!(deeper_than(text, m), d > m, "[deeper_than] {m} against depth {d}");
    }
    if let Some(t) = frame_types(text).and_then(|types| types.into_iter().next()) {
        assert!(carries(text, &t), "[carries] misses {t}");
    }
    result
}

// ---- server frames for frame_types ------------------------------------------

pub(super) const SERVER_TYPES: &[&str] = &[
    "welcome", "message", "ack", "signal", "presence", "summary", "state", "resync", "error",
    "pong", "mark", "x-custom", "t😀", "",
];

/// A server-like frame of type `kind`, its fields in any order, carrying
/// whatever members put in frames.
pub(super) fn gen_server_frame(rng: &mut Rng, kind: &str, nested_batch: bool) -> String {
    let mut fields: Vec<String> = vec![format!("\"type\":\"{kind}\"")];
    let names = ["seq", "id", "data", "session", "presence", "frames", "state", "note", "t"];
    let mut chosen: Vec<&str> = names.iter().copied().filter(|_| rng.chance(30)).collect();
    if nested_batch {
        chosen.retain(|n| *n != "frames");
    }
    for name in chosen {
        let mut v = String::new();
        match rng.below(6) {
            0 => {
                // a member's data that looks like frames
                v.push_str(r#"{"type":"pong","frames":[{"type":"welcome"}],"s":"\"type\":\"x\""}"#);
            }
            1 => {
                let levels = if heavy(rng) { rng.range(1, 3_000) } else { rng.range(1, 12) };
                let levels = levels as usize;
                v.push_str(&nest(rng, levels, "\"]}\\\"\"", 0).0);
            }
            _ => {
                let relayable = rng.chance(50);
                let budget = rng.pick(&[1, 2, 3]);
                gen_value(rng, &mut v, budget, relayable);
            }
        }
        fields.push(format!("\"{name}\":{v}"));
    }
    if nested_batch {
        fields.push(r#""frames":[{"type":"pong"}]"#.into());
    }
    for i in (1..fields.len()).rev() {
        let j = rng.idx(i + 1);
        fields.swap(i, j);
    }
    let mut out = String::from("{");
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        ws(rng, &mut out);
        out.push_str(f);
    }
    ws(rng, &mut out);
    out.push('}');
    out
}

/// A frame or a batch of frames, and the types `frame_types` must find.
pub(super) fn gen_server_text(rng: &mut Rng) -> (String, Vec<String>) {
    if rng.chance(30) {
        let kind = rng.pick(SERVER_TYPES);
        return (gen_server_frame(rng, kind, false), vec![kind.to_owned()]);
    }
    if rng.chance(25) {
        // Real frames, packed as the room packs them.
        let n = rng.range(1, 6) as usize;
        let mut frames: Vec<Rc<str>> = Vec::new();
        let mut kinds = Vec::new();
        for i in 0..n {
            let (data, _) = gen_data(rng, true);
            let data = RawValue::from_string(data).unwrap();
            let id = gen_str(rng, 5, false).decoded.unwrap();
            let text = Message {
                kind: "message",
                seq: i as u64,
                id: &id,
                session: "s-1",
                user: "u",
                region: "EU",
                topic: "t",
                data: &data,
                ts: 0,
            }
            .to_text();
            frames.push(text.into());
            kinds.push("message".to_owned());
        }
        let mut packed = pack(frames, rng.range(64, 4096) as usize);
        if rng.chance(50) {
            // Packed again, batches among its frames (a relay's packed runs queued behind a slow
            // reader): a batch's frames take its place, never a batch inside another.
            packed = pack(packed, rng.range(64, 4096) as usize);
        }
        // Each packed text carries its share, in order (a nested batch would be one `batch`).
        let mut all = Vec::new();
        let mut texts = Vec::new();
        for p in &packed {
            let types = frame_types(p).expect("[frame_types] a packed text is an object");
            all.extend(types.clone());
            texts.push(p.to_string());
        }
        assert_eq!(all, kinds, "[frame_types] packed batches lose or invent frames");
        let text = texts[rng.idx(texts.len())].clone();
        let types = frame_types(&text).unwrap();
        return (text, types);
    }
    let n = rng.below(7) as usize;
    let mut kinds = Vec::new();
    let mut frames = Vec::new();
    for _ in 0..n {
        let nested = rng.chance(5);
        let kind = if nested { "batch" } else { rng.pick(SERVER_TYPES) };
        frames.push(gen_server_frame(rng, kind, nested));
        kinds.push(kind.to_owned());
    }
    let mut fields =
        vec!["\"type\":\"batch\"".to_owned(), format!("\"frames\":[{}]", frames.join(","))];
    if rng.chance(30) {
        let mut v = String::new();
        gen_value(rng, &mut v, 3, true);
        fields.push(format!("\"extra\":{v}"));
    }
    if rng.chance(50) {
        fields.swap(0, 1);
    }
    (format!("{{{}}}", fields.join(",")), kinds)
}

// ---- mutations and noise ----------------------------------------------------

pub(super) fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(super) fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..rng.range(1, 3) {
        let n = bytes.len();
        match rng.below(8) {
            0 if n > 0 => {
                let i = rng.idx(n);
                bytes[i] ^= 1 << rng.below(8);
            }
            1 if n > 0 => bytes.truncate(rng.idx(n)),
            2 => {
                let i = rng.idx(n + 1);
                let junk: &[u8] = rng.pick(&[
                    b",".as_slice(),
                    b"}",
                    b"]",
                    b"\"",
                    b"\\",
                    b"{\"type\":\"ping\"}",
                    b"null",
                    b"\xff\xfe",
                    b"\"type\":\"publish\",",
                    b"\\ud800",
                ]);
                bytes.splice(i..i, junk.iter().copied());
            }
            3 if n > 1 => {
                let i = rng.idx(n);
                let j = (i + rng.range(1, 20) as usize).min(n);
                bytes.drain(i..j);
            }
            4 if n > 1 => {
                let (i, j) = (rng.idx(n), rng.idx(n));
                bytes.swap(i, j);
            }
            5 => {
                let copy = bytes.clone();
                bytes.extend_from_slice(&copy);
            }
            6 if n > 0 => {
                let i = rng.idx(n);
                let num: &[u8] =
                    rng.pick(&[b"1e999".as_slice(), b"-1", b"1.5", b"18446744073709551616"]);
                bytes.splice(i..i, num.iter().copied());
            }
            _ => {
                let i = rng.idx(n + 1);
                bytes.insert(i, rng.below(256) as u8);
            }
        }
    }
    lossy(&bytes)
}

pub(super) fn noise(rng: &mut Rng) -> String {
    let n = rng.pick(&[0, 1, 2, 5, 20, 60, 200]);
    let alphabet = b"{}[]\":,\\ 0123456789.eE+-tnufalsr\"type\"publish";
    let bytes: Vec<u8> =
        (0..n)
            .map(|_| {
                if rng.chance(60) {
                    alphabet[rng.idx(alphabet.len())]
                } else {
                    rng.below(256) as u8
                }
            })
            .collect();
    lossy(&bytes)
}
