//! A fed run consumed headless: a session fed from a [`Feed`], every frame
//! the producer makes consumed on a thread of its own into the offscreen
//! target and, when dumping, the writer pool; then the session's end. The
//! Python module's headless viewer runs it; so can any Rust caller that
//! feeds frames (`tests/feed.rs` does).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Result};

use super::Feed;
use crate::base::kinds::ConsumeKind;
use crate::diagnostics::inject::Inject;
use crate::drive::session::Session;
use crate::drive::setup::{ConsumerSpec, PlanSpec, ProducerSpec, RunSpec};
use crate::drive::sink::{PngSink, Reference};
use crate::frames::consumer::ExtraSync;
use crate::frames::gpu::Gpu;
use crate::present::offscreen::{Offscreen, OffscreenShape, OffscreenWork};
use crate::present::readback::{Pixels, Readback, Shot};
use crate::present::watch::{Watch, Watchers};
use vkcuda::sync::SyncScheme;
use vkcuda::FrameDesc;

/// Shared frames of a run: frames can be fed while the consumer reads others.
const BUFFERS: usize = 3;
/// Consumer command buffers in flight: one per shared frame, as the CLI has
/// at 3 buffers, so every frame the caller can make is on its way at once.
pub const IN_FLIGHT: usize = 3;
/// Frames a run may last (the timelines' range is checked against it).
const FOREVER: u64 = 1 << 40;

/// What a run leaves.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ended {
    /// The next run's first timeline value.
    pub next_base: u64,
    /// Frames consumed.
    pub consumed: u64,
    /// Frames written to the folder.
    pub written: u64,
}

/// What a run has done so far, read while it runs (the viewer's `stats()`):
/// the consumer counts in it as it goes; [`Ended`] has the final counts.
#[derive(Debug, Default)]
pub struct Progress {
    consumed: AtomicU64,
    /// The writer pool counts here ([`PngSink::counting`]).
    written: Arc<AtomicU64>,
}

impl Progress {
    /// Frames consumed so far (read after [`Progress::written`], never below it).
    pub fn consumed(&self) -> u64 {
        self.consumed.load(Ordering::Acquire)
    }

    /// Frames written to the folder so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// `frames` are consumed now.
    pub fn set_consumed(&self, frames: u64) {
        self.consumed.store(frames, Ordering::Release);
    }
}

/// Where a run's frames go.
#[derive(Clone)]
pub struct Output {
    /// The folder every frame is written to (PNG, EXR for floats); `None`: nowhere.
    pub dir: Option<PathBuf>,
    /// Writer threads.
    pub workers: usize,
    /// Who watches the frames (a browser view), drawn at the sizes they want.
    pub watchers: Option<Arc<dyn Watchers>>,
}

/// The run-layer description of a run fed from `feed`.
pub fn fed_spec(feed: Feed) -> RunSpec {
    RunSpec {
        plan: PlanSpec { sync: SyncScheme::Split, buffers: BUFFERS, frames: FOREVER },
        producer: ProducerSpec::Fed(feed),
        consumer: ConsumerSpec { in_flight: IN_FLIGHT, paced: false, host_waits: false },
        inject: Inject::default(),
        child: None,
    }
}

/// A fed run's feed, and what its consumer counts as it goes.
#[derive(Clone)]
pub struct Fed {
    /// Where the frames come from.
    pub feed: Feed,
    /// What the consumer has consumed and written so far.
    pub progress: Arc<Progress>,
}

/// Where a fed run starts: a run after another counts on from where that
/// one ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartAt {
    /// The number of its first frame (names its files).
    pub first: u64,
    /// The value its timelines start from ([`Ended::next_base`] of the run before).
    pub base: u64,
}

/// Starts the consumer thread of frames `desc` fed from `fed`, numbered and
/// with timelines as `at` says, counting in `fed`'s progress as it goes; the
/// feed is closed when it ends.
pub fn spawn(
    gpu: Arc<Gpu>,
    desc: FrameDesc,
    fed: Fed,
    output: Output,
    at: StartAt,
) -> Result<JoinHandle<Result<Ended>>> {
    Ok(std::thread::Builder::new().name("vkcuda consumer".into()).spawn(move || {
        let result = consume(&gpu, desc, &fed, at, &output);
        fed.feed.close();
        result
    })?)
}

