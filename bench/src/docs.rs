//! The documents rounds of `bench/run` (`homeroom-bench docs`): homeroom's document kind
//! (`/docs/{room}`) against a Yjs room on `y-partyserver` with an SQLite `onSave`
//! (bench/baselines/y-partyserver), each in its own `wrangler dev` on the same workerd, driven by
//! Yjs clients of our own (`yrs` speaking y-protocols over a WebSocket):
//!
//! - **a late joiner's time to synced**: a document of about 1 MB built from 20,000 small edits
//!   at random places is in the room; a new client connects, sends an empty state vector and is
//!   timed until it has applied the room's answer (connect included);
//! - **fan-out**: 50 editors and a writer who sends 300 small updates at 100 a second (each
//!   update's delay from its send to each editor), then, in another room, 390 back to back
//!   (within homeroom's per-user burst of 400 frames): the updates delivered a second and the
//!   delays when the room is saturated;
//! - **memory**: the workerd processes' resident memory with the 1 MB document's room loaded,
//!   minus before it existed (after a small document's room warmed the runtime up: the Wasm
//!   or the script compiled and instantiated).

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use yrs::encoding::read::{Cursor, Read};
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{Doc, GetString, ReadTxn, StateVector, Text, Transact, Update};

use homeroom::doc::wire;

use crate::runtime::{Runtime, BENCH_VARS};
use crate::target::Target;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What one round measured on one target.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DocRound {
    pub target: String,
    /// The late joiners' times to synced (ms).
    pub join_ms: Vec<f64>,
    /// The document's size, as the joiner received it (bytes).
    pub doc_bytes: usize,
    /// Fan-out at 100 updates a second: deliveries (editors x updates) and the delays (ms).
    pub delivered: u64,
    pub expected: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Fan-out of a burst: deliveries a second, and the delays (ms).
    pub burst_delivered: u64,
    pub burst_expected: u64,
    pub updates_per_sec: f64,
    pub burst_p50_ms: f64,
    pub burst_p99_ms: f64,
    /// workerd's resident memory with the 1 MB document loaded, minus before (MB).
    pub memory_mb: f64,
}

/// Edits that build the big document, and their size each.
const EDITS: usize = 20_000;
const EDIT_BYTES: usize = 50;
const JOINS: usize = 5;
const EDITORS: usize = 50;
const UPDATES: usize = 300;
const UPDATE_EVERY: Duration = Duration::from_millis(10);
const BURST: usize = 390;

/// One round on `target`, in a runtime of its own.
pub async fn round(root: &std::path::Path, target: Target, n: usize) -> Result<DocRound, String> {
    let rt = Runtime::start(root, target, &BENCH_VARS, Duration::from_secs(180)).await?;
    let result = async {
        let mut warm = connect(&rt, target, &format!("warm-{n}"), 0).await?;
        until_sync(&mut warm, 0, Duration::from_secs(60)).await?;
        let before = workerd_rss_mb(&rt);
        let (join_ms, doc_bytes) = late_joiners(&rt, target, &format!("big-{n}")).await?;
        let memory_mb = workerd_rss_mb(&rt) - before;
        let _ = warm.close(None).await;
        let paced = fan_out(&rt, target, &format!("fan-{n}"), UPDATES, Some(UPDATE_EVERY)).await?;
        let burst = fan_out(&rt, target, &format!("burst-{n}"), BURST, None).await?;
        Ok::<_, String>(DocRound {
            target: target.name().into(),
            join_ms,
            doc_bytes,
            delivered: paced.0,
            expected: (EDITORS * UPDATES) as u64,
            p50_ms: paced.2,
            p99_ms: paced.3,
            burst_delivered: burst.0,
            burst_expected: (EDITORS * BURST) as u64,
            updates_per_sec: burst.1,
            burst_p50_ms: burst.2,
            burst_p99_ms: burst.3,
            memory_mb,
        })
    }
    .await
    .map_err(|e| format!("{target}: {e}\n{}", rt.log_tail(30)));
    rt.stop().await;
    result
}

