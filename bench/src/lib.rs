//! homeroom-bench: a load generator for homeroom and two baseline rooms on
//! the same local workerd (`wrangler dev`), and the benchmark suite that
//! writes `bench/RESULTS.md`.
//!
//! | module | owns |
//! |---|---|
//! | [`target`] | the three rooms under test and how to reach them |
//! | [`wire`] | frames out (publish, signal, raw payload) and in (flattened batches) |
//! | [`order`] | one receiver's ordering checks: seq strictly +1, each publish once |
//! | [`backoff`] | the client's reconnect rules (full jitter) and a small PRNG |
//! | [`client`] | one simulated client: connect, receive, publish, drop, resume |
//! | [`scenario`] | one run: N clients, rates, phases, storm; collects a [`report::Report`] |
//! | [`report`] | the numbers of a run, as JSON and as a human summary |
//! | [`stats`] | percentiles and time buckets |
//! | [`spread`] | per publish, the first and the last receiver's latency |
//! | [`docs`] | the documents rounds: homeroom's document kind against y-partyserver |
//! | [`doc_engine`] | the document engine's rows, natively: many clients, a merged run |
//! | [`distance`] | a TCP proxy that holds every byte a fixed time each way (the WAN rows) |
//! | [`runtime`] | starting and stopping a `wrangler dev` per target |
//! | [`machine`] | CPU time of processes, machine facts, Wasm and attachment size |
//! | [`suite`] | the whole benchmark: rounds, medians, ratios, RESULTS.md |
//! | [`args`] | the command line's `--flag value` pairs |

pub mod args;
pub mod backoff;
pub mod client;
pub mod distance;
pub mod doc_engine;
pub mod docs;
pub mod machine;
pub mod order;
pub mod report;
pub mod runtime;
pub mod scenario;
pub mod split;
pub mod spread;
pub mod stats;
pub mod suite;
pub mod target;
pub mod wire;
