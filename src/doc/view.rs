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

/// `any` as JSON, as `yrs` serializes it (undefined as null; a number that is whole as an
/// integer; a buffer as an array of its bytes), made by hand: through `serde_json::to_value` it was another
/// copy of `Any`'s serializer in the Wasm.
fn any_json(any: &Any) -> Value {
    match any {
        Any::Null | Any::Undefined => Value::Null,
        Any::Bool(b) => Value::Bool(*b),
        Any::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => {
                n.as_f64().and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number)
            }
        },
        Any::String(s) => Value::String(s.to_string()),
        Any::Buffer(b) => Value::Array(b.iter().map(|&x| Value::from(x)).collect()),
        Any::Array(a) => Value::Array(a.iter().map(any_json).collect()),
        Any::Map(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), any_json(v))).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_is_made_json_as_yrs_serializes_it() {
        let map: std::collections::HashMap<String, Any> = [
            ("n".to_owned(), Any::Null),
            ("u".to_owned(), Any::Undefined),
            ("t".to_owned(), Any::Bool(true)),
            ("i".to_owned(), Any::from(42)),
            ("whole".to_owned(), Any::from(7.0)),
            ("f".to_owned(), Any::from(1.5)),
            ("big".to_owned(), Any::from(1e300)),
            ("s".to_owned(), Any::from("x\"y")),
            ("b".to_owned(), Any::Buffer(vec![1u8, 255].into())),
        ]
        .into_iter()
        .collect();
        let any =
            Any::Array(vec![Any::Map(map.into()), Any::Array(vec![Any::from(-3)].into())].into());
        assert_eq!(any_json(&any), serde_json::to_value(&any).unwrap());
    }
}