async fn connect(rt: &Runtime, target: Target, room: &str, who: usize) -> Result<Ws, String> {
    let path = target.ws_path(room, &format!("s-{who:08}"), None);
    let url = format!("ws://127.0.0.1:{}{path}", rt.port);
    let (ws, _) =
        tokio::time::timeout(Duration::from_secs(20), tokio_tungstenite::connect_async(url))
            .await
            .map_err(|_| "connect timed out".to_string())?
            .map_err(|e| format!("connect: {e}"))?;
    Ok(ws)
}

/// The sync message in `frame`, if it is one: its sub-tag (0 step 1, 1 step 2, 2 update) and
/// payload.
fn sync_of(frame: &[u8]) -> Option<(u64, &[u8])> {
    let mut cur = Cursor::new(frame);
    if cur.read_var::<u64>().ok()? != 0 {
        return None;
    }
    let sub = cur.read_var::<u64>().ok()?;
    let len = cur.read_var::<u64>().ok()? as usize;
    let start = cur.next;
    Some((sub, frame.get(start..start.checked_add(len)?)?))
}

/// Reads until a sync message with sub-tag `sub` arrives; its payload.
async fn until_sync(ws: &mut Ws, sub: u64, within: Duration) -> Result<Vec<u8>, String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let next = tokio::time::timeout_at(deadline, ws.next())
            .await
            .map_err(|_| format!("no sync message {sub} within {within:?}"))?;
        match next {
            Some(Ok(Message::Binary(b))) => {
                if let Some((s, payload)) = sync_of(&b) {
                    if s == sub {
                        return Ok(payload.to_vec());
                    }
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(format!("socket: {e}")),
            None => return Err("closed".into()),
        }
    }
}

/// splitmix64, for the edits' places.
fn next(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A document of [`EDITS`] edits at random places, as one update.
fn big_document() -> (Vec<u8>, u32) {
    let doc = Doc::with_client_id(7);
    let text = doc.get_or_insert_text("text");
    let mut seed = 1;
    for i in 0..EDITS {
        let mut txn = doc.transact_mut();
        let len = text.len(&txn);
        let at = (next(&mut seed) % u64::from(len + 1)) as u32;
        let chunk = format!("{i:06}{}", "x".repeat(EDIT_BYTES - 6));
        text.insert(&mut txn, at, &chunk);
    }
    let len = text.len(&doc.transact());
    let update = doc.transact().encode_state_as_update_v1(&StateVector::default());
    (update, len)
}

/// The writer puts the big document in; an observer sees it; then [`JOINS`] new clients, one
/// after another, are timed to synced.
async fn late_joiners(
    rt: &Runtime,
    target: Target,
    room: &str,
) -> Result<(Vec<f64>, usize), String> {
    let (update, len) = big_document();
    let mut observer = connect(rt, target, room, 1).await?;
    let mut writer = connect(rt, target, room, 2).await?;
    writer.send(Message::Binary(wire::update(&update).into())).await.map_err(|e| e.to_string())?;
    until_sync(&mut observer, 2, Duration::from_secs(60)).await?;
    let mut times = Vec::new();
    let mut doc_bytes = 0;
    for j in 0..JOINS {
        let start = Instant::now();
        let mut ws = connect(rt, target, room, 10 + j).await?;
        let empty = StateVector::default().encode_v1();
        ws.send(Message::Binary(wire::sync_step1(&empty).into()))
            .await
            .map_err(|e| e.to_string())?;
        let got = until_sync(&mut ws, 1, Duration::from_secs(60)).await?;
        let doc = Doc::new();
        let decoded = Update::decode_v1(&got).map_err(|e| format!("step 2: {e}"))?;
        doc.transact_mut().apply_update(decoded).map_err(|e| format!("step 2: {e}"))?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        let text = doc.get_or_insert_text("text");
        let have = text.get_string(&doc.transact()).encode_utf16().count() as u32;
        if have != len {
            return Err(format!("a late joiner got {have} of {len} characters"));
        }
        doc_bytes = got.len();
        let _ = ws.close(None).await;
    }
    let _ = writer.close(None).await;
    // The observer stays until the round's memory is read.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let _ = observer.close(None).await;
    });
    Ok((times, doc_bytes))
}

