//! Copies chosen frames into host-visible buffers and, once a frame is
//! consumed, lends its buffer to a [`Recipient`] (the PNG pool of the headless
//! dump and the viewer's "S"; any consumer's own taker).
//!
//! No host copy: the recipient reads the mapped buffer itself and gives it
//! back when done. The buffers are a pool shared with the workers, grown on
//! demand up to a bound; when every buffer is out, recording the next
//! readback waits for a worker to return one (the back-pressure that keeps
//! a slow disk from holding an unbounded number of frames).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::metrics::stats::push_bounded;
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
    /// When the copy was recorded (no earlier than the consumer took the frame).
    recorded: Instant,
}

/// How a read-back frame's pixels are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pixels {
    /// As rendered: packed rows of the frames' format.
    Rendered,
    /// Drawn (letterboxed and filtered at the target's size): packed RGBA8 rows.
    Rgba8,
    /// Drawn as [`Pixels::Rgba8`] with red and blue swapped: a B8G8R8A8 swapchain's bytes.
    Bgra8,
    /// Drawn as I420 planes, BT.601 ([`I420`] says where each plane is): full
    /// range (JPEG's YCbCr) or limited range (video's).
    I420 {
        /// 0–255 for Y, U and V (JPEG); else Y 16–235, U and V 16–240.
        full_range: bool,
    },
}

impl Pixels {
    /// The bytes of an `extent`-sized frame (of `format`, when rendered).
    pub fn bytes(self, extent: vk::Extent2D, format: Format) -> usize {
        match self {
            Pixels::Rendered => FrameDesc::new(extent).format(format).bytes() as usize,
            Pixels::Rgba8 | Pixels::Bgra8 => FrameDesc::new(extent).format(Format::Rgba8).bytes() as usize,
            Pixels::I420 { .. } => I420::of(extent).bytes,
        }
    }
}

/// Where the planes of an I420 frame are, in bytes: Y, then U, then V (one
/// sample of each per 2x2 pixels), each row padded to a multiple of 8 pixels
/// (4 chroma samples) and Y to an even number of rows; the padding repeats
/// the last column and row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct I420 {
    /// Bytes from one Y row to the next.
    pub y_stride: usize,
    /// Y rows (the height, rounded up to even).
    pub rows: usize,
    /// Bytes from one U (or V) row to the next.
    pub c_stride: usize,
    /// Where U starts, and V.
    pub u: usize,
    /// Where V starts.
    pub v: usize,
    /// All of it.
    pub bytes: usize,
}

impl I420 {
    /// The planes of an `extent`-sized frame.
    pub fn of(extent: vk::Extent2D) -> Self {
        let y_stride = (extent.width as usize).div_ceil(8) * 8;
        let rows = (extent.height as usize).div_ceil(2) * 2;
        let c_stride = y_stride / 2;
        let u = y_stride * rows;
        let v = u + c_stride * rows / 2;
        Self { y_stride, rows, c_stride, u, v, bytes: v + c_stride * rows / 2 }
    }
}

/// What a readback reads: frames of `extent` in `format`, as rendered, or
/// drawn into an `extent`-sized target ([`Pixels`]).
#[derive(Clone, Copy, Debug)]
pub struct Shot {
    /// The image read back's size.
    pub extent: vk::Extent2D,
    /// The frames' format.
    pub format: Format,
    /// How the pixels read back are laid out.
    pub pixels: Pixels,
    /// The run's number of the session's frame 0 (a shard's first frame; 0 otherwise).
    pub first: u64,
}

impl Shot {
    /// The pixels' format: the frames', or RGBA8 when drawn.
    pub fn pixel_format(&self) -> Format {
        match self.pixels {
            Pixels::Rendered => self.format,
            _ => Format::Rgba8,
        }
    }

    /// Whether the frame read back was drawn at another size (not as rendered).
    pub fn drawn(&self) -> bool {
        self.pixels != Pixels::Rendered
    }

