//! The WebSocket test client: dial a room (session, since/epoch, region header), read JSON frames with timeouts (batches flattened in order), keep a history, and the protocol helpers (publish, set, get_state, ping, expect_close).

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::support::R;

/// Default wait for one frame.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(10);

/// The `MF-CF-Blob` that makes local dev see the request as coming from Sydney (region "OC").
pub const CF_SYDNEY: &str = r#"{"colo":"SYD","continent":"OC","country":"AU"}"#;

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Percent-encodes a query value (everything but unreserved characters).
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A connect request being built.
#[derive(Clone)]
pub struct Dial {
    port: u16,
    /// The kind of room: the path segment before the room (`rooms` unless told).
    kind: String,
    room: String,
    session: String,
    query: Vec<(String, String)>,
    cf: Option<String>,
    /// Extra request headers (an attacker's, say).
    headers: Vec<(String, String)>,
}

impl Dial {
    pub fn new(port: u16, room: &str, session: &str) -> Dial {
        Dial {
            port,
            kind: "rooms".into(),
            room: room.to_string(),
            session: session.to_string(),
            query: Vec::new(),
            cf: None,
            headers: Vec::new(),
        }
    }

    /// A room of another kind (`/{kind}/{room}/ws`).
    pub fn kind(mut self, kind: &str) -> Dial {
        self.kind = kind.to_string();
        self
    }

    /// Resume from `since` in `epoch`.
    pub fn since(mut self, since: u64, epoch: &str) -> Dial {
        self.query.push(("since".into(), since.to_string()));
        self.query.push(("epoch".into(), epoch.to_string()));
        self
    }

    /// Adds `token=<token>` (token mode, PROTOCOL.md "Auth").
    pub fn token(self, token: &str) -> Dial {
        self.param("token", token)
    }

    /// Adds any query parameter (percent-encoded).
    pub fn param(mut self, key: &str, value: &str) -> Dial {
        self.query.push((key.to_string(), value.to_string()));
        self
    }

    /// Connect "from" Sydney (region OC).
    pub fn via_sydney(mut self) -> Dial {
        self.cf = Some(CF_SYDNEY.to_string());
        self
    }

    /// Connect "from" any place: the `MF-CF-Blob` that local dev reads as the request's `cf`
    /// (so the Worker derives the region from this colo, country and continent).
    pub fn via(mut self, colo: &str, country: &str, continent: &str) -> Dial {
        self.cf = Some(
            serde_json::json!({"colo": colo, "continent": continent, "country": country})
                .to_string(),
        );
        self
    }

    /// An extra header on the upgrade request.
    pub fn header(mut self, key: &str, value: &str) -> Dial {
        self.headers.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn url(&self) -> String {
        let mut url = format!(
            "ws://127.0.0.1:{}/{}/{}/ws?session={}",
            self.port,
            self.kind,
            self.room,
            enc(&self.session)
        );
        for (k, v) in &self.query {
            url.push_str(&format!("&{k}={}", enc(v)));
        }
        url
    }

    /// The bare WebSocket of this dial (with its region header), opened within `timeout`; an
    /// HTTP refusal is an error naming its status and body.
    pub async fn socket(&self, timeout: Duration) -> R<Ws> {
        let url = self.url();
        let mut req =
            url.as_str().into_client_request().map_err(|e| format!("bad url {url}: {e}"))?;
        if let Some(cf) = &self.cf {
            req.headers_mut().insert("MF-CF-Blob", cf.parse().expect("header value"));
        }
        for (k, v) in &self.headers {
            let name = tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| format!("header {k}: {e}"))?;
            req.headers_mut()
                .insert(name, v.parse().map_err(|_| format!("header {k}: bad value"))?);
        }
        let (ws, _resp) = tokio::time::timeout(timeout, tokio_tungstenite::connect_async(req))
            .await
            .map_err(|_| format!("connect {url}: timed out"))?
            .map_err(|e| match e {
                WsError::Http(resp) => format!(
                    "connect {url}: refused with HTTP {} {}",
                    resp.status(),
                    resp.body()
                        .as_ref()
                        .map(|b| String::from_utf8_lossy(b).to_string())
                        .unwrap_or_default()
                ),
                e => format!("connect {url}: {e}"),
            })?;
        Ok(ws)
    }

