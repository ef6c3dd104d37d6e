//! The hand-over patterns integrators copy today, reproduced on vkcuda's
//! images, kernels and consume step so that only the hand-over differs:
//! `vkcuda bench`'s `cpu-gated`, `host-wait` and `binary` variants, and
//! `--headless --handover`, which dumps and verifies their frames (how the
//! tests prove each reproduction renders what vkcuda's pattern renders).
//! They belong to the CLI's comparison, not to the run layer: a session of
//! the run layer knows vkcuda's pattern only. Each runs as its source does:
//! one thread drives both APIs. Sources, read before reproducing them: `../shared/peer-patterns.md`
//! and docs/results/2026-11-24-h100/README.md ("Beside the patterns integrators copy").
//!
//! - `cpu_gated.rs`: NVIDIA Omniverse ovrtx, examples/c/vulkan-interop;
//! - `host_wait.rs`: cuda-samples simpleVulkan (its timeline path);
//! - `binary.rs`: cuda-samples vulkanImageCUDA.

mod binary;
mod cpu_gated;
pub mod handover;
mod host_wait;
mod semaphore;

pub use handover::Handover;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use ash::vk;
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};
use indicatif::ProgressBar;

use semaphore::BinarySemaphore;
use vkcuda::cuda::external::ExternalSemaphore;
use vkcuda::interop::{CudaFrames, SharedFrames, Use};
use vkcuda::sync::{FramePlan, SyncScheme, TimelinePoint};
use vkcuda::vk::bounded_wait;
use vkcuda::vk::device::Device;
use vkcuda::FrameDesc;
use vkcuda_run::base::size::Size;
use vkcuda_run::drive::measure::SpanClock;
use vkcuda_run::drive::producer::cuda::KernelTimer;
use vkcuda_run::drive::producer::Report;
use vkcuda_run::drive::setup::RunSpec;
use vkcuda_run::drive::to_end::{run_session, MadeBy, Measured, Monitor};
use vkcuda_run::frames::consumer::{Completed, Consume, FrameLoop, Frames, Mark, Source, Submission};
use vkcuda_run::frames::gpu::Gpu;
use vkcuda_run::metrics::stats::Samples;
use vkcuda_run::present::offscreen::Offscreen;
use vkcuda_run::scene::director::Director;
use vkcuda_run::scene::kernels::{Out, SceneKernels};
use vkcuda_run::scene::FrameArgs;
use vkcuda_run::UsageError;

/// What one headless run or bench repeat renders.
#[derive(Clone, Copy)]
pub struct RunPlan<'a> {
    /// The run's spec.
    pub spec: &'a RunSpec,
    /// The value its timelines start from.
    pub base: u64,
    /// What each frame shows.
    pub director: &'a Arc<Director>,
    /// The shared frames.
    pub desc: FrameDesc,
}

/// Runs one headless run or bench repeat of `plan` with the hand-over
/// `kind`: vkcuda's as a session of the run layer ([`run_session`]), a
/// peer's here.
pub fn run_handover(
    kind: Handover,
    gpu: &Gpu,
    plan: RunPlan<'_>,
    offscreen: &mut Offscreen,
    monitor: Monitor<'_>,
) -> Result<Measured> {
    match kind {
        Handover::Vkcuda => {
            run_session(gpu, plan.spec, plan.base, plan.desc, offscreen, monitor).map(Measured::made_by)
        }
        peer => run(peer, gpu, plan, offscreen, monitor),
    }
}

/// Runs the pattern `kind` (not vkcuda's) of `plan` into `offscreen` for
/// `monitor`'s span: what [`vkcuda_run::drive::to_end::run_session`] is for
/// vkcuda's pattern.
fn run(
    kind: Handover,
    gpu: &Gpu,
    plan: RunPlan<'_>,
    offscreen: &mut Offscreen,
    monitor: Monitor<'_>,
) -> Result<Measured> {
    let RunPlan { spec, base, director, desc } = plan;
    let Monitor { span, caught, progress } = monitor;
    let size = Size { width: desc.extent.width, height: desc.extent.height };
    director.resize(size.width, size.height);
    let mut rig = Rig::new(kind, gpu, spec, base, director.clone(), size)?;
    offscreen.bind(Frames::Images(rig.shared.images()))?;
    let mut stop = Stop { clock: SpanClock::new(span), limit: spec.plan.frames, caught, progress };
    let outcome = match kind {
        Handover::CpuGated => cpu_gated::run(&mut rig, offscreen, &mut stop),
        Handover::HostWait => host_wait::run(&mut rig, offscreen, &mut stop),
        Handover::Binary => binary::run(&mut rig, offscreen, &mut stop),
        Handover::Vkcuda => Err(anyhow!("vkcuda's own hand-over runs as a session, not here")),
    };
    let report = rig.finish(outcome.is_ok());
    let Ran { frames, completed } = outcome?;
    let consumed = stop.clock.finish(frames, completed, None);
    Ok(Measured { consumed, report: report?, producer: MadeBy::Peer(kind.name()) })
}

