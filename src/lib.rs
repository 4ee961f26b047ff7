//! homeroom: ordered, durable, resumable rooms on Cloudflare Durable Objects,
//! running your own rules where the writes are ordered.
//!
//! The layers (see README.md, "Architecture"):
//! - [`protocol`]: the wire frames of PROTOCOL.md, parsed and validated;
//! - [`room`]: the room engine, a pure state machine (builds and tests
//!   natively), and [`room::rules`], the trait a team implements to run its
//!   own logic in the room;
//! - [`auth`]: tokens and the admin key, pure functions the Worker uses;
//! - [`settings`]: every deployment variable, declared once, read the same
//!   way by both adapters;
//! - [`edge`]: the Worker, whose pure parts (the region table, the CORS
//!   origins, [`edge::Kind`]) build natively, and `host` (wasm32 only): the
//!   Durable Object; a crate puts them together with [`worker!`].
//!
//! A Worker of your own, with the open rooms at `/rooms/...` and a kind of
//! your own at `/auction/...` (see `examples/` and the README, "Writing a
//! room"):
//!
//! ```ignore
//! homeroom::worker! {
//!     "rooms" => Room(homeroom::room::rules::Open), binding "ROOMS";
//!     "auction" => AuctionRoom(my_auction::Auction::default()), binding "AUCTIONS";
//! }
//! ```

pub mod auth;
#[cfg(feature = "documents")]
pub mod doc;
pub mod edge;
pub mod protocol;
pub mod relay;
pub mod room;
pub mod settings;

#[cfg(target_arch = "wasm32")]
mod clock;
#[cfg(target_arch = "wasm32")]
mod forward;
#[cfg(target_arch = "wasm32")]
pub mod host;
mod logline;

/// What [`worker!`] expands to needs these from the crate that invokes it.
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub use worker as __worker;

