//! A viewer's state: its device, the run in progress, the CUDA side for GPU
//! tensors, and what it has done. No Python here but the GIL token the waits
//! give up while they wait.

use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context as _, Result};
use cudarc::driver::{result, sys};

use crate::array::Layout;
use crate::cuda_side::CudaSide;
use crate::export::{FrameSlot, Target};
use crate::run::{Output, Run};
use crate::spec::Ended;
use crate::tensor::DeviceArray;
use crate::window::Opened;
use vkcuda::vk::instance::ValidationCounts;
use vkcuda::FrameDesc;
use vkcuda_run::frames::gpu::Gpu;
use vkcuda_run::running::feed::device::{DeviceStaging, Packing};
use vkcuda_run::running::feed::line::{Line, Made, Wait};
use vkcuda_run::running::feed::{Counts, Feed, Mailbox};

/// What a viewer has done, over all its finished runs.
#[derive(Default)]
pub struct Totals {
    pub put: u64,
    pub replaced: u64,
    pub consumed: u64,
    pub written: u64,
}

/// A viewer's state; see the module docs.
pub struct State {
    pub gpu: Option<Arc<Gpu>>,
    pub output: Output,
    pub every: bool,
    pub run: Option<Run>,
    pub cuda: Option<CudaSide>,
    pub next_base: u64,
    pub totals: Totals,
    /// The validation messages counted before this viewer (the instance is the process's).
    pub validation_before: ValidationCounts,
    /// The instance's count when the viewer closed.
    pub validation_at_close: Option<ValidationCounts>,
    /// The window frames are shown in; `None`: headless.
    pub window: Option<Opened>,
}

impl State {
    /// A viewer on `gpu`, writing to `output`.
    pub fn new(gpu: Arc<Gpu>, output: Output, every: bool) -> Self {
        let validation_before = gpu.device.validation();
        let totals = Totals::default();
        let validation_at_close = None;
        Self {
            gpu: Some(gpu),
            output,
            every,
            run: None,
            cuda: None,
            next_base: 0,
            totals,
            validation_before,
            validation_at_close,
            window: None,
        }
    }

    /// A viewer showing frames in the window `opened`.
    pub fn in_window(opened: Opened, output: Output, every: bool) -> Self {
        let mut state = Self::new(opened.gpu.clone(), output, every);
        state.window = Some(opened);
        state
    }

    /// Tells the window thread a frame was put (nothing to do headless).
    pub fn wake(&self) {
        if self.window.is_some() {
            let _ = crate::window::send(crate::window::Command::Wake);
        }
    }