/// What a pattern's loop consumed.
pub struct Ran {
    /// Frames consumed.
    frames: u64,
    /// Their Vulkan times.
    completed: Samples<Completed>,
}

/// The most consumer frames a pattern keeps in flight (vulkanImageCUDA's MAX_FRAMES).
pub const MAX_IN_FLIGHT: usize = 4;

/// When a pattern's loop stops: the frame count, the span's steady time, or a signal.
pub struct Stop<'a> {
    clock: SpanClock,
    limit: u64,
    caught: &'a AtomicUsize,
    progress: &'a ProgressBar,
}

impl Stop<'_> {
    /// Call before consuming frame `consumed` (the count consumed so far): whether to stop.
    fn now(&mut self, consumed: u64) -> bool {
        if consumed % 64 == 0 {
            self.progress.set_position(consumed);
        }
        consumed >= self.limit
            || self.caught.load(Ordering::Relaxed) != 0
            || self.clock.before(consumed).is_none()
    }
}

/// The frames consumed, keeping only a frame's first consumption (the
/// cpu-gated pattern consumes the shown image again until the next is ready).
#[derive(Default)]
pub struct Consumptions {
    samples: Samples<Completed>,
    last: Option<u64>,
}

impl Consumptions {
    fn add(&mut self, done: impl IntoIterator<Item = Completed>) {
        for c in done {
            if self.last.is_none_or(|l| c.frame > l) {
                self.last = Some(c.frame);
                self.samples.push(c.frame, c);
            }
        }
    }
}

/// What every pattern runs on: vkcuda's shared images (1 or 2) and one
/// timeline, imported into CUDA; the scene kernels on one stream; the
/// consumer's frame loop; and, for `binary`, two exported binary semaphores.
pub struct Rig {
    // Field order is drop order: CUDA imports and objects first, then the
    // context, then the Vulkan objects they came from.
    cuda: CudaFrames,
    /// `binary`: CUDA's imports of ("cudaDone", "vkDone").
    binary_cuda: Vec<ExternalSemaphore>,
    kernels: SceneKernels,
    timer: KernelTimer,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    frames: FrameLoop,
    /// `binary`: ("cudaDone", "vkDone").
    binary: Vec<BinarySemaphore>,
    shared: Arc<SharedFrames>,
    device: Arc<Device>,
    director: Arc<Director>,
    report: Report,
}

impl Rig {
    fn new(
        kind: Handover,
        gpu: &Gpu,
        spec: &RunSpec,
        base: u64,
        director: Arc<Director>,
        size: Size,
    ) -> Result<Self> {
        let name = kind.name();
        let cuda_device = gpu.cuda.as_ref().ok_or_else(|| {
            UsageError::new(format!(
                "--handover {name} is a CUDA pattern, and no CUDA device matches this GPU"
            ))
        })?;
        let device = gpu.device.clone();
        // ovrtx: 2 images (read, write); the cuda-samples: 1.
        let images = if kind == Handover::CpuGated { 2 } else { 1 };
        // One timeline ("frame"), starting at the run's base value.
        let plan = FramePlan::new(SyncScheme::Shared, images, base, spec.plan.frames)
            .map_err(|e| UsageError::new(e.to_string()))?;
        let extent = vk::Extent2D { width: size.width, height: size.height };
        let shared = Arc::new(SharedFrames::new(&device, plan, FrameDesc::new(extent), true)?);
        // Command buffers in flight: ovrtx 1 (its fence), simpleVulkan 2, vulkanImageCUDA 4 (MAX_FRAMES).
        let in_flight = match kind {
            Handover::CpuGated => 1,
            Handover::HostWait => 2,
            _ => MAX_IN_FLIGHT,
        };
        let frames = FrameLoop::new(device.clone(), in_flight, None, None)?;
        let cuda = spec.producer.cuda().cloned().unwrap_or_default();
        let ctx = vkcuda::cuda::context(cuda_device, cuda.sched)?;
        let cache = cuda.cache();
        let kernels = SceneKernels::load(&ctx, &cache)?;
        let stream = ctx.new_stream().context("cuStreamCreate")?;
        let cuda = CudaFrames::import(ctx.clone(), &shared, stream.clone())?;
        let timer = KernelTimer::new(&ctx, &stream)?;
        let mut binary = Vec::new();
        let mut binary_cuda = Vec::new();
        if kind == Handover::Binary {
            for name in ["cudaDone", "vkDone"] {
                let s = BinarySemaphore::new(device.clone(), name)?;
                let imported = ExternalSemaphore::import_binary(ctx.clone().into(), s.export()?, name)
                    .with_context(|| format!("importing binary semaphore '{name}' into CUDA"))?;
                binary.push(s);
                binary_cuda.push(imported);
            }
            // vulkanImageCUDA's image belongs to its graphics queue from the start and
            // is never transferred again: take it from EXTERNAL once.
            let (acquire, _) = shared.ownership_transfer(0, device.queue_family(), COPY_READ, COPY_READ);
            device.run_once("taking the image for the binary pattern", |cmd| {
                acquire.record(device.raw(), cmd);
            })?;
        }
        Ok(Self {
            cuda,
            binary_cuda,
            kernels,
            timer,
            stream,
            ctx,
            frames,
            binary,
            shared,
            device,
            director,
            report: Report::default(),
        })
    }

