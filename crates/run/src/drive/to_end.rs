//! Driving a run to its end, what every front end does with a session: a
//! headless run's or a bench repeat's consume loop ([`run_session`]), the
//! summary a run measured ([`Summary`], [`summarize`], [`sum_of`] for runs
//! side by side; the session decides which side of a failed run is its cause),
//! the signals that stop a run ([`watch_signals`]), and the output folder
//! and PNG pool of a dump ([`prepare_out_dir`], [`png_sink`]).

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use indicatif::ProgressBar;

use crate::base::kinds::ProducerId;
use crate::base::size::Size;
use crate::diagnostics::inject::Inject;
use crate::drive::measure::{Consumed, Span, SpanClock};
use crate::drive::producer::Report;
use crate::drive::session::{Session, SessionEnd, STALL};
use crate::drive::setup::RunSpec;
use crate::drive::sink::{PngSink, Reference, SinkReport};
use crate::error::failure::{awaited, gave_up, RunError};
use crate::error::usage::{Field, Message};
use crate::frames::consumer::{Completed, ExtraSync};
use crate::frames::gpu::Gpu;
use crate::metrics::footprint::{self, Footprint};
use crate::metrics::stats::{median, median_f64, Samples};
use crate::present::offscreen::Offscreen;
use crate::present::watch::HandOff;
use crate::UsageError;
use vkcuda::vk::instance::ValidationCounts;
use vkcuda::FrameDesc;

/// What a run measured.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Frames consumed.
    pub frames: u64,
    /// Frames per second over the frames after warm-up (wall clock).
    pub fps: f64,
    /// Size of the shared images (the last size, if the viewer resized them).
    pub size: Size,
    /// Who made the frames.
    pub producer: MadeBy,
    /// `--serve`: what the view took.
    pub view: Option<ViewReport>,
    /// Median producer render time per frame (CUDA events, or CPU wall clock).
    pub producer_median: Option<Duration>,
    /// Median Vulkan GPU time per frame (timestamp queries).
    pub vulkan_median: Option<Duration>,
    /// Median time from a frame's "rendered" point to the end of its
    /// consumption, both on the host's clock (needs calibrated timestamps).
    pub latency_median: Option<Duration>,
    /// CPU time per frame of the producer thread, after warm-up.
    pub producer_cpu: Option<Duration>,
    /// CPU time per frame of the consumer thread, after warm-up.
    pub consumer_cpu: Option<Duration>,
    /// Memory after warm-up, half-way (if the run got there) and at the end.
    pub footprint: Option<[Option<Footprint>; 3]>,
    /// What the PNG pool did.
    pub sink: SinkReport,
    /// Validation messages.
    pub validation: ValidationCounts,
    /// The signal that stopped the run early, if any.
    pub interrupted: Option<i32>,
    /// The Vulkan device it ran on (headless).
    pub device: String,
    /// `--gpu all`: a line per GPU.
    pub gpus: Vec<String>,
    /// Temporary files of this run's frames that a killed run left, removed.
    pub leftovers_removed: usize,
    /// `--resume`: the dumped frames kept from before (the frames rendered are `frames`).
    pub kept: Option<u64>,
}

/// What a browser view took of a run's frames, and what handing them to it cost the run.
#[derive(Clone, Copy, Debug, Default)]
pub struct ViewReport {
    /// The consumer's time in the view's calls.
    pub handoff: HandOff,
    /// Frames sent to its clients, all together.
    pub sent: u64,
}

/// How long a headless run (or bench repeat) goes, what stops it sooner,
/// and where it shows how far it got.
#[derive(Clone, Copy)]
pub struct Monitor<'a> {
    /// Its warm-up and steady part.
    pub span: Span,
    /// The number of the signal caught, once one was (0: none): the run stops.
    pub caught: &'a Arc<AtomicUsize>,
    /// The bar that shows how far it got.
    pub progress: &'a ProgressBar,
}

/// What one headless run (or bench repeat) measured, and who made its
/// frames (a session's [`ProducerId`], or [`MadeBy`]).
pub struct Measured<P = MadeBy> {
    /// What the consumer counted.
    pub consumed: Consumed,
    /// What the producer counted.
    pub report: Report,
    /// Who made the frames.
    pub producer: P,
}

