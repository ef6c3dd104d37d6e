//! The device feed: frames in GPU memory (a tensor), never through the host.
//!
//! Most frames the caller makes itself, packing its tensor straight into
//! the shared buffer on its own stream ([`super::line::Line::make`]) once the
//! host has seen Vulkan release that buffer. While the buffer is still
//! Vulkan's (newest wins), or for a frame written in place, the caller packs
//! into a free slot of [`DeviceStaging`] ([`Packer::pack`]) after the slot's
//! last pack and last copy out ("ready" and "copied" events), records
//! "ready" there, and puts the slot in the mailbox. A slot whose frame is
//! replaced before its pack has run marks that on a stream of its own, and
//! the pack skips the blocks not yet begun ([`DeviceStaging::drop_frame`]):
//! a caller that shows faster than frames are consumed wastes less of the
//! GPU. [`FedCudaProducer`] waits
//! on the host for the plan's "released", then, unless the caller made that
//! frame first, on its own stream for "ready", copies the slot into the
//! shared buffer, signals "rendered", records "copied" and frees the slot. So:
//! - the caller's stream never waits for Vulkan: a frame is packed or copied
//!   into a shared buffer only once the host saw Vulkan release it, and three
//!   slots leave one free while one waits in the mailbox and one is taken;
//! - the frame holds the tensor as the caller's stream had it when it was
//!   shown, and the caller may overwrite the tensor on that stream at once:
//!   the pack comes first on the same stream.

use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _, Result};
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig};

use super::line::Line;
use super::{check_size, Mailbox};
use crate::cuda::driver;
use crate::drive::producer::{FrameTiming, Job, Report};
use crate::metrics::clock::now_ns;
use crate::scene::kernels::{cached_module, KernelSource};
use vkcuda::interop::{CudaFrames, SharedFrames};

/// The packing kernel: any strides in, RGBA rows packed out.
pub const SOURCE: &str = include_str!("../../../../../shaders/pack.cu");

/// Slots: one waiting in the mailbox, one being copied, one to pack into.
pub const SLOTS: usize = 3;

/// How often a wait for a free slot looks whether to give up.
const CHECK: Duration = Duration::from_millis(50);

/// One slot: a packed frame's GPU memory, the event its pack recorded, and
/// the event the copy out of it recorded.
struct Slot {
    pointer: sys::CUdeviceptr,
    ready: sys::CUevent,
    copied: sys::CUevent,
    /// The number of the last pack into it.
    pack: AtomicU64,
}

/// A pack into a slot that may skip its work once the slot's frame is dropped
/// ([`DeviceStaging::drop_frame`]): where the kernel reads that, and the pack's number.
#[derive(Clone, Copy, Debug)]
pub struct Droppable {
    /// The slot's word in device memory: the last pack whose frame was dropped.
    pub flag: sys::CUdeviceptr,
    /// This pack's number; it skips its work once the word reaches it.
    pub id: u64,
}

/// The slots frames are packed into, in `ctx`, and which of them are free.
pub struct DeviceStaging {
    ctx: Arc<CudaContext>,
    bytes: usize,
    slots: Vec<Slot>,
    /// Per slot, in device memory: the last pack whose frame was dropped.
    dropped: sys::CUdeviceptr,
    /// The stream that writes `dropped`: beside the packs, never behind them.
    marks: Arc<CudaStream>,
    /// Packs numbered so far.
    packs: AtomicU64,
    free: Mutex<Vec<usize>>,
    returned: Condvar,
}

// SAFETY: the raw pointers and events are owned by this struct and used only
// through CUDA calls, which are thread-safe; the free list is locked.
unsafe impl Send for DeviceStaging {}
// SAFETY: as above.
unsafe impl Sync for DeviceStaging {}

impl std::fmt::Debug for DeviceStaging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceStaging").field("bytes", &self.bytes).field("slots", &self.slots.len()).finish()
    }
}

