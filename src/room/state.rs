//! The room's key-value state: each key's value and the `seq` that wrote it.

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::value::RawValue;

use super::{Error, RoomConfig};
use crate::protocol::server::{StateMap, StateValue};

#[derive(Debug, Default)]
pub struct RoomState {
    entries: BTreeMap<String, (Box<RawValue>, u64)>,
    /// Keys plus JSON values, to bound memory and the resync snapshot.
    bytes: usize,
    /// The snapshot as JSON, made once per change: `get_state` and resyncs
    /// at the same `seq` share it instead of serializing up to 1 MiB each.
    json: Option<Rc<str>>,
}

impl RoomState {
    /// The key's version, 0 when absent.
    pub fn version(&self, key: &str) -> u64 {
        self.entries.get(key).map_or(0, |(_, v)| *v)
    }

    /// Refuses a write that would take the state past its limits.
    pub fn check_fits(
        &self,
        config: &RoomConfig,
        key: &str,
        value: &RawValue,
    ) -> Result<(), Error> {
        self.check_fits_all(config, [(key, value)]).map_err(Error::TooLarge)
    }

    /// Whether these writes, in order, keep the state within its bounds together (each key's
    /// last value counts): each alone may fit while all of them pass the bound.
    pub fn check_fits_all<'a>(
        &self,
        config: &RoomConfig,
        writes: impl IntoIterator<Item = (&'a str, &'a RawValue)>,
    ) -> Result<(), String> {
        let mut written: std::collections::BTreeMap<&str, usize> = Default::default();
        let (mut keys, mut bytes) = (self.entries.len(), self.bytes);
        for (key, value) in writes {
            let size = key.len() + value.get().len();
            let old = written
                .get(key)
                .copied()
                .or_else(|| self.entries.get(key).map(|(v, _)| key.len() + v.get().len()));
            match old {
                Some(old) => bytes = bytes - old + size,
                None => (keys, bytes) = (keys + 1, bytes + size),
            }
            written.insert(key, size);
            if keys > config.state_max_keys {
                return Err(format!("room state holds at most {} keys", config.state_max_keys));
            }
            if bytes > config.state_max_bytes {
                return Err(format!("room state holds at most {} bytes", config.state_max_bytes));
            }
        }
        Ok(())
    }

    pub fn set(&mut self, key: String, value: Box<RawValue>, version: u64) {
        let added = key.len() + value.get().len();
        if let Some((old, _)) = self.entries.get(&key) {
            self.bytes -= key.len() + old.get().len();
        }
        self.bytes += added;
        self.entries.insert(key, (value, version));
        self.json = None;
    }

    /// The value and version of `key`.
    pub fn get(&self, key: &str) -> Option<(&RawValue, u64)> {
        self.entries.get(key).map(|(v, n)| (&**v, *n))
    }

    /// The snapshot as JSON text (`{key: {"value","version"}}`), cached
    /// until the next write.
    pub fn json(&mut self) -> Rc<str> {
        if let Some(json) = &self.json {
            return json.clone();
        }
        let json: Rc<str> = serde_json::to_string(&self.snapshot()).unwrap_or_default().into();
        self.json = Some(json.clone());
        json
    }

    /// The snapshot sent in `state` and `resync` frames.
    pub fn snapshot(&self) -> StateMap<'_> {
        self.entries
            .iter()
            .map(|(k, (value, version))| (k.as_str(), StateValue { value, version: *version }))
            .collect()
    }
}
