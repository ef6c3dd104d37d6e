//! The headless consumer: copies the ready shared frame into a device-local
//! target of its layout (`--consume copy`: an image for the array layout, a
//! buffer for the buffer layout, copied by a compute shader where the queue
//! has compute), or draws it, letterboxed into a target of another size,
//! with the compute draw (`--consume draw`: the viewer's draw without a
//! window, as packed RGBA8 rows; no graphics pipeline, so it still finishes
//! on a GPU where a CUDA kernel faulted). Every K-th frame
//! also copies the target into a host-visible readback buffer, whose bytes go
//! to the PNG pool once the frame is consumed. A [`Watch`] may draw each
//! frame for watchers too (a browser view's clients).

use std::sync::Arc;

use anyhow::{bail, Result};
use ash::vk;

use super::compute_draw::{ComputeDraw, ComputeTarget};
use super::image::Image;
use super::readback::{Pixels, ReadStats, Readable, Readback};
use super::shader_copy::{ShaderCopy, SHADER_R, SHADER_W};
use super::watch::{HandOff, Watch};
use crate::base::kinds::ConsumeKind;
use crate::frames::consumer::{Consume, Frames, Source};
use vkcuda::interop::Use;
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::{buffer_barrier, copy_layers, image_barrier, record_image_barrier};
use vkcuda::vk::memory::Buffer;
use vkcuda::{FrameDesc, Layout};

/// Where `--consume copy` copies a frame: a frame of the shared frames' layout.
enum CopyTarget {
    /// An image in `GENERAL` (array layout).
    Image(Image),
    /// A buffer of one packed frame (buffer layout), and the shader that
    /// copies into it (`None`: `vkCmdCopyBuffer` does).
    Buffer(Buffer, Option<ShaderCopy>),
}

/// What the consumer does with each frame, and its target.
enum Mode {
    /// `copies` full copies of the frame into `target`.
    Copy { copies: u32, target: CopyTarget },
    /// The compute draw into `target` (packed RGBA8 rows).
    Draw { pass: Box<ComputeDraw>, target: ComputeTarget },
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
    /// Watchers' draws of each frame, after the consumer's own work.
    watch: Option<Watch>,
}

const COPY_RW: Use = (
    vk::PipelineStageFlags2::COPY,
    vk::AccessFlags2::from_raw(
        vk::AccessFlags2::TRANSFER_READ.as_raw() | vk::AccessFlags2::TRANSFER_WRITE.as_raw(),
    ),
);
const COPY_W: Use = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE);
const COPY_R: Use = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);

/// The frames an [`Offscreen`] consumer takes, and its target's size.
#[derive(Clone, Copy, Debug)]
pub struct OffscreenShape {
    /// The shared frames.
    pub frame: FrameDesc,
    /// The target's size (a copy's: the frame's).
    pub extent: vk::Extent2D,
}

/// What an [`Offscreen`] consumer does with each frame.
#[derive(Clone, Copy, Debug)]
pub struct OffscreenWork {
    /// Copy it, or draw it.
    pub kind: ConsumeKind,
    /// Read back every this many frames (0: none).
    pub dump_every: u64,
    /// Copies of each frame (`--consume-copies`).
    pub copies: u32,
}

impl Offscreen {
    /// A target of `shape.extent` that each frame of `shape.frame` is copied
    /// into `work.copies` times (the extent is then the frame's size, and
    /// the target has its format), or drawn into; `readback` (every
    /// `work.dump_every`-th frame) when dumping.
    pub fn new(
        device: Arc<Device>,
        shape: OffscreenShape,
        work: OffscreenWork,
        readback: Option<Readback>,
    ) -> Result<Self> {
        let (OffscreenShape { frame, extent }, OffscreenWork { kind, dump_every, copies }) = (shape, work);
        let mode = match kind {
            ConsumeKind::Copy => Mode::Copy { copies: copies.max(1), target: copy_target(&device, frame)? },
            ConsumeKind::Draw => {
                let pass = Box::new(ComputeDraw::new(device.clone())?);
                let target = ComputeTarget::new(&pass, "offscreen draw target", extent, Pixels::Rgba8)?;
                Mode::Draw { pass, target }
            }
        };
        Ok(Self { device, extent, mode, dump_every, readback, last_dump: None, watch: None })
    }

