//! The CUDA producer: one stream, one thread. For frame `g` it enqueues
//! wait("released") → kernel (into the shared image or buffer) →
//! signal("rendered"), and never synchronises with the host in steady state.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};

use super::{Control, FrameTiming, Job, Report, WakeOnPublish};
use crate::base::size::Size;
use crate::cuda::driver;
use crate::diagnostics::inject::Fault;
use crate::kernel::reload::{Compiled, ReloadLink};
use crate::kernel::user::{KernelClock, KernelSpec, UserKernel, Version};
use crate::metrics::clock::{now_ns, CpuMeter};
use crate::scene::director::{Director, FrameSpec};
use crate::scene::kernels::{Out, SceneKernels};
use crate::scene::FrameArgs;
use vkcuda::cuda::StreamState;
use vkcuda::interop::{CudaFrames, SharedFrames};
use vkcuda::vk::timeline::Timeline;
use vkcuda::vk::WAIT_TIMEOUT;
use vkcuda::Format;

/// A newly compiled version of the user's kernel, loaded, waiting for the next frame.
pub(crate) struct Loaded {
    compiled: Compiled,
    version: Version,
    took: Duration,
}

/// Loads the newest compiled version of the user's kernel, if there is one,
/// to be swapped in before the next frame (a newer one replaces one that never ran).
fn load_new_version(user: &UserKernel, link: &ReloadLink, ctx: &Arc<CudaContext>, next: &mut Option<Loaded>) {
    let Some(compiled) = link.take() else { return };
    let started = Instant::now();
    match user.load_version(ctx, compiled.program.clone()) {
        Ok(version) => *next = Some(Loaded { compiled, version, took: started.elapsed() }),
        Err(e) => eprintln!("vkcuda: the new kernel does not load ({e:#}): keeping the old"),
    }
}

/// Swaps the loaded version in, if there is one, from frame `g` on; the
/// versions swapped out earlier are unloaded once their launches have ended.
fn swap_loaded(
    user: &mut UserKernel,
    stream: &CudaStream,
    link: &ReloadLink,
    next: &mut Option<Loaded>,
    g: u64,
) -> Result<()> {
    user.unload_finished();
    let Some(loaded) = next.take() else { return Ok(()) };
    user.swap(loaded.version, stream)?;
    let kept = user.unload_finished();
    let version = link.version() + 1;
    link.running(&user.arch, version);
    link.swapped(&loaded.compiled, version, g);
    let (after, load) = (loaded.compiled.made.changed.elapsed(), loaded.took);
    eprintln!(
        "vkcuda: kernel v{version} renders from frame {g}, {after:.0?} after the change (loaded in {load:.1?}; \
         {kept} older versions loaded until their frames end)"
    );
    Ok(())
}

/// The timelines a producer waits on from the host before it enqueues a frame.
pub enum HostWaits {
    /// The session's own (a producer in its process).
    Shared(Arc<SharedFrames>),
    /// Imported from the session's process, in the plan's order (a child's).
    Imported(Vec<Timeline>),
}

impl HostWaits {
    /// Timeline `t` of the plan.
    fn timeline(&self, t: usize) -> &Timeline {
        match self {
            HostWaits::Shared(shared) => &shared.timelines()[t],
            HostWaits::Imported(timelines) => &timelines[t],
        }
    }
}

/// Kernel timings are resolved this many frames late, so reading an event never stalls.
pub(crate) const EVENT_RING: usize = 16;

