//! The room routes under `/{kind}/{room}/`: `ws` and `presence` for
//! clients; `messages`, `drain`, `kick`, `stats`, `state`, `state/{key}`,
//! `log` and `DELETE` of the room itself for the operator's backend (admin
//! key); and any other path, which the room's rules may answer. Each is
//! checked here and then handed to the room's Durable Object.

use worker::{Env, Method, Request, Response, Stub};

use super::config::{AuthMode, Deployment};
use super::refusal::HttpRefusal;
use super::{home, log, region, relays, Kind};
use crate::auth;
use crate::forward::{self, Custom, Forwarded, Inbound, Routed};
use crate::protocol::names;

/// An admin route that a room's home answers, or one of its relays with `?relay=EU-0`
/// (`home`: whether the home answers it too).
async fn or_relay(
    req: &Request,
    env: &Env,
    dep: &Deployment,
    at: Target<'_>,
    method: Method,
    what: Inbound,
    home: bool,
) -> Outcome {
    // The key first: a caller without it learns nothing, not even whether the kind has relays.
    expect_method(req, method.clone())?;
    expect_admin(req, dep)?;
    match relay_of(req, at)? {
        Some((relay, binding)) => relays::admin(env, at, binding, &relay, what).await,
        None if home => admin(req, env, dep, at, method, what).await,
        None => Err(HttpRefusal::BadParam("relay")),
    }
}

/// The `relay` query parameter of an admin route (`GET /stats?relay=EU-0`), if given, with
/// the binding of the kind's relays (a kind without relays has no such parameter).
fn relay_of(req: &Request, at: Target<'_>) -> Result<Option<(String, &'static str)>, HttpRefusal> {
    let url = req.url().map_err(|_| HttpRefusal::BadParam("url"))?;
    let Some(relay) = url.query_pairs().find(|(k, _)| k == "relay").map(|(_, v)| v.into_owned())
    else {
        return Ok(None);
    };
    match at.kind.companion {
        Some(binding) => Ok(Some((relay, binding))),
        None => Err(HttpRefusal::BadParam("relay")),
    }
}

/// Longest accepted query string (a token is at most 2 KiB).
const MAX_QUERY: usize = 4096;
/// Largest request body a room route takes.
const MAX_BODY: usize = 64 * 1024;
/// Most log entries one `GET /log` returns.
const MAX_LOG: u64 = 1000;

type Outcome = std::result::Result<Response, HttpRefusal>;

/// Who is asking: a client over HTTP, or the Worker's own health canary
/// (the only one let into the canary room).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Client,
    Canary,
}

/// The room a request is for.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub kind: &'a Kind,
    pub room: &'a str,
}

/// The query parameters of a connect.
#[derive(Default)]
struct ConnectQuery {
    session: Option<String>,
    since: Option<u64>,
    epoch: Option<String>,
    token: Option<String>,
}

