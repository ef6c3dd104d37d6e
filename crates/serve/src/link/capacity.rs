//! The link's capacity: the highest delivery rate seen. It falls only on the
//! link's own word that it carries less: round trips far above the shortest,
//! twice in a row, say a queue builds, and the frame waited for the window, or
//! it waited on the way while a queue stands (the frames in flight when a link
//! falls went before anything waited for the window, and would hold the
//! capacity up until all were acknowledged, a second and more at the new
//! rate). A stream below the link, a page slow for a frame or two (its round
//! trips long, its rate low, frames waiting for its decoder), a key frame: none
//! lowers it.

use std::time::{Duration, Instant};

use super::flight::Sample;

/// A round trip this many times the shortest (and at least [`QUEUE_FLOOR`]
/// above it) says a queue builds. bench-17 (E1) and bench-30 (2026-11-29):
/// the fall from 50 to 5 Mbit/s back under 200 ms within 2 s in 11 of 11 rows.
const QUEUE_FACTOR: f64 = 2.0;
/// The least queueing delay that says a queue builds (frame sizes and decodes
/// vary by tens of ms): measured with [`QUEUE_FACTOR`].
const QUEUE_FLOOR: Duration = Duration::from_millis(60);

/// A capacity measured, and since when.
#[derive(Clone, Copy, Debug)]
struct Measured {
    /// Bytes a second.
    rate: f64,
    /// The first acknowledgement's time.
    since: Instant,
}

/// The link's capacity, from the rate samples.
#[derive(Debug, Default)]
pub(super) struct Capacity {
    measured: Option<Measured>,
    /// Whether the newest round trip said a queue builds (two in a row: it does).
    queued: bool,
}

impl Capacity {
    /// Bytes a second, once measured.
    pub(super) fn rate(&self) -> Option<f64> {
        self.measured.map(|m| m.rate)
    }

    /// How long it has been measured, at `now`.
    pub(super) fn measured_for(&self, now: Instant) -> Duration {
        self.measured.map_or(Duration::ZERO, |m| now.saturating_duration_since(m.since))
    }

    /// How long `bytes` take to cross the link at its capacity, once measured.
    pub(super) fn crossing(&self, bytes: u64) -> Option<Duration> {
        // At least a byte a second: no division by nothing.
        self.rate().map(|rate| Duration::from_secs_f64(bytes as f64 / rate.max(1.0)))
    }

    /// Takes sample `s`, acknowledged at `now` with `min_rtt` the shortest
    /// round trip; `on_the_way`: its frame found the page idle while a queue
    /// stands (a wait it had was on the way, not at the page's decoder).
    pub(super) fn take(&mut self, now: Instant, s: Sample, min_rtt: Option<Duration>, on_the_way: bool) {
        let queued = min_rtt.is_some_and(|min| s.rtt > min.mul_f64(QUEUE_FACTOR).max(min + QUEUE_FLOOR));
        let building = queued && self.queued;
        self.queued = queued;
        let said = s.limited || on_the_way;
        let since = self.measured.map_or(now, |m| m.since);
        match self.measured {
            Some(m) if s.rate <= m.rate && !(building && said) => {}
            _ => self.measured = Some(Measured { rate: s.rate, since }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn sample(rtt: u64, rate: f64, limited: bool) -> Sample {
        Sample { rtt: MS(rtt), rate, limited }
    }

    #[test]
    fn a_higher_rate_raises_it_and_a_lower_one_does_not() {
        let t = Instant::now();
        let mut c = Capacity::default();
        assert_eq!((c.rate(), c.measured_for(t), c.crossing(1)), (None, Duration::ZERO, None));
        c.take(t, sample(50, 1e6, false), Some(MS(50)), false);
        c.take(t + MS(10), sample(50, 2e6, false), Some(MS(50)), false);
        c.take(t + MS(20), sample(50, 0.5e6, true), Some(MS(50)), true);
        assert_eq!(c.rate(), Some(2e6));
        assert_eq!(c.measured_for(t + MS(30)), MS(30), "measured since its first sample");
        assert_eq!(c.crossing(1_000_000), Some(MS(500)));
    }

    #[test]
    fn it_falls_on_two_queued_round_trips_and_the_links_word() {
        let t = Instant::now();
        let min = Some(MS(50));
        // Over 110 ms: over twice 50 and 60 ms more.
        let mut c = Capacity::default();
        c.take(t, sample(50, 2e6, false), min, false);
        c.take(t, sample(111, 1e6, true), min, false);
        assert_eq!(c.rate(), Some(2e6), "one queued round trip is no queue");
        c.take(t, sample(112, 1e6, true), min, false);
        assert_eq!(c.rate(), Some(1e6), "two in a row, and the frame waited for the window");
        // Queued twice, but the stream was below the link: nothing said.
        c.take(t, sample(120, 0.5e6, false), min, false);
        assert_eq!(c.rate(), Some(1e6));
        // Its frame found the page idle while a queue stands: the link said it.
        c.take(t, sample(120, 0.5e6, false), min, true);
        assert_eq!(c.rate(), Some(0.5e6));
        // 110 ms is not over 60 ms more than the shortest: no queue.
        c.take(t, sample(110, 0.2e6, true), min, true);
        c.take(t, sample(110, 0.2e6, true), min, true);
        assert_eq!(c.rate(), Some(0.5e6));
    }
}
