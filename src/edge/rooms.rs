//! The room routes: `GET /rooms/{room}/ws` and `/presence` for clients,
//! `POST /messages`, `POST /drain`, `POST /kick`, `GET /stats` and
//! `DELETE /rooms/{room}` for the operator. Each is checked here and then
//! handed to the room's Durable Object.

use worker::{Env, Method, Request, Response, Stub};

use super::config::{AuthMode, Deployment};
use super::refusal::HttpRefusal;
use super::{home, log, region};
use crate::auth;
use crate::forward::{self, Forwarded};
use crate::protocol::names;

/// The Durable Object namespace binding of the rooms (wrangler.toml).
const ROOMS: &str = "ROOMS";
/// Longest accepted query string (a token is at most 2 KiB).
const MAX_QUERY: usize = 4096;
/// Largest server-side publish body.
const MAX_BODY: usize = 64 * 1024;

type Outcome = std::result::Result<Response, HttpRefusal>;

/// Who is asking: a client over HTTP, or the Worker's own health canary
/// (the only one let into the canary room).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Client,
    Canary,
}

/// The query parameters of a connect.
#[derive(Default)]
struct ConnectQuery {
    session: Option<String>,
    since: Option<u64>,
    epoch: Option<String>,
    token: Option<String>,
}

/// `GET /rooms/{room}/ws`: check everything PROTOCOL.md refuses before the
/// upgrade, then hand the request to the room.
pub async fn connect(
    req: &Request,
    env: &Env,
    dep: &Deployment,
    room: &str,
    caller: Caller,
) -> Outcome {
    expect_method(req, Method::Get)?;
    expect_room(room)?;
    if room == dep.canary_room && caller != Caller::Canary {
        return Err(HttpRefusal::ReservedRoom);
    }
    let q = connect_query(req)?;
    let session = q.session.filter(|s| names::valid_session(s)).ok_or(HttpRefusal::BadSession)?;
    let upgrade = req.headers().get("upgrade").ok().flatten().unwrap_or_default();
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return Err(HttpRefusal::UpgradeRequired);
    }
    let (user, expires) = match authorize(req, dep, q.token.as_deref(), room, caller)? {
        Some((sub, exp)) => (sub, Some(exp.saturating_mul(1000))),
        None => (session.clone(), None), // anonymous dev mode: the user is the session
    };
    let place = region::locate(req, env);
    let hint = home::hint_for(env, room, place.continent.as_deref());
    if dep.log_connections {
        log(
            "connect",
            serde_json::json!({"room": room, "region": place.region, "colo": place.colo,
                "user": user, "resume": q.since.is_some()}),
        );
    }
    let fwd =
        Forwarded { session, user, region: place.region, since: q.since, epoch: q.epoch, expires };
    let ask = async {
        let inner = forward::connect_request(req, room, hint.as_deref(), &fwd)?;
        stub(env, room, hint.as_deref())?.fetch_with_request(inner).await
    };
    ask.await.map_err(|e| unavailable(room, e))
}

/// `GET /rooms/{room}/presence`: authorized like a connect (`token` query
/// parameter or `Authorization: Bearer <token>`).
pub async fn presence(req: &Request, env: &Env, dep: &Deployment, room: &str) -> Outcome {
    expect_method(req, Method::Get)?;
    expect_room(room)?;
    if room == dep.canary_room {
        return Err(HttpRefusal::ReservedRoom);
    }
    let url = req.url().map_err(|_| HttpRefusal::BadParam("url"))?;
    let token = url
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .or_else(|| bearer(req));
    authorize(req, dep, token.as_deref(), room, Caller::Client)?;
    ask_room(req, env, room, "presence", None).await
}

/// `POST /rooms/{room}/messages` (admin): a server-side publish of the body
/// `{"id","topic","data"}`, idempotent by `id`; answers `{"seq"}`.
pub async fn publish(req: &mut Request, env: &Env, dep: &Deployment, room: &str) -> Outcome {
    expect_method(req, Method::Post)?;
    expect_admin(req, dep)?;
    expect_room(room)?;
    let body = req.text().await.map_err(|_| HttpRefusal::BadParam("body"))?;
    if body.len() > MAX_BODY {
        return Err(HttpRefusal::TooLarge);
    }
    ask_room(req, env, room, "publish", Some(body)).await
}

/// `POST /rooms/{room}/drain` (admin): closes every socket with 1001.
pub async fn drain(req: &Request, env: &Env, dep: &Deployment, room: &str) -> Outcome {
    expect_method(req, Method::Post)?;
    expect_admin(req, dep)?;
    expect_room(room)?;
    ask_room(req, env, room, "drain", None).await
}