/// Declares a Worker: one Durable Object class per kind of room, each
/// running its own rules, and the Worker's `fetch` and `scheduled` handlers.
///
/// Each line is `"path" => Class(rules), binding "BINDING";`: rooms of the
/// kind are reached at `/{path}/{room}/...`, live in the Durable Object class
/// `Class` (declare it in `wrangler.toml` under the binding `BINDING`, with
/// a `new_sqlite_classes` migration), and run fresh rules each time a room
/// is loaded: `rules` is an expression implementing
/// [`room::rules::Make`], i.e. a `Clone` value implementing
/// [`room::rules::Rules`], or [`room::rules::with_vars`] of a function
/// that makes them from the deployment's variables. The first kind is the
/// one the `/health` canary uses.
///
/// After the binding a line may declare the kind's second kind of object,
/// `, companion Class2(Type), binding "BINDING2"`: a Durable Object class
/// `Class2` (its own binding and migration) holding a `Type` that
/// implements `host::Companion` (wasm32); the edge knows its binding as
/// [`edge::Kind::companion`]. This is the seam the relays of a big room use.
///
/// After the rooms' lines, a `documents { "notes" => Notes(rules), binding "NOTES"; }` block
/// declares document kinds (crate feature `documents`): each room holds a Yjs document that
/// every Yjs editor opens at `/{path}/{room}` (PROTOCOL-DOCUMENTS.md), in the Durable Object
/// class `Notes` (its binding and a `new_sqlite_classes` migration, as for rooms), under the
/// kind's `rules` ([`doc::rules::MakeDocRules`]; `Notes` alone: [`doc::rules::Open`]).
///
/// A line may end with `, public ["GET lot", ...]`: routes of the kind's
/// rules (`GET /{path}/{room}/lot`) that callers with neither a room token
/// nor the admin key may reach. Every other route turns such a caller away
/// at the edge, before any object is reached; a public route answers
/// anyone, so it must show nothing private and change nothing.
///
/// The invoking crate must depend on `worker` (`=0.8.7`, the version
/// homeroom builds with) for `wasm32` and be a `cdylib` built with
/// `worker-build`. Off `wasm32` (the crate's native `cargo test`) the macro
/// declares nothing but checks that each kind's rules make rules, so the
/// same `lib.rs` builds and tests natively.
#[macro_export]
macro_rules! worker {
    ($($path:literal => $class:ident($rules:expr), binding $binding:literal
        $(, companion $cclass:ident($cty:ty), binding $cbinding:literal)?
        $(, public [$($public:literal),* $(,)?])?;)+
        $(documents { $($dpath:literal => $dclass:ident $(($drules:expr))?,
            binding $dbinding:literal;)+ })?) => {
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            fn makes_rules<M: $crate::room::rules::Make>(_: &M) {}
            #[allow(dead_code)]
            fn check() {
                $(makes_rules(&$rules);)+
                $($(let _ = $crate::worker!(@doc_rules $($drules)?);)+)?
            }
        };
        #[cfg(target_arch = "wasm32")]
        $crate::worker!(@wasm $($path => $class($rules), binding $binding
            $(, companion $cclass($cty), binding $cbinding)?
            $(, public [$($public),*])?;)+
            documents { $($($dpath => $dclass($crate::worker!(@doc_rules $($drules)?)),
                binding $dbinding;)+)? });
    };
    // A document kind's rules: as given (checked to make rules), else none.
    (@doc_rules) => { $crate::doc::rules::Open };
    (@doc_rules $rules:expr) => {{
        fn makes_doc_rules<M: $crate::doc::rules::MakeDocRules>(m: M) -> M { m }
        makes_doc_rules($rules)
    }};
    (@wasm $($path:literal => $class:ident($rules:expr), binding $binding:literal
        $(, companion $cclass:ident($cty:ty), binding $cbinding:literal)?
        $(, public [$($public:literal),* $(,)?])?;)+
        documents { $($dpath:literal => $dclass:ident($drules:expr), binding $dbinding:literal;)* }) => {
        // The classes live in a module of their own, where the names the
        // `wasm_bindgen` attribute expects are in scope.
        #[doc(hidden)]
        mod __homeroom_classes {
            #[allow(unused_imports)]
            use super::*;
            use ::worker::wasm_bindgen;
            $(
                $crate::worker!(@class $class, $crate::host::Host,
                    |state, env| {
                        fn rules(
                            vars: &$crate::room::rules::Vars<'_>,
                        ) -> ::std::boxed::Box<dyn $crate::room::rules::Rules> {
                            use $crate::room::rules::Make as _;
                            $crate::host::hosted(($rules).make(vars))
                        }
                        $crate::host::Host::new(state, env, rules)
                    });
                $($crate::worker!(@class $cclass, $cty,
                    |state, env| <$cty as $crate::host::Companion>::new(state, env));)?
            )+
            $(
                $crate::worker!(@class $dclass, $crate::host::DocHost,
                    |state, env| {
                        fn rules(
                            vars: &$crate::doc::rules::Vars<'_>,
                        ) -> ::std::boxed::Box<dyn $crate::doc::rules::DocRules> {
                            use $crate::doc::rules::MakeDocRules as _;
                            ($drules).make(vars)
                        }
                        $crate::host::DocHost::new(state, env, rules)
                    });
            )*
        }
        $(
            pub use __homeroom_classes::$class;
            $(pub use __homeroom_classes::$cclass;)?
        )+
        $(pub use __homeroom_classes::$dclass;)*

        static __HOMEROOM_KINDS: &[$crate::edge::Kind] = &[
            $($crate::edge::Kind {
                path: $path,
                binding: $binding,
                companion: $crate::worker!(@some $($cbinding)?),
                public: &[$($($public),*)?],
                document: false,
            },)+
            $($crate::edge::Kind {
                path: $dpath,
                binding: $dbinding,
                companion: ::std::option::Option::None,
                public: &[],
                document: true,
            },)*
        ];

        #[::worker::event(fetch)]
        async fn __homeroom_fetch(
            req: ::worker::Request,
            env: ::worker::Env,
            _ctx: ::worker::Context,
        ) -> ::worker::Result<::worker::Response> {
            $crate::edge::fetch(req, env, __HOMEROOM_KINDS).await
        }

        #[::worker::event(scheduled)]
        async fn __homeroom_scheduled(
            _event: ::worker::ScheduledEvent,
            env: ::worker::Env,
            _ctx: ::worker::ScheduleContext,
        ) {
            $crate::edge::scheduled(env, __HOMEROOM_KINDS).await
        }
    };
    (@some) => { ::std::option::Option::None };
    (@some $binding:literal) => { ::std::option::Option::Some($binding) };
    // One Durable Object class holding an `Object` made by `$make`, every
    // event handed to it: the rooms' classes and the companions' alike. The
    // class is written here rather than by `#[durable_object]` so that a
    // handler that does not wait answers at once (`host::settle`).
    (@class $class:ident, $ty:ty, |$state:ident, $env:ident| $make:expr) => {
        #[::worker::wasm_bindgen::prelude::wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen)]
        pub struct $class {
            object: ::std::rc::Rc<$ty>,
        }

        #[::worker::wasm_bindgen::prelude::wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen)]
        impl $class {
            #[wasm_bindgen(constructor)]
            pub fn new(
                state: ::worker::worker_sys::DurableObjectState,
                env: ::worker::Env,
            ) -> $class {
                let $state = ::worker::State::from(state);
                let $env = env;
                $class { object: ::std::rc::Rc::new($make) }
            }

            pub fn fetch(
                &self,
                req: ::worker::worker_sys::web_sys::Request,
            ) -> ::std::result::Result<::worker::wasm_bindgen::JsValue, ::worker::wasm_bindgen::JsValue> {
                let object = ::std::rc::Rc::clone(&self.object);
                $crate::host::settle(async move {
                    let answer = $crate::host::Object::fetch_raw(&*object, req).await?;
                    ::std::result::Result::Ok(answer.into())
                })
            }

            #[wasm_bindgen(js_name = webSocketMessage)]
            pub fn websocket_message(
                &self,
                ws: ::worker::worker_sys::web_sys::WebSocket,
                message: ::worker::wasm_bindgen::JsValue,
            ) -> ::std::result::Result<::worker::wasm_bindgen::JsValue, ::worker::wasm_bindgen::JsValue> {
                let message = match message.as_string() {
                    ::std::option::Option::Some(text) => {
                        ::worker::WebSocketIncomingMessage::String(text)
                    }
                    ::std::option::Option::None => ::worker::WebSocketIncomingMessage::Binary(
                        ::worker::js_sys::Uint8Array::new(&message).to_vec(),
                    ),
                };
                let object = ::std::rc::Rc::clone(&self.object);
                $crate::host::settle(async move {
                    $crate::host::Object::websocket_message(&*object, ws.into(), message).await?;
                    ::std::result::Result::Ok(::worker::wasm_bindgen::JsValue::UNDEFINED)
                })
            }

            #[wasm_bindgen(js_name = webSocketClose)]
            pub fn websocket_close(
                &self,
                ws: ::worker::worker_sys::web_sys::WebSocket,
                code: usize,
                reason: ::std::string::String,
                clean: bool,
            ) -> ::std::result::Result<::worker::wasm_bindgen::JsValue, ::worker::wasm_bindgen::JsValue> {
                let object = ::std::rc::Rc::clone(&self.object);
                $crate::host::settle(async move {
                    $crate::host::Object::websocket_close(&*object, ws.into(), code, reason, clean)
                        .await?;
                    ::std::result::Result::Ok(::worker::wasm_bindgen::JsValue::UNDEFINED)
                })
            }

            #[wasm_bindgen(js_name = webSocketError)]
            pub fn websocket_error(
                &self,
                ws: ::worker::worker_sys::web_sys::WebSocket,
                error: ::worker::wasm_bindgen::JsValue,
            ) -> ::std::result::Result<::worker::wasm_bindgen::JsValue, ::worker::wasm_bindgen::JsValue> {
                let object = ::std::rc::Rc::clone(&self.object);
                $crate::host::settle(async move {
                    $crate::host::Object::websocket_error(&*object, ws.into(), error.into())
                        .await?;
                    ::std::result::Result::Ok(::worker::wasm_bindgen::JsValue::UNDEFINED)
                })
            }

            pub fn alarm(
                &self,
            ) -> ::std::result::Result<::worker::wasm_bindgen::JsValue, ::worker::wasm_bindgen::JsValue> {
                let object = ::std::rc::Rc::clone(&self.object);
                $crate::host::settle(async move {
                    let answer = $crate::host::Object::alarm(&*object).await?;
                    ::std::result::Result::Ok(
                        ::worker::worker_sys::web_sys::Response::from(answer).into(),
                    )
                })
            }
        }
    };
}
