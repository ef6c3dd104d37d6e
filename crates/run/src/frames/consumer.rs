//! One consumer frame on the Vulkan side, top to bottom:
//!
//! 1. pace: before reusing a command-buffer slot, wait (bounded) until the
//!    frame that last used it is consumed, then hand its results (timestamps,
//!    readback) back to the consumer;
//! 2. record: timestamp; acquire the shared image from
//!    `VK_QUEUE_FAMILY_EXTERNAL` (layout stays `GENERAL`); for the CPU
//!    producer, upload its staging buffer; let the consumer draw or copy;
//!    release the image back to `VK_QUEUE_FAMILY_EXTERNAL`; timestamp;
//! 3. submit: wait on the plan's "rendered" point, signal its "released"
//!    point. The CPU never waits for the producer: the GPU does.
//!
//! The consumer (headless copy or swapchain present) only fills in step 2's
//! middle through [`Consume`]; everything else is shared. The barriers and
//! semaphores come from the core's public API
//! ([`SharedFrames::vulkan_frame`]), as they would in an integrator's engine.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use ash::vk;

use crate::metrics::clock::Anchor;
use vkcuda::interop::{Barrier, SharedFrames, Use, VulkanFrame};
use vkcuda::vk::bounded_wait;
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::{buffer_barrier, copy_layers, image_barrier, record_image_barrier};
use vkcuda::vk::memory::Buffer;
use vkcuda::vk::shared_buffer::SharedBuffer;
use vkcuda::vk::shared_image::SharedImage;
use vkcuda::Layout;

/// What a consumer reads a frame from.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// An image in `GENERAL`: the shared image (array layout), or the frame's
    /// view image that the loop copied a shared buffer into.
    Image(&'a SharedImage),
    /// The shared buffer itself (buffer layout, for a consumer that
    /// [`Consume::takes_buffers`]).
    Buffer(&'a SharedBuffer),
}

/// All the frames of a session, as a consumer that binds them up front (the
/// draw pass) reads them.
#[derive(Clone, Copy)]
pub enum Frames<'a> {
    /// The shared images, or the images the loop copies shared buffers into.
    Images(&'a [SharedImage]),
    /// The shared buffers themselves.
    Buffers(&'a [SharedBuffer]),
}

/// What a consumer does with the ready frame.
pub trait Consume {
    /// The stage and access of the consumer's first (and last) use of the
    /// frame's image or buffer (the acquire barrier's destination).
    fn image_use(&self) -> Use;

    /// Whether [`Consume::record`] reads a shared buffer itself; otherwise the
    /// loop first copies it into the frame's view image (the buffer layout).
    fn takes_buffers(&self) -> bool {
        false
    }

    /// Records the consumer's commands for `frame` into `cmd`, in slot `slot`.
    /// The source is acquired (an image in `GENERAL`) and holds the frame.
    fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, source: Source<'_>) -> Result<()>;

    /// Frame `frame`, recorded in slot `slot`, is consumed: the GPU is done
    /// with everything [`Consume::record`] recorded for it.
    fn completed(&mut self, slot: usize, frame: u64) -> Result<()>;

    /// Whether frames can be consumed with no other synchronization (no
    /// swapchain image to acquire): then a graceful stop lets this consumer
    /// consume, on the GPU, the frames the producer made beyond it; otherwise
    /// [`Discard`] does.
    fn standalone(&self) -> bool {
        false
    }
}

/// A consumer that uses the frame for nothing: it only acquires the image and
/// releases it again. A graceful stop of a presenter hands it the frames the
/// producer made beyond the stop, so they are consumed on the GPU: no host
/// stand-in signals a timeline the producer (CUDA) may signal too, and no host
/// waits on another thread's host signal.
pub struct Discard;

impl Consume for Discard {
    fn image_use(&self) -> Use {
        // Every stage, no access: valid on any queue, and an upload's barrier after it
        // (see `record_upload`) orders against every earlier reader.
        (vk::PipelineStageFlags2::ALL_COMMANDS, vk::AccessFlags2::NONE)
    }

    fn takes_buffers(&self) -> bool {
        true
    }

    fn record(&mut self, _: vk::CommandBuffer, _: usize, _: u64, _: Source<'_>) -> Result<()> {
        Ok(())
    }

    fn completed(&mut self, _: usize, _: u64) -> Result<()> {
        Ok(())
    }

    fn standalone(&self) -> bool {
        true
    }
}

/// Extra semaphores for one submission (the swapchain's binary semaphores).
#[derive(Default)]
pub struct ExtraSync<'a> {
    /// Waited on before the frame's commands.
    pub wait: &'a [vk::SemaphoreSubmitInfo<'a>],
    /// Signalled when the frame's commands finish.
    pub signal: &'a [vk::SemaphoreSubmitInfo<'a>],
}

