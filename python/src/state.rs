//! A viewer's state: its device, the run in progress, the CUDA side for GPU
//! tensors, and what it has done. No Python here but the GIL token the waits
//! give up while they wait.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _, Result};
use cudarc::driver::{result, sys, CudaContext, CudaStream};

use crate::array::Layout;
use crate::run::{Ended, Output, Run};
use crate::tensor::DeviceArray;
use vkcuda::types::CudaSched;
use vkcuda::FrameDesc;
use vkcuda_run::feed::device::{DeviceStaging, Packer, Packing};
use vkcuda_run::feed::{Counts, Feed, Mailbox};
use vkcuda_run::setup::Gpu;

/// What a viewer has done, over all its finished runs.
#[derive(Default)]
pub struct Totals {
    pub put: u64,
    pub replaced: u64,
    pub consumed: u64,
    pub written: u64,
}

/// The CUDA side, made at the first GPU tensor: the primary context of the
/// viewer's device (the one PyTorch, CuPy, JAX and cuda.core use), a stream
/// for packs no caller stream orders, and the packing kernel.
pub struct CudaSide {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    packer: Packer,
}

impl CudaSide {
    fn new(gpu: &Gpu) -> Result<Self> {
        let Some(device) = &gpu.cuda else {
            bail!("no CUDA device matches {}: GPU tensors cannot be shown on it", gpu.device.info)
        };
        let ctx = vkcuda::cuda::context(device, CudaSched::Auto)?;
        let stream = ctx.new_stream().context("cuStreamCreate")?;
        let packer = Packer::load(&ctx, &vkcuda_run::kernels::default_cache_dir())?;
        Ok(Self { ctx, stream, packer })
    }

    /// The stream packs run on when the caller names none.
    pub fn own_stream(&self) -> u64 {
        self.stream.cu_stream() as u64
    }
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
}

impl State {
    /// A viewer on `gpu`, writing to `output`.
    pub fn new(gpu: Arc<Gpu>, output: Output, every: bool) -> Self {
        Self { gpu: Some(gpu), output, every, run: None, cuda: None, next_base: 0, totals: Totals::default() }
    }

    /// The device, or the error of a closed viewer.
    pub fn gpu(&self) -> Result<&Arc<Gpu>> {
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
        if self.run.as_ref().is_some_and(|r| r.desc != desc || r.on_device() != device || r.stopped()) {
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
                    }
                }
            };
            let at = (self.totals.consumed, self.next_base);
            self.run = Some(Run::start(gpu, desc, feed, self.output.clone(), at)?);
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
                gpu.device.info
            ),
            None => bail!(
                "the tensor is on CUDA device {device}, and no CUDA device matches this viewer's {}",
                gpu.device.info
            ),
        }
        if self.cuda.is_none() {
            self.cuda = Some(CudaSide::new(&gpu)?);
        }
        self.cuda.as_ref().ok_or_else(|| anyhow!("no CUDA side"))
    }

    /// Packs `array` on `stream` into a free slot of the device run for it and
    /// returns the run's mailbox and the slot, for [`Put`]ting.
    pub fn pack(
        &mut self,
        array: &DeviceArray,
        stream: u64,
    ) -> Result<(Arc<Mailbox<usize>>, Arc<DeviceStaging>, usize)> {
        let (mailbox, staging) = match &self.run_for(frame_desc(&array.layout), true)?.feed {
            Feed::Device { mailbox, staging } => (mailbox.clone(), staging.clone()),
            Feed::Host(_) => bail!("a device run without a device feed"),
        };
        let cuda = self.cuda.as_ref().ok_or_else(|| anyhow!("no CUDA side"))?;
        cuda.ctx.bind_to_thread()?;
        let run_stopped = || self.run.as_ref().is_none_or(Run::stopped);
        let slot = staging.acquire(&run_stopped).ok_or_else(|| anyhow!("the viewer's run stopped"))?;
        let packed = pack_into(cuda, array, stream, &staging, slot);
        if packed.is_err() {
            staging.release(slot);
        }
        packed.map(|()| (mailbox, staging, slot))
    }
}

/// Enqueues on `stream`: the wait for the slot's previous pack, the pack, its "ready" event.
fn pack_into(
    cuda: &CudaSide,
    array: &DeviceArray,
    stream: u64,
    staging: &DeviceStaging,
    slot: usize,
) -> Result<()> {
    let stream = stream as sys::CUstream;
    let ready = staging.ready(slot);
    // A pack into this slot on another stream may still run: this one goes after it.
    // SAFETY: the event is the slot's, of this context; the stream is the caller's, of this context.
    unsafe { result::stream::wait_event(stream, ready, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
        .context("cuStreamWaitEvent (the slot's last pack)")?;
    let l = &array.layout;
    let packing = Packing {
        strides: l.strides.map(|s| s as i64),
        channels: l.channels as i32,
        size: l.dtype.size() as i32,
        width: l.width as i32,
        height: l.height as i32,
        opaque: l.dtype.opaque_bits(),
    };
    // SAFETY: the caller's stream is of this context and current here; the tensor stays
    // allocated until the pack runs (the caller holds it, and frees memory stream-ordered);
    // the slot holds one packed frame of this layout.
    unsafe { cuda.packer.pack(stream, array.pointer, &packing, staging.pointer(slot)) }?;
    // SAFETY: as above.
    unsafe { result::event::record(ready, stream) }.context("cuEventRecord (the slot's pack)")
}

/// The shared frames for an image of `layout`: its size, its format, linear memory.
pub fn frame_desc(layout: &Layout) -> FrameDesc {
    let extent = ash::vk::Extent2D { width: layout.width as u32, height: layout.height as u32 };
    FrameDesc::new(extent).format(layout.format()).layout(vkcuda::Layout::Buffer)
}
