//! The CPU-present path: for windows the Vulkan device cannot present to
//! (NVIDIA under Xvfb, VNC or X forwarding). The compute draw writes a
//! window-sized buffer on the GPU (no graphics pipeline: it still finishes
//! after a CUDA fault on the GPU); each frame is copied into a host-visible
//! buffer of its slot, and once the frame is consumed, softbuffer puts it in
//! the window. Everything before the draw is the same as for a swapchain.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;
use winit::window::Window;

use super::compute_draw::{ComputeDraw, ComputeTarget};
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
    /// Per slot: the frame whose pixels its buffer will hold once consumed.
    pending: Vec<Option<u64>>,
    surface: softbuffer::Surface<Arc<Window>, Arc<Window>>,
    _context: softbuffer::Context<Arc<Window>>,
    /// How long the last frame took from its mapped buffer into the window.
    pub put_time: Duration,
}

impl CpuOutput {
    /// A softbuffer surface on `window`, with `slots` readback buffers (made by [`CpuOutput::recreate`]).
    pub fn new(device: Arc<Device>, window: Arc<Window>, slots: usize) -> Result<Self> {
        let context = softbuffer::Context::new(window.clone())
            .map_err(|e| anyhow!("softbuffer cannot use this display: {e}"))?;
        let surface = softbuffer::Surface::new(&context, window)
            .map_err(|e| anyhow!("softbuffer cannot draw into this window: {e}"))?;
        Ok(Self {
            device,
            target: None,
            buffers: Vec::new(),
            pending: vec![None; slots],
            surface,
            _context: context,
            put_time: Duration::ZERO,
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
        let slots = self.pending.len();
        let bytes = FrameDesc::new(extent).bytes();
        self.buffers = Buffer::frames(
            &self.device,
            "CPU-present readback",
            slots,
            bytes,
            usage,
            MemoryLocation::GpuToCpu,
        )?;
        self.pending.iter_mut().for_each(|p| *p = None);
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
        (slot, frame): (usize, u64),
        pass: &ComputeDraw,
        shown: Source<'_>,
    ) -> Result<()> {
        let target = self.target.as_ref().context("no target")?;
        pass.record(cmd, shown, target)?;
        copy_to_host(self.device.raw(), cmd, target.readable(), &self.buffers[slot], target.extent);
        self.pending[slot] = Some(frame);
        Ok(())
    }

    /// Frame `frame` in slot `slot` is consumed: put its pixels in the window.
    pub fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        if self.pending[slot] != Some(frame) {
            return Ok(());
        }
        self.pending[slot] = None;
        let started = Instant::now();
        let pixels = self.buffers[slot].mapped()?;
        let mut out = self.surface.buffer_mut().map_err(|e| anyhow!("softbuffer: {e}"))?;
        // softbuffer's pixels are 0RGB in a u32; ours are RGBA bytes.
        for (dst, px) in out.iter_mut().zip(pixels.chunks_exact(4)) {
            *dst = u32::from(px[0]) << 16 | u32::from(px[1]) << 8 | u32::from(px[2]);
        }
        out.present().map_err(|e| anyhow!("softbuffer present: {e}"))?;
        self.put_time = started.elapsed();
        Ok(())
    }
}
