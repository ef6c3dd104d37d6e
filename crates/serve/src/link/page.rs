//! The page's count: where the page is slower than the link (loopback, a
//! LAN), frames wait for its decoder, and the window, in bytes, lets small
//! frames pile up (a page's decode time follows a frame's bytes far less than
//! a link's crossing does). Each acknowledgement says how many frames were
//! ahead of its frame at the page, and the frames in flight are held to
//! [`PAGE_WAITING`] waiting beside the one it decodes (frames being drawn
//! counted), one more drawn when the page will have decoded what it has by the
//! time that one is ready.

use std::time::{Duration, Instant};

/// How long the page's word that frames waited for its decoder holds the
/// frames in flight to its count. bench-29, 2026-11-29 (`pd`): loopback as
/// fast as it decodes, p50 10–12 ms against 24–43.
const PAGE_MEMORY: Duration = Duration::from_secs(1);
/// Frames waiting at the page beside the one it decodes: one keeps it busy,
/// more only wait. bench-29, 2026-11-29: `pa` lowered the count on one frame
/// ahead, `pb` only on two; `pa`'s rule is in `pd`, the one landed.
const PAGE_WAITING: usize = 1;
/// The weight of the newest decode time in the page's moving average: 1/8,
/// TCP's smoothed round trip's (RFC 6298); design, not tuned by a bench.
const DECODE_GAIN: f64 = 0.125;

/// What the page said while frames waited for its decoder.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Limit {
    /// The frames it lets be in flight.
    most: usize,
    /// When a frame last said it waited.
    waited_at: Instant,
    /// How long it decodes a frame: the time between acknowledgements of
    /// frames that waited (each decode began as the one before it ended), a
    /// moving average.
    decode: Option<Duration>,
}

/// The page's count, as its acknowledgements say it.
#[derive(Debug, Default)]
pub(super) struct PageCount {
    /// What it said, while frames wait for it.
    limit: Option<Limit>,
    /// Since when every frame acknowledged said it waited.
    waiting_since: Option<Instant>,
}

/// The frames the page lets be in flight when a frame sent with `frames` in
/// flight found `ahead` waiting: one fewer for each more than [`PAGE_WAITING`],
/// one more for each fewer, at least one.
fn most(frames: usize, ahead: usize) -> usize {
    (frames + PAGE_WAITING).saturating_sub(ahead).max(1)
}

impl PageCount {
    /// The page said a frame sent with `frames` in flight found `ahead` it had
    /// not yet acknowledged; the acknowledgement before came at `previous`.
    /// Once every frame of `span` waited, the page is the limit (frames that
    /// arrive together over a link wait a moment, and say nothing of it); then
    /// its count holds ([`most`]), until [`PAGE_MEMORY`] after one last
    /// waited (a frame that found it idle: one more). A frame that waited
    /// began its decode as the one before it was acknowledged: the time since
    /// is its decode.
    pub(super) fn said(
        &mut self,
        now: Instant,
        previous: Option<Instant>,
        frames: usize,
        ahead: usize,
        span: Duration,
    ) {
        let decoded = previous.filter(|_| ahead > 0).map(|at| now.saturating_duration_since(at));
        let average = |old: Option<Duration>| match (old, decoded) {
            (Some(old), Some(new)) => Some(old.mul_f64(1.0 - DECODE_GAIN) + new.mul_f64(DECODE_GAIN)),
            (old, new) => new.or(old),
        };
        self.waiting_since = if ahead > 0 { Some(self.waiting_since.unwrap_or(now)) } else { None };
        let stood = self.waiting_since.is_some_and(|since| now.duration_since(since) >= span);
        self.limit = match self.limit {
            limit if ahead > 0 && (limit.is_some() || stood) => Some(Limit {
                most: most(frames, ahead),
                waited_at: now,
                decode: average(limit.and_then(|l| l.decode)),
            }),
            Some(limit) if now.duration_since(limit.waited_at) > PAGE_MEMORY => None,
            Some(limit) => Some(Limit { most: limit.most.max(most(frames, 0)), ..limit }),
            None => None,
        };
    }

    /// Whether the page has room for another frame beside `flight` in flight
    /// and `preparing`: fewer than it lets be in flight, or, for one drawn to
    /// be ready at `ready`, one more if by then the page will have decoded what
    /// it has (at its decode time from its last acknowledgement, `last_ack`):
    /// drawn on an acknowledgement, a frame that takes longer to draw than the
    /// page to decode the one waiting comes late, and the page idles.
    pub(super) fn room(
        &self,
        flight: usize,
        preparing: usize,
        ready: Option<Instant>,
        last_ack: Option<Instant>,
    ) -> bool {
        let Some(limit) = self.limit else { return true };
        let ahead = flight + preparing;
        let idle = limit.decode.zip(last_ack).map(|(decode, at)| at + decode * flight as u32);
        ahead < limit.most
            || (preparing == 0 && ahead == limit.most && idle.zip(ready).is_some_and(|(i, r)| i <= r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn the_page_is_the_limit_once_its_frames_waited_a_whole_span() {
        let t = Instant::now();
        let span = MS(100);
        let mut p = PageCount::default();
        // Frames that arrived together wait a moment: no limit yet.
        p.said(t, None, 3, 1, span);
        p.said(t + MS(50), Some(t), 3, 1, span);
        assert!(p.room(5, 0, None, Some(t)));
        // Every frame waited 100 ms: one waiting beside the one decoding keeps it busy.
        p.said(t + MS(100), Some(t + MS(50)), 3, 1, span);
        assert_eq!(p.limit.map(|l| l.most), Some(3));
        assert!(p.room(2, 0, None, None) && !p.room(3, 0, None, None) && !p.room(2, 1, None, None));
        // Three waiting: two fewer.
        p.said(t + MS(106), Some(t + MS(100)), 3, 3, span);
        assert_eq!(p.limit.map(|l| l.most), Some(1));
    }

    #[test]
    fn an_idle_page_lets_one_more_go_and_its_word_is_forgotten() {
        let t = Instant::now();
        let mut p = PageCount::default();
        p.said(t, None, 2, 1, Duration::ZERO);
        assert_eq!(p.limit.map(|l| l.most), Some(2));
        // The page was idle: one more.
        p.said(t + MS(10), Some(t), 2, 0, Duration::ZERO);
        assert_eq!(p.limit.map(|l| l.most), Some(3));
        p.said(t + MS(10) + PAGE_MEMORY, Some(t), 2, 0, Duration::ZERO);
        assert_eq!(p.limit, None, "no frame waited for a second");
        assert!(p.room(100, 100, None, None));
    }

    #[test]
    fn the_decode_time_averages_and_a_frame_drawn_in_time_may_join() {
        let t = Instant::now();
        let mut p = PageCount::default();
        p.said(t, Some(t - MS(8)), 1, 1, Duration::ZERO);
        p.said(t + MS(16), Some(t), 1, 1, Duration::ZERO);
        // 8 ms, then 16: a moving average by DECODE_GAIN.
        assert_eq!(
            p.limit.and_then(|l| l.decode),
            Some(MS(8).mul_f64(1.0 - DECODE_GAIN) + MS(16).mul_f64(DECODE_GAIN))
        );
        let decode = p.limit.and_then(|l| l.decode).unwrap();
        // The page holds one: full; a frame ready once it has decoded it may be drawn.
        let last = t + MS(16);
        assert!(!p.room(1, 0, Some(last + decode - MS(1)), Some(last)));
        assert!(p.room(1, 0, Some(last + decode), Some(last)));
        assert!(!p.room(1, 0, None, Some(last)), "a frame ready now (sent) is not one drawn");
    }
}
