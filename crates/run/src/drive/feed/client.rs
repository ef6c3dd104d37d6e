//! The caller's half of a device feed ([`super::Feed::Device`]): the
//! primary context of the run's device (the one PyTorch, CuPy, JAX and
//! cuda.core use), a stream for packs no caller stream orders, the packing
//! kernel, the count of the caller's packs that bounds how far its slot
//! packs run ahead, and the protocol of a frame: make it straight into the
//! shared buffer ([`Feeder::make`]) or pack it into a slot after the slot's
//! last use ([`Feeder::pack`]). The Python module's `show` of a GPU tensor
//! runs it; so can any Rust caller with a frame in GPU memory.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use cudarc::driver::{sys, CudaContext, CudaStream};

use super::device::{DeviceStaging, Packer, Packing};
use super::line::{Line, Made, Wait, WakePoint};
use super::Mailbox;
use crate::cuda::driver;
use crate::frames::gpu::Gpu;
use vkcuda::cuda::external::ExternalSemaphore;
use vkcuda::cuda::{Context, RawStream};
use vkcuda::types::CudaSched;
use vkcuda::vk::timeline::Timeline;
use vkcuda::vk::WAIT_TIMEOUT;

/// Packs of the caller's that may be on the GPU when it packs into a slot.
/// A caller that shows faster than its own GPU packs (a loop of nothing but
/// newest-wins shows) waits until its last pack, into a slot or straight into
/// the shared buffer, has run (or Vulkan releases the next buffer, which then
/// takes the frame) instead of queueing more: a slot pack holds up the frame
/// made after it on the same stream, and most are replaced before they are
/// shown (measured against counting slot packs only, two at a time, in
/// docs/results/2026-11-26-newest-sleep).
pub const RUN_AHEAD: u64 = 1;

/// How often a wait for an earlier pack looks whether the context failed.
const CHECK: Duration = Duration::from_millis(50);

/// See the module docs.
pub struct Feeder {
    /// First to go: it waits for the last pack it counted.
    packs: Packs,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    packer: Packer,
}

/// A frame in the caller's GPU memory: its first element and where the
/// others are (the packing kernel reads it).
#[derive(Clone, Copy, Debug)]
pub struct Source {
    /// The frame's first element, in the feeder's context.
    pub pointer: sys::CUdeviceptr,
    /// Its strides, channels, element size and size.
    pub packing: Packing,
}

/// A device run's feed, as its caller uses it: the mailbox slots are put
/// in, the slots, and the line of frames made straight into the shared buffers.
#[derive(Clone)]
pub struct DeviceFeed {
    /// The slots put, in order.
    pub mailbox: Arc<Mailbox<usize>>,
    /// The slots.
    pub staging: Arc<DeviceStaging>,
    /// Who makes the next frame.
    pub line: Arc<Line>,
}

/// A slot taken from its run's free list, to put in `mailbox` (or give back).
pub struct Held {
    /// The mailbox it goes to.
    pub mailbox: Arc<Mailbox<usize>>,
    /// The slots it is one of.
    pub staging: Arc<DeviceStaging>,
    /// The slot.
    pub slot: usize,
}

/// The caller's packs, counted on a timeline CUDA sets to k behind the
/// k-th: a Vulkan timeline, so a newest-wins caller can sleep in one host
/// wait for whichever comes first, Vulkan's release of the next buffer or
/// its own earlier pack ([`Wait::Newest`]).
struct Packs {
    /// CUDA's import of `timeline`; `None` once leaked (see `Drop`).
    import: Option<ExternalSemaphore>,
    timeline: Timeline,
    /// Packs counted so far: the value the last one sets.
    count: u64,
    /// The stream the last one was enqueued on.
    last_stream: sys::CUstream,
    /// The viewer's own stream: whether the context failed, for `Drop`.
    probe: Arc<CudaStream>,
}

// SAFETY: the stream handle is only compared and the semaphores are used through
// thread-safe CUDA and Vulkan calls, by the thread that holds the viewer's state lock.
unsafe impl Send for Feeder {}

impl Feeder {
    /// The feeder of `gpu`'s CUDA device (its primary context), with the
    /// packing kernel compiled into (or loaded from) `cache`.
    pub fn new(gpu: &Gpu, cache: &std::path::Path) -> Result<Self> {
        let Some(device) = &gpu.cuda else {
            bail!("no CUDA device matches {}: GPU tensors cannot be shown on it", gpu.device.info())
        };
        let ctx = vkcuda::cuda::context(device, CudaSched::Auto)?;
        let stream = ctx.new_stream().context("cuStreamCreate")?;
        let packer = Packer::load(&ctx, cache)?;
        let timeline = Timeline::new(gpu.device.clone(), "packed", 0, true)?;
        let import = ExternalSemaphore::import(Context::Cudarc(ctx.clone()), timeline.export()?, "packed")
            .context("importing the 'packed' timeline into CUDA")?;
        let probe = stream.clone();
        let packs =
            Packs { import: Some(import), timeline, count: 0, last_stream: std::ptr::null_mut(), probe };
        Ok(Self { packs, ctx, stream, packer })
    }

