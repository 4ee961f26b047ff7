//! The routes of a document kind (PROTOCOL-DOCUMENTS.md): its socket at `/{kind}/{room}`,
//! where the stock `y-websocket` provider dials (`{server}/{room}?{params}`), and the
//! operator's backend routes under it, and any other path, which the kind's rules may answer
//! (as for rooms). Checked here, then handed to the room's object.

use worker::{Env, Method, Request};

use super::refusal::HttpRefusal;
use super::rooms::{self, Caller, Target};
use super::{config::Deployment, log, region};
use crate::forward::{DocAsk, Inbound};

/// Largest body `POST /{kind}/{room}/update` takes: the largest `DOC_MAX_BYTES` and a frame's
/// slack (the room checks its own bound).
const MAX_UPDATE_BODY: usize = 64 * 1024 * 1024 + 64 * 1024;

type Outcome = std::result::Result<worker::Response, HttpRefusal>;

/// Dispatches `/{kind}/{room}/{rest}` of a document kind.
pub async fn route(
    req: &mut Request,
    env: &Env,
    dep: &Deployment,
    at: Target<'_>,
    rest: &[&str],
) -> Outcome {
    rooms::expect_room(at.room)?;
    match rest {
        [] if super::serve::is_upgrade(req) => connect(req, env, dep, at).await,
        ["update"] if req.method() == Method::Post => {
            rooms::expect_admin(req, dep)?;
            let body = super::body::capped(req, MAX_UPDATE_BODY).await?;
            let what = Inbound::Doc(DocAsk::Apply);
            rooms::ask(req, env, at, what, Method::Post, Some(body)).await
        }
        ["update"] => admin(req, env, dep, at, DocAsk::Read).await,
        ["json"] => {
            let roots = roots_of(req)?;
            admin(req, env, dep, at, DocAsk::Json { roots }).await
        }
        ["stats"] => admin(req, env, dep, at, DocAsk::Stats).await,
        ["versions"] if req.method() == Method::Post => {
            let name = query(req, "name")?.ok_or(HttpRefusal::BadParam("name"))?;
            let name = version_name(name)?;
            admin_as(req, env, dep, at, Method::Post, DocAsk::SaveVersion { name }).await
        }
        ["versions"] => admin(req, env, dep, at, DocAsk::Versions).await,
        ["versions", name] if req.method() == Method::Delete => {
            let name = version_name((*name).to_owned())?;
            admin_as(req, env, dep, at, Method::Delete, DocAsk::DropVersion { name }).await
        }
        ["versions", name] => {
            let name = version_name((*name).to_owned())?;
            admin(req, env, dep, at, DocAsk::Version { name }).await
        }
        ["versions", name, "restore"] => {
            let (name, roots) = (version_name((*name).to_owned())?, roots_of(req)?);
            let what = DocAsk::RestoreVersion { name, roots };
            admin_as(req, env, dep, at, Method::Post, what).await
        }
        // Anything else is the kind's rules' to answer (`DocRules::request`).
        rest => rooms::custom(req, env, dep, at, rest.join("/")).await,
    }
}

/// A GET route for the operator's backend.
async fn admin(
    req: &Request,
    env: &Env,
    dep: &Deployment,
    at: Target<'_>,
    what: DocAsk,
) -> Outcome {
    admin_as(req, env, dep, at, Method::Get, what).await
}

/// A route for the operator's backend, by `method`.
async fn admin_as(
    req: &Request,
    env: &Env,
    dep: &Deployment,
    at: Target<'_>,
    method: Method,
    what: DocAsk,
) -> Outcome {
    rooms::expect_method(req, method.clone())?;
    rooms::expect_admin(req, dep)?;
    rooms::ask(req, env, at, Inbound::Doc(what), method, None).await
}

/// A query parameter's value.
fn query(req: &Request, name: &str) -> Result<Option<String>, HttpRefusal> {
    let url = req.url().map_err(|_| HttpRefusal::BadParam("url"))?;
    Ok(url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned()))
}

/// A version's name: a room name's characters (1-64 of `A-Za-z0-9._:-`).
fn version_name(name: String) -> Result<String, HttpRefusal> {
    if crate::protocol::names::valid_room(&name) {
        Ok(name)
    } else {
        Err(HttpRefusal::BadParam("name"))
    }
}

/// `?types=name:type,...` (a name alone is a text), 1 to 64 of them.
fn roots_of(req: &Request) -> Result<Vec<(String, String)>, HttpRefusal> {
    let mut roots = Vec::new();
    for pair in query(req, "types")?.unwrap_or_default().split(',').filter(|p| !p.is_empty()) {
        let (name, ty) = pair.split_once(':').unwrap_or((pair, "text"));
        roots.push((name.to_owned(), ty.to_owned()));
    }
    if roots.is_empty() || roots.len() > 64 {
        return Err(HttpRefusal::BadParam("types"));
    }
    Ok(roots)
}

/// A document socket: the token from the `token` query parameter (the provider's `params`),
/// refused as a closed socket a browser can read (4401 and the code).
async fn connect(req: &Request, env: &Env, dep: &Deployment, at: Target<'_>) -> Outcome {
    rooms::expect_method(req, Method::Get)?;
    let token = rooms::token_of(req)?;
    let url = req.url().map_err(|_| HttpRefusal::BadParam("url"))?;
    let extensions = url.query_pairs().any(|(k, v)| k == "homeroom" && v == "1");
    let claims = match rooms::authorize(req, dep, token.as_deref(), at, Caller::Client) {
        Ok(claims) => claims,
        Err(HttpRefusal::Auth(e)) => return rooms::refused_socket(at, e),
        Err(refusal) => return Err(refusal),
    };
    // A token whose `info` says `"read_only": true` opens the document read-only.
    let read_only = claims
        .as_ref()
        .and_then(|c| c.info.as_ref())
        .and_then(|info| serde_json::from_str::<serde_json::Value>(info.get()).ok())
        .is_some_and(|info| info.get("read_only") == Some(&serde_json::Value::Bool(true)));
    let expires = claims.as_ref().map(|c| c.exp.saturating_mul(1000));
    let user = claims.map(|c| c.sub);
    if dep.log_connections {
        let place = region::locate(req, env);
        log(
            "connect",
            serde_json::json!({"room": at.room, "kind": at.kind.path, "region": place.region,
                "colo": place.colo, "user": user, "read_only": read_only}),
        );
    }
    let what = Inbound::Doc(DocAsk::Connect { user, read_only, extensions, expires });
    rooms::ask(req, env, at, what, Method::Get, None).await
}
