//! Per publish, when its first and its last receiver got it: the first
//! tells the time until a broadcast starts (the hop in, the room's own
//! work, the wait for storage) from the time the broadcast itself takes.
//! Clients note every recorded delivery into lock-free cells, one per
//! publish of a run at a rate.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::stats::Pct;

/// (first µs, last µs, receivers) per publish, `per_publisher` per publisher.
pub struct Spread {
    per_publisher: usize,
    cells: Vec<[AtomicU32; 3]>,
}

impl Spread {
    /// Room for `per_publisher` publishes from each of `publishers`; later
    /// publishes are not noted (0: nothing is).
    pub fn new(publishers: usize, per_publisher: usize) -> Spread {
        let cells = (0..publishers * per_publisher)
            .map(|_| [AtomicU32::new(u32::MAX), AtomicU32::new(0), AtomicU32::new(0)])
            .collect();
        Spread { per_publisher, cells }
    }

    /// Publish `n` of publisher `p` reached a receiver after `latency_us`.
    pub fn note(&self, p: u32, n: u64, latency_us: u32) {
        if n >= self.per_publisher as u64 {
            return;
        }
        let Some(cell) = self.cells.get(p as usize * self.per_publisher + n as usize) else {
            return;
        };
        cell[0].fetch_min(latency_us, Ordering::Relaxed);
        cell[1].fetch_max(latency_us, Ordering::Relaxed);
        cell[2].fetch_add(1, Ordering::Relaxed);
    }

    /// Percentiles of the first and of the last receiver's latency over the
    /// publishes every receiver recorded (one that straddles the start or
    /// the end of the window reached only some of them while recording).
    pub fn first_and_last(&self) -> Option<(Pct, Pct)> {
        let receivers = self.cells.iter().map(|c| c[2].load(Ordering::Relaxed)).max()?;
        if receivers == 0 {
            return None;
        }
        let whole = self.cells.iter().filter(|c| c[2].load(Ordering::Relaxed) == receivers);
        let (mut first, mut last): (Vec<u32>, Vec<u32>) =
            whole.map(|c| (c[0].load(Ordering::Relaxed), c[1].load(Ordering::Relaxed))).unzip();
        Some((Pct::of_us(&mut first), Pct::of_us(&mut last)))
    }
}

#[cfg(test)]
mod tests {
    use super::Spread;

    #[test]
    fn first_and_last_receiver_over_publishes_every_receiver_recorded() {
        let s = Spread::new(2, 4);
        for (p, n, lat) in [(0, 0, 3_000), (0, 0, 9_000), (0, 0, 5_000), (1, 0, 1_000)] {
            s.note(p, n, lat);
        }
        s.note(1, 0, 7_000);
        s.note(1, 0, 2_000);
        // Only two receivers recorded this one: not counted.
        s.note(0, 1, 50_000);
        s.note(0, 1, 60_000);
        // Out of range: ignored, not a panic.
        s.note(0, 4, 1);
        s.note(5, 0, 1);
        let (first, last) = s.first_and_last().expect("publishes were noted");
        assert_eq!(first.count, 2);
        assert_eq!((first.p50, first.max), (1.0, 3.0));
        assert_eq!((last.p50, last.max), (7.0, 9.0));
    }

    #[test]
    fn nothing_noted_gives_nothing() {
        assert!(Spread::new(2, 4).first_and_last().is_none());
        assert!(Spread::new(0, 0).first_and_last().is_none());
    }
}
