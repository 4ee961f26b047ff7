//! How an object's event handler answers the runtime: at once when it finishes without
//! waiting (most connects, most frames), as a promise only when it has to wait.
//!
//! workers-rs's `#[durable_object]` turns every handler into a promise: a `Promise`, a closure
//! and a task on the microtask queue per event before any of the handler runs. On a storm's
//! connects and a room's frames that was a measurable share of an object's CPU (bench/README.md,
//! "The event glue"), for handlers that almost never wait. [`settle`] polls the handler once
//! where the runtime called it; only a handler still waiting becomes a promise.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::future_to_promise;

/// Runs `handler` until it finishes or first waits: its result if it finished (an error is
/// thrown to the runtime, as a rejected promise would be), else a promise of it.
///
/// A future may keep the waker of its first poll (workers-rs's `Delay` does), so that poll gets
/// a waker that forwards to the task the promise runs the rest in, not a waker that drops the
/// wake.
#[doc(hidden)]
pub fn settle<F>(handler: F) -> Result<JsValue, JsValue>
where
    F: Future<Output = worker::Result<JsValue>> + 'static,
{
    let forward = Arc::new(Forward::default());
    let mut handler = Box::pin(handler);
    let waker = Waker::from(Arc::clone(&forward));
    match handler.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(done) => done.map_err(JsValue::from),
        Poll::Pending => {
            let rest = Rest { forward, handler };
            Ok(future_to_promise(async move { rest.await.map_err(JsValue::from) }).into())
        }
    }
}

/// The waker of a handler's first poll: wakes the task of the handler's promise once there is
/// one (until then, nothing waits for the wake: that task polls the handler when it starts).
#[derive(Default)]
struct Forward(Mutex<Option<Waker>>);

impl Wake for Forward {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(task) = self.0.lock().ok().and_then(|slot| slot.clone()) {
            task.wake();
        }
    }
}

/// A handler that waited, polled by its promise's task, which it names to the first waker.
struct Rest<F> {
    forward: Arc<Forward>,
    handler: Pin<Box<F>>,
}

impl<F: Future> Future for Rest<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if let Ok(mut slot) = self.forward.0.lock() {
            if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *slot = Some(cx.waker().clone());
            }
        }
        self.handler.as_mut().poll(cx)
    }
}
