//! Copies chosen frames into host-visible buffers (one per frame slot) and,
//! once a frame is consumed, hands its pixels to the PNG pool together with
//! what the frame showed. Used by the headless dump and the viewer's "S".

use std::sync::Arc;

use anyhow::{anyhow, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::app::director::Director;
use crate::app::sink::{FrameJob, PngSink, SinkReport};
use crate::vk::device::Device;
use crate::vk::frame::{buffer_barrier, copy_layers};
use crate::vk::memory::Buffer;

/// Readback buffers, the frames they hold, and the PNG pool.
pub struct Readback {
    device: Arc<Device>,
    director: Arc<Director>,
    extent: vk::Extent2D,
    buffers: Vec<Buffer>,
    /// Per slot: the frame whose pixels its buffer will hold once consumed.
    pending: Vec<Option<u64>>,
    sink: Option<PngSink>,
    /// Whether the frames read back were drawn by the draw pass (see [`FrameJob::target`]).
    pub drawn: bool,
}

impl Readback {
    /// One `extent`-sized buffer per frame slot.
    pub fn new(
        device: Arc<Device>,
        director: Arc<Director>,
        extent: vk::Extent2D,
        slots: usize,
        sink: PngSink,
    ) -> Result<Self> {
        let usage = vk::BufferUsageFlags::TRANSFER_DST;
        let buffers = Buffer::frames(&device, "readback", slots, extent, usage, MemoryLocation::GpuToCpu)?;
        let pending = vec![None; slots];
        Ok(Self { device, director, extent, buffers, pending, sink: Some(sink), drawn: false })
    }

    /// Records a copy of `image` (in `GENERAL`, readable by transfers) into
    /// slot `slot`'s buffer, made visible to the host.
    pub fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, image: vk::Image) {
        copy_to_host(&self.device.raw, cmd, image, &self.buffers[slot], self.extent);
        self.pending[slot] = Some(frame);
    }

    /// Frame `frame` in slot `slot` is consumed: send its pixels if it was read back.
    pub fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        if self.pending[slot] != Some(frame) {
            return Ok(());
        }
        self.pending[slot] = None;
        let spec =
            self.director.spec(frame).ok_or_else(|| anyhow!("frame {frame} is no longer remembered"))?;
        let sink = self.sink.as_ref().ok_or_else(|| anyhow!("the PNG writer has finished"))?;
        let pixels = self.buffers[slot].mapped()?.to_vec();
        let target = self.drawn.then_some((self.extent.width, self.extent.height));
        sink.send(FrameJob { frame, tick: spec.tick, scene: spec.scene, pixels, target })
    }

    /// Writes what is queued and reports (call once every frame is consumed).
    pub fn finish(&mut self) -> SinkReport {
        self.sink.take().map(PngSink::finish).unwrap_or_default()
    }
}

/// Records a copy of the whole `extent`-sized `image` (in `GENERAL`) into
/// `buffer`, made visible to the host once the submission completes.
pub fn copy_to_host(
    dev: &ash::Device,
    cmd: vk::CommandBuffer,
    image: vk::Image,
    buffer: &Buffer,
    extent: vk::Extent2D,
) {
    let extent = vk::Extent3D { width: extent.width, height: extent.height, depth: 1 };
    let region = [vk::BufferImageCopy::default().image_subresource(copy_layers()).image_extent(extent)];
    let to_host = [buffer_barrier(
        buffer.raw,
        (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE),
        (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
    )];
    // SAFETY: recording; the buffer holds width × height × 4 bytes, and the host reads it only
    // once the frame is consumed.
    unsafe {
        dev.cmd_copy_image_to_buffer(cmd, image, vk::ImageLayout::GENERAL, buffer.raw, &region);
        dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().buffer_memory_barriers(&to_host));
    }
}
