//! Who makes the next frame of a device feed: the caller, packing straight
//! into the shared buffer on its own stream ([`Line::make`]), or the fed
//! producer, copying a slot the caller packed while the buffer was still
//! Vulkan's ([`super::device::FedCudaProducer`]).
//!
//! Frames are numbered in the order they are made, and each signals
//! "rendered" on the stream it was made on. Holding the line's lock is the
//! right to make the next frame, so frame numbers and signal values rise in
//! one order; a frame made on another stream than the one before first waits
//! (on the GPU) for that frame's signal, so the values also rise in the order
//! the GPU sets them. A frame is made only once the host has seen Vulkan
//! release its buffer, so no stream ever waits for Vulkan.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context as _, Result};
use cudarc::driver::{sys, CudaContext};

use super::Mailbox;
use crate::cuda::driver;
use crate::drive::producer::Job;
use vkcuda::cuda::{RawStream, Stream, StreamState};
use vkcuda::interop::{CudaFrames, CudaTarget, LinearFrame, SharedFrames};
use vkcuda::sync::TimelinePoint;
use vkcuda::vk::timeline::Timeline;
use vkcuda::vk::WAIT_TIMEOUT;

/// How long a wait of the caller's looks before it checks whether to give up.
const CHECK: Duration = Duration::from_millis(50);

/// What [`Line::make`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Made {
    /// The frame is made: packed into its shared buffer, "rendered" enqueued.
    Made,
    /// Newest wins and the next buffer is still Vulkan's (or the producer is
    /// not running yet): the frame goes through a slot instead.
    NotNow,
    /// Every frame: the wait for the buffer was given up (`give_up()`); call again.
    GaveUp,
}

/// A frame's shared buffer handed out to be written in place ([`Line::reserve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reserved {
    /// The frame's number.
    pub g: u64,
    /// Its shared buffer, packed RGBA rows.
    pub pointer: sys::CUdeviceptr,
}

/// How long [`Line::make`] waits for the next frame's buffer while Vulkan still reads it.
#[derive(Clone, Copy)]
pub enum Wait<'a> {
    /// Every frame: until Vulkan releases it, or until `give_up()` ([`Made::GaveUp`]).
    Every {
        /// Checked every 50 ms (a Ctrl+C to look at).
        give_up: &'a dyn Fn() -> bool,
    },
    /// Newest wins: until Vulkan releases it, or until `fallback()` says the
    /// frame can go another way now (a slot: [`Made::NotNow`]).
    Newest {
        /// Checked before each wait, and when `wakes` is reached.
        fallback: &'a dyn Fn() -> bool,
        /// A point whose reaching may make `fallback()` true (the caller's
        /// earlier pack has run): the wait ends there too. One long host wait
        /// for the first of the two sleeps; NVIDIA's driver (580) spins
        /// through short ones (docs/results/2026-11-26-show-direct).
        wakes: Option<WakePoint<'a>>,
    },
}

/// A value of a timeline, to wake at when the timeline reaches it.
#[derive(Clone, Copy)]
pub struct WakePoint<'a> {
    /// The timeline.
    pub timeline: &'a Timeline,
    /// The value.
    pub value: u64,
}

/// A released buffer a frame must wait for ([`Maker::release_needed`]).
struct Release {
    /// The frames whose timeline says it.
    shared: Arc<SharedFrames>,
    /// The point Vulkan releases the buffer at.
    point: TimelinePoint,
}

impl Wait<'_> {
    /// Waits (without the line's lock) for `timeline` to reach `value`:
    /// `None` to look again, or what `make` returns instead.
    fn for_release(&self, timeline: &Timeline, value: u64) -> Result<Option<Made>> {
        match self {
            Wait::Every { give_up } => {
                timeline.wait_for(value, CHECK)?;
                Ok(give_up().then_some(Made::GaveUp))
            }
            Wait::Newest { fallback, wakes } => {
                if fallback() {
                    return Ok(Some(Made::NotNow));
                }
                match wakes {
                    Some(w) => timeline.wait_either(value, w.timeline, w.value, CHECK)?,
                    None => timeline.wait_for(value, CHECK)?,
                };
                // Released or not, the caller looks again (under the lock).
                Ok(None)
            }
        }
    }
}

/// What making a frame needs, while the producer runs.
struct Maker {
    ctx: Arc<CudaContext>,
    frames: CudaFrames,
    shared: Arc<SharedFrames>,
    job: Option<Job>,
    /// Recorded on the caller's stream after each frame it made.
    made: sys::CUevent,
}

struct State {
    maker: Option<Maker>,
    /// The producer has ended: no frame is made any more.
    closed: bool,
    /// The next frame's number.
    next: u64,
    /// The event recorded after the latest frame's "rendered", and its stream.
    after: Option<(sys::CUevent, sys::CUstream)>,
    /// The next frame's buffer is handed out to be written in place ([`Line::reserve`]).
    reserved: bool,
}

