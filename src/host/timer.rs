//! The adapters' short in-memory timer (the home's flush, a relay's end of turn): coalescing
//! windows are tens of milliseconds, too short and too frequent for the storage alarm. One at
//! a time: an earlier request replaces a later pending one by simply firing first.

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use worker::wasm_bindgen_futures;

use crate::room::Time;

/// An object with one pending in-memory timer.
pub(super) trait Timed: 'static {
    /// When its pending timer fires, if one is pending.
    fn wake_at(&self) -> &Cell<Option<Time>>;
}

/// Calls `fire` at `at`, unless a timer at or before `at` is already pending.
pub(super) fn schedule<T: Timed, F: Future<Output = ()> + 'static>(
    this: &Rc<T>,
    at: Time,
    fire: impl FnOnce(Rc<T>) -> F + 'static,
) {
    if this.wake_at().get().is_some_and(|pending| pending <= at) {
        return;
    }
    this.wake_at().set(Some(at));
    let this = Rc::clone(this);
    let delay = at.since(super::now());
    wasm_bindgen_futures::spawn_local(async move {
        worker::Delay::from(Duration::from_millis(delay)).await;
        if this.wake_at().get() == Some(at) {
            this.wake_at().set(None);
        }
        fire(this).await;
    });
}
