//! A walk over a Yjs update (lib0 v1) before `yrs` decodes it, checking what `yrs` would trust:
//! every count it reserves room for must fit in the bytes that are left, and nested values
//! must not recurse deeper than [`MAX_DEPTH`]. Without it a 7-byte update makes `yrs` 0.28
//! reserve 384 MB (its block count, 24 bytes a block: `Update::decode`'s `try_reserve`), past a
//! Worker's 128 MB, which resets the Wasm instance and every room in it; and an `Any` nested a
//! few hundred thousand levels deep exhausts the stack. Noted for upstream (tests/README.md,
//! "Documents").
//!
//! The walk mirrors `yrs`'s decoder (block info bits, parent info, content by kind, the
//! delete set) and keeps only the update's [`Shape`]: the clock ranges it brings and the ids it
//! refers to. The room applies an update only if it [fits](Shape::fits) the document: nothing
//! it needs is missing. Such an update integrates whole, so the document never holds pending
//! blocks or skips, the states where the fuzzer found `yrs` 0.28 overflowing a clock
//! (`block_store.rs`, `BlockStore::push`) — and a hub never needs them: everything an editor
//! has came through the room or from the editor itself.

use yrs::encoding::read::{Cursor, Read};

use super::census::MAX_BLOCKS;
use super::error::DocError;

/// How deep `Any` values (a map in an array in a map...) may nest in an update.
pub const MAX_DEPTH: usize = 64;

/// What an update brings and needs, as its bytes say.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Clock ranges `(client, start, end)` of its blocks.
    pub blocks: Vec<(u64, u64, u64)>,
    /// Deleted ranges `(client, start, end)`.
    pub deletes: Vec<(u64, u64, u64)>,
    /// It holds skip blocks (gaps it admits to).
    pub skips: bool,
    /// The Yjs clients its items come from and name, each once: an [`Id`] names one by its
    /// place here (so an item takes 36 bytes, not 88: a 4 MiB update can hold 400,000).
    pub clients: Vec<u64>,
    /// Its items, in the order it lists them: where each hangs, for the nesting check.
    pub items: Vec<Placed>,
    /// The last block of each client's run, in the order it lists them (what a mark may ask
    /// a reader to send back: PROTOCOL-DOCUMENTS.md, "Flow").
    pub tails: Vec<Tail>,
    /// Bytes of its delete set, at its end: a sync step 2 repeats its sender's whole delete
    /// set, which adds nothing to a document that holds it already.
    pub delete_bytes: usize,
    /// Its GC blocks `(client, start, end)` (a deleted range each, no item), up to
    /// [`MAX_BLOCKS`]: `yrs` decodes each into a block of its own (24 bytes natively), so they
    /// count toward the document's blocks like items.
    pub gcs: Vec<(u64, u32, u32)>,
    /// It deletes more ranges, or brings more GC blocks, than a document may hold blocks:
    /// refused `document_too_large` (`census::added`), its ranges past that not kept. Kept,
    /// two million one-unit ranges of a 4 MiB update made a 48 MiB list before the room
    /// refused it; and two million two-byte GC blocks, uncounted, were taken: `yrs` reserved
    /// 48 MiB to decode them and kept them in a list as long.
    pub over: bool,
}

/// The last block of a client's run in an update: its clock range, kind and encoded size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    /// The Yjs client.
    pub client: u64,
    /// Its first clock.
    pub start: u64,
    /// The clock after its last.
    pub end: u64,
    /// Its content's kind, as in [`Placed::content`] (0: a GC block).
    pub content: u8,
    /// Its size in the update (bytes).
    pub bytes: u64,
}

/// An item an update brings: its clock range and where it hangs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// The Yjs client that made it (its place in [`Shape::clients`]).
    pub client: u32,
    /// Its first clock.
    pub start: u32,
    /// The clock after its last (`yrs` keeps clocks in a u32; the walk refuses more).
    pub end: u32,
    /// Where it hangs.
    pub parent: Parent,
    /// Its content's kind, as `yrs` numbers them (1 deleted, 4 a string, 7 a shared type,
    /// 9 a sub-document...).
    pub content: u8,
}

impl Placed {
    /// Its content is a shared type (a map, an array, a text, an XML node) others may nest in.
    pub fn is_type(&self) -> bool {
        self.content == 7
    }
}