impl DeviceStaging {
    /// [`SLOTS`] slots of `bytes` each in `ctx`.
    pub fn new(ctx: Arc<CudaContext>, bytes: usize) -> Result<Arc<Self>> {
        ctx.bind_to_thread()?;
        let marks = ctx.new_stream().context("cuStreamCreate")?;
        // SAFETY: a plain allocation in the bound context; freed in Drop (`this` owns it at once).
        let dropped =
            unsafe { driver::malloc(SLOTS * size_of::<u64>()) }.context("cuMemAlloc (the dropped packs)")?;
        let mut this = Self {
            ctx,
            bytes,
            slots: Vec::new(),
            dropped,
            marks,
            packs: AtomicU64::new(0),
            free: Mutex::new(Vec::new()),
            returned: Condvar::new(),
        };
        // SAFETY: the allocation above holds `SLOTS` words.
        unsafe { driver::memset(this.dropped, 0, SLOTS * size_of::<u64>()) }.context("cuMemsetD8")?;
        for i in 0..SLOTS {
            // SAFETY: a plain allocation in the bound context; freed in Drop.
            let pointer = unsafe { driver::malloc(bytes.max(1)) }.context("cuMemAlloc (a staging slot)")?;
            let events = driver::create_event().and_then(|ready| match driver::create_event() {
                Ok(copied) => Ok((ready, copied)),
                Err(e) => {
                    // SAFETY: created just above, never used.
                    let _ = unsafe { driver::destroy_event(ready) };
                    Err(e)
                }
            });
            let (ready, copied) = match events {
                Ok(e) => e,
                Err(e) => {
                    // SAFETY: allocated just above, never used.
                    let _ = unsafe { driver::free(pointer) };
                    return Err(e).context("cuEventCreate");
                }
            };
            this.slots.push(Slot { pointer, ready, copied, pack: AtomicU64::new(0) });
            this.lock().push(i);
        }
        Ok(Arc::new(this))
    }

    fn lock(&self) -> MutexGuard<'_, Vec<usize>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The context the slots live in.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Bytes of one slot (one packed frame).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether a slot is free now ([`DeviceStaging::acquire`] would not wait).
    pub fn has_free(&self) -> bool {
        !self.lock().is_empty()
    }

    /// A free slot, waiting for one until `give_up()` says so (`None`).
    pub fn acquire(&self, give_up: &dyn Fn() -> bool) -> Option<usize> {
        let mut free = self.lock();
        loop {
            if let Some(slot) = free.pop() {
                return Some(slot);
            }
            if give_up() {
                return None;
            }
            free = self.returned.wait_timeout(free, CHECK).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Slot `slot` is free again: nothing reads it any more.
    pub fn release(&self, slot: usize) {
        self.lock().push(slot);
        self.returned.notify_all();
    }

    /// Slot `slot`'s frame was dropped unshown (replaced by a newer one): a
    /// pack into it that has not run yet may skip its work. Then it is free.
    pub fn drop_frame(&self, slot: usize) {
        let id = self.slots[slot].pack.load(Ordering::Acquire);
        let addr = self.dropped_word(slot);
        let marked = self.ctx.bind_to_thread().map_err(anyhow::Error::from).and_then(|()| {
            // SAFETY: within the allocation; the stream is this context's.
            let r = unsafe { driver::write_value(self.marks.cu_stream(), addr, id) };
            vkcuda::cuda::check(r, "cuStreamWriteValue64_v2").map_err(anyhow::Error::from)
        });
        if let Err(e) = marked {
            log::debug!("{e:#}: the dropped frame's pack runs whole");
        }
        self.release(slot);
    }

    /// Numbers a new pack into `slot`: what its kernel reads to skip its work
    /// once the frame is dropped.
    pub fn droppable(&self, slot: usize) -> Droppable {
        let id = self.packs.fetch_add(1, Ordering::AcqRel) + 1;
        self.slots[slot].pack.store(id, Ordering::Release);
        Droppable { flag: self.dropped_word(slot), id }
    }

    /// Slot `slot`'s word in `dropped`.
    fn dropped_word(&self, slot: usize) -> sys::CUdeviceptr {
        self.dropped + (slot * size_of::<u64>()) as sys::CUdeviceptr
    }

    /// Slot `slot`'s memory.
    pub fn pointer(&self, slot: usize) -> sys::CUdeviceptr {
        self.slots[slot].pointer
    }

    /// Slot `slot`'s "ready" event: recorded after its pack, on the packing stream.
    pub fn ready(&self, slot: usize) -> sys::CUevent {
        self.slots[slot].ready
    }

    /// Slot `slot`'s "copied" event: recorded after the copy out of it, on the producer's stream.
    pub fn copied(&self, slot: usize) -> sys::CUevent {
        self.slots[slot].copied
    }
}

impl Drop for DeviceStaging {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        for slot in self.slots.drain(..) {
            // A pack or copy still running uses the slot: wait for both before freeing
            // (a failed context answers at once).
            for event in [slot.ready, slot.copied] {
                // SAFETY: the event was created in this context and not destroyed.
                let _ = unsafe { driver::synchronize(event) };
                // SAFETY: as above; destroyed once.
                let _ = unsafe { driver::destroy_event(event) };
            }
            // SAFETY: allocated in `new`, freed once, its last writer finished above.
            let _ = unsafe { driver::free(slot.pointer) };
        }
        let _ = self.marks.synchronize();
        // SAFETY: allocated in `new`, freed once; every pack that read it and every write finished above.
        let _ = unsafe { driver::free(self.dropped) };
    }
}

/// Where an image's elements are, for [`Packer::pack`].
#[derive(Clone, Copy, Debug)]
pub struct Packing {
    /// Byte steps along y, x and the channels.
    pub strides: [i64; 3],
    /// Channels: 1, 3 or 4.
    pub channels: i32,
    /// Bytes per element: 1, 2 or 4.
    pub size: i32,
    /// Columns and rows.
    pub width: i32,
    /// Rows.
    pub height: i32,
    /// An opaque alpha, as the element's bits (255, half 1.0, float 1.0).
    pub opaque: u32,
}

/// The packing kernel, loaded in one context.
pub struct Packer {
    _module: Arc<CudaModule>,
    function: CudaFunction,
}

// SAFETY: the module and function are used only through CUDA calls, which are thread-safe.
unsafe impl Send for Packer {}
// SAFETY: as above.
unsafe impl Sync for Packer {}

impl Packer {
    /// Compiles [`SOURCE`] with NVRTC for `ctx`'s device (or takes it from `cache_dir`) and loads it.
    pub fn load(ctx: &Arc<CudaContext>, cache_dir: &Path) -> Result<Self> {
        let module = cached_module(ctx, cache_dir, KernelSource { name: "pack.cu", text: SOURCE })
            .context("loading the packing kernel")?;
        let function = module.load_function("vk_pack").context("the packing kernel's entry")?;
        Ok(Self { _module: module, function })
    }