    /// Opens the socket and reads the first frame, which must be `welcome`.
    pub async fn connect(self) -> R<Client> {
        let mut c = self.open().await?;
        let w = c.next().await.map_err(|e| format!("waiting for welcome: {e}"))?;
        if w["type"] != "welcome" {
            return Err(format!("first frame is not a welcome: {w}"));
        }
        c.welcome = w;
        Ok(c)
    }

    /// Opens the socket without reading anything.
    pub async fn open(self) -> R<Client> {
        let ws = self.socket(FRAME_TIMEOUT).await?;
        Ok(Client {
            room: self.room,
            session: self.session,
            ws,
            queue: VecDeque::new(),
            history: Vec::new(),
            welcome: Value::Null,
            closed: None,
            echo_marks: true,
        })
    }
}

/// What the socket produced next.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Frame(Value),
    /// The connection ended: `Some(code)` for a close frame, `None` for an abnormal end.
    Closed(Option<u16>),
}

pub struct Client {
    pub room: String,
    pub session: String,
    ws: Ws,
    queue: VecDeque<Value>,
    /// Every frame received so far (batches flattened), in order.
    pub history: Vec<Value>,
    pub welcome: Value,
    /// Set once the connection has ended.
    pub closed: Option<Option<u16>>,
    /// Echo `mark` frames (what a reading client does); off to play a client that never
    /// confirms what it read.
    pub echo_marks: bool,
}

impl Client {
    pub fn epoch(&self) -> String {
        self.welcome["epoch"].as_str().unwrap_or_default().to_string()
    }

    pub fn welcome_seq(&self) -> u64 {
        self.welcome["seq"].as_u64().unwrap_or(u64::MAX)
    }

    /// Messages (`type: message`) received so far.
    pub fn messages(&self) -> Vec<Value> {
        self.history.iter().filter(|f| f["type"] == "message").cloned().collect()
    }

    fn recent(&self) -> String {
        let start = self.history.len().saturating_sub(5);
        let frames: Vec<String> = self.history[start..].iter().map(short).collect();
        format!("[{}] last frames of {}: {}", self.session, self.room, frames.join(" | "))
    }

