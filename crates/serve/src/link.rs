//! Delivery paced by the link, measured from the page's acknowledgements alone:
//! an `ssh -L` tunnel, a VPN or JupyterHub's proxy hide the link from the
//! server's socket (sshd buffers megabytes per channel), but a page
//! acknowledges each frame once it has decoded it, wherever it is.
//!
//! [`Link`] is the controller; each thing it estimates is a piece of its own,
//! with its own tests (as s2n-quic's BBR keeps its parts):
//!
//! - [`flight`]: the frames in flight and each acknowledgement's delivery rate
//!   (BBR's rate sample) and round trip;
//! - [`min_rtt`]: the shortest round trip of the last 10 s;
//! - [`capacity`]: the highest rate seen, lowered only on the link's own word;
//! - [`standing`]: whether a queue stands (CoDel's test);
//! - [`drain`]: now and then one frame alone on the link (BBR's ProbeRTT);
//! - [`pacing`]: when the link will have carried what was sent;
//! - [`page`]: the page's count of the frames waiting for its decoder.
//!
//! The window, the bytes allowed in flight, is capacity × shortest round trip
//! (the bandwidth-delay product, and a quarter more to find the link's limit)
//! plus the next frame and the largest in flight. Frames sized to a budget
//! swing around it (a video frame after a large change is several times its
//! budget, more than the link holds in a round trip); a window without the
//! largest frame held the next draw until each large one was acknowledged, a
//! round trip after the link had carried it. While a queue stands, neither:
//! nothing waits behind another and the window counts no largest frame, so the
//! queue drains. A frame is drawn when the window has room for it, the page
//! has room for it, and the link will have carried what was sent by the time it
//! is ready but for its own crossing.

mod capacity;
mod drain;
mod flight;
mod min_rtt;
mod pacing;
mod page;
mod standing;
#[cfg(test)]
pub(crate) mod wire;

use std::time::{Duration, Instant};

use capacity::Capacity;
use drain::Drain;
use flight::Flight;
pub use flight::Sample;
use min_rtt::MinRtt;
use pacing::Pacing;
use page::PageCount;
use standing::StandingQueue;

/// Frames in flight before the link is measured. Design: the view before the
/// link was measured kept two frames unacknowledged (ab4c22b, `old` in the benches).
const START_FRAMES: usize = 2;
/// The window's headroom over the bandwidth-delay product: without it a
/// window measured at k frames in flight stays at k (the rate it measures is
/// the rate it allows); with it the link fills, and no more. Design (BBR's
/// cwnd gain, smaller); bench-13/-14, 2026-11-28, set the window's two
/// frames beside it (20 Mbit/s 35–41 frames/s against 20–22).
const WINDOW_GAIN: f64 = 1.25;

/// One client's link, as its acknowledgements show it.
#[derive(Debug, Default)]
pub struct Link {
    flight: Flight,
    min_rtt: MinRtt,
    capacity: Capacity,
    queue: StandingQueue,
    drain: Drain,
    pacing: Pacing,
    page: PageCount,
}