/// The consumer thread: a session of frames `desc` fed from `feed`, every
/// frame the producer makes consumed (copied, and read back when writing),
/// then the session's end.
fn consume(gpu: &Gpu, desc: FrameDesc, fed: &Fed, at: StartAt, output: &Output) -> Result<Ended> {
    let (Fed { feed, progress }, StartAt { first, base }) = (fed, at);
    let device = gpu.device.clone();
    let extent = desc.extent;
    let written = progress.written.clone();
    let sink = output
        .dir
        .as_ref()
        .map(|dir| PngSink::counting(dir, output.workers, Reference::None, Inject::default(), written));
    let readback = match &sink {
        Some(sink) => {
            // A fed frame shows no scene: numbered from `first`, compared with nothing.
            let shot = Shot { extent, format: desc.format, pixels: Pixels::Rendered, first };
            Some(Readback::new(device.clone(), shot, IN_FLIGHT, sink.recipient(None)?)?)
        }
        None => None,
    };
    let shape = OffscreenShape { frame: desc, extent };
    let work = OffscreenWork { kind: ConsumeKind::Copy, dump_every: 1, copies: 1 };
    let mut offscreen = Offscreen::new(device.clone(), shape, work, readback)?;
    if let Some(watchers) = &output.watchers {
        offscreen.set_watch(Watch::new(device, desc.format, IN_FLIGHT, watchers.clone())?);
    }
    let mut session = Session::start(gpu, &fed_spec(feed.clone()), desc, base)?;
    // The copy may be a shader's, whose descriptor sets name the session's buffers.
    let outcome =
        offscreen.bind(session.frames()).and_then(|()| follow(&mut session, &mut offscreen, feed, progress));
    let ended = session.end(&mut offscreen, outcome);
    let read = offscreen.finish();
    let sink = sink.map(|s| s.finish().with_readback(read)).unwrap_or_default();
    let stopped = ended?.stopped;
    if let Some(e) = sink.error {
        bail!("{e}");
    }
    Ok(Ended { next_base: stopped.next_base, consumed: stopped.consumed, written: sink.written })
}

/// Consumes each frame once the producer has made it into `mailbox`, until
/// it has made its last, counting them in `progress`.
fn follow(
    session: &mut Session,
    offscreen: &mut Offscreen,
    mailbox: &Feed,
    progress: &Progress,
) -> Result<()> {
    // The device producer says when it made a frame; the host producer's is polled for.
    let told = matches!(mailbox, Feed::Device { .. });
    loop {
        // Counts first, then `ended`, then "produced": a frame made after the counts
        // were read changes them, so the wait below does not miss it; once `ended`
        // is seen, the producer's count is final.
        let seen = mailbox.counts();
        let ended = mailbox.ended();
        if session.ready() {
            session.submit(offscreen, ExtraSync::default())?;
            progress.set_consumed(session.next());
            continue;
        }
        if ended {
            break;
        }
        // A frame the GPU has finished goes to the watchers now, not when its slot comes
        // round again: a caller that shows a frame now and then must not see the one before.
        session.retire_finished(offscreen)?;
        // A frame taken but not yet made is moments away, one in flight soon finished;
        // otherwise wait for a change.
        let within = match (!told && seen.taken > session.produced(), session.unretired()) {
            (true, _) => Duration::from_micros(200),
            (false, true) => Duration::from_millis(1),
            (false, false) => Duration::from_millis(100),
        };
        mailbox.wait_change(seen, within);
    }
    if session.producer_failed() {
        // The producer's error, which the session's end returns, is the cause.
        return Err(vkcuda::Error::Cancelled { what: format!("frame {}", session.next()) }.into());
    }
    session.drain(offscreen)?;
    progress.set_consumed(session.next());
    Ok(())
}