/// Dispatches `/{kind}/{room}/{rest}`.
pub async fn route(
    req: &mut Request,
    env: &Env,
    dep: &Deployment,
    at: Target<'_>,
    rest: &[&str],
) -> Outcome {
    expect_room(at.room)?;
    let canary = at.room == dep.canary_room && std::ptr::eq(at.kind, dep.canary_kind());
    match rest {
        ["ws"] if canary => Err(HttpRefusal::ReservedRoom),
        ["ws"] => connect(req, env, dep, at, Caller::Client).await,
        ["presence"] if canary => Err(HttpRefusal::ReservedRoom),
        ["presence"] => presence(req, env, dep, at).await,
        ["messages"] => {
            let body = admin_body(req, dep, Method::Post).await?;
            let region = region::locate(req, env).region;
            ask(req, env, at, Inbound::Publish { region }, Method::Post, Some(body.into_bytes()))
                .await
        }
        ["drain"] => admin(req, env, dep, at, Method::Post, Inbound::Drain).await,
        ["stats"] => or_relay(req, env, dep, at, Method::Get, Inbound::Stats, true).await,
        ["kick"] => {
            let body = admin_body(req, dep, Method::Post).await?;
            ask(req, env, at, Inbound::Kick, Method::Post, Some(body.into_bytes())).await
        }
        #[cfg(feature = "fault-injection")]
        ["fault"] => or_relay(req, env, dep, at, Method::Post, Inbound::Fault, true).await,
        #[cfg(feature = "fault-injection")]
        ["mute"] => or_relay(req, env, dep, at, Method::Post, Inbound::Mute, false).await,
        #[cfg(feature = "fault-injection")]
        ["cut"] => or_relay(req, env, dep, at, Method::Post, Inbound::Cut, false).await,
        #[cfg(feature = "fault-injection")]
        ["forget"] => admin(req, env, dep, at, Method::Post, Inbound::Forget).await,
        #[cfg(feature = "fault-injection")]
        ["nap", ms] => {
            let ms = ms.parse().map_err(|_| HttpRefusal::BadParam("ms"))?;
            admin(req, env, dep, at, Method::Post, Inbound::Nap { ms }).await
        }
        #[cfg(feature = "fault-injection")]
        ["stall", ms] => {
            let ms = ms.parse().map_err(|_| HttpRefusal::BadParam("ms"))?;
            admin(req, env, dep, at, Method::Post, Inbound::Stall { ms }).await
        }
        [] => admin(req, env, dep, at, Method::Delete, Inbound::Delete).await,
        ["state"] => admin(req, env, dep, at, Method::Get, Inbound::State).await,
        ["state", key] => {
            let key = percent_decoded(key).ok_or(HttpRefusal::BadParam("key"))?;
            if req.method() == Method::Put {
                let body = admin_body(req, dep, Method::Put).await?;
                let region = region::locate(req, env).region;
                let what = Inbound::PutKey { key, region };
                ask(req, env, at, what, Method::Put, Some(body.into_bytes())).await
            } else {
                admin(req, env, dep, at, Method::Get, Inbound::Key(key)).await
            }
        }
        ["log"] => {
            expect_method(req, Method::Get)?;
            expect_admin(req, dep)?;
            let url = req.url().map_err(|_| HttpRefusal::BadParam("url"))?;
            let (mut since, mut limit) = (0, 100);
            for (k, v) in url.query_pairs() {
                match k.as_ref() {
                    "since" => since = v.parse().map_err(|_| HttpRefusal::BadParam("since"))?,
                    "limit" => limit = v.parse().map_err(|_| HttpRefusal::BadParam("limit"))?,
                    _ => {}
                }
            }
            let what = Inbound::Log { since, limit: limit.clamp(1, MAX_LOG) };
            ask(req, env, at, what, Method::Get, None).await
        }
        _ if canary => Err(HttpRefusal::ReservedRoom),
        rest => custom(req, env, dep, at, rest.join("/")).await,
    }
}

/// `GET /{kind}/{room}/ws`: check everything PROTOCOL.md refuses before the
/// upgrade, then hand the request to the room.
pub async fn connect(
    req: &Request,
    env: &Env,
    dep: &Deployment,
    at: Target<'_>,
    caller: Caller,
) -> Outcome {
    expect_method(req, Method::Get)?;
    expect_room(at.room)?;
    let q = connect_query(req)?;
    let session = q.session.filter(|s| names::valid_session(s)).ok_or(HttpRefusal::BadSession)?;
    let upgrade = req.headers().get("upgrade").ok().flatten().unwrap_or_default();
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return Err(HttpRefusal::UpgradeRequired);
    }
    let claims = match authorize(req, dep, q.token.as_deref(), at, caller) {
        Ok(claims) => claims,
        // A browser cannot read a refused upgrade's status: the socket opens
        // and closes at once, its close reason the refusal's code.
        Err(HttpRefusal::Auth(e)) => return refused_socket(at, e),
        Err(refusal) => return Err(refusal),
    };
    let (user, expires, info) = match claims {
        Some(c) => (c.sub, Some(c.exp.saturating_mul(1000)), c.info.map(|i| i.get().to_owned())),
        None => (session.clone(), None, None), // anonymous dev mode: the user is the session
    };
    let place = region::locate(req, env);
    if dep.log_connections {
        log(
            "connect",
            serde_json::json!({"room": at.room, "kind": at.kind.path, "region": place.region,
                "colo": place.colo, "user": user, "resume": q.since.is_some()}),
        );
    }
    let fwd = Forwarded {
        session,
        user,
        region: place.region,
        since: q.since,
        epoch: q.epoch,
        expires,
        info,
        canary: caller == Caller::Canary,
        relay_above: None,
    };
    // The canary checks the room's own path, never a relay's.
    match at.kind.companion.filter(|_| caller == Caller::Client) {
        Some(binding) => relayed_connect(req, env, dep, at, binding, fwd).await,
        None => ask(req, env, at, Inbound::Connect(fwd), Method::Get, None).await,
    }
}