    /// The bytes of one frame read back.
    pub fn bytes(&self) -> usize {
        self.pixels.bytes(self.extent, self.format)
    }
}

/// A frame read back, lent to a [`Recipient`]: its pixels stay in the readback
/// buffer, which goes back to the pool when this is dropped.
pub struct ReadFrame {
    /// The frame, numbered within its session.
    pub frame: u64,
    /// What was read: size, format, drawn or as rendered.
    pub shot: Shot,
    /// The pixels, packed rows in [`Shot::pixel_format`].
    pub pixels: Box<dyn AsRef<[u8]> + Send>,
    /// When the consumer recorded its copy: the frame was ready on the host's
    /// side then (its render may still have been finishing on the GPU).
    pub recorded: Instant,
}

/// Where frames read back go (the PNG writer pool; a consumer's own taker).
pub trait Recipient: Send {
    /// How many frames it may hold at once: the readback pool grows up to
    /// this many buffers beyond one per frame slot.
    fn holds(&self) -> usize;

    /// Takes a consumed frame. Called on the consumer's thread: it must not block.
    fn take(&mut self, frame: ReadFrame) -> Result<()>;

    /// Its error, once it failed: a wait for a buffer it holds gives up with it.
    fn failed(&self) -> Option<String>;
}

/// What a readback measured: per frame read back, the consumer thread's time
/// to hand it over and its time waiting for a buffer to come back.
#[derive(Clone, Debug, Default)]
pub struct ReadStats {
    /// Handing each frame over (lending a buffer, recording, the recipient's take).
    pub handoff: Vec<Duration>,
    /// Waiting for the recipient to give a buffer back.
    pub buffer_wait: Vec<Duration>,
    /// The readback memory's properties.
    pub memory: vk::MemoryPropertyFlags,
    /// Readback buffers made.
    pub buffers: usize,
}

/// The readback pool, the frames its buffers hold, and where they go.
pub struct Readback {
    device: Arc<Device>,
    shot: Shot,
    pool: Arc<Pool>,
    /// Buffers made so far, and the most there may be.
    made: usize,
    bound: usize,
    /// Per frame slot: the frame its buffer will hold once consumed.
    pending: Vec<Option<Pending>>,
    recipient: Option<Box<dyn Recipient>>,
    stats: ReadStats,
}

/// A buffer lent ([`Readback::lend`]), and how long the lend waited for it.
struct Lending {
    /// The buffer.
    lent: Lent,
    /// The time spent waiting for the recipient to give one back.
    waited: Duration,
}

impl Readback {
    /// Readback of `shot`'s frames for a consumer with `slots` frame slots:
    /// one buffer per slot up front, up to [`Recipient::holds`] more as the
    /// recipient falls behind.
    pub fn new(device: Arc<Device>, shot: Shot, slots: usize, recipient: Box<dyn Recipient>) -> Result<Self> {
        let bound = slots + recipient.holds();
        let mut this = Self {
            device,
            shot,
            pool: Arc::default(),
            made: 0,
            bound,
            pending: (0..slots).map(|_| None).collect(),
            recipient: Some(recipient),
            stats: ReadStats::default(),
        };
        for _ in 0..slots {
            let b = this.make()?;
            this.pool.free().push(b);
        }
        if !this.stats.memory.contains(vk::MemoryPropertyFlags::HOST_CACHED) {
            // Reads from uncached memory are several times slower: say so.
            log::warn!(
                "readback memory is not host-cached ({:?}): dumping frames is slower",
                this.stats.memory
            );
        }
        Ok(this)
    }

    /// One more pool buffer (mapped: the recipient reads it in place).
    fn make(&mut self) -> Result<Buffer> {
        let usage = vk::BufferUsageFlags::TRANSFER_DST;
        let name = format!("readback {}", self.made);
        let bytes = self.shot.bytes() as u64;
        let buffer = Buffer::new(self.device.clone(), &name, bytes, usage, MemoryLocation::GpuToCpu)?;
        buffer.mapped()?;
        self.stats.memory = buffer.memory_properties();
        self.made += 1;
        Ok(buffer)
    }

