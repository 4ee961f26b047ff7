//! A Worker of your own: the kinds of room it serves, each with its rules. This one serves
//! a live poll at `/poll/{room}/...` ([`poll`]). `worker!` declares the Durable Object class
//! and the Worker's handlers for wasm32, and nothing natively (so `cargo test` builds as is).

pub mod poll;

homeroom::worker! {
    "poll" => PollRoom(poll::Poll::default()), binding "POLLS";
}
