//! How deeply the document's shared types nest, kept beside the document so an update that
//! would nest them deeper than [`MAX_NESTING`] is refused before `yrs` sees it.
//!
//! `yrs` 0.28 recurses once per level when it deletes a type's contents, collects its garbage,
//! renders it as JSON and drops it: a chain of 5,000 maps, each in the one before (an update of
//! about 40 KB), exhausts the Wasm stack the first time any of that runs, and the instance
//! resets with every room in it. The walk in [`super::guard`] bounds nesting inside one value;
//! this bounds nesting across items, which an update expresses only through ids: an item hangs
//! in the type an id names, or beside its origins in theirs. So the index remembers, for the
//! items the room holds, how deep the type they hang in is (only where it is not a root's, the
//! common case, which costs nothing), and which ids are types.
//!
//! Memory: one entry per run of items a client added in one nested type (consecutive ones
//! merge) and one per type. Deleted items stay in it until it is rebuilt from the document,
//! which happens when it has grown to twice its size at the last rebuild (plus
//! [`REBUILD_SLACK`] entries): so it holds at most about twice what the document (bounded by
//! `DOC_MAX_BYTES`) holds, and each entry cost an update at least a few bytes.

use std::collections::BTreeMap;

use super::error::DocError;
use super::guard::{Id, Parent, Shape};

/// How deeply shared types may nest: a type in a root is at depth 1. A ProseMirror or Tiptap
/// document (lists in lists, tables in list items) stays far below it.
pub const MAX_NESTING: u16 = 128;

/// Entries the index may gain past twice its size at the last rebuild before it is rebuilt.
pub const REBUILD_SLACK: usize = 4096;

/// A client and a clock, as the index keys them.
type Key = (u64, u64);

/// The depth of what the document holds, as far as nesting goes.
#[derive(Debug, Default)]
pub struct Nesting {
    /// Runs of items hanging in a nested type: `(client, start)` → `(end, depth of that
    /// type)`. Items not listed hang in a root (depth 0) or were collected as garbage.
    inside: BTreeMap<Key, (u64, u16)>,
    /// Types: `(client, clock)` → their own depth.
    types: BTreeMap<Key, u16>,
    /// Entries after the last rebuild.
    built_with: usize,
}

/// Where an update's items would hang: the depth of each one's parent type, in the order of
/// [`Shape::items`].
#[derive(Debug)]
pub struct Placement {
    depths: Vec<u16>,
    /// The deepest type the update would add (0: none).
    pub deepest: u16,
}

impl Nesting {
    /// The index of a whole document, from the shape of its encoding as one update.
    pub fn of_document(shape: &Shape) -> Nesting {
        let mut nesting = Nesting::default();
        // The room's own encoding always places (`yrs` writes no circle); were it not to, an
        // empty index only under-counts what was there before, never what comes next.
        if let Ok(placement) = nesting.place(shape, |_| 0) {
            nesting.record(shape, &placement, |_| 0, |_| u64::MAX);
        }
        nesting.built_with = nesting.entries();
        nesting
    }

    /// Where the items of an update of this shape would hang in a document whose clock for
    /// each client is `known(client)`. Refused as malformed when its items hang in each other
    /// in a circle (no `yrs` encoder writes that).
    pub fn place(&self, shape: &Shape, known: impl Fn(u64) -> u64) -> Result<Placement, DocError> {
        let items = &shape.items;
        // The update's items by client and clock, to find the one holding an id it names
        // (clients by their place in `shape.clients`: the order only has to be one).
        let mut order: Vec<u32> = (0..items.len() as u32).collect();
        order.sort_unstable_by_key(|&i| (items[i as usize].client, items[i as usize].start));
        let mut placer = Placer {
            nesting: self,
            shape,
            known: &known,
            order,
            depths: vec![UNPLACED; items.len()],
        };
        for first in 0..items.len() {
            placer.place_from(first)?;
        }
        let depths = placer.depths;
        let deepest = items
            .iter()
            .zip(&depths)
            .filter(|(item, _)| {
                item.is_type()
                    && u64::from(item.start) >= known(shape.clients[item.client as usize])
            })
            .map(|(_, d)| d.saturating_add(1))
            .max()
            .unwrap_or(0);
        Ok(Placement { depths, deepest })
    }

    /// Records the items of an update `yrs` integrated: those whose clock was past
    /// `before(client)` and is now below `after(client)`.
    pub fn record(
        &mut self,
        shape: &Shape,
        placement: &Placement,
        before: impl Fn(u64) -> u64,
        after: impl Fn(u64) -> u64,
    ) {
        for (item, &depth) in shape.items.iter().zip(&placement.depths) {
            let client = shape.clients[item.client as usize];
            let start = u64::from(item.start).max(before(client));
            let end = u64::from(item.end).min(after(client));
            if start >= end {
                continue;
            }
            if item.is_type() {
                self.types.insert((client, start), depth.saturating_add(1));
            }
            if depth > 0 {
                self.insert_run(client, start, end, depth);
            }
        }
    }

