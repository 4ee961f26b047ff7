//! Attack (issue 11, item 6): "any authorized request creates a permanent room". Before the fix,
//! every read of a fresh room name (`GET /presence`, an admin `/stats`) created a Durable Object
//! with its SQLite storage, forever: 100 junk names grew the persistence directory from 5.7 to
//! 13.3 MB. Now a read or an admin request of a room nobody created answers 404
//! `room_not_found` and creates nothing; the operator can delete a room (`DELETE /rooms/{room}`,
//! 4404 to its members, a new epoch for the next visitor); and an empty room's storage goes after
//! `ROOM_RETENTION_DAYS` (days: too long to wait here; the engine test
//! `src/room/tests/attacks.rs` `an_empty_room_deletes_its_storage_after_the_retention` runs it
//! on virtual time, and this file checks that a room that empties loses nothing meanwhile).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::config::raw_http;
use super::users::Raw;
use crate::check;
use crate::client::Dial;
use crate::edge_support::{self as es, admin, bearer_admin, check_refusal, token, TOKENS};
use crate::harness::{alone, shared, Spec};
use crate::presence::note;
use crate::runtime::{LazyRuntime, Runtime};
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        shared("attacks::rooms::presence_reads_of_fresh_names_create_nothing", junk_reads_main),
        alone("attacks::rooms::junk_names_leave_the_disk_alone", junk_disk),
        es::on("attacks::rooms::delete_closes_members_and_forgets_the_room", &TOKENS, delete),
        es::on("attacks::rooms::an_emptied_room_is_kept_within_its_retention", &RETAIN, retention),
    ]
}

/// A retention of one day: read by every room object (a value that is not a positive integer
/// would be logged as a `config_error`), never reached within a test.
pub static RETAIN: LazyRuntime =
    LazyRuntime::new("att-retention", || vec!["--var".into(), "ROOM_RETENTION_DAYS:1".into()]);

/// The admin key of the runtime `junk_disk` starts.
const DISK_ADMIN_KEY: &str = "e2e-junk-admin-key-3c9d-0123456789abcdef";

/// `GET /rooms/{name}/presence` for `n` fresh names: each must be 404 `room_not_found`.
/// Returns the names.
async fn read_fresh_names(port: u16, n: usize) -> R<Vec<String>> {
    let names: Vec<String> = (0..n).map(|i| support::room(&format!("junk-{i}"))).collect();
    for chunk in names.chunks(10) {
        let reads = chunk.iter().map(|name| {
            let path = format!("/rooms/{name}/presence");
            async move { (name, es::get(port, &path, &[]).await) }
        });
        for (name, resp) in futures_util::future::join_all(reads).await {
            check_refusal(&format!("GET /rooms/{name}/presence"), &resp?, 404, "room_not_found")?;
        }
    }
    Ok(names)
}

/// No `room_loaded` line names any of `names`.
fn check_none_loaded(ctx_log: &crate::runtime::Log, names: &[String]) -> R {
    let loaded: Vec<Value> = ctx_log
        .events("room_loaded")
        .into_iter()
        .filter(|v| names.iter().any(|n| v["room"] == n.as_str()))
        .collect();
    check!(loaded.is_empty(), "reads of fresh names loaded rooms: {loaded:?}");
    Ok(())
}

async fn junk_reads_main(ctx: Ctx) -> R {
    let names = read_fresh_names(ctx.port, 100).await?;
    // Read again: still nothing there (the first reads left nothing behind).
    for name in names.iter().step_by(10) {
        let resp = es::get(ctx.port, &format!("/rooms/{name}/presence"), &[]).await?;
        check_refusal(&format!("second GET /rooms/{name}/presence"), &resp, 404, "room_not_found")?;
    }
    check_none_loaded(&ctx.log, &names)?;
    // A connect is what creates a room: the first one after the reads gets seq 0 in a new epoch.
    let c = ctx.dial(&names[0], &support::session("junk-visitor")).connect().await?;
    check!(
        c.welcome_seq() == 0 && c.welcome["resumed"] == false,
        "the first connect to a name only read before: {}",
        c.welcome
    );
    ctx.log.wait_room_loaded(&names[0], 1, Duration::from_secs(5)).await?;
    c.close().await;
    Ok(())
}

/// Every file under `dir` with its size.
pub(super) fn files_under(dir: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), meta.len());
            }
        }
    }
    out
}

fn total(files: &BTreeMap<PathBuf, u64>) -> u64 {
    files.values().sum()
}

fn kib(b: u64) -> String {
    format!("{:.1} KiB", b as f64 / 1024.0)
}

/// What the room's own schema leaves in a SQLite file (its main file or WAL): the text of its
/// `CREATE TABLE` statements (migrations/0001_room.sql).
const ROOM_SCHEMA_MARKS: [&[u8]; 2] = [b"schema_migrations", b"CREATE TABLE meta"];

