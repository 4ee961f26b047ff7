//! Structured logs: one JSON object per line with an `event` field, so a
//! deployment's logs can be filtered and counted (`wrangler tail`, Logpush).

/// Writes `{"event": event, ...fields}` to the console.
#[cfg(target_arch = "wasm32")]
pub fn log(event: &str, mut fields: serde_json::Value) {
    if let Some(map) = fields.as_object_mut() {
        map.insert("event".into(), event.into());
    }
    worker::console_log!("{fields}");
}

/// Whether per-connection lines (`connect`, `close`) are written, from the
/// `LOG_CONNECTIONS` variable: on unless it says `false`, `0`, `off` or `no`.
/// A busy deployment may turn them off: the platform logs every request
/// anyway, and a storm of reconnects is a storm of lines.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))] // used by the adapters
pub fn connections_logged(var: Option<String>) -> bool {
    !var.is_some_and(|v| {
        ["false", "0", "off", "no"].iter().any(|off| v.trim().eq_ignore_ascii_case(off))
    })
}

#[cfg(test)]
mod tests {
    use super::connections_logged;

    #[test]
    fn connection_lines_are_on_unless_turned_off() {
        assert!(connections_logged(None));
        assert!(connections_logged(Some("true".into())));
        assert!(connections_logged(Some("yes please".into())));
        for off in ["false", "FALSE", " 0 ", "off", "No"] {
            assert!(!connections_logged(Some(off.into())), "{off}");
        }
    }
}