    /// Whether the index has grown enough to be rebuilt from the document.
    pub fn stale(&self) -> bool {
        self.entries() > 2 * self.built_with + REBUILD_SLACK
    }

    /// Entries held: runs of nested items and types.
    pub(crate) fn entries(&self) -> usize {
        self.inside.len() + self.types.len()
    }

    fn insert_run(&mut self, client: u64, start: u64, end: u64, depth: u16) {
        if let Some((&(c, _), run)) = self.inside.range_mut(..(client, start)).next_back() {
            if c == client && run.0 == start && run.1 == depth {
                run.0 = end; // typing on in the same type: one run
                return;
            }
        }
        self.inside.insert((client, start), (end, depth));
    }

    /// The depth of the type the item holding `id` hangs in.
    fn depth_at(&self, (client, clock): Key) -> u16 {
        match self.inside.range(..=(client, clock)).next_back() {
            Some((&(c, _), &(end, depth))) if c == client && clock < end => depth,
            _ => 0,
        }
    }

    /// The depth of the type `id` is, if it is one the room holds (0 otherwise: `yrs` refuses
    /// a parent that is not a type, or takes it for one collected as garbage).
    fn type_depth(&self, id: Key) -> u16 {
        self.types.get(&id).copied().unwrap_or(0)
    }
}

/// An item being placed: met again while it is, the items hang in each other in a circle.
const OPEN: u16 = u16::MAX;
/// An item not placed yet.
const UNPLACED: u16 = u16::MAX - 1;

/// Places an update's items, each after the ones it names (with a stack of its own: an
/// update's chain of origins can be as long as its items).
struct Placer<'a, K> {
    nesting: &'a Nesting,
    shape: &'a Shape,
    known: &'a K,
    /// The items' indexes by client and clock.
    order: Vec<u32>,
    /// Each item's parent's depth, or OPEN or UNPLACED.
    depths: Vec<u16>,
}

impl<K: Fn(u64) -> u64> Placer<'_, K> {
    /// Places item `first` and every item it waits for.
    fn place_from(&mut self, first: usize) -> Result<(), DocError> {
        let mut stack = vec![first];
        while let Some(&i) = stack.last() {
            if self.depths[i] < UNPLACED {
                stack.pop();
                continue;
            }
            self.depths[i] = OPEN;
            match self.hangs(i) {
                Ok(depth) => {
                    self.depths[i] = depth;
                    stack.pop();
                }
                // Every item OPEN is on the stack, waiting for the one above it.
                Err(j) if self.depths[j] == OPEN => return Err(DocError::Malformed),
                Err(j) => stack.push(j),
            }
        }
        Ok(())
    }

    /// The depth of the type item `i` hangs in, or the update's item to place first.
    fn hangs(&self, i: usize) -> Result<u16, usize> {
        let item = &self.shape.items[i];
        let depth = match item.parent {
            Parent::Root => 0,
            Parent::Type(id) => self.at(id, true)?,
            Parent::Beside { left, right } => {
                let left = left.map_or(Ok(0), |id| self.at(id, false))?;
                left.max(right.map_or(Ok(0), |id| self.at(id, false))?)
            }
        };
        // Part of an item the room already holds: `yrs` hangs the rest beside the part it
        // has, so that part's place counts too.
        let client = self.shape.clients[item.client as usize];
        let held = (self.known)(client);
        if u64::from(item.start) < held && held < u64::from(item.end) {
            return Ok(depth.max(self.nesting.depth_at((client, held - 1))));
        }
        Ok(depth)
    }

    /// The depth of the type the item holding `id` hangs in, or (`as_parent`) of the type it
    /// is; or the update's item to place first.
    fn at(&self, id: Id, as_parent: bool) -> Result<u16, usize> {
        let key = (self.shape.clients[id.client as usize], u64::from(id.clock));
        if key.1 < (self.known)(key.0) {
            return Ok(if as_parent {
                self.nesting.type_depth(key)
            } else {
                self.nesting.depth_at(key)
            });
        }
        // Not in the update: a collected range, where nothing hangs.
        let Some(j) = self.find(id) else { return Ok(0) };
        match self.depths[j] {
            d if d < UNPLACED && !as_parent => Ok(d),
            // Not a type: `yrs` refuses it, or takes it for a collected parent.
            d if d < UNPLACED => {
                Ok(if self.shape.items[j].is_type() { d.saturating_add(1) } else { 0 })
            }
            _ => Err(j),
        }
    }

    /// The update's item holding `id`.
    fn find(&self, id: Id) -> Option<usize> {
        let items = &self.shape.items;
        let at = self.order.partition_point(|&i| {
            let item = &items[i as usize];
            (item.client, item.start) <= (id.client, id.clock)
        });
        let i = *self.order[..at].last()? as usize;
        (items[i].client == id.client && id.clock < items[i].end).then_some(i)
    }
}
