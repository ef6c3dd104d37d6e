//! Producers render frame `g` into shared image `plan.image(g)`, waiting and
//! signalling exactly what the frame plan says. Each runs on its own thread:
//! CUDA calls block their thread after a wait on a value not yet reached, and
//! the CPU producer waits on the host.

pub mod cpu;
pub mod cuda;
pub mod staging;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::diagnostics::inject::Inject;
use crate::kernel::reload::ReloadLink;
use crate::metrics::stats::Samples;
use vkcuda::sync::FramePlan;

/// How often a producer waiting for its turn looks whether its own side broke.
const TURN_CHECK: Duration = Duration::from_millis(100);

/// What the two threads share besides the timelines: how many frames to
/// make, whether either side failed, and (paced to the screen) how many
/// frames are on screen.
#[derive(Debug)]
pub struct Control {
    limit: AtomicU64,
    produced: AtomicU64,
    render_ns: AtomicU64,
    steady_from: AtomicU64,
    failed: AtomicBool,
    abandoned: AtomicBool,
    /// `--latency low`: the producer starts frame g once frame g - 1 is on screen.
    paced: AtomicBool,
    /// Frames on screen so far (0..shown), while paced.
    shown: Mutex<u64>,
    /// Wakes a producer waiting for its turn: a frame shown, a stop, a failure.
    turn: Condvar,
    /// While paced: the most frames the producer had made beyond those on screen.
    lead: AtomicU64,
    /// Something for the producer to do while it waits for its turn (a new kernel to load).
    news: AtomicBool,
}

impl Control {
    /// Produce frames `0..frames`.
    pub fn new(frames: u64) -> Arc<Self> {
        Arc::new(Self {
            limit: AtomicU64::new(frames),
            produced: AtomicU64::new(0),
            render_ns: AtomicU64::new(0),
            steady_from: AtomicU64::new(u64::MAX),
            failed: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            paced: AtomicBool::new(false),
            shown: Mutex::new(0),
            turn: Condvar::new(),
            lead: AtomicU64::new(0),
            news: AtomicBool::new(false),
        })
    }

    /// Paces the producer to the screen: it starts frame g only once the
    /// consumer says frame g - 1 is on screen ([`Control::set_shown`]), so
    /// a frame shows the newest input (a new kernel, the pointer) with the
    /// least latency, at the price of render and display no longer overlapping.
    pub fn pace_to_screen(&self) {
        self.paced.store(true, Ordering::Release);
    }

    /// Whether the producer is paced to the screen.
    pub fn paced(&self) -> bool {
        self.paced.load(Ordering::Acquire)
    }

    /// Frames `0..frames` are on screen.
    pub fn set_shown(&self, frames: u64) {
        if self.paced() {
            let mut shown = self.lock_shown();
            *shown = (*shown).max(frames);
            self.lead.fetch_max(self.produced().saturating_sub(*shown), Ordering::Relaxed);
            self.turn.notify_all();
        }
    }

    /// While paced, the most frames the producer had made beyond those on
    /// screen, as each frame went on screen (1 when the pacing holds).
    pub fn lead(&self) -> u64 {
        self.lead.load(Ordering::Relaxed)
    }

    /// Frames on screen so far (while paced).
    pub fn shown(&self) -> u64 {
        *self.lock_shown()
    }

    /// The producer, before it starts frame `g`: while paced, waits until
    /// frame g - 1 is on screen, the pacing ends (a stop), frame `g` is past
    /// the limit, a side failed, or `broken()` (asked after each
    /// `TURN_CHECK` without news: a faulted stream never lets frame g - 1
    /// show) (`true`: go on), or until [`Control::nudge`] brings news
    /// (`false`: act on it, then wait again). No timeout: a window that shows
    /// nothing (minimized) needs no frames.
    pub fn await_turn(&self, g: u64, broken: &dyn Fn() -> bool) -> bool {
        let mut shown = self.lock_shown();
        loop {
            if !self.paced() || *shown >= g || g >= self.limit() || self.failed() {
                return true;
            }
            if self.news.swap(false, Ordering::AcqRel) {
                return false;
            }
            let (guard, waited) =
                self.turn.wait_timeout(shown, TURN_CHECK).unwrap_or_else(|p| p.into_inner());
            shown = guard;
            if waited.timed_out() && broken() {
                return true;
            }
        }
    }

