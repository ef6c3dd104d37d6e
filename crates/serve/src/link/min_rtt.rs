//! The shortest round trip of the last [`RTT_WINDOW`] (BBR's min-RTT filter):
//! the link's own delay, with the page's decode of a lone frame, and no queue.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long the shortest round trip is remembered: a minimum kept longer goes
/// stale when the path changes, one kept shorter takes in a queue that stood
/// the whole window. Design (BBR's min-RTT window, 10 s), docs/streaming.md's
/// tuning table; the drain ([`super::drain`]) measures it anew well within it.
pub(super) const RTT_WINDOW: Duration = Duration::from_secs(10);

/// One round trip measured.
#[derive(Clone, Copy, Debug)]
struct Round {
    /// When its acknowledgement came.
    at: Instant,
    rtt: Duration,
}

/// The round trips of the last [`RTT_WINDOW`], oldest first.
#[derive(Debug, Default)]
pub(super) struct MinRtt {
    rounds: VecDeque<Round>,
}

impl MinRtt {
    /// Takes round trip `rtt`, measured at `now`; those older than the window leave.
    pub(super) fn update(&mut self, now: Instant, rtt: Duration) {
        self.rounds.push_back(Round { at: now, rtt });
        while self.rounds.front().is_some_and(|r| now.duration_since(r.at) > RTT_WINDOW) {
            self.rounds.pop_front();
        }
    }

    /// The shortest round trip of the window, once one was measured.
    pub(super) fn get(&self) -> Option<Duration> {
        self.rounds.iter().map(|r| r.rtt).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_of_the_window_and_a_minimum_older_than_it_is_forgotten() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut m = MinRtt::default();
        assert_eq!(m.get(), None);
        m.update(t, ms(50));
        m.update(t + ms(10), ms(80));
        assert_eq!(m.get(), Some(ms(50)));
        // The 50 ms round trip is older than the window once 10 s and more have passed.
        m.update(t + RTT_WINDOW, ms(90));
        assert_eq!(m.get(), Some(ms(50)), "exactly the window: still in it");
        m.update(t + RTT_WINDOW + ms(1), ms(90));
        assert_eq!(m.get(), Some(ms(80)));
        m.update(t + RTT_WINDOW * 3, ms(120));
        assert_eq!(m.get(), Some(ms(120)), "only the newest is left");
    }
}
