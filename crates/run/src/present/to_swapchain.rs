//! The swapchain path without a graphics pipeline: the compute draw
//! ([`super::compute_draw`]) writes the frame in the swapchain's byte order
//! into one of slots + 1 device-local targets taken in turn ([`Turns`]), and
//! a copy puts it in the acquired image. Graphics pipelines stop finishing on
//! NVIDIA after a CUDA fault; copies and compute go on. The target of the
//! frame the window shows is not written until another is shown, so after a
//! fault the last good frame is still there: read back once, it carries the
//! notice ([`Still`]), which is copied into every image presented until the
//! next session's frames go in.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use super::compute_draw::{ComputeDraw, ComputeTarget};
use super::held::{from_0rgb, Still, Turns};
use super::notice::Area;
use super::readback::{copy_to_host, Pixels};
use super::swapchain::{Swapchain, SwapchainState};
use crate::frames::consumer::Source;
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::{record_image_barrier, COLOR};
use vkcuda::vk::memory::Buffer;

/// The swapchain, the draw's targets, and the notice over the last frame.
pub struct SwapchainOutput {
    device: Arc<Device>,
    /// Acquire, present, the surface, its format and present modes.
    pub swapchain: Box<Swapchain>,
    targets: Vec<ComputeTarget>,
    turns: Turns,
    /// The frame under a notice, once one is shown.
    still: Option<Still>,
    /// The notice over the still in the swapchain's bytes, copied into the images presented while frozen.
    noticed: Option<Buffer>,
    /// Consumed frames are not drawn (their producer failed): the images get the last good frame.
    frozen: bool,
}

impl SwapchainOutput {
    /// The path into `swapchain` with `slots` frame slots; the targets follow
    /// with [`SwapchainOutput::recreate`].
    pub fn new(device: Arc<Device>, swapchain: Swapchain, slots: usize) -> Self {
        let swapchain = Box::new(swapchain);
        let turns = Turns::new(slots);
        Self { device, swapchain, targets: Vec::new(), turns, still: None, noticed: None, frozen: false }
    }

    /// Whether the swapchain's bytes are BGRA (else RGBA).
    fn bgra(&self) -> bool {
        self.swapchain.format == vk::Format::B8G8R8A8_UNORM
    }

    /// The swapchain and the targets (of `pass`) for a window of `window` pixels (queue idle).
    pub fn recreate(&mut self, pass: &ComputeDraw, window: vk::Extent2D) -> Result<()> {
        self.targets.clear();
        self.turns.forget();
        self.noticed = None;
        self.swapchain.recreate(window)?;
        let pixels = if self.bgra() { Pixels::Bgra8 } else { Pixels::Rgba8 };
        let extent = self.swapchain.extent();
        for _ in 0..self.turns.buffers() {
            self.targets.push(ComputeTarget::new(pass, "swapchain draw target", extent, pixels)?);
        }
        Ok(())
    }

    /// Moves to `device`, made again after this one's was lost (its queue
    /// idle); [`SwapchainOutput::recreate`] makes the swapchain and targets.
    pub fn move_to(&mut self, device: Arc<Device>) -> Result<()> {
        self.targets.clear();
        self.turns.forget();
        self.noticed = None;
        self.swapchain.move_to(device.clone())?;
        self.device = device;
        Ok(())
    }

    /// Records frame `frame` in slot `slot` into the acquired image: drawn
    /// into a free target and copied in; while frozen, the notice or the
    /// last good frame copied in instead.
    pub fn record(
        &mut self,
        cmd: vk::CommandBuffer,
        slot: usize,
        frame: u64,
        pass: &ComputeDraw,
        source: Source<'_>,
    ) -> Result<()> {
        let image = self.swapchain.target()?;
        let from = if self.frozen {
            self.held()
        } else {
            let b = self.turns.take(slot, frame)?;
            let target = self.targets.get(b).context("no draw target")?;
            pass.record(cmd, source, target)?;
            Some(target.raw().buffer)
        };
        copy_into(&self.device, cmd, from, image, self.swapchain.extent());
        Ok(())
    }

    /// What a frozen window's images get: the notice, else the last good frame (else black).
    fn held(&self) -> Option<vk::Buffer> {
        let shown = self.turns.shown().and_then(|b| self.targets.get(b)).map(|t| t.raw().buffer);
        self.noticed.as_ref().map(Buffer::raw).or(shown)
    }

    /// Frame `frame` in slot `slot` is consumed: unless frozen, its target
    /// holds the frame shown, and a notice is gone.
    pub fn completed(&mut self, slot: usize, frame: u64) {
        if let Some(b) = self.turns.done(slot, frame) {
            if !self.frozen {
                self.turns.show(b);
                (self.still, self.noticed) = (None, None);
            }
        }
    }

