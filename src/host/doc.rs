//! A document kind's Durable Object: a thin adapter around [`DocRoom`]. It loads the document
//! from SQLite (a snapshot in chunks, then the log after it) on the first event after a start,
//! an eviction or a reset, rejoins the sockets that stayed connected from their attachments,
//! and applies the room's effects in order: SQLite writes are synchronous and the runtime's
//! output gate holds every frame until they are durable, so a `Store` before a frame is
//! stored before anyone sees it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use worker::{
    js_sys, Env, Request, Response, Result, ScheduledTime, SqlStorage, SqlStorageValue as V, State,
    WebSocket, WebSocketIncomingMessage, WebSocketPair,
};

use super::{error_response as error, now, random_u64, Object};
use crate::doc::rules::{DocRules, Vars};
use crate::doc::{self, ConnId, DocConfig, DocRoom, Effect, Member, MAX_VERSIONS};
use crate::forward::{self, DocAsk, Inbound};
use crate::logline::log;
use crate::settings;

/// A snapshot is stored in chunks of at most this many bytes (a SQLite value holds 2 MB).
const CHUNK: usize = 1024 * 1024;

/// The schema of a document room's storage.
const SCHEMA: &str = concat!(
    include_str!("../../migrations/doc_0001.sql"),
    include_str!("../../migrations/doc_0002_writers.sql")
);

/// Makes a document kind's rules from the deployment's variables, each time one of its rooms
/// is loaded.
pub type MakeDocRules = fn(&Vars<'_>) -> Box<dyn DocRules>;

/// A document room's object: the class a `documents { .. }` line of [`crate::worker!`]
/// declares holds one.
pub struct DocHost {
    inner: Rc<Inner>,
}

struct Inner {
    state: State,
    env: Env,
    rules: MakeDocRules,
    config: DocConfig,
    sql: SqlStorage,
    log_connections: bool,
    /// The room and its sockets by id, present while the object is in memory.
    live: RefCell<Option<Live>>,
    /// The storage alarm this instance set and has not seen fire (ms).
    alarm_at: Cell<Option<u64>>,
    /// When the room next expires an awareness state (ms), as its last turn said.
    due: Cell<Option<u64>>,
}

struct Live {
    room: DocRoom,
    sockets: HashMap<ConnId, WebSocket>,
}

impl DocHost {
    /// The host of one document room, whose rooms run the rules `rules` makes.
    pub fn new(state: State, env: Env, rules: MakeDocRules) -> Self {
        console_error_panic_hook::set_once();
        let (config, problems) = DocConfig::from_vars(|name| settings::read(&env, name));
        for problem in problems {
            log("config_error", serde_json::json!({ "problem": problem }));
        }
        let log_connections = crate::logline::connections_logged(settings::read(
            &env,
            settings::LOG_CONNECTIONS.name,
        ));
        let sql = state.storage().sql();
        let inner = Inner {
            state,
            env,
            rules,
            config,
            sql,
            log_connections,
            live: RefCell::new(None),
            alarm_at: Cell::new(None),
            due: Cell::new(None),
        };
        DocHost { inner: Rc::new(inner) }
    }
}

impl Object for DocHost {
    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let Some(routed) = forward::read_raw(req.inner()) else {
            return Response::error("the room accepts only requests forwarded by the Worker", 400);
        };
        let inner = &self.inner;
        let ask = match routed.what {
            Inbound::Doc(ask) => ask,
            Inbound::Custom(custom) => return inner.custom(custom, &mut req).await,
            _ => return Response::error("not a document kind's request", 400),
        };
        // The only ask with a body to wait for; the rest is answered at once.
        let body = if matches!(ask, DocAsk::Apply) { Some(req.bytes().await?) } else { None };
        let response = inner.answer(ask, body);
        inner.schedule().await;
        response
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let Some(conn) = conn_of(&ws) else { return Ok(()) };
        let inner = &self.inner;
        inner.with(|live, now| match &message {
            WebSocketIncomingMessage::Binary(bytes) => live.room.message(now, conn, bytes),
            // y-protocols is binary: a text frame is not one of its messages.
            WebSocketIncomingMessage::String(text) => live.room.message(now, conn, text.as_bytes()),
        })?;
        inner.schedule().await;
        Ok(())
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        _reason: String,
        clean: bool,
    ) -> Result<()> {
        self.gone(&ws, Some((code, clean))).await
    }

    async fn websocket_error(&self, ws: WebSocket, _error: worker::Error) -> Result<()> {
        self.gone(&ws, None).await
    }

    async fn alarm(&self) -> Result<Response> {
        let inner = &self.inner;
        inner.alarm_at.set(None);
        if !inner.state.get_websockets().is_empty() {
            inner.with(|_, _| ())?; // `with` ticks the room's clock
            inner.schedule().await;
        }
        Response::ok("")
    }
}

