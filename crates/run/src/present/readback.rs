//! Copies chosen frames into host-visible buffers and, once a frame is
//! consumed, lends its buffer to the PNG pool together with what the frame
//! showed. Used by the headless dump and the viewer's "S".
//!
//! No host copy: a PNG worker reads the mapped buffer itself and gives it
//! back when done. The buffers are a pool shared with the workers, grown on
//! demand up to a bound; when every buffer is out, recording the next
//! readback waits for a worker to return one (the back-pressure that keeps
//! a slow disk from holding an unbounded number of frames).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::director::Director;
use crate::sink::{FrameJob, PngSink, SinkReport, Stages};
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::{buffer_barrier, copy_layers};
use vkcuda::vk::memory::Buffer;
use vkcuda::{Format, FrameDesc};

/// What a readback copies from: an image in `GENERAL`, or a buffer's first
/// `bytes` (a packed frame).
#[derive(Clone, Copy)]
pub enum Readable {
    /// An image, readable by transfers.
    Image(vk::Image),
    /// A buffer and the frame's size in bytes.
    Buffer(vk::Buffer, u64),
}

/// Readback buffers nobody holds, and a signal for each one given back.
#[derive(Default)]
struct Pool {
    free: Mutex<Vec<Buffer>>,
    returned: Condvar,
}

impl Pool {
    fn free(&self) -> MutexGuard<'_, Vec<Buffer>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A readback buffer lent out: to a frame slot while the GPU fills it, then
/// to a PNG worker. Dropping it gives it back to the pool (a worker that
/// fails or panics gives it back too).
struct Lent {
    buffer: Option<Buffer>,
    pool: Arc<Pool>,
}

impl Lent {
    fn buffer(&self) -> Option<&Buffer> {
        self.buffer.as_ref()
    }
}

impl AsRef<[u8]> for Lent {
    /// The frame's pixels, read where the GPU wrote them. Every pool buffer
    /// was checked to be mapped when it was made, so the empty fallback is
    /// unreachable (and would fail the encoder's length check, not pass).
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref().and_then(|b| b.mapped().ok()).unwrap_or(&[])
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            self.pool.free().push(b);
            self.pool.returned.notify_one();
        }
    }
}

/// A frame being read back into a lent buffer.
struct Pending {
    frame: u64,
    lent: Lent,
    /// The consumer's time to get the buffer: working, and waiting for one.
    working: Duration,
    waited: Duration,
}

/// What a readback reads: frames of `extent` in `format`, as rendered, or
/// (`drawn`) drawn by the draw pass into an `extent`-sized [`super::draw::DISPLAY_FORMAT`] target.
#[derive(Clone, Copy, Debug)]
pub struct Shot {
    /// The image read back's size.
    pub extent: vk::Extent2D,
    /// The frames' format.
    pub format: Format,
    /// Whether the image read back is a draw target.
    pub drawn: bool,
}

/// The readback pool, the frames its buffers hold, and the PNG writer.
pub struct Readback {
    device: Arc<Device>,
    director: Arc<Director>,
    extent: vk::Extent2D,
    /// The frames' format (a drawn frame is read back as [`super::draw::DISPLAY_FORMAT`] RGBA8).
    format: Format,
    /// Whether the frames read back were drawn by the draw pass (see [`FrameJob::target`]).
    drawn: bool,
    pool: Arc<Pool>,
    /// Buffers made so far, and the most there may be.
    made: usize,
    bound: usize,
    /// Per frame slot: the frame its buffer will hold once consumed.
    pending: Vec<Option<Pending>>,
    sink: Option<PngSink>,
    /// Per frame, the consumer thread's time to hand a frame over, and its
    /// time waiting for a worker to give a buffer back (the other stages are
    /// the workers').
    stages: Stages,
    properties: vk::MemoryPropertyFlags,
}

impl Readback {
    /// Readback of `shot`'s frames for a consumer with `slots` frame slots:
    /// one buffer per slot up front, up to two per PNG worker more as the
    /// workers fall behind (each worker holds one, one more waits queued).
    pub fn new(
        device: Arc<Device>,
        director: Arc<Director>,
        shot: Shot,
        slots: usize,
        sink: PngSink,
    ) -> Result<Self> {
        let Shot { extent, format, drawn } = shot;
        let bound = slots + 2 * sink.workers();
        let mut this = Self {
            device,
            director,
            extent,
            format,
            pool: Arc::default(),
            made: 0,
            bound,
            pending: (0..slots).map(|_| None).collect(),
            sink: Some(sink),
            drawn,
            stages: Stages::default(),
            properties: vk::MemoryPropertyFlags::empty(),
        };
        for _ in 0..slots {
            let b = this.make()?;
            this.pool.free().push(b);
        }
        if !this.properties.contains(vk::MemoryPropertyFlags::HOST_CACHED) {
            // Reads from uncached memory are several times slower: say so.
            log::warn!(
                "readback memory is not host-cached ({:?}): dumping frames is slower",
                this.properties
            );
        }
        Ok(this)
    }

