//! What a backend reads of a document: its shared types as JSON, by the names and types it
//! gives (a root that arrives in an update is untyped until someone names its type).

use serde_json::{Map, Value};
use yrs::{Any, GetString, ReadTxn, Transact};

use super::DocRoom;

/// The types a root can be read as.
pub const TYPES: &[&str] = &["text", "map", "array", "xml"];

impl DocRoom {
    /// `{name: value}` for each `(name, type)`; a root the document does not hold is `null`.
    /// An unknown type is `Err` with the type.
    pub fn json(&self, roots: &[(String, String)]) -> Result<Value, String> {
        let txn = self.doc().transact();
        let mut out = Map::new();
        for (name, ty) in roots {
            let value = match ty.as_str() {
                "text" => txn.get_text(name.as_str()).map(|t| Value::String(t.get_string(&txn))),
                "xml" => {
                    txn.get_xml_fragment(name.as_str()).map(|x| Value::String(x.get_string(&txn)))
                }
                "map" => txn
                    .get_map(name.as_str())
                    .map(|m| any_json(&yrs::types::ToJson::to_json(&m, &txn))),
                "array" => txn
                    .get_array(name.as_str())
                    .map(|a| any_json(&yrs::types::ToJson::to_json(&a, &txn))),
                other => return Err(other.to_owned()),
            };
            out.insert(name.clone(), value.unwrap_or(Value::Null));
        }
        Ok(Value::Object(out))
    }
}

fn any_json(any: &Any) -> Value {
    serde_json::to_value(any).unwrap_or(Value::Null)
}
