//! What the document holds, as far as its memory and its nesting go: how many blocks (the
//! bound [`MAX_BLOCKS`] keeps a document's memory within a Worker's 128 MB, which its encoded
//! size does not) and how deeply its types nest ([`Nesting`]); and each client's last block,
//! which the marks ask readers for ([`Tails`]).
//!
//! `yrs` keeps every block (an item, or a piece an edit cut one into) as a struct of about 190
//! bytes natively, a shared type about 400 and a sub-document about 1 KB, while an update
//! spends a few bytes on one. Measured natively with `yrs` 0.28.1: 200,000 one-character
//! insertions at the front of a text are a 1.4 MB update and 38 MB in memory; 200,000 empty maps
//! 1.2 MB and 81 MB; 200,000 sub-documents 16 MB and 193 MB. A document of 4 MiB
//! (`DOC_MAX_BYTES`) of such blocks would need 115-280 MB: past the isolate's 128 MB, an
//! instance reset (every room in it) on every load of that room. And deleting every other
//! character of one long insertion cuts it into as many blocks with 3 bytes a range.
//!
//! So the room counts blocks: exactly from the document's encoding when it builds the census
//! (the first update after a load) and at each compaction; in between, each update adds what
//! it may add at most ([`added`]). An update that would pass the bound is refused
//! `document_too_large`, after one recount if the document changed since the last.

use super::guard::{check_update, Shape};
use super::nesting::Nesting;
use super::tails::Tails;

/// The most blocks a document may hold: about 40 MB natively at the sizes above (each block
/// of a type or a sub-document counted as the blocks its size is worth).
pub const MAX_BLOCKS: usize = 200_000;

/// Blocks a content kind is worth beyond its own: a shared type holds a branch, a
/// sub-document a document of its own.
fn extra(content: u8) -> usize {
    match content {
        7 => 1,
        9 => 4,
        _ => 0,
    }
}

/// What an update of this shape may add to a document whose clock for each client is
/// `known(client)`, in blocks: each new item, and the two blocks it may cut (beside its left
/// origin and its right one); each GC block; the two ends of each range it deletes.
pub fn added(shape: &Shape, known: impl Fn(u64) -> u64) -> usize {
    if shape.over {
        return usize::MAX; // more ranges or GC blocks than any document may hold
    }
    new_blocks(shape, known) + 2 * shape.deletes.len()
}

/// What the new items and GC blocks of an update of this shape may add (see [`added`]); with
/// the ranges an applied update really deleted, what it is counted for once applied (a sync
/// step 2 repeats the client's whole delete set, and must not count it again each time).
pub fn new_blocks(shape: &Shape, known: impl Fn(u64) -> u64) -> usize {
    let items: usize = shape
        .items
        .iter()
        .filter(|item| u64::from(item.end) > known(shape.clients[item.client as usize]))
        .map(|item| 3 + extra(item.content))
        .sum();
    // A client new to the document is a block too: its GC ranges are no items, and the room
    // stores which user writes for it (so the clients, and those rows, are as bounded).
    let clients =
        shape.blocks.iter().filter(|&&(client, _, end)| end > 0 && known(client) == 0).count();
    // Its GC blocks past what the document holds (those it holds, `yrs` trims away: counted,
    // a member could grow the count for free, and the next editor pay for the recount).
    let gcs = shape.gcs.iter().filter(|&&(client, _, end)| u64::from(end) > known(client)).count();
    items + gcs + clients
}

/// How many of the ranges an update of this shape deletes are not deleted already in a
/// document whose deleted ranges are `deleted` (sorted by client and start, disjoint: as the
/// document's encoding lists them): what its deletions may cut. A sync step 2 repeats its
/// sender's whole delete set, so an editor who typed one character offline in a document cut
/// into 60,000 pieces was counted 120,000 blocks, and refused at each reconnect. A walk over
/// both, each sorted: linear in their lengths.
pub fn fresh_deletes(shape: &Shape, deleted: &[(u64, u64, u64)]) -> usize {
    let mut asked = shape.deletes.clone();
    super::guard::sort_ranges(&mut asked);
    let mut held = deleted.iter().peekable();
    let mut fresh = 0;
    for &(client, start, end) in &asked {
        // Skip the held ranges before this one: of a lower client, or ending before it starts.
        while held.next_if(|&&(c, _, e)| c < client || (c == client && e <= start)).is_some() {}
        let covered = held.peek().is_some_and(|&&(c, s, e)| c == client && s <= start && end <= e);
        fresh += usize::from(!covered);
    }
    fresh
}

/// The document's blocks and nesting.
#[derive(Debug)]
pub struct Census {
    pub nesting: Nesting,
    /// Blocks the document holds: exact when counted, an upper bound after updates.
    pub blocks: usize,
    /// An update was recorded since the count: a recount may find fewer.
    pub grown: bool,
    /// Each client's last block, for the marks.
    pub tails: Tails,
}

impl Census {
    /// The census of a whole document, from its encoding as one update (the room's own
    /// encoding always passes the guard's walk; were it not to, an empty census would only
    /// under-count what was there before, never what comes next).
    pub fn of_document(encoded: &[u8]) -> Census {
        let Ok(shape) = check_update(encoded) else {
            let tails = Tails::default();
            return Census { nesting: Nesting::default(), blocks: 0, grown: false, tails };
        };
        Census {
            nesting: Nesting::of_document(&shape),
            blocks: held(&shape),
            grown: false,
            tails: Tails::of_document(&shape),
        }
    }

    /// Counts the blocks again, from the shape of the document's encoding (its nesting index
    /// keeps to its own rebuilds: [`Nesting::stale`]).
    pub fn recount(&mut self, encoded: &Shape) {
        self.blocks = held(encoded);
        self.grown = false;
    }

    /// Notes an update of `added` blocks at most.
    pub fn grow(&mut self, added: usize) {
        self.blocks = self.blocks.saturating_add(added);
        self.grown |= added > 0;
    }
}

/// The blocks a whole document holds, from the shape of its encoding: its items, its GC
/// blocks (uncounted, two million of them came in two 4 MiB updates), and one for each of its
/// clients.
fn held(shape: &Shape) -> usize {
    let items = shape.items.iter().map(|item| 1 + extra(item.content)).sum::<usize>();
    items + shape.gcs.len() + shape.blocks.len()
}