/// One consumer frame's commands and semaphores, for [`FrameLoop::submit_raw`].
pub struct Submission<'a> {
    /// The frame (its slot is `frame mod slots`).
    pub frame: u64,
    /// The shared image or buffer it consumes.
    pub source: Source<'a>,
    /// Buffer layout, for a consumer that reads images only: the image the
    /// shared buffer is copied into before the consumer's commands.
    pub view: Option<&'a SharedImage>,
    /// The barrier before the consumer's commands (acquire from `EXTERNAL`), if any.
    pub acquire: Option<Barrier>,
    /// The barrier after them (release to `EXTERNAL`), if any.
    pub release: Option<Barrier>,
    /// A host producer's staging buffer to upload into the image or buffer first.
    pub upload: Option<&'a Buffer>,
    /// Waited on before the frame's commands.
    pub wait: &'a [vk::SemaphoreSubmitInfo<'a>],
    /// Signalled when they finish.
    pub signal: &'a [vk::SemaphoreSubmitInfo<'a>],
    /// The semaphore value that marks the frame consumed, named in errors.
    pub marks: Mark,
}

/// A semaphore's value, by the semaphore's name: what a frame's end
/// signals, for errors that name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// The semaphore's name.
    pub semaphore: &'static str,
    /// The value.
    pub value: u64,
}

impl Mark {
    /// No semaphore (a slot not used yet).
    pub const NONE: Mark = Mark { semaphore: "", value: 0 };
}

/// A submitted frame not yet retired, and the slot it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    /// The frame (first: frames sort oldest first).
    frame: u64,
    /// Its slot.
    slot: usize,
}

/// A consumed frame's Vulkan GPU time (between its two timestamps).
#[derive(Clone, Copy, Debug)]
pub struct Completed {
    /// The frame.
    pub frame: u64,
    /// GPU time of the frame's commands.
    pub gpu_time: Duration,
    /// When its commands finished, on the host's clock ([`crate::metrics::clock::now_ns`]),
    /// if the device can calibrate its timestamps.
    pub end_ns: Option<u64>,
    /// When the consumer was done with it ([`Consume::completed`] had
    /// returned: the CPU-present path had put it in the window).
    pub consumed_at: std::time::Instant,
}

struct Slot {
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    /// Signalled with the slot's submission, at the same moment as its "released" value.
    fence: vk::Fence,
    frame: Option<u64>,
    /// The semaphore value the frame's end signals, for errors.
    marks: Mark,
}

