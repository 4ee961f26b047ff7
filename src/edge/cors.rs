//! Cross-origin access to the HTTP room routes: the `CORS_ORIGINS`
//! allow-list, preflight answers and the headers on every answer to an
//! allowed origin.
//!
//! WebSockets are not subject to CORS, and need nothing here: a socket is
//! authorized by its token, never by something the browser adds on its own
//! (a cookie), so another site's page gains nothing by opening one. The HTTP
//! routes (`/presence`, `/messages`, the rules' own routes) answer a page on
//! another origin only when the operator lists that origin: an app served
//! from `https://app.example.com` that reads presence from
//! `https://rooms.example.com` sets `CORS_ORIGINS = "https://app.example.com"`.
//! Nothing is allowed by default.

use worker::{Cors, Method, Response, Result};

/// How long a browser may keep a preflight's answer, seconds.
const MAX_AGE_SECS: u32 = 600;

/// The request headers a page may send: tokens and the admin key travel as
/// `Authorization`, bodies as JSON.
const ALLOWED_HEADERS: [&str; 2] = ["Authorization", "Content-Type"];

/// The answer to an allowed origin's preflight (`OPTIONS` with
/// `Access-Control-Request-Method`): 204 with what may be sent.
pub fn preflight(origin: &str) -> Result<Response> {
    let cors = Cors::new()
        .with_origins([origin])
        .with_methods([Method::Get, Method::Post, Method::Put, Method::Delete])
        .with_allowed_headers(ALLOWED_HEADERS)
        .with_max_age(MAX_AGE_SECS);
    vary(Response::empty()?.with_status(204).with_cors(&cors)?)
}

/// `resp` readable by a page of `origin`. A WebSocket upgrade (101) is left
/// as it is: its headers are the runtime's.
pub fn allow(resp: Response, origin: &str) -> Result<Response> {
    if resp.status_code() == 101 {
        return Ok(resp);
    }
    // A response from the room object has immutable headers: copy them.
    let headers = resp.headers().clone();
    let cors = Cors::new().with_origins([origin]);
    vary(resp.with_headers(headers).with_cors(&cors)?)
}

/// The answer depends on `Origin`: caches must key on it.
fn vary(mut resp: Response) -> Result<Response> {
    resp.headers_mut().append("Vary", "Origin")?;
    Ok(resp)
}