    /// "open" or "closed" for a window; `None` headless.
    pub fn window_state(&self) -> Option<&'static str> {
        let w = self.window.as_ref()?;
        let closed = w.closed.load(std::sync::atomic::Ordering::Acquire) || self.gpu.is_none();
        Some(if closed { "closed" } else { "open" })
    }

    /// Lets the device go (after the last run): the viewer is closed.
    pub fn close(&mut self) {
        if let Some(gpu) = self.gpu.take() {
            self.validation_at_close = Some(gpu.device.validation());
        }
        self.cuda = None;
        if let Some(w) = &self.window {
            let id = w.id;
            if let Err(e) = crate::window::ask(|reply| crate::window::Command::Close { id, reply }) {
                log::error!("closing the window: {e:#}");
            }
        }
    }

    /// The validation messages since this viewer was made (all of them on the instance
    /// it shares with other viewers: any message while it lives counts).
    pub fn validation(&self) -> ValidationCounts {
        let now = match &self.gpu {
            Some(g) => g.device.validation(),
            None => self.validation_at_close.unwrap_or(self.validation_before),
        };
        ValidationCounts {
            errors: now.errors.saturating_sub(self.validation_before.errors),
            warnings: now.warnings.saturating_sub(self.validation_before.warnings),
        }
    }

    /// The device, or the error of a closed viewer (or window).
    pub fn gpu(&self) -> Result<&Arc<Gpu>> {
        if let Some(w) = self.window.as_ref().filter(|w| w.closed.load(std::sync::atomic::Ordering::Acquire))
        {
            return match w.error.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                Some(e) => Err(anyhow!("the window closed after an error: {e}")),
                None => Err(anyhow!("the window was closed")),
            };
        }
        self.gpu.as_ref().ok_or_else(|| anyhow!("this viewer is closed"))
    }

    /// Frames put, replaced, consumed and written so far (the run in progress: its mailbox's counts).
    pub fn counts(&self) -> (Counts, &Totals) {
        (self.run.as_ref().map(|r| r.feed.counts()).unwrap_or_default(), &self.totals)
    }

    /// Ends the current run once all it was given is consumed (and written).
    pub fn finish_run(&mut self) -> Result<()> {
        let Some(run) = self.run.take() else { return Ok(()) };
        let counts = run.feed.counts();
        self.totals.put += counts.put;
        self.totals.replaced += counts.replaced;
        let ended: Ended = run.finish()?;
        self.next_base = ended.next_base;
        self.totals.consumed += ended.consumed;
        self.totals.written += ended.written;
        Ok(())
    }

    /// The run for frames `desc` from the host or (`device`) GPU memory: the
    /// current one, or a new one after it.
    fn run_for(&mut self, desc: FrameDesc, device: bool) -> Result<&Run> {
        let gpu = self.gpu()?.clone();
        if self.run.as_ref().is_some_and(|r| !r.serves(desc, device)) {
            self.finish_run()?;
        }
        if self.run.is_none() {
            let feed = match device {
                false => Feed::Host(Mailbox::new()),
                true => {
                    let ctx = self.cuda.as_ref().ok_or_else(|| anyhow!("no CUDA side"))?.ctx.clone();
                    Feed::Device {
                        mailbox: Mailbox::new(),
                        staging: DeviceStaging::new(ctx, desc.bytes() as usize)?,
                        line: Line::new(),
                    }
                }
            };
            let at = (self.totals.consumed, self.next_base);
            self.run = Some(match &self.window {
                Some(w) => Run::start_in((w.id, w.closed.clone()), desc, feed, at)?,
                None => Run::start(gpu, desc, feed, self.output.clone(), at)?,
            });
        }
        self.run.as_ref().ok_or_else(|| anyhow!("no run"))
    }

    /// The feed host pixels of `layout` go to.
    pub fn host_feed(&mut self, layout: &Layout) -> Result<Arc<Mailbox>> {
        match &self.run_for(frame_desc(layout), false)?.feed {
            Feed::Host(m) => Ok(m.clone()),
            Feed::Device { .. } => Err(anyhow!("a host run without a host feed")),
        }
    }

    /// Makes the CUDA side if there is none, checking that a tensor on CUDA
    /// device `device` lives on the viewer's GPU.
    pub fn cuda_for(&mut self, device: usize) -> Result<&CudaSide> {
        let gpu = self.gpu()?.clone();
        match &gpu.cuda {
            Some(c) if c.ordinal == device => {}
            Some(c) => bail!(
                "the tensor is on CUDA device {device}, this viewer on {} ({c}): make the viewer with the \
                 tensor's GPU (gpu=...) or move the tensor",
                gpu.device.info()
            ),
            None => bail!(
                "the tensor is on CUDA device {device}, and no CUDA device matches this viewer's {}",
                gpu.device.info()
            ),
        }
        if self.cuda.is_none() {
            self.cuda = Some(CudaSide::new(&gpu)?);
        }
        self.cuda.as_ref().ok_or_else(|| anyhow!("no CUDA side"))
    }

    /// A frame of the device run for frames of `layout` to write in place on
    /// `stream`: the shared buffer itself once Vulkan has released it (every
    /// frame waits for that until `give_up()`: `None` then), else a slot,
    /// after the slot's last use.
    pub fn begin_frame(
        &mut self,
        layout: &Layout,
        stream: u64,
        every: bool,
        give_up: &dyn Fn() -> bool,
    ) -> Result<Option<FrameSlot>> {
        let gpu = self.gpu()?.clone();
        let device = gpu.cuda.as_ref().map(|c| c.ordinal).ok_or_else(|| {
            anyhow!("frame() writes in GPU memory, and no CUDA device matches {}", gpu.device.info())
        })?;
        self.cuda_for(device)?;
        let (mailbox, staging, line) = self.device_feed(layout)?;
        let ctx = self.cuda.as_ref().ok_or_else(|| anyhow!("no CUDA side"))?.ctx.clone();
        ctx.bind_to_thread()?;
        let now = || true;
        let wait = match every {
            true => Wait::Every { give_up },
            false => Wait::Newest { fallback: &now, wakes: None },
        };
        // SAFETY: the caller's stream (or the legacy default) is a live stream of this context.
        let target = match unsafe { line.reserve(stream as sys::CUstream, &mailbox, wait) }? {
            Ok(reserved) => Target::Buffer { line, reserved },
            Err(Made::GaveUp) => return Ok(None),
            Err(_) => Target::Slot(self.slot_for_frame(layout, stream)?),
        };
        Ok(Some(FrameSlot {
            ctx,
            staging,
            mailbox,
            target,
            device: device as i32,
            size: (layout.height, layout.width),
            dtype: layout.dtype,
            stream,
            writers: Mutex::new(Vec::new()),
            done: Mutex::new(false),
        }))
    }

    /// A free slot of the device run for frames of `layout`, to write on
    /// `stream` after the slot's last use.
    fn slot_for_frame(&mut self, layout: &Layout, stream: u64) -> Result<usize> {
        let Held { staging, slot, .. } = self.free_slot(layout)?;
        let waited = after_last_use(stream, &staging, slot);
        if waited.is_err() {
            staging.release(slot);
        }
        waited.map(|()| slot)
    }

    /// Makes the next frame of the device run for `array` straight from it:
    /// packed on `stream` into the shared buffer once Vulkan has released it
    /// ([`Line::make`]). Every frame waits for that until `give_up()`; newest
    /// wins waits until then or until a slot could take the frame at once
    /// ([`State::pack_if_ready`]: [`Made::NotNow`]), so a caller whose own
    /// packs are behind still makes the next frame the moment its buffer is
    /// free. A newest-wins frame made is counted as a pack the next slot
    /// pack waits for ([`CudaSide::count_frame`]).
    pub fn make(
        &mut self,
        array: &DeviceArray,
        stream: u64,
        every: bool,
        give_up: &dyn Fn() -> bool,
    ) -> Result<Made> {
        let (mailbox, staging, line) = self.device_feed(&array.layout)?;
        let cuda = self.cuda.as_ref().ok_or_else(|| anyhow!("no CUDA side"))?;
        cuda.ctx.bind_to_thread()?;
        let packing = packing(&array.layout);
        let stream = stream as sys::CUstream;
        let mut pack = |dst| {
            // SAFETY: the caller's stream is of this context and current here; the tensor stays
            // allocated until the pack runs (the caller holds it, and frees memory
            // stream-ordered); `dst` is the frame's shared buffer, of this layout.
            unsafe { cuda.packer.pack(stream, array.pointer, &packing, dst, None) }
        };
        let fallback = || give_up() || slot_ready(&staging, cuda);
        let wait = match every {
            true => Wait::Every { give_up },
            // No free slot: only a release can help, and slots are freed at releases.
            false => {
                Wait::Newest { fallback: &fallback, wakes: staging.has_free().then(|| cuda.ahead_point()) }
            }
        };
        // SAFETY: the caller's stream (or the viewer's own) is a live stream of this context.
        let made = unsafe { line.make(stream, &mailbox, wait, &mut pack, &|slot| staging.drop_frame(slot)) }?;
        if made == Made::Made && !every {
            self.cuda.as_mut().ok_or_else(|| anyhow!("no CUDA side"))?.count_frame(stream)?;
        }
        Ok(made)
    }

    /// [`State::pack`] when it would not wait (the run goes on with these
    /// frames, and [`slot_ready`]), so the caller need not give up the GIL;
    /// `None` otherwise.
    pub fn pack_if_ready(&mut self, array: &DeviceArray, stream: u64) -> Option<Result<Held>> {
        let desc = frame_desc(&array.layout);
        let run = self.run.as_ref().filter(|r| r.serves(desc, true))?;
        let Feed::Device { staging, .. } = &run.feed else { return None };
        let ready = self.cuda.as_ref().is_some_and(|cuda| slot_ready(staging, cuda));
        ready.then(|| self.pack(array, stream))
    }

    /// Packs `array` on `stream` into a free slot of the device run for it and
    /// returns the run's mailbox and the slot, for putting; waits for a free
    /// slot and for the caller's earlier pack ([`CudaSide::count_slot_pack`]).
    pub fn pack(&mut self, array: &DeviceArray, stream: u64) -> Result<Held> {
        let held = self.free_slot(&array.layout)?;
        let cuda = self.cuda.as_mut().ok_or_else(|| anyhow!("no CUDA side"))?;
        let packed = cuda.ctx.bind_to_thread().map_err(anyhow::Error::from).and_then(|()| {
            pack_into(cuda, array, stream, &held.staging, held.slot)?;
            cuda.count_slot_pack(stream as sys::CUstream)
        });
        if packed.is_err() {
            held.staging.release(held.slot);
        }
        packed.map(|()| held)
    }

    /// The feed of the device run for frames of `layout` (the current run,
    /// or a new one after it): its mailbox, slots and line.
    fn device_feed(&mut self, layout: &Layout) -> Result<DeviceFeed> {
        match &self.run_for(frame_desc(layout), true)?.feed {
            Feed::Device { mailbox, staging, line } => Ok((mailbox.clone(), staging.clone(), line.clone())),
            Feed::Host(_) => bail!("a device run without a device feed"),
        }
    }

    /// A free slot of the device run for frames of `layout` (waiting for one
    /// while the run goes on), with the run's mailbox it is put in.
    fn free_slot(&mut self, layout: &Layout) -> Result<Held> {
        let (mailbox, staging, _) = self.device_feed(layout)?;
        let run_stopped = || self.run.as_ref().is_none_or(Run::ending);
        let slot = staging.acquire(&run_stopped).ok_or_else(|| anyhow!("the viewer's run stopped"))?;
        Ok(Held { mailbox, staging, slot })
    }
}

