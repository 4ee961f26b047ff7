//! A request's body, read no further than its route's bound.
//!
//! Why not `Request::text`: it reads the whole body, whatever its size, into the Worker's
//! memory and then again into the Wasm's, which never shrinks. A member posting to any rules
//! route (or anyone, to a route its kind declares public) could send 100 MB and leave the
//! isolate's memory, shared by every room it holds, a hundred megabytes larger for good; past
//! the runtime's limit the isolate is reset. A stated `Content-Length` over the bound is refused before anything is read, and a
//! body without one is read chunk by chunk until it passes the bound.

use futures::StreamExt;
use worker::Request;

use super::refusal::HttpRefusal;

/// The body of `req`, at most `max` bytes: 413 `too_large` past it.
pub async fn capped(req: &mut Request, max: usize) -> Result<Vec<u8>, HttpRefusal> {
    let stated = req.headers().get("Content-Length").ok().flatten();
    if stated.and_then(|len| len.trim().parse::<u64>().ok()).is_some_and(|len| len > max as u64) {
        return Err(HttpRefusal::TooLarge);
    }
    if req.inner().body().is_none() {
        return Ok(Vec::new());
    }
    let mut chunks = req.stream().map_err(|_| HttpRefusal::BadParam("body"))?;
    let mut body = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|_| HttpRefusal::BadParam("body"))?;
        if body.len() + chunk.len() > max {
            return Err(HttpRefusal::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// [`capped`] as text (an invalid UTF-8 sequence read as U+FFFD, as `Request::text` does).
pub async fn capped_text(req: &mut Request, max: usize) -> Result<String, HttpRefusal> {
    let bytes = capped(req, max).await?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}
