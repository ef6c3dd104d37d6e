//! A viewer's state: its device, the run in progress, the CUDA side for GPU
//! tensors, and what it has done. No Python here but the GIL token the waits
//! give up while they wait.

use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Result};
use cudarc::driver::sys;

use crate::array::Layout;
use crate::export::{FrameShape, FrameSlot, Target};
use crate::run::Run;
use crate::tensor::DeviceArray;
use crate::window::Opened;
use vkcuda::vk::instance::ValidationCounts;
use vkcuda::FrameDesc;
use vkcuda_run::drive::feed::client::{self, DeviceFeed, Feeder, Held, Source};
use vkcuda_run::drive::feed::device::{DeviceStaging, Packing};
use vkcuda_run::drive::feed::line::{Line, Made, Wait};
use vkcuda_run::drive::feed::run::Output;
use vkcuda_run::drive::feed::run::{Ended, StartAt};
use vkcuda_run::drive::feed::{Counts, Feed, Mailbox};
use vkcuda_run::frames::gpu::Gpu;

/// What a viewer has done: over its finished runs ([`State::totals`]), or
/// with the run in progress too ([`State::counts`]).
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
    pub cuda: Option<Feeder>,
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

    /// Frames put, replaced, consumed and written so far: the finished runs'
    /// totals and the run in progress (its mailbox's and its consumer's
    /// counts; [`State::finish_run`] moves them into the totals, under the
    /// same lock, so none is counted twice).
    pub fn counts(&self) -> Totals {
        // Read in the order the frames go the other way (written, consumed, put): a count
        // read later is never below one read before it, even while frames come.
        let (progress, live) = match &self.run {
            Some(r) => {
                let written = r.progress.written();
                ((r.progress.consumed(), written), r.feed.counts())
            }
            None => ((0, 0), Counts::default()),
        };
        let t = &self.totals;
        Totals {
            put: t.put + live.put,
            replaced: t.replaced + live.replaced,
            consumed: t.consumed + progress.0,
            written: t.written + progress.1,
        }
    }

    /// Ends the current run once all it was given is consumed (and written).
    pub fn finish_run(&mut self) -> Result<()> {
        let Some(run) = self.run.take() else { return Ok(()) };
        let (counts, progress) = (run.feed.counts(), run.progress.clone());
        self.totals.put += counts.put;
        self.totals.replaced += counts.replaced;
        let ended: Result<Ended> = run.finish();
        // A run that failed, or a window its user closed, ends with no counts of its own:
        // what its consumer counted on the way stands (stats() showed it already).
        let (consumed, written) = ended.as_ref().map_or((0, 0), |e| (e.consumed, e.written));
        self.totals.consumed += consumed.max(progress.consumed());
        self.totals.written += written.max(progress.written());
        self.next_base = ended?.next_base;
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
                    let ctx = self.cuda.as_ref().ok_or_else(|| anyhow!("no CUDA side"))?.context().clone();
                    Feed::Device {
                        mailbox: Mailbox::new(),
                        staging: DeviceStaging::new(ctx, desc.bytes() as usize)?,
                        line: Line::new(),
                    }
                }
            };
            let at = StartAt { first: self.totals.consumed, base: self.next_base };
            self.run = Some(match &self.window {
                Some(w) => Run::start_in(w, desc, feed, at)?,
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
    pub fn cuda_for(&mut self, device: usize) -> Result<&Feeder> {
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
            self.cuda = Some(Feeder::new(&gpu, &vkcuda_run::scene::kernels::default_cache_dir())?);
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
        let DeviceFeed { mailbox, staging, line } = self.device_feed(layout)?;
        let ctx = self.cuda.as_ref().ok_or_else(|| anyhow!("no CUDA side"))?.context().clone();
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
            size: FrameShape { height: layout.height, width: layout.width },
            dtype: layout.dtype,
            stream,
            writers: Mutex::new(Vec::new()),
            done: Mutex::new(false),
        }))
    }

    /// A free slot of the device run for frames of `layout`, to write on
    /// `stream` after the slot's last use.
    fn slot_for_frame(&mut self, layout: &Layout, stream: u64) -> Result<usize> {
        let feed = self.device_feed(layout)?;
        let run_stopped = || self.run.as_ref().is_none_or(Run::ending);
        // SAFETY: the caller's stream (or the legacy default) is a live stream of the bound context.
        Ok(unsafe { client::slot_after_last_use(&feed, stream as sys::CUstream, &run_stopped) }?.slot)
    }

    /// Makes the next frame of the device run for `array` straight from it
    /// ([`Feeder::make`]).
    pub fn make(
        &mut self,
        array: &DeviceArray,
        stream: u64,
        every: bool,
        give_up: &dyn Fn() -> bool,
    ) -> Result<Made> {
        let feed = self.device_feed(&array.layout)?;
        let cuda = self.cuda.as_mut().ok_or_else(|| anyhow!("no CUDA side"))?;
        let source = source(array);
        // SAFETY: the caller's stream is of this context; the tensor stays allocated until the
        // pack runs (the caller holds it, and frees memory stream-ordered).
        unsafe { cuda.make(&feed, &source, stream as sys::CUstream, every, give_up) }
    }

    /// [`State::pack`] when it would not wait (the run goes on with these
    /// frames, and [`Feeder::slot_ready`]), so the caller need not give up
    /// the GIL; `None` otherwise.
    pub fn pack_if_ready(&mut self, array: &DeviceArray, stream: u64) -> Option<Result<Held>> {
        let desc = frame_desc(&array.layout);
        let run = self.run.as_ref().filter(|r| r.serves(desc, true))?;
        let Feed::Device { staging, .. } = &run.feed else { return None };
        let ready = self.cuda.as_ref().is_some_and(|cuda| cuda.slot_ready(staging));
        ready.then(|| self.pack(array, stream))
    }

    /// Packs `array` on `stream` into a free slot of the device run for it and
    /// returns the run's mailbox and the slot, for putting; waits for a free
    /// slot and for the caller's earlier pack ([`Feeder::pack`]).
    pub fn pack(&mut self, array: &DeviceArray, stream: u64) -> Result<Held> {
        let held = self.free_slot(&array.layout)?;
        let cuda = self.cuda.as_mut().ok_or_else(|| anyhow!("no CUDA side"))?;
        // SAFETY: as in State::make.
        unsafe { cuda.pack(&held, &source(array), stream as sys::CUstream) }?;
        Ok(held)
    }

    /// The feed of the device run for frames of `layout` (the current run,
    /// or a new one after it): its mailbox, slots and line.
    fn device_feed(&mut self, layout: &Layout) -> Result<DeviceFeed> {
        match &self.run_for(frame_desc(layout), true)?.feed {
            Feed::Device { mailbox, staging, line } => {
                Ok(DeviceFeed { mailbox: mailbox.clone(), staging: staging.clone(), line: line.clone() })
            }
            Feed::Host(_) => bail!("a device run without a device feed"),
        }
    }

    /// A free slot of the device run for frames of `layout` (waiting for one
    /// while the run goes on), with the run's mailbox it is put in.
    fn free_slot(&mut self, layout: &Layout) -> Result<Held> {
        let feed = self.device_feed(layout)?;
        let run_stopped = || self.run.as_ref().is_none_or(Run::ending);
        client::take_slot(&feed, &run_stopped)
    }
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

/// Where `array`'s frame is, for the packing kernel.
fn source(array: &DeviceArray) -> Source {
    Source { pointer: array.pointer, packing: packing(&array.layout) }
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
