//! Pacing (BBR's): when the link will have carried what was sent, at its
//! capacity. The next frame is drawn when that is by the time it is ready (its
//! draw and encode), but for its own crossing time: it may wait behind others
//! that long (so the link stays busy when frames come faster than it carries,
//! and measures what it carries), never behind a large frame's whole crossing.

use std::time::{Duration, Instant};

/// When the link is free again.
#[derive(Debug, Default)]
pub(super) struct Pacing {
    free_at: Option<Instant>,
}

impl Pacing {
    /// A frame that takes `crossing` to cross (unknown before the capacity is
    /// measured) was sent at `now`, `alone` (nothing else in flight: it starts
    /// at once) or after those in flight.
    pub(super) fn sent(&mut self, now: Instant, crossing: Option<Duration>, alone: bool) {
        if let Some(crossing) = crossing {
            let start = self.free_at.filter(|free| *free > now && !alone).unwrap_or(now);
            self.free_at = Some(start + crossing);
        }
    }

    /// Whether the link will have carried what was sent by `ready`.
    pub(super) fn free_by(&self, ready: Instant) -> bool {
        self.free_at.is_none_or(|free| free <= ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_sent_together_cross_one_after_the_other_and_a_lone_one_at_once() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut p = Pacing::default();
        p.sent(t, None, true);
        assert!(p.free_by(t), "nothing known");
        p.sent(t, Some(ms(30)), true);
        p.sent(t + ms(10), Some(ms(30)), false);
        assert!(!p.free_by(t + ms(59)) && p.free_by(t + ms(60)));
        // Alone: what went before was acknowledged, the link is free.
        p.sent(t + ms(20), Some(ms(5)), true);
        assert!(p.free_by(t + ms(25)));
        // Behind a frame whose crossing ended already: from now.
        p.sent(t + ms(40), Some(ms(5)), false);
        assert!(!p.free_by(t + ms(44)) && p.free_by(t + ms(45)));
    }
}