/// The CUDA producer's state: imports of the Vulkan objects, the stream, the kernels.
///
/// Ownership and ordering: built on the consumer's thread, then moved to its
/// own thread by [`crate::drive::setup::Producer::spawn`]; only that thread enqueues
/// on its stream. It signals "rendered" and waits on "released" on the GPU,
/// and as it ends synchronises the stream and drops the imports, before the
/// Vulkan images and timelines they came from.
pub struct CudaProducer {
    /// The imports; their `Drop` waits until the stream is idle (on every
    /// path out of [`CudaProducer::run`]: success, error or panic).
    frames: CudaFrames,
    kernels: SceneKernels,
    /// `--kernel`: runs instead of the scene's kernel; with the viewer's hot reload.
    user: Option<(UserKernel, Option<ReloadLink>)>,
    format: Format,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    /// What each frame shows (`None` in a child process: the parent says, frame by frame).
    director: Option<Arc<Director>>,
    /// Wait on the host (`vkWaitSemaphores`, which sleeps) for "released"
    /// before enqueuing a frame that reuses an image. Without it the stream's
    /// wait is enqueued on a value not yet reached, and the driver then spins
    /// this thread inside the next CUDA call until the value is reached: one
    /// core always busy (docs/results/2026-11-24-h100/README.md, "CPU: no thread spins"). The stream still waits too.
    pub host_waits: Option<HostWaits>,
}

/// The kernels a CUDA producer loads: the scene's, and the user's when one is given.
pub struct KernelsToLoad<'a> {
    /// Where the scene's compiled PTX is cached.
    pub ptx_cache: &'a Path,
    /// `--kernel`: the user's kernel, which runs instead of the scene's.
    pub user: Option<UserKernelToLoad<'a>>,
}

/// The user's kernel, and its hot reload.
pub struct UserKernelToLoad<'a> {
    /// Its file, entry and parameters.
    pub spec: &'a KernelSpec,
    /// The viewer's hot reload: the versions compiled since, and where the
    /// producer says which one runs.
    pub reload: Option<ReloadLink>,
}

/// A loop's kernel timing ([`CudaProducer::clocks`]).
pub(crate) struct Clocks {
    /// The events around each frame's kernels.
    pub timer: KernelTimer,
    /// The time a live kernel is given for each frame.
    pub clock: KernelClock,
}

impl CudaProducer {
    /// Imports the shared images and timelines into `ctx` (the core's
    /// [`CudaFrames`]) and loads `kernels`, to render what `director` says
    /// (on a high-priority stream when `high_priority`).
    pub fn new(
        ctx: Arc<CudaContext>,
        shared: &Arc<SharedFrames>,
        director: Arc<Director>,
        kernels: KernelsToLoad<'_>,
        high_priority: bool,
    ) -> Result<Self> {
        let import =
            |ctx: Arc<CudaContext>, stream: Arc<CudaStream>| Ok(CudaFrames::import(ctx, shared, stream)?);
        let mut this = Self::with_frames(ctx, import, kernels, high_priority)?;
        this.director = Some(director);
        Ok(this)
    }

    /// The producer of a child process ([`crate::drive::child`]): `import`
    /// imports the frames another process exported, on the stream made here.
    pub(crate) fn with_frames(
        ctx: Arc<CudaContext>,
        import: impl FnOnce(Arc<CudaContext>, Arc<CudaStream>) -> Result<CudaFrames>,
        to_load: KernelsToLoad<'_>,
        high_priority: bool,
    ) -> Result<Self> {
        let KernelsToLoad { ptx_cache, user } = to_load;
        let kernels = SceneKernels::load(&ctx, ptx_cache)?;
        let user = match user {
            Some(UserKernelToLoad { spec, reload: link }) => {
                let user =
                    UserKernel::load(&ctx, spec, link.as_ref().and_then(ReloadLink::last_good), ptx_cache)?;
                if let Some(link) = &link {
                    link.running(&user.arch, link.version().max(1));
                }
                Some((user, link))
            }
            None => None,
        };
        ctx.bind_to_thread()?;
        let stream = match high_priority {
            false => ctx.new_stream(),
            true => {
                // The context is bound (by the imports above).
                let priorities = driver::stream_priorities();
                let priorities = priorities.or_else(|r| {
                    let default = driver::StreamPriorities { least: 0, greatest: 0 };
                    vkcuda::cuda::check(r, "cuCtxGetStreamPriorityRange").map(|()| default)
                })?;
                ctx.new_stream_with_priority(priorities.greatest)
            }
        }
        .context("cuStreamCreate")?;
        let frames = import(ctx.clone(), stream.clone())?;
        let format = frames.desc().format;
        Ok(Self { frames, kernels, user, format, stream, ctx, director: None, host_waits: None })
    }