    /// Enqueues on `stream` (the caller's: any stream of the context) the
    /// pack of the image at `src` into `dst`, rows packed.
    ///
    /// # Safety
    /// `stream` is a live stream of this packer's context, current on this
    /// thread; `packing` describes memory at `src` that stays allocated until
    /// the pack has run, and `dst` holds the packed frame.
    pub unsafe fn pack(
        &self,
        stream: sys::CUstream,
        src: sys::CUdeviceptr,
        packing: &Packing,
        dst: sys::CUdeviceptr,
        droppable: Option<Droppable>,
    ) -> Result<()> {
        let Packing { strides: [sy, sx, sc], channels, size, width, height, opaque } = *packing;
        let (mut flag, mut id) = droppable.map_or((0, 0), |d| (d.flag, d.id));
        let (mut src, mut dst) = (src, dst);
        let (mut sy, mut sx, mut sc, mut channels, mut size, mut width, mut height, mut opaque) =
            (sy, sx, sc, channels, size, width, height, opaque);
        let mut params: [*mut std::ffi::c_void; 12] = [
            (&mut src as *mut u64).cast(),
            (&mut sy as *mut i64).cast(),
            (&mut sx as *mut i64).cast(),
            (&mut sc as *mut i64).cast(),
            (&mut channels as *mut i32).cast(),
            (&mut size as *mut i32).cast(),
            (&mut width as *mut i32).cast(),
            (&mut height as *mut i32).cast(),
            (&mut dst as *mut u64).cast(),
            (&mut opaque as *mut u32).cast(),
            (&mut flag as *mut u64).cast(),
            (&mut id as *mut u64).cast(),
        ];
        let config = LaunchConfig {
            grid_dim: ((width as u32).div_ceil(16), (height as u32).div_ceil(16), 1),
            block_dim: (16, 16, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the parameters match vk_pack's signature and outlive the call (cuLaunchKernel
        // copies them); the caller guarantees the stream and the memory.
        unsafe { driver::launch(self.function.cu_function(), config, stream, &mut params) }
            .context("launching the packing kernel")
    }
}

/// The fed CUDA producer; see the module docs.
pub struct FedCudaProducer {
    stream: Arc<CudaStream>,
    shared: Arc<SharedFrames>,
    staging: Arc<DeviceStaging>,
    mailbox: Arc<Mailbox<usize>>,
    line: Arc<Line>,
}

impl FedCudaProducer {
    /// Imports `shared` (buffer layout) into the staging slots' context, on a
    /// stream of its own, and hands the imports to `line`.
    pub fn new(
        shared: &Arc<SharedFrames>,
        staging: Arc<DeviceStaging>,
        mailbox: Arc<Mailbox<usize>>,
        line: Arc<Line>,
    ) -> Result<Self> {
        let ctx = staging.context().clone();
        ctx.bind_to_thread()?;
        let stream = ctx.new_stream().context("cuStreamCreate")?;
        let frames = CudaFrames::import(ctx.clone(), shared, stream.clone())?;
        check_size(staging.bytes(), shared.desc().bytes() as usize)?;
        line.open(ctx, frames, shared.clone())?;
        Ok(Self { stream, shared: shared.clone(), staging, mailbox, line })
    }

    /// The producer thread's loop: until the mailbox is closed and empty, or
    /// the run stops. Then no frame is made any more, by the caller either.
    /// A failed context (a kernel of the caller's faulted: nothing it
    /// enqueues runs, so Vulkan would wait for its frames forever) ends the
    /// run with CUDA's error.
    pub fn run(self, job: &Job) -> Result<Report> {
        self.line.start(job);
        let watch = ContextWatch::new(&self.stream);
        let result = self.produce(job, &watch);
        let result = match watch.failure() {
            Some(e) => Err(anyhow!(
                "CUDA failed ({e:?}): a kernel on the viewer's GPU faulted (the caller's, or a pack), so no \
                 frame made after it is shown"
            )),
            None => result,
        };
        let frames = self.line.close();
        self.mailbox.end();
        result.map(|report| Report { frames, ..report })
    }

    /// Makes each slot put into the frame the line is at, once Vulkan has
    /// released that frame's buffer, unless the caller made it first.
    fn produce(&self, job: &Job, watch: &ContextWatch) -> Result<Report> {
        self.staging.context().bind_to_thread()?;
        let control = &job.control;
        let failed = || control.failed() || watch.failed();
        let mut report = Report::default();
        while self.mailbox.wait_pending(&failed) {
            let g = self.line.next();
            if g >= control.limit() {
                break;
            }
            // On the host first: a stream waiting on a value not yet reached blocks this thread's next call.
            if let Some(w) = job.plan.producer(g).wait {
                self.shared.timelines()[w.timeline].wait(w.value, &failed)?;
            }
            let Some(mut turn) = self.line.turn_if(g, &failed) else { continue };
            let Some(slot) = self.mailbox.take_now() else { continue };
            // After an error the slot stays held: its "copied" event may not be recorded.
            let stream = self.stream.cu_stream();
            let bytes = self.staging.bytes();
            turn.make(&*self.stream, Some(self.staging.copied(slot)), &mut |dst| {
                // SAFETY: the stream and event are this context's; the event was recorded by the caller.
                unsafe { driver::wait_event(stream, self.staging.ready(slot)) }
                    .context("cuStreamWaitEvent (the caller's pack)")?;
                // SAFETY: both allocations hold `bytes`; the wait above orders the copy after the
                // pack, and the host saw Vulkan's last read of the buffer end.
                unsafe { driver::copy(dst, self.staging.pointer(slot), bytes, stream) }
                    .context("cuMemcpyDtoDAsync (slot to shared buffer)")
            })?;
            drop(turn);
            // Free again: the next pack into the slot waits for "copied" on its stream.
            self.staging.release(slot);
            report.timings.push(g, FrameTiming { render: Duration::ZERO, rendered_ns: now_ns() });
            self.mailbox.made();
        }
        Ok(report)
    }
}

/// Whether a context has failed, as one of its streams reports it (a kernel
/// fault is sticky: every stream of the context answers with it), looked at
/// no more than once per [`CHECK`]: a producer's waits ask on every wake.
struct ContextWatch {
    stream: sys::CUstream,
    next: Cell<Instant>,
    failure: Cell<Option<sys::CUresult>>,
}

impl ContextWatch {
    fn new(stream: &CudaStream) -> Self {
        Self { stream: stream.cu_stream(), next: Cell::new(Instant::now()), failure: Cell::new(None) }
    }

    /// Whether the context has failed (by the last look).
    fn failed(&self) -> bool {
        if self.failure.get().is_none() && Instant::now() >= self.next.get() {
            self.next.set(Instant::now() + CHECK);
            // SAFETY: the producer's own stream, live while it runs, of the context bound on this thread.
            let state = unsafe { driver::stream_state(self.stream) };
            if driver::failed(state) {
                self.failure.set(Some(state));
            }
        }
        self.failure.get().is_some()
    }

    /// The context's error, looked at now.
    fn failure(&self) -> Option<sys::CUresult> {
        self.next.set(Instant::now());
        self.failed();
        self.failure.get()
    }
}

impl Drop for FedCudaProducer {
    /// A producer that never ran lets the imports go too.
    fn drop(&mut self) {
        self.line.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::nvrtc;

    /// The packing kernel compiles (NVRTC needs no GPU: CI has PyPI's libnvrtc).
    #[test]
    fn the_packing_kernel_compiles() {
        if nvrtc::load().is_err() {
            println!("skipped: NVRTC not found");
            return;
        }
        for arch in ["sm_90", "compute_75"] {
            let made = nvrtc::compile(SOURCE, "pack.cu", &[format!("--gpu-architecture={arch}")]);
            let made = made.unwrap_or_else(|e| panic!("{arch}: {e}"));
            assert!(made.ptx.contains("vk_pack"), "{arch}: no vk_pack entry in the PTX");
        }
    }
}
