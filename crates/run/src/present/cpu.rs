//! The CPU-present path: for windows the Vulkan device cannot present to
//! (NVIDIA under Xvfb, VNC or X forwarding). The compute draw writes a
//! window-sized buffer on the GPU (no graphics pipeline: it still finishes
//! after a CUDA fault on the GPU); each frame is copied into a host-visible
//! buffer, and once the frame is consumed, softbuffer puts it in the window.
//! The buffers are taken in turn ([`Turns`]): after a fault, the last good
//! frame is still in one for the notice written over it. Everything before
//! the draw is the same as for a swapchain.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;
use winit::window::Window;

use super::compute_draw::{ComputeDraw, ComputeTarget};
use super::held::{to_0rgb, Still, Turns};
use super::notice::Area;
use super::readback::{copy_to_host, Pixels};
use crate::frames::consumer::Source;
use vkcuda::vk::device::Device;
use vkcuda::vk::memory::Buffer;
use vkcuda::FrameDesc;

/// The window-sized target, one readback buffer per frame slot, and the window's softbuffer surface.
pub struct CpuOutput {
    device: Arc<Device>,
    // Field order is drop order: the Vulkan objects before the window.
    target: Option<ComputeTarget>,
    buffers: Vec<Buffer>,
    /// Which buffer holds each slot's frame once consumed, and which one the window shows.
    turns: Turns,
    surface: softbuffer::Surface<Arc<Window>, Arc<Window>>,
    _context: softbuffer::Context<Arc<Window>>,
    /// How long the last frame took from its mapped buffer into the window.
    pub put_time: Duration,
    /// The frame under a notice, once one is shown.
    still: Option<Still>,
    /// Consumed frames are not put in the window (their producer failed).
    frozen: bool,
}

impl CpuOutput {
    /// A softbuffer surface on `window`, with `slots` + 1 readback buffers (made by [`CpuOutput::recreate`]).
    pub fn new(device: Arc<Device>, window: Arc<Window>, slots: usize) -> Result<Self> {
        let context = softbuffer::Context::new(window.clone())
            .map_err(|e| anyhow!("softbuffer cannot use this display: {e}"))?;
        let surface = softbuffer::Surface::new(&context, window)
            .map_err(|e| anyhow!("softbuffer cannot draw into this window: {e}"))?;
        Ok(Self {
            device,
            target: None,
            buffers: Vec::new(),
            turns: Turns::new(slots),
            surface,
            _context: context,
            put_time: Duration::ZERO,
            still: None,
            frozen: false,
        })
    }

    /// The target (of `pass`) and buffers for a window of `extent` pixels (queue idle).
    pub fn recreate(&mut self, pass: &ComputeDraw, extent: vk::Extent2D) -> Result<()> {
        let (Some(w), Some(h)) = (NonZeroU32::new(extent.width), NonZeroU32::new(extent.height)) else {
            anyhow::bail!("cannot draw into a minimized window");
        };
        // The old target goes first: both are large.
        self.target = None;
        self.target = Some(ComputeTarget::new(pass, "CPU-present target", extent, Pixels::Rgba8)?);
        let usage = vk::BufferUsageFlags::TRANSFER_DST;
        let buffers = self.turns.buffers();
        let bytes = FrameDesc::new(extent).bytes();
        self.buffers = Buffer::frames(
            &self.device,
            "CPU-present readback",
            buffers,
            bytes,
            usage,
            MemoryLocation::GpuToCpu,
        )?;
        self.turns.forget();
        self.surface.resize(w, h).map_err(|e| anyhow!("softbuffer resize: {e}"))?;
        Ok(())
    }

    /// The target's size.
    pub fn extent(&self) -> vk::Extent2D {
        self.target.as_ref().map(|t| t.extent).unwrap_or_default()
    }

    /// Records frame `frame` in slot `slot`: the compute draw into the target,
    /// then the target into the slot's buffer, visible to the host.
    pub fn record(
        &mut self,
        cmd: vk::CommandBuffer,
        slot: usize,
        frame: u64,
        pass: &ComputeDraw,
        shown: Source<'_>,
    ) -> Result<()> {
        let target = self.target.as_ref().context("no target")?;
        let buffer = self.turns.take(slot, frame)?;
        pass.record(cmd, shown, target)?;
        copy_to_host(self.device.raw(), cmd, target.readable(), &self.buffers[buffer], target.extent);
        Ok(())
    }

    /// Frame `frame` in slot `slot` is consumed: put its pixels in the window.
    pub fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        let Some(buffer) = self.turns.done(slot, frame) else { return Ok(()) };
        if self.frozen {
            return Ok(());
        }
        let started = Instant::now();
        let pixels = self.buffers[buffer].mapped()?;
        let mut out = self.surface.buffer_mut().map_err(|e| anyhow!("softbuffer: {e}"))?;
        to_0rgb(pixels, &mut out, false);
        out.present().map_err(|e| anyhow!("softbuffer present: {e}"))?;
        self.put_time = started.elapsed();
        self.turns.show(buffer);
        self.still = None;
        Ok(())
    }

    /// Frames consumed from now on stay out of the window (their producer
    /// failed: the run signals what it owed, and their pixels are whatever
    /// the slot held), until [`CpuOutput::thaw`].
    pub fn freeze(&mut self) {
        self.frozen = true;
    }

    /// Moves to `device`, made again after this one's was lost (its queue
    /// idle): the target and buffers go; [`CpuOutput::recreate`] makes them
    /// on `device`. The window keeps what it shows.
    pub fn move_to(&mut self, device: Arc<Device>) {
        self.target = None;
        self.buffers.clear();
        self.turns.forget();
        self.device = device;
    }

    /// A new session: its frames go in the window, no notice; the last
    /// one's frames that were recorded and never consumed hold no buffer.
    pub fn thaw(&mut self) {
        (self.frozen, self.still) = (false, None);
        self.turns.forget_pending();
    }

    /// Writes `lines` ([`super::notice::write`]) over the frame the window
    /// shows (none yet: black) and puts it in the window; again after the
    /// window changed size, over that frame scaled to it. Nothing of the
    /// GPU's: the frame is in its host-visible buffer, which nothing records
    /// into while it is shown.
    pub fn notice(&mut self, lines: &[String]) -> Result<()> {
        let size = Area::of(self.extent());
        if self.still.is_none() {
            let shown = self.turns.shown().map(|b| self.buffers[b].mapped()).transpose()?;
            self.still = Some(Still::new(shown, size, false));
        }
        let mut out = self.surface.buffer_mut().map_err(|e| anyhow!("softbuffer: {e}"))?;
        if let Some(still) = &self.still {
            still.noticed(&mut out, size, lines);
        }
        out.present().map_err(|e| anyhow!("softbuffer present: {e}"))
    }
}
