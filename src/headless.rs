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
use crate::producer::{Control, Job, Report};
use crate::scene::Scene;
use crate::setup::{self, Interop};
use crate::sink::{PngSink, SinkReport};
use crate::stats::median;
use crate::sync::FramePlan;
use crate::vk::device::Queue;
use crate::vk::frame::{ExtraSync, FrameLoop};
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
    let frame_count = args.frame_count();
    let size = args.size_or(Size { width: 1920, height: 1080 });
    let device = gpu.device.clone();
    let plan = FramePlan::new(args.sync, args.buffers as usize, args.timeline_base, frame_count)
        .map_err(UsageError)?;
    let (interop, producer) = setup::build(&gpu, args, plan, size)?;
    eprintln!("vkcuda: {}; {}", device.info, gpu.why);

    let dumping = args.dump_every > 0;
    let created = if dumping { prepare_out_dir(&args.out)? } else { false };
    let scene = Scene { kind: args.scene, width: size.width, height: size.height, cost: args.cost };
    let director = Arc::new(Director::new(scene));
    let extent = ash::vk::Extent2D { width: scene.width, height: scene.height };
    let in_flight = args.frames_in_flight as usize;
    let readback = match dumping {
        true => Some(Readback::new(
            device.clone(),
            director.clone(),
            extent,
            in_flight,
            png_sink(&args.out, args.verify),
        )?),
        false => None,
    };
    let mut offscreen = Offscreen::new(device.clone(), extent, args.dump_every, readback)?;
    let mut frames = FrameLoop::new(device.clone(), plan, in_flight, interop.staging.clone())?;

    let control = Control::new(frame_count);
    let producer_name = producer.name();
    let handle = producer.spawn(Job { plan, director, control: control.clone() })?;

    let progress = progress_bar(frame_count);
    let outcome = consume(&interop, &mut frames, &mut offscreen, &control, &caught, &progress);
    progress.finish_and_clear();
    let outcome = outcome.and_then(|c| release_unconsumed(&interop, &control, &handle, c.frames).map(|()| c));
    if outcome.is_err() {
        abort(&interop, &control, frame_count);
    }
    let report = handle.join().map_err(|_| anyhow::anyhow!("the producer thread panicked"))?;
    if outcome.is_err() || report.is_err() {
        // Unblock any consumer frame still waiting for a frame that will never be rendered.
        abort(&interop, &control, frame_count);
        let _ = device.wait_idle();
        frames.forget();
    }
    let sink = offscreen.finish();
    if created && sink.written == 0 && (outcome.is_err() || report.is_err()) {
        let _ = std::fs::remove_dir(&args.out);
    }
    let consumed = outcome?;
    let report = report.context("producer")?;
    if let Some(e) = &sink.error {
        anyhow::bail!("PNG writer: {e}");
    }
    Ok(summarize(
        consumed,
        report,
        sink,
        (producer_name, size),
        &device.instance.validation().counts(),
        &caught,
    ))
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

fn consume(
    interop: &Interop,
    frames: &mut FrameLoop,
    offscreen: &mut Offscreen,
    control: &Control,
    caught: &AtomicUsize,
    progress: &ProgressBar,
) -> Result<Consumed> {
    let failed = || control.failed();
    let warmup = (control.limit() / 10).min(30);
    let mut vulkan_times = Vec::with_capacity(control.limit() as usize);
    let mut steady_start = Instant::now();
    let mut g = 0;
    while g < control.limit() {
        if caught.load(Ordering::Relaxed) != 0 {
            // Graceful stop: the producer may be up to N frames ahead; consume what it may still make.
            control.stop_at(g + interop.plan.images() as u64 + 1);
        }
        if g == warmup {
            steady_start = Instant::now();
        }
        let done = frames.submit(
            g,
            &interop.timelines,
            &interop.images,
            offscreen,
            ExtraSync::default(),
            &failed,
        )?;
        vulkan_times.extend(done.map(|c| c.gpu_time));
        g += 1;
        if g % 64 == 0 {
            progress.set_position(g);
        }
    }
    vulkan_times.extend(frames.drain(&interop.timelines, offscreen, &failed)?.iter().map(|c| c.gpu_time));
    Ok(Consumed {
        frames: g,
        steady: steady_start.elapsed(),
        steady_frames: g.saturating_sub(warmup),
        vulkan_times,
    })
}

/// After a graceful stop the CUDA producer may have enqueued frames past the
/// last one consumed (its thread is not held back on the CPU), each waiting
/// for a consumer release that will never come. Stand in for the consumer on
/// the host: wait for each such frame and signal its release, until the
/// producer thread ends. In a full run there are none.
pub(crate) fn release_unconsumed(
    interop: &Interop,
    control: &Control,
    producer: &std::thread::JoinHandle<Result<Report>>,
    consumed: u64,
) -> Result<()> {
    let failed = || control.failed();
    let mut f = consumed;
    while !producer.is_finished() {
        if f < control.produced() {
            let step = interop.plan.consumer(f);
            if let Some(w) = step.wait {
                interop.timelines[w.timeline].wait(w.value, &failed)?;
            }
            interop.timelines[step.signal.timeline].signal(step.signal.value)?;
            f += 1;
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    Ok(())
}

/// Unblocks both sides after a failure: raises every timeline past the last
/// value the run would signal, so no GPU or CPU wait is left hanging.
pub(crate) fn abort(interop: &Interop, control: &Control, frames: u64) {
    control.fail();
    for t in interop.timelines.iter() {
        if let Err(e) = t.raise_to(interop.plan.past_end(frames)) {
            eprintln!("vkcuda: while aborting: {e:#}");
        }
    }
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