/// The consumer's frame loop: command-buffer slots, timestamp queries, and
/// the submission protocol.
///
/// Ownership and ordering: only the consumer thread submits to the queue.
/// Frame `g` is submitted after frame `g - 1`; a slot is reused only once its
/// fence (signalled with the frame's "released" value) is seen. Its `Drop`
/// waits (bounded) until the queue is idle before it destroys the command
/// buffers, and leaks them if a batch never finishes.
pub struct FrameLoop {
    device: Arc<Device>,
    slots: Vec<Slot>,
    queries: vk::QueryPool,
    /// CPU producer only: one staging buffer per shared image, uploaded before use.
    staging: Option<Arc<Vec<Buffer>>>,
    /// Buffer layout: one image per shared buffer, for consumers that read images.
    views: Option<Arc<Vec<SharedImage>>>,
    /// The timestamp clock on the host's axis, when the device can calibrate.
    anchor: Option<Anchor>,
    /// Test only: fail while recording this frame, once.
    pub fail_recording_at: Option<u64>,
    /// Test only: report the device lost while recording this frame, once.
    pub lose_device_at: Option<u64>,
}

impl FrameLoop {
    /// `frames_in_flight` slots; `staging` when the CPU producer fills
    /// staging buffers; `views` with the buffer layout.
    pub fn new(
        device: Arc<Device>,
        frames_in_flight: usize,
        staging: Option<Arc<Vec<Buffer>>>,
        views: Option<Arc<Vec<SharedImage>>>,
    ) -> Result<Self> {
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(2 * frames_in_flight as u32);
        // SAFETY: valid create info; destroyed in Drop.
        let queries = unsafe { device.raw().create_query_pool(&info, None) }.context("vkCreateQueryPool")?;
        let anchor = device.calibrated_timestamps().map(|at| Anchor {
            gpu_ticks: at.device_ticks,
            host_ns: at.host_ns,
            ns_per_tick: f64::from(device.info().timestamp_period),
        });
        let mut this = Self {
            device,
            slots: Vec::new(),
            queries,
            staging,
            views,
            anchor,
            fail_recording_at: None,
            lose_device_at: None,
        };
        for _ in 0..frames_in_flight {
            let pool_info = vk::CommandPoolCreateInfo::default()
                .queue_family_index(this.device.queue_family())
                .flags(vk::CommandPoolCreateFlags::TRANSIENT);
            // SAFETY: valid create info; destroyed in Drop.
            let pool = unsafe { this.device.raw().create_command_pool(&pool_info, None) }?;
            let alloc = vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(1);
            // SAFETY: `pool` is live; freed with it.
            let cmd = unsafe { this.device.raw().allocate_command_buffers(&alloc) };
            // Pushed before `?`, so Drop destroys the pool on failure too.
            this.slots.push(Slot {
                pool,
                cmd: vk::CommandBuffer::null(),
                fence: vk::Fence::null(),
                frame: None,
                marks: Mark::NONE,
            });
            let cmd = cmd.context("vkAllocateCommandBuffers")?[0];
            // SAFETY: default create info; destroyed in Drop.
            let fence = unsafe { this.device.raw().create_fence(&vk::FenceCreateInfo::default(), None) };
            if let Some(s) = this.slots.last_mut() {
                s.cmd = cmd;
                s.fence = fence.context("vkCreateFence")?;
            }
        }
        Ok(this)
    }

    /// Records and submits consumer frame `g` as the frame plan says.
    pub fn submit(
        &mut self,
        g: u64,
        shared: &SharedFrames,
        consumer: &mut dyn Consume,
        extra: ExtraSync<'_>,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Completed>> {
        let buffers = shared.desc().layout == Layout::Buffer;
        // A buffer a consumer cannot read is copied into its view image first.
        let through_view = buffers && !consumer.takes_buffers();
        let usage = match through_view {
            true => COPY_READ,
            false => consumer.image_use(),
        };
        // A host producer's frame is uploaded first: the acquire is for the upload.
        let first = if self.staging.is_some() { UPLOAD } else { usage };
        let frame: VulkanFrame = shared.vulkan_frame(g, self.device.queue_family(), first, usage);
        let (staging, views) = (self.staging.clone(), self.views.clone());
        let waits: Vec<_> = frame.wait.into_iter().chain(extra.wait.iter().copied()).collect();
        let signals: Vec<_> = std::iter::once(frame.signal).chain(extra.signal.iter().copied()).collect();
        let point = shared.plan().consumed(g);
        let submission = Submission {
            frame: g,
            source: match buffers {
                true => Source::Buffer(&shared.buffers()[frame.index]),
                false => Source::Image(&shared.images()[frame.index]),
            },
            view: views.as_ref().filter(|_| through_view).map(|v| &v[frame.index]),
            acquire: Some(frame.acquire),
            release: Some(frame.release),
            upload: staging.as_ref().map(|s| &s[frame.index]),
            wait: &waits,
            signal: &signals,
            marks: Mark { semaphore: shared.timelines()[point.timeline].name, value: point.value },
        };
        self.submit_raw(submission, consumer, cancelled)
    }