    /// Frames consumed from now on are not drawn, until [`SwapchainOutput::thaw`].
    pub fn freeze(&mut self) {
        self.frozen = true;
    }

    /// A new session: its frames are drawn, no notice.
    pub fn thaw(&mut self) {
        (self.frozen, self.still, self.noticed) = (false, None, None);
        self.turns.forget_pending();
    }

    /// Writes `lines` over the frame the window shows (read back from its
    /// target once; black if none) and presents it; again after the window
    /// changed size, over that frame scaled to it. Frames recorded while
    /// frozen show it too. Waits on the host (bounded): a notice is rare.
    pub fn notice(&mut self, lines: &[String]) -> Result<()> {
        let extent = self.swapchain.extent();
        let size = Area::of(extent);
        let bytes = 4 * size.pixels() as u64;
        if self.still.is_none() {
            self.still = Some(self.read_still(size)?);
        }
        let mut words = vec![0; size.pixels()];
        if let Some(still) = &self.still {
            still.noticed(&mut words, size, lines);
        }
        let usage = vk::BufferUsageFlags::TRANSFER_SRC;
        let mut noticed = Buffer::new(self.device.clone(), "notice", bytes, usage, MemoryLocation::CpuToGpu)?;
        from_0rgb(&words, noticed.mapped_mut()?, self.bgra());
        self.noticed = Some(noticed);
        let Some(image) = self.swapchain.acquire_now()? else { return Ok(()) };
        let from = self.noticed.as_ref().map(Buffer::raw);
        self.device.run_once("copying the notice into the window", |cmd| {
            copy_into(&self.device, cmd, from, image, extent)
        })?;
        if self.swapchain.present_now()? == SwapchainState::Stale {
            log::debug!("the window changed size as the notice went in; it is written again once fitted");
        }
        Ok(())
    }

    /// The frame the window shows, from its target, on the host.
    fn read_still(&self, size: Area) -> Result<Still> {
        let Some(target) = self.turns.shown().and_then(|b| self.targets.get(b)) else {
            return Ok(Still::new(None, size, self.bgra()));
        };
        if Area::of(target.extent) != size {
            bail!("the shown frame's target is not the swapchain's size");
        }
        let bytes = target.raw().bytes;
        let usage = vk::BufferUsageFlags::TRANSFER_DST;
        let host = Buffer::new(self.device.clone(), "notice still", bytes, usage, MemoryLocation::GpuToCpu)?;
        let (dev, extent) = (self.device.raw(), target.extent);
        self.device.run_once("reading the window's last frame back", |cmd| {
            copy_to_host(dev, cmd, target.readable(), &host, extent)
        })?;
        Ok(Still::new(Some(host.mapped()?), size, self.bgra()))
    }
}

/// Copies `from` (packed rows of the image's size and byte order; `None`:
/// black) into the acquired swapchain image `image`, and makes it ready to
/// present. The frame's submission waits for the acquire at `COPY`, which
/// the first layout change chains to.
fn copy_into(
    device: &Device,
    cmd: vk::CommandBuffer,
    from: Option<vk::Buffer>,
    image: vk::Image,
    extent: vk::Extent2D,
) {
    let copy = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE);
    let to_dst = vk::ImageMemoryBarrier2::default()
        .src_stage_mask(copy.0)
        .dst_stage_mask(copy.0)
        .dst_access_mask(copy.1)
        .old_layout(vk::ImageLayout::UNDEFINED)
        .new_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
        .image(image)
        .subresource_range(COLOR);
    let to_present = vk::ImageMemoryBarrier2::default()
        .src_stage_mask(copy.0)
        .src_access_mask(copy.1)
        .old_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
        .new_layout(vk::ImageLayout::PRESENT_SRC_KHR)
        .image(image)
        .subresource_range(COLOR);
    let dev = device.raw();
    let dst = vk::ImageLayout::TRANSFER_DST_OPTIMAL;
    record_image_barrier(dev, cmd, to_dst);
    match from {
        Some(buffer) => {
            let layers =
                vk::ImageSubresourceLayers::default().aspect_mask(vk::ImageAspectFlags::COLOR).layer_count(1);
            let region = [vk::BufferImageCopy::default()
                .image_subresource(layers)
                .image_extent(vk::Extent3D { width: extent.width, height: extent.height, depth: 1 })];
            // SAFETY: recording; `buffer` holds packed rows of the image's size (made for it) and
            // its last write was made visible to copies when it was recorded.
            unsafe { dev.cmd_copy_buffer_to_image(cmd, buffer, image, dst, &region) };
        }
        None => {
            let black = vk::ClearColorValue { float32: [0.0, 0.0, 0.0, 1.0] };
            // SAFETY: recording; the image is in the layout named.
            unsafe { dev.cmd_clear_color_image(cmd, image, dst, &black, &[COLOR]) };
        }
    }
    record_image_barrier(dev, cmd, to_present);
}
