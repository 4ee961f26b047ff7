//! How much a document socket has been handed that its client has not shown it read: a member
//! who never reads would otherwise make the runtime buffer every broadcast for it (a room's
//! socket did: +251 MB in 15 s, `tests/README.md`), and y-protocols has no acknowledgement.
//!
//! But every Yjs client answers a sync step 1 with a sync step 2, in order on the socket: so the
//! room sends one as a mark every [`MARK_EVERY`] bytes it hands a socket (up to [`MARK_EVERY_MAX`]
//! for big marks), and the answer to the oldest mark confirms everything sent before it. A socket
//! that owes more than a mark's worth and would be handed past [`WINDOW`] is closed 4013
//! (`slow_reader`): the stock client reconnects, and its sync brings it everything it missed. A
//! socket that owes less may take one frame past the window (a late joiner's whole document, asked
//! for before the client answered the room's first sync step 1), so a socket holds at most the
//! window, or a mark's worth and one frame. The window is the rooms' (1 MiB handed and 4 MiB
//! waiting, there): 4 MiB is 1.6 s of a reader's lag at 2.5 MB/s, and at most 40 MiB for a user's
//! 10 sockets.
//!
//! A y-protocols answer echoes nothing, so a mark asks for something only a reader can send
//! back ([`super::tails`]): a few units at the end of a client drawn at random. An answer
//! without them (a client crafted to send sync steps 2 without reading) is closed 4013
//! (`mark_unread`): a blind answer is a guess, right at most once in two, and every mark is
//! another. A document with no block cheap to send back leaves a mark nothing to ask: its
//! answers confirm nothing, and every socket of it is closed at its window and reconnects (a
//! reader's resync is its state vector and an empty diff).

use std::collections::VecDeque;

use super::guard::Shape;
use super::tails::Ask;

/// Bytes a socket may leave unconfirmed.
pub const WINDOW: u64 = 4 * 1024 * 1024;

/// Bytes handed between marks, at least.
pub const MARK_EVERY: u64 = 256 * 1024;

/// Bytes handed between marks, at most: a mark names every Yjs client of the document (about
/// 12 bytes each, [`super::tails`]), so a document of many clients (a writer can make tens of
/// thousands) makes big marks, and they come at least four times their size apart, so that
/// they are at most a fifth of what a socket is handed while they are under 256 KiB (about
/// 21,000 clients). Past that they stay this far apart, which keeps a reader that answers
/// every mark well inside the window (it owes at most this, a mark and what is in flight) and
/// a socket answering blind guessing at least four times a window.
pub const MARK_EVERY_MAX: u64 = WINDOW / 4;

/// A socket's flow: bytes handed to it, confirmed read, and the marks waiting for an answer.
#[derive(Debug, Default)]
pub struct Flow {
    sent: u64,
    confirmed: u64,
    /// Where each mark waiting for its answer was sent (`sent` after it), and what it asked.
    marks: VecDeque<(u64, Ask)>,
    /// Where the last mark was sent.
    last_mark: u64,
    /// Bytes to hand before the next mark: [`MARK_EVERY`], or four times the last mark's size
    /// up to [`MARK_EVERY_MAX`] (0 until the first mark: [`MARK_EVERY`]).
    every: u64,
}

/// What a sync step 2 says of a socket's reading.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// It answers the oldest mark: everything before it was read.
    Read,
    /// It lacks what the oldest mark asked for: the client did not read the mark.
    Unread,
    /// No mark was waiting (a client's own sync step 2).
    NoMark,
}

/// What to do with a frame for a socket.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Hand it over.
    Send,
    /// Hand it over, then a mark.
    SendAndMark,
    /// The socket reads too slowly: close it instead.
    Close,
}

impl Flow {
    /// A frame of `len` bytes is to be handed to the socket.
    pub fn frame(&mut self, len: usize) -> Verdict {
        let len = len as u64;
        let owed = self.sent - self.confirmed;
        if owed > MARK_EVERY && owed + len > WINDOW {
            return Verdict::Close;
        }
        self.sent += len;
        if self.sent - self.last_mark >= self.every.max(MARK_EVERY) {
            Verdict::SendAndMark
        } else {
            Verdict::Send
        }
    }

    /// A mark of `len` bytes, asking for `ask`, was handed to the socket.
    pub fn marked(&mut self, len: usize, ask: Ask) {
        self.every = (4 * len as u64).clamp(MARK_EVERY, MARK_EVERY_MAX);
        self.sent += len as u64;
        self.last_mark = self.sent;
        self.marks.push_back((self.sent, ask));
    }

    /// The client sent a sync step 2 of this shape: the answer to the oldest mark, which it
    /// confirms if it carries what the mark asked.
    pub fn answered(&mut self, answer: &Shape) -> Answer {
        match self.marks.pop_front() {
            Some((at, ask)) if ask.answered_by(answer) => {
                // An answer to a mark that could not ask for anything (the one at open, and
                // those of a document with no block cheap to send back) proves no reading, so
                // it confirms nothing: such a socket is held to its window too, and reconnects.
                if ask != Ask::Anything {
                    self.confirmed = self.confirmed.max(at);
                }
                Answer::Read
            }
            Some(_) => Answer::Unread,
            None => Answer::NoMark,
        }
    }

