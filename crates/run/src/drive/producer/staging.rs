//! The staging baseline: what people do instead of sharing images. CUDA
//! renders into linear device memory, `cuMemcpyDtoHAsync` copies it into
//! pinned host memory, the host waits for the copy and copies the pixels into
//! a Vulkan staging buffer, then signals "rendered" from the host; the
//! consumer uploads the staging buffer into its image (as for the CPU
//! producer) and consumes it the same way. `vkcuda bench` measures the
//! interop against it; `--producer staging` runs (and verifies) it alone.

use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use cudarc::driver::{sys, CudaContext, CudaStream};

use super::cpu::host_loop;
use super::cuda::EventAnchor;
use super::{Job, Report};
use crate::cuda::driver;
use crate::scene::director::Director;
use crate::scene::kernels::{Out, SceneKernels};
use crate::scene::FrameArgs;
use vkcuda::interop::SharedFrames;
use vkcuda::vk::memory::Buffer;

/// Device memory and pinned host memory of one frame, freed on drop.
struct Memory {
    ctx: Arc<CudaContext>,
    device: sys::CUdeviceptr,
    host: *mut u8,
    bytes: usize,
}

// SAFETY: the pointers are owned by this struct and only used by the thread that owns it.
unsafe impl Send for Memory {}

impl Memory {
    fn new(ctx: Arc<CudaContext>, bytes: usize) -> Result<Self> {
        ctx.bind_to_thread()?;
        // SAFETY: a plain allocation in the bound context.
        let device = unsafe { driver::malloc(bytes) }.context("cuMemAlloc")?;
        let mut this = Self { ctx, device, host: std::ptr::null_mut(), bytes };
        // Flags 0: cached (not write-combined), so the host's copy out of it is fast.
        // SAFETY: a plain allocation in the bound context.
        this.host = unsafe { driver::malloc_host(bytes) }.context("cuMemAllocHost")?;
        Ok(this)
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // The stream that used them was synchronised before the producer returned (or the
        // context is being torn down); each pointer is freed once.
        if !self.host.is_null() {
            // SAFETY: as above.
            let _ = unsafe { driver::free_host(self.host) };
        }
        // SAFETY: as above.
        let _ = unsafe { driver::free(self.device) };
    }
}

/// The staging baseline's state.
pub struct StagingProducer {
    // Field order is drop order: CUDA objects before the context.
    memory: Memory,
    kernels: SceneKernels,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    shared: Arc<SharedFrames>,
    staging: Arc<Vec<Buffer>>,
    director: Arc<Director>,
}

impl StagingProducer {
    /// Allocates one frame of device and pinned memory of `bytes`, to render
    /// with `kernels` what `director` says into `staging`, which the consumer
    /// uploads into `shared`'s frames.
    pub fn new(
        ctx: Arc<CudaContext>,
        kernels: SceneKernels,
        bytes: usize,
        shared: Arc<SharedFrames>,
        staging: Arc<Vec<Buffer>>,
        director: Arc<Director>,
    ) -> Result<Self> {
        let memory = Memory::new(ctx.clone(), bytes)?;
        let stream = ctx.new_stream().context("cuStreamCreate")?;
        Ok(Self { memory, kernels, stream, ctx, shared, staging, director })
    }

    /// The producer thread's loop: the CPU producer's host-signalled loop, rendering with
    /// CUDA and copying through pinned host memory.
    pub fn run(self, job: &Job) -> Result<Report> {
        self.ctx.bind_to_thread()?;
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let (start, end) = (self.ctx.new_event(timing)?, self.ctx.new_event(timing)?);
        let anchor = EventAnchor::new(&self.ctx, &self.stream)?;
        let format = self.shared.desc().format;
        host_loop(job, &self.shared, &self.staging, |g, pixels| {
            let spec = self.director.begin(g);
            ensure!(self.memory.bytes >= pixels.len(), "staging memory too small");
            start.record(&self.stream)?;
            let args = FrameArgs::new(&spec.scene, spec.tick);
            let out = Out::linear(self.memory.device, spec.scene.width, format);
            self.kernels.launch(&self.stream, &spec.scene, &args, out)?;
            // SAFETY: `host` is pinned memory of at least this many bytes, not otherwise in use
            // until the event below completes; `device` holds what the kernel wrote before it.
            let host = unsafe { std::slice::from_raw_parts_mut(self.memory.host, pixels.len()) };
            // SAFETY: see above; the stream is this context's.
            unsafe { driver::copy_to_host(host, self.memory.device, self.stream.cu_stream()) }
                .context("cuMemcpyDtoHAsync")?;
            end.record(&self.stream)?;
            // The host needs the pixels now: it waits for the kernel and the copy.
            let render = anchor.resolve(&start, &end)?.render;
            pixels.copy_from_slice(host);
            Ok(Some(render))
        })
    }
}