/// An id an update names: a client (its place in [`Shape::clients`]) and a clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Id {
    /// The client's place in [`Shape::clients`].
    pub client: u32,
    /// Its clock.
    pub clock: u32,
}

/// Where an item hangs, as its update says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    /// In a named root type.
    Root,
    /// In the type the item with this id holds.
    Type(Id),
    /// Beside its origins, in their parent: `yrs` takes the left one's, else the right one's.
    Beside { left: Option<Id>, right: Option<Id> },
}

impl Parent {
    /// The ids it names.
    pub fn ids(&self) -> impl Iterator<Item = Id> {
        let (a, b) = match *self {
            Parent::Root => (None, None),
            Parent::Type(id) => (Some(id), None),
            Parent::Beside { left, right } => (left, right),
        };
        a.into_iter().chain(b)
    }
}

impl Shape {
    /// Whether the update changes nothing: no block, no deletion.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.deletes.is_empty()
    }

    /// Whether the update integrates whole into a document whose clock for each client is
    /// `known(client)`: each client's blocks start at or before what is known (or right after
    /// another range of the update), and every id it names and range it deletes is known or
    /// brought by it.
    pub fn fits(&self, known: impl Fn(u64) -> u64) -> bool {
        if self.skips {
            return false;
        }
        let mut ranges = self.blocks.clone();
        sort_ranges(&mut ranges);
        let mut reach: Vec<(u64, u64)> = Vec::new(); // (client, clock known after the update)
        for (c, start, end) in ranges {
            let at = match reach.last_mut() {
                Some((last, at)) if *last == c => at,
                _ => {
                    reach.push((c, known(c)));
                    &mut reach.last_mut().expect("pushed").1
                }
            };
            if start > *at {
                return false; // a gap: blocks before `start` are missing
            }
            *at = (*at).max(end);
        }
        let known_after = |c: u64| {
            reach.binary_search_by_key(&c, |&(r, _)| r).map_or_else(|_| known(c), |i| reach[i].1)
        };
        self.items
            .iter()
            .flat_map(|item| item.parent.ids())
            .all(|id| u64::from(id.clock) < known_after(self.clients[id.client as usize]))
            && self.deletes.iter().all(|&(c, _, end)| end <= known_after(c))
    }
}

/// Sorts ranges `(client, start, end)` by client, then start: by start, then stably by client,
/// each through [`sort_by_u64`] (one sort for every list the document kind orders: each kind of
/// sort is code in the Wasm, 1.2 KB gzip for this one's own).
pub(crate) fn sort_ranges(ranges: &mut Vec<(u64, u64, u64)>) {
    sort_by_u64(ranges, |r| r.1);
    sort_by_u64(ranges, |r| r.0);
}

/// Sorts `items` by `key`, stably, through a sort of `(key, index)` pairs: the same sort the
/// patched `yrs` makes for each of its own (vendor/README.md), so that every list ordered by a
/// number shares one copy of the sort's code in the Wasm (each `sort_by_key` on a type of its
/// own is another, 3-5 KB).
pub(crate) fn sort_by_u64<T>(items: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    if items.len() < 2 {
        return;
    }
    let mut order: Vec<(u64, usize)> =
        items.iter().enumerate().map(|(i, item)| (key(item), i)).collect();
    // Pairs are distinct, so an unstable sort of them orders equal keys by index: stable.
    order.sort_unstable();
    let mut slots: Vec<Option<T>> = items.drain(..).map(Some).collect();
    items.extend(order.into_iter().filter_map(|(_, i)| slots[i].take()));
}

/// Whether `yrs` may decode `update` without reserving more than its bytes justify, and what
/// the update brings and needs.
pub fn check_update(update: &[u8]) -> Result<Shape, DocError> {
    check(update)
}

