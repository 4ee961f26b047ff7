//! The room's SQLite storage: schema migrations, loading a snapshot for the
//! engine, and writing its commits.

use serde::Deserialize;
use serde_json::value::RawValue;
use worker::{SqlStorage, SqlStorageValue as V};

use crate::room::{Commit, LogEntry, LogId, Snapshot, Time};

/// The migrations in `migrations/`, applied in order and recorded by version.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "0001_room.sql", include_str!("../../migrations/0001_room.sql")),
    (2, "0002_blocks.sql", include_str!("../../migrations/0002_blocks.sql")),
    (3, "0003_relays.sql", include_str!("../../migrations/0003_relays.sql")),
    (4, "0004_relay_peers_gone.sql", include_str!("../../migrations/0004_relay_peers_gone.sql")),
];

/// Applies every migration not yet recorded. Safe to run on every start.
pub fn migrate(sql: &SqlStorage) -> worker::Result<()> {
    sql.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)",
        None,
    )?;
    #[derive(Deserialize)]
    struct Applied {
        version: i64,
    }
    let applied: Vec<Applied> =
        sql.exec("SELECT version FROM schema_migrations", None)?.to_array()?;
    for (version, name, text) in MIGRATIONS {
        if applied.iter().any(|a| a.version == *version) {
            continue;
        }
        sql.exec(text, None)?;
        sql.exec(
            "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
            vec![V::Integer(*version), V::String((*name).into())],
        )?;
    }
    Ok(())
}

#[derive(Deserialize)]
struct MetaRow {
    k: String,
    v: String,
}

#[derive(Deserialize)]
struct LogRow {
    seq: u64,
    session: String,
    id: String,
    user: String,
    region: String,
    topic: String,
    data: String,
    ts: u64,
}

#[derive(Deserialize)]
struct StateRow {
    key: String,
    value: String,
    version: u64,
}

#[derive(Deserialize)]
struct IdRow {
    session: String,
    id: String,
    seq: u64,
    user: String,
    bytes: u64,
}

#[derive(Deserialize)]
struct BlockRow {
    user: String,
    until: u64,
}

/// Whether the room was ever created (it has an epoch), without creating
/// anything: a read of a room that does not exist must not make one.
pub fn exists(sql: &SqlStorage) -> worker::Result<bool> {
    #[derive(Deserialize)]
    struct Count {
        n: u64,
    }
    let tables: Vec<Count> = sql
        .exec(
            "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
            None,
        )?
        .to_array()?;
    if tables.first().is_none_or(|c| c.n == 0) {
        return Ok(false);
    }
    let epochs: Vec<Count> =
        sql.exec("SELECT count(*) AS n FROM meta WHERE k = 'epoch'", None)?.to_array()?;
    Ok(epochs.first().is_some_and(|c| c.n > 0))
}

/// Reads the room from storage. A room never stored before gets `new_epoch`
/// and `room`, written at once so that every later load sees the same epoch.
pub fn load(
    sql: &SqlStorage,
    room: Option<&str>,
    home: Option<&str>,
    new_epoch: impl FnOnce() -> String,
    recent: u64,
    now: Time,
) -> worker::Result<Snapshot> {
    let meta: Vec<MetaRow> = sql.exec("SELECT k, v FROM meta", None)?.to_array()?;
    let get = |k: &str| meta.iter().find(|m| m.k == k).map(|m| m.v.clone());
    let (epoch, created) = match get("epoch") {
        Some(e) => (e, false),
        None => {
            let e = new_epoch();
            sql.exec("INSERT INTO meta (k, v) VALUES ('epoch', ?)", vec![V::String(e.clone())])?;
            (e, true)
        }
    };
    // The home is where the room was placed when it was created; a hint that
    // comes later cannot move it, so it is recorded only then.
    let home = match (get("home"), home) {
        (Some(h), _) => Some(h),
        (None, Some(h)) if created => {
            sql.exec("INSERT INTO meta (k, v) VALUES ('home', ?)", vec![V::String(h.into())])?;
            Some(h.to_owned())
        }
        (None, _) => None,
    };
    let name = match (get("room"), room) {
        (Some(n), _) => n,
        (None, Some(r)) => {
            sql.exec("INSERT INTO meta (k, v) VALUES ('room', ?)", vec![V::String(r.into())])?;
            r.to_owned()
        }
        (None, None) => String::new(),
    };
    let state = sql
        .exec("SELECT key, value, version FROM state", None)?
        .to_array::<StateRow>()?
        .into_iter()
        .filter_map(|r| Some((r.key, RawValue::from_string(r.value).ok()?, r.version)))
        .collect();
    let mut recent: Vec<LogEntry> = sql
        .exec(
            "SELECT seq, session, id, user, region, topic, data, ts FROM log ORDER BY seq DESC LIMIT ?",
            vec![V::Integer(recent as i64)],
        )?
        .to_array::<LogRow>()?
        .into_iter()
        .filter_map(entry_of)
        .collect();
    recent.reverse();
    let ids = sql
        .exec("SELECT session, id, seq, user, length(CAST(data AS BLOB)) AS bytes FROM log ORDER BY seq", None)?
        .to_array::<IdRow>()?
        .into_iter()
        .map(|r| LogId { seq: r.seq, session: r.session, id: r.id, user: r.user, bytes: r.bytes })
        .collect();
    let blocks = sql
        .exec("SELECT user, until FROM blocks WHERE until > ?", vec![V::Integer(now.ms() as i64)])?
        .to_array::<BlockRow>()?
        .into_iter()
        .map(|b| (b.user, Time::from_ms(b.until)))
        .collect();
    Ok(Snapshot {
        room: name,
        epoch,
        home,
        seq: recent.last().map_or(0, |e| e.seq),
        state,
        recent,
        ids,
        blocks,
        idle_since: get("idle_since").and_then(|v| v.parse().ok()).map(Time::from_ms),
        timers: get("timers").and_then(|v| serde_json::from_str(&v).ok()).unwrap_or_default(),
        // The peers (the sockets'), the nonce (fresh randomness) and what the memory before
        // owed: the caller's.
        ..Snapshot::default()
    })
}

