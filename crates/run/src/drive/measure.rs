//! How a consumer loop is measured: its span (warm-up, then a steady part
//! of a time or a frame count), the clock that follows it, and what it
//! measured. vkcuda's session loop and the peer patterns' loops share them.

use std::time::{Duration, Instant};

use crate::drive::session::warmup_frames;
use crate::frames::consumer::Completed;
use crate::metrics::clock::CpuMeter;
use crate::metrics::footprint::Footprint;
use crate::metrics::stats::Samples;

/// Where a consumer loop's warm-up ends, and how long its steady part may last.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    /// Warm-up lasts at least this many frames...
    pub warmup_frames: u64,
    /// ...and at least this long.
    pub warmup_time: Duration,
    /// Stop this long after warm-up (besides the frame count), if set.
    pub steady_time: Option<Duration>,
}

impl Span {
    /// A run of `total` frames with the usual warm-up.
    pub fn frames(total: u64) -> Self {
        Self { warmup_frames: warmup_frames(total), warmup_time: Duration::ZERO, steady_time: None }
    }
}

/// What a consumer loop measured.
pub struct Consumed {
    /// Frames consumed by the loop (warm-up and measured ones).
    pub frames: u64,
    /// Frames consumed in all: the loop's, and those its stop consumed after.
    pub total: u64,
    /// Wall clock over the frames after warm-up.
    pub steady: Duration,
    /// Frames after warm-up.
    pub steady_frames: u64,
    /// The consumed frames (a bounded, uniform sample), in order.
    pub completed: Samples<Completed>,
    /// CPU time of the consumer thread per frame after warm-up.
    pub cpu_per_frame: Option<Duration>,
    /// Memory after warm-up, half-way (if the run got there) and at the end of the loop.
    pub footprint: Option<[Option<Footprint>; 3]>,
}

/// Where a consumer loop is in its [`Span`]: warming up, or steady since
/// which frame and when; and the loop thread's CPU time from there on.
pub struct SpanClock {
    span: Span,
    started: Instant,
    steady: Option<(u64, Instant)>,
    meter: CpuMeter,
}

impl SpanClock {
    /// Starts the clock (warm-up begins now).
    pub fn new(span: Span) -> Self {
        Self { span, started: Instant::now(), steady: None, meter: CpuMeter::default() }
    }

    /// Whether warm-up is over.
    pub fn steady(&self) -> bool {
        self.steady.is_some()
    }

    /// Call on the loop's thread before frame `g`: `None` once the steady
    /// time is up (stop), `Some(true)` when warm-up ended at `g`.
    pub fn before(&mut self, g: u64) -> Option<bool> {
        let mut began = false;
        if self.steady.is_none()
            && g >= self.span.warmup_frames
            && self.started.elapsed() >= self.span.warmup_time
        {
            self.steady = Some((g, Instant::now()));
            began = true;
        }
        if let (Some((_, since)), Some(limit)) = (self.steady, self.span.steady_time) {
            if since.elapsed() >= limit {
                return None;
            }
        }
        self.meter.frame(g, self.steady.is_some());
        Some(began)
    }

    /// What the loop measured, `frames` frames consumed in all; on the loop's thread.
    pub fn finish(
        &self,
        frames: u64,
        completed: Samples<Completed>,
        footprint: Option<[Option<Footprint>; 3]>,
    ) -> Consumed {
        let (first, since) = self.steady.unwrap_or((frames, Instant::now()));
        Consumed {
            footprint,
            frames,
            total: frames,
            steady: since.elapsed(),
            steady_frames: frames - first,
            completed,
            cpu_per_frame: self.meter.per_frame(frames),
        }
    }
}
