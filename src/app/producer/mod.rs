//! Producers render frame `g` into shared image `plan.image(g)`, waiting and
//! signalling exactly what the frame plan says. Each runs on its own thread:
//! CUDA calls block their thread after a wait on a value not yet reached, and
//! the CPU producer waits on the host.

pub mod cpu;
pub mod cuda;
pub mod staging;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::app::director::Director;
use crate::app::inject::Inject;
use crate::app::stats::Samples;
use vkcuda::sync::FramePlan;

/// What the two threads share besides the timelines: how many frames to
/// make, and whether either side failed.
#[derive(Debug)]
pub struct Control {
    limit: AtomicU64,
    produced: AtomicU64,
    render_ns: AtomicU64,
    steady_from: AtomicU64,
    failed: AtomicBool,
    abandoned: AtomicBool,
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
        })
    }

    /// Frames to produce: the producer stops before frame `limit()`.
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Lowers the frame count (graceful stop). The consumer must still
    /// consume every frame below the new limit.
    pub fn stop_at(&self, frames: u64) {
        self.limit.fetch_min(frames, Ordering::AcqRel);
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
    /// What each frame shows.
    pub director: Arc<Director>,
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
    /// ([`crate::app::clock::now_ns`]).
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