/// A connect of a kind with relays: through a relay if the room is relayed (always, with
/// `RELAY_ABOVE=0`), else to the home, which may answer that it is relayed now.
async fn relayed_connect(
    req: &Request,
    env: &Env,
    dep: &Deployment,
    at: Target<'_>,
    binding: &str,
    mut fwd: Forwarded,
) -> Outcome {
    let shards = dep.relay_shards;
    if dep.relay_above == 0 || relays::remembered(at) {
        return relays::connect(req, env, at, binding, shards, fwd).await;
    }
    fwd.relay_above = Some(dep.relay_above);
    let answer = ask(req, env, at, Inbound::Connect(fwd.clone()), Method::Get, None).await?;
    if relays::told_to_relay(&answer) {
        fwd.relay_above = None;
        relays::remember(at);
        return relays::connect(req, env, at, binding, shards, fwd).await;
    }
    Ok(answer)
}

/// An upgrade whose token was refused: accepted, then closed at once with
/// 4401 and the refusal's stable code as the reason, which a browser can
/// read (it cannot read an HTTP status). Plain HTTP routes keep 401/403.
pub(super) fn refused_socket(at: Target<'_>, e: auth::AuthError) -> Outcome {
    let path = format!("/{}/{}/ws", at.kind.path, at.room);
    closed_socket(&path, 4401, e.code()).map_err(|_| HttpRefusal::Auth(e))
}

/// A WebSocket accepted and closed at once with `code` and `reason`: how a
/// refusal reaches a browser, which cannot read an upgrade's HTTP status.
pub fn closed_socket(path: &str, code: u16, reason: &str) -> worker::Result<Response> {
    log("refused", serde_json::json!({"path": path, "status": 101, "close": code, "code": reason}));
    let pair = worker::WebSocketPair::new()?;
    pair.server.accept()?;
    pair.server.close(Some(code), Some(reason))?;
    Response::from_websocket(pair.client)
}

/// `GET /{kind}/{room}/presence`: authorized like a connect (`token` query
/// parameter or `Authorization: Bearer <token>`); the room refuses a user
/// it blocked and charges the list to the reader's reply budget.
async fn presence(req: &Request, env: &Env, dep: &Deployment, at: Target<'_>) -> Outcome {
    expect_method(req, Method::Get)?;
    let token = token_of(req)?;
    let claims = authorize(req, dep, token.as_deref(), at, Caller::Client)?;
    let info = claims.as_ref().and_then(|c| c.info.as_ref()).map(|i| i.get().to_owned());
    let reader = claims.map(|c| c.sub);
    let region = region::locate(req, env).region;
    ask(req, env, at, Inbound::Presence { reader, info, region }, Method::Get, None).await
}