impl Measured<ProducerId> {
    /// The same, its producer as a [`MadeBy`].
    pub fn made_by(self) -> Measured {
        Measured { consumed: self.consumed, report: self.report, producer: MadeBy::Producer(self.producer) }
    }
}

/// Who made a run's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadeBy {
    /// Nobody: a resumed run found every frame made ("none").
    Nothing,
    /// A producer of a session.
    Producer(ProducerId),
    /// A peer's hand-over pattern (the bench's), by its name.
    Peer(&'static str),
}

impl fmt::Display for MadeBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MadeBy::Nothing => f.write_str("none"),
            MadeBy::Producer(p) => p.fmt(f),
            MadeBy::Peer(name) => f.write_str(name),
        }
    }
}

/// A PNG pool writing into `dir`, [`png_workers`] threads.
pub fn png_sink(dir: &Path, reference: Reference) -> PngSink {
    PngSink::new(dir, png_workers(), reference, Inject::default())
}

/// PNG worker threads of one interop: one per spare core, at most [`MAX_PNG_WORKERS`].
pub fn png_workers() -> usize {
    spare_cores().clamp(1, MAX_PNG_WORKERS)
}

/// The most PNG writer threads one interop uses.
pub const MAX_PNG_WORKERS: usize = 16;

/// Cores besides the one the consumer thread keeps busy.
pub fn spare_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).saturating_sub(1)
}

/// Makes sure `dir` (the `--out` folder) exists and is writable, before any frame is rendered.
/// Returns whether it was created here (so a failed run can remove it).
pub fn prepare_out_dir(dir: &Path) -> Result<bool, UsageError> {
    let bad = |why: String| {
        UsageError::new(Message::new().field(Field::Out, dir.display()).text(format!(": {why}")))
    };
    if dir.exists() && !dir.is_dir() {
        return Err(bad("exists and is not a folder".into()));
    }
    let created = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| bad(format!("cannot create it: {e}")))?;
    let probe = dir.join(format!(".vkcuda-probe-{}", std::process::id()));
    let written = std::fs::write(&probe, b"probe");
    let _ = std::fs::remove_file(&probe);
    if let Err(e) = written {
        if created {
            let _ = std::fs::remove_dir(dir);
        }
        return Err(bad(format!("not writable: {e}")));
    }
    Ok(created)
}

/// Signals that stop a run gracefully (SIGINT, SIGTERM), as a shared cell.
pub fn watch_signals() -> Result<Arc<AtomicUsize>> {
    let caught = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, caught.clone(), sig as usize)?;
    }
    Ok(caught)
}

/// Runs that ran at the same time on different GPUs as one: frames and
/// frame rates add up, medians are the runs' median, the PNG reports merge.
pub fn sum_of(runs: &[Summary]) -> Result<Summary> {
    let mid = |f: &dyn Fn(&Summary) -> Option<Duration>| {
        let v: Vec<f64> = runs.iter().filter_map(f).map(|d| d.as_secs_f64()).collect();
        median_f64(&v).map(Duration::from_secs_f64)
    };
    let first = runs.first().ok_or_else(|| anyhow!("no GPU ran"))?;
    let mut all = Summary {
        frames: runs.iter().map(|s| s.frames).sum(),
        fps: runs.iter().map(|s| s.fps).sum(),
        producer_median: mid(&|s| s.producer_median),
        vulkan_median: mid(&|s| s.vulkan_median),
        latency_median: mid(&|s| s.latency_median),
        producer_cpu: mid(&|s| s.producer_cpu),
        consumer_cpu: mid(&|s| s.consumer_cpu),
        footprint: None,
        sink: SinkReport::default(),
        gpus: Vec::new(),
        ..first.clone()
    };
    for s in runs {
        all.sink.merge(s.sink.clone());
        all.interrupted = all.interrupted.or(s.interrupted);
    }
    Ok(all)
}

