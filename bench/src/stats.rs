//! Percentiles (nearest rank), medians, and the storm's "back to normal"
//! analysis over latency samples bucketed by receive time.

use serde::{Deserialize, Serialize};

/// Percentiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Pct {
    pub count: usize,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Pct {
    /// From microsecond values (sorted in place).
    pub fn of_us(values: &mut [u32]) -> Pct {
        values.sort_unstable();
        let ms = |v: Option<u32>| v.map_or(0.0, |v| v as f64 / 1000.0);
        Pct {
            count: values.len(),
            p50: ms(rank(values, 0.50)),
            p95: ms(rank(values, 0.95)),
            p99: ms(rank(values, 0.99)),
            max: ms(values.last().copied()),
        }
    }
}

/// Nearest-rank percentile of sorted values.
pub fn rank(sorted: &[u32], q: f64) -> Option<u32> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i])
}

pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// The end (ms) of the last bucket after `from_ms` whose p99 latency is
/// above `threshold_us`, and whether at least `calm` buckets with samples
/// came after it (so the run saw latency back to normal). Samples are
/// (receive ms, latency µs).
pub fn last_slow_bucket(
    samples: &[(u32, u32)],
    from_ms: u32,
    bucket_ms: u32,
    threshold_us: u32,
    calm: usize,
) -> (Option<u32>, bool) {
    let mut buckets: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for &(at, lat) in samples.iter().filter(|(at, _)| *at >= from_ms) {
        buckets.entry((at - from_ms) / bucket_ms).or_default().push(lat);
    }
    let mut last_slow = None;
    let mut calm_after = 0;
    for (b, lats) in buckets.iter_mut() {
        lats.sort_unstable();
        if rank(lats, 0.99).unwrap_or(0) > threshold_us {
            last_slow = Some(from_ms + (b + 1) * bucket_ms);
            calm_after = 0;
        } else {
            calm_after += 1;
        }
    }
    (last_slow, calm_after >= calm)
}

/// Per bucket of `bucket_ms` from `from_ms` on: (s after `from_ms`,
/// samples, p50 ms, p99 ms).
pub fn timeline(
    samples: &[(u32, u32)],
    from_ms: u32,
    bucket_ms: u32,
) -> Vec<(f64, usize, f64, f64)> {
    let mut buckets: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for &(at, lat) in samples.iter().filter(|(at, _)| *at >= from_ms) {
        buckets.entry((at - from_ms) / bucket_ms).or_default().push(lat);
    }
    buckets
        .into_iter()
        .map(|(b, mut lats)| {
            lats.sort_unstable();
            let ms = |q| rank(&lats, q).unwrap_or(0) as f64 / 1000.0;
            ((b * bucket_ms) as f64 / 1000.0, lats.len(), ms(0.5), ms(0.99))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_medians() {
        let mut v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        let p = Pct::of_us(&mut v);
        assert_eq!((p.count, p.p50, p.p95, p.p99, p.max), (100, 50.0, 95.0, 99.0, 100.0));
        assert_eq!(Pct::of_us(&mut []).count, 0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn slow_buckets_end_where_latency_is_back() {
        // 0-999 ms slow (500 ms latency), then fast for 2 s.
        let mut s: Vec<(u32, u32)> = (0..1000).step_by(10).map(|t| (1000 + t, 500_000)).collect();
        s.extend((1000..3000).step_by(10).map(|t| (1000 + t, 5_000)));
        let (end, calm) = last_slow_bucket(&s, 1000, 250, 50_000, 4);
        assert_eq!(end, Some(2000));
        assert!(calm);
        let (end, calm) = last_slow_bucket(&s[..100], 1000, 250, 50_000, 1);
        assert_eq!(end, Some(2000));
        assert!(!calm, "never saw it calm");
    }
}