/// A path the room's rules may answer: any method, the body as sent. The
/// rules learn whether the caller gave the admin key or a valid room token
/// (and whose); they decide what either may do. A caller with neither never
/// reaches the room, unless the kind declares the route public
/// ([`Kind::public`]): an outsider must not be able to make the runtime
/// create objects.
pub(super) async fn custom(
    req: &mut Request,
    env: &Env,
    dep: &Deployment,
    at: Target<'_>,
    path: String,
) -> Outcome {
    let admin = admin_of(req, dep)?;
    let method = req.method();
    // A token refused anywhere else (bad, expired, too long-lived, another
    // room's or kind's) names nobody here either.
    let token = token_of(req)?;
    let claims = match (&dep.auth, token.as_deref()) {
        (AuthMode::Tokens(verifier), Some(token)) if !admin => {
            checked_token(verifier, Some(token), at).ok()
        }
        _ => None, // the operator is nobody's member
    };
    let info = claims.as_ref().and_then(|c| c.info.as_ref()).map(|i| i.get().to_owned());
    let user = claims.map(|c| c.sub);
    if !admin && user.is_none() && !at.kind.is_public(method.as_ref(), &path) {
        // Say why as a connect would (no token, a bad one, no auth at all).
        authorize(req, dep, token.as_deref(), at, Caller::Client)?;
    }
    let url = req.url().map_err(|_| HttpRefusal::BadParam("url"))?;
    let query = url.query().unwrap_or_default().to_owned();
    if query.len() > MAX_QUERY {
        return Err(HttpRefusal::BadParam("query too long"));
    }
    let body = match method {
        Method::Get | Method::Head => None,
        _ => Some(body_of(req).await?.into_bytes()),
    };
    let region = region::locate(req, env).region;
    let custom = Custom { method: method.to_string(), path, query, admin, user, info, region };
    let what = Inbound::Custom(custom);
    ask(req, env, at, what, method, body).await
}

/// An admin route without a body.
async fn admin(
    req: &Request,
    env: &Env,
    dep: &Deployment,
    at: Target<'_>,
    method: Method,
    what: Inbound,
) -> Outcome {
    expect_method(req, method.clone())?;
    expect_admin(req, dep)?;
    ask(req, env, at, what, method, None).await
}

/// An admin route's body (checked method, key and size).
async fn admin_body(
    req: &mut Request,
    dep: &Deployment,
    method: Method,
) -> Result<String, HttpRefusal> {
    expect_method(req, method)?;
    expect_admin(req, dep)?;
    body_of(req).await
}

pub(super) async fn body_of(req: &mut Request) -> Result<String, HttpRefusal> {
    super::body::capped_text(req, MAX_BODY).await
}

/// The claims of a valid token, or `None` in anonymous dev mode.
pub(super) fn authorize(
    req: &Request,
    dep: &Deployment,
    token: Option<&str>,
    at: Target<'_>,
    caller: Caller,
) -> Result<Option<auth::Claims>, HttpRefusal> {
    match &dep.auth {
        AuthMode::Tokens(verifier) => {
            checked_token(verifier, token, at).map(Some).map_err(HttpRefusal::Auth)
        }
        AuthMode::Anonymous { remote } => {
            if *remote || caller == Caller::Canary || local(req) {
                Ok(None)
            } else {
                Err(HttpRefusal::AnonymousNotLocal)
            }
        }
        AuthMode::Unconfigured => Err(HttpRefusal::AuthNotConfigured),
        AuthMode::WeakSecret => Err(HttpRefusal::WeakSecret),
    }
}

/// A token's claims for the room `at`, as the deployment checks them: a
/// live secret's signature, not expired, not living longer than it allows,
/// its audience, and the room and kind it names.
fn checked_token(
    verifier: &auth::Verifier,
    token: Option<&str>,
    at: Target<'_>,
) -> Result<auth::Claims, auth::AuthError> {
    let now = crate::clock::now_ms() / 1000;
    verifier.verify(token, auth::Place { kind: at.kind.path, room: at.room }, now)
}

