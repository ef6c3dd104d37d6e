//! The headless consumer: copies the ready shared image into a device-local
//! target image; every K-th frame also copies the target into a host-visible
//! readback buffer, whose bytes go to the PNG pool once the frame is consumed.

use std::sync::Arc;

use anyhow::{anyhow, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::scene::Scene;
use crate::sink::{FrameJob, PngSink};
use crate::vk::device::Device;
use crate::vk::frame::{buffer_barrier, copy_layers, image_barrier, Consume};
use crate::vk::memory::{Buffer, Image};
use crate::vk::shared_image::SharedImage;
use crate::vk::SHARED_FORMAT;

/// The offscreen target, the readback buffers (one per frame slot) and the PNG pool.
pub struct Offscreen {
    device: Arc<Device>,
    scene: Scene,
    target: Image,
    readback: Vec<Buffer>,
    /// Per slot: the frame whose pixels its readback buffer will hold once consumed.
    pending: Vec<Option<u64>>,
    dump_every: u64,
    sink: Option<PngSink>,
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
    /// A target of the scene's size; readback buffers only when dumping.
    pub fn new(
        device: Arc<Device>,
        scene: Scene,
        slots: usize,
        dump_every: u64,
        sink: Option<PngSink>,
    ) -> Result<Self> {
        let extent = vk::Extent2D { width: scene.width, height: scene.height };
        let usage = vk::ImageUsageFlags::TRANSFER_DST | vk::ImageUsageFlags::TRANSFER_SRC;
        let target = Image::new(device.clone(), "offscreen target", SHARED_FORMAT, extent, usage)?;
        let bytes = u64::from(scene.width) * u64::from(scene.height) * 4;
        let readback = if dump_every > 0 {
            (0..slots)
                .map(|i| {
                    let name = format!("readback {i}");
                    Buffer::new(
                        device.clone(),
                        &name,
                        bytes,
                        vk::BufferUsageFlags::TRANSFER_DST,
                        MemoryLocation::GpuToCpu,
                    )
                })
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
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
        Ok(Self { device, scene, target, readback, pending: vec![None; slots], dump_every, sink })
    }

    /// Stops the PNG pool (after the last frame was consumed) and returns its report.
    pub fn finish(&mut self) -> Option<crate::sink::SinkReport> {
        self.sink.take().map(PngSink::finish)
    }
}

impl Consume for Offscreen {
    fn image_use(&self) -> (vk::PipelineStageFlags2, vk::AccessFlags2) {
        COPY_R
    }

    fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, image: &SharedImage) -> Result<()> {
        let dev = &self.device.raw;
        let extent = vk::Extent3D { width: self.scene.width, height: self.scene.height, depth: 1 };
        // The previous frame's copies into and out of the target must finish first.
        let b = [image_barrier(self.target.raw, COPY_RW, COPY_W)];
        let region = [vk::ImageCopy::default()
            .src_subresource(copy_layers())
            .dst_subresource(copy_layers())
            .extent(extent)];
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
        if self.dump_every > 0 && frame % self.dump_every == 0 {
            let buffer = &self.readback[slot];
            let b = [image_barrier(self.target.raw, COPY_W, COPY_R)];
            let region =
                [vk::BufferImageCopy::default().image_subresource(copy_layers()).image_extent(extent)];
            let to_host = [buffer_barrier(
                buffer.raw,
                COPY_W,
                (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
            )];
            // SAFETY: recording; the buffer holds width × height × 4 bytes and the host does not
            // read it until this frame is consumed.
            unsafe {
                dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&b));
                dev.cmd_copy_image_to_buffer(
                    cmd,
                    self.target.raw,
                    vk::ImageLayout::GENERAL,
                    buffer.raw,
                    &region,
                );
                dev.cmd_pipeline_barrier2(
                    cmd,
                    &vk::DependencyInfo::default().buffer_memory_barriers(&to_host),
                );
            }
            self.pending[slot] = Some(frame);
        }
        Ok(())
    }

    fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        if self.pending[slot] != Some(frame) {
            return Ok(());
        }
        self.pending[slot] = None;
        let sink = self.sink.as_ref().ok_or_else(|| anyhow!("dumping without a PNG writer"))?;
        let pixels = self.readback[slot].mapped()?.to_vec();
        sink.send(FrameJob { frame, tick: frame as u32, scene: self.scene, pixels })
    }
}
