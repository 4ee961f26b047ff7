//! Structured logs: one JSON object per line with an `event` field, so a
//! deployment's logs can be filtered and counted (`wrangler tail`, Logpush).

/// Writes `{"event": event, ...fields}` to the console.
pub fn log(event: &str, mut fields: serde_json::Value) {
    if let Some(map) = fields.as_object_mut() {
        map.insert("event".into(), event.into());
    }
    worker::console_log!("{fields}");
}