impl DocHost {
    async fn gone(&self, ws: &WebSocket, close: Option<(usize, bool)>) -> Result<()> {
        // Complete the closing handshake; the socket may already be closed.
        let _ = ws.close(Some(1000), Some("closed"));
        let Some(conn) = conn_of(ws) else { return Ok(()) };
        let inner = &self.inner;
        if inner.log_connections {
            let (code, clean) = close.unzip();
            log("close", serde_json::json!({"conn": conn, "code": code, "clean": clean}));
        }
        inner.with(|live, now| {
            live.sockets.remove(&conn);
            live.room.close(now, conn);
        })?;
        inner.schedule().await;
        Ok(())
    }
}

impl Inner {
    /// Answers an ask of the Worker's (all but the rules' routes), its body read.
    fn answer(&self, ask: DocAsk, body: Option<Vec<u8>>) -> Result<Response> {
        // Reading a document that does not exist must not create it: only a connect, or a
        // write by the operator's backend.
        let reads =
            !matches!(ask, DocAsk::Connect { .. } | DocAsk::Apply | DocAsk::SaveVersion { .. });
        if reads && !self.exists()? {
            return error(404, "room_not_found", "no such document");
        }
        Ok(match ask {
            DocAsk::Connect { user, read_only, extensions, expires } => {
                let pair = WebSocketPair::new()?;
                let response = Response::from_websocket(pair.client)?;
                let conn = random_u64() >> 11; // exact in JavaScript numbers
                let anonymous = user.is_none();
                let user = user.unwrap_or_else(|| format!("anon-{conn:x}"));
                let member = Member { user, read_only, extensions, expires, anonymous };
                // Its attachment is written when the room takes it (`Effect::Remember`).
                self.state.accept_web_socket(&pair.server);
                self.with(|live, now| {
                    live.sockets.insert(conn, pair.server);
                    live.room.open(now, conn, member);
                })?;
                response
            }
            DocAsk::Read => {
                let bytes = self.with(|live, _| live.room.encoded())?;
                let response = Response::from_bytes(bytes)?;
                response.headers().set("content-type", "application/octet-stream")?;
                response
            }
            DocAsk::Json { roots } => match self.with(|live, _| live.room.json(&roots))? {
                Ok(value) => Response::from_json(&value)?,
                Err(ty) => error(400, "bad_param", &format!("unknown type {ty:?}"))?,
            },
            DocAsk::Apply => {
                let body = body.unwrap_or_default();
                match self.with(|live, _| live.room.server_update(&body))? {
                    Ok(()) => Response::from_json(&serde_json::json!({ "applied": true }))?,
                    Err(e) => error(400, e.code(), "the update was refused; nothing was applied")?,
                }
            }
            DocAsk::Stats => {
                let stats = self.with(|live, _| {
                    serde_json::json!({
                        "sockets": live.room.sockets(),
                        "stored_bytes": live.room.stored_bytes(),
                    })
                })?;
                Response::from_json(&stats)?
            }
            versions => self.versions(versions)?,
        })
    }

    /// A path under the room that the kind's rules answer (404 when they do not). Only the
    /// operator's backend (admin key) creates a document this way, as for rooms.
    async fn custom(&self, custom: forward::Custom, req: &mut Request) -> Result<Response> {
        if !custom.admin && !self.exists()? {
            return error(404, "room_not_found", "no such document");
        }
        let body = req.text().await.unwrap_or_default();
        let request = custom.with_body(body);
        let answer = self.with(|live, now| live.room.request(now, &request))?;
        self.schedule().await;
        match answer {
            Some(r) => super::json_response(r.status, r.body),
            None => error(404, "not_found", "no such route"),
        }
    }

