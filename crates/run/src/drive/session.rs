//! A running interop: the frame plan, shared images and timelines, the
//! producer on its thread, and the consumer's frame loop. `--headless` runs
//! one session; the viewer starts a new one whenever `--size window` follows
//! a resize. Both stop it the same way.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use crate::base::kinds::ProducerId;
use crate::base::size::Size;
use crate::diagnostics::inject::{Fault, Inject};
use crate::diagnostics::xid;
use crate::drive::producer::{Control, Job, Report};
use crate::drive::setup::{self, Built, Interop, RunSpec};
use crate::error::failure::{gave_up, panic_message, timed_out, RunError};
use crate::frames::consumer::{Completed, Consume, Discard, ExtraSync, FrameLoop, Frames, Source};
use crate::frames::gpu::Gpu;
use crate::UsageError;
use vkcuda::cuda::CudaDevice;
use vkcuda::interop::Use;
use vkcuda::sync::FramePlan;
use vkcuda::vk::bounded_wait;
use vkcuda::FrameDesc;

/// A running interop.
///
/// Ownership and ordering: the producer thread owns the CUDA side; this
/// (the consumer's thread) owns the Vulkan side. [`Session::end`] ends
/// every session: it consumes or releases what the producer made, joins the
/// producer (whose CUDA imports go first), waits for the queue, so the
/// Vulkan objects in `interop` can then be dropped, and says which side
/// caused a failure ([`RunError`]).
///
/// Every front end drives a run through these methods alone: it submits
/// frames ([`Session::submit`], or a window's [`crate::drive::screen::Screen`]),
/// asks whether the next one is [`ready`](Session::ready) or
/// [`held up`](Session::held_up_by), whether the producer failed, and ends
/// the session with its own outcome.
pub struct Session {
    /// The frame/value plan.
    plan: FramePlan,
    /// Shared images, timelines and (CPU producer) staging buffers.
    interop: Interop,
    /// The consumer's command-buffer slots and submission protocol.
    frames: FrameLoop,
    /// Frame count and failure flag, shared with the producer.
    control: Arc<Control>,
    handle: Option<JoinHandle<Result<Report>>>,
    /// The next frame to consume.
    next: u64,
    /// Size of the shared images.
    size: Size,
    /// Which producer runs: what renders, and where.
    producer: ProducerId,
    /// The CUDA device the producer uses, if any.
    cuda: Option<CudaDevice>,
    /// Wait on the host for "rendered" before each submission (`--host-waits`).
    host_waits: bool,
    /// Test only: the faults to inject (signals, as frames are submitted).
    inject: Inject,
    /// A signal's number once one arrived: a wait for a frame held up for
    /// [`STALL`] then gives up ([`Session::interrupt_with`]).
    interrupt: Option<Arc<AtomicUsize>>,
}

/// A frame awaited this long is stuck: it is reported, and a signal (or the
/// viewer's Esc) ends the wait instead of waiting out [`vkcuda::vk::WAIT_TIMEOUT`].
pub const STALL: Duration = Duration::from_secs(2);

/// What a stopped session leaves.
pub struct Stopped {
    /// The producer's report.
    pub report: Report,
    /// The frames consumed while stopping.
    pub drained: Vec<Completed>,
    /// A timeline value above every value this session used: the next session's base.
    pub next_base: u64,
    /// Frames consumed in all, including those a graceful stop consumed
    /// after the producer's stop point.
    pub consumed: u64,
    /// Paced to the screen: the most frames the producer made beyond those on screen.
    pub lead: Option<u64>,
}

/// A session that ended well ([`Session::end`]).
pub struct SessionEnd<T> {
    /// What the consumer's outcome held.
    pub outcome: T,
    /// What the stop left.
    pub stopped: Stopped,
}

