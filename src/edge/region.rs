//! Where a client connected from, as a region name (PROTOCOL.md "Regions").

use worker::Request;

/// Region of a request: its continent code (`AF AN AS EU NA OC SA`), or `XX`
/// when the runtime gives no location.
pub fn of(req: &Request) -> String {
    req.cf()
        .and_then(|cf| cf.continent())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "XX".into())
}
