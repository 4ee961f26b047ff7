//! A TCP proxy that holds every byte for a fixed time each way, in order: the WAN of
//! `bench/run`'s distance rows (a direct client an ocean from its room's home) on one
//! machine. The relays' side of the same ocean is the runtime's `LINK_DELAY_MS`.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

/// Listens on a free local port and forwards each connection to `upstream`, every chunk
/// `one_way` late in each direction. Returns the port; the proxy lives as long as the process.
pub async fn start(upstream: u16, one_way: Duration) -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((down, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(up) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    return;
                };
                let _ = (down.set_nodelay(true), up.set_nodelay(true));
                let (down_read, down_write) = down.into_split();
                let (up_read, up_write) = up.into_split();
                tokio::join!(
                    pump(down_read, up_write, one_way),
                    pump(up_read, down_write, one_way)
                );
            });
        }
    });
    Ok(port)
}

/// Copies `from` to `to`, each chunk written `delay` after it was read (a queue, so a slow
/// write never holds up the reading and the order stays).
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 || tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((at, bytes)) = rx.recv().await {
            sleep_until(at).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_arrive_late_and_in_order() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = echo.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        });
        let port = start(upstream, Duration::from_millis(40)).await.unwrap();
        let mut c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let t = std::time::Instant::now();
        for part in [&b"one "[..], b"two ", b"three"] {
            c.write_all(part).await.unwrap();
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while got.len() < 13 {
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "the proxy closed early: {got:?}");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"one two three");
        // Both ways: at least 80 ms for the round trip.
        assert!(t.elapsed() >= Duration::from_millis(80), "{:?}", t.elapsed());
    }
}
