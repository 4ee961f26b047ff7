//! The ids the room makes: [`Cause`] names the rules' writes by what caused them, so the same
//! cause always makes the same ids and a hook that runs again writes nothing twice; the rest
//! are fresh ids (a server write that came without one, a connection, an epoch). Each scheme is
//! written here once: an id the log deduplicates by must never change its spelling, or a write
//! retried across a deploy would be stored twice.

use sha2::{Digest, Sha256};

use super::Time;

/// What made the rules write, naming their writes (`Ctx::publish`, `Ctx::set`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cause<'a> {
    /// A write `id` of `session` (a member's, or the server's as `$server`) that the room
    /// refused: its retry runs the hook again and must find what the rules wrote of the
    /// attempt already stored.
    Write { session: &'a str, id: &'a str },
    /// The write the room stored at `seq`. Not named by the write's id: a write refused
    /// first (what the rules wrote of it stored under its id) and taken when sent again
    /// would find its effects' ids taken, and they were dropped; nor hashed: a member could
    /// search out two ids whose hashes meet, and the second write's effects were dropped.
    /// A stored write is never decided again (its retry is answered from the log), so the
    /// seq, which no two writes share, names its effects.
    Stored { seq: u64 },
    /// The member on connection `conn` joined.
    Join { conn: &'a str },
    /// The member on connection `conn` left.
    Leave { conn: &'a str },
    /// The rules' timer `name`, due at `at`, fired (again, if its removal was lost).
    Timer { name: &'a str, at: Time },
    /// The room was loaded at `at`.
    Loaded { at: Time },
    /// The `n`th HTTP request of this load of the room, at `at`.
    Request { at: Time, n: u64 },
}

impl Cause<'_> {
    /// The cause as text; what the ids are made from. Never change a spelling.
    fn text(&self) -> String {
        match self {
            Cause::Write { session, id } => format!("write:{session}:{id}"),
            Cause::Join { conn } => format!("join:{conn}"),
            Cause::Leave { conn } => format!("leave:{conn}"),
            Cause::Timer { name, at } => format!("timer:{name}:{at}"),
            Cause::Loaded { at } => format!("loaded:{at}"),
            Cause::Request { at, n } => format!("request:{at}:{n}"),
            Cause::Stored { seq } => format!("stored:{seq}"),
        }
    }

    /// The ids of the writes this cause makes, taken before the hook runs (a write's `id`
    /// moves into the log) and made only if it asked for something.
    pub(crate) fn ids(&self) -> RuleIds {
        let prefix = match self {
            Cause::Stored { seq } => Some(format!("s{seq}")),
            _ => None,
        };
        // A refused write's are named from ids its member chose: 64 bits of a hash, two of
        // theirs could be searched out to meet (about 2^32 hashes), and the rules' note of the
        // second attempt dropped (a guess a counter of failed attempts never saw). 128 bits.
        let bytes = if matches!(self, Cause::Write { .. }) { 16 } else { 8 };
        RuleIds { cause: self.text(), prefix, bytes }
    }
}

/// The ids of one cause's writes, in the order the hook asked for them.
pub(crate) struct RuleIds {
    cause: String,
    /// `r` and 16 hex digits of a hash of the cause, so any cause makes a short id (the log
    /// takes ids of at most 64 characters) and the same cause the same one. Hashed on the
    /// first id asked for: most writes cause none. A stored write's is `s` and its seq; a
    /// refused write's, 32 hex digits.
    prefix: Option<String>,
    /// How many bytes of the hash the prefix shows.
    bytes: usize,
}

impl RuleIds {
    /// The id of the cause's `k`th effect (counting every effect, sends too, so an id does not
    /// move when a rule changes what it sends).
    pub(crate) fn nth(&mut self, k: usize) -> String {
        let (cause, bytes) = (&self.cause, self.bytes);
        let prefix = self.prefix.get_or_insert_with(|| {
            let digest = Sha256::digest(cause.as_bytes());
            let hex: String = digest[..bytes].iter().map(|b| format!("{b:02x}")).collect();
            format!("r{hex}")
        });
        format!("{prefix}-{k}")
    }
}

/// An id for the `n`th server `set` of this load that came without one (`PUT .../state/{key}`
/// with no `id`): unique, not deduplicated, since nothing can retry what it never named.
pub(crate) fn server_set_id(at: Time, n: u64) -> String {
    format!("set-{at}-{n}")
}

/// A connection id from 64 random bits of the adapter's: unique in a room.
pub fn conn_id(random: u64) -> String {
    format!("c-{random:016x}")
}

/// A new log's epoch from 64 random bits of the adapter's: clients resume only within one.
pub fn epoch_id(random: u64) -> String {
    format!("e-{random:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids stored rooms already hold: a new spelling would store a retried write twice.
    #[test]
    fn the_spellings_do_not_change() {
        let at = Time::from_ms(1_700_000_000_000);
        let cases = [
            (Cause::Write { session: "s1", id: "m1" }, "write:s1:m1"),
            (Cause::Join { conn: "c-1" }, "join:c-1"),
            (Cause::Leave { conn: "c-1" }, "leave:c-1"),
            (Cause::Timer { name: "close", at }, "timer:close:1700000000000"),
            (Cause::Loaded { at }, "loaded:1700000000000"),
            (Cause::Request { at, n: 3 }, "request:1700000000000:3"),
            (Cause::Stored { seq: 42 }, "stored:42"),
        ];
        for (cause, text) in cases {
            assert_eq!(cause.text(), text);
        }
        // What the first of these made before the scheme was a type, and since session 33
        // (the same hash, 128 bits of it: a refused write's note may be written again once,
        // by a retry across that deploy); the other causes keep their 64 bits.
        let id = Cause::Write { session: "s1", id: "m1" }.ids().nth(0);
        assert!(
            id.starts_with("r997d6b7ad3e840c5") && id.len() == 35 && id.ends_with("-0"),
            "{id}"
        );
        assert_eq!(Cause::Join { conn: "c-1" }.ids().nth(0).len(), 19);
        assert_eq!(Cause::Stored { seq: 42 }.ids().nth(1), "s42-1");
        assert_eq!(server_set_id(at, 2), "set-1700000000000-2");
        assert_eq!(conn_id(0xab), "c-00000000000000ab");
        assert_eq!(epoch_id(1), "e-0000000000000001");
    }

    #[test]
    fn ids_fit_the_log() {
        let long = "x".repeat(64);
        let id = Cause::Write { session: &long, id: &long }.ids().nth(999);
        let mut ids = Cause::Join { conn: "c-1" }.ids();
        assert_eq!(ids.nth(0).replace("-0", ""), ids.nth(1).replace("-1", ""), "one prefix");
        assert!(id.len() <= 64 && id.starts_with('r'), "{id}");
        let id = Cause::Stored { seq: u64::MAX }.ids().nth(usize::MAX);
        assert!(id.len() <= 64, "{id}");
    }
}
