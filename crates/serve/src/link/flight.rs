//! The frames in flight and the bytes delivered: each acknowledgement's
//! delivery rate (BBR's rate sample: the bytes acknowledged over the time they
//! took, counted from the last acknowledgement before the frame was sent) and
//! its round trip.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The least time a rate sample is taken over: acknowledgements read in one
/// burst come microseconds apart, and a rate over no time has no bound. Design
/// (a bound, not a tuning: far below any frame's time in flight).
const LEAST_ELAPSED: Duration = Duration::from_micros(100);

/// What one acknowledgement measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// The frame's round trip: sent to acknowledged (its transfer and the page's decode included).
    pub rtt: Duration,
    /// Bytes a second delivered over the frame's time in flight.
    pub rate: f64,
    /// Whether the link was the limit (else the rate is only a lower bound of what it carries).
    pub limited: bool,
}

/// A frame sent and not yet acknowledged.
#[derive(Clone, Copy, Debug)]
pub(super) struct InFlight {
    frame: u64,
    /// Its size.
    pub(super) bytes: u64,
    sent: Instant,
    /// Bytes acknowledged before it was sent, and when the last of them was
    /// (its send time when nothing was in flight).
    delivered: u64,
    delivered_at: Instant,
    /// Whether the link was the limit when it was sent (it, or the draw for it, waited for the window).
    limited: bool,
    /// Whether nothing else was in flight when it was sent.
    pub(super) alone: bool,
    /// The frames in flight once it was sent, itself among them.
    pub(super) frames: usize,
}

/// What an acknowledgement told: the frame, what it measured, and when the acknowledgement before it came.
#[derive(Clone, Copy, Debug)]
pub(super) struct Acked {
    pub(super) frame: InFlight,
    pub(super) sample: Sample,
    pub(super) previous: Option<Instant>,
}

/// The frames sent and not yet acknowledged, oldest first, and the bytes delivered so far.
#[derive(Debug, Default)]
pub(super) struct Flight {
    frames: VecDeque<InFlight>,
    delivered: u64,
    last_ack: Option<Instant>,
    /// Whether a draw waited for the window since the last frame was sent: the
    /// next frame sent is limited by the link (BBR's app-limited mark, the other way round).
    blocked: bool,
}

impl Flight {
    /// Bytes in flight.
    pub(super) fn bytes(&self) -> u64 {
        self.frames.iter().map(|f| f.bytes).sum()
    }

    /// Frames in flight.
    pub(super) fn len(&self) -> usize {
        self.frames.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The largest frame in flight (0: none).
    pub(super) fn largest(&self) -> u64 {
        self.frames.iter().map(|f| f.bytes).max().unwrap_or(0)
    }

    /// When the last acknowledgement came.
    pub(super) fn last_ack(&self) -> Option<Instant> {
        self.last_ack
    }

    /// A draw waited for the window.
    pub(super) fn block(&mut self) {
        self.blocked = true;
    }

    /// Frame `frame` of `bytes` was sent at `now`; `waited`: it was ready
    /// before the window let it go.
    pub(super) fn sent(&mut self, frame: u64, bytes: u64, now: Instant, waited: bool) {
        let delivered_at = match (self.frames.is_empty(), self.last_ack) {
            (false, Some(at)) => at,
            _ => now,
        };
        let limited = waited || std::mem::take(&mut self.blocked);
        self.frames.push_back(InFlight {
            frame,
            bytes,
            sent: now,
            delivered: self.delivered,
            delivered_at,
            limited,
            alone: self.frames.is_empty(),
            frames: self.frames.len() + 1,
        });
    }

    /// The page acknowledged `frame` at `now`: it leaves, and so do the frames
    /// sent before it (the page skipped them: a newer one came first); `None`
    /// for a frame not in flight.
    pub(super) fn acked(&mut self, frame: u64, now: Instant) -> Option<Acked> {
        let at = self.frames.iter().position(|f| f.frame == frame)?;
        let f = self.frames.drain(..=at).next_back()?;
        self.delivered += f.bytes;
        let previous = self.last_ack.replace(now);
        let rtt = now.saturating_duration_since(f.sent);
        let elapsed = now.saturating_duration_since(f.delivered_at).max(LEAST_ELAPSED);
        let rate = (self.delivered - f.delivered) as f64 / elapsed.as_secs_f64();
        Some(Acked { frame: f, sample: Sample { rtt, rate, limited: f.limited }, previous })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_counted_from_the_acknowledgement_before_the_frame_was_sent() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut f = Flight::default();
        f.sent(0, 10_000, t, false);
        f.sent(1, 30_000, t, false);
        let first = f.acked(0, t + ms(50)).unwrap();
        // Alone on the link: counted from its own send.
        assert_eq!(first.sample, Sample { rtt: ms(50), rate: 10_000.0 / 0.05, limited: false });
        assert!(first.frame.alone && first.previous.is_none());
        // Frame 1 went beside frame 0, before any acknowledgement: from its send too.
        let second = f.acked(1, t + ms(90)).unwrap();
        assert_eq!(second.sample.rate, 40_000.0 / 0.09);
        assert_eq!((second.frame.alone, second.frame.frames), (false, 2));
        assert_eq!(second.previous, Some(t + ms(50)));
        // Frame 2 goes beside frame 3 after both were acknowledged: 3 counts from 90 ms.
        f.sent(2, 5_000, t + ms(100), false);
        f.sent(3, 5_000, t + ms(100), false);
        f.acked(2, t + ms(140));
        let third = f.acked(3, t + ms(150)).unwrap();
        assert_eq!(third.sample.rate, 10_000.0 / 0.06);
    }

    #[test]
    fn a_draw_that_waited_marks_the_next_frame_and_a_skipped_frame_leaves() {
        let t = Instant::now();
        let mut f = Flight::default();
        f.block();
        f.sent(0, 100, t, false);
        f.sent(1, 300, t, false);
        f.sent(2, 200, t, true);
        assert_eq!((f.len(), f.bytes(), f.largest()), (3, 600, 300));
        let marks: Vec<bool> = f.frames.iter().map(|f| f.limited).collect();
        assert_eq!(marks, [true, false, true], "the block marks one frame; `waited` its own");
        // The page skipped frame 0: acknowledging 1 clears both.
        assert!(f.acked(1, t + Duration::from_millis(5)).is_some());
        assert_eq!((f.len(), f.bytes()), (1, 200));
        assert!(f.acked(0, t).is_none(), "gone with frame 1");
        assert!(f.acked(7, t).is_none(), "never sent");
        // Burst acknowledgements: no rate without bound.
        f.sent(3, 1_000, t, false);
        assert_eq!(f.acked(3, t).unwrap().sample.rate, 1_000.0 / LEAST_ELAPSED.as_secs_f64());
    }
}