impl Link {
    /// A link not yet measured.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes sent and not yet acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.flight.bytes()
    }

    /// Frames sent and not yet acknowledged.
    pub fn frames_in_flight(&self) -> usize {
        self.flight.len()
    }

    /// The link's capacity in bytes a second, once measured.
    pub fn capacity(&self) -> Option<f64> {
        self.capacity.rate()
    }

    /// How long the capacity has been measured, at `now`.
    pub fn measured_for(&self, now: Instant) -> Duration {
        self.capacity.measured_for(now)
    }

    /// The shortest round trip of the last 10 s.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.get()
    }

    /// Whether a queue stands on the link ([`standing`]).
    fn queueing(&self) -> bool {
        self.queue.stands(self.min_rtt())
    }

    /// The bytes the link may hold for a next frame of `next` bytes: capacity ×
    /// shortest round trip (× `WINDOW_GAIN`), plus that frame and the largest
    /// in flight (a frame larger than the link holds in a round trip would
    /// otherwise hold the next until it is acknowledged); before both are
    /// measured, `None` (then `START_FRAMES` frames may be in flight).
    pub fn window(&self, next: u64) -> Option<u64> {
        let (rate, rtt) = (self.capacity()?, self.min_rtt()?);
        // Not while frames queue (the link fell: a large frame stuck in the queue must
        // not let another join it).
        let largest = match self.queueing() {
            true => 0,
            false => self.flight.largest(),
        };
        Some((rate * rtt.as_secs_f64() * WINDOW_GAIN) as u64 + next + largest)
    }

    /// Whether a frame of `bytes` may be sent now: nothing in flight, or it
    /// fits the window and the frames the page lets be in flight.
    pub fn may_send(&self, bytes: u64) -> bool {
        self.may_add(bytes, 0, None)
    }

    /// Whether a frame of `bytes` may go beside those in flight and `preparing`
    /// more (drawn, not yet sent) of `bytes` each; if it is to be drawn, ready at `ready`.
    fn may_add(&self, bytes: u64, preparing: usize, ready: Option<Instant>) -> bool {
        let page = self.page.room(self.flight.len(), preparing, ready, self.flight.last_ack());
        let bytes_ahead = self.in_flight() + bytes * preparing as u64;
        match self.window(bytes) {
            _ if self.flight.is_empty() && preparing == 0 => true,
            _ if self.drain.draining() => false,
            Some(window) => page && bytes_ahead + bytes <= window,
            None => page && self.flight.len() + preparing < START_FRAMES,
        }
    }

    /// Whether a frame of `bytes`, ready `lead` from `now` (its draw and encode),
    /// may be drawn beside `preparing` frames drawn and not yet sent: the window
    /// has room for them all (a frame drawn to wait for room is older once it
    /// goes than one drawn once there is room), and by then the link will have
    /// carried what was sent (at its capacity) but for that frame's own crossing
    /// time ([`pacing`]).
    pub fn may_draw(&self, bytes: u64, preparing: usize, now: Instant, lead: Duration) -> bool {
        // While frames queue, none more joins them: the link drains.
        let slack = match self.queueing() {
            true => Duration::ZERO,
            false => self.capacity.crossing(bytes).unwrap_or_default(),
        };
        let ready = now + lead + slack;
        self.may_add(bytes, preparing, Some(now + lead))
            && (self.flight.is_empty() || self.pacing.free_by(ready))
    }

    /// A draw waited for the window: the next frame sent is limited by the link.
    pub fn block(&mut self) {
        self.flight.block();
    }

    /// Whether it is draining to measure its round trip with one frame alone.
    pub fn draining(&self) -> bool {
        self.drain.draining()
    }

    /// Frame `frame` of `bytes` was handed to the socket at `now`; `waited`:
    /// it was ready before the window let it go.
    pub fn sent(&mut self, frame: u64, bytes: u64, now: Instant, waited: bool) {
        self.pacing.sent(now, self.capacity.crossing(bytes), self.flight.is_empty());
        self.flight.sent(frame, bytes, now, waited);
    }

    /// The page acknowledged `frame` at `now` (it decoded it), saying how
    /// many frames it had not yet acknowledged when that one arrived
    /// (`ahead`; a page that does not say: `None`): what that measured.
    /// Frames sent before it and not acknowledged were skipped by the page
    /// (never decoded): they leave the flight too.
    pub fn acked(&mut self, frame: u64, now: Instant, ahead: Option<u32>) -> Option<Sample> {
        let acked = self.flight.acked(frame, now)?;
        let s = acked.sample;
        self.min_rtt.update(now, s.rtt);
        let min_rtt = self.min_rtt();
        // Its time queued on the link: its round trip over the shortest, less its own crossing.
        let base = min_rtt.unwrap_or(s.rtt) + self.capacity.crossing(acked.frame.bytes).unwrap_or_default();
        self.queue.note(now, s.rtt.saturating_sub(base), standing::span(min_rtt));
        // A frame that found the page idle waited on the way, if it waited.
        let on_the_way = ahead == Some(0) && self.queueing();
        self.capacity.take(now, s, min_rtt, on_the_way);
        self.drain.acked(now, acked.frame.alone);
        if let Some(ahead) = ahead {
            let span = standing::span(min_rtt);
            self.page.said(now, acked.previous, acked.frame.frames, ahead as usize, span);
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::wire::Wire;
    use super::*;

    /// Sends the wire's next frame, of `bytes`, at `now`, and tells the link.
    fn send(link: &mut Link, wire: &mut Wire, bytes: u64, now: Instant) {
        let frame = wire.next;
        wire.next += 1;
        link.sent(frame, bytes, now, false);
        wire.send(frame, bytes, now);
    }

    /// Sends frames of `bytes` every `every` for `secs` over `wire`, when the
    /// link lets them go: the worst time a frame spent from its send to its
    /// acknowledgement.
    fn stream(link: &mut Link, wire: &mut Wire, bytes: u64, every: Duration, secs: f64) -> Duration {
        let start = wire.free().max(wire.sent.values().max().copied().unwrap_or(wire.free()));
        let (mut now, mut worst) = (start, Duration::ZERO);
        while now < start + Duration::from_secs_f64(secs) {
            for (at, f) in wire.arrived(now) {
                link.acked(f, at, wire.ahead(f));
                worst = worst.max(at - wire.sent[&f]);
            }
            if link.may_draw(bytes, 0, now, Duration::ZERO) {
                send(link, wire, bytes, now);
            } else {
                link.block();
            }
            now += every;
        }
        worst
    }

    #[test]
    fn while_frames_queue_none_joins_them() {
        let t = Instant::now();
        let ms = |n: f64| t + Duration::from_secs_f64(n / 1e3);
        let (mut quiet, mut queued) = (Link::new(), Link::new());
        for (l, late) in [(&mut quiet, 0.0), (&mut queued, 100.0)] {
            // Measured: a pair sent together, the shortest round trip 50 ms.
            l.sent(0, 10_000, ms(0.0), false);
            l.sent(1, 40_000, ms(0.0), false);
            l.acked(0, ms(50.0), None);
            l.acked(1, ms(90.0), None);
            // A small frame back `late` ms after its round trip.
            l.sent(2, 1_000, ms(100.0), false);
            l.acked(2, ms(150.0 + late), None);
        }
        let c = quiet.capacity().unwrap();
        assert_eq!(queued.capacity(), Some(c));
        // A frame the link carries for 100 ms, and one of 10 ms.
        let (large, small) = ((c * 0.1) as u64, (c * 0.01) as u64);
        quiet.sent(3, large, ms(300.0), false);
        queued.sent(3, large, ms(300.0), false);
        // 10 ms before the large frame has crossed, the small one may be drawn (it waits
        // behind it at most its own crossing); 20 ms before, not.
        assert!(quiet.may_draw(small, 0, ms(391.0), Duration::ZERO));
        assert!(!quiet.may_draw(small, 0, ms(370.0), Duration::ZERO));
        // After a frame queued 100 ms, the window no longer counts the large frame in
        // flight: nothing joins it until it is acknowledged.
        assert!(queued.window(small) < quiet.window(small));
        assert!(!queued.may_draw(small, 0, ms(391.0), Duration::ZERO));
        assert!(!queued.may_draw(small, 0, ms(420.0), Duration::ZERO));
        queued.acked(3, ms(455.0), None);
        assert!(queued.may_draw(small, 0, ms(455.0), Duration::ZERO));
    }

    #[test]
    fn a_queue_that_does_not_stand_holds_nothing_back() {
        // A large frame queues the frame after it as it passes: that queue does not
        // stand (the frame acknowledged 90 ms before queued nothing), and the next
        // frame may wait behind a large one as on a quiet link. Once every frame of the
        // last 100 ms queued, nothing joins a frame in flight.
        let t = Instant::now();
        let ms = |n: f64| t + Duration::from_secs_f64(n / 1e3);
        let mut link = Link::new();
        link.sent(0, 10_000, ms(0.0), false);
        link.sent(1, 40_000, ms(0.0), false);
        link.acked(0, ms(50.0), None);
        link.acked(1, ms(90.0), None);
        link.sent(2, 1_000, ms(100.0), false);
        link.acked(2, ms(150.0), None);
        link.sent(3, 1_000, ms(160.0), false);
        link.acked(3, ms(240.0), None);
        let c = link.capacity().unwrap();
        let (large, small) = ((c * 0.1) as u64, (c * 0.01) as u64);
        link.sent(4, large, ms(300.0), false);
        assert!(link.may_draw(small, 0, ms(391.0), Duration::ZERO));
        link.acked(4, ms(480.0), None);
        link.sent(5, large, ms(490.0), false);
        assert!(!link.may_draw(small, 0, ms(581.0), Duration::ZERO));
    }

    #[test]
    fn a_saturated_link_is_measured_and_its_queue_stays_within_a_frame() {
        let start = Instant::now();
        // 20 Mbit/s, 40 ms: frames of 100 KB offered at 60 a second (48 Mbit/s).
        let mut wire = Wire::new(2.5e6, Duration::from_millis(40), start);
        let mut link = Link::new();
        let worst = stream(&mut link, &mut wire, 100_000, Duration::from_micros(16_667), 3.0);
        let c = link.capacity().unwrap();
        assert!((2.2e6..=2.8e6).contains(&c), "capacity {c} of a 2.5 MB/s link");
        // A frame takes 40 ms to cross, plus the round trip; at most one frame ahead of it.
        assert!(worst < Duration::from_millis(190), "a frame spent {worst:?} in flight");
        let rtt = link.min_rtt().unwrap();
        assert!(rtt >= Duration::from_millis(80) && rtt < Duration::from_millis(130), "{rtt:?}");
    }

    #[test]
    fn a_queue_the_first_frames_left_is_drained_and_not_kept() {
        // 5 Mbit/s, 80 ms. The first two frames (JPEG at the canvas before the link is
        // measured) take 0.55 s each to cross, and the frames after them queue behind:
        // every round trip holds that queue, the shortest too (169 ms against 115 without
        // the drain), and a window made of it keeps the queue standing.
        let start = Instant::now();
        let mut wire = Wire::new(0.625e6, Duration::from_millis(80), start);
        let mut link = Link::new();
        for _ in 0..2 {
            send(&mut link, &mut wire, 343_000, start);
        }
        // Then video at the link's rate from the start, as the encoder makes it (a
        // frame every 33 ms when the window lets it go), for 8 s.
        let (mut worst, mut now) = (Duration::ZERO, start);
        while now < start + Duration::from_secs(8) {
            for (at, f) in wire.arrived(now) {
                link.acked(f, at, wire.ahead(f));
                if at > start + Duration::from_secs(6) {
                    worst = worst.max(at - wire.sent[&f]);
                }
            }
            if link.may_draw(20_800, 0, now, Duration::ZERO) {
                send(&mut link, &mut wire, 20_800, now);
            } else {
                link.block();
            }
            now += Duration::from_micros(33_333);
        }
        assert!(worst < Duration::from_millis(250), "frames spent {worst:?} in flight 6 s on");
        let rtt = link.min_rtt().unwrap();
        assert!(rtt < Duration::from_millis(150), "shortest round trip {rtt:?}");
    }

    #[test]
    fn a_stream_below_the_link_never_lowers_the_capacity() {
        let start = Instant::now();
        let mut wire = Wire::new(12.5e6, Duration::from_millis(20), start);
        let mut link = Link::new();
        // Saturate (limited samples), then send 20 KB frames at 30 a second (4.8 Mbit/s).
        stream(&mut link, &mut wire, 400_000, Duration::from_millis(10), 2.0);
        let measured = link.capacity().unwrap();
        assert!(measured > 10e6, "{measured}");
        stream(&mut link, &mut wire, 20_000, Duration::from_micros(33_333), 5.0);
        assert_eq!(link.capacity(), Some(measured), "app-limited samples are lower bounds");
    }

    #[test]
    fn a_page_that_stalls_now_and_then_is_not_a_faster_link() {
        let start = Instant::now();
        // 20 Mbit/s, 40 ms; 30 KB frames at 60 a second (14.4 Mbit/s), every 20th
        // decoded in 150 ms: the acknowledgements queued behind it come at once.
        let capacity = |reports| {
            let mut wire = Wire::new(2.5e6, Duration::from_millis(40), start);
            (wire.stall, wire.reports) = (Some((20, Duration::from_millis(150))), reports);
            let mut link = Link::new();
            stream(&mut link, &mut wire, 30_000, Duration::from_micros(16_667), 6.0);
            link.capacity().unwrap()
        };
        let c = capacity(false);
        assert!(c <= 2.5e6 * 1.1, "capacity {c} of a 2.5 MB/s link");
        // Where the page says frames waited for its decoder, their late
        // acknowledgements lower nothing either.
        assert_eq!(capacity(true), c);
    }

    #[test]
    fn a_drop_in_rate_is_seen_within_a_second() {
        let start = Instant::now();
        let mut wire = Wire::new(6.25e6, Duration::from_millis(40), start);
        let mut link = Link::new();
        stream(&mut link, &mut wire, 150_000, Duration::from_micros(16_667), 2.0);
        assert!(link.capacity().unwrap() > 5e6);
        wire.rate = 0.625e6; // 50 → 5 Mbit/s
        for _ in 0..4 {
            stream(&mut link, &mut wire, 150_000, Duration::from_micros(16_667), 0.25);
        }
        let c = link.capacity().unwrap();
        assert!(c < 0.8e6, "capacity {c} a second after the link fell to 0.625 MB/s");
    }

    #[test]
    fn before_the_link_is_measured_two_frames_go() {
        let mut link = Link::new();
        let now = Instant::now();
        assert!(link.may_send(1 << 20));
        link.sent(0, 1 << 20, now, false);
        assert!(link.may_send(1 << 20));
        link.sent(1, 1 << 20, now, false);
        assert!(!link.may_send(1), "two in flight, nothing measured");
        assert_eq!(link.in_flight(), 2 << 20);
        // The page skipped frame 0 (a newer one came first): acknowledging 1 clears both.
        assert!(link.acked(1, now + Duration::from_millis(5), None).is_some());
        assert_eq!(link.frames_in_flight(), 0);
        assert!(link.acked(7, now, None).is_none(), "an unknown frame measures nothing");
    }
}
