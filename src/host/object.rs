//! What a Durable Object class made by [`crate::worker!`] hands its events to: an [`Object`].
//! A kind's rooms are a [`Host`](super::Host); a kind may declare a second kind of object
//! beside them (a [`Companion`], e.g. the relays that hold a region's sockets of a big room),
//! whose class `worker!` writes the same way.

use worker::worker_sys::web_sys;
use worker::{Env, Request, Response, Result, State, WebSocket, WebSocketIncomingMessage};

/// The events of a Durable Object, as the runtime delivers them (with the hibernation API).
/// Only `fetch` must be answered; the others do nothing unless implemented.
// A Durable Object runs on one thread: its futures never cross one, so the
// `Send` bounds `async fn` in a public trait cannot name are not needed.
#[allow(async_fn_in_trait)]
pub trait Object {
    /// A request routed to the object (by the Worker, or by another object).
    async fn fetch(&self, req: Request) -> Result<Response>;

    /// [`fetch`](Object::fetch) as the class calls it: homeroom's own objects answer a
    /// connect without workers-rs's `Request` and `Response` (`host::upgrade`).
    #[doc(hidden)]
    async fn fetch_raw(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        Ok(self.fetch(req.into()).await?.into())
    }

    /// A frame arrived on one of the object's accepted WebSockets.
    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let _ = (ws, message);
        Ok(())
    }

    /// One of the object's WebSockets closed.
    async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        reason: String,
        clean: bool,
    ) -> Result<()> {
        let _ = (ws, code, reason, clean);
        Ok(())
    }

    /// One of the object's WebSockets failed.
    async fn websocket_error(&self, ws: WebSocket, error: worker::Error) -> Result<()> {
        let _ = (ws, error);
        Ok(())
    }

    /// The object's storage alarm fired.
    async fn alarm(&self) -> Result<Response> {
        Response::ok("")
    }
}

/// A kind's second kind of object: declared in [`crate::worker!`] with
/// `, companion Class(Type), binding "BINDING"`, made from the object's state and the
/// deployment's environment alone (the kind's rules run in its rooms, not here). The edge knows
/// its binding ([`crate::edge::Kind::companion`]).
pub trait Companion: Object {
    /// The object, on its first event after a start, an eviction or a reset.
    fn new(state: State, env: Env) -> Self;
}

impl Object for super::Host {
    async fn fetch(&self, req: Request) -> Result<Response> {
        super::Host::fetch(self, req).await
    }

    async fn fetch_raw(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        super::Host::fetch_raw(self, req).await
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        super::Host::websocket_message(self, ws, message).await
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        reason: String,
        clean: bool,
    ) -> Result<()> {
        super::Host::websocket_close(self, ws, code, reason, clean).await
    }

    async fn websocket_error(&self, ws: WebSocket, error: worker::Error) -> Result<()> {
        super::Host::websocket_error(self, ws, error).await
    }

    async fn alarm(&self) -> Result<Response> {
        super::Host::alarm(self).await
    }
}