    /// The architecture the user's kernel was compiled for (`sm_XY`), if one runs.
    pub(crate) fn arch(&self) -> Option<&str> {
        self.user.as_ref().map(|(u, _)| u.arch.as_str())
    }

    /// The context, bound to the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        Ok(self.ctx.bind_to_thread()?)
    }

    /// The kernel timer and clock of a loop over frames (the context bound).
    pub(crate) fn clocks(&self) -> Result<Clocks> {
        let timer = KernelTimer::new(&self.ctx, &self.stream)?;
        Ok(Clocks { timer, clock: KernelClock::new(self.user.as_ref().is_some_and(|(u, _)| u.live())) })
    }

    /// Loads a version published on its link, if there is one, to be swapped in
    /// before the next frame: while waiting for a turn, off the path to the screen.
    pub(crate) fn load_new_version(&self, next: &mut Option<Loaded>) {
        if let Some((user, Some(link))) = &self.user {
            load_new_version(user, link, &self.ctx, next);
        }
    }

    /// Between frames: loads a version published on its link and swaps it in from frame `g`.
    pub(crate) fn take_new_version(&mut self, next: &mut Option<Loaded>, g: u64) -> Result<()> {
        self.load_new_version(next);
        if let Some((user, Some(link))) = &mut self.user {
            swap_loaded(user, &self.stream, link, next, g)?;
        }
        Ok(())
    }

    /// The producer thread's loop.
    pub fn run(mut self, job: &Job) -> Result<Report> {
        self.bind()?;
        let mut clocks = self.clocks()?;
        let director = self.director.clone().context("a producer of this process needs a director")?;
        let (mut report, mut meter) = (Report::default(), CpuMeter::default());
        let wake = WakeOnPublish::new(self.user.as_ref().and_then(|(_, link)| link.as_ref()), &job.control);
        let mut next = None;
        let result = (|| -> Result<()> {
            let mut g = 0;
            while g < job.control.limit() {
                meter.frame(g, job.control.steady(g));
                self.await_turn(job, g, &mut next);
                if g >= job.control.limit() {
                    break;
                }
                self.host_wait(job, g)?;
                // Between frames, as late as possible: a newly compiled version replaces the running one.
                self.take_new_version(&mut next, g)?;
                job.inject.producer_panic(g);
                job.inject.producer_stall(g, || job.control.failed())?;
                let spec = director.begin(g);
                if let Some(t) = self.render(job, g, &spec, &mut clocks, &mut report)? {
                    job.control.set_render_time(t.render);
                }
                report.frames += 1;
                g += 1;
                job.control.set_produced(g);
            }
            self.settle(&job.control, false)
        })();
        drop(wake);
        report.cpu_per_frame = meter.per_frame(report.frames);
        if self.frames.stream_state() == StreamState::Busy {
            return Err(self.abandon(next, job, &result));
        }
        result?;
        clocks.timer.finish(&mut report)?;
        Ok(report)
    }

    /// Paced to the screen (`--latency low`): frame `g` starts once `g - 1` is
    /// on screen. A kernel version compiled meanwhile is loaded while this
    /// waits, off the path to the screen, and then goes ahead at once: its
    /// first frame is rendered while frame `g - 1` is put on screen, not after.
    fn await_turn(&self, job: &Job, g: u64, next: &mut Option<Loaded>) {
        loop {
            self.load_new_version(next);
            // A faulted stream never lets the frame before show: go on to its error.
            if next.is_some() || job.control.await_turn(g, &|| self.stream_failed()) {
                return;
            }
        }
    }

    /// With host waits: waits on the host for the plan's wait of frame `g`
    /// (a stream waiting on a value not yet reached blocks this thread's next call).
    pub(crate) fn host_wait(&self, job: &Job, g: u64) -> Result<()> {
        let (Some(waits), Some(w)) = (&self.host_waits, job.plan.producer(g).wait) else { return Ok(()) };
        let control = &job.control;
        // A faulted stream never lets the consumer release: give up at once.
        let waited = waits.timeline(w.timeline).wait(w.value, &|| control.failed() || self.stream_failed());
        if let Err(e) = waited {
            // The stream's error is the cause, when there is one. A wait that timed out
            // already gave a busy stream its time.
            let timed_out = matches!(e, vkcuda::Error::TimedOut { .. });
            self.settle(control, timed_out)?;
            return Err(e.into());
        }
        Ok(())
    }

    /// Frame `g`, showing `spec`: the GPU-side wait until the consumer
    /// released its image (frame g - N), the kernel (the scene's or the
    /// user's), timed, and the signal. Returns the timing of the frame
    /// [`EVENT_RING`] frames before, now resolved.
    pub(crate) fn render(
        &self,
        job: &Job,
        g: u64,
        spec: &FrameSpec,
        clocks: &mut Clocks,
        report: &mut Report,
    ) -> Result<Option<FrameTiming>> {
        let Clocks { timer, clock } = clocks;
        let target = self.frames.begin(g)?;
        let resolved = timer.start(g, &self.stream, report)?;
        let args = FrameArgs::new(&spec.scene, spec.tick);
        let out = Out::shared(target, self.format);
        match &self.user {
            Some((user, _)) => {
                let size = Size { width: spec.scene.width, height: spec.scene.height };
                // The run's frame number (global with --shard): the animation's tick.
                let index = u64::from(spec.tick);
                user.launch(&self.stream, out, size, index, clock.at(index), spec.pointer)?
            }
            None => self.kernels.launch(&self.stream, &spec.scene, &args, out)?,
        }
        if job.inject.at(Fault::KernelTrap, g) {
            self.kernels.launch_fault(&self.stream)?;
        }
        timer.end(g, &self.stream)?;
        self.frames.end(g)?;
        Ok(resolved)
    }

    /// A kernel that does not end: unloading its module or releasing the
    /// context would wait for it forever, so this thread leaves them to the
    /// driver, which ends the kernel when the process exits; so is a version
    /// loaded and not yet run. The error says why the run stopped.
    pub(crate) fn abandon(self, next: Option<Loaded>, job: &Job, result: &Result<()>) -> anyhow::Error {
        std::mem::forget(self);
        std::mem::forget(next);
        let why = match (job.control.abandoned(), result) {
            (true, _) => "the run gave up on it".to_string(),
            (false, Err(e)) => format!("{e:#}"),
            (false, Ok(())) => format!("waited {WAIT_TIMEOUT:?} after the last frame"),
        };
        anyhow::anyhow!(
            "a kernel is still running on the CUDA stream ({why}; a kernel that does not end?): \
             stopping without waiting for it"
        )
    }

    /// Whether a kernel or operation on the stream failed (a fault is sticky).
    pub(crate) fn stream_failed(&self) -> bool {
        matches!(self.frames.stream_state(), StreamState::Failed(_))
    }

    /// Waits (bounded) until the stream has finished; its error if it failed.
    /// A stream still busy is not waited for again when the consumer gave up
    /// on it, or when `waited` (this thread waited out the timeout already).
    pub(crate) fn settle(&self, control: &Control, waited: bool) -> Result<()> {
        if (waited || control.abandoned()) && self.frames.stream_state() == StreamState::Busy {
            return Ok(());
        }
        Ok(self.frames.synchronize()?)
    }
}

