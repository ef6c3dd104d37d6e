//! The headless consumer: copies the ready shared image into a device-local
//! target image (`--consume copy`), or draws it there with the viewer's draw
//! pass, letterboxed into a target of another size (`--consume draw`, on a
//! graphics queue: the viewer's GPU work without a window). Every K-th frame
//! also copies the target into a host-visible readback buffer, whose bytes go
//! to the PNG pool once the frame is consumed.

use std::sync::Arc;

use anyhow::{bail, Result};
use ash::vk;

use super::draw::{DrawPass, DrawTarget, DISPLAY_FORMAT};
use super::readback::Readback;
use crate::consumer::{Consume, Source};
use crate::kinds::ConsumeKind;
use crate::sink::SinkReport;
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::{copy_layers, image_barrier, record_image_barrier};
use vkcuda::vk::memory::Image;
use vkcuda::vk::shared_image::SharedImage;
use vkcuda::FrameDesc;

/// What the consumer does with each frame, and its target.
enum Mode {
    /// `copies` full-image copies into `target`.
    Copy { copies: u32, target: Image },
    /// The draw pass into `target`.
    Draw { pass: Box<DrawPass>, target: DrawTarget },
}

/// The offscreen target and, when dumping, the readback.
pub struct Offscreen {
    device: Arc<Device>,
    extent: vk::Extent2D,
    mode: Mode,
    dump_every: u64,
    readback: Option<Readback>,
    /// The last frame read back (a hand-over that consumes a frame twice dumps it once).
    last_dump: Option<u64>,
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
    /// A target of `extent` that each frame of `frame` is copied into
    /// `copies` times (`extent` is then the frame's size, and the target has
    /// its format), or drawn into; `readback` (every `dump_every`-th frame)
    /// when dumping.
    pub fn new(
        device: Arc<Device>,
        (frame, extent): (FrameDesc, vk::Extent2D),
        (kind, dump_every, copies): (ConsumeKind, u64, u32),
        readback: Option<Readback>,
    ) -> Result<Self> {
        let mode = match kind {
            ConsumeKind::Copy => {
                let usage = vk::ImageUsageFlags::TRANSFER_DST | vk::ImageUsageFlags::TRANSFER_SRC;
                let format = frame.format.vk();
                let target = Image::new(device.clone(), "offscreen target", format, extent, usage)?;
                device.run_once("preparing the offscreen target", |cmd| {
                    let none = (vk::PipelineStageFlags2::NONE, vk::AccessFlags2::NONE);
                    let b = image_barrier(target.raw, none, COPY_W).old_layout(vk::ImageLayout::UNDEFINED);
                    record_image_barrier(&device.raw, cmd, b);
                })?;
                Mode::Copy { copies: copies.max(1), target }
            }
            ConsumeKind::Draw => {
                let pass = Box::new(DrawPass::new(device.clone(), DISPLAY_FORMAT)?);
                let target = DrawTarget::new(device.clone(), "offscreen draw target", extent)?;
                Mode::Draw { pass, target }
            }
        };
        Ok(Self { device, extent, mode, dump_every, readback, last_dump: None })
    }

    /// Points the draw pass at a new session's shared images (nothing to do for copies).
    pub fn bind(&mut self, images: &[SharedImage]) -> Result<()> {
        match &mut self.mode {
            Mode::Copy { .. } => Ok(()),
            Mode::Draw { pass, .. } => pass.bind_shared(images),
        }
    }

    /// Stops the PNG pool (after the last frame was consumed) and returns its report.
    pub fn finish(&mut self) -> SinkReport {
        self.readback.as_mut().map(Readback::finish).unwrap_or_default()
    }

    fn record_copies(&self, cmd: vk::CommandBuffer, source: Source<'_>, (copies, target): (u32, &Image)) {
        let dev = &self.device.raw;
        let extent = vk::Extent3D { width: self.extent.width, height: self.extent.height, depth: 1 };
        // The previous frame's copies into and out of the target must finish first.
        let b = [image_barrier(target.raw, COPY_RW, COPY_W)];
        let region = [vk::ImageCopy::default()
            .src_subresource(copy_layers())
            .dst_subresource(copy_layers())
            .extent(extent)];
        let from_buffer =
            [vk::BufferImageCopy::default().image_subresource(copy_layers()).image_extent(extent)];
        let general = vk::ImageLayout::GENERAL;
        for _ in 0..copies {
            // SAFETY: recording; source and target are live, in GENERAL (images), and hold
            // frames of the same size and format.
            unsafe {
                dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&b));
                match source {
                    Source::Image(image) => {
                        dev.cmd_copy_image(cmd, image.image, general, target.raw, general, &region)
                    }
                    Source::Buffer(buffer) => {
                        dev.cmd_copy_buffer_to_image(cmd, buffer.buffer, target.raw, general, &from_buffer)
                    }
                }
            }
        }
    }
}

impl Consume for Offscreen {
    fn image_use(&self) -> (vk::PipelineStageFlags2, vk::AccessFlags2) {
        match self.mode {
            Mode::Copy { .. } => COPY_R,
            Mode::Draw { .. } => {
                (vk::PipelineStageFlags2::FRAGMENT_SHADER, vk::AccessFlags2::SHADER_SAMPLED_READ)
            }
        }
    }

    fn takes_buffers(&self) -> bool {
        matches!(self.mode, Mode::Copy { .. })
    }

    fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, source: Source<'_>) -> Result<()> {
        // Every dump_every-th frame of the whole run (a shard's frames are numbered from its first).
        let global = self.readback.as_ref().map_or(frame, |r| r.first_frame() + frame);
        let dump = self.readback.is_some() && global % self.dump_every == 0 && self.last_dump != Some(frame);
        if dump {
            self.last_dump = Some(frame);
        }
        let target = match &self.mode {
            Mode::Copy { copies, target } => {
                self.record_copies(cmd, source, (*copies, target));
                if dump {
                    record_image_barrier(&self.device.raw, cmd, image_barrier(target.raw, COPY_W, COPY_R));
                }
                target.raw
            }
            Mode::Draw { pass, target } => {
                let Source::Image(image) = source else { bail!("the draw pass reads images only") };
                target.record(cmd, pass, image, dump)?;
                target.raw()
            }
        };
        if let Some(readback) = self.readback.as_mut().filter(|_| dump) {
            readback.record(cmd, slot, frame, target)?;
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
