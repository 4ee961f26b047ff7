//! The raw HTTP client's one retry ([`http::DEV_PROXY_LOST`]) against a scripted local server:
//! the answer `wrangler dev`'s proxy gives a request it lost is sent again, and no other answer
//! (another 503 included) ever is.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::check;
use crate::edge_support as es;
use crate::harness::{alone, Spec};
use crate::http;
use crate::support::R;

pub fn trials() -> Vec<Spec> {
    vec![alone("http_retry::only_what_the_dev_proxy_lost_is_sent_again", only_the_lost)]
}

/// An HTTP/1.1 answer with a text body.
fn answer(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The dev proxy's answer to a request it lost (its text, as wrangler 4.86 writes it).
fn lost() -> String {
    let text = "Your worker restarted mid-request. Please try sending the request again. \
                Only GET or HEAD requests are retried automatically.";
    answer("503 Service Unavailable", text)
}

/// A server on a free port that answers its connections with `script` in turn (the last one
/// again once the script ends); returns the port and the request lines it read.
async fn scripted(script: Vec<String>) -> R<(u16, Arc<Mutex<Vec<String>>>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        for i in 0.. {
            let Ok((mut s, _)) = listener.accept().await else { return };
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap_or(0);
            let line = String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or("").to_owned();
            log.lock().unwrap().push(line);
            let reply = script.get(i).or(script.last()).cloned().unwrap_or_default();
            let _ = s.write_all(reply.as_bytes()).await;
        }
    });
    Ok((port, seen))
}

async fn only_the_lost() -> R {
    let preflight = |port| http::call(port, "OPTIONS", "/rooms/r/presence", &[], "", es::T);

    // Lost once: sent again, and the second answer is the one returned.
    let (port, seen) = scripted(vec![lost(), answer("204 No Content", "")]).await?;
    let resp = preflight(port).await?;
    let n = seen.lock().unwrap().len();
    check!(resp.status == 204 && n == 2, "lost once: {} after {n} requests", resp.status);

    // Another 503 (an overloaded object, say) is an answer: returned at once.
    let (port, seen) = scripted(vec![answer("503 Service Unavailable", "busy")]).await?;
    let resp = preflight(port).await?;
    let n = seen.lock().unwrap().len();
    check!(resp.status == 503 && resp.body == "busy" && n == 1, "another 503: sent {n} times");

    // Lost every time: three tries, then the proxy's answer, for the test to report.
    let (port, seen) = scripted(vec![lost()]).await?;
    let resp = preflight(port).await?;
    let n = seen.lock().unwrap().len();
    check!(
        resp.status == 503 && resp.body.starts_with(http::DEV_PROXY_LOST) && n == 3,
        "lost every time: {} after {n} requests",
        resp.status
    );
    Ok(())
}