/// CUDA events around each frame's kernels, resolved `EVENT_RING` frames
/// late so reading one never stalls the thread that enqueues.
pub struct KernelTimer {
    events: Vec<(CudaEvent, CudaEvent)>,
    anchor: EventAnchor,
}

impl KernelTimer {
    /// A ring of event pairs; `stream` must be idle (the anchor is recorded on it).
    pub fn new(ctx: &Arc<CudaContext>, stream: &CudaStream) -> Result<Self> {
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut events = Vec::new();
        for _ in 0..EVENT_RING {
            events.push((ctx.new_event(timing)?, ctx.new_event(timing)?));
        }
        Ok(Self { events, anchor: EventAnchor::new(ctx, stream)? })
    }

    /// Records frame `g`'s start; first resolves the frame that used the pair
    /// before (into `report`) and returns its timing.
    pub fn start(&self, g: u64, stream: &CudaStream, report: &mut Report) -> Result<Option<FrameTiming>> {
        let (start, end) = &self.events[g as usize % EVENT_RING];
        let mut old = None;
        if g as usize >= EVENT_RING {
            // The pair's previous frame finished long ago; read its times before reuse.
            let t = self.anchor.resolve(start, end)?;
            report.timings.push(g - EVENT_RING as u64, t);
            old = Some(t);
        }
        start.record(stream)?;
        Ok(old)
    }

