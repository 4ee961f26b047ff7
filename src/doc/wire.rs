//! The y-protocols messages a document socket carries (PROTOCOL-DOCUMENTS.md), decoded with
//! every count checked against the bytes that are left before anything is reserved (a
//! member picks every count), and the replies encoded. The two homeroom extension messages
//! (`saved`, `refused`) are here too: only a client that asked for them gets them.

use yrs::encoding::read::{Cursor, Read};
use yrs::encoding::write::Write;
use yrs::updates::decoder::Decode;
use yrs::StateVector;

use super::error::DocError;
use super::guard::{check_state_vector, check_update, Shape};

/// y-protocols' outer message tags.
const SYNC: u64 = 0;
const AWARENESS: u64 = 1;
const AUTH: u64 = 2;
const QUERY_AWARENESS: u64 = 3;
/// Sync sub-tags.
const STEP_1: u64 = 0;
const STEP_2: u64 = 1;
const UPDATE: u64 = 2;
/// homeroom's extension tags (clients that connect with `homeroom=1` only): chosen far from
/// y-protocols' own, which stock clients log as unknown.
pub const SAVED: u64 = 100;
pub const REFUSED: u64 = 101;

/// One awareness entry: a Yjs client's state (JSON text; `"null"` removes it) at its clock.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub client: u64,
    pub clock: u32,
    pub json: String,
}

impl Entry {
    /// Whether the entry removes its client's state.
    pub fn is_removal(&self) -> bool {
        self.json == "null"
    }
}

/// A message a member sent, decoded.
#[derive(Debug)]
pub enum Message {
    /// "Here is what I have; send me what I lack."
    SyncStep1(StateVector),
    /// A document update: the answer to our step 1 (`step2`), or a live edit. The bytes are
    /// the update as sent (lib0 v1), walked ([`Shape`]) but not yet decoded.
    Update { bytes: Vec<u8>, step2: bool, shape: Shape },
    /// Awareness entries.
    Awareness(Vec<Entry>),
    /// "Send me everyone's awareness."
    QueryAwareness,
    /// A message this room does not act on (y-protocols' auth, unknown tags): ignored.
    Ignored(u64),
}

/// Decodes one frame: one message, as every y-protocols client sends them.
pub fn decode(frame: &[u8]) -> Result<Message, DocError> {
    let mut cur = Cursor::new(frame);
    let tag: u64 = cur.read_var().map_err(|_| DocError::Malformed)?;
    let message = match tag {
        SYNC => {
            let sub: u64 = cur.read_var().map_err(|_| DocError::Malformed)?;
            let buf = cur.read_buf().map_err(|_| DocError::Malformed)?;
            match sub {
                STEP_1 => SyncMessageStep1::decode(buf)?,
                STEP_2 | UPDATE => {
                    let shape = check_update(buf)?;
                    Message::Update { bytes: buf.to_vec(), step2: sub == STEP_2, shape }
                }
                _ => return Err(DocError::Malformed),
            }
        }
        AWARENESS => {
            let buf = cur.read_buf().map_err(|_| DocError::Malformed)?;
            Message::Awareness(decode_awareness(buf)?)
        }
        QUERY_AWARENESS => Message::QueryAwareness,
        AUTH => Message::Ignored(AUTH),
        other => Message::Ignored(other),
    };
    Ok(message)
}

/// A state vector's decode, its count bounded first (each entry takes at least two bytes).
struct SyncMessageStep1;

impl SyncMessageStep1 {
    fn decode(buf: &[u8]) -> Result<Message, DocError> {
        check_state_vector(buf)?;
        let sv = StateVector::decode_v1(buf).map_err(|_| DocError::Malformed)?;
        Ok(Message::SyncStep1(sv))
    }
}