/// Whether a pack into a slot would not wait: a slot is free, and the
/// caller's earlier pack has run ([`CudaSide::ahead_done`]).
fn slot_ready(staging: &DeviceStaging, cuda: &CudaSide) -> bool {
    staging.has_free() && cuda.ahead_done()
}

/// A device run's feed: its mailbox, slots and line.
type DeviceFeed = (Arc<Mailbox<usize>>, Arc<DeviceStaging>, Arc<Line>);

/// A device slot taken from its run's free list, to put in `mailbox` (or give back).
pub struct Held {
    pub mailbox: Arc<Mailbox<usize>>,
    pub staging: Arc<DeviceStaging>,
    pub slot: usize,
}

/// Enqueues on `stream`: the waits for the slot's last use
/// ([`after_last_use`]), the pack, its "ready" event.
fn pack_into(
    cuda: &CudaSide,
    array: &DeviceArray,
    stream: u64,
    staging: &DeviceStaging,
    slot: usize,
) -> Result<()> {
    after_last_use(stream, staging, slot)?;
    let stream = stream as sys::CUstream;
    let ready = staging.ready(slot);
    let packing = packing(&array.layout);
    // SAFETY: the caller's stream is of this context and current here; the tensor stays
    // allocated until the pack runs (the caller holds it, and frees memory stream-ordered);
    // the slot holds one packed frame of this layout.
    unsafe {
        cuda.packer.pack(
            stream,
            array.pointer,
            &packing,
            staging.pointer(slot),
            Some(staging.droppable(slot)),
        )
    }?;
    // SAFETY: as above.
    unsafe { result::event::record(ready, stream) }.context("cuEventRecord (the slot's pack)")
}

