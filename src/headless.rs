//! The headless run: the producer on its thread, the offscreen consumer on
//! this one, frames dumped to PNG, and a summary with measured timings.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{Args, Size};
use crate::director::Director;
use crate::present::offscreen::Offscreen;
use crate::present::readback::Readback;
use crate::producer::Report;
use crate::scene::Scene;
use crate::session::{warmup_frames, Session};
use crate::setup;
use crate::sink::{PngSink, SinkReport};
use crate::stats::median;
use crate::vk::device::Queue;
use crate::vk::frame::ExtraSync;
use crate::vk::instance::Instance;
use crate::UsageError;

/// What a run measured.
#[derive(Debug)]
pub struct Summary {
    /// Frames consumed.
    pub frames: u64,
    /// Frames per second over the frames after warm-up (wall clock).
    pub fps: f64,
    /// Size of the shared images (the last size, if the viewer resized them).
    pub size: Size,
    /// Which producer ran.
    pub producer: &'static str,
    /// Median producer render time per frame (CUDA events, or CPU wall clock).
    pub producer_median: Option<Duration>,
    /// Median Vulkan GPU time per frame (timestamp queries).
    pub vulkan_median: Option<Duration>,
    /// What the PNG pool did.
    pub sink: SinkReport,
    /// Validation (errors, warnings).
    pub validation: (u64, u64),
    /// The signal that stopped the run early, if any.
    pub interrupted: Option<i32>,
}

/// A PNG pool writing into `dir`, one worker per spare core (at most 16).
pub fn png_sink(dir: &Path, verify: bool) -> PngSink {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).saturating_sub(1).clamp(1, 16);
    PngSink::new(dir, workers, verify)
}

/// Makes sure `dir` exists and is writable, before any frame is rendered.
/// Returns whether it was created here (so a failed run can remove it).
pub fn prepare_out_dir(dir: &Path) -> Result<bool, UsageError> {
    let bad = |why: String| UsageError(format!("--out {}: {why}", dir.display()));
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

/// Runs `--headless`.
pub fn run(args: &Args) -> Result<Summary> {
    let caught = watch_signals()?;
    let instance = Instance::new(args.validate, &[])?;
    let gpu = setup::open_gpu(args, instance, Queue { kind: args.queue_kind(), present: None })?;
    let device = gpu.device.clone();
    let size = args.size_or(Size { width: 1920, height: 1080 });
    // Bad input first, so nothing is written when it is refused.
    setup::check_size(&gpu, size)?;
    let dumping = args.dump_every > 0;
    let created = if dumping { prepare_out_dir(&args.out)? } else { false };

    let scene = Scene { kind: args.scene, width: size.width, height: size.height, cost: args.cost };
    let director = Arc::new(Director::new(scene));
    let extent = ash::vk::Extent2D { width: size.width, height: size.height };
    let readback = match dumping {
        true => {
            let sink = png_sink(&args.out, args.verify);
            Some(Readback::new(
                device.clone(),
                director.clone(),
                extent,
                args.frames_in_flight as usize,
                sink,
            )?)
        }
        false => None,
    };
    let mut offscreen = Offscreen::new(device.clone(), extent, args.dump_every, readback)?;
    let mut session = Session::start(&gpu, args, &director, size, args.timeline_base)?;
    eprintln!("vkcuda: {}; {}", device.info, gpu.why);

    let progress = progress_bar(session.control.limit());
    let outcome = consume(&mut session, &mut offscreen, &caught, &progress);
    progress.finish_and_clear();
    let producer = session.producer;
    let stopped = session.stop(&mut offscreen, outcome.is_ok());
    let sink = offscreen.finish();
    if created && sink.written == 0 && (outcome.is_err() || stopped.is_err()) {
        let _ = std::fs::remove_dir(&args.out);
    }
    let mut consumed = outcome?;
    let stopped = stopped.context("producer")?;
    consumed.vulkan_times.extend(stopped.drained);
    if let Some(e) = &sink.error {
        anyhow::bail!("PNG writer: {e}");
    }
    let validation = device.instance.validation().counts();
    Ok(summarize(consumed, stopped.report, sink, (producer, size), &validation, &caught))
}

/// What a consumer loop measured.
pub(crate) struct Consumed {
    /// Frames consumed.
    pub frames: u64,
    /// Wall clock over the frames after warm-up.
    pub steady: Duration,
    /// Frames after warm-up.
    pub steady_frames: u64,
    /// Vulkan GPU time of each consumed frame, in order.
    pub vulkan_times: Vec<Duration>,
}

/// Consumes frames until the count is reached or a signal arrives (then the
/// session's stop releases whatever the producer made beyond).
fn consume(
    session: &mut Session,
    offscreen: &mut Offscreen,
    caught: &AtomicUsize,
    progress: &ProgressBar,
) -> Result<Consumed> {
    let warmup = warmup_frames(session.control.limit());
    let mut vulkan_times = Vec::with_capacity(session.control.limit() as usize);
    let mut steady_start = Instant::now();
    while session.next < session.control.limit() && caught.load(Ordering::Relaxed) == 0 {
        if session.next == warmup {
            steady_start = Instant::now();
        }
        vulkan_times.extend(session.submit(offscreen, ExtraSync::default())?.map(|c| c.gpu_time));
        if session.next % 64 == 0 {
            progress.set_position(session.next);
        }
    }
    // The last frames count towards the time too: wait until they are consumed.
    vulkan_times.extend(session.drain(offscreen)?.iter().map(|c| c.gpu_time));
    let frames = session.next;
    Ok(Consumed {
        frames,
        steady: steady_start.elapsed(),
        steady_frames: frames.saturating_sub(warmup),
        vulkan_times,
    })
}

fn progress_bar(frames: u64) -> ProgressBar {
    let bar = ProgressBar::new(frames);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} frames {per_sec} eta {eta}") {
        bar.set_style(style);
    }
    bar
}

pub(crate) fn summarize(
    c: Consumed,
    report: Report,
    sink: SinkReport,
    (producer, size): (&'static str, Size),
    validation: &(u64, u64),
    caught: &AtomicUsize,
) -> Summary {
    // Drop the warm-up frames' timings like the fps does.
    let skip =
        |v: &[Duration]| v.iter().skip((c.frames - c.steady_frames) as usize).copied().collect::<Vec<_>>();
    Summary {
        frames: c.frames,
        size,
        fps: c.steady_frames as f64 / c.steady.as_secs_f64().max(1e-9),
        producer,
        producer_median: median(&skip(&report.render_times)),
        vulkan_median: median(&skip(&c.vulkan_times)),
        sink,
        validation: *validation,
        interrupted: match caught.load(Ordering::Relaxed) {
            0 => None,
            s => Some(s as i32),
        },
    }
}