    /// Enqueues frame `g`'s kernels into image `image` (timed by CUDA events).
    fn render(&mut self, g: u64, image: usize) -> Result<()> {
        self.timer.start(g, &self.stream, &mut self.report)?;
        let spec = self.director.begin(g);
        let args = FrameArgs::new(&spec.scene, spec.tick);
        let out = Out::shared(self.cuda.target(image), self.shared.desc().format);
        self.kernels.launch(&self.stream, &spec.scene, &args, out)?;
        self.timer.end(g, &self.stream)?;
        self.report.frames += 1;
        Ok(())
    }

    /// The timeline's submit info at `value`.
    fn at(&self, value: u64) -> vk::SemaphoreSubmitInfo<'static> {
        self.shared.submit_info(TimelinePoint { timeline: 0, value })
    }

    /// A submission with no commands: only waits and signals (a peer's first frame).
    fn signal_only(
        &self,
        wait: &[vk::SemaphoreSubmitInfo<'_>],
        signal: &[vk::SemaphoreSubmitInfo<'_>],
    ) -> Result<()> {
        let submit = [vk::SubmitInfo2::default().wait_semaphore_infos(wait).signal_semaphore_infos(signal)];
        let dev = &self.device;
        // SAFETY: only this thread submits; the semaphores are live.
        let r = dev.queue_op(|| unsafe { dev.raw().queue_submit2(dev.queue(), &submit, vk::Fence::null()) });
        r.context("vkQueueSubmit2 (signal only)")
    }

    /// Submits consumer frame `frame` of image `image`, with the
    /// queue-family transfer from and back to `EXTERNAL` when `transfer`.
    #[allow(clippy::too_many_arguments)]
    fn consume(
        &mut self,
        consumer: &mut dyn Consume,
        frame: u64,
        image: usize,
        transfer: bool,
        wait: &[vk::SemaphoreSubmitInfo<'_>],
        signal: &[vk::SemaphoreSubmitInfo<'_>],
        marks: Mark,
    ) -> Result<Option<Completed>> {
        let usage = consumer.image_use();
        let (acquire, release) =
            self.shared.ownership_transfer(image, self.device.queue_family(), usage, usage);
        let submission = Submission {
            frame,
            source: Source::Image(&self.shared.images()[image]),
            view: None,
            acquire: transfer.then_some(acquire),
            release: transfer.then_some(release),
            upload: None,
            wait,
            signal,
            marks,
        };
        self.frames.submit_raw(submission, consumer, &|| false)
    }

    /// Waits for the stream and the queue (bounded), after unblocking both
    /// sides when the loop failed, and resolves the kernel timings.
    fn finish(&mut self, healthy: bool) -> Result<Report> {
        if !healthy {
            // No timeline is raised from the host: in each pattern a GPU wait on the timeline
            // is enqueued only once the other side's signal of that value was, so none waits
            // for a signal that never comes (a kernel fault aside: then the bounded waits
            // below give up). Raising it "past every value" would pass signals still pending
            // (VUID-VkSemaphoreSignalInfo-value-03259). CUDA's binary wait gets its signal.
            if let Some(vk_done) = self.binary.get(1) {
                let s = [vk::SemaphoreSubmitInfo::default().semaphore(vk_done.raw)];
                let _ = self.signal_only(&[], &s);
            }
        }
        let idle = sync_bounded(&self.ctx, &self.stream);
        let queue = self.device.wait_idle();
        idle?;
        queue?;
        self.frames.forget();
        let mut report = std::mem::take(&mut self.report);
        self.timer.finish(&mut report)?;
        Ok(report)
    }
}

const COPY_READ: Use = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);

/// `cuStreamSynchronize` that gives up after [`vkcuda::vk::WAIT_TIMEOUT`] (a
/// stream waiting on a semaphore nobody signals would otherwise hang the run).
fn sync_bounded(ctx: &Arc<CudaContext>, stream: &CudaStream) -> Result<()> {
    let event: CudaEvent = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?;
    event.record(stream)?;
    bounded_wait(&|| "the CUDA stream to finish".into(), &|| false, |slice| {
        let until = Instant::now() + slice;
        while Instant::now() < until {
            if event.try_is_complete()? {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(false)
    })
}