/// `POST /rooms/{room}/kick` (admin): closes every connection of the body's
/// `user` with 4403 and, with `block_secs`, refuses them that long (0 lifts
/// a block). Body `{"user","block_secs"?}`; answers `{"closed","blocked_until"}`.
pub async fn kick(req: &mut Request, env: &Env, dep: &Deployment, room: &str) -> Outcome {
    expect_method(req, Method::Post)?;
    expect_admin(req, dep)?;
    expect_room(room)?;
    let body = req.text().await.map_err(|_| HttpRefusal::BadParam("body"))?;
    if body.len() > 4096 {
        return Err(HttpRefusal::TooLarge);
    }
    ask_room(req, env, room, "kick", Some(body)).await
}

/// `POST /rooms/{room}/fault` (admin, test builds only): the room's object
/// panics, which resets the Wasm instance (the fault suite).
#[cfg(feature = "fault-injection")]
pub async fn fault(req: &Request, env: &Env, dep: &Deployment, room: &str) -> Outcome {
    expect_method(req, Method::Post)?;
    expect_admin(req, dep)?;
    expect_room(room)?;
    ask_room(req, env, room, "fault", None).await
}

/// `DELETE /rooms/{room}` (admin): closes every connection with 4404 and
/// deletes the room's storage; the next connect starts a new room.
pub async fn delete(req: &Request, env: &Env, dep: &Deployment, room: &str) -> Outcome {
    expect_method(req, Method::Delete)?;
    expect_admin(req, dep)?;
    expect_room(room)?;
    ask_room(req, env, room, "delete", None).await
}

/// `GET /rooms/{room}/stats` (admin): connections by region, message and
/// delivery counts, the cross-region ratio.
pub async fn stats(req: &Request, env: &Env, dep: &Deployment, room: &str) -> Outcome {
    expect_method(req, Method::Get)?;
    expect_admin(req, dep)?;
    expect_room(room)?;
    ask_room(req, env, room, "stats", None).await
}

/// The user a token names and its `exp` (`Some((sub, exp))`), or `None`
/// in anonymous dev mode.
fn authorize(
    req: &Request,
    dep: &Deployment,
    token: Option<&str>,
    room: &str,
    caller: Caller,
) -> Result<Option<(String, u64)>, HttpRefusal> {
    match &dep.auth {
        AuthMode::Tokens(secret) => {
            let now = worker::Date::now().as_millis() / 1000;
            let claims =
                auth::verify(secret.as_bytes(), token, room, now).map_err(HttpRefusal::Auth)?;
            if claims.exp > now.saturating_add(dep.token_max_ttl_secs) {
                return Err(HttpRefusal::Auth(auth::AuthError::TooLongLived));
            }
            Ok(Some((claims.sub, claims.exp)))
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

fn expect_method(req: &Request, method: Method) -> Result<(), HttpRefusal> {
    if req.method() == method {
        Ok(())
    } else {
        Err(HttpRefusal::MethodNotAllowed)
    }
}

fn expect_room(room: &str) -> Result<(), HttpRefusal> {
    if names::valid_room(room) {
        Ok(())
    } else {
        Err(HttpRefusal::BadRoom)
    }
}

fn expect_admin(req: &Request, dep: &Deployment) -> Result<(), HttpRefusal> {
    let Some(key) = &dep.admin_key else {
        return Err(HttpRefusal::AdminDisabled);
    };
    if dep.admin_key_weak {
        return Err(HttpRefusal::WeakAdminKey);
    }
    let given = req.headers().get("authorization").ok().flatten();
    if auth::admin_key_matches(key, given.as_deref()) {
        Ok(())
    } else {
        Err(HttpRefusal::BadAdminKey)
    }
}

fn bearer(req: &Request) -> Option<String> {
    let header = req.headers().get("authorization").ok().flatten()?;
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_owned())
}

/// The room's stub, created near `hint` if this request creates the room.
fn stub(env: &Env, room: &str, hint: Option<&str>) -> worker::Result<Stub> {
    let namespace = env.durable_object(ROOMS)?;
    match hint {
        Some(hint) => namespace.get_by_name_with_location_hint(room, hint),
        None => namespace.get_by_name(room),
    }
}

/// Asks the room object to do `what`. Any request may be the one that
/// creates the room, so each carries the placement hint for the caller.
async fn ask_room(
    req: &Request,
    env: &Env,
    room: &str,
    what: &str,
    body: Option<String>,
) -> Outcome {
    let place = region::locate(req, env);
    let hint = home::hint_for(env, room, place.continent.as_deref());
    let ask = async {
        let inner = forward::room_request(room, hint.as_deref(), what, Some(&place.region), body)?;
        stub(env, room, hint.as_deref())?.fetch_with_request(inner).await
    };
    ask.await.map_err(|e| unavailable(room, e))
}

fn unavailable(room: &str, e: worker::Error) -> HttpRefusal {
    log("route_error", serde_json::json!({"room": room, "error": e.to_string()}));
    HttpRefusal::Unavailable
}