    /// Runs `f` on the room (loading it first if need be), then applies its effects and
    /// expires what is due.
    fn with<R>(&self, f: impl FnOnce(&mut Live, u64) -> R) -> Result<R> {
        let mut slot = self.live.borrow_mut();
        if slot.is_none() {
            *slot = Some(self.load()?);
        }
        let live = slot.as_mut().expect("loaded above");
        let now = now().ms();
        let result = f(live, now);
        self.due.set(live.room.tick(now));
        self.apply(live)?;
        Ok(result)
    }

    /// The room from storage, and the sockets that stayed connected from their attachments.
    fn load(&self) -> Result<Live> {
        self.sql.exec(SCHEMA, None)?;
        let generation = self.generation()?;
        let mut snapshot = Vec::new();
        let chunks = self.sql.exec(
            "SELECT data FROM doc_snapshot WHERE generation = ? ORDER BY idx",
            vec![V::Integer(generation)],
        )?;
        for row in chunks.raw() {
            if let Some(V::Blob(bytes)) = row?.into_iter().next() {
                snapshot.extend_from_slice(&bytes);
            }
        }
        let mut log_rows = Vec::new();
        for row in self.sql.exec("SELECT data FROM doc_log ORDER BY seq", None)?.raw() {
            if let Some(V::Blob(bytes)) = row?.into_iter().next() {
                log_rows.push(bytes);
            }
        }
        let var = |name: &str| settings::read(&self.env, name);
        let rules = (self.rules)(&Vars::new(&var));
        let mut room =
            DocRoom::new(self.config, random_u64() >> 11).with_seed(random_u64()).with_rules(rules);
        let skipped = room.restore(&snapshot, log_rows.iter().map(Vec::as_slice));
        room.restore_writers(self.writers()?);
        if skipped > 0 {
            log("storage_error", serde_json::json!({ "skipped_updates": skipped }));
        }
        let now = now().ms();
        let mut sockets = HashMap::new();
        for ws in self.state.get_websockets() {
            let Some((conn, record)) = attachment_of(&ws).as_deref().and_then(doc::read_attachment)
            else {
                continue;
            };
            room.rejoin(now, conn, record);
            sockets.insert(conn, ws);
        }
        let _ = room.take_effects();
        Ok(Live { room, sockets })
    }

    /// Which user each Yjs client that has written writes for.
    fn writers(&self) -> Result<Vec<(u64, String)>> {
        let mut writers = Vec::new();
        for row in self.sql.exec("SELECT client, user FROM doc_writers", None)?.raw() {
            if let [V::Integer(client), V::String(user)] = &row?[..] {
                writers.push((*client as u64, user.clone()));
            }
        }
        Ok(writers)
    }

    /// Whether the document was ever created (its tables exist).
    fn exists(&self) -> Result<bool> {
        if self.live.borrow().is_some() {
            return Ok(true);
        }
        #[derive(serde::Deserialize)]
        struct Count {
            n: u64,
        }
        let tables: Vec<Count> = self
            .sql
            .exec(
                "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'doc_log'",
                None,
            )?
            .to_array()?;
        Ok(tables.first().is_some_and(|c| c.n > 0))
    }

