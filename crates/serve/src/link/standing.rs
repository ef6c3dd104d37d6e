//! Whether a queue stands on the link: every frame acknowledged over a span
//! (two shortest round trips, at least [`STANDING`]) queued, its round trip
//! over the shortest, less its own crossing, more than a slack. A large frame
//! queues the few after it as it passes: that queue does not stand (CoDel's
//! test: the least delay over an interval). While one stands the link fell,
//! and frames sized for it wait: nothing waits behind another and the window
//! counts no largest frame, so the queue drains.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The least queue that stands: each frame's queueing over this (or over a
/// [`SLACK_SHARE`] of the shortest round trip). bench-17, 2026-11-28 (E2,
/// CoDel's test): 20 Mbit/s 40.0, 40.4, 34.8 frames/s against 32.2, 26.6, 32.2.
const QUEUE_SLACK: Duration = Duration::from_millis(5);
/// The shortest round trip over this is the slack where that is more than [`QUEUE_SLACK`] (E2).
const SLACK_SHARE: u32 = 4;
/// How long a queue stands before it counts: this, or [`STANDING_RTTS`]
/// shortest round trips (E2, as [`QUEUE_SLACK`]).
pub(super) const STANDING: Duration = Duration::from_millis(100);
/// Shortest round trips a queue, or frames waiting at the page, stands before it counts (E2).
const STANDING_RTTS: u32 = 2;

/// How long a queue, or frames waiting at the page, must stand to count:
/// [`STANDING_RTTS`] shortest round trips, at least [`STANDING`].
pub(super) fn span(min_rtt: Option<Duration>) -> Duration {
    min_rtt.map_or(STANDING, |r| (r * STANDING_RTTS).max(STANDING))
}

/// One acknowledged frame's time queued on the link.
#[derive(Clone, Copy, Debug)]
struct Delay {
    /// When it was acknowledged.
    at: Instant,
    queued: Duration,
}

/// The frames' queueing over the last span (the newest always), oldest first.
#[derive(Debug, Default)]
pub(super) struct StandingQueue {
    delays: VecDeque<Delay>,
}

impl StandingQueue {
    /// A frame acknowledged at `now` queued `queued`; those older than `span` leave, but the newest.
    pub(super) fn note(&mut self, now: Instant, queued: Duration, span: Duration) {
        self.delays.push_back(Delay { at: now, queued });
        while self.delays.len() > 1 && self.delays.front().is_some_and(|d| now.duration_since(d.at) > span) {
            self.delays.pop_front();
        }
    }

    /// Whether a queue stands, `min_rtt` the shortest round trip: every frame
    /// of the span queued more than [`QUEUE_SLACK`] or a [`SLACK_SHARE`] of it.
    pub(super) fn stands(&self, min_rtt: Option<Duration>) -> bool {
        let least = self.delays.iter().map(|d| d.queued).min().unwrap_or_default();
        least > min_rtt.map_or(Duration::ZERO, |r| r / SLACK_SHARE).max(QUEUE_SLACK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_queue_stands_once_every_frame_of_the_span_queued() {
        let t = Instant::now();
        let min = Some(MS(40));
        let mut q = StandingQueue::default();
        assert!(!q.stands(min), "nothing measured");
        q.note(t, MS(0), span(min));
        q.note(t + MS(50), MS(30), span(min));
        assert!(!q.stands(min), "a frame of the span queued nothing");
        // 100 ms on (two shortest round trips of 40 ms are less than STANDING): the quiet frame left.
        q.note(t + MS(101), MS(30), span(min));
        assert!(q.stands(min));
        // 10 ms is a quarter of 40 ms: not more than the slack.
        q.note(t + MS(120), MS(10), span(min));
        assert!(!q.stands(min));
    }

    #[test]
    fn the_span_is_two_shortest_round_trips_at_least_standing_and_the_newest_stays() {
        assert_eq!([None, Some(MS(20)), Some(MS(80))].map(span), [STANDING, STANDING, MS(160)]);
        let t = Instant::now();
        let mut q = StandingQueue::default();
        q.note(t, MS(30), STANDING);
        q.note(t + Duration::from_secs(5), MS(30), STANDING);
        assert_eq!(q.delays.len(), 1, "the newest, alone");
        assert!(q.stands(None), "5 ms slack with no round trip known");
        q.note(t + Duration::from_secs(5), MS(5), STANDING);
        assert!(!q.stands(None), "not more than the slack");
    }
}
