//! Test builds only (`fault-injection`): rules that panic when asked to, so
//! the fault suite can show what a panicking rule costs (a Wasm reset) and
//! what it does not (an acked write, a member).

use serde_json::value::RawValue;

use crate::room::rules::{Ctx, Current, Join, Request, Response, Rules, Who, Write};
use crate::room::LogEntry;

/// The topic whose publish makes the rules panic.
pub const PANIC_TOPIC: &str = "fault.panic";

/// Any kind's rules, plus a panic on a publish to [`PANIC_TOPIC`].
pub struct Panicky(pub Box<dyn Rules>);

impl Rules for Panicky {
    fn join(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
        self.0.join(room, who)
    }

    fn leave(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) {
        self.0.leave(room, who)
    }

    fn publish(
        &mut self,
        room: &mut Ctx<'_>,
        who: &Who<'_>,
        topic: &str,
        data: &RawValue,
    ) -> Write {
        if topic == PANIC_TOPIC {
            crate::logline::log(
                "fault_injected",
                serde_json::json!({"room": room.room(), "by": "rule"}),
            );
            panic!("fault injection: a rule panicked in room {}", room.room());
        }
        self.0.publish(room, who, topic, data)
    }

    fn set(
        &mut self,
        room: &mut Ctx<'_>,
        who: &Who<'_>,
        key: &str,
        value: &RawValue,
        current: Option<Current<'_>>,
    ) -> Write {
        self.0.set(room, who, key, value, current)
    }

    fn timer(&mut self, room: &mut Ctx<'_>, name: &str) {
        self.0.timer(room, name)
    }

    fn request(&mut self, room: &mut Ctx<'_>, req: &Request) -> Option<Response> {
        self.0.request(room, req)
    }

    fn loaded(&mut self, room: &mut Ctx<'_>, recent: &[LogEntry]) {
        self.0.loaded(room, recent)
    }
}