/// Whether a state vector (a count, then client and clock pairs) holds only what `yrs` takes,
/// and no more than a document can know: each client once, at most [`MAX_BLOCKS`] of them (a
/// document's clients are blocks). `yrs` reserves a map of the count before it reads a pair:
/// two bytes a pair passed the byte check, so a 4 MiB sync step 1 of one client two million
/// times made it reserve about 68 MiB of the isolate's 128 MB, from any member, reader or not.
pub fn check_state_vector(sv: &[u8]) -> Result<(), DocError> {
    let mut walk = Walk::new(sv);
    let pairs = walk.count(2).map_err(|()| DocError::Malformed)?;
    if pairs > MAX_BLOCKS as u64 {
        return Err(DocError::Malformed);
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..pairs {
        let client = walk.client().map_err(|()| DocError::Malformed)?;
        walk.clock().map_err(|()| DocError::Malformed)?;
        if !seen.insert(client) {
            return Err(DocError::Malformed);
        }
    }
    Ok(())
}

fn check(update: &[u8]) -> Result<Shape, DocError> {
    let mut walk = Walk::new(update);
    walk.update().map_err(|()| DocError::Malformed)?;
    if walk.left() > 0 {
        // `yrs` reads no further, but the room would store and send them (4 MiB of padding
        // after a delete set it takes as repeated, past the document's bound).
        return Err(DocError::Malformed);
    }
    Ok(walk.shape)
}

struct Walk<'a> {
    cur: Cursor<'a>,
    shape: Shape,
    /// Each client's place in `shape.clients`.
    interned: std::collections::HashMap<u64, u32>,
}

type Step = Result<(), ()>;