    /// The named versions' routes (PROTOCOL-DOCUMENTS.md, "Versions").
    fn versions(&self, ask: DocAsk) -> Result<Response> {
        let chunks = |name: &str| -> Result<Option<Vec<u8>>> {
            let mut bytes = Vec::new();
            let mut found = false;
            let rows = self.sql.exec(
                "SELECT data FROM doc_versions WHERE name = ? ORDER BY idx",
                vec![V::String(name.to_owned())],
            )?;
            for row in rows.raw() {
                if let Some(V::Blob(b)) = row?.into_iter().next() {
                    bytes.extend_from_slice(&b);
                    found = true;
                }
            }
            Ok(found.then_some(bytes))
        };
        match ask {
            DocAsk::SaveVersion { name } => self.save_version(name),
            DocAsk::Versions => {
                #[derive(serde::Deserialize, serde::Serialize)]
                struct Row {
                    name: String,
                    created: i64,
                    bytes: i64,
                }
                let rows: Vec<Row> = self
                    .sql
                    .exec(
                        "SELECT name, MIN(created) AS created, SUM(length(data)) AS bytes FROM doc_versions GROUP BY name ORDER BY created",
                        None,
                    )?
                    .to_array()?;
                Response::from_json(&serde_json::json!({ "versions": rows }))
            }
            DocAsk::Version { name } => match chunks(&name)? {
                Some(bytes) => {
                    let response = Response::from_bytes(bytes)?;
                    response.headers().set("content-type", "application/octet-stream")?;
                    Ok(response)
                }
                None => error(404, "no_such_version", "the document keeps no version of that name"),
            },
            DocAsk::RestoreVersion { name, roots } => {
                let Some(bytes) = chunks(&name)? else {
                    return error(
                        404,
                        "no_such_version",
                        "the document keeps no version of that name",
                    );
                };
                match self.with(|live, _| live.room.restore_version(&bytes, &roots))? {
                    Ok(()) => Response::from_json(&serde_json::json!({ "restored": name })),
                    Err(e) => error(400, e.code(), "the version was not restored; nothing changed"),
                }
            }
            DocAsk::DropVersion { name } => {
                self.sql.exec("DELETE FROM doc_versions WHERE name = ?", vec![V::String(name)])?;
                Response::from_json(&serde_json::json!({ "dropped": true }))
            }
            _ => error(404, "not_found", "no such route"),
        }
    }

    /// Keeps the document as it is now as version `name` (replacing one of that name).
    fn save_version(&self, name: String) -> Result<Response> {
        let names = self.version_names()?;
        if !names.contains(&name) && names.len() >= MAX_VERSIONS {
            return error(409, "too_many_versions", "a document keeps at most 20 versions");
        }
        let encoded = self.with(|live, _| live.room.encoded())?;
        let now = now().ms() as i64;
        self.sql.exec("DELETE FROM doc_versions WHERE name = ?", vec![V::String(name.clone())])?;
        for (idx, chunk) in encoded.chunks(CHUNK).enumerate() {
            self.sql.exec(
                "INSERT INTO doc_versions (name, idx, created, data) VALUES (?, ?, ?, ?)",
                vec![
                    V::String(name.clone()),
                    V::Integer(idx as i64),
                    V::Integer(now),
                    V::Blob(chunk.to_vec()),
                ],
            )?;
        }
        Response::from_json(&serde_json::json!({ "name": name, "bytes": encoded.len() }))
    }

    fn version_names(&self) -> Result<Vec<String>> {
        #[derive(serde::Deserialize)]
        struct Row {
            name: String,
        }
        let rows: Vec<Row> =
            self.sql.exec("SELECT DISTINCT name FROM doc_versions", None)?.to_array()?;
        Ok(rows.into_iter().map(|r| r.name).collect())
    }

    /// The current snapshot's generation (0: none yet).
    fn generation(&self) -> Result<i64> {
        #[derive(serde::Deserialize)]
        struct Row {
            v: i64,
        }
        let rows: Vec<Row> =
            self.sql.exec("SELECT v FROM doc_meta WHERE k = 'generation'", None)?.to_array()?;
        Ok(rows.first().map_or(0, |r| r.v))
    }

    /// Applies the room's effects in order, until it has none.
    fn apply(&self, live: &mut Live) -> Result<()> {
        loop {
            let effects = live.room.take_effects();
            if effects.is_empty() {
                return Ok(());
            }
            for effect in effects {
                self.effect(live, effect)?;
            }
        }
    }

