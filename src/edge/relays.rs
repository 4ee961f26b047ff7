//! A connect of a kind with relays: sent to the home, or to the relay of the client's region
//! and session when the room is relayed. The edge keeps no state but a short memory per
//! isolate of the rooms whose home said "use a relay" ([`crate::forward::USE_RELAY`]), so
//! that a relayed room's connects do not each ask the home first; when the memory ends the
//! next connect asks again, which is how a room that shrank goes back to direct.

use std::cell::RefCell;
use std::collections::HashMap;

use worker::{Env, Method, Request, Response};

use super::refusal::HttpRefusal;
use super::rooms::Target;
use super::{home, region};
use crate::clock::now_ms;
use crate::forward::{self, Forwarded, Inbound, Routed, Via, USE_RELAY};

/// How long an isolate remembers that a room is relayed (ms).
const REMEMBER_MS: u64 = 30_000;
/// Most rooms an isolate remembers; past it, it forgets them all (and asks again).
const MAX_REMEMBERED: usize = 10_000;

thread_local! {
    static RELAYED: RefCell<HashMap<String, u64>> = RefCell::new(HashMap::new());
}

fn key(at: Target<'_>) -> String {
    format!("{}/{}", at.kind.path, at.room)
}

/// Whether this isolate knows `at` to be relayed.
pub fn remembered(at: Target<'_>) -> bool {
    let now = now_ms();
    RELAYED.with(|r| r.borrow().get(&key(at)).is_some_and(|until| *until > now))
}

/// The home said `at` is relayed: this isolate sends its connects to relays for a while.
pub fn remember(at: Target<'_>) {
    RELAYED.with(|r| {
        let mut r = r.borrow_mut();
        if r.len() >= MAX_REMEMBERED {
            r.clear();
        }
        r.insert(key(at), now_ms() + REMEMBER_MS);
    });
}

/// Whether the home answered a direct connect with "use a relay".
pub fn told_to_relay(response: &Response) -> bool {
    response.status_code() == 307 && response.headers().has(USE_RELAY).unwrap_or(false)
}

/// Hands the client's upgrade to the relay of its region and session (`RELAY_SHARDS` per
/// region), placed near the client; the relay dials the room's home.
pub async fn connect(
    req: &Request,
    env: &Env,
    at: Target<'_>,
    binding: &str,
    shards: u64,
    fwd: Forwarded,
) -> Result<Response, HttpRefusal> {
    let place = region::locate(req, env);
    let relay = crate::relay::relay_for(&fwd.region, &fwd.session, shards);
    let home = home::hint_for(env, at.room, place.continent.as_deref());
    let near = place.continent.as_deref().and_then(home::from_continent);
    let via = Via { relay: relay.clone(), home_binding: at.kind.binding.to_owned() };
    let routed =
        Routed { room: at.room.to_owned(), home, what: Inbound::Connect(fwd), via: Some(via) };
    ask(env, at, binding, &relay, near, &routed, Some(req)).await
}

/// An admin request for one relay of a room (`?relay=EU-0`): its `/stats`, or (test builds)
/// its forced Wasm reset.
pub async fn admin(
    env: &Env,
    at: Target<'_>,
    binding: &str,
    relay: &str,
    what: Inbound,
) -> Result<Response, HttpRefusal> {
    if !crate::relay::valid_relay(relay) {
        return Err(HttpRefusal::BadParam("relay"));
    }
    let via = Via { relay: relay.to_owned(), home_binding: at.kind.binding.to_owned() };
    let routed = Routed { room: at.room.to_owned(), home: None, what, via: Some(via) };
    ask(env, at, binding, relay, None, &routed, None).await
}

/// The relay object's name in its namespace: one per room and relay.
fn object_name(relay: &str, room: &str) -> String {
    format!("{relay}|{room}")
}

async fn ask(
    env: &Env,
    at: Target<'_>,
    binding: &str,
    relay: &str,
    near: Option<&str>,
    routed: &Routed,
    client: Option<&Request>,
) -> Result<Response, HttpRefusal> {
    let asked = async {
        let inner = forward::request(routed, client, Method::Get, None)?;
        let namespace = env.durable_object(binding)?;
        let name = object_name(relay, at.room);
        let stub = match near {
            Some(hint) => namespace.get_by_name_with_location_hint(&name, hint)?,
            None => namespace.get_by_name(&name)?,
        };
        stub.fetch_with_request(inner).await
    };
    asked.await.map_err(|e| {
        super::log(
            "route_error",
            serde_json::json!({"room": at.room, "relay": relay, "error": e.to_string()}),
        );
        HttpRefusal::Unavailable
    })
}