    /// The value the next pack waits for: the pack [`RUN_AHEAD`] packs before it has run.
    fn ahead(&self) -> u64 {
        (self.packs.count + 1).saturating_sub(RUN_AHEAD)
    }

    /// Whether the pack [`RUN_AHEAD`] packs ago has run (the next pack will not wait for it).
    pub fn ahead_done(&self) -> bool {
        self.packs.timeline.value().is_ok_and(|v| v >= self.ahead())
    }

    /// The point at which [`Feeder::ahead_done`] turns true, to wait for.
    pub fn ahead_point(&self) -> WakePoint<'_> {
        WakePoint { timeline: &self.packs.timeline, value: self.ahead() }
    }

    /// Counts a slot pack just enqueued on `stream` (of this context,
    /// bound): waits until the pack [`RUN_AHEAD`] before has run, then
    /// enqueues its count behind it.
    pub fn count_slot_pack(&mut self, stream: sys::CUstream) -> Result<()> {
        self.count(stream, self.ahead())
    }

    /// Counts a frame just packed straight into the shared buffer on
    /// `stream` (newest wins): the next slot pack waits for it.
    pub fn count_frame(&mut self, stream: sys::CUstream) -> Result<()> {
        self.count(stream, 0)
    }

    /// Waits until the count reaches `before` (every earlier pack, if the
    /// last was on another stream: the values rise in the order they are
    /// set), then enqueues the next count on `stream`.
    fn count(&mut self, stream: sys::CUstream, before: u64) -> Result<()> {
        let before = match stream == self.packs.last_stream {
            true => before,
            false => self.packs.count,
        };
        while !self.packs.timeline.wait_for(before, CHECK)? {
            // A failed context never sets it: the stream says so.
            // SAFETY: the caller's stream is live and of this context.
            let state = unsafe { driver::stream_state(stream) };
            if driver::failed(state) {
                bail!("waiting for an earlier pack: the stream failed ({state:?})");
            }
        }
        let Some(import) = &self.packs.import else { bail!("the 'packed' timeline is gone") };
        // SAFETY: the caller's promise: a live stream of this context.
        import.signal(&unsafe { RawStream::new(stream) }, self.packs.count + 1)?;
        self.packs.count += 1;
        self.packs.last_stream = stream;
        Ok(())
    }

    /// The stream packs run on when the caller names none.
    pub fn own_stream(&self) -> u64 {
        self.stream.cu_stream() as u64
    }

    /// The context frames are fed from (the device's primary context).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Whether a pack into a slot of `staging` would not wait: a slot is
    /// free, and the caller's earlier pack has run ([`Feeder::ahead_done`]).
    pub fn slot_ready(&self, staging: &DeviceStaging) -> bool {
        staging.has_free() && self.ahead_done()
    }

    /// Makes the next frame of `feed` straight from `source`: packed on
    /// `stream` into the shared buffer once Vulkan has released it
    /// ([`Line::make`]). Every frame (`every`) waits for that until `give_up()`; newest
    /// wins waits until then or until a slot could take the frame at once
    /// ([`Feeder::slot_ready`]: [`Made::NotNow`]), so a caller whose own
    /// packs are behind still makes the next frame the moment its buffer is
    /// free. A newest-wins frame made is counted as a pack the next slot
    /// pack waits for ([`Feeder::count_frame`]).
    ///
    /// # Safety
    /// - `stream` is a live stream of this feeder's context (or the legacy default);
    /// - `source` stays allocated, with a frame of `feed`'s frames' size, until
    ///   the pack enqueued on `stream` has run (the caller frees memory stream-ordered).
    pub unsafe fn make(
        &mut self,
        feed: &DeviceFeed,
        source: &Source,
        stream: sys::CUstream,
        every: bool,
        give_up: &dyn Fn() -> bool,
    ) -> Result<Made> {
        self.ctx.bind_to_thread()?;
        let mut pack = |dst| {
            // SAFETY: the caller's promises; `dst` is the frame's shared buffer, of this size.
            unsafe { self.packer.pack(stream, source.pointer, &source.packing, dst, None) }
        };
        let staging = &feed.staging;
        let fallback = || give_up() || self.slot_ready(staging);
        let wait = match every {
            true => Wait::Every { give_up },
            // No free slot: only a release can help, and slots are freed at releases.
            false => {
                Wait::Newest { fallback: &fallback, wakes: staging.has_free().then(|| self.ahead_point()) }
            }
        };
        // SAFETY: the caller's stream is a live stream of this context.
        let made =
            unsafe { feed.line.make(stream, &feed.mailbox, wait, &mut pack, &|s| staging.drop_frame(s)) }?;
        if made == Made::Made && !every {
            self.count_frame(stream)?;
        }
        Ok(made)
    }

    /// Packs `source` on `stream` into `held`'s slot, after the slot's last
    /// use ([`after_last_use`]), and counts the pack (waiting for the
    /// caller's earlier one: [`Feeder::count_slot_pack`]). On an error the
    /// slot goes back to its free list.
    ///
    /// # Safety
    /// As [`Feeder::make`]'s.
    pub unsafe fn pack(&mut self, held: &Held, source: &Source, stream: sys::CUstream) -> Result<()> {
        let staging = &held.staging;
        let packed = self.ctx.bind_to_thread().map_err(anyhow::Error::from).and_then(|()| {
            // SAFETY: the caller's promises.
            unsafe { after_last_use(stream, staging, held.slot) }?;
            let droppable = Some(staging.droppable(held.slot));
            // SAFETY: the caller's promises; the slot holds one packed frame of this size.
            unsafe {
                self.packer.pack(
                    stream,
                    source.pointer,
                    &source.packing,
                    staging.pointer(held.slot),
                    droppable,
                )
            }?;
            // SAFETY: the slot's event, of this context; the caller's stream.
            unsafe { driver::record(staging.ready(held.slot), stream) }
                .context("cuEventRecord (the slot's pack)")?;
            self.count_slot_pack(stream)
        });
        if packed.is_err() {
            staging.release(held.slot);
        }
        packed
    }
}