    /// Wakes a producer waiting for its turn to act on news (a new kernel version to load).
    pub fn nudge(&self) {
        self.news.store(true, Ordering::Release);
        self.wake();
    }

    fn lock_shown(&self) -> MutexGuard<'_, u64> {
        self.shown.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes [`Control::await_turn`] after a change of its conditions; the
    /// lock orders it after the waiter's check, so no wake-up is lost.
    fn wake(&self) {
        let _shown = self.lock_shown();
        self.turn.notify_all();
    }

    /// Frames to produce: the producer stops before frame `limit()`.
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Lowers the frame count (graceful stop). The consumer must still
    /// consume every frame below the new limit; the pacing ends, so the
    /// producer makes them without waiting for the screen.
    pub fn stop_at(&self, frames: u64) {
        self.limit.fetch_min(frames, Ordering::AcqRel);
        self.paced.store(false, Ordering::Release);
        self.wake();
    }

    /// Frames the producer has submitted so far.
    pub fn produced(&self) -> u64 {
        self.produced.load(Ordering::Acquire)
    }

    /// The producer submitted frame `frames - 1`.
    pub fn set_produced(&self, frames: u64) {
        self.produced.store(frames, Ordering::Release);
    }

    /// The producer's latest measured render time (for live stats).
    pub fn render_time(&self) -> Duration {
        Duration::from_nanos(self.render_ns.load(Ordering::Relaxed))
    }

    /// Publishes a render time.
    pub fn set_render_time(&self, d: Duration) {
        self.render_ns.store(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The consumer's warm-up ended at frame `frame`: measurements start there.
    pub fn set_steady_from(&self, frame: u64) {
        self.steady_from.fetch_min(frame, Ordering::AcqRel);
    }

    /// Whether frame `g` is past warm-up (as far as the consumer said so far).
    pub fn steady(&self, g: u64) -> bool {
        g >= self.steady_from.load(Ordering::Acquire)
    }

    /// Marks the run failed: the other side stops waiting and gives up.
    pub fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        self.wake();
    }

    /// Whether a side failed.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The consumer gives up on a GPU that stopped making progress (a kernel
    /// that does not end): the run fails, and the producer leaves a stream
    /// that is still busy instead of waiting for it once more.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
        self.fail();
    }

    /// Whether the consumer gave up on the GPU's progress.
    pub fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }
}

/// What every producer is told.
#[derive(Clone)]
pub struct Job {
    /// The frame/value plan.
    pub plan: FramePlan,
    /// Frame count and failure flag, shared with the consumer.
    pub control: Arc<Control>,
    /// Test only: the faults to inject.
    pub inject: Inject,
}

/// One frame's timing on the producer's side.
#[derive(Clone, Copy, Debug, Default)]
pub struct FrameTiming {
    /// Time to render it: CUDA events around the kernel (CUDA; the staging
    /// baseline includes its device-to-host copy), or the wall clock of the
    /// render (CPU).
    pub render: Duration,
    /// When its "rendered" point was reached, on the host's clock
    /// ([`crate::metrics::clock::now_ns`]).
    pub rendered_ns: u64,
}

/// What a producer reports when it ends.
#[derive(Debug, Default)]
pub struct Report {
    /// Frames produced.
    pub frames: u64,
    /// Per-frame timings (a bounded, uniform sample of the frames).
    pub timings: Samples<FrameTiming>,
    /// CPU time of the producer thread per frame after warm-up.
    pub cpu_per_frame: Option<Duration>,
}