    /// Each frame is drawn for `watch`'s watchers too (from the next session's [`Offscreen::bind`] on).
    pub fn set_watch(&mut self, watch: Watch) {
        self.watch = Some(watch);
    }

    /// Points the draw pass or the shader copy at a new session's shared
    /// frames: once per session, before its first frame is recorded.
    pub fn bind(&mut self, frames: Frames<'_>) -> Result<()> {
        // Frame numbers restart with the session: what an ended one left (a stop after a
        // failure retires its last frames without this consumer) is not this session's.
        self.last_dump = None;
        if let Some(r) = &mut self.readback {
            r.forget_pending();
        }
        if let Some(watch) = &mut self.watch {
            watch.bind(frames)?;
        }
        match (&mut self.mode, frames) {
            (Mode::Copy { target: CopyTarget::Buffer(target, Some(copy)), .. }, Frames::Buffers(buffers)) => {
                copy.bind(buffers, target.raw())
            }
            (Mode::Copy { .. }, _) => Ok(()),
            (Mode::Draw { pass, .. }, frames) => pass.bind_shared(frames),
        }
    }

    /// The time spent handing frames to the watchers, if it has any.
    pub fn handoff(&self) -> Option<HandOff> {
        self.watch.as_ref().map(Watch::handoff)
    }

    /// Lets the readback's receiver go (after the last frame was consumed)
    /// and returns what the readback measured.
    pub fn finish(&mut self) -> ReadStats {
        if let Some(watch) = &mut self.watch {
            watch.finish();
        }
        self.readback.as_mut().map(Readback::finish).unwrap_or_default()
    }

    /// Records `copies` copies of the frame into `target`, the last one made
    /// visible to the readback when `dump`; returns what the readback reads.
    fn record_copies(
        &self,
        cmd: vk::CommandBuffer,
        source: Source<'_>,
        target: &CopyTarget,
        copies: u32,
        dump: bool,
    ) -> Result<Readable> {
        let dev = &self.device.raw();
        let extent = vk::Extent3D { width: self.extent.width, height: self.extent.height, depth: 1 };
        let region = [vk::ImageCopy::default()
            .src_subresource(copy_layers())
            .dst_subresource(copy_layers())
            .extent(extent)];
        let general = vk::ImageLayout::GENERAL;
        // The previous copy into or out of the target must finish first.
        let before = |dependency: &vk::DependencyInfo<'_>| {
            // SAFETY: recording.
            unsafe { dev.cmd_pipeline_barrier2(cmd, dependency) }
        };
        match (source, target) {
            (Source::Image(image), CopyTarget::Image(target)) => {
                let b = [image_barrier(target.raw, COPY_RW, COPY_W)];
                for _ in 0..copies {
                    before(&vk::DependencyInfo::default().image_memory_barriers(&b));
                    // SAFETY: recording; both images are live, in GENERAL, of one size and format.
                    unsafe { dev.cmd_copy_image(cmd, image.image(), general, target.raw, general, &region) };
                }
                if dump {
                    record_image_barrier(dev, cmd, image_barrier(target.raw, COPY_W, COPY_R));
                }
                Ok(Readable::Image(target.raw))
            }
            (Source::Buffer(buffer), CopyTarget::Buffer(target, shader)) => {
                // The last copy into the target, and the readback's copy out of it, come first.
                let (last, write) = match shader {
                    Some(_) => ((COPY_R.0 | SHADER_W.0, COPY_R.1 | SHADER_W.1), SHADER_W),
                    None => (COPY_RW, COPY_W),
                };
                let b = [buffer_barrier(target.raw(), last, write)];
                let whole = [vk::BufferCopy::default().size(buffer.size())];
                for _ in 0..copies {
                    before(&vk::DependencyInfo::default().buffer_memory_barriers(&b));
                    match shader {
                        Some(shader) => shader.record(cmd, buffer.buffer(), buffer.size())?,
                        // SAFETY: recording; both buffers are live and hold one packed frame.
                        None => unsafe { dev.cmd_copy_buffer(cmd, buffer.buffer(), target.raw(), &whole) },
                    }
                }
                if dump {
                    let b = [buffer_barrier(target.raw(), write, COPY_R)];
                    before(&vk::DependencyInfo::default().buffer_memory_barriers(&b));
                }
                Ok(Readable::Buffer(target.raw(), buffer.size()))
            }
            _ => bail!("the copy target's layout is not the shared frames'"),
        }
    }
}