    /// Records and submits one consumer frame with the barriers and
    /// semaphores the caller chose: the frame plan's ([`FrameLoop::submit`]),
    /// or another hand-over's (the patterns `vkcuda bench` compares with).
    pub fn submit_raw(
        &mut self,
        s: Submission<'_>,
        consumer: &mut dyn Consume,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Completed>> {
        let g = s.frame;
        let slot_index = (g % self.slots.len() as u64) as usize;
        // 1. Pace: the slot's last frame must be consumed before we reuse its buffers.
        let done = self.retire(slot_index, consumer, cancelled)?;
        let usage = consumer.image_use();
        let slot = &mut self.slots[slot_index];
        let dev = &self.device.raw();
        let cmd = slot.cmd;

        // 2. Record.
        // SAFETY: the slot's previous submission is complete (retire), so its pool may be reset.
        unsafe { dev.reset_command_pool(slot.pool, vk::CommandPoolResetFlags::empty()) }?;
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: `cmd` was reset with its pool.
        unsafe { dev.begin_command_buffer(cmd, &begin) }?;
        let q = 2 * slot_index as u32;
        // Reset from the host (a transfer-only queue cannot reset queries).
        // SAFETY: the slot's queries were read back by retire; no pending command uses them.
        unsafe { dev.reset_query_pool(self.queries, q, 2) };
        if let Some(acquire) = s.acquire {
            acquire.record(dev, cmd);
        }
        if let Some(staging) = s.upload {
            // Host producer: upload, then make it visible to the next reader.
            let next = if s.view.is_some() { COPY_READ } else { usage };
            record_upload(dev, cmd, staging, s.source, next);
        }
        // Measure from here: the frame is acquired, so the wait for "rendered" is over.
        // SAFETY: recording.
        unsafe { dev.cmd_write_timestamp2(cmd, vk::PipelineStageFlags2::ALL_COMMANDS, self.queries, q) };
        if self.fail_recording_at.take_if(|f| *f == g).is_some() {
            bail!("injected consumer failure while recording frame {g}");
        }
        if self.lose_device_at.take_if(|f| *f == g).is_some() {
            let context = format!("recording frame {g} (injected)");
            return Err(vkcuda::Error::DeviceLost { context }.into());
        }
        match (s.view, s.source) {
            (Some(view), Source::Buffer(buffer)) => {
                record_buffer_to_view(dev, cmd, buffer, view, usage);
                consumer.record(cmd, slot_index, g, Source::Image(view))?;
            }
            _ => consumer.record(cmd, slot_index, g, s.source)?,
        }
        if let Some(release) = s.release {
            release.record(dev, cmd);
        }
        // SAFETY: recording.
        unsafe {
            dev.cmd_write_timestamp2(cmd, vk::PipelineStageFlags2::BOTTOM_OF_PIPE, self.queries, q + 1)
        };
        // SAFETY: recording was begun above.
        unsafe { dev.end_command_buffer(cmd) }?;

        // 3. Submit: the GPU waits for "rendered"; "released" is signalled when all commands finish.
        let cmds = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd)];
        let submit = [vk::SubmitInfo2::default()
            .wait_semaphore_infos(s.wait)
            .command_buffer_infos(&cmds)
            .signal_semaphore_infos(s.signal)];
        let fence = self.slots[slot_index].fence;
        let submitted = self.device.queue_op(|| {
            // SAFETY: only this thread submits to the queue; everything referenced is live.
            unsafe { dev.queue_submit2(self.device.queue(), &submit, fence) }
        });
        submitted.with_context(|| format!("vkQueueSubmit2 (frame {g})"))?;
        self.slots[slot_index].frame = Some(g);
        self.slots[slot_index].marks = s.marks;
        Ok(done)
    }

    /// Waits until the slot that frame `g` will use is free (its last frame
    /// consumed) and retires that frame. [`FrameLoop::submit`] does this
    /// itself; a presenter calls it first, because the slot's acquire
    /// semaphore is free only then.
    pub fn pace(
        &mut self,
        g: u64,
        consumer: &mut dyn Consume,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Completed>> {
        self.retire((g % self.slots.len() as u64) as usize, consumer, cancelled)
    }

    /// The oldest submitted frame that has not finished on the GPU, among the
    /// one in the slot frame `g` will use (or, with `g` `None`, among all of
    /// them), waiting at most `within` for it to finish. Never blocks longer:
    /// for callers that must stay responsive while the GPU is slow.
    pub fn unfinished(&self, g: Option<u64>, within: Duration) -> Result<Option<u64>> {
        let slots: Vec<&Slot> = match g {
            Some(g) => vec![&self.slots[(g % self.slots.len() as u64) as usize]],
            None => self.slots.iter().collect(),
        };
        let busy: Vec<&Slot> = slots.into_iter().filter(|s| s.frame.is_some()).collect();
        if busy.is_empty() {
            return Ok(None);
        }
        let fences: Vec<vk::Fence> = busy.iter().map(|s| s.fence).collect();
        let dev = &self.device.raw();
        // SAFETY: each fence was submitted with its slot's frame.
        match unsafe { dev.wait_for_fences(&fences, true, within.as_nanos() as u64) } {
            Ok(()) => return Ok(None),
            Err(vk::Result::TIMEOUT) => {}
            Err(e) => return Err(e).context("waiting for the consumer's frames"),
        }
        let mut oldest: Option<u64> = None;
        for s in busy {
            // SAFETY: the fence is live.
            let done = unsafe { dev.get_fence_status(s.fence) }.context("vkGetFenceStatus")?;
            if let (false, Some(f)) = (done, s.frame) {
                oldest = Some(oldest.map_or(f, |o| o.min(f)));
            }
        }
        Ok(oldest)
    }

    /// The device the loop submits to.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The number of frame slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Waits for every submitted frame, oldest first, and retires it.
    pub fn drain(
        &mut self,
        consumer: &mut dyn Consume,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Completed>> {
        self.drain_each(consumer, cancelled, &mut |_| Ok(()))
    }

    /// [`FrameLoop::drain`], calling `before(frame)` before waiting for each frame.
    pub fn drain_each(
        &mut self,
        consumer: &mut dyn Consume,
        cancelled: &dyn Fn() -> bool,
        before: &mut dyn FnMut(u64) -> Result<()>,
    ) -> Result<Vec<Completed>> {
        let mut out = Vec::new();
        for InFlight { frame, slot } in self.submitted() {
            before(frame)?;
            out.extend(self.retire(slot, consumer, cancelled)?);
        }
        Ok(out)
    }

    /// Retires, oldest first, the submitted frames that have finished, and
    /// stops at the first that has not: never waits. (A slot is otherwise
    /// retired when its next frame needs it, `slots` frames later; the
    /// CPU-present path shows a frame as it is retired.)
    pub fn retire_finished(&mut self, consumer: &mut dyn Consume) -> Result<Vec<Completed>> {
        let mut out = Vec::new();
        for InFlight { slot: i, .. } in self.submitted() {
            // SAFETY: the fence is live and was submitted with the slot's frame.
            if !unsafe { self.device.raw().get_fence_status(self.slots[i].fence) }
                .context("vkGetFenceStatus")?
            {
                break;
            }
            out.extend(self.retire(i, consumer, &|| false)?);
        }
        Ok(out)
    }

    /// Whether a submitted frame is not yet retired.
    pub fn unretired(&self) -> bool {
        self.slots.iter().any(|s| s.frame.is_some())
    }

    /// The submitted frames not yet retired, oldest first, with their slots.
    fn submitted(&self) -> Vec<InFlight> {
        let mut order: Vec<InFlight> = (self.slots.iter().enumerate())
            .filter_map(|(slot, s)| s.frame.map(|frame| InFlight { frame, slot }))
            .collect();
        order.sort_unstable();
        order
    }

    /// Forgets submitted frames without waiting (after an abort, once the queue is idle).
    pub fn forget(&mut self) {
        self.slots.iter_mut().for_each(|s| s.frame = None);
    }

    fn retire(
        &mut self,
        slot: usize,
        consumer: &mut dyn Consume,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Completed>> {
        // The slot stays marked busy until its fence is seen signalled: a wait that gives up
        // must leave the frame for a later drain (an abort stands in for its producer).
        let Some(frame) = self.slots[slot].frame else { return Ok(None) };
        // The slot's fence and its "released" value are signalled together. We wait on the
        // fence: the validation layer cannot see CUDA's signals, so it never retires a
        // submission whose "rendered" wait CUDA satisfied, but it always trusts a fence.
        let fence = [self.slots[slot].fence];
        let Mark { semaphore: name, value } = self.slots[slot].marks;
        let what = || format!("consumer frame {frame} (semaphore '{name}' value {value})");
        let dev = &self.device.raw();
        bounded_wait(&what, cancelled, |slice| {
            // SAFETY: the fence was submitted with this slot's last frame.
            match unsafe { dev.wait_for_fences(&fence, true, slice.as_nanos() as u64) } {
                Ok(()) => Ok(true),
                Err(vk::Result::TIMEOUT) => Ok(false),
                Err(e) => Err(e).with_context(what),
            }
        })?;
        self.slots[slot].frame = None;
        // SAFETY: the fence is signalled and no longer in use.
        unsafe { dev.reset_fences(&fence) }?;
        let mut stamps = [0u64; 2];
        // SAFETY: both queries of this slot were written by a submission that has completed.
        unsafe {
            self.device.raw().get_query_pool_results(
                self.queries,
                2 * slot as u32,
                &mut stamps,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .context("reading timestamps")?;
        consumer.completed(slot, frame)?;
        let consumed_at = std::time::Instant::now();
        let ticks = stamps[1].saturating_sub(stamps[0]);
        Ok(Some(Completed {
            frame,
            gpu_time: self.device.timestamp_period().mul_f64(ticks as f64),
            end_ns: self.anchor.map(|a| a.host_ns(stamps[1])),
            consumed_at,
        }))
    }
}

impl Drop for FrameLoop {
    fn drop(&mut self) {
        // A pending batch still uses its command buffer, fence and queries: wait first (bounded).
        if let Err(e) = self.device.wait_idle() {
            log::error!("{e:#}: leaking the consumer's command buffers rather than destroying them in use");
            return;
        }
        // The queue is idle; the pools, fences and queries are ours, each destroyed once.
        for s in &self.slots {
            // SAFETY: as above.
            unsafe { self.device.raw().destroy_command_pool(s.pool, None) };
            // SAFETY: as above.
            unsafe { self.device.raw().destroy_fence(s.fence, None) };
        }
        // SAFETY: as above.
        unsafe { self.device.raw().destroy_query_pool(self.queries, None) };
    }
}

/// A copy's read, and its write.
const COPY_READ: Use = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);
const UPLOAD: Use = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE);

/// Records the upload of a host producer's frame from `staging` into the
/// shared image or buffer, and a barrier that makes it visible to `next`
/// (the stage and access that read it after).
fn record_upload(dev: &ash::Device, cmd: vk::CommandBuffer, staging: &Buffer, target: Source<'_>, next: Use) {
    // The host wrote the staging buffer before it signalled "rendered": make those writes visible.
    let b = [buffer_barrier(
        staging.raw(),
        (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_WRITE),
        (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ),
    )];
    // The upload overwrites an image that an earlier frame on this queue read (its copy or
    // draw). By the spec that read is already ordered before us through the host: its
    // "released" signal → the producer's host wait → the producer's host signal of
    // "rendered" → this submission's wait. But that chain crosses two threads, and the
    // validation layer records a submission's signals only after the driver has run it, so
    // a host wait that lands in between is lost to it and it reports the upload as a
    // WRITE_AFTER_READ (docs/sync.md, "Host waits and host signals"; reproduced by
    // examples/host_wait_race.rs). This execution dependency states the order on the
    // queue itself, in submission order; the wait for "rendered" already implies it, so it
    // costs the GPU nothing. (A second GPU wait on the producer's wait point would say the
    // same, but with `--sync shared` that is a second wait on the one timeline, which the
    // layer resolves to the host signal.)
    let earlier_reads =
        [vk::MemoryBarrier2::default().src_stage_mask(next.0).dst_stage_mask(vk::PipelineStageFlags2::COPY)];
    let dependency = vk::DependencyInfo::default().memory_barriers(&earlier_reads).buffer_memory_barriers(&b);
    // SAFETY: recording; the buffers and image are live.
    unsafe { dev.cmd_pipeline_barrier2(cmd, &dependency) };
    // The staging buffer holds one frame of the target's format and size.
    match target {
        Source::Image(image) => {
            let region = [vk::BufferImageCopy::default()
                .image_subresource(copy_layers())
                .image_extent(extent3d(image.extent()))];
            let layout = vk::ImageLayout::GENERAL;
            // SAFETY: recording; as above.
            unsafe { dev.cmd_copy_buffer_to_image(cmd, staging.raw(), image.image(), layout, &region) };
            record_image_barrier(dev, cmd, image_barrier(image.image(), UPLOAD, next));
        }
        Source::Buffer(buffer) => {
            let region = [vk::BufferCopy::default().size(buffer.size())];
            // SAFETY: recording; as above.
            unsafe { dev.cmd_copy_buffer(cmd, staging.raw(), buffer.buffer(), &region) };
            let after = [buffer_barrier(buffer.buffer(), UPLOAD, next)];
            let after = vk::DependencyInfo::default().buffer_memory_barriers(&after);
            // SAFETY: recording; the buffer is live.
            unsafe { dev.cmd_pipeline_barrier2(cmd, &after) };
        }
    }
}

/// Records the copy of a shared buffer into its view image, for a consumer
/// that reads it as `reads`: after the view's previous reads (an earlier
/// frame's, on this queue), and visible to the consumer's.
fn record_buffer_to_view(
    dev: &ash::Device,
    cmd: vk::CommandBuffer,
    buffer: &SharedBuffer,
    view: &SharedImage,
    reads: Use,
) {
    let region = [vk::BufferImageCopy::default()
        .image_subresource(copy_layers())
        .image_extent(extent3d(view.extent()))];
    record_image_barrier(dev, cmd, image_barrier(view.image(), reads, UPLOAD));
    // SAFETY: recording; the buffer holds one packed frame of the view's format and size.
    unsafe {
        dev.cmd_copy_buffer_to_image(cmd, buffer.buffer(), view.image(), vk::ImageLayout::GENERAL, &region)
    };
    record_image_barrier(dev, cmd, image_barrier(view.image(), UPLOAD, reads));
}

/// A 2D extent as a copy's 3D one.
fn extent3d(e: vk::Extent2D) -> vk::Extent3D {
    vk::Extent3D { width: e.width, height: e.height, depth: 1 }
}
