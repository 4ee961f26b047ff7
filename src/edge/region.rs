//! Where a client connected from, as a region name (PROTOCOL.md "Regions"):
//! the request's `cf` colo, country and continent through the deployment's
//! `REGIONS` table ([`super::regions`]).

use std::cell::RefCell;

use serde::Serialize;
use worker::{js_sys, wasm_bindgen::JsValue, Env, Request};

use super::regions::RegionTable;

thread_local! {
    /// The parsed table and the raw text it came from (vars do not change
    /// within an isolate, but a cheap check keeps this honest).
    static TABLE: RefCell<Option<(String, RegionTable)>> = const { RefCell::new(None) };
}

/// Where a request came from, as the Worker sees it (`GET /region`).
#[derive(Serialize)]
pub struct Whereabouts {
    pub colo: Option<String>,
    pub country: Option<String>,
    pub continent: Option<String>,
    pub region: String,
}

/// The location of `req` and its region under the deployment's table.
pub fn locate(req: &Request, env: &Env) -> Whereabouts {
    let cf = js_sys::Reflect::get(req.inner(), &JsValue::from_str("cf")).ok();
    let cf = cf.filter(|cf| !cf.is_undefined() && !cf.is_null());
    let field = |name: &str| cf.as_ref().and_then(|cf| cf_field(cf, name));
    let (colo, country, continent) = (field("colo"), field("country"), field("continent"));
    let raw = crate::settings::read(env, crate::settings::REGIONS.name).unwrap_or_default();
    let region = TABLE.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.as_ref().is_none_or(|(text, _)| *text != raw) {
            let (table, problem) = RegionTable::from_var(Some(&raw));
            if let Some(problem) = problem {
                super::log("config_error", serde_json::json!({ "problem": problem }));
            }
            *slot = Some((raw, table));
        }
        let (_, table) = slot.as_ref().expect("set above");
        table.region(colo.as_deref(), country.as_deref(), continent.as_deref())
    });
    Whereabouts { colo, country, continent, region }
}

/// One string of the request's `cf` object, read without the typed getters
/// (workers-rs's `Cf::colo` panics when the field is absent).
fn cf_field(cf: &JsValue, name: &str) -> Option<String> {
    js_sys::Reflect::get(cf, &JsValue::from_str(name)).ok()?.as_string()
}