impl Walk<'_> {
    fn new(bytes: &[u8]) -> Walk<'_> {
        Walk { cur: Cursor::new(bytes), shape: Shape::default(), interned: Default::default() }
    }

    /// A client's place in `shape.clients`.
    fn intern(&mut self, client: u64) -> u32 {
        let clients = &mut self.shape.clients;
        *self.interned.entry(client).or_insert_with(|| {
            clients.push(client);
            (clients.len() - 1) as u32 // at most one a byte of the update
        })
    }

    fn left(&self) -> u64 {
        (self.cur.buf.len() - self.cur.next) as u64
    }

    fn var(&mut self) -> Result<u64, ()> {
        self.cur.read_var::<u64>().map_err(|_| ())
    }

    /// A count of things that each take at least `each` bytes.
    fn count(&mut self, each: u64) -> Result<u64, ()> {
        let n = self.var()?;
        if n.saturating_mul(each) > self.left() {
            return Err(());
        }
        Ok(n)
    }

    /// A Yjs client id: at most 53 bits (a JavaScript number; `yrs` asserts it).
    fn client(&mut self) -> Result<u64, ()> {
        let id = self.var()?;
        if id >= 1 << 53 {
            return Err(());
        }
        Ok(id)
    }

    /// A clock or a length: `yrs` keeps them in a u32.
    fn clock(&mut self) -> Result<u64, ()> {
        let n = self.var()?;
        if n > u64::from(u32::MAX) {
            return Err(());
        }
        Ok(n)
    }

    fn u8(&mut self) -> Result<u8, ()> {
        self.cur.read_u8().map_err(|_| ())
    }

    fn buf(&mut self) -> Step {
        self.cur.read_buf().map(|_| ()).map_err(|_| ())
    }

    fn skip(&mut self, n: usize) -> Step {
        self.cur.read_exact(n).map(|_| ()).map_err(|_| ())
    }

    fn update(&mut self) -> Step {
        // Each client's header (blocks, client, clock) takes at least three bytes.
        let clients = self.count(3)?;
        let mut headed = std::collections::HashSet::new();
        for _ in 0..clients {
            let blocks = self.count(1)?;
            let client = self.client()?;
            if !headed.insert(client) {
                // Two headers for one client: no Yjs or `yrs` encoder writes it, and `yrs` 0.28
                // integrates the second run without trimming what the first brought, then
                // drops a block still linked from the document (`BlockStore::push`: a freed
                // item the document goes on reading). Stock Yjs keeps only the last header.
                return Err(());
            }
            let start = self.clock()?;
            let mut clock = start;
            let mut tail = None;
            for _ in 0..blocks {
                let at = self.cur.next;
                let (len, content) = self.block(client, clock)?;
                let bytes = (self.cur.next - at) as u64;
                tail = Some(Tail { client, start: clock, end: clock + len, content, bytes });
                clock = clock.saturating_add(len);
                if clock > u64::from(u32::MAX) {
                    return Err(()); // `yrs` adds block lengths to a u32 clock
                }
            }
            self.shape.blocks.push((client, start, clock));
            if let Some(tail) = tail {
                self.shape.tails.push(tail);
            }
        }
        self.shape.delete_bytes = self.left() as usize;
        self.delete_set()
    }

    fn id(&mut self) -> Result<Id, ()> {
        let client = self.client()?;
        let clock = self.clock()? as u32; // checked: at most u32::MAX
        Ok(Id { client: self.intern(client), clock })
    }

    /// One block, from `client` at `clock`: its length in clock units and its content's kind
    /// (0 for GC and skip blocks).
    fn block(&mut self, client: u64, clock: u64) -> Result<(u64, u8), ()> {
        let info = self.u8()?;
        if info == 0 || info == 10 {
            // GC and skip: a length (`yrs` matches the whole byte).
            self.shape.skips |= info == 10;
            let len = self.clock()?;
            if info == 0 {
                if self.shape.gcs.len() < MAX_BLOCKS {
                    // Clocks past a u32 are refused by the caller (as `yrs` keeps them in one).
                    let end = clock.saturating_add(len).min(u64::from(u32::MAX));
                    self.shape.gcs.push((client, clock as u32, end as u32));
                } else {
                    self.shape.over = true;
                }
            }
            return Ok((len, 0));
        }
        let (origin, right) = (info & 0x80 != 0, info & 0x40 != 0);
        let left = if origin { Some(self.id()?) } else { None };
        let right = if right { Some(self.id()?) } else { None };
        let parent = if left.is_none() && right.is_none() {
            let parent = if self.var()? == 1 {
                self.buf()?; // a named root
                Parent::Root
            } else {
                Parent::Type(self.id()?) // a parent's id
            };
            if info & 0x20 != 0 {
                self.buf()?; // parent sub (a map key)
            }
            parent
        } else {
            Parent::Beside { left, right }
        };
        let kind = info & 0b1111;
        let len = self.content(kind)?;
        // Clocks past a u32 are refused by the caller (as `yrs` keeps them in one).
        let (start, end) =
            (clock as u32, clock.saturating_add(len).min(u64::from(u32::MAX)) as u32);
        let client = self.intern(client);
        self.shape.items.push(Placed { client, start, end, parent, content: kind });
        Ok((len, kind))
    }

    /// An item's content; its length in clock units.
    fn content(&mut self, kind: u8) -> Result<u64, ()> {
        match kind {
            1 => self.clock(), // deleted: a length
            2 => {
                // JSON: `yrs` reads one more string than the count says.
                let n = self.count(1)?;
                (0..=n).try_for_each(|_| self.buf())?;
                Ok(n + 1)
            }
            4 => {
                // A string counts its UTF-16 units.
                let s = self.cur.read_string().map_err(|_| ())?;
                Ok(s.encode_utf16().count() as u64)
            }
            3 | 5 => self.buf().map(|()| 1), // binary, embed (JSON text)
            6 => {
                self.buf()?; // format: key
                self.buf().map(|()| 1)
            }
            7 => match self.u8()? {
                3 => self.buf().map(|()| 1), // an XML element's name
                0..=2 | 4..=6 | 9 | 15 => Ok(1),
                _ => Err(()),
            },
            8 => {
                let n = self.count(1)?;
                (0..n).try_for_each(|_| self.any(0))?;
                Ok(n)
            }
            9 => {
                self.buf()?; // a sub-document's guid
                self.any(0).map(|()| 1)
            }
            _ => Err(()),
        }
    }

    fn any(&mut self, depth: usize) -> Step {
        if depth > MAX_DEPTH {
            return Err(());
        }
        match self.u8()? {
            127 | 126 | 121 | 120 => Ok(()),
            125 => self.var().map(|_| ()),
            124 => self.skip(4),
            123 | 122 => self.skip(8),
            119 | 116 => self.buf(),
            118 => {
                let n = self.count(2)?;
                (0..n).try_for_each(|_| {
                    self.buf()?;
                    self.any(depth + 1)
                })
            }
            117 => {
                let n = self.count(1)?;
                (0..n).try_for_each(|_| self.any(depth + 1))
            }
            _ => Err(()),
        }
    }

    fn delete_set(&mut self) -> Step {
        let clients = self.count(2)?;
        for _ in 0..clients {
            let client = self.client()?;
            let ranges = self.count(2)?;
            if ranges == 0 {
                return Err(()); // see below: an empty range
            }
            for _ in 0..ranges {
                let start = self.clock()?;
                let len = self.clock()?;
                if len == 0 {
                    // No encoder writes one, and `yrs` makes an empty list of blocks for its
                    // client, kept for good: 66,000 in a 264 KB update passed every bound
                    // (an empty range deletes nothing, and the census recounted nothing),
                    // again with each update, without end.
                    return Err(());
                }
                let end = start.saturating_add(len);
                if end > u64::from(u32::MAX) {
                    return Err(()); // `yrs` adds them as u32
                }
                if self.shape.deletes.len() >= MAX_BLOCKS {
                    self.shape.over = true;
                    continue;
                }
                self.shape.deletes.push((client, start, end));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::updates::decoder::Decode;
    use yrs::{Array, Doc, Map, ReadTxn, Text, Transact, Update, XmlFragment};

    fn varint(mut n: u64, out: &mut Vec<u8>) {
        loop {
            let b = (n & 127) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 128);
        }
    }

    #[test]
    fn every_kind_of_real_update_passes() {
        let doc = Doc::with_client_id(7);
        let text = doc.get_or_insert_text("text");
        let map = doc.get_or_insert_map("map");
        let array = doc.get_or_insert_array("array");
        let xml = doc.get_or_insert_xml_fragment("xml");
        {
            let mut txn = doc.transact_mut();
            text.insert(&mut txn, 0, "hello ☃ world");
            text.remove_range(&mut txn, 2, 3);
            map.insert(&mut txn, "n", 1.5);
            map.insert(&mut txn, "big", 1i64 << 40);
            map.insert(&mut txn, "s", "str");
            map.insert(&mut txn, "nested", yrs::any!({"a": [1, true, null, {"b": "c"}]}));
            array.insert(&mut txn, 0, yrs::any!([1, 2, 3]));
            array.insert(&mut txn, 0, yrs::MapPrelim::default());
            xml.insert(&mut txn, 0, yrs::XmlElementPrelim::empty("p"));
        }
        let update = doc.transact().encode_state_as_update_v1(&yrs::StateVector::default());
        check_update(&update).unwrap();
        assert!(Update::decode_v1(&update).is_ok());
    }

    #[test]
    fn a_seven_byte_update_claiming_millions_of_blocks_is_refused() {
        // One client, 2^24 blocks, client 5, clock 0: yrs 0.28 reserves 384 MB for it.
        let mut u = Vec::new();
        for n in [1, 1 << 24, 5, 0] {
            varint(n, &mut u);
        }
        assert_eq!(u.len(), 7);
        assert_eq!(check_update(&u), Err(DocError::Malformed));
    }

    #[test]
    fn bytes_after_the_delete_set_are_refused() {
        // `yrs` reads no further, but the room would store and send them to everyone.
        let doc = Doc::with_client_id(7);
        let text = doc.get_or_insert_text("text");
        let update = {
            let mut txn = doc.transact_mut();
            text.insert(&mut txn, 0, "x");
            txn.encode_update_v1()
        };
        check_update(&update).unwrap();
        let mut padded = update.clone();
        padded.extend([0; 1000]);
        assert!(Update::decode_v1(&padded).is_ok(), "yrs takes it");
        assert_eq!(check_update(&padded), Err(DocError::Malformed));
    }

    #[test]
    fn nesting_past_the_depth_bound_is_refused() {
        // One client, one block: an Any item (kind 8) under the root "r" holding one value,
        // arrays nested 10,000 deep.
        let mut u = Vec::new();
        for n in [1, 1, 5, 0] {
            varint(n, &mut u);
        }
        u.push(8); // info: content Any, no origins: parent info follows
        varint(1, &mut u);
        varint(1, &mut u);
        u.push(b'r');
        varint(1, &mut u);
        for _ in 0..10_000 {
            u.extend([117, 1]);
        }
        u.push(126);
        varint(0, &mut u); // an empty delete set
        assert_eq!(check_update(&u), Err(DocError::Malformed));
    }
}
