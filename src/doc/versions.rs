//! Named versions of a document: what a backend keeps (the whole document encoded once, stored
//! by the adapter) and how one is restored: as a **forward** transaction that makes the named
//! shared types read as they did, stored and sent like any edit. Editors connected with the
//! newer state therefore keep the restore (a restore that replaced the document with the old
//! encoding would be merged away by the first editor that syncs).

use yrs::types::ToJson;
use yrs::updates::decoder::Decode;
use yrs::{Any, Array, Doc, GetString, Map, ReadTxn, Text, Transact, Update, WriteTxn};

use super::{DocError, DocRoom};

/// Most versions one document keeps (each at most `DOC_MAX_BYTES`).
pub const MAX_VERSIONS: usize = 20;

impl DocRoom {
    /// Makes the shared types `roots` (`(name, type)`, type `text`, `map` or `array`) read as they
    /// do in `version` (a whole document encoded as one update), in one transaction of the room's
    /// own: stored, then sent to every socket. Text loses its formatting; nested shared types come
    /// back as plain values. `Err` names an unknown type or a version that does not decode, and
    /// then nothing changed.
    pub fn restore_version(
        &mut self,
        version: &[u8],
        roots: &[(String, String)],
    ) -> Result<(), DocError> {
        let old = Doc::new();
        let update = Update::decode_v1(version).map_err(|_| DocError::BadUpdate)?;
        old.transact_mut().apply_update(update).map_err(|_| DocError::BadUpdate)?;
        if let Some((_, ty)) =
            roots.iter().find(|(_, ty)| !["text", "map", "array"].contains(&ty.as_str()))
        {
            return Err(DocError::Rules(format!("cannot_restore_{ty}")));
        }
        let was: Vec<(String, Was)> = {
            let txn = old.transact();
            roots.iter().map(|(name, ty)| (name.clone(), Was::read(&txn, name, ty))).collect()
        };
        self.server_edit(|txn| {
            for (name, was) in &was {
                was.write(txn, name);
            }
        })
    }
}

/// A shared type's content in the version.
enum Was {
    Text(String),
    Map(Vec<(String, Any)>),
    Array(Vec<Any>),
}

impl Was {
    fn read<T: ReadTxn>(txn: &T, name: &str, ty: &str) -> Was {
        match ty {
            "text" => Was::Text(txn.get_text(name).map(|t| t.get_string(txn)).unwrap_or_default()),
            "map" => Was::Map(match txn.get_map(name).map(|m| m.to_json(txn)) {
                Some(Any::Map(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                _ => Vec::new(),
            }),
            _ => Was::Array(match txn.get_array(name).map(|a| a.to_json(txn)) {
                Some(Any::Array(a)) => a.to_vec(),
                _ => Vec::new(),
            }),
        }
    }

    fn write(&self, txn: &mut yrs::TransactionMut<'_>, name: &str) {
        match self {
            Was::Text(s) => {
                let text = txn.get_or_insert_text(name);
                if text.get_string(txn) != *s {
                    let len = text.len(txn);
                    text.remove_range(txn, 0, len);
                    text.insert(txn, 0, s);
                }
            }
            Was::Map(entries) => {
                let map = txn.get_or_insert_map(name);
                let keys: Vec<String> = map.keys(txn).map(str::to_owned).collect();
                for key in keys.iter().filter(|k| !entries.iter().any(|(e, _)| e == *k)) {
                    map.remove(txn, key);
                }
                for (key, value) in entries {
                    map.insert(txn, key.as_str(), value.clone());
                }
            }
            Was::Array(values) => {
                let array = txn.get_or_insert_array(name);
                let len = array.len(txn);
                array.remove_range(txn, 0, len);
                array.insert_range(txn, 0, values.clone());
            }
        }
    }
}
