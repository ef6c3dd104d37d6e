//! Copies chosen frames into host-visible buffers (one per frame slot) and,
//! once a frame is consumed, hands its pixels to the PNG pool together with
//! what the frame showed. Used by the headless dump and the viewer's "S".

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::app::director::Director;
use crate::app::sink::{FrameJob, PngSink, SinkReport, STAGE_SAMPLES};
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
    /// Per frame, the host's copy out of the mapped buffer (on the consumer's thread).
    copies: Vec<Duration>,
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
        if let Some(b) = buffers.first() {
            let props = b.memory_properties();
            if !props.contains(vk::MemoryPropertyFlags::HOST_CACHED) {
                // Reads from uncached memory are several times slower: say so.
                log::warn!("readback memory is not host-cached ({props:?}): dumping frames is slower");
            }
        }
        let pending = vec![None; slots];
        Ok(Self {
            device,
            director,
            extent,
            buffers,
            pending,
            sink: Some(sink),
            drawn: false,
            copies: Vec::new(),
        })
    }

    /// The readback memory's properties (reported in the summary).
    pub fn memory_properties(&self) -> vk::MemoryPropertyFlags {
        self.buffers.first().map_or(vk::MemoryPropertyFlags::empty(), Buffer::memory_properties)
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
        let started = Instant::now();
        // The one host copy: the buffer is reused by the slot's next frame while a
        // worker encodes this one.
        let pixels = self.buffers[slot].mapped()?.to_vec();
        if self.copies.len() < STAGE_SAMPLES {
            self.copies.push(started.elapsed());
        }
        let target = self.drawn.then_some((self.extent.width, self.extent.height));
        sink.send(FrameJob { frame, tick: spec.tick, scene: spec.scene, pixels, target })
    }

    /// Writes what is queued and reports (call once every frame is consumed).
    pub fn finish(&mut self) -> SinkReport {
        let mut report = self.sink.take().map(PngSink::finish).unwrap_or_default();
        report.stages.readback = std::mem::take(&mut self.copies);
        report.readback_memory = format!("{:?}", self.memory_properties());
        report
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
