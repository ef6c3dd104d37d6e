//! Small statistics helpers.

use std::time::Duration;

/// The most frames whose stage times are kept.
pub const STAGE_SAMPLES: usize = 100_000;

/// Keeps `d` in `list` while it holds fewer than [`STAGE_SAMPLES`].
pub fn push_bounded(list: &mut Vec<Duration>, d: Duration) {
    if list.len() < STAGE_SAMPLES {
        list.push(d);
    }
}

/// The median of `samples` (the mean of the middle two for an even count).
pub fn median(samples: &[Duration]) -> Option<Duration> {
    // Whole nanoseconds are exact in an f64 up to 104 days.
    let ns: Vec<f64> = samples.iter().map(|d| d.as_nanos() as f64).collect();
    median_f64(&ns).map(|n| Duration::from_nanos(n as u64))
}

/// The median of `samples` (the mean of the middle two for an even count).
pub fn median_f64(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 })
}

/// Formats a duration in µs with one decimal.
pub fn micros(d: Option<Duration>) -> String {
    d.map_or_else(|| "n/a".into(), |d| format!("{:.1} µs", d.as_secs_f64() * 1e6))
}

/// Per-frame samples in bounded memory: every frame is kept until there are
/// [`Samples::CAP`]; then every other one is dropped and only every 2nd frame
/// is kept from then on (then every 4th…). A run of any length keeps a
/// uniform sample of its frames, and two series kept this way (producer and
/// consumer) still share the frames they keep.
#[derive(Clone, Debug)]
pub struct Samples<T> {
    stride: u64,
    items: Vec<(u64, T)>,
    next: u64,
}

impl<T> Default for Samples<T> {
    fn default() -> Self {
        Self { stride: 1, items: Vec::new(), next: 0 }
    }
}

impl<T> Samples<T> {
    /// Most samples kept.
    pub const CAP: usize = 1 << 16;

    /// Records `value` for `frame`; frames must come in rising order.
    pub fn push(&mut self, frame: u64, value: T) {
        self.next = frame + 1;
        if frame % self.stride != 0 {
            return;
        }
        if self.items.len() >= Self::CAP {
            self.stride *= 2;
            let stride = self.stride;
            self.items.retain(|(f, _)| f % stride == 0);
            if frame % stride != 0 {
                return;
            }
        }
        self.items.push((frame, value));
    }

    /// The sample of `frame`, if kept.
    pub fn get(&self, frame: u64) -> Option<&T> {
        let i = self.items.binary_search_by_key(&frame, |(f, _)| *f).ok()?;
        Some(&self.items[i].1)
    }

    /// The kept samples, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &(u64, T)> {
        self.items.iter()
    }

    /// One past the last frame pushed (kept or not).
    pub fn next_frame(&self) -> u64 {
        self.next
    }

    /// Number of samples kept.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no sample is kept.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        let us = Duration::from_micros;
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[us(5), us(1), us(3)]), Some(us(3)));
        assert_eq!(median(&[us(4), us(1), us(3), us(2)]), Some(Duration::from_nanos(2500)));
        assert_eq!(micros(Some(us(7))), "7.0 µs");
    }

    #[test]
    fn samples_stay_bounded_and_aligned() {
        let (mut a, mut b) = (Samples::default(), Samples::default());
        let n = 3 * Samples::<u64>::CAP as u64 + 17;
        for f in 0..n {
            a.push(f, f * 10);
            if f < n - 1000 {
                b.push(f, f);
            }
        }
        assert!(a.len() <= Samples::<u64>::CAP && a.len() > Samples::<u64>::CAP / 2);
        assert_eq!(a.get(0), Some(&0));
        // Every frame a kept (the larger stride) that b saw is kept by b too.
        assert!(a.iter().filter(|(f, _)| *f < n - 1000).all(|(f, _)| b.get(*f) == Some(f)));
        assert!(a.iter().zip(a.iter().skip(1)).all(|(x, y)| x.0 < y.0));
    }
}