/// An awareness update: a count, then per entry the client, its clock and its JSON text.
fn decode_awareness(buf: &[u8]) -> Result<Vec<Entry>, DocError> {
    let mut cur = Cursor::new(buf);
    let count: u64 = cur.read_var().map_err(|_| DocError::Malformed)?;
    // Each entry takes at least three bytes.
    if count > buf.len() as u64 / 3 {
        return Err(DocError::Malformed);
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let client: u64 = cur.read_var().map_err(|_| DocError::Malformed)?;
        if client >= 1 << 53 {
            return Err(DocError::Malformed); // not a Yjs client id (a JavaScript number)
        }
        let clock: u32 = cur.read_var().map_err(|_| DocError::Malformed)?;
        let json = cur.read_string().map_err(|_| DocError::Malformed)?;
        entries.push(Entry { client, clock, json: json.to_owned() });
    }
    Ok(entries)
}

/// Sync step 1: the room's state vector, asking the member for what it lacks.
pub fn sync_step1(sv: &[u8]) -> Vec<u8> {
    sync(STEP_1, sv)
}

/// Sync step 2: what the member lacks, answering its step 1.
pub fn sync_step2(update: &[u8]) -> Vec<u8> {
    sync(STEP_2, update)
}

/// A live update, for every other member.
pub fn update(update: &[u8]) -> Vec<u8> {
    sync(UPDATE, update)
}

fn sync(sub: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.write_var(SYNC);
    out.write_var(sub);
    out.write_buf(payload);
    out
}

/// An awareness message carrying `entries`.
pub fn awareness<'a>(entries: impl ExactSizeIterator<Item = &'a Entry>) -> Vec<u8> {
    let mut inner = Vec::new();
    inner.write_var(entries.len() as u64);
    for e in entries {
        inner.write_var(e.client);
        inner.write_var(e.clock);
        inner.write_string(&e.json);
    }
    let mut out = Vec::with_capacity(inner.len() + 6);
    out.write_var(AWARENESS);
    out.write_buf(&inner);
    out
}

/// Extension: the member's first `count` update messages are stored (each one is either
/// saved or refused, in the order sent).
pub fn saved(count: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    out.write_var(SAVED);
    out.write_var(count);
    out
}

/// Extension: the member's update message number `index` (1-based) was refused, with the
/// stable code of why; nothing of it was applied.
pub fn refused(index: u64, code: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(code.len() + 12);
    out.write_var(REFUSED);
    out.write_var(index);
    out.write_string(code);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awareness_round_trips() {
        let entries = vec![
            Entry { client: 7, clock: 3, json: r#"{"name":"ann"}"#.into() },
            Entry { client: 9, clock: 1, json: "null".into() },
        ];
        let frame = awareness(entries.iter());
        match decode(&frame).unwrap() {
            Message::Awareness(got) => assert_eq!(got, entries),
            other => panic!("decoded {other:?}"),
        }
    }

    #[test]
    fn counts_larger_than_the_bytes_are_refused_before_anything_is_reserved() {
        // An awareness update claiming 2^40 entries in a few bytes.
        let mut inner = Vec::new();
        inner.write_var(1u64 << 40);
        let mut frame = Vec::new();
        frame.write_var(AWARENESS);
        frame.write_buf(&inner);
        assert_eq!(decode(&frame).unwrap_err(), DocError::Malformed);
        // A state vector claiming 2^31 clients.
        let mut sv = Vec::new();
        sv.write_var(1u64 << 31);
        assert_eq!(decode(&sync_step1(&sv)).unwrap_err(), DocError::Malformed);
        // An update claiming 2^31 clients.
        assert_eq!(decode(&update(&sv)).unwrap_err(), DocError::Malformed);
    }

    #[test]
    fn unknown_tags_are_ignored_and_truncated_frames_refused() {
        assert!(matches!(decode(&[2, 0]).unwrap(), Message::Ignored(2)));
        assert!(matches!(decode(&[55, 0]).unwrap(), Message::Ignored(55)));
        assert_eq!(decode(&[]).unwrap_err(), DocError::Malformed);
        assert_eq!(decode(&[0, 1, 200]).unwrap_err(), DocError::Malformed);
        assert_eq!(decode(&[0, 9, 0]).unwrap_err(), DocError::Malformed);
    }
}