/// [`EDITORS`] editors, a writer of `updates` updates, one each `every` or back to back:
/// (delivered, deliveries a second, p50, p99).
async fn fan_out(
    rt: &Runtime,
    target: Target,
    room: &str,
    updates: usize,
    every: Option<Duration>,
) -> Result<(u64, f64, f64, f64), String> {
    let mut editors = Vec::new();
    for e in 0..EDITORS {
        editors.push(connect(rt, target, room, 100 + e).await?);
    }
    let mut writer = connect(rt, target, room, 99).await?;
    let start = Instant::now();
    let mut sends: Vec<Duration> = Vec::with_capacity(updates);
    let readers: Vec<_> = editors
        .into_iter()
        .map(|mut ws| {
            tokio::spawn(async move {
                let mut got = Vec::with_capacity(updates);
                while got.len() < updates {
                    match until_sync(&mut ws, 2, Duration::from_secs(30)).await {
                        Ok(_) => got.push(start.elapsed()),
                        Err(_) => break,
                    }
                }
                let _ = ws.close(None).await;
                got
            })
        })
        .collect();
    let doc = Doc::with_client_id(9);
    let text = doc.get_or_insert_text("text");
    let mut tick = tokio::time::interval(every.unwrap_or(Duration::from_millis(1)));
    for i in 0..updates {
        if every.is_some() {
            tick.tick().await;
        }
        let update = {
            let mut txn = doc.transact_mut();
            let len = text.len(&txn);
            text.insert(&mut txn, len, &format!("u{i};"));
            txn.encode_update_v1()
        };
        sends.push(start.elapsed());
        writer
            .send(Message::Binary(wire::update(&update).into()))
            .await
            .map_err(|e| e.to_string())?;
    }
    let mut delays = Vec::new();
    let mut last = Duration::ZERO;
    for reader in readers {
        let got = reader.await.map_err(|e| e.to_string())?;
        for (i, at) in got.iter().enumerate() {
            delays.push((at.saturating_sub(sends[i])).as_secs_f64() * 1000.0);
            last = last.max(*at);
        }
    }
    let _ = writer.close(None).await;
    let delivered = delays.len() as u64;
    delays.sort_by(f64::total_cmp);
    let span = last.saturating_sub(sends[0]).as_secs_f64().max(1e-9);
    Ok((delivered, delivered as f64 / span, percentile(&delays, 50.0), percentile(&delays, 99.0)))
}

/// The resident memory of the runtime's workerd processes (MB).
fn workerd_rss_mb(rt: &Runtime) -> f64 {
    let mut kb = 0u64;
    for pid in crate::machine::group_pids(rt.pgid) {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmd).contains("workerd") {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if let Some(line) = status.lines().find(|l| l.starts_with("VmRSS:")) {
            kb += line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        }
    }
    kb as f64 / 1024.0
}