/// Writes one commit. Runs synchronously within the event, so the runtime's
/// output gate holds every frame sent after it until the write is durable.
pub fn commit(sql: &SqlStorage, c: &Commit) -> worker::Result<()> {
    let e = &c.entry;
    sql.exec(
        "INSERT INTO log (seq, session, id, user, region, topic, data, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            V::Integer(e.seq as i64),
            V::String(e.session.clone()),
            V::String(e.id.clone()),
            V::String(e.user.clone()),
            V::String(e.region.clone()),
            V::String(e.topic.clone()),
            V::String(e.data.get().to_owned()),
            V::Integer(e.ts.ms() as i64),
        ],
    )?;
    if let Some(w) = &c.state {
        sql.exec(
            "INSERT OR REPLACE INTO state (key, value, version) VALUES (?, ?, ?)",
            vec![
                V::String(w.key.clone()),
                V::String(w.value.get().to_owned()),
                V::Integer(e.seq as i64),
            ],
        )?;
    }
    if let Some(through) = c.trim_through {
        sql.exec("DELETE FROM log WHERE seq <= ?", vec![V::Integer(through as i64)])?;
    }
    Ok(())
}

/// Stores or lifts a user's block (ended blocks are dropped on the way).
pub fn block(sql: &SqlStorage, user: &str, until: Option<Time>, now: Time) -> worker::Result<()> {
    sql.exec(
        "DELETE FROM blocks WHERE user = ? OR until <= ?",
        vec![V::String(user.into()), V::Integer(now.ms() as i64)],
    )?;
    if let Some(until) = until {
        sql.exec(
            "INSERT INTO blocks (user, until) VALUES (?, ?)",
            vec![V::String(user.into()), V::Integer(until.ms() as i64)],
        )?;
    }
    Ok(())
}

/// The retained log after `since`, at most `limit` entries, in `seq` order.
pub fn log_after(sql: &SqlStorage, since: u64, limit: u64) -> worker::Result<Vec<LogEntry>> {
    let rows = sql
        .exec(
            "SELECT seq, session, id, user, region, topic, data, ts FROM log WHERE seq > ? ORDER BY seq LIMIT ?",
            vec![V::Integer(since as i64), V::Integer(limit as i64)],
        )?
        .to_array::<LogRow>()?;
    Ok(rows.into_iter().filter_map(entry_of).collect())
}

fn entry_of(r: LogRow) -> Option<LogEntry> {
    Some(LogEntry {
        seq: r.seq,
        id: r.id,
        session: r.session,
        user: r.user,
        region: r.region,
        topic: r.topic,
        data: RawValue::from_string(r.data).ok()?,
        ts: Time::from_ms(r.ts),
    })
}

/// Stores the rules' timers (the whole set, as JSON in `meta`).
pub fn timers(sql: &SqlStorage, all: &[(String, Time)]) -> worker::Result<()> {
    let json = serde_json::to_string(all).unwrap_or_else(|_| "[]".into());
    sql.exec("INSERT OR REPLACE INTO meta (k, v) VALUES ('timers', ?)", vec![V::String(json)])?;
    Ok(())
}

/// Records since when the room has had no connection.
pub fn idle(sql: &SqlStorage, since: Time) -> worker::Result<()> {
    sql.exec(
        "INSERT OR REPLACE INTO meta (k, v) VALUES ('idle_since', ?)",
        vec![V::String(since.ms().to_string())],
    )?;
    Ok(())
}
