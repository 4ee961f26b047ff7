//! `GET /probe` and `GET /region`: what a client measures to pick its
//! nearest deployment, and what the Worker sees of a request's location.

use worker::{Env, Request, Response, WebSocketPair};

use super::refusal::HttpRefusal;
use super::region;

/// Accepts the upgrade and closes at once with 1000: the time to `open`
/// is TCP + TLS + upgrade and nothing else.
pub fn probe(req: &Request) -> Result<Response, HttpRefusal> {
    let upgrade = req.headers().get("upgrade").ok().flatten().unwrap_or_default();
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return Err(HttpRefusal::UpgradeRequired);
    }
    let open = || -> worker::Result<Response> {
        let pair = WebSocketPair::new()?;
        pair.server.accept()?;
        pair.server.close(Some(1000), Some("probe"))?;
        Response::from_websocket(pair.client)
    };
    open().map_err(|_| HttpRefusal::Unavailable)
}

/// `{"colo","country","continent","region"}` as the Worker sees the request.
pub fn whereabouts(req: &Request, env: &Env) -> Result<Response, HttpRefusal> {
    Response::from_json(&region::locate(req, env)).map_err(|_| HttpRefusal::Unavailable)
}