    /// Next event (frame or close) within `timeout`. A `mark` frame (flow control) is
    /// echoed at once, as every client must, and is not returned.
    pub async fn next_event_within(&mut self, timeout: Duration) -> R<Event> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_raw_event(left).await? {
                Event::Frame(f) if f["type"] == "mark" && self.echo_marks => {
                    let echo = json!({"type": "mark", "mark": f["mark"]});
                    // A socket closing under us reports its close next.
                    let _ = self.ws.send(Message::text(echo.to_string())).await;
                }
                e => return Ok(e),
            }
        }
    }

    async fn next_raw_event(&mut self, timeout: Duration) -> R<Event> {
        if let Some(f) = self.queue.pop_front() {
            self.history.push(f.clone());
            return Ok(Event::Frame(f));
        }
        if let Some(code) = self.closed {
            return Ok(Event::Closed(code));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let msg = match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return Err(format!("no frame within {timeout:?}; {}", self.recent())),
                Ok(None) => {
                    self.closed = Some(None);
                    return Ok(Event::Closed(None));
                }
                Ok(Some(Err(_))) => {
                    self.closed = Some(None);
                    return Ok(Event::Closed(None));
                }
                Ok(Some(Ok(m))) => m,
            };
            match msg {
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(t.as_str()).map_err(|e| {
                        format!("server sent a non-JSON text frame ({e}): {}", t.as_str())
                    })?;
                    if v["type"] == "batch" {
                        let frames = v["frames"]
                            .as_array()
                            .ok_or_else(|| format!("batch without frames array: {v}"))?;
                        // The protocol's batch is one level: a client reads no deeper.
                        if frames.iter().any(|f| f["type"] == "batch") {
                            return Err(format!("a batch inside a batch: {v}"));
                        }
                        self.queue.extend(frames.iter().cloned());
                        if let Some(f) = self.queue.pop_front() {
                            self.history.push(f.clone());
                            return Ok(Event::Frame(f));
                        }
                        continue;
                    }
                    self.history.push(v.clone());
                    return Ok(Event::Frame(v));
                }
                Message::Binary(b) => {
                    return Err(format!(
                        "server sent a binary frame ({} bytes); {}",
                        b.len(),
                        self.recent()
                    ))
                }
                Message::Close(frame) => {
                    let code = frame.map(|f| u16::from(f.code));
                    self.closed = Some(code);
                    return Ok(Event::Closed(code));
                }
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
            }
        }
    }

    /// Next frame, skipping `presence` and `summary` frames (they are kept in `history` but
    /// are not part of what these tests check); a close is an error.
    pub async fn next_within(&mut self, timeout: Duration) -> R<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_event_within(left).await? {
                Event::Frame(f) if f["type"] == "presence" || f["type"] == "summary" => continue,
                Event::Frame(f) => return Ok(f),
                Event::Closed(code) => {
                    return Err(format!(
                        "connection closed ({code:?}) while a frame was expected; {}",
                        self.recent()
                    ))
                }
            }
        }
    }

    pub async fn next(&mut self) -> R<Value> {
        self.next_within(FRAME_TIMEOUT).await
    }

    /// The next frame must have type `ty`.
    pub async fn expect_type(&mut self, ty: &str) -> R<Value> {
        let f = self.next().await?;
        if f["type"] != ty {
            return Err(format!("expected a `{ty}` frame, got {}; {}", short(&f), self.recent()));
        }
        Ok(f)
    }

    /// Reads until a frame satisfies `pred` (others stay in `history`).
    pub async fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> R<Value> {
        let deadline = tokio::time::Instant::now() + FRAME_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let f = self.next_within(left).await.map_err(|e| format!("waiting for {what}: {e}"))?;
            if pred(&f) {
                return Ok(f);
            }
        }
    }

    /// The members the welcome and the presence frames since have listed (itself included).
    pub fn members_seen(&self) -> std::collections::BTreeSet<String> {
        let listed = |f: &Value| -> Vec<String> {
            f.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
        };
        let mut seen: std::collections::BTreeSet<String> =
            listed(&self.welcome["presence"]["members"]).into_iter().collect();
        for f in self.history.iter().filter(|f| f["type"] == "presence") {
            if f["reset"] == true {
                seen.clear();
            }
            seen.extend(listed(&f["joins"]));
            for s in f["leaves"].as_array().into_iter().flatten() {
                seen.remove(s.as_str().unwrap_or_default());
            }
        }
        seen
    }

    /// Reads until the member list its welcome and diffs make has `n` members: a small room's
    /// presence changes after the first coalesce over a window (50 ms), so a test that needs
    /// everyone's view of everyone waits for it.
    pub async fn await_members(&mut self, n: usize) -> R<()> {
        let deadline = tokio::time::Instant::now() + FRAME_TIMEOUT;
        while self.members_seen().len() != n {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_event_within(left).await {
                Ok(Event::Frame(_)) => {}
                Ok(Event::Closed(code)) => {
                    return Err(format!("closed ({code:?}) waiting for {n} members"))
                }
                Err(e) => {
                    let seen = self.members_seen().len();
                    return Err(format!(
                        "waiting for {n} members (seen {seen}): {e}; {}",
                        self.recent()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The `message` with this id: from `history` if it already arrived (e.g. while waiting for
    /// an ack), else the next one to arrive.
    pub async fn message(&mut self, id: &str) -> R<Value> {
        if let Some(m) = self.history.iter().find(|f| f["type"] == "message" && f["id"] == id) {
            return Ok(m.clone());
        }
        self.until(&format!("message {id}"), |f| f["type"] == "message" && f["id"] == id).await
    }

    /// Reads until the connection closes (frames go to `history`); returns the close code.
    pub async fn expect_close(&mut self, timeout: Duration) -> R<Option<u16>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self
                .next_event_within(left)
                .await
                .map_err(|e| format!("waiting for the connection to close: {e}"))?
            {
                Event::Closed(code) => return Ok(code),
                Event::Frame(_) => {}
            }
        }
    }

    pub async fn send_text(&mut self, text: String) -> R<()> {
        self.ws.send(Message::text(text)).await.map_err(|e| format!("[{}] send: {e}", self.session))
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) -> R<()> {
        self.ws
            .send(Message::binary(bytes))
            .await
            .map_err(|e| format!("[{}] send: {e}", self.session))
    }

    pub async fn send(&mut self, frame: Value) -> R<()> {
        self.send_text(frame.to_string()).await
    }

    /// Queues frames without flushing (for back-to-back bursts); call `flush` after.
    pub async fn feed(&mut self, frame: Value) -> R<()> {
        self.ws
            .feed(Message::text(frame.to_string()))
            .await
            .map_err(|e| format!("[{}] send: {e}", self.session))
    }

    pub async fn flush(&mut self) -> R<()> {
        self.ws.flush().await.map_err(|e| format!("[{}] flush: {e}", self.session))
    }

    pub async fn publish(&mut self, id: &str, topic: &str, data: Value) -> R<()> {
        self.send(json!({"type":"publish","id":id,"topic":topic,"data":data})).await
    }

    pub async fn set(
        &mut self,
        id: &str,
        key: &str,
        value: Value,
        if_version: Option<u64>,
    ) -> R<()> {
        let mut f = json!({"type":"set","id":id,"key":key,"value":value});
        if let Some(v) = if_version {
            f["if_version"] = json!(v);
        }
        self.send(f).await
    }

    /// Waits for the `ack` of `id` (an `error` for `id` is a failure); returns its seq.
    pub async fn ack(&mut self, id: &str) -> R<u64> {
        let f = self
            .until(&format!("ack {id}"), |f| {
                (f["type"] == "ack" || f["type"] == "error") && f["id"] == id
            })
            .await?;
        if f["type"] == "error" {
            return Err(format!("expected ack for {id}, got {f}"));
        }
        f["seq"].as_u64().ok_or_else(|| format!("ack without a numeric seq: {f}"))
    }

    /// Waits for the ack or error answering `id`.
    pub async fn reply(&mut self, id: &str) -> R<Value> {
        self.until(&format!("ack/error for {id}"), |f| {
            (f["type"] == "ack" || f["type"] == "error") && f["id"] == id
        })
        .await
    }

    pub async fn publish_acked(&mut self, id: &str, topic: &str, data: Value) -> R<u64> {
        self.publish(id, topic, data).await?;
        self.ack(id).await
    }

    pub async fn set_acked(
        &mut self,
        id: &str,
        key: &str,
        value: Value,
        if_version: Option<u64>,
    ) -> R<u64> {
        self.set(id, key, value, if_version).await?;
        self.ack(id).await
    }

    /// Publishes, backing off while the connection is rate limited (legitimate client behaviour).
    pub async fn publish_patiently(&mut self, id: &str, topic: &str, data: Value) -> R<u64> {
        for _ in 0..50 {
            self.publish(id, topic, data.clone()).await?;
            // A frame refused by the rate limit is refused before it is read, so its
            // `rate_limited` error names no id: it answers the frame just sent.
            let f = self
                .until(&format!("ack/error for {id}"), |f| {
                    (f["type"] == "ack" || f["type"] == "error") && f["id"] == id
                        || f["type"] == "error" && f["code"] == "rate_limited" && f["id"].is_null()
                })
                .await?;
            if f["type"] == "ack" {
                return f["seq"].as_u64().ok_or_else(|| format!("ack without a numeric seq: {f}"));
            }
            if f["code"] != "rate_limited" {
                return Err(format!("publish {id}: {f}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("publish {id}: still rate limited after 5 s"))
    }

    /// `get_state` → the `state` frame.
    pub async fn get_state(&mut self) -> R<Value> {
        self.send(json!({"type":"get_state"})).await?;
        self.until("state", |f| f["type"] == "state").await
    }

    /// `ping` (the exact string the runtime auto-answers) → `pong`.
    pub async fn ping(&mut self) -> R<()> {
        self.send_text(r#"{"type":"ping"}"#.to_string()).await?;
        self.until("pong", |f| f["type"] == "pong").await?;
        Ok(())
    }

    /// Normal close (1000); waits briefly for the server's close reply.
    pub async fn close(mut self) {
        let _ = self
            .ws
            .send(Message::Close(Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "bye".into(),
            })))
            .await;
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while let Some(Ok(_)) = self.ws.next().await {}
        })
        .await;
    }

    /// Closes with `code` (e.g. a private 4xxx code a log line can be matched by); waits briefly
    /// for the server's close reply.
    pub async fn close_with(mut self, code: u16, reason: &str) {
        let _ = self
            .ws
            .send(Message::Close(Some(CloseFrame {
                code: CloseCode::from(code),
                reason: reason.to_string().into(),
            })))
            .await;
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while let Some(Ok(_)) = self.ws.next().await {}
        })
        .await;
    }

    /// Drops the TCP connection without a close frame (the server sees 1006).
    pub fn drop_tcp(self) {
        drop(self);
    }
}

/// One-line rendering of a frame for messages (long data cut).
pub fn short(f: &Value) -> String {
    let s = f.to_string();
    if s.len() > 300 {
        format!("{}…({} bytes)", s.chars().take(300).collect::<String>(), s.len())
    } else {
        s
    }
}