/// The `q`th percentile of sorted `v` (nearest rank).
fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((q / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// A row of the section: its name, its figure of a round, its decimals.
type Row<'a> = (&'a str, &'a dyn Fn(&DocRound) -> f64, usize);

/// The Markdown section of RESULTS.md for the rounds, with the Wasm sizes: `(raw, gzip)` of the
/// Worker with the document kind and without it.
pub fn section(
    root: &std::path::Path,
    rounds: &[DocRound],
    with: Option<(u64, u64)>,
    without: Option<(u64, u64)>,
) -> String {
    let of = |name: &str| rounds.iter().filter(|r| r.target == name).cloned().collect::<Vec<_>>();
    let (h, y) = (of(Target::Document.name()), of(Target::YPartyserver.name()));
    let m = |rs: &[DocRound], f: &dyn Fn(&DocRound) -> f64| median(rs.iter().map(f).collect());
    let mut md = String::new();
    md.push_str("\n## Documents: homeroom's document kind against y-partyserver\n\n");
    md.push_str(&format!(
        "`homeroom-bench docs` ([`bench/src/docs.rs`](src/docs.rs)), {} rounds each, medians of the rounds; y-partyserver {} with an SQLite `onSave` ([`baselines/y-partyserver`](baselines/y-partyserver/src/index.js)), on the same workerd. Late joiner: a document of {EDITS} edits of {EDIT_BYTES} bytes at random places; time from connect to the room's answer applied (median of {JOINS} joins a round). Fan-out: {EDITORS} editors, a writer sending {UPDATES} updates at {} a second, then {BURST} back to back in another room. Memory: workerd's resident memory with the big document's room loaded, minus before (the runtime warmed up by a small document first). y-partyserver stores on a debounce (its `onSave` runs 2 s after an update, at most 10 s): until then an update is in memory only, where homeroom's is stored before anyone sees it.\n\n",
        h.len().max(y.len()),
        crate::machine::package_version(root, "y-partyserver"),
        1000 / UPDATE_EVERY.as_millis()
    ));
    md.push_str(
        "| measure | homeroom | y-partyserver | homeroom / y-partyserver |\n|---|---:|---:|---:|\n",
    );
    let rows: [Row; 9] = [
        ("late joiner, time to synced (ms)", &|r| median(r.join_ms.clone()), 1),
        ("document as sent to the joiner (KB)", &|r| r.doc_bytes as f64 / 1000.0, 0),
        ("fan-out at 100 updates/s: delay p50 (ms)", &|r| r.p50_ms, 1),
        ("fan-out at 100 updates/s: delay p99 (ms)", &|r| r.p99_ms, 1),
        ("fan-out of a burst: deliveries a second", &|r| r.updates_per_sec, 0),
        ("fan-out of a burst: delay p50 (ms)", &|r| r.burst_p50_ms, 1),
        ("fan-out of a burst: delay p99 (ms)", &|r| r.burst_p99_ms, 1),
        ("memory for the 1 MB document (MB)", &|r| r.memory_mb, 1),
        (
            "late joiner, slowest of the joins (ms)",
            &|r| r.join_ms.iter().copied().fold(0.0, f64::max),
            1,
        ),
    ];
    for (name, f, digits) in rows {
        let (a, b) = (m(&h, f), m(&y, f));
        md.push_str(&format!("| {name} | {a:.digits$} | {b:.digits$} | {:.2}× |\n", a / b));
    }
    let lost: Vec<String> = rounds
        .iter()
        .filter(|r| r.delivered != r.expected || r.burst_delivered != r.burst_expected)
        .map(|r| {
            format!(
                "{}: {} of {}, burst {} of {}",
                r.target, r.delivered, r.expected, r.burst_delivered, r.burst_expected
            )
        })
        .collect();
    md.push_str(&format!(
        "\nEvery fan-out update reached every editor: {}.\n",
        if lost.is_empty() { "yes".to_string() } else { format!("**no** ({})", lost.join(", ")) }
    ));
    if let (Some(w), Some(wo)) = (with, without) {
        md.push_str(&format!(
            "\nWasm of this repository's Worker: with the document kind (`--no-default-features --features documents`: `/docs`, without the notes example's kind) {} bytes, {} gzip; without it (`--no-default-features`) {} bytes, {} gzip: the document kind adds **{:.1} KiB gzip** ({:.1} kB; budget 150 KB).\n",
            w.0,
            w.1,
            wo.0,
            wo.1,
            (w.1 as f64 - wo.1 as f64) / 1024.0,
            (w.1 as f64 - wo.1 as f64) / 1000.0
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_big_document_is_about_a_megabyte_of_many_edits() {
        let (update, len) = big_document();
        assert_eq!(len as usize, EDITS * EDIT_BYTES);
        assert!(update.len() > EDITS * EDIT_BYTES, "each edit keeps its own item");
        let frame = wire::update(&update);
        assert_eq!(sync_of(&frame).map(|(sub, p)| (sub, p.len())), Some((2, update.len())));
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert!(percentile(&[], 50.0).is_nan());
    }
}
