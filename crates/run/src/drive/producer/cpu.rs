//! The CPU producer: renders the reference on CPU threads, in the frames'
//! format, into host-visible staging buffers (one per shared image or
//! buffer) and signals the timelines from the host. The consumer uploads
//! each staging buffer into its shared image or buffer (`app::consumer`). It runs anywhere Vulkan does: lavapipe, CI.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};

use super::{FrameTiming, Job, Report};
use crate::metrics::clock::{now_ns, CpuMeter};
use crate::scene::director::Director;
use crate::scene::{render_cpu_as, FrameArgs};
use vkcuda::interop::SharedFrames;
use vkcuda::vk::memory::Buffer;

/// The CPU producer's state.
pub struct CpuProducer {
    shared: Arc<SharedFrames>,
    staging: Arc<Vec<Buffer>>,
    director: Arc<Director>,
    threads: usize,
}

impl CpuProducer {
    /// Renders what `director` says into `staging[plan.image(g)]` and
    /// signals `shared`'s timelines from the host.
    pub fn new(shared: Arc<SharedFrames>, staging: Arc<Vec<Buffer>>, director: Arc<Director>) -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self { shared, staging, director, threads }
    }

    /// The producer thread's loop.
    pub fn run(self, job: &Job) -> Result<Report> {
        let format = self.shared.desc().format;
        host_loop(job, &self.shared, &self.staging, |g, pixels| {
            let spec = self.director.begin(g);
            let t0 = Instant::now();
            render_cpu_as(&spec.scene, &FrameArgs::new(&spec.scene, spec.tick), format, pixels, self.threads);
            Ok(Some(t0.elapsed()))
        })
    }
}

/// The loop of a producer that signals from the host (the CPU producer and
/// the staging baseline). For frame `g`: wait on the host until the consumer
/// has uploaded `staging` buffer `g mod N` (frame g − N) into `shared`'s
/// frame, let `render` fill it
/// (returning its render time, or `None`: no more frames, the loop ends
/// before frame g), then signal "rendered" from the host.
pub(crate) fn host_loop(
    job: &Job,
    shared: &SharedFrames,
    staging: &[Buffer],
    mut render: impl FnMut(u64, &mut [u8]) -> Result<Option<Duration>>,
) -> Result<Report> {
    let mut meter = CpuMeter::default();
    let mut report = Report::default();
    let failed = || job.control.failed();
    let timelines = &shared.timelines();
    let mut g = 0;
    while g < job.control.limit() {
        meter.frame(g, job.control.steady(g));
        // Paced to the screen (`--latency low`): frame g starts once g - 1 is on screen.
        while !job.control.await_turn(g, &|| false) {}
        if g >= job.control.limit() {
            break;
        }
        job.inject.producer_panic(g);
        job.inject.producer_stall(g, failed)?;
        let step = job.plan.producer(g);
        if let Some(w) = step.wait {
            timelines[w.timeline].wait(w.value, &failed)?;
        }
        let bytes = shared.desc().bytes() as usize;
        let buffer = &staging[step.image];
        ensure!(buffer.size() as usize >= bytes, "staging buffer too small");
        // SAFETY: the buffer is host-visible, mapped and `bytes` long; the wait above
        // guarantees the GPU no longer reads it, and only this thread writes it.
        let pixels = unsafe { std::slice::from_raw_parts_mut(buffer.mapped_ptr()?, bytes) };
        let Some(render_time) = render(g, pixels)? else { break };
        job.control.set_render_time(render_time);
        // The frame is rendered now: its "rendered" point is the host signal below.
        report.timings.push(g, FrameTiming { render: render_time, rendered_ns: now_ns() });
        // Host-coherent memory: the writes are visible once "rendered" is signalled.
        // SAFETY: this thread is the timeline's only producer-side signaller, and it waited
        // above for the consumer's last signal below this value (`shared`): none is pending at
        // or below it (VUID-VkSemaphoreSignalInfo-value-03259).
        unsafe { timelines[step.signal.timeline].signal(step.signal.value) }?;
        report.frames += 1;
        g += 1;
        job.control.set_produced(g);
    }
    report.cpu_per_frame = meter.per_frame(report.frames);
    Ok(report)
}