    /// One more pool buffer (mapped: the workers read it in place).
    fn make(&mut self) -> Result<Buffer> {
        let usage = vk::BufferUsageFlags::TRANSFER_DST;
        let name = format!("readback {}", self.made);
        let pixels = if self.drawn { Format::Rgba8 } else { self.format };
        let bytes = FrameDesc::new(self.extent).format(pixels).bytes();
        let buffer = Buffer::new(self.device.clone(), &name, bytes, usage, MemoryLocation::GpuToCpu)?;
        buffer.mapped()?;
        self.properties = buffer.memory_properties();
        self.made += 1;
        Ok(buffer)
    }

    /// A free buffer: one given back, a new one while under the bound, or
    /// else the next one a worker gives back; and how long it waited for that.
    fn lend(&mut self) -> Result<(Lent, Duration)> {
        let mut waited = Duration::ZERO;
        let mut free = self.pool.free();
        let buffer = loop {
            if let Some(b) = free.pop() {
                break b;
            }
            if self.made < self.bound {
                drop(free);
                break self.make()?;
            }
            if let Some(e) = self.sink.as_ref().and_then(PngSink::error) {
                return Err(anyhow!(e));
            }
            // Every buffer outside `pending` is with a worker or queued for
            // one, and each worker gives its buffer back when done with it.
            let started = Instant::now();
            free = self.pool.returned.wait(free).unwrap_or_else(|p| p.into_inner());
            waited += started.elapsed();
        };
        Ok((Lent { buffer: Some(buffer), pool: self.pool.clone() }, waited))
    }

    /// The readback memory's properties (reported in the summary).
    pub fn memory_properties(&self) -> vk::MemoryPropertyFlags {
        self.properties
    }

    /// The global number of local frame 0 (`--shard`).
    pub fn first_frame(&self) -> u64 {
        self.director.first()
    }

    /// Records a copy of `from` into a free buffer for slot `slot`'s frame
    /// `frame`, made visible to the host.
    pub fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, from: Readable) -> Result<()> {
        // A frame of this slot that was never consumed (a stop, a window
        // rebuild) is done with the GPU by now: its buffer goes back first.
        self.pending[slot] = None;
        let started = Instant::now();
        let (lent, waited) = self.lend()?;
        if let Some(buffer) = lent.buffer() {
            copy_to_host(self.device.raw(), cmd, from, buffer, self.extent);
        }
        let working = started.elapsed().saturating_sub(waited);
        self.pending[slot] = Some(Pending { frame, lent, working, waited });
        Ok(())
    }

    /// Frame `frame` in slot `slot` is consumed: lend its buffer to a PNG
    /// worker if it was read back.
    pub fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        let Some(Pending { lent, working, waited, .. }) = self.pending[slot].take_if(|p| p.frame == frame)
        else {
            return Ok(());
        };
        let spec =
            self.director.spec(frame).ok_or_else(|| anyhow!("frame {frame} is no longer remembered"))?;
        let sink = self.sink.as_ref().ok_or_else(|| anyhow!("the PNG writer has finished"))?;
        let started = Instant::now();
        let target = self.drawn.then_some((self.extent.width, self.extent.height));
        let format = self.format;
        // Files are named by the global frame number (a shard's frames merge with the others').
        let frame = self.director.first() + frame;
        let job =
            FrameJob { frame, tick: spec.tick, scene: spec.scene, format, pixels: Box::new(lent), target };
        sink.send(job)?;
        Stages::push(&mut self.stages.handoff, working + started.elapsed());
        Stages::push(&mut self.stages.buffer_wait, waited);
        Ok(())
    }

    /// Writes what is queued and reports (call once every frame is consumed).
    pub fn finish(&mut self) -> SinkReport {
        let mut report = self.sink.take().map(PngSink::finish).unwrap_or_default();
        report.stages.extend(std::mem::take(&mut self.stages));
        report.readback_memory = format!("{:?}", self.memory_properties());
        report.readback_buffers = self.made;
        report
    }
}

/// Records a copy of the whole `extent`-sized frame in `from` into
/// `buffer`, made visible to the host once the submission completes.
pub fn copy_to_host(
    dev: &ash::Device,
    cmd: vk::CommandBuffer,
    from: Readable,
    buffer: &Buffer,
    extent: vk::Extent2D,
) {
    let extent = vk::Extent3D { width: extent.width, height: extent.height, depth: 1 };
    let region = [vk::BufferImageCopy::default().image_subresource(copy_layers()).image_extent(extent)];
    let to_host = [buffer_barrier(
        buffer.raw(),
        (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE),
        (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
    )];
    // Recording; the buffer holds one packed frame of the image's format and size, and the
    // host reads it only once the frame is consumed.
    match from {
        Readable::Image(image) => {
            let layout = vk::ImageLayout::GENERAL;
            // SAFETY: as above.
            unsafe { dev.cmd_copy_image_to_buffer(cmd, image, layout, buffer.raw(), &region) }
        }
        Readable::Buffer(source, bytes) => {
            let whole = [vk::BufferCopy::default().size(bytes.min(buffer.size()))];
            // SAFETY: as above.
            unsafe { dev.cmd_copy_buffer(cmd, source, buffer.raw(), &whole) }
        }
    }
    let to_host = vk::DependencyInfo::default().buffer_memory_barriers(&to_host);
    // SAFETY: recording; the buffer is live.
    unsafe { dev.cmd_pipeline_barrier2(cmd, &to_host) };
}