/// While it lives, a kernel version published on the link wakes the producer
/// waiting for its turn ([`Control::await_turn`] returns) to act on it: load it,
/// or send it to its child, off the path to the screen.
pub(crate) struct WakeOnPublish(Option<ReloadLink>);

impl WakeOnPublish {
    pub(crate) fn new(link: Option<&ReloadLink>, control: &Arc<Control>) -> Self {
        if let Some(link) = link {
            let control = control.clone();
            link.on_publish(Some(Box::new(move || control.nudge())));
        }
        Self(link.cloned())
    }
}

impl Drop for WakeOnPublish {
    fn drop(&mut self) {
        if let Some(link) = &self.0 {
            link.on_publish(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    /// A producer thread waiting for frame `g`'s turn (news does not end
    /// the wait); the receiver hears when it returns.
    fn waiting(control: &Arc<Control>, g: u64) -> std::sync::mpsc::Receiver<u64> {
        let (tx, rx) = channel();
        let c = control.clone();
        std::thread::spawn(move || {
            while !c.await_turn(g, &|| false) {}
            let _ = tx.send(g);
        });
        rx
    }

    /// Looks for a while whether the waiter returned (a correct wait never does early).
    fn returned<T>(rx: &std::sync::mpsc::Receiver<T>) -> bool {
        rx.recv_timeout(Duration::from_millis(50)).is_ok()
    }

    #[test]
    fn unpaced_producers_never_wait() {
        let control = Control::new(100);
        control.set_shown(0);
        control.nudge();
        assert!(control.await_turn(50, &|| false), "not paced: always the producer's turn");
        assert_eq!(control.shown(), 0, "shown frames are counted only while paced");
    }

    #[test]
    fn paced_producers_wait_for_the_frame_before_on_screen() {
        let control = Control::new(100);
        control.pace_to_screen();
        assert!(control.await_turn(0, &|| false), "frame 0 waits for nothing");
        let rx = waiting(&control, 3);
        control.set_shown(2);
        assert!(!returned(&rx), "frame 3 started before frame 2 was on screen");
        control.set_shown(1);
        assert_eq!(control.shown(), 2, "the count never goes back");
        control.set_shown(3);
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(3));
        control.set_produced(5);
        control.set_shown(4);
        assert_eq!(control.lead(), 1, "the producer made frame 4 beyond the 4 on screen");
    }

    #[test]
    fn news_interrupts_the_wait_once() {
        let control = Control::new(100);
        control.pace_to_screen();
        let (tx, rx) = channel();
        let c = control.clone();
        std::thread::spawn(move || {
            let _ = tx.send(c.await_turn(2, &|| false));
            let _ = tx.send(c.await_turn(2, &|| false));
        });
        assert!(!returned(&rx));
        control.nudge();
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(false), "news: act on it");
        assert!(!returned(&rx), "the news was taken: the second wait waits");
        control.set_shown(2);
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(true), "the turn came");
    }

    #[test]
    fn a_broken_producer_stops_waiting() {
        let control = Control::new(100);
        control.pace_to_screen();
        let broken = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel();
        let (c, b) = (control.clone(), broken.clone());
        std::thread::spawn(move || {
            let _ = tx.send(c.await_turn(4, &|| b.load(Ordering::Acquire)));
        });
        assert!(!returned(&rx));
        broken.store(true, Ordering::Release);
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(true), "go on, to the error");
    }

    #[test]
    fn a_stop_or_a_failure_ends_the_wait() {
        let control = Control::new(100);
        control.pace_to_screen();
        let rx = waiting(&control, 5);
        assert!(!returned(&rx));
        control.stop_at(10);
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(5), "a stop ends the pacing");
        assert!(!control.paced());

        let control = Control::new(100);
        control.pace_to_screen();
        let rx = waiting(&control, 5);
        control.fail();
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(5), "a failure ends the wait");
    }
}