impl Drop for State {
    /// A viewer garbage-collected without `close()`: its window closes too
    /// (the run, dropped after, ends its frames first where it is headless).
    fn drop(&mut self) {
        // Dropped where Python collects it: the run's and CUDA side's teardown binds the
        // viewer's context, so both go here, inside the guard, not after it as fields.
        let _context = crate::context::CallersContext::note();
        if self.window.is_some() {
            let _ = self.finish_run();
            self.close();
        }
        drop(self.run.take());
        drop(self.cuda.take());
    }
}

/// Enqueues on `stream` the waits for the slot's last pack (or writes) and
/// last copy out: a pack into the slot on another stream, or the producer's
/// copy out of it, may still run. The copy was enqueued once Vulkan had
/// released its buffer, so this never waits for Vulkan.
fn after_last_use(stream: u64, staging: &DeviceStaging, slot: usize) -> Result<()> {
    let stream = stream as sys::CUstream;
    for (event, what) in
        [(staging.ready(slot), "the slot's last pack"), (staging.copied(slot), "the copy out of the slot")]
    {
        // Done already: nothing to order (a query costs less than a wait). Only this thread
        // records the pack's event, and the copy's only after the slot is put: neither can be
        // recorded again between the query and the pack.
        // SAFETY: the event is the slot's, of this context.
        if unsafe { result::event::query(event) }.is_ok() {
            continue;
        }
        // SAFETY: the event is the slot's, of this context; the stream is the caller's, of this context.
        unsafe { result::stream::wait_event(stream, event, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
            .with_context(|| format!("cuStreamWaitEvent ({what})"))?;
    }
    Ok(())
}

/// Where `l`'s elements are, for the packing kernel.
fn packing(l: &Layout) -> Packing {
    Packing {
        strides: l.strides.map(|s| s as i64),
        channels: l.channels as i32,
        size: l.dtype.size() as i32,
        width: l.width as i32,
        height: l.height as i32,
        opaque: l.dtype.opaque_bits(),
    }
}

/// The shared frames for an image of `layout`: its size, its format, linear memory.
pub fn frame_desc(layout: &Layout) -> FrameDesc {
    let extent = ash::vk::Extent2D { width: layout.width as u32, height: layout.height as u32 };
    FrameDesc::new(extent).format(layout.format()).layout(vkcuda::Layout::Buffer)
}
