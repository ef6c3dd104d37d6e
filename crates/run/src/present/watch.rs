//! Watchers of a run (a browser view's clients): each frame, the compute
//! draw ([`super::compute_draw`]) draws the ready frame, letterboxed and
//! filtered as a window draws it, into one target per size and pixel layout
//! some watcher wants a frame in now ([`Want`]: RGBA8 rows for exact pixels,
//! I420 planes for an encoder), and reads each one back. Watchers that want
//! the same share one draw; a 4K frame watched in a 1280x720 pane as I420
//! moves 1280x720x1.5 bytes to the host.
//!
//! A watcher never slows the run: a size is drawn only while someone wants it,
//! and when every readback buffer of a size is with the [`Watchers`] (an
//! encoder behind), that size skips the frame instead of waiting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use ash::vk;

use super::compute_draw::{ComputeDraw, ComputeTarget};
use super::readback::{Pixels, ReadFrame, Readable, Readback, Recipient, Shot};
use crate::frames::consumer::{Frames, Source};
use vkcuda::interop::Use;
use vkcuda::vk::device::Device;
use vkcuda::Format;

/// A frame a watcher wants: its size, and how its pixels are laid out
/// ([`Pixels::Rgba8`] or [`Pixels::I420`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want {
    /// The size to draw the frame at (letterboxed into it).
    pub extent: vk::Extent2D,
    /// RGBA8 rows or I420 planes.
    pub pixels: Pixels,
}

/// The most sizes (and layouts) drawn per frame.
pub const MAX_SIZES: usize = 8;
/// The most kept, with their targets and readback buffers (when more are
/// wanted than a frame draws, the frames take turns).
const MAX_KEPT: usize = 2 * MAX_SIZES;
/// Readback buffers per size beyond one per frame slot: frames the watchers
/// may hold (encoding) while the next ones are drawn.
const HELD_PER_SIZE: usize = 2;
/// Frames after its last use that a size's target is kept (a client that
/// waits for its acknowledgement still wants the next frame soon).
const KEEP_UNUSED: u64 = 240;

/// Who watches a run: asked each frame which sizes to draw, given each
/// frame drawn. Called on the consumer's thread: nothing here may block.
pub trait Watchers: Send + Sync {
    /// What is wanted of this frame, each once.
    fn wanted(&self, frame: u64) -> Vec<Want>;

    /// A draw of `want` was recorded for `frame` (its pixels follow with
    /// [`Watchers::take`] once the frame is consumed, or never, if the run stops first).
    fn drawing(&self, frame: u64, want: Want);

    /// Frame `frame` drawn as wanted: `frame.shot.extent`, laid out as `frame.shot.pixels`.
    fn take(&self, frame: ReadFrame);

    /// What the draw multiplies colours by (float frames' exposure).
    fn exposure(&self) -> f32;

    /// Frames being drawn will not come: the run stopped.
    fn abandon(&self);

    /// A session of the run starts (after one that ended: a kernel's child
    /// that failed, a device made again). Its frames are numbered from 0
    /// again; frames of the session before that were being drawn will not come.
    fn new_session(&self) {
        self.abandon();
    }
}

/// One wanted size and layout's target and readback.
struct Sized {
    target: ComputeTarget,
    readback: Readback,
    /// The last frame drawn into it.
    last: u64,
}

/// The time the run's consumer spent handing frames to the watchers (asking
/// what they want, telling what is drawn, giving what was read back): what
/// the promise that a watcher never slows the run is checked by. A wait on a
/// client would show here, as long as that client's stall.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandOff {
    /// Frames recorded with the watchers asked what they want.
    pub frames: u64,
    /// The time spent in the watchers' calls, all frames together.
    pub total: Duration,
    /// The longest of those calls.
    pub longest: Duration,
}

/// [`HandOff`]'s counts, shared with the readback's recipient (it gives the frames).
#[derive(Default)]
struct HandOffTimes {
    frames: AtomicU64,
    total_ns: AtomicU64,
    longest_ns: AtomicU64,
}

impl HandOffTimes {
    /// Runs `f` (a call into the watchers) and counts its time.
    fn timed<R>(&self, f: impl FnOnce() -> R) -> R {
        let start = Instant::now();
        let r = f();
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.total_ns.fetch_add(ns, Ordering::Relaxed);
        self.longest_ns.fetch_max(ns, Ordering::Relaxed);
        r
    }

    fn read(&self) -> HandOff {
        HandOff {
            frames: self.frames.load(Ordering::Relaxed),
            total: Duration::from_nanos(self.total_ns.load(Ordering::Relaxed)),
            longest: Duration::from_nanos(self.longest_ns.load(Ordering::Relaxed)),
        }
    }
}

/// The compute draw, a target per wanted size and layout, and the watchers.
pub struct Watch {
    device: Arc<Device>,
    pass: ComputeDraw,
    sizes: Vec<Sized>,
    watchers: Arc<dyn Watchers>,
    slots: usize,
    /// The frames' format (for the readback's [`Shot`]).
    format: Format,
    /// The newest frame consumed.
    done: Option<u64>,
    /// The time spent in the watchers' calls.
    times: Arc<HandOffTimes>,
}

/// Hands a size's frames to the watchers.
struct ToWatchers(Arc<dyn Watchers>, Arc<HandOffTimes>);