/// The files among `files` (new since some point) that hold any of the room's schema.
pub(super) fn with_room_schema(files: &[&PathBuf]) -> Vec<String> {
    files
        .iter()
        .filter(|p| {
            std::fs::read(p).is_ok_and(|bytes| {
                ROOM_SCHEMA_MARKS.iter().any(|m| bytes.windows(m.len()).any(|w| w == *m))
            })
        })
        .map(|p| p.display().to_string())
        .collect()
}

async fn junk_disk() -> R {
    let dir = tempfile::Builder::new()
        .prefix("homeroom-e2e-junk-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let admin_var = format!("ADMIN_KEY:{DISK_ADMIN_KEY}");
    let mut rt = Runtime::start_with("att-junk", dir.path(), &["--var", &admin_var]).await?;
    let result = junk_disk_on(&rt, dir.path()).await;
    rt.stop().await;
    result.map_err(|e| es::with_log_tail(e, &rt.log))
}

async fn junk_disk_on(rt: &Runtime, dir: &Path) -> R {
    let port = rt.port;
    // One real room first, so that what the room namespace costs once is not counted below.
    let warm = support::room("junk-warm");
    let c = Dial::new(port, &warm, &support::session("warm")).connect().await?;
    c.close().await;
    let before = files_under(dir);

    let names = read_fresh_names(port, 100).await?;
    // The operator's routes on fresh names: 404 and nothing created either.
    let key = format!("Bearer {DISK_ADMIN_KEY}");
    let mut admin_names = Vec::new();
    for (what, method, route, body) in [
        ("GET /stats", "GET", "stats", String::new()),
        ("POST /drain", "POST", "drain", String::new()),
        ("POST /kick", "POST", "kick", json!({"user": "mallory", "block_secs": 60}).to_string()),
    ] {
        let name = support::room("junk-admin");
        let resp = admin(port, method, &name, route, Some(&key), None, &body).await?;
        check_refusal(&format!("{what} of a fresh name"), &resp, 404, "room_not_found")?;
        admin_names.push(name);
    }
    let name = support::room("junk-admin");
    let path = format!("/rooms/{name}");
    let resp = raw_http(port, "DELETE", &path, None, &[("Authorization", &key)], "").await?;
    check_refusal("DELETE of a fresh name", &resp, 404, "room_not_found")?;
    admin_names.push(name);
    for name in &admin_names {
        let resp = es::get(port, &format!("/rooms/{name}/presence"), &[]).await?;
        check_refusal(
            &format!("GET /presence of {name} after the admin requests"),
            &resp,
            404,
            "room_not_found",
        )?;
    }
    check_none_loaded(&rt.log, &names)?;
    check_none_loaded(&rt.log, &admin_names)?;
    let after = files_under(dir);
    let junk_files: Vec<&PathBuf> = after.keys().filter(|p| !before.contains_key(*p)).collect();
    let junk_dbs =
        junk_files.iter().filter(|p| p.extension().is_some_and(|e| e == "sqlite")).count();

    // For scale, and to show the schema search finds what a room writes: 10 real rooms.
    for i in 0..10 {
        let room = support::room(&format!("junk-real-{i}"));
        let mut c = Dial::new(port, &room, &support::session("real")).connect().await?;
        c.publish_acked("m1", "t", json!(i)).await?;
        c.close().await;
    }
    let real = files_under(dir);
    let real_files: Vec<&PathBuf> = real.keys().filter(|p| !after.contains_key(*p)).collect();
    let junk = total(&after).saturating_sub(total(&before));
    let rooms = total(&real).saturating_sub(total(&after));
    note(format!(
        "junk names: {} in {} files before; 104 requests for fresh names: +{} in {} new files \
         ({junk_dbs} databases); 10 real rooms: +{} in {} new files ({} per room)",
        kib(total(&before)),
        before.len(),
        kib(junk),
        junk_files.len(),
        kib(rooms),
        real_files.len(),
        kib(rooms / 10)
    ));
    // What a fresh name leaves is the local runtime's: miniflare records each object it
    // instantiates (its `__miniflare_do_name` table, with WAL and shared-memory files until the
    // object is evicted). The room's own storage (its schema, an epoch) must not be there.
    let schema = with_room_schema(&junk_files);
    check!(
        schema.is_empty(),
        "requests for fresh names left the room's schema on disk: {schema:?}"
    );
    check!(
        junk_dbs <= names.len() + admin_names.len(),
        "{junk_dbs} new databases for {} fresh names",
        names.len() + admin_names.len()
    );
    let found = with_room_schema(&real_files);
    check!(
        !found.is_empty(),
        "the schema search found nothing in the files of 10 real rooms: {real_files:?}"
    );
    Ok(())
}

/// `DELETE /rooms/{room}` with the admin key.
async fn delete_room(port: u16, room: &str) -> R<crate::http::Response> {
    let key = bearer_admin();
    raw_http(port, "DELETE", &format!("/rooms/{room}"), None, &[("Authorization", &key)], "").await
}

async fn delete(ctx: Ctx) -> R {
    let room = support::room("att-delete");
    let dial =
        |sub: &str| Dial::new(ctx.port, &room, &support::session(sub)).token(&token(&room, sub));
    let mut alice = Raw::open(&dial("alice")).await?;
    let w = alice.first().await?;
    let super::users::RawEvent::Frame(w) = w else {
        return Err(format!("alice was not welcomed: {w:?}"));
    };
    let epoch = w["epoch"].as_str().unwrap_or_default().to_string();
    let mut bob = Raw::open(&dial("bob")).await?;
    check!(matches!(bob.first().await?, super::users::RawEvent::Frame(_)), "bob was not welcomed");
    alice.publish_acked("a1", json!("one")).await?;
    alice.publish_acked("a2", json!("two")).await?;
    let last = bob.publish_acked("b1", json!("three")).await?;
    check!(last == 3, "three messages in the room, last seq {last}");
    let loaded_before = ctx.log.room_loaded(&room).len();

    let resp = delete_room(ctx.port, &room).await?;
    let v = es::json_200(&format!("DELETE /rooms/{room}"), &resp)?;
    check!(v == json!({"closed": 2, "deleted": true}), "DELETE answered {v}");
    // Right away, before anyone connects: the room is gone.
    let bearer = format!("Bearer {}", token(&room, "alice"));
    let resp = es::get(ctx.port, &format!("/rooms/{room}/presence"), &[("Authorization", &bearer)])
        .await?;
    check_refusal("GET /presence right after the delete", &resp, 404, "room_not_found")?;
    for (who, raw) in [("alice", &mut alice), ("bob", &mut bob)] {
        let (code, reason) = raw.close_reason(Duration::from_secs(10)).await?;
        check!(
            code == Some(4404) && reason == "room_deleted",
            "{who} should be closed with 4404 \"room_deleted\", got {code:?} {reason:?}"
        );
    }
    // Their sockets' close events did not bring the room back either.
    let resp = es::get(ctx.port, &format!("/rooms/{room}/presence"), &[("Authorization", &bearer)])
        .await?;
    check_refusal("GET /presence after the members' closes", &resp, 404, "room_not_found")?;
    let resp = admin(ctx.port, "GET", &room, "stats", Some(&bearer_admin()), None, "").await?;
    check_refusal("GET /stats after the delete", &resp, 404, "room_not_found")?;
    let resp = delete_room(ctx.port, &room).await?;
    check_refusal("a second DELETE", &resp, 404, "room_not_found")?;
    check!(
        ctx.log.room_loaded(&room).len() == loaded_before,
        "the deleted room was loaded again before anyone connected: {:?}",
        ctx.log.room_loaded(&room)
    );

    // The next visitor, resuming from what they knew, finds a new room: seq 0, another epoch.
    let c = Dial::new(ctx.port, &room, &support::session("alice"))
        .token(&token(&room, "alice"))
        .since(last, &epoch)
        .connect()
        .await?;
    check!(
        c.welcome_seq() == 0
            && c.welcome["resumed"] == false
            && c.epoch() != epoch
            && !c.epoch().is_empty(),
        "the first connect after the delete should find a new room (seq 0, resumed false, a new \
         epoch, not {epoch}): {}",
        c.welcome
    );
    let mut c = c;
    let state = c.get_state().await?;
    check!(state["seq"] == 0 && state["state"] == json!({}), "the new room's state: {state}");
    c.close().await;
    Ok(())
}

async fn retention(ctx: Ctx) -> R {
    let room = support::room("att-retain");
    let session = support::session("visitor");
    let mut c = ctx.dial(&room, &session).connect().await?;
    let epoch = c.epoch();
    for i in 1..=3 {
        c.publish_acked(&format!("m{i}"), "t", json!(i)).await?;
    }
    let conn = c.welcome["conn"].as_str().unwrap_or_default().to_string();
    c.close().await;
    // The room processed the close: it is empty now, and its retention runs.
    es::wait_log(&ctx.log, "close", 1, Duration::from_secs(10), |v| {
        v["room"] == room.as_str() && v["conn"] == conn.as_str()
    })
    .await?;
    // The empty room still answers, with nobody in it.
    let p = crate::presence::http_presence(ctx.port, &room).await?;
    check!(p["members"] == json!({}), "the emptied room's presence: {p}");
    // Nothing destructive, and the setting was accepted (a malformed one is a config_error).
    for event in ["room_deleted", "storage_error"] {
        let lines: Vec<Value> =
            ctx.log.events(event).into_iter().filter(|v| v["room"] == room.as_str()).collect();
        check!(lines.is_empty(), "`{event}` logged for a room within its retention: {lines:?}");
    }
    let problems = ctx.log.events("config_error");
    check!(problems.is_empty(), "ROOM_RETENTION_DAYS=1 should be accepted: {problems:?}");
    // Coming back within the retention: same epoch, everything replayed.
    let mut back = ctx.dial(&room, &session).since(0, &epoch).connect().await?;
    check!(
        back.epoch() == epoch && back.welcome_seq() == 3 && back.welcome["resumed"] == true,
        "a visitor within the retention should resume the same room: {}",
        back.welcome
    );
    for i in 1..=3 {
        let m = back.message(&format!("m{i}")).await?;
        check!(support::seq(&m) == i, "replayed m{i}: {m}");
    }
    back.close().await;
    Ok(())
}