/// Whether the request was made to the Worker on a loopback address:
/// `wrangler dev` on this machine. A deployed Worker is reached by its
/// routes' host names, never by these.
fn local(req: &Request) -> bool {
    let Ok(url) = req.url() else { return false };
    match url.host() {
        Some(worker::url::Host::Domain(d)) => d == "localhost" || d.ends_with(".localhost"),
        Some(worker::url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(worker::url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

fn connect_query(req: &Request) -> Result<ConnectQuery, HttpRefusal> {
    let url = req.url().map_err(|_| HttpRefusal::BadParam("url"))?;
    if url.query().map_or(0, str::len) > MAX_QUERY {
        return Err(HttpRefusal::BadParam("query too long"));
    }
    let mut q = ConnectQuery::default();
    for (k, v) in url.query_pairs() {
        match k.as_ref() {
            "session" => q.session = Some(v.into_owned()),
            "since" => q.since = Some(v.parse().map_err(|_| HttpRefusal::BadParam("since"))?),
            "epoch" if names::valid_epoch(&v) => q.epoch = Some(v.into_owned()),
            "epoch" => return Err(HttpRefusal::BadParam("epoch")),
            "token" => q.token = Some(v.into_owned()),
            _ => {}
        }
    }
    Ok(q)
}

/// The token of a request: the `token` query parameter, else
/// `Authorization: Bearer <token>`.
pub(super) fn token_of(req: &Request) -> Result<Option<String>, HttpRefusal> {
    let url = req.url().map_err(|_| HttpRefusal::BadParam("url"))?;
    let query = url.query_pairs().find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    Ok(query.or_else(|| bearer(req)))
}

pub(super) fn expect_method(req: &Request, method: Method) -> Result<(), HttpRefusal> {
    if req.method() == method {
        Ok(())
    } else {
        Err(HttpRefusal::MethodNotAllowed)
    }
}

pub(super) fn expect_room(room: &str) -> Result<(), HttpRefusal> {
    if names::valid_room(room) {
        Ok(())
    } else {
        Err(HttpRefusal::BadRoom)
    }
}

pub(super) fn expect_admin(req: &Request, dep: &Deployment) -> Result<(), HttpRefusal> {
    if dep.admin_key.is_none() {
        return Err(HttpRefusal::AdminDisabled);
    }
    if dep.admin_key_weak {
        return Err(HttpRefusal::WeakAdminKey);
    }
    if admin_of(req, dep)? {
        Ok(())
    } else {
        Err(HttpRefusal::BadAdminKey)
    }
}

/// Whether the request carries the admin key, for routes open to others
/// too (the rules' routes). A weak `ADMIN_KEY` is no key: a request that
/// gives it is refused (503 `admin_key_weak`) on every route alike, never
/// taken as the operator.
fn admin_of(req: &Request, dep: &Deployment) -> Result<bool, HttpRefusal> {
    let Some(key) = &dep.admin_key else {
        return Ok(false);
    };
    let given = req.headers().get("authorization").ok().flatten();
    let matches = auth::admin_key_matches(key, given.as_deref());
    if matches && dep.admin_key_weak {
        return Err(HttpRefusal::WeakAdminKey);
    }
    Ok(matches)
}

fn bearer(req: &Request) -> Option<String> {
    let header = req.headers().get("authorization").ok().flatten()?;
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_owned())
}

/// A path segment, percent-decoded as UTF-8 (a state key may hold anything).
fn percent_decoded(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The room's stub, created near `hint` if this request creates the room.
fn stub(env: &Env, at: Target<'_>, hint: Option<&str>) -> worker::Result<Stub> {
    let namespace = env.durable_object(at.kind.binding)?;
    match hint {
        Some(hint) => namespace.get_by_name_with_location_hint(at.room, hint),
        None => namespace.get_by_name(at.room),
    }
}

/// Asks the room object to do `what`. Any request may be the one that
/// creates the room, so each carries the placement hint for the caller.
pub(super) async fn ask(
    req: &Request,
    env: &Env,
    at: Target<'_>,
    what: Inbound,
    method: Method,
    body: Option<Vec<u8>>,
) -> Outcome {
    let place = region::locate(req, env);
    let hint = home::hint_for(env, at.room, place.continent.as_deref());
    let client = upgrades(&what).then_some(req);
    let routed = Routed { room: at.room.to_owned(), home: hint.clone(), what, via: None };
    let asked = async {
        let inner = forward::request(&routed, client, method, body)?;
        stub(env, at, hint.as_deref())?.fetch_with_request(inner).await
    };
    asked.await.map_err(|e| unavailable(at.room, e))
}

/// Whether the object is asked to accept the request's WebSocket upgrade.
fn upgrades(what: &Inbound) -> bool {
    match what {
        Inbound::Connect(_) => true,
        #[cfg(feature = "documents")]
        Inbound::Doc(crate::forward::DocAsk::Connect { .. }) => true,
        _ => false,
    }
}

fn unavailable(room: &str, e: worker::Error) -> HttpRefusal {
    log("route_error", serde_json::json!({"room": room, "error": e.to_string()}));
    HttpRefusal::Unavailable
}