impl Recipient for ToWatchers {
    fn holds(&self) -> usize {
        HELD_PER_SIZE
    }

    fn take(&mut self, frame: ReadFrame) -> Result<()> {
        self.1.timed(|| self.0.take(frame));
        Ok(())
    }

    fn failed(&self) -> Option<String> {
        None
    }
}

impl Watch {
    /// A watch of frames in `format` for a consumer with `slots` frame slots.
    pub fn new(
        device: Arc<Device>,
        format: Format,
        slots: usize,
        watchers: Arc<dyn Watchers>,
    ) -> Result<Self> {
        let pass = ComputeDraw::new(device.clone())?;
        let times = Arc::default();
        Ok(Self { device, pass, sizes: Vec::new(), watchers, slots, format, done: None, times })
    }

    /// The time spent handing frames to the watchers so far.
    pub fn handoff(&self) -> HandOff {
        self.times.read()
    }

    /// Points the draw at a session's shared frames (see [`ComputeDraw::bind_shared`]).
    pub fn bind(&mut self, frames: Frames<'_>) -> Result<()> {
        self.watchers.new_session();
        self.done = None;
        self.pass.bind_shared(frames)
    }

    /// The stage and access of the draw's read of the frame.
    pub fn frame_use(&self) -> Use {
        self.pass.frame_use()
    }

    /// Whether the draw reads shared buffers themselves.
    pub fn reads_buffers(&self) -> bool {
        self.pass.reads_buffers()
    }

    /// Records, for each wanted size and layout that has a free readback
    /// buffer, the draw of `source` into its target and the target's readback.
    pub fn record(
        &mut self,
        cmd: vk::CommandBuffer,
        slot: usize,
        frame: u64,
        source: Source<'_>,
    ) -> Result<()> {
        self.pass.exposure = self.watchers.exposure();
        let mut wanted = self.times.timed(|| self.watchers.wanted(frame));
        self.times.frames.fetch_add(1, Ordering::Relaxed);
        self.forget_unused(frame, &wanted);
        if wanted.len() > MAX_SIZES {
            // More than a frame draws: each frame starts further on, so none waits for ever.
            let turn = frame as usize % wanted.len();
            wanted.rotate_left(turn);
        }
        let drawn = &wanted[..wanted.len().min(MAX_SIZES)];
        for &want in drawn {
            let Some(i) = self.size_for(want, drawn)? else { continue };
            let sized = &mut self.sizes[i];
            if !sized.readback.has_room() {
                continue;
            }
            self.pass.record(cmd, source, &sized.target)?;
            let drawn = sized.target.raw();
            if sized.readback.try_record(cmd, slot, frame, Readable::Buffer(drawn.buffer, drawn.bytes))? {
                sized.last = frame;
                self.times.timed(|| self.watchers.drawing(frame, want));
            }
        }
        Ok(())
    }

    /// Frame `frame` of slot `slot` is consumed: its draws go to the watchers.
    pub fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        self.done = Some(self.done.map_or(frame, |d| d.max(frame)));
        self.sizes.iter_mut().try_for_each(|s| s.readback.completed(slot, frame))
    }

    /// The index of `want`'s target, made if missing and there is room (made
    /// by letting go of the least recent target that this frame does not draw
    /// and the GPU is done with).
    fn size_for(&mut self, want: Want, wanted: &[Want]) -> Result<Option<usize>> {
        let Want { extent, pixels } = want;
        if let Some(i) =
            self.sizes.iter().position(|s| s.target.extent == extent && s.target.pixels == pixels)
        {
            return Ok(Some(i));
        }
        if extent.width == 0 || extent.height == 0 {
            return Ok(None);
        }
        if self.sizes.len() >= MAX_KEPT {
            let done = self.done;
            let idle = |s: &Sized| {
                let mine = Want { extent: s.target.extent, pixels: s.target.pixels };
                done.is_some_and(|d| d >= s.last) && !wanted.contains(&mine)
            };
            let Some((oldest, _)) =
                self.sizes.iter().enumerate().filter(|(_, s)| idle(s)).min_by_key(|(_, s)| s.last)
            else {
                return Ok(None);
            };
            self.sizes.swap_remove(oldest);
        }
        let target = ComputeTarget::new(&self.pass, "watch target", extent, pixels)?;
        let shot = Shot { extent, format: self.format, pixels, first: 0 };
        let recipient = Box::new(ToWatchers(self.watchers.clone(), self.times.clone()));
        let readback = Readback::new(self.device.clone(), shot, self.slots, recipient)?;
        self.sizes.push(Sized { target, readback, last: 0 });
        Ok(Some(self.sizes.len() - 1))
    }

    /// Lets go of the targets nobody wanted for [`KEEP_UNUSED`] frames whose
    /// last draw the GPU has finished (no command buffer in flight names them).
    fn forget_unused(&mut self, frame: u64, wanted: &[Want]) {
        let done = self.done;
        self.sizes.retain(|s| {
            let finished = done.is_some_and(|d| d >= s.last);
            let want = Want { extent: s.target.extent, pixels: s.target.pixels };
            wanted.contains(&want) || !finished || frame < s.last + KEEP_UNUSED
        });
    }

    /// The run stopped: frames drawn but not consumed will not come.
    pub fn finish(&mut self) {
        for s in &mut self.sizes {
            s.readback.finish();
        }
        self.watchers.abandon();
    }
}
