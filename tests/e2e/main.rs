//! End-to-end tests (`cargo test --test e2e`): real WebSocket clients against the real runtime (`wrangler dev` on workerd); this file only lists the trials, the harness runs them.
//!
//! Layout: `harness.rs` (runner, shared runtime), `runtime.rs` (the wrangler process),
//! `client.rs` (WebSocket client), `http.rs` (raw HTTP), `support.rs` (names, checks);
//! one file per behaviour under test.

mod client;
mod harness;
mod http;
mod runtime;
mod support;

mod attacks;
mod bad_input;
mod cas;
mod docs;
mod edge_admin;
mod edge_auth;
mod edge_cors;
mod edge_drain;
mod edge_home;
mod edge_logs;
mod edge_probe;
mod edge_support;
mod events;
mod eviction;
mod faults;
mod history;
mod http_retry;
mod idempotency;
mod ordering;
mod presence;
mod presence_eviction;
mod presence_large;
mod presence_ttl;
mod refusals;
mod relay_dial;
mod relay_rest;
mod relays;
mod restart;
mod resume;
mod rules;
mod supersede;
mod wasm_reset;

fn main() {
    // Longest first: they wait on purpose (restarts, idle eviction) while the rest runs.
    let specs = [
        restart::trials(),
        docs::trials(),
        rules::trials(),
        attacks::trials(),
        wasm_reset::trials(),
        faults::trials(),
        history::trials(),
        eviction::trials(),
        events::trials(),
        presence_ttl::trials(),
        edge_drain::trials(),
        presence_eviction::trials(),
        presence::trials(),
        presence_large::trials(),
        ordering::trials(),
        resume::trials(),
        cas::trials(),
        idempotency::trials(),
        supersede::trials(),
        refusals::trials(),
        relays::trials(),
        relay_rest::trials(),
        relay_dial::trials(),
        bad_input::trials(),
        edge_auth::trials(),
        edge_cors::trials(),
        http_retry::trials(),
        edge_admin::trials(),
        edge_probe::trials(),
        edge_home::trials(),
        edge_logs::trials(),
    ]
    .into_iter()
    .flatten()
    .collect();
    harness::main(specs)
}