    /// Records frame `g`'s end (after its kernels).
    pub fn end(&self, g: u64, stream: &CudaStream) -> Result<()> {
        Ok(self.events[g as usize % EVENT_RING].1.record(stream)?)
    }

    /// Resolves the frames still in the ring, once the stream is idle.
    pub fn finish(&self, report: &mut Report) -> Result<()> {
        let first = report.frames.saturating_sub(EVENT_RING as u64);
        for g in first..report.frames {
            let (start, end) = &self.events[g as usize % EVENT_RING];
            report.timings.push(g, self.anchor.resolve(start, end)?);
        }
        Ok(())
    }
}

/// The time between two recorded events.
pub(crate) fn elapsed(start: &CudaEvent, end: &CudaEvent) -> Result<Duration> {
    end.synchronize()?;
    Ok(Duration::from_secs_f64(f64::from(start.elapsed_ms(end)?).max(0.0) * 1e-3))
}

/// A CUDA event whose host time is known: CUDA events only measure time
/// between events, so each frame's "rendered" moment is placed on the host's
/// clock as this anchor's host time plus the time from the anchor to the
/// frame's end event. The anchor is recorded on an idle stream between two
/// host clock reads; the tightest of several tries is kept (error: half its
/// width, a few µs). `cuEventElapsedTime` is a float of milliseconds: good to
/// well under 1 µs for runs of minutes.
pub(crate) struct EventAnchor {
    event: CudaEvent,
    host_ns: u64,
}

impl EventAnchor {
    /// Records the anchor on `stream`, which must be idle.
    pub(crate) fn new(ctx: &Arc<CudaContext>, stream: &CudaStream) -> Result<Self> {
        let mut best: Option<(u64, u64, CudaEvent)> = None;
        for _ in 0..8 {
            let event = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            let before = now_ns();
            event.record(stream)?;
            event.synchronize()?;
            let after = now_ns();
            if best.as_ref().is_none_or(|(b, a, _)| after - before < a - b) {
                best = Some((before, after, event));
            }
        }
        let (before, after, event) = best.context("no anchor event")?;
        Ok(Self { event, host_ns: before + (after - before) / 2 })
    }

    /// A frame's timing: render time `start → end`, and the host time of `end`.
    pub(crate) fn resolve(&self, start: &CudaEvent, end: &CudaEvent) -> Result<FrameTiming> {
        let render = elapsed(start, end)?;
        let since = Duration::from_secs_f64(f64::from(self.event.elapsed_ms(end)?).max(0.0) * 1e-3);
        Ok(FrameTiming { render, rendered_ns: self.host_ns + since.as_nanos() as u64 })
    }
}
