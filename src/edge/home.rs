//! Where a new room's Durable Object is placed: a location hint chosen by
//! the operator (`ROOM_HOMES`, `HOME`) or else the region of the request that
//! creates it.

use worker::Env;

use crate::settings;

/// The location hints Durable Objects accept.
pub const HINTS: [&str; 9] = ["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"];

/// The hint for `room`: `ROOM_HOMES` (a JSON object room → hint), else
/// `HOME`, else the hint nearest the caller's continent. Invalid settings
/// are logged and skipped.
pub fn hint_for(env: &Env, room: &str, continent: Option<&str>) -> Option<String> {
    if let Some(raw) = settings::read(env, settings::ROOM_HOMES.name) {
        match serde_json::from_str::<std::collections::BTreeMap<String, String>>(&raw) {
            Ok(map) => {
                if let Some(hint) = map.get(room) {
                    if valid(hint) {
                        return Some(hint.clone());
                    }
                    super::log(
                        "config_error",
                        serde_json::json!({"problem": format!("ROOM_HOMES: unknown hint {hint:?}")}),
                    );
                }
            }
            Err(e) => super::log(
                "config_error",
                serde_json::json!({"problem": format!("ROOM_HOMES is not a JSON object of strings: {e}")}),
            ),
        }
    }
    if let Some(hint) = settings::read(env, settings::HOME.name) {
        if valid(&hint) {
            return Some(hint);
        }
        super::log(
            "config_error",
            serde_json::json!({"problem": format!("HOME: unknown hint {hint:?}")}),
        );
    }
    continent.and_then(from_continent).map(str::to_owned)
}

fn valid(hint: &str) -> bool {
    HINTS.contains(&hint)
}

/// The location hint nearest a continent.
pub fn from_continent(continent: &str) -> Option<&'static str> {
    Some(match continent {
        "NA" => "enam",
        "SA" => "sam",
        "EU" => "weur",
        "AS" => "apac",
        "OC" => "oc",
        "AF" => "afr",
        _ => return None,
    })
}