/// Starts a session of `spec` for frames `desc` (timelines from `base`), consumes it
/// into `offscreen` for `monitor`'s span (or until it caught a signal), and
/// stops it: what one headless run (or one bench repeat) measures.
pub fn run_session(
    gpu: &Gpu,
    spec: &RunSpec,
    base: u64,
    desc: FrameDesc,
    offscreen: &mut Offscreen,
    monitor: Monitor<'_>,
) -> Result<Measured<ProducerId>> {
    let Monitor { span, caught, progress } = monitor;
    let mut session = Session::start(gpu, spec, desc, base)?;
    session.interrupt_with(caught.clone());
    // The copy may be a shader's, whose descriptor sets name the session's buffers.
    let outcome = offscreen
        .bind(session.frames())
        .and_then(|()| consume(&mut session, offscreen, span, caught, progress));
    let signal = caught.load(Ordering::Relaxed);
    let outcome = match outcome {
        // A wait a signal ended: the frame was stuck for STALL (a kernel that does not end?).
        Err(e) if signal != 0 && gave_up(&e) && !session.producer_failed() => {
            Err(RunError::Cancelled { signal: signal as i32, awaited: awaited(&e), waited: STALL }.into())
        }
        other => other,
    };
    if outcome.is_err() && signal != 0 {
        // A frame that never came: the stop must not wait for it again.
        session.abandon();
    }
    let producer = session.producer();
    let SessionEnd { outcome: mut consumed, stopped } = session.end(offscreen, outcome)?;
    stopped.drained.into_iter().for_each(|c| consumed.completed.push(c.frame, c));
    consumed.total = stopped.consumed.max(consumed.frames);
    Ok(Measured { consumed, report: stopped.report, producer })
}

/// Consumes frames until the count is reached, `span`'s steady time is up,
/// or a signal arrives (then the session's stop releases whatever the
/// producer made beyond).
pub fn consume(
    session: &mut Session,
    offscreen: &mut Offscreen,
    span: Span,
    caught: &AtomicUsize,
    progress: &ProgressBar,
) -> Result<Consumed> {
    let mut clock = SpanClock::new(span);
    let mut completed = Samples::default();
    let (mut footprint, mut half_way) = (None, None);
    while session.next() < session.limit() && caught.load(Ordering::Relaxed) == 0 {
        let g = session.next();
        if g == session.limit() / 2 && clock.steady() {
            half_way = Some(footprint::now(session.cuda()));
        }
        match clock.before(g) {
            None => break,
            Some(true) => {
                footprint = Some(footprint::now(session.cuda()));
                session.set_steady_from(g);
            }
            Some(false) => {}
        }
        if let Some(c) = session.submit(offscreen, ExtraSync::default())? {
            completed.push(c.frame, c);
        }
        if session.next() % 64 == 0 {
            progress.set_position(session.next());
        }
    }
    // The last frames count towards the time too: wait until they are consumed.
    session.drain(offscreen)?.into_iter().for_each(|c| completed.push(c.frame, c));
    let footprint = footprint.map(|start| [Some(start), half_way, Some(footprint::now(session.cuda()))]);
    Ok(clock.finish(session.next(), completed, footprint))
}

/// What a run of frames of `size` measured, from what its consumer,
/// producer and PNG pool counted.
pub fn summarize(
    measured: Measured,
    sink: SinkReport,
    size: Size,
    validation: &ValidationCounts,
    caught: &AtomicUsize,
) -> Summary {
    let Measured { consumed: c, report, producer } = measured;
    // Drop the warm-up frames' timings like the fps does.
    let first = c.frames - c.steady_frames;
    let steady: Vec<&Completed> = c.completed.iter().filter(|(f, _)| *f >= first).map(|(_, d)| d).collect();
    let render: Vec<Duration> =
        report.timings.iter().filter(|(f, _)| *f >= first).map(|(_, t)| t.render).collect();
    let latency: Vec<Duration> = steady
        .iter()
        .filter_map(|d| {
            let rendered = report.timings.get(d.frame)?.rendered_ns;
            Some(Duration::from_nanos(d.end_ns?.saturating_sub(rendered)))
        })
        .collect();
    let vulkan: Vec<Duration> = steady.iter().map(|d| d.gpu_time).collect();
    Summary {
        frames: c.total,
        size,
        fps: c.steady_frames as f64 / c.steady.as_secs_f64().max(1e-9),
        producer,
        view: None,
        producer_median: median(&render),
        vulkan_median: median(&vulkan),
        latency_median: median(&latency),
        producer_cpu: report.cpu_per_frame,
        consumer_cpu: c.cpu_per_frame,
        footprint: c.footprint,
        sink,
        validation: *validation,
        interrupted: match caught.load(Ordering::Relaxed) {
            0 => None,
            s => Some(s as i32),
        },
        device: String::new(),
        gpus: Vec::new(),
        leftovers_removed: 0,
        kept: None,
    }
}
