//! The windowed consumer: the draw pass ([`super::draw`]) into an acquired
//! swapchain image ([`super::swapchain`]), then the present; the timelines
//! are as in every mode (`app::consumer`).

use std::sync::Arc;

use anyhow::Result;
use ash::vk;

use super::draw::DrawPass;
use super::readback::Readback;
use super::swapchain::{Swapchain, SwapchainState};
use crate::app::consumer::Consume;
use crate::types::PresentMode;
use crate::vk::device::Device;
use crate::vk::frame::COLOR;
use crate::vk::shared_image::SharedImage;

/// The swapchain, the draw pass, and the snapshot ("S") readback.
pub struct Presenter {
    device: Arc<Device>,
    // Field order is drop order: the pass before the swapchain (and its surface).
    draw: DrawPass,
    swapchain: Swapchain,
    /// When set, the next frame is also read back and written as PNG.
    pub snapshot: Option<Readback>,
    snapshot_next: bool,
}

impl Presenter {
    /// Creates the pipeline; the swapchain follows with [`Presenter::recreate`].
    pub fn new(
        device: Arc<Device>,
        surface_fn: ash::khr::surface::Instance,
        surface: vk::SurfaceKHR,
        slots: usize,
        mode: PresentMode,
    ) -> Result<Self> {
        let swapchain = Swapchain::new(device.clone(), surface_fn, surface, slots, mode)?;
        let draw = DrawPass::new(device.clone(), swapchain.format)?;
        Ok(Self { device, draw, swapchain, snapshot: None, snapshot_next: false })
    }

    /// Points the draw pass at `images` (after the interop is (re)built).
    pub fn bind_shared(&mut self, images: &[SharedImage]) -> Result<()> {
        self.draw.bind_shared(images)
    }

    /// The window's drawable size now; zero when minimized.
    pub fn surface_extent(&self, window: vk::Extent2D) -> Result<vk::Extent2D> {
        self.swapchain.surface_extent(window)
    }

    /// (Re)creates the swapchain; see [`Swapchain::recreate`].
    pub fn recreate(&mut self, window: vk::Extent2D) -> Result<()> {
        self.swapchain.recreate(window)
    }

    /// Acquires the next swapchain image; see [`Swapchain::acquire`].
    pub fn acquire(&mut self, slot: usize) -> Result<(SwapchainState, vk::Semaphore)> {
        self.swapchain.acquire(slot)
    }

    /// The semaphore the current frame's submission signals for the present.
    pub fn present_semaphore(&self) -> Result<vk::Semaphore> {
        self.swapchain.present_semaphore()
    }

    /// Presents the current image once the frame's submission is done.
    pub fn present(&mut self) -> Result<SwapchainState> {
        self.swapchain.present()
    }

    /// Asks for the next frame to be read back and written as PNG.
    pub fn request_snapshot(&mut self) {
        self.snapshot_next = self.snapshot.is_some();
    }

    /// Switches to the next supported present mode; see [`Swapchain::cycle_mode`].
    pub fn cycle_mode(&mut self) -> &'static str {
        self.swapchain.cycle_mode()
    }

    /// The present mode in use.
    pub fn mode(&self) -> &'static str {
        self.swapchain.mode()
    }

    /// The swapchain's size.
    pub fn extent(&self) -> vk::Extent2D {
        self.swapchain.extent()
    }
}

impl Consume for Presenter {
    fn image_use(&self) -> (vk::PipelineStageFlags2, vk::AccessFlags2) {
        // Sampled by the draw pass; copied when a snapshot is taken.
        (
            vk::PipelineStageFlags2::FRAGMENT_SHADER | vk::PipelineStageFlags2::COPY,
            vk::AccessFlags2::SHADER_SAMPLED_READ | vk::AccessFlags2::TRANSFER_READ,
        )
    }

    fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, image: &SharedImage) -> Result<()> {
        let (target, view) = self.swapchain.target()?;
        let color_out = vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT;
        // The acquire semaphore is waited on at COLOR_ATTACHMENT_OUTPUT: chain the layout change to it.
        let to_color = [vk::ImageMemoryBarrier2::default()
            .src_stage_mask(color_out)
            .dst_stage_mask(color_out)
            .dst_access_mask(vk::AccessFlags2::COLOR_ATTACHMENT_WRITE)
            .old_layout(vk::ImageLayout::UNDEFINED)
            .new_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .image(target)
            .subresource_range(COLOR)];
        let to_present = [vk::ImageMemoryBarrier2::default()
            .src_stage_mask(color_out)
            .src_access_mask(vk::AccessFlags2::COLOR_ATTACHMENT_WRITE)
            .old_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .new_layout(vk::ImageLayout::PRESENT_SRC_KHR)
            .image(target)
            .subresource_range(COLOR)];
        let dev = &self.device.raw;
        // SAFETY: recording; the swapchain image was acquired.
        unsafe {
            dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&to_color))
        };
        self.draw.record(cmd, image, view, self.swapchain.extent())?;
        // SAFETY: as above.
        unsafe {
            dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&to_present))
        };
        if std::mem::take(&mut self.snapshot_next) {
            if let Some(r) = self.snapshot.as_mut() {
                r.record(cmd, slot, frame, image.image);
            }
        }
        Ok(())
    }

    fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        self.snapshot.as_mut().map_or(Ok(()), |r| r.completed(slot, frame))
    }
}

impl Drop for Presenter {
    fn drop(&mut self) {
        // SAFETY: nothing else submits now; the parts destroy their objects after this.
        let _ = unsafe { self.device.raw.queue_wait_idle(self.device.queue) };
    }
}