/// Enqueues on `stream` the waits for the slot's last pack (or writes) and
/// last copy out: a pack into the slot on another stream, or the producer's
/// copy out of it, may still run. The copy was enqueued once Vulkan had
/// released its buffer, so this never waits for Vulkan.
///
/// # Safety
/// `stream` is a live stream of `staging`'s context, which is current.
pub unsafe fn after_last_use(stream: sys::CUstream, staging: &DeviceStaging, slot: usize) -> Result<()> {
    for (event, what) in
        [(staging.ready(slot), "the slot's last pack"), (staging.copied(slot), "the copy out of the slot")]
    {
        // Done already: nothing to order (a query costs less than a wait). Only this thread
        // records the pack's event, and the copy's only after the slot is put: neither can be
        // recorded again between the query and the pack.
        // SAFETY: the event is the slot's, of this context.
        if unsafe { driver::has_run(event) } {
            continue;
        }
        // SAFETY: the event is the slot's, of this context; the stream is the caller's, of this context.
        unsafe { driver::wait_event(stream, event) }
            .with_context(|| format!("cuStreamWaitEvent ({what})"))?;
    }
    Ok(())
}

/// A free slot of `feed`, waiting for one until `stopped()`, to pack into
/// ([`Feeder::pack`]) and put in its mailbox.
pub fn take_slot(feed: &DeviceFeed, stopped: &dyn Fn() -> bool) -> Result<Held> {
    let slot = feed.staging.acquire(stopped).ok_or_else(|| anyhow!("the run stopped"))?;
    Ok(Held { mailbox: feed.mailbox.clone(), staging: feed.staging.clone(), slot })
}

/// [`take_slot`], ready to be written on `stream` after its last use ([`after_last_use`]).
///
/// # Safety
/// As [`after_last_use`]'s.
pub unsafe fn slot_after_last_use(
    feed: &DeviceFeed,
    stream: sys::CUstream,
    stopped: &dyn Fn() -> bool,
) -> Result<Held> {
    let held = take_slot(feed, stopped)?;
    // SAFETY: the caller's promises.
    let waited = unsafe { after_last_use(stream, &held.staging, held.slot) };
    if waited.is_err() {
        held.staging.release(held.slot);
    }
    waited.map(|()| held)
}

impl Drop for Packs {
    /// CUDA's import goes once its last signal has run (a signal may not
    /// outlive it), or at once if the context failed (nothing of it runs any
    /// more); leaked, with an error, if neither comes within the bound.
    fn drop(&mut self) {
        let Some(import) = self.import.take() else { return };
        let deadline = std::time::Instant::now() + WAIT_TIMEOUT;
        loop {
            match self.timeline.wait_for(self.count, CHECK) {
                Ok(true) => return drop(import),
                Ok(false) if std::time::Instant::now() < deadline => {}
                Ok(false) | Err(_) => break,
            }
            let bound = self.probe.context().bind_to_thread();
            // SAFETY: the viewer's own stream, alive while `probe` holds it, of the context bound.
            let state = bound.map_or(sys::CUresult::CUDA_ERROR_INVALID_CONTEXT, |()| unsafe {
                driver::stream_state(self.probe.cu_stream())
            });
            if driver::failed(state) {
                log::debug!("the context failed ({state:?}): the 'packed' timeline's last signal never runs");
                return drop(import);
            }
        }
        log::error!(
            "the caller's last pack did not run within {WAIT_TIMEOUT:?}: leaking the 'packed' timeline's \
             CUDA import rather than destroying it in use"
        );
        std::mem::forget(import);
    }
}
