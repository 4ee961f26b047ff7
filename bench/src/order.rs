//! One receiver's correctness checks. homeroom: every `message` seq is
//! exactly the last one + 1 (replays after a resume included), and no
//! publish is sequenced twice. Baselines (no seq): each publisher's counter
//! arrives exactly +1 at a time. Also tells when a receiver has everything
//! the publishers sent.

use crate::target::Protocol;
use crate::wire::Payload;

/// What one delivered message was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The next one: applied.
    Fresh,
    /// Seen already (or a publish delivered a second time under a new seq).
    Duplicate,
    /// Applied, but this many messages before it never arrived.
    Gap(u64),
}

#[derive(Debug, Clone)]
pub struct Order {
    protocol: Protocol,
    /// The highest seq applied (homeroom), from the first welcome on.
    last_seq: Option<u64>,
    /// Per publisher, the counter expected next.
    next_n: Vec<u64>,
    /// Gap events and the messages they skipped.
    pub gaps: u64,
    pub missing: u64,
    pub duplicates: u64,
}

impl Order {
    pub fn new(protocol: Protocol, publishers: usize) -> Order {
        Order {
            protocol,
            last_seq: None,
            next_n: vec![0; publishers],
            gaps: 0,
            missing: 0,
            duplicates: 0,
        }
    }

    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// A first welcome: live messages start after `seq`.
    pub fn welcome(&mut self, seq: u64) {
        if self.last_seq.is_none() {
            self.last_seq = Some(seq);
        }
    }

    /// A `resync`: the client rebuilds from state; seq continues from `seq`
    /// and the skipped publishes count as missing.
    pub fn resync(&mut self, seq: u64) {
        if let Some(last) = self.last_seq {
            if seq > last {
                self.gaps += 1;
                self.missing += seq - last;
            }
        }
        self.last_seq = Some(seq);
        self.next_n.iter_mut().for_each(|n| *n = u64::MAX); // rebase on the next one seen
    }

    pub fn message(&mut self, seq: Option<u64>, payload: Option<Payload>) -> Verdict {
        let mut verdict = Verdict::Fresh;
        if self.protocol == Protocol::Homeroom {
            let Some(seq) = seq else {
                return Verdict::Fresh; // not a homeroom message frame
            };
            match self.last_seq {
                Some(last) if seq <= last => {
                    self.duplicates += 1;
                    return Verdict::Duplicate;
                }
                Some(last) if seq > last + 1 => {
                    self.gaps += 1;
                    self.missing += seq - last - 1;
                    verdict = Verdict::Gap(seq - last - 1);
                }
                _ => {}
            }
            self.last_seq = Some(seq);
        }
        let Some(payload) = payload else {
            return verdict;
        };
        let Some(next) = self.next_n.get_mut(payload.p as usize) else {
            return verdict; // a publisher of another run
        };
        if *next == u64::MAX || payload.n == *next {
            *next = payload.n + 1;
        } else if payload.n < *next {
            self.duplicates += 1;
            return Verdict::Duplicate;
        } else {
            let skipped = payload.n - *next;
            *next = payload.n + 1;
            if verdict == Verdict::Fresh {
                self.gaps += 1;
                self.missing += skipped;
                verdict = Verdict::Gap(skipped);
            }
        }
        verdict
    }

    /// Whether every publish up to `sent[p]` (exclusive) of every publisher
    /// has arrived.
    pub fn has_all(&self, sent: &[u64]) -> bool {
        self.next_n.iter().zip(sent).all(|(next, sent)| *next != u64::MAX && *next >= *sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pl(p: u32, n: u64) -> Option<Payload> {
        Some(Payload { t: 0, p, n })
    }

    #[test]
    fn homeroom_seq_must_be_plus_one() {
        let mut o = Order::new(Protocol::Homeroom, 1);
        o.welcome(10);
        assert_eq!(o.message(Some(11), pl(0, 0)), Verdict::Fresh);
        assert_eq!(o.message(Some(11), pl(0, 0)), Verdict::Duplicate);
        assert_eq!(o.message(Some(14), pl(0, 3)), Verdict::Gap(2));
        assert_eq!((o.gaps, o.missing, o.duplicates), (1, 2, 1));
        // the same publish sequenced twice is a duplicate although its seq is new
        assert_eq!(o.message(Some(15), pl(0, 3)), Verdict::Duplicate);
        // a message that is not the bench's still counts for seq
        assert_eq!(o.message(Some(16), None), Verdict::Fresh);
        assert!(o.has_all(&[4]));
        assert!(!o.has_all(&[5]));
        // a resume welcome does not move the seq back
        o.welcome(3);
        assert_eq!(o.last_seq(), Some(16));
    }

    #[test]
    fn raw_counters_per_publisher() {
        let mut o = Order::new(Protocol::Raw, 2);
        assert_eq!(o.message(None, pl(0, 0)), Verdict::Fresh);
        assert_eq!(o.message(None, pl(1, 0)), Verdict::Fresh);
        assert_eq!(o.message(None, pl(0, 1)), Verdict::Fresh);
        assert_eq!(o.message(None, pl(1, 2)), Verdict::Gap(1));
        assert_eq!(o.message(None, pl(0, 1)), Verdict::Duplicate);
        assert_eq!((o.gaps, o.missing, o.duplicates), (1, 1, 1));
        assert!(o.has_all(&[2, 3]));
    }

    #[test]
    fn resync_counts_what_it_skipped() {
        let mut o = Order::new(Protocol::Homeroom, 1);
        o.welcome(0);
        o.message(Some(1), pl(0, 0));
        o.resync(50);
        assert_eq!((o.gaps, o.missing), (1, 49));
        assert_eq!(o.message(Some(51), pl(0, 60)), Verdict::Fresh, "rebased");
    }
}
