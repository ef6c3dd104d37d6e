//! Now and then the link drains, and one frame alone on it measures the round
//! trip anew (BBR's ProbeRTT): a queue that stood from the start (the first
//! frames are sent before the link is known) is in every round trip after it,
//! and so in the shortest, and the window made of it keeps that queue standing.
//! A frame that went alone anyway (a stream below the link) measures it as
//! well and puts the next drain off.

use std::time::{Duration, Instant};

/// How long after the first acknowledgement the link first drains, and then
/// how often. bench-9: an inflated shortest round trip in 0 of 6 runs against
/// 1 of 6 without the drain; the unit test `a_queue_the_first_frames_left_is_drained_and_not_kept`
/// (115 ms against 169).
const RTT_PROBE_FIRST: Duration = Duration::from_secs(2);
const RTT_PROBE_EVERY: Duration = Duration::from_secs(8);

/// Where the link stands between drains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Drain {
    /// Nothing acknowledged yet.
    #[default]
    Unmeasured,
    /// The first drain is due `at`: frames that go alone before it are the
    /// first frames, sent before the link was known, as large as they come.
    First { at: Instant },
    /// The next drain is due `at`; a frame that goes alone meanwhile measured
    /// the round trip and puts it off.
    Next { at: Instant },
    /// Nothing more is sent until what is in flight is acknowledged and one
    /// frame went alone.
    Draining,
}

impl Drain {
    /// Whether it drains: nothing is sent beside a frame in flight.
    pub(super) fn draining(self) -> bool {
        self == Drain::Draining
    }

    /// After an acknowledgement at `now`, of a frame sent `alone` (nothing else in flight).
    pub(super) fn acked(&mut self, now: Instant, alone: bool) {
        *self = match *self {
            Drain::Unmeasured => Drain::First { at: now + RTT_PROBE_FIRST },
            Drain::Next { .. } | Drain::Draining if alone => Drain::Next { at: now + RTT_PROBE_EVERY },
            Drain::First { at } | Drain::Next { at } if now >= at => Drain::Draining,
            state => state,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_drains_when_due_until_a_frame_went_alone_and_a_lone_frame_puts_it_off() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let mut d = Drain::default();
        d.acked(t, true);
        assert_eq!(d, Drain::First { at: t + RTT_PROBE_FIRST });
        // Before the first drain, a frame alone is one of the first: it measures nothing.
        d.acked(t + s(1), true);
        assert_eq!(d, Drain::First { at: t + RTT_PROBE_FIRST });
        d.acked(t + RTT_PROBE_FIRST, false);
        assert!(d.draining());
        d.acked(t + s(3), false);
        assert!(d.draining(), "until a frame went alone");
        d.acked(t + s(4), true);
        assert_eq!(d, Drain::Next { at: t + s(4) + RTT_PROBE_EVERY });
        // A frame alone meanwhile (a stream below the link) puts the next drain off.
        d.acked(t + s(5), true);
        assert_eq!(d, Drain::Next { at: t + s(5) + RTT_PROBE_EVERY });
        d.acked(t + s(5) + RTT_PROBE_EVERY, false);
        assert!(d.draining());
    }
}