impl Session {
    /// Builds the interop for frames `desc` with timelines starting at
    /// `base`, and starts the producer on its thread.
    pub fn start(gpu: &Gpu, spec: &RunSpec, desc: FrameDesc, base: u64) -> Result<Self> {
        let size = Size { width: desc.extent.width, height: desc.extent.height };
        if let Some(director) = spec.producer.director() {
            director.resize(size.width, size.height);
        }
        let total = spec.plan.frames;
        let plan = FramePlan::new(spec.plan.sync, spec.plan.buffers, base, total)
            .map_err(|e| UsageError::new(e.to_string()))?;
        let Built { interop, producer } = setup::build(gpu, spec, plan, desc)?;
        let (staging, views) = (interop.staging.clone(), interop.views.clone());
        let mut frames = FrameLoop::new(gpu.device.clone(), spec.consumer.in_flight, staging, views)?;
        frames.fail_recording_at = spec.inject.first(Fault::ConsumerError);
        frames.lose_device_at = spec.inject.first_once(Fault::DeviceLost);
        let control = Control::new(total);
        if spec.consumer.paced {
            control.pace_to_screen();
        }
        let id = producer.id();
        let job = Job { plan, control: control.clone(), inject: spec.inject.clone() };
        let handle = producer.spawn(job)?;
        // A child's CUDA is its own: this process makes no context (the footprint would).
        let cuda = gpu.cuda.clone().filter(|_| id.cuda_here());
        let host_waits = spec.consumer.host_waits;
        Ok(Self {
            plan,
            interop,
            frames,
            control,
            handle: Some(handle),
            next: 0,
            size,
            producer: id,
            cuda,
            host_waits,
            inject: spec.inject.clone(),
            interrupt: None,
        })
    }

    /// The next frame to consume.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Frames the producer has submitted so far.
    pub fn produced(&self) -> u64 {
        self.control.produced()
    }

    /// Whether the producer has submitted the next frame (it can be consumed now).
    pub fn ready(&self) -> bool {
        self.next < self.control.produced()
    }

    /// The frame count the run stops at.
    pub fn limit(&self) -> u64 {
        self.control.limit()
    }

    /// Whether the producer has failed (its error is the stop's).
    pub fn producer_failed(&self) -> bool {
        self.control.failed()
    }

    /// The shared frames' size.
    pub fn size(&self) -> Size {
        self.size
    }

    /// Which producer runs: what renders, and where.
    pub fn producer(&self) -> ProducerId {
        self.producer
    }

    /// The CUDA device the producer uses, if any.
    pub fn cuda(&self) -> Option<&CudaDevice> {
        self.cuda.as_ref()
    }

