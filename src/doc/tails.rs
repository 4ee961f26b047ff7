//! The last block of each Yjs client in the document, and what a mark asks a reader to send
//! back of one ([`super::flow`]): a few clock units at a client's end, chosen at random among
//! those cheap to send, so that only a client that read the room's frames can answer.
//!
//! A sync step 2 answers a state vector with every block past it, from exactly the clock the
//! vector names (Yjs's `writeStructs`, `yrs`'s `write_blocks_from`). A mark names every client
//! the room knows at the highest clock (nothing of theirs is sent back) but one, named `k`
//! units short of its end: the answer carries that client's blocks from exactly there. A client
//! that did not read the mark cannot know which client, nor `k`; one that did not read what
//! came before it lacks those units. The choice is made among the clients whose last block
//! costs little to send back (at most [`MAX_ANSWER`] bytes), so a reader pays at most that per
//! mark, not a picture someone put in the document.

use super::guard::{Shape, Tail};

/// The most an answer may cost its sender beyond its delete set (bytes), as the room estimates
/// it: a client whose last block costs more is not asked for.
pub const MAX_ANSWER: u64 = 2048;

/// The most clock units a mark asks for.
pub const MAX_UNITS: u64 = 16;

/// What the answer to a mark must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Anything: the sync step 1 a socket is sent at open, before the document is, and the
    /// marks of a document with no block cheap to send back. An answer to it proves nothing,
    /// so it confirms nothing ([`super::flow`]).
    Anything,
    /// No block of a client the room knew (every block past a first clock): one choice among
    /// the others, so that a blind answer of nothing is a guess too.
    Nothing,
    /// The blocks of `client` from exactly `clock`, and no other block past a first clock.
    From { client: u64, clock: u64 },
}

impl Ask {
    /// Whether an answer of this shape carries what was asked. A client the room did not know
    /// when it marked comes whole (from its first clock), which answers nothing either way.
    pub fn answered_by(&self, answer: &Shape) -> bool {
        let runs = answer.blocks.iter().filter(|&&(_, start, _)| start > 0);
        match *self {
            Ask::Anything => true,
            Ask::Nothing => runs.count() == 0,
            Ask::From { client, clock } => {
                let mut found = false;
                for &(c, start, _) in runs {
                    if c != client || start != clock {
                        return false;
                    }
                    found = true;
                }
                found
            }
        }
    }
}

/// The last block of each client of the document, as the updates that made them said, in the
/// order of their clients (a sorted list: a map's code would weigh more in the Worker's Wasm).
#[derive(Debug, Default)]
pub struct Tails(Vec<Tail>);

impl Tails {
    /// The tails of a whole document, from the shape of its encoding (each client's run ends at
    /// its clock).
    pub fn of_document(shape: &Shape) -> Tails {
        let mut tails = Tails::default();
        tails.record(shape, |_| 0, |_| u64::MAX);
        tails
    }

    /// Notes the tails an applied update brought: those that took their client's clock from
    /// `before` to where it is now (`after`; `u64::MAX` for any end). A block an update repeats
    /// changes nothing: its kind and size are the sender's word, and a member who could make
    /// every client's tail look costly would leave the marks nothing to ask. A block that a
    /// later deletion made cheaper keeps its first cost (an estimate never below the truth).
    pub fn record(
        &mut self,
        shape: &Shape,
        before: impl Fn(u64) -> u64,
        after: impl Fn(u64) -> u64,
    ) {
        let mut fresh = Vec::new();
        for tail in &shape.tails {
            let at = after(tail.client);
            if tail.end > before(tail.client) && (at == u64::MAX || tail.end == at) {
                match self.0.binary_search_by_key(&tail.client, client_of) {
                    Ok(i) => self.0[i] = *tail,
                    Err(_) => fresh.push(*tail),
                }
            }
        }
        if fresh.is_empty() {
            return;
        }
        // Clients the list lacks join it in one sort, not one insert each: an update names its
        // clients highest first (as Yjs and yrs write them, and so does the room's own encoding
        // of the document), and each insert at the front of a sorted list moved all of it:
        // 187,000 clients took seconds of the room's time at every load. Reversed first, so
        // that of a client named twice the stable sort puts the last first, which `dedup`
        // keeps, as above; the list's own tails are of other clients.
        fresh.reverse();
        self.0.append(&mut fresh);
        super::guard::sort_by_u64(&mut self.0, client_of);
        self.0.dedup_by_key(|t| t.client);
    }

    /// What a mark asks for, given the document's clock for each client (`known`) and a random
    /// number (`drawn`): [`Ask::Nothing`] or a run of one to [`MAX_UNITS`] units at the end of a
    /// client whose last block is cheap to send back, every choice as likely (to a bias of
    /// choices over 2⁶⁴, nothing); [`Ask::Anything`] if no block is cheap to send back.
    pub fn ask(&self, known: impl Fn(u64) -> u64, drawn: u64) -> Ask {
        let choices: Vec<u64> = self
            .0
            .iter()
            .map(|tail| {
                if tail.end != known(tail.client) || tail.end < 2 || cost(tail) > MAX_ANSWER {
                    return 0;
                }
                // Within the block (what it costs is known) and never from clock 0 (the
                // client's whole run, which a client that did not read could send).
                (tail.end - tail.start).min(tail.end - 1).min(MAX_UNITS)
            })
            .collect();
        let total: u64 = choices.iter().sum();
        if total == 0 {
            return Ask::Anything;
        }
        let mut drawn = drawn % (total + 1);
        for (tail, n) in self.0.iter().zip(choices) {
            if drawn < n {
                return Ask::From { client: tail.client, clock: tail.end - 1 - drawn };
            }
            drawn -= n;
        }
        Ask::Nothing
    }
}