impl Consume for Offscreen {
    fn image_use(&self) -> Use {
        let own = match &self.mode {
            Mode::Copy { target: CopyTarget::Buffer(_, Some(_)), .. } => SHADER_R,
            Mode::Copy { .. } => COPY_R,
            Mode::Draw { pass, .. } => pass.frame_use(),
        };
        // The watchers' draw reads the frame too: the acquire and release cover both.
        match self.watch.as_ref().map(Watch::frame_use) {
            Some((stage, access)) => (own.0 | stage, own.1 | access),
            None => own,
        }
    }

    fn takes_buffers(&self) -> bool {
        match &self.mode {
            Mode::Copy { .. } => true,
            Mode::Draw { pass, .. } => pass.reads_buffers(),
        }
    }

    fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, source: Source<'_>) -> Result<()> {
        // Every dump_every-th frame of the whole run (a shard's frames are numbered from its first).
        let global = self.readback.as_ref().map_or(frame, |r| r.first_frame() + frame);
        let dump = self.readback.is_some() && global % self.dump_every == 0 && self.last_dump != Some(frame);
        if dump {
            self.last_dump = Some(frame);
        }
        let target = match &self.mode {
            Mode::Copy { copies, target } => self.record_copies(cmd, source, target, *copies, dump)?,
            Mode::Draw { pass, target } => {
                pass.record(cmd, source, target)?;
                target.readable()
            }
        };
        if let Some(readback) = self.readback.as_mut().filter(|_| dump) {
            readback.record(cmd, slot, frame, target)?;
        }
        match &mut self.watch {
            Some(watch) => watch.record(cmd, slot, frame, source),
            None => Ok(()),
        }
    }

    fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        if let Some(watch) = &mut self.watch {
            watch.completed(slot, frame)?;
        }
        self.readback.as_mut().map_or(Ok(()), |r| r.completed(slot, frame))
    }

    fn standalone(&self) -> bool {
        true
    }
}

/// The `--consume copy` target for frames of `frame`: an image in `GENERAL`
/// or a buffer, as the shared frames are.
fn copy_target(device: &Arc<Device>, frame: FrameDesc) -> Result<CopyTarget> {
    if frame.layout == Layout::Buffer {
        let usage = vk::BufferUsageFlags::TRANSFER_DST
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::STORAGE_BUFFER;
        let location = gpu_allocator::MemoryLocation::GpuOnly;
        let target = Buffer::new(device.clone(), "offscreen target", frame.bytes(), usage, location)?;
        let shader = ShaderCopy::new(device.clone(), frame.bytes())?;
        let by = if shader.is_some() { "a compute shader" } else { "vkCmdCopyBuffer" };
        log::info!("the consumer copies each shared buffer with {by}");
        return Ok(CopyTarget::Buffer(target, shader));
    }
    let usage = vk::ImageUsageFlags::TRANSFER_DST | vk::ImageUsageFlags::TRANSFER_SRC;
    let target = Image::new(device.clone(), "offscreen target", frame.format.vk(), frame.extent, usage)?;
    device.run_once("preparing the offscreen target", |cmd| {
        let none = (vk::PipelineStageFlags2::NONE, vk::AccessFlags2::NONE);
        let b = image_barrier(target.raw, none, COPY_W).old_layout(vk::ImageLayout::UNDEFINED);
        record_image_barrier(device.raw(), cmd, b);
    })?;
    Ok(CopyTarget::Image(target))
}