    /// Bytes handed and not confirmed.
    #[cfg(test)]
    pub fn owed(&self) -> u64 {
        self.sent - self.confirmed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing() -> Shape {
        Shape::default()
    }

    #[test]
    fn a_reader_that_answers_is_never_closed_and_one_that_does_not_is_at_the_window() {
        let (mut reader, mut hog) = (Flow::default(), Flow::default());
        for flow in [&mut reader, &mut hog] {
            flow.marked(10, Ask::Anything); // the sync step 1 at open
        }
        assert_eq!(reader.answered(&nothing()), Answer::Read);
        let frame = 64 * 1024;
        let mut closed_after = None;
        for n in 0..200 {
            for (flow, answers) in [(&mut reader, true), (&mut hog, false)] {
                match flow.frame(frame) {
                    Verdict::Close => {
                        assert!(!answers, "the reader was closed");
                        closed_after.get_or_insert(n);
                    }
                    Verdict::SendAndMark => {
                        flow.marked(10, Ask::Nothing);
                        if answers {
                            assert_eq!(flow.answered(&nothing()), Answer::Read);
                        }
                    }
                    Verdict::Send => {}
                }
            }
        }
        // 63 frames of 64 KiB and 16 marks fit in 4 MiB; the 64th would not.
        assert_eq!(closed_after, Some(63), "the hog is closed when the window is full");
        assert!(hog.owed() <= WINDOW);
        assert!(reader.owed() < MARK_EVERY + frame as u64);
    }

    #[test]
    fn big_marks_come_at_least_four_times_their_size_apart_up_to_a_quarter_window() {
        // A document of many Yjs clients makes marks of tens or hundreds of KiB: at one every
        // 256 KiB, a mark of 200 KiB would be nearly half of what a reader is handed.
        for (mark, apart) in [(10, MARK_EVERY), (200 * 1024, 800 * 1024), (3 << 20, MARK_EVERY_MAX)]
        {
            let mut flow = Flow::default();
            flow.marked(10, Ask::Anything);
            assert_eq!(flow.answered(&nothing()), Answer::Read);
            let (frame, mut framed, mut marks) = (16 * 1024, 0u64, 0u64);
            for _ in 0..2_000 {
                match flow.frame(frame) {
                    Verdict::Close => panic!("a reader with marks of {mark} bytes was closed"),
                    Verdict::SendAndMark => {
                        flow.marked(mark, Ask::Nothing);
                        marks += mark as u64;
                        assert_eq!(flow.answered(&nothing()), Answer::Read);
                    }
                    Verdict::Send => {}
                }
                framed += frame as u64;
            }
            let expected = framed / apart;
            let count = marks / mark as u64;
            assert!(count.abs_diff(expected) <= 1, "{mark}: {count} marks, {expected} expected");
            if mark <= 256 * 1024 {
                assert!(marks * 4 <= framed + mark as u64, "{mark}: {marks} of {framed}");
            }
        }
    }

    #[test]
    fn a_late_joiner_takes_a_document_past_the_window_before_answering_the_first_mark() {
        let mut flow = Flow::default();
        flow.marked(10, Ask::Anything); // the room's sync step 1, not answered yet
        assert_eq!(flow.frame(5 * 1024 * 1024), Verdict::SendAndMark, "the whole document");
        flow.marked(10, Ask::From { client: 3, clock: 9 });
        assert_eq!(flow.frame(10), Verdict::Close, "and nothing after it until it is read");
        let tail = Shape { blocks: vec![(3, 9, 10)], ..Shape::default() };
        assert_eq!(flow.answered(&nothing()), Answer::Read);
        assert_eq!(flow.answered(&tail), Answer::Read);
        assert_eq!(flow.answered(&tail), Answer::NoMark);
        assert_ne!(flow.frame(10), Verdict::Close);
    }

    #[test]
    fn answers_to_marks_that_could_ask_for_nothing_confirm_nothing() {
        // A document with no block cheap to send back: every mark asks for anything, and a
        // reader answering each is held to the window like a socket that answers blind.
        let mut flow = Flow::default();
        let mut closed = false;
        for _ in 0..100 {
            match flow.frame(64 * 1024) {
                Verdict::Close => closed = true,
                Verdict::SendAndMark => flow.marked(10, Ask::Anything),
                Verdict::Send => {}
            }
            if closed {
                break;
            }
            let _ = flow.answered(&nothing());
        }
        assert!(closed, "closed at the window");
        assert!(flow.owed() <= WINDOW);
    }

    #[test]
    fn an_answer_without_what_the_mark_asked_confirms_nothing() {
        let mut flow = Flow::default();
        flow.marked(10, Ask::Anything);
        flow.marked(10, Ask::From { client: 3, clock: 9 });
        assert_eq!(flow.answered(&nothing()), Answer::Read);
        let owed = flow.owed();
        assert_eq!(flow.answered(&nothing()), Answer::Unread);
        assert_eq!(flow.owed(), owed, "nothing confirmed");
    }
}