    /// What a consumer that binds its frames up front (the draw pass, the
    /// shader copy) binds: the shared images or buffers, or the images the
    /// loop copies buffers into.
    pub fn frames(&self) -> Frames<'_> {
        self.interop.frames()
    }

    /// The consumer's frame slots (frames in flight).
    pub fn slots(&self) -> usize {
        self.frames.slots()
    }

    /// The producer's median render time of its recent frames.
    pub fn render_time(&self) -> Duration {
        self.control.render_time()
    }

    /// Frames from `g` on count towards the producer's steady-state timings.
    pub fn set_steady_from(&self, g: u64) {
        self.control.set_steady_from(g);
    }

    /// Whether a submitted frame has not finished on the GPU, polled for at most `within`.
    pub fn in_flight(&self, within: Duration) -> Result<bool> {
        Ok(self.frames.unfinished(None, within)?.is_some())
    }

    /// Waits (bounded) until the queue is idle (before a swapchain is rebuilt).
    pub fn wait_idle(&self) -> Result<()> {
        Ok(self.frames.device().wait_idle()?)
    }

    /// Frames that are held up may never come (a stuck kernel, a signal, a
    /// wait that ran out): the producer must not wait for its stream, and
    /// [`Session::end`] aborts instead of consuming what is left.
    pub fn abandon(&self) {
        self.control.abandon();
    }

    /// Lets a signal end a wait for a stuck frame: once `caught` is not zero,
    /// a wait that has lasted [`STALL`] gives up, so a stop need
    /// not wait out the timeout for a kernel that does not end.
    pub fn interrupt_with(&mut self, caught: Arc<AtomicUsize>) {
        self.interrupt = Some(caught);
    }

    /// The condition a wait of this session gives up on: the other side
    /// failed, or a signal came while the wait has lasted [`STALL`]. With
    /// [`Session::interrupt_with`], a wait that lasts [`STALL`] says so, once.
    fn give_up(&self) -> impl Fn() -> bool {
        let (control, interrupt, since) = (self.control.clone(), self.interrupt.clone(), Instant::now());
        let said = std::cell::Cell::new(false);
        let g = self.next;
        move || {
            let stuck = since.elapsed() >= STALL;
            if stuck && interrupt.is_some() && !said.replace(true) {
                eprintln!(
                    "vkcuda: frame {g} is held up for over {STALL:?} (a kernel that does not end?): \
                     Ctrl+C or SIGTERM stops without waiting for it"
                );
                // Or a GPU whose graphics pipelines a CUDA fault stopped: the kernel log tells.
                xid::say_fault_hint_once();
            }
            let signalled = interrupt.as_ref().is_some_and(|c| c.load(Ordering::Relaxed) != 0);
            control.failed() || (signalled && stuck)
        }
    }

    /// Waits until the slot of the next frame is free; see [`FrameLoop::pace`].
    pub fn pace(&mut self, consumer: &mut dyn Consume) -> Result<Option<Completed>> {
        let give_up = self.give_up();
        self.frames.pace(self.next, &mut Showing { consumer, control: &self.control }, &give_up)
    }

    /// Retires the submitted frames that have finished (a consumer that shows
    /// frames as they are consumed shows them now). Paced to the screen, the
    /// producer waits for the last submitted frame to be on screen: this
    /// waits up to `within` for it to finish first.
    pub fn show_finished(&mut self, consumer: &mut dyn Consume, within: Duration) -> Result<Vec<Completed>> {
        if self.control.paced() && self.next > 0 && self.control.shown() < self.next {
            self.frames.unfinished(Some(self.next - 1), within)?;
        }
        self.frames.retire_finished(&mut Showing { consumer, control: &self.control })
    }

    /// Frame `g` is on screen although not yet consumed (a swapchain image
    /// presented): paced to the screen, the producer may start frame g + 1.
    pub fn shown(&self, g: u64) {
        self.control.set_shown(g + 1);
    }

    /// Without blocking longer than `within`, the frame the next one is held
    /// up by, if it is not ready to go: with `all` (before a rebuild or a
    /// stop), any frame not yet finished on the GPU, else the one in the next
    /// frame's slot; and, with `produced` (a present waits on the frame's
    /// signal; a stop consumes what the producer makes) or a host producer
    /// ([`Session::submit`] waits for it), the next frame until the producer
    /// has submitted it.
    pub fn held_up_by(&self, all: bool, produced: bool, within: Duration) -> Result<Option<u64>> {
        let g = self.next;
        if (produced || self.interop.host_signals) && !self.produced_within(g, within) {
            return Ok(Some(g));
        }
        self.frames.unfinished((!all).then_some(g), within)
    }

    /// Whether the producer has submitted frame `g`, polled for at most `within`.
    fn produced_within(&self, g: u64, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            if self.control.produced() > g {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Waits (bounded) until the producer has submitted frame `g`: for CUDA,
    /// enqueued its "rendered" signal; for a host producer, returned from its
    /// `vkSignalSemaphore`.
    fn wait_produced(&self, g: u64) -> Result<()> {
        bounded_wait(&|| format!("the producer to submit frame {g}"), &self.give_up(), |slice| {
            Ok(self.produced_within(g, slice))
        })
    }

    /// Records and submits the next frame; see [`FrameLoop::submit`].
    ///
    /// Frame g is submitted ahead of the producer (the GPU waits for
    /// "rendered"), except in two cases, where it waits until the producer
    /// has submitted frame g:
    /// - `extra` signals a semaphore (a present waits on it): a present must
    ///   not wait on a signal whose own waits are not yet submitted;
    /// - a host producer (CPU, staging): then the validation layer always sees
    ///   its host signal of "rendered" before the wait on it. The spec allows
    ///   the wait first; layer 1.3.239 does not cope: when its record of a
    ///   host signal comes after the queue's wait for the value, its timeline
    ///   tracking stalls for 10 s and reports
    ///   `UNASSIGNED-VkSemaphore-state-timeout` and `VkFence-state-timeout`
    ///   (docs/sync.md; `examples/host_wait_race.rs --spawn 16` reproduces it).
    pub fn submit(&mut self, consumer: &mut dyn Consume, extra: ExtraSync<'_>) -> Result<Option<Completed>> {
        let give_up = self.give_up();
        let g = self.next;
        if let Some(signal) = self.inject.signal(g) {
            // SAFETY: raise(3) only delivers a signal to this process; the handlers are signal-hook's.
            unsafe { libc::raise(signal) };
        }
        if !extra.signal.is_empty() || self.interop.host_signals {
            self.wait_produced(g)?;
        }
        if let Some(w) = self.plan.consumer(g).wait.filter(|_| self.host_waits) {
            // The hand-over experiment: the queue's wait below is then already satisfied.
            self.wait_produced(g)?;
            self.interop.shared.timelines()[w.timeline].wait(w.value, &give_up)?;
        }
        let showing = &mut Showing { consumer, control: &self.control };
        let done = self.frames.submit(g, &self.interop.shared, showing, extra, &give_up)?;
        self.next += 1;
        Ok(done)
    }

    /// Retires the submitted frames the GPU has finished, never waiting; see
    /// [`FrameLoop::retire_finished`].
    pub fn retire_finished(&mut self, consumer: &mut dyn Consume) -> Result<Vec<Completed>> {
        self.frames.retire_finished(&mut Showing { consumer, control: &self.control })
    }

    /// Whether a submitted frame is not yet retired.
    pub fn unretired(&self) -> bool {
        self.frames.unretired()
    }

    /// Waits for every submitted frame; see [`FrameLoop::drain`].
    pub fn drain(&mut self, consumer: &mut dyn Consume) -> Result<Vec<Completed>> {
        let control = self.control.clone();
        self.frames.drain(&mut Showing { consumer, control: &self.control }, &|| control.failed())
    }

    /// Ends the session after the frames consumed so far.
    ///
    /// `healthy`: consume every submitted frame; the frames the producer made
    /// beyond the stop are consumed too, on the GPU, by the consumer if it is
    /// standalone, else by [`Discard`]; join the producer. Otherwise (a side
    /// failed) it aborts (docs/sync.md, "Stopping after a failure"). Either
    /// way the producer thread has ended and the queue is idle when this
    /// returns, on every path.
    fn stop(mut self, consumer: &mut dyn Consume, healthy: bool) -> Result<Stopped> {
        // The stop ends the pacing: whether there was one is read first.
        let paced = self.control.paced();
        self.control.stop_at(self.next);
        let handle = self.handle.take().ok_or_else(|| anyhow!("producer already joined"))?;
        let drained = match healthy {
            true if consumer.standalone() => self.consume_the_rest(consumer, &handle),
            true => self.drain(consumer).and_then(|mut done| {
                done.extend(self.consume_the_rest(&mut Discard, &handle)?);
                Ok(done)
            }),
            false => Err(anyhow!("the consumer failed")),
        };
        // Drained: the consumer followed the producer to its end and every
        // submitted frame is consumed, so nothing is left pending.
        let report = match &drained {
            Ok(_) => join(handle),
            Err(_) => self.abort(handle),
        };
        let idle = self.frames.device().wait_idle();
        let report = report?;
        let drained = match healthy {
            true => drained?,
            false => Vec::new(),
        };
        idle?;
        let top =
            self.interop.shared.timelines().iter().map(|t| t.value()).collect::<vkcuda::Result<Vec<_>>>()?;
        let next_base = top.into_iter().max().unwrap_or(0) + 1;
        Ok(Stopped {
            report,
            drained,
            next_base,
            consumed: self.next,
            lead: paced.then(|| self.control.lead()),
        })
    }

    /// Ends the session after `outcome` (the consumer's, up to now) and
    /// decides which side caused a failure: the side that did not merely
    /// give up waiting for the other ([`gave_up`]). A consumer that failed, or
    /// an [`abandoned`](Session::abandon) session, aborts; otherwise every
    /// frame is consumed, on the GPU, up to the producer's end.
    pub fn end<T>(self, consumer: &mut dyn Consume, outcome: Result<T>) -> Result<SessionEnd<T>, RunError> {
        if outcome.as_ref().is_err_and(timed_out) {
            // A frame that never came: the stop must not wait for it again.
            self.abandon();
        }
        let producer = self.producer;
        let healthy = outcome.is_ok() && !self.control.abandoned();
        let failed = |error, consumer| RunError::ProducerFailed { producer, error, consumer };
        match (outcome, self.stop(consumer, healthy)) {
            (Ok(outcome), Ok(stopped)) => Ok(SessionEnd { outcome, stopped }),
            (Err(consumer), Err(e)) if gave_up(&e) && !gave_up(&consumer) => {
                Err(RunError::of_consumer(consumer))
            }
            (Err(consumer), Err(e)) if gave_up(&consumer) => Err(failed(e, None)),
            (Err(consumer), Err(e)) => Err(failed(e, Some(consumer))),
            (Ok(_), Err(e)) => Err(failed(e, None)),
            (Err(consumer), Ok(_)) => Err(RunError::of_consumer(consumer)),
        }
    }

    /// Consumes, on the GPU, every frame the producer makes until its thread
    /// ends. No host signal or host wait touches a timeline: with `--sync
    /// shared` the producer (CUDA) signals the same timeline, and a host signal
    /// there would race CUDA's (the validation layer, which cannot see CUDA's
    /// signals, reports it); and a host wait on a value another thread signals
    /// from the host makes layer 1.3.239 report
    /// `UNASSIGNED-VkSemaphore-state-timeout`.
    fn consume_the_rest(
        &mut self,
        consumer: &mut dyn Consume,
        producer: &JoinHandle<Result<Report>>,
    ) -> Result<Vec<Completed>> {
        let mut done = Vec::new();
        let control = self.control.clone();
        let ended = || producer.is_finished() || control.failed();
        follow_producer(&control, self.next, ended, |_| {
            done.extend(self.submit(consumer, ExtraSync::default())?);
            Ok(())
        })?;
        done.extend(self.drain(consumer)?);
        Ok(done)
    }

    /// Ends a failed session validly: every wait, on the GPU and the host,
    /// is met by the party that owns the timeline, in rising order, and no
    /// host signal ever jumps past a value a submitted batch or the stream
    /// will still signal (docs/sync.md, "Stopping after a failure"):
    ///
    /// 1. the producer is told to stop; until its thread has ended, every
    ///    frame it submitted that the consumer has not is consumed on the GPU
    ///    by [`Discard`], so each of its stream's waits on "released" has a
    ///    batch that signals it, and its stream drains (the producer's
    ///    imports wait for that before they go);
    /// 2. the thread is joined (a panic becomes an error);
    /// 3. [`Session::stand_in`] for frames it never made.
    ///
    /// Returns the producer's result.
    fn abort(&mut self, producer: JoinHandle<Result<Report>>) -> Result<Report> {
        self.control.fail();
        let control = self.control.clone();
        let shared = self.interop.shared.clone();
        let ended = || producer.is_finished();
        let released = follow_producer(&control, self.next, ended, |g| {
            self.frames.submit(g, &shared, &mut Discard, ExtraSync::default(), &ended)?;
            self.next = g + 1;
            Ok(())
        });
        if let Err(e) = released {
            log::error!("while releasing the producer's frames: {e:#}");
        }
        let report = join(producer);
        self.stand_in();
        report
    }

    /// With the producer's thread ended (so nothing but the host and this
    /// queue signals a timeline any more), meets the waits of the consumer
    /// frames still pending, oldest first: raise the frame's "rendered" wait
    /// point from the host, then wait until the frame is consumed. Each host
    /// signal stays below the values the pending batches signal (with
    /// `--sync shared` the next batch's "released" is above its "rendered"),
    /// as `vkSignalSemaphore` requires (VUID-VkSemaphoreSignalInfo-value-03259).
    fn stand_in(&mut self) {
        let shared = self.interop.shared.clone();
        // SAFETY: the producer's thread has ended (its stream is drained or failed), and
        // drain_each calls this for each pending frame, oldest first, after the frames before
        // it finished: SharedFrames::stand_in's promises.
        let mut raise = |frame: u64| Ok(unsafe { shared.stand_in(frame) }?);
        if let Err(e) = self.frames.drain_each(&mut Discard, &|| false, &mut raise) {
            log::error!("while standing in for the producer: {e:#}");
        }
        self.frames.forget();
    }
}

impl Drop for Session {
    /// A session dropped without [`Session::end`] (an early return) aborts:
    /// the producer thread and the queue end before the objects they use.
    fn drop(&mut self) {
        if let Some(producer) = self.handle.take() {
            if let Err(e) = self.abort(producer) {
                log::debug!("producer of a dropped session: {e:#}");
            }
            if let Err(e) = self.frames.device().wait_idle() {
                log::error!("{e:#}");
            }
        }
    }
}

/// A consumer whose consumed frames count as on screen (the CPU-present
/// path puts a frame in the window as it is consumed), for the producer's
/// pacing ([`Control::await_turn`]).
struct Showing<'a> {
    consumer: &'a mut dyn Consume,
    control: &'a Control,
}