/// The key the list is sorted by.
fn client_of(tail: &Tail) -> u64 {
    tail.client
}

/// What sending back the end of this block may cost at most (bytes): a string's units are at
/// most three bytes each; a deleted or collected block's are none; another's are the block.
fn cost(tail: &Tail) -> u64 {
    const HEADER: u64 = 32; // info, origins, the run's header
    match tail.content {
        0 | 1 => HEADER,
        4 => HEADER + 3 * MAX_UNITS,
        _ => HEADER + tail.bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(client: u64, start: u64, end: u64, content: u8, bytes: u64) -> Tail {
        Tail { client, start, end, content, bytes }
    }

    fn shape(tails: &[Tail]) -> Shape {
        Shape { tails: tails.to_vec(), ..Shape::default() }
    }

    #[test]
    fn every_choice_is_drawn_and_none_starts_at_a_first_clock_or_outside_the_last_block() {
        // A string of 40 units ending at 100; a map entry of 300 bytes; a 5 KB picture.
        let doc = shape(&[tail(1, 60, 100, 4, 50), tail(2, 6, 7, 8, 300), tail(3, 0, 1, 3, 5000)]);
        let tails = Tails::of_document(&doc);
        let known = |c: u64| [0, 100, 7, 1][c as usize];
        let asked: Vec<Ask> = (0..18).map(|n| tails.ask(known, n)).collect();
        // 16 units of the string, 1 of the entry, nothing of the picture; or nothing at all:
        // 18 choices, the draw taken modulo their number.
        assert_eq!(tails.ask(known, 18), asked[0]);
        assert_eq!(asked[0], Ask::From { client: 1, clock: 99 });
        assert_eq!(asked[15], Ask::From { client: 1, clock: 84 });
        assert_eq!(asked[16], Ask::From { client: 2, clock: 6 });
        assert_eq!(asked[17], Ask::Nothing);
    }

    #[test]
    fn a_document_of_one_unit_or_of_costly_blocks_has_nothing_to_ask_for() {
        let one = Tails::of_document(&shape(&[tail(1, 0, 1, 4, 5)]));
        assert_eq!(one.ask(|_| 1, 7), Ask::Anything);
        let pictures = Tails::of_document(&shape(&[tail(1, 4, 5, 3, 9000)]));
        assert_eq!(pictures.ask(|_| 5, 7), Ask::Anything);
        // A tail the document has gone past (it grew since) is not asked for either.
        let stale = Tails::of_document(&shape(&[tail(1, 4, 9, 4, 9)]));
        assert_eq!(stale.ask(|_| 12, 7), Ask::Anything);
        assert_eq!(Tails::default().ask(|_| 0, 7), Ask::Anything);
    }

    #[test]
    fn only_the_run_asked_for_answers_it() {
        let ask = Ask::From { client: 7, clock: 40 };
        let answer =
            |blocks: &[(u64, u64, u64)]| Shape { blocks: blocks.to_vec(), ..Shape::default() };
        assert!(ask.answered_by(&answer(&[(7, 40, 41)])));
        // With a client the room did not know (whole, from 0), and nothing else.
        assert!(ask.answered_by(&answer(&[(9, 0, 3), (7, 40, 45)])));
        assert!(!ask.answered_by(&answer(&[])), "nothing");
        assert!(!ask.answered_by(&answer(&[(7, 0, 41)])), "the client's whole run");
        assert!(!ask.answered_by(&answer(&[(7, 39, 41)])), "a guess one unit off");
        assert!(!ask.answered_by(&answer(&[(7, 40, 41), (8, 12, 13)])), "two guesses at once");
        assert!(!ask.answered_by(&answer(&[(7, 40, 41), (7, 45, 46)])), "a second run");
        assert!(Ask::Nothing.answered_by(&answer(&[(9, 0, 3)])));
        assert!(!Ask::Nothing.answered_by(&answer(&[(7, 40, 41)])));
        assert!(Ask::Anything.answered_by(&answer(&[(7, 3, 4)])));
    }

    proptest::proptest! {
        /// Updates naming their clients in any order (highest first, as Yjs writes them,
        /// shuffled, repeated) leave the list sorted, one tail a client, the last recorded.
        #[test]
        fn the_list_is_what_recording_one_tail_at_a_time_into_a_map_gives(
            updates in proptest::collection::vec(
                (proptest::collection::vec((0..400u64, 1..9u64), 0..300), 0..3u8),
                1..6,
            ),
        ) {
            let mut tails = Tails::default();
            let mut model = std::collections::BTreeMap::new();
            for (n, (named, order)) in updates.into_iter().enumerate() {
                let mut named = named;
                match order {
                    0 => named.sort_by_key(|t| std::cmp::Reverse(t.0)),
                    1 => named.sort(),
                    _ => {}
                }
                let all: Vec<Tail> = named
                    .iter()
                    .enumerate()
                    .map(|(i, &(c, end))| tail(c, 0, end, 4, (n * 1000 + i) as u64))
                    .collect();
                // A tail counts when it moved its client's clock: here, past `client % 3`.
                let before = |c: u64| c % 3;
                tails.record(&shape(&all), before, |_| u64::MAX);
                for t in all.iter().filter(|t| t.end > before(t.client)) {
                    model.insert(t.client, *t);
                }
                let expected: Vec<Tail> = model.values().copied().collect();
                proptest::prop_assert_eq!(&tails.0, &expected);
            }
        }
    }
}
