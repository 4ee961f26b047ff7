//! A minimal raw HTTP/1.1 client (tokio TCP): readiness polling and refusal checks (status + JSON body) with exact control over the request path and upgrade headers.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.body).ok()
    }
}

/// A plain GET (no upgrade), `Connection: close`.
pub async fn get(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<Response, String> {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    request(port, req, timeout).await
}

/// A WebSocket upgrade GET; returns the HTTP answer (101 on success, without reading further).
pub async fn get_upgrade(port: u16, path: &str, timeout: Duration) -> Result<Response, String> {
    get_upgrade_with(port, path, &[], timeout).await
}

/// [`get_upgrade`] with extra headers (e.g. `MF-CF-Blob`, `Authorization`).
pub async fn get_upgrade_with(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<Response, String> {
    let mut req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    request(port, req, timeout).await
}

/// A POST with a body (sent as `application/json`), `Connection: close`.
pub async fn post(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> Result<Response, String> {
    call(port, "POST", path, headers, body, timeout).await
}

/// Any method with a body (sent as `application/json`), `Connection: close`.
pub async fn call(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> Result<Response, String> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    request(port, req, timeout).await
}

/// What `wrangler dev`'s own proxy answers (503, `Retry-After: 0`) when its pooled connection to
/// the runtime behind it dies under a request that is not a GET or HEAD (those it sends again
/// itself). Our Worker never says it. It is not a restart: kj closes an idle keep-alive connection
/// after 5 s on both sides, and a request written as the runtime closes it is lost before the
/// Worker reads it (cloudflare/workers-sdk#14641, open; seen in CI, 2026-12-06, on a CORS
/// preflight). A browser talking to Cloudflare never meets this proxy.
pub const DEV_PROXY_LOST: &str = "Your worker restarted mid-request.";

/// How many times [`request`] sends a request again that [`DEV_PROXY_LOST`] answered.
const DEV_PROXY_TRIES: usize = 3;

/// Sends `req` (a whole HTTP/1.1 request, head and body, as written) to `port` and reads the
/// answer: a 101 without a body, else the body by length, by chunks or up to the end of the stream.
/// A request `wrangler dev`'s proxy lost on its way to the runtime ([`DEV_PROXY_LOST`]) is sent
/// again, as the proxy itself does for a GET; any other answer, 503s included, is returned as is.
pub async fn request(port: u16, req: String, timeout: Duration) -> Result<Response, String> {
    tokio::time::timeout(timeout, async move {
        let mut tries = 0;
        loop {
            let resp = send_once(port, &req).await?;
            tries += 1;
            let lost = resp.status == 503 && resp.body.starts_with(DEV_PROXY_LOST);
            if !lost || tries == DEV_PROXY_TRIES {
                return Ok(resp);
            }
            let line = req.lines().next().unwrap_or("");
            eprintln!("http: wrangler dev's proxy lost `{line}` (try {tries}); sending it again");
        }
    })
    .await
    .map_err(|_| format!("HTTP request to port {port} timed out after {timeout:?}"))?
}

async fn send_once(port: u16, req: &str) -> Result<Response, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect 127.0.0.1:{port}: {e}"))?;
    s.write_all(req.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
    read_response(&mut s).await
}

async fn read_response(s: &mut TcpStream) -> Result<Response, String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err(format!(
                "connection closed before the response head ({} bytes read)",
                buf.len()
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut rest = buf[head_end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut resp = Response { status, headers, body: String::new() };
    if status == 101 || status == 204 || status == 304 {
        return Ok(resp);
    }
    if let Some(len) = resp.header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        while rest.len() < len {
            let n = s.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                break;
            }
            rest.extend_from_slice(&chunk[..n]);
        }
        rest.truncate(len);
    } else if resp
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        rest = read_chunked(s, rest).await?;
    } else {
        // Read to EOF.
        loop {
            let n = s.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                break;
            }
            rest.extend_from_slice(&chunk[..n]);
        }
    }
    resp.body = String::from_utf8_lossy(&rest).to_string();
    Ok(resp)
}

async fn read_chunked(s: &mut TcpStream, mut raw: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut pos = 0;
    loop {
        // Need a full size line.
        let line_end = loop {
            if let Some(i) = find(&raw[pos..], b"\r\n") {
                break pos + i;
            }
            let n = s.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Ok(out);
            }
            raw.extend_from_slice(&chunk[..n]);
        };
        let size_str = String::from_utf8_lossy(&raw[pos..line_end]).to_string();
        let size = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size_str:?}"))?;
        pos = line_end + 2;
        if size == 0 {
            return Ok(out);
        }
        while raw.len() < pos + size + 2 {
            let n = s.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                out.extend_from_slice(&raw[pos..raw.len().min(pos + size)]);
                return Ok(out);
            }
            raw.extend_from_slice(&chunk[..n]);
        }
        out.extend_from_slice(&raw[pos..pos + size]);
        pos += size + 2;
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