    /// Whether [`Readback::try_record`] would find a buffer now.
    pub fn has_room(&self) -> bool {
        self.made < self.bound || !self.pool.free().is_empty()
    }

    /// A free buffer: one given back, a new one while under the bound, or
    /// else (`wait`) the next one the recipient gives back, or (not `wait`)
    /// none; and how long it waited.
    fn lend(&mut self, wait: bool) -> Result<Option<Lending>> {
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
            if !wait {
                return Ok(None);
            }
            if let Some(e) = self.recipient.as_ref().and_then(|r| r.failed()) {
                return Err(anyhow!(e));
            }
            // Every buffer outside `pending` is with the recipient, which
            // gives each back when done with it.
            let started = Instant::now();
            free = self.pool.returned.wait(free).unwrap_or_else(|p| p.into_inner());
            waited += started.elapsed();
        };
        Ok(Some(Lending { lent: Lent { buffer: Some(buffer), pool: self.pool.clone() }, waited }))
    }

    /// The run's number of the session's frame 0 (`--shard`).
    pub fn first_frame(&self) -> u64 {
        self.shot.first
    }

    /// Records a copy of `from` into a free buffer for slot `slot`'s frame
    /// `frame`, made visible to the host; waits for a buffer when the
    /// recipient holds them all.
    pub fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, from: Readable) -> Result<()> {
        self.record_if(cmd, slot, frame, from, true).map(|_| ())
    }

    /// [`Readback::record`], unless every buffer is out: then records
    /// nothing and returns `false` (a viewer that may skip frames).
    pub fn try_record(
        &mut self,
        cmd: vk::CommandBuffer,
        slot: usize,
        frame: u64,
        from: Readable,
    ) -> Result<bool> {
        self.record_if(cmd, slot, frame, from, false)
    }

    fn record_if(
        &mut self,
        cmd: vk::CommandBuffer,
        slot: usize,
        frame: u64,
        from: Readable,
        wait: bool,
    ) -> Result<bool> {
        // A frame of this slot that was never consumed (a stop, a window
        // rebuild) is done with the GPU by now: its buffer goes back first.
        self.pending[slot] = None;
        let started = Instant::now();
        let Some(Lending { lent, waited }) = self.lend(wait)? else {
            return Ok(false);
        };
        if let Some(buffer) = lent.buffer() {
            copy_to_host(self.device.raw(), cmd, from, buffer, self.shot.extent);
        }
        let working = started.elapsed().saturating_sub(waited);
        self.pending[slot] = Some(Pending { frame, lent, working, waited, recorded: started });
        Ok(true)
    }

    /// Forgets the frames recorded and never consumed (their session ended;
    /// the GPU is done with them): their buffers go back to the pool.
    pub fn forget_pending(&mut self) {
        self.pending.iter_mut().for_each(|p| *p = None);
    }

    /// Frame `frame` in slot `slot` is consumed: lend its buffer to the
    /// recipient if it was read back.
    pub fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        let Some(Pending { lent, working, waited, recorded, .. }) =
            self.pending[slot].take_if(|p| p.frame == frame)
        else {
            return Ok(());
        };
        let recipient = self.recipient.as_mut().ok_or_else(|| anyhow!("the readback has finished"))?;
        let started = Instant::now();
        recipient.take(ReadFrame { frame, shot: self.shot, pixels: Box::new(lent), recorded })?;
        push_bounded(&mut self.stats.handoff, working + started.elapsed());
        push_bounded(&mut self.stats.buffer_wait, waited);
        Ok(())
    }

    /// Lets the recipient go (call once every frame is consumed) and reports.
    pub fn finish(&mut self) -> ReadStats {
        self.recipient = None;
        ReadStats { buffers: self.made, ..std::mem::take(&mut self.stats) }
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