/// The order frames of a device feed are made in; see the module docs.
pub struct Line {
    state: Mutex<State>,
    changed: Condvar,
}

// SAFETY: the raw events and streams in the state are used only through CUDA
// calls, which are thread-safe, and only while the lock is held.
unsafe impl Send for Line {}
// SAFETY: as above.
unsafe impl Sync for Line {}

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("Line").field("next", &s.next).field("closed", &s.closed).finish()
    }
}

/// The right to make frame `next` ([`Line::turn_if`]).
pub(super) struct Turn<'a> {
    state: MutexGuard<'a, State>,
    line: &'a Line,
}

impl Line {
    /// A line that makes nothing until the producer opens it.
    pub fn new() -> Arc<Self> {
        let state = State { maker: None, closed: false, next: 0, after: None, reserved: false };
        Arc::new(Self { state: Mutex::new(state), changed: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The producer hands over the imports frames are made with (on the
    /// thread that builds the run); the caller may make frames once
    /// [`Line::start`] gave the job too.
    pub(super) fn open(
        &self,
        ctx: Arc<CudaContext>,
        frames: CudaFrames,
        shared: Arc<SharedFrames>,
    ) -> Result<()> {
        ctx.bind_to_thread()?;
        let made = driver::create_event().context("cuEventCreate")?;
        self.lock().maker = Some(Maker { ctx, frames, shared, job: None, made });
        Ok(())
    }

    /// The producer's thread runs `job`: frames may be made.
    pub(super) fn start(&self, job: &Job) {
        if let Some(m) = self.lock().maker.as_mut() {
            m.job = Some(job.clone());
        }
        self.changed.notify_all();
    }

    /// Whether the producer has ended (or is ending): no frame is made any more.
    pub fn closed(&self) -> bool {
        self.lock().closed
    }

    /// The next frame's number.
    pub(super) fn next(&self) -> u64 {
        self.lock().next
    }

    /// The right to make the next frame, if it is still `g`; while frame `g`
    /// is written in place, waits until it is shown (`None`) or dropped, or
    /// until `stop()` says so.
    pub(super) fn turn_if(&self, g: u64, stop: &dyn Fn() -> bool) -> Option<Turn<'_>> {
        let mut state = self.lock();
        while state.reserved && state.next == g && !stop() {
            state = self.changed.wait_timeout(state, CHECK).unwrap_or_else(|p| p.into_inner()).0;
        }
        (state.next == g && state.maker.is_some() && !state.reserved).then_some(Turn { state, line: self })
    }

    /// Makes the next frame on `stream` (the caller's, current on this
    /// thread): `pack(dst)` enqueues the frame's pixels into the shared
    /// buffer at `dst`, once the host has seen Vulkan release it; `wait` says
    /// how long to wait for that. A frame still waiting in `mailbox` is
    /// replaced (newest wins), or made first (every frame); a replaced one
    /// goes to `dropped` before the pack is enqueued: its own pack, ahead on
    /// the caller's stream, may then skip its work instead of holding this one up.
    ///
    /// # Safety
    /// `stream` is a live stream of the feed's CUDA context, and stays live
    /// until the frame is consumed.
    pub unsafe fn make(
        &self,
        stream: sys::CUstream,
        mailbox: &Mailbox<usize>,
        wait: Wait<'_>,
        pack: &mut dyn FnMut(sys::CUdeviceptr) -> Result<()>,
        dropped: &dyn Fn(usize),
    ) -> Result<Made> {
        let mut turn = match self.claim(mailbox, wait)? {
            Ok(turn) => turn,
            Err(made) => return Ok(made),
        };
        // The producer takes a frame from the mailbox only with the turn, which this holds.
        mailbox.drop_pending().into_iter().for_each(dropped);
        // SAFETY: the caller's promise on `stream`.
        let stream = unsafe { RawStream::new(stream) };
        turn.make(&stream, None, pack)?;
        mailbox.made_directly().into_iter().for_each(dropped);
        Ok(Made::Made)
    }

    /// Hands out the next frame's shared buffer to be written in place, once
    /// the host has seen Vulkan release it (`wait` as for [`Line::make`]; no
    /// stream waits for anything before writing it). Until the frame is
    /// [`Line::commit`]ted or [`Line::abandon`]ed no other frame is made.
    ///
    /// # Safety
    /// As for [`Line::make`]: `stream` is the one the frame is written on (or
    /// that every stream writing it is ordered after).
    pub unsafe fn reserve(
        &self,
        stream: sys::CUstream,
        mailbox: &Mailbox<usize>,
        wait: Wait<'_>,
    ) -> Result<Result<Reserved, Made>> {
        let mut turn = match self.claim(mailbox, wait)? {
            Ok(turn) => turn,
            Err(made) => return Ok(Err(made)),
        };
        let g = turn.state.next;
        turn.maker()?.ctx.bind_to_thread()?;
        // SAFETY: the caller's promise on `stream`.
        turn.after_previous(&unsafe { RawStream::new(stream) })?;
        let maker = turn.maker()?;
        let CudaTarget::Buffer(LinearFrame { pointer, .. }) =
            maker.frames.target(maker.shared.plan().image(g))
        else {
            bail!("a fed frame needs the buffer layout");
        };
        turn.state.reserved = true;
        Ok(Ok(Reserved { g, pointer }))
    }

    /// Shows frame `g`, reserved and written in place on `stream` (the
    /// caller's, current on this thread): its "rendered" is enqueued there.
    /// A frame still waiting in `mailbox` is replaced (given back). On an
    /// error the frame is still reserved: [`Line::abandon`] it.
    ///
    /// # Safety
    /// As for [`Line::make`].
    pub unsafe fn commit(
        &self,
        g: u64,
        stream: sys::CUstream,
        mailbox: &Mailbox<usize>,
    ) -> Result<Option<usize>> {
        let state = self.lock();
        ensure!(state.reserved && state.next == g, "frame {g} is not the one handed out");
        if state.closed {
            bail!("the run ended (flush, close, a new size or a failure) while this frame was written: it is not shown");
        }
        let mut turn = Turn { state, line: self };
        // SAFETY: the caller's promise on `stream`.
        let raw = unsafe { RawStream::new(stream) };
        turn.make(&raw, None, &mut |_| Ok(()))?;
        turn.state.reserved = false;
        Ok(mailbox.made_directly())
    }

    /// Frame `g`, reserved, is not shown: the next frame made waits on the GPU
    /// for the writes enqueued on `stream` so far, and (after the producer
    /// has ended) the imports go once they are done.
    ///
    /// # Safety
    /// As for [`Line::make`].
    pub unsafe fn abandon(&self, g: u64, stream: sys::CUstream) {
        let mut state = self.lock();
        if !state.reserved || state.next != g {
            return;
        }
        state.reserved = false;
        if let Some(m) = &state.maker {
            let recorded = m.ctx.bind_to_thread().map_err(anyhow::Error::from).and_then(|()| {
                // SAFETY: an event of the maker's context; the caller's promise on `stream`.
                unsafe { driver::record(m.made, stream) }.context("cuEventRecord (a frame not shown)")
            });
            match recorded {
                Ok(()) => state.after = Some((m.made, stream)),
                Err(e) => log::error!("{e:#}: the next frame may overwrite writes still running"),
            }
        }
        self.changed.notify_all();
        let maker = if state.closed { state.maker.take() } else { None };
        drop(state);
        if let Some(maker) = maker {
            maker.finish();
        }
    }

    /// The right to make the next frame, once `wait` allows; the reason not otherwise.
    fn claim(&self, mailbox: &Mailbox<usize>, wait: Wait<'_>) -> Result<Result<Turn<'_>, Made>> {
        loop {
            let state = self.lock();
            if state.closed
                || state.maker.as_ref().and_then(|m| m.job.as_ref()).is_some_and(|j| j.control.failed())
            {
                bail!("the frames' consumer has stopped");
            }
            let every = matches!(wait, Wait::Every { .. });
            // Not started yet, a frame being written in place, or (every frame) a frame
            // written in place waiting: that comes first (the producer makes it).
            let started = state.maker.as_ref().is_some_and(|m| m.job.is_some());
            // The frame written in place may be this thread's own: waiting for it would never end.
            ensure!(
                !(every && state.reserved),
                "a frame is being written in place (frame()): leave its block before the next frame"
            );
            if !started || state.reserved || (every && mailbox.has_pending()) {
                let Wait::Every { give_up } = wait else { return Ok(Err(Made::NotNow)) };
                drop(self.changed.wait_timeout(state, CHECK).unwrap_or_else(|p| p.into_inner()).0);
                if give_up() {
                    return Ok(Err(Made::GaveUp));
                }
                continue;
            }
            if let Some(Release { shared, point: w }) =
                state.maker.as_ref().and_then(Maker::release_needed(state.next))
            {
                let timeline = &shared.timelines()[w.timeline];
                if !timeline.wait_for(w.value, Duration::ZERO)? {
                    drop(state);
                    if let Some(done) = wait.for_release(timeline, w.value)? {
                        return Ok(Err(done));
                    }
                    continue;
                }
            }
            return Ok(Ok(Turn { state, line: self }));
        }
    }

    /// The producer ends: no frame is made after this. Waits (bounded) for
    /// the last frame the caller made to be enqueued past its signal, so no
    /// import goes while a stream may still use it; returns how many frames
    /// were made in all.
    pub(super) fn close(&self) -> u64 {
        let (maker, made) = {
            let mut state = self.lock();
            state.closed = true;
            // A frame still being written in place: its end lets the imports go.
            let maker = if state.reserved { None } else { state.maker.take() };
            (maker, state.next)
        };
        self.changed.notify_all();
        if let Some(maker) = maker {
            maker.finish();
        }
        made
    }
}

impl Maker {
    /// For frame `g`: the shared frames and the point Vulkan must have
    /// released its buffer at, if it has been used before.
    fn release_needed(g: u64) -> impl Fn(&Maker) -> Option<Release> {
        move |m| m.shared.plan().producer(g).wait.map(|point| Release { shared: m.shared.clone(), point })
    }

    /// Lets the imports go once the caller's last frame has run.
    fn finish(self) {
        let Maker { ctx, frames, made, .. } = self;
        if ctx.bind_to_thread().is_err() {
            return;
        }
        let settled = vkcuda::cuda::settle_by(WAIT_TIMEOUT, || {
            // SAFETY: an event of this context (a failed context answers at once).
            match unsafe { driver::event_state(made) } {
                sys::CUresult::CUDA_SUCCESS => StreamState::Idle,
                sys::CUresult::CUDA_ERROR_NOT_READY => StreamState::Busy,
                e => StreamState::Failed(e),
            }
        });
        if settled == StreamState::Busy {
            log::error!(
                "the caller's stream was still busy {WAIT_TIMEOUT:?} after its last frame: leaking the shared \
                 frames' CUDA imports rather than destroying them in use"
            );
            std::mem::forget(frames);
            return;
        }
        // SAFETY: created in `open`, destroyed once; its last record has completed.
        let _ = unsafe { driver::destroy_event(made) };
        drop(frames);
    }
}

impl Turn<'_> {
    fn maker(&self) -> Result<&Maker> {
        self.state.maker.as_ref().ok_or_else(|| anyhow!("the frames' producer has ended"))
    }

    /// Orders `stream` (of the maker's context, which is bound) after the
    /// frame before (its signal, or the writes of a frame not shown), if that
    /// was on another stream and may still run.
    fn after_previous(&self, stream: &dyn Stream) -> Result<()> {
        let raw = stream.raw();
        let Some((event, on)) = self.state.after.filter(|(_, on)| *on != raw) else { return Ok(()) };
        // SAFETY: an event of this context, recorded on another stream of it.
        if unsafe { driver::has_run(event) } {
            return Ok(());
        }
        // SAFETY: as above; `raw` is live (the `Stream` contract).
        unsafe { driver::wait_event(raw, event) }
            .with_context(|| format!("cuStreamWaitEvent (the frame before, on stream {on:?})"))
    }

    /// Makes frame `next` on `stream`: orders it after the frame before,
    /// enqueues `pack(dst)` into its shared buffer and its "rendered", then
    /// records `after` (the caller's own event if `None`) behind it. The frame
    /// counts as produced; the mailbox is told by the caller of this.
    pub(super) fn make(
        &mut self,
        stream: &dyn Stream,
        after: Option<sys::CUevent>,
        pack: &mut dyn FnMut(sys::CUdeviceptr) -> Result<()>,
    ) -> Result<()> {
        let g = self.state.next;
        let maker = self.maker()?;
        let job = maker.job.as_ref().ok_or_else(|| anyhow!("the frames' producer has not started"))?;
        if job.control.failed() || g >= job.control.limit() {
            bail!("the frames' consumer has stopped");
        }
        maker.ctx.bind_to_thread()?;
        let raw = stream.raw();
        self.after_previous(stream)?;
        // The host saw Vulkan release the buffer: no wait on the stream.
        let step = maker.shared.plan().producer(g);
        let CudaTarget::Buffer(LinearFrame { pointer, pitch, .. }) = maker.frames.target(step.image) else {
            bail!("a fed frame needs the buffer layout");
        };
        let row = maker.shared.desc().row_pitch();
        ensure!(
            pitch == row,
            "the shared buffer's rows are not packed ({pitch} bytes apart, a row has {row})"
        );
        pack(pointer)?;
        let signal = step.signal;
        maker.frames.timeline(signal.timeline).signal(stream, signal.value)?;
        let event = after.unwrap_or(maker.made);
        // SAFETY: an event of this context; `raw` is live.
        unsafe { driver::record(event, raw) }.context("cuEventRecord (after a frame)")?;
        let control = job.control.clone();
        self.state.after = Some((event, raw));
        self.state.next = g + 1;
        control.set_produced(g + 1);
        self.line.changed.notify_all();
        Ok(())
    }
}
