//! The viewer's CUDA side, made at the first GPU tensor: the primary context
//! of the viewer's device (the one PyTorch, CuPy, JAX and cuda.core use), a
//! stream for packs no caller stream orders, the packing kernel, and the
//! count of the caller's packs that bounds how far its slot packs run ahead.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use cudarc::driver::{sys, CudaContext, CudaStream};

use vkcuda::cuda::external::ExternalSemaphore;
use vkcuda::cuda::{Context, RawStream};
use vkcuda::types::CudaSched;
use vkcuda::vk::timeline::Timeline;
use vkcuda::vk::WAIT_TIMEOUT;
use vkcuda_run::frames::gpu::Gpu;
use vkcuda_run::running::feed::device::Packer;

/// Packs of the caller's that may be on the GPU when it packs into a slot.
/// A caller that shows faster than its own GPU packs (a loop of nothing but
/// newest-wins shows) waits until its last pack, into a slot or straight into
/// the shared buffer, has run (or Vulkan releases the next buffer, which then
/// takes the frame) instead of queueing more: a slot pack holds up the frame
/// made after it on the same stream, and most are replaced before they are
/// shown (measured against counting slot packs only, two at a time, in
/// docs/results/2026-11-26-newest-sleep).
const RUN_AHEAD: u64 = 1;

/// How often a wait for an earlier pack looks whether the context failed.
const CHECK: Duration = Duration::from_millis(50);

/// See the module docs.
pub struct CudaSide {
    /// First to go: it waits for the last pack it counted.
    packs: Packs,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub packer: Packer,
}

/// The caller's packs, counted on a timeline CUDA sets to k behind the
/// k-th: a Vulkan timeline, so a newest-wins caller can sleep in one host
/// wait for whichever comes first, Vulkan's release of the next buffer or
/// its own earlier pack ([`vkcuda_run::running::feed::line::Wait::Newest`]).
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
unsafe impl Send for CudaSide {}

impl CudaSide {
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let Some(device) = &gpu.cuda else {
            bail!("no CUDA device matches {}: GPU tensors cannot be shown on it", gpu.device.info())
        };
        let ctx = vkcuda::cuda::context(device, CudaSched::Auto)?;
        let stream = ctx.new_stream().context("cuStreamCreate")?;
        let packer = Packer::load(&ctx, &vkcuda_run::base::kernels::default_cache_dir())?;
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

    /// The point at which [`CudaSide::ahead_done`] turns true, to wait for.
    pub fn ahead_point(&self) -> (&Timeline, u64) {
        (&self.packs.timeline, self.ahead())
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
            let state = unsafe { sys::cuStreamQuery(stream) };
            if !matches!(state, sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_NOT_READY) {
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
                sys::cuStreamQuery(self.probe.cu_stream())
            });
            if !matches!(state, sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_NOT_READY) {
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