impl Consume for Showing<'_> {
    fn image_use(&self) -> Use {
        self.consumer.image_use()
    }

    fn takes_buffers(&self) -> bool {
        self.consumer.takes_buffers()
    }

    fn record(
        &mut self,
        cmd: ash::vk::CommandBuffer,
        slot: usize,
        frame: u64,
        source: Source<'_>,
    ) -> Result<()> {
        self.consumer.record(cmd, slot, frame, source)
    }

    fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        self.consumer.completed(slot, frame)?;
        self.control.set_shown(frame + 1);
        Ok(())
    }

    fn standalone(&self) -> bool {
        self.consumer.standalone()
    }
}

/// Joins the producer thread: its result, or an error if it panicked.
fn join(producer: JoinHandle<Result<Report>>) -> Result<Report> {
    producer
        .join()
        .unwrap_or_else(|panic| Err(anyhow!("the producer thread panicked: {}", panic_message(&*panic))))
}

/// Calls `take(f)` for every frame `f` from `from` on, in order, as the
/// producer submits it, until `ended()` (read before the count: a producer
/// that has ended has published all its frames).
fn follow_producer(
    control: &Control,
    from: u64,
    ended: impl Fn() -> bool,
    mut take: impl FnMut(u64) -> Result<()>,
) -> Result<()> {
    let mut f = from;
    loop {
        let ended = ended();
        if f < control.produced() {
            take(f)?;
            f += 1;
        } else if ended {
            return Ok(());
        } else {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// Frames left out of fps and median timings at the start of a run.
pub fn warmup_frames(total: u64) -> u64 {
    (total / 10).min(30)
}