    fn effect(&self, live: &mut Live, effect: Effect) -> Result<()> {
        match effect {
            Effect::Store(update) => {
                self.sql.exec("INSERT INTO doc_log (data) VALUES (?)", vec![V::Blob(update)])?;
            }
            Effect::Bind { clients, user } => {
                // A statement per 50,000 clients (an update may bring thousands): their ids as
                // one JSON array, each exact (below 2^53), at most about 850 KB (a SQLite value
                // holds 2 MB).
                for chunk in clients.chunks(50_000) {
                    let ids = serde_json::to_string(chunk).unwrap_or_else(|_| "[]".into());
                    self.sql.exec(
                        "INSERT OR IGNORE INTO doc_writers (client, user) SELECT value, ? FROM json_each(?)",
                        vec![V::String(user.clone()), V::String(ids)],
                    )?;
                }
            }
            Effect::Unbind { clients } => {
                let ids = serde_json::to_string(&clients).unwrap_or_else(|_| "[]".into());
                self.sql.exec(
                    "DELETE FROM doc_writers WHERE client IN (SELECT value FROM json_each(?))",
                    vec![V::String(ids)],
                )?;
            }
            Effect::Compact(snapshot) => self.compact(&snapshot)?,
            Effect::Send(conn, frame) => {
                if let Some(ws) = live.sockets.get(&conn) {
                    let _ = ws.send_with_bytes(&frame);
                }
            }
            Effect::Broadcast { except, frame } => {
                // One copy into JavaScript for every socket (the runtime sends it as it is).
                let shared = js_sys::Uint8Array::from(&frame[..]);
                for (conn, ws) in &live.sockets {
                    if Some(*conn) != except {
                        super::sockets::send_shared(ws, &shared);
                    }
                }
            }
            Effect::Remember(conn) => {
                if let (Some(ws), Some(text)) =
                    (live.sockets.get(&conn), live.room.attachment(conn))
                {
                    if let Err(e) = super::upgrade::attach(ws, &text) {
                        log(
                            "attachment_error",
                            serde_json::json!({"conn": conn, "error": e.to_string()}),
                        );
                    }
                }
            }
            Effect::Refused(conn, why) => {
                log("doc_refused", serde_json::json!({"conn": conn, "code": why.code()}));
            }
            Effect::Close(conn, code, reason) => {
                if let Some(ws) = live.sockets.remove(&conn) {
                    super::upgrade::close_for_good(&ws, code, &reason);
                }
                live.room.close(now().ms(), conn);
                // Its close event finds no record to log from (it is nobody's now): said here,
                // as the room kind's `closed_by_room`.
                log("closed_by_room", serde_json::json!({"conn": conn, "code": code}));
            }
        }
        Ok(())
    }

    /// Writes the snapshot as a new generation of chunks, points at it, then drops the old
    /// generation and the log it folds in. A reader sees the old generation or the new one,
    /// never a mix; the log rows it folds in are harmless if left (updates are idempotent).
    fn compact(&self, snapshot: &[u8]) -> Result<()> {
        let generation = self.generation()? + 1;
        for (idx, chunk) in snapshot.chunks(CHUNK).enumerate() {
            self.sql.exec(
                "INSERT INTO doc_snapshot (generation, idx, data) VALUES (?, ?, ?)",
                vec![V::Integer(generation), V::Integer(idx as i64), V::Blob(chunk.to_vec())],
            )?;
        }
        self.sql.exec(
            "INSERT INTO doc_meta (k, v) VALUES ('generation', ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
            vec![V::Integer(generation)],
        )?;
        self.sql
            .exec("DELETE FROM doc_snapshot WHERE generation <> ?", vec![V::Integer(generation)])?;
        self.sql.exec("DELETE FROM doc_log", None)?;
        Ok(())
    }

    /// Sets the storage alarm for the next awareness expiry, if it is earlier than the one set.
    async fn schedule(&self) {
        let Some(at) = self.due.get() else { return };
        if self.alarm_at.get().is_some_and(|set| set <= at) {
            return;
        }
        self.alarm_at.set(Some(at));
        let when = ScheduledTime::new(js_sys::Date::new(&(at as f64).into()));
        if let Err(e) = self.state.storage().set_alarm(when).await {
            log("alarm_error", serde_json::json!({ "error": e.to_string() }));
        }
    }
}

fn attachment_of(ws: &WebSocket) -> Option<String> {
    super::upgrade::attachment(ws)
}

fn conn_of(ws: &WebSocket) -> Option<ConnId> {
    attachment_of(ws).as_deref().and_then(doc::attachment_conn)
}
