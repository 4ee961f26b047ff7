//! The contract between the Worker and the room object: what the Worker has
//! checked about a connection, carried in request headers.

use worker::{Headers, Request};

const ROOM: &str = "x-homeroom-room";
const SESSION: &str = "x-homeroom-session";
const USER: &str = "x-homeroom-user";
const REGION: &str = "x-homeroom-region";
const SINCE: &str = "x-homeroom-since";
const EPOCH: &str = "x-homeroom-epoch";

/// A connection the Worker has validated and is handing to the room.
#[derive(Debug, Clone)]
pub struct Forwarded {
    pub room: String,
    pub session: String,
    pub user: String,
    pub region: String,
    pub since: Option<u64>,
    pub epoch: Option<String>,
}

impl Forwarded {
    /// Adds the headers to a request for the room object.
    pub fn write(&self, headers: &Headers) -> worker::Result<()> {
        headers.set(ROOM, &self.room)?;
        headers.set(SESSION, &self.session)?;
        headers.set(USER, &self.user)?;
        headers.set(REGION, &self.region)?;
        if let Some(since) = self.since {
            headers.set(SINCE, &since.to_string())?;
        }
        if let Some(epoch) = &self.epoch {
            headers.set(EPOCH, epoch)?;
        }
        Ok(())
    }
}

/// Reads what the Worker forwarded; `None` for a request that did not come
/// through it (the object is reachable only through the Worker anyway).
pub fn read(req: &Request) -> Option<Forwarded> {
    let h = req.headers();
    let get = |name: &str| h.get(name).ok().flatten();
    Some(Forwarded {
        room: get(ROOM)?,
        session: get(SESSION)?,
        user: get(USER)?,
        region: get(REGION)?,
        since: get(SINCE).and_then(|s| s.parse().ok()),
        epoch: get(EPOCH),
    })
}
