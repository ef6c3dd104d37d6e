//! The CPU-present path: for windows the Vulkan device cannot present to
//! (NVIDIA under Xvfb, VNC or X forwarding). The draw pass renders into a
//! window-sized image on the GPU; each frame is copied into a host-visible
//! buffer of its slot, and once the frame is consumed, softbuffer puts it in
//! the window. Everything before the draw pass is the same as for a swapchain.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;
use winit::window::Window;

use super::draw::DrawPass;
use super::readback::copy_to_host;
use crate::vk::device::Device;
use crate::vk::frame::{image_barrier, COLOR};
use crate::vk::memory::{Buffer, Image};
use crate::vk::shared_image::SharedImage;
use crate::vk::SHARED_FORMAT;

const COLOR_W: (vk::PipelineStageFlags2, vk::AccessFlags2) =
    (vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT, vk::AccessFlags2::COLOR_ATTACHMENT_WRITE);
const COPY_R: (vk::PipelineStageFlags2, vk::AccessFlags2) =
    (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);

/// The window-sized target, one readback buffer per frame slot, and the window's softbuffer surface.
pub struct CpuOutput {
    device: Arc<Device>,
    // Field order is drop order: the Vulkan objects (Drop destroys the view) before the window.
    target: Option<(Image, vk::ImageView)>,
    buffers: Vec<Buffer>,
    /// Per slot: the frame whose pixels its buffer will hold once consumed.
    pending: Vec<Option<u64>>,
    extent: vk::Extent2D,
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
            extent: vk::Extent2D::default(),
            surface,
            _context: context,
            put_time: Duration::ZERO,
        })
    }

    /// The target and buffers for a window of `extent` pixels (queue idle).
    pub fn recreate(&mut self, extent: vk::Extent2D) -> Result<()> {
        let (Some(w), Some(h)) = (NonZeroU32::new(extent.width), NonZeroU32::new(extent.height)) else {
            anyhow::bail!("cannot draw into a minimized window");
        };
        self.destroy_target();
        let usage = vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC;
        let image = Image::new(self.device.clone(), "CPU-present target", SHARED_FORMAT, extent, usage)?;
        let info = vk::ImageViewCreateInfo::default()
            .image(image.raw)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(SHARED_FORMAT)
            .subresource_range(COLOR);
        // SAFETY: a live image; destroyed in destroy_target.
        let view = unsafe { self.device.raw.create_image_view(&info, None) }?;
        self.target = Some((image, view));
        let usage = vk::BufferUsageFlags::TRANSFER_DST;
        let slots = self.pending.len();
        self.buffers = Buffer::frames(
            &self.device,
            "CPU-present readback",
            slots,
            extent,
            usage,
            MemoryLocation::GpuToCpu,
        )?;
        self.pending.iter_mut().for_each(|p| *p = None);
        self.surface.resize(w, h).map_err(|e| anyhow!("softbuffer resize: {e}"))?;
        self.extent = extent;
        Ok(())
    }

    /// The target's size.
    pub fn extent(&self) -> vk::Extent2D {
        self.extent
    }

    /// Records frame `frame` in slot `slot`: the draw pass into the target,
    /// then the target into the slot's buffer, visible to the host.
    pub fn record(
        &mut self,
        cmd: vk::CommandBuffer,
        (slot, frame): (usize, u64),
        pass: &DrawPass,
        image: &SharedImage,
    ) -> Result<()> {
        let (target, view) = self.target.as_ref().map(|(i, v)| (i.raw, *v)).context("no target")?;
        let dev = &self.device.raw;
        let barrier = |b: vk::ImageMemoryBarrier2<'_>| {
            let b = [b];
            // SAFETY: recording; the target is live.
            unsafe {
                dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&b))
            };
        };
        // The previous frame's draw and copy out of the target come first; its contents may go.
        let last = (COLOR_W.0 | COPY_R.0, COLOR_W.1 | COPY_R.1);
        barrier(
            image_barrier(target, last, COLOR_W)
                .old_layout(vk::ImageLayout::UNDEFINED)
                .new_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL),
        );
        pass.record(cmd, image, view, self.extent)?;
        barrier(image_barrier(target, COLOR_W, COPY_R).old_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL));
        copy_to_host(dev, cmd, target, &self.buffers[slot], self.extent);
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

    fn destroy_target(&mut self) {
        if let Some((_, view)) = self.target.take() {
            // SAFETY: the queue is idle (the caller drained it); the view is ours.
            unsafe { self.device.raw.destroy_image_view(view, None) };
        }
    }
}

impl Drop for CpuOutput {
    fn drop(&mut self) {
        self.destroy_target();
    }
}
