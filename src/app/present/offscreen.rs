//! The headless consumer: copies the ready shared image into a device-local
//! target image; every K-th frame also copies the target into a host-visible
//! readback buffer, whose bytes go to the PNG pool once the frame is consumed.

use std::sync::Arc;

use anyhow::Result;
use ash::vk;

use super::readback::Readback;
use crate::app::consumer::Consume;
use crate::app::sink::SinkReport;
use crate::vk::device::Device;
use crate::vk::frame::{copy_layers, image_barrier};
use crate::vk::memory::Image;
use crate::vk::shared_image::SharedImage;
use crate::vk::SHARED_FORMAT;

/// The offscreen target and, when dumping, the readback.
pub struct Offscreen {
    device: Arc<Device>,
    extent: vk::Extent2D,
    target: Image,
    dump_every: u64,
    copies: u32,
    readback: Option<Readback>,
}

const COPY_RW: (vk::PipelineStageFlags2, vk::AccessFlags2) = (
    vk::PipelineStageFlags2::COPY,
    vk::AccessFlags2::from_raw(
        vk::AccessFlags2::TRANSFER_READ.as_raw() | vk::AccessFlags2::TRANSFER_WRITE.as_raw(),
    ),
);
const COPY_W: (vk::PipelineStageFlags2, vk::AccessFlags2) =
    (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE);
const COPY_R: (vk::PipelineStageFlags2, vk::AccessFlags2) =
    (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);

impl Offscreen {
    /// A target of `extent` that each frame is copied into `copies` times;
    /// `readback` (every `dump_every`-th frame) when dumping.
    pub fn new(
        device: Arc<Device>,
        extent: vk::Extent2D,
        (dump_every, copies): (u64, u32),
        readback: Option<Readback>,
    ) -> Result<Self> {
        let usage = vk::ImageUsageFlags::TRANSFER_DST | vk::ImageUsageFlags::TRANSFER_SRC;
        let target = Image::new(device.clone(), "offscreen target", SHARED_FORMAT, extent, usage)?;
        device.run_once("preparing the offscreen target", |cmd| {
            let b =
                [image_barrier(target.raw, (vk::PipelineStageFlags2::NONE, vk::AccessFlags2::NONE), COPY_W)
                    .old_layout(vk::ImageLayout::UNDEFINED)];
            // SAFETY: recording; the image is live and unused.
            unsafe {
                device
                    .raw
                    .cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&b))
            };
        })?;
        Ok(Self { device, extent, target, dump_every, copies: copies.max(1), readback })
    }

    /// Stops the PNG pool (after the last frame was consumed) and returns its report.
    pub fn finish(&mut self) -> SinkReport {
        self.readback.as_mut().map(Readback::finish).unwrap_or_default()
    }
}

impl Consume for Offscreen {
    fn image_use(&self) -> (vk::PipelineStageFlags2, vk::AccessFlags2) {
        COPY_R
    }

    fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, image: &SharedImage) -> Result<()> {
        let dev = &self.device.raw;
        let extent = vk::Extent3D { width: self.extent.width, height: self.extent.height, depth: 1 };
        // The previous frame's copies into and out of the target must finish first.
        let b = [image_barrier(self.target.raw, COPY_RW, COPY_W)];
        let region = [vk::ImageCopy::default()
            .src_subresource(copy_layers())
            .dst_subresource(copy_layers())
            .extent(extent)];
        for _ in 0..self.copies {
            // SAFETY: recording; both images are live, in GENERAL, and the same size and format.
            unsafe {
                dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&b));
                dev.cmd_copy_image(
                    cmd,
                    image.image,
                    vk::ImageLayout::GENERAL,
                    self.target.raw,
                    vk::ImageLayout::GENERAL,
                    &region,
                );
            }
        }
        if let Some(readback) = self.readback.as_mut().filter(|_| frame % self.dump_every == 0) {
            let b = [image_barrier(self.target.raw, COPY_W, COPY_R)];
            // SAFETY: recording; the target is live.
            unsafe {
                dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&b))
            };
            readback.record(cmd, slot, frame, self.target.raw);
        }
        Ok(())
    }

    fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        self.readback.as_mut().map_or(Ok(()), |r| r.completed(slot, frame))
    }

    fn standalone(&self) -> bool {
        true
    }
}
