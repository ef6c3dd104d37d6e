//! The headless run: the producer on its thread, the offscreen consumer on
//! this one, frames dumped to PNG, and a summary with measured timings.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::Args;
use vkcuda::types::Size;
use vkcuda::vk::device::Queue;
use vkcuda::vk::instance::{Instance, ValidationCounts};
use vkcuda::{Format, Layout};
use vkcuda_run::consumer::{Completed, ExtraSync};
use vkcuda_run::director::Director;
use vkcuda_run::dumpdir;
use vkcuda_run::footprint::{self, Footprint};
use vkcuda_run::inject::Inject;
use vkcuda_run::kinds::{ConsumeKind, Handover, ProducerKind};
pub use vkcuda_run::measure::{Consumed, Span, SpanClock};
use vkcuda_run::outfile;
use vkcuda_run::pairing;
use vkcuda_run::peers;
use vkcuda_run::present::offscreen::Offscreen;
use vkcuda_run::present::readback::{Readback, Shot};
use vkcuda_run::producer::Report;
use vkcuda_run::scene::Scene;
use vkcuda_run::session::{Session, STALL};
use vkcuda_run::setup::{self, Gpu, MemoryNeed};
use vkcuda_run::sink::{PngSink, Reference, SinkReport};
use vkcuda_run::stats::{median, median_f64, Samples};
use vkcuda_run::UsageError;

/// What a run measured.
#[derive(Clone, Debug)]
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

/// A PNG pool writing into `dir`, [`png_workers`] threads.
pub fn png_sink(dir: &Path, reference: Reference) -> PngSink {
    PngSink::new(dir, png_workers(), reference, Inject::default())
}

/// PNG worker threads of one interop: one per spare core, at most [`MAX_PNG_WORKERS`].
pub fn png_workers() -> usize {
    spare_cores().clamp(1, MAX_PNG_WORKERS)
}

/// The most PNG writer threads one interop uses.
const MAX_PNG_WORKERS: usize = 16;

/// Cores besides the one the consumer thread keeps busy.
fn spare_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).saturating_sub(1)
}

/// The frame and target sizes as the user gave them, for messages.
fn size_words(args: &Args, size: Size) -> String {
    match args.target_or(size) {
        t if t == size => format!("--size {size}"),
        t => format!("--size {size} with --target-size {t}"),
    }
}

/// What a headless run allocates for its frames: the shared images, the
/// consumer's target, a host producer's staging buffers, and (dumping) up
/// to `readbacks` readback buffers of the target's size.
fn memory_need(args: &Args, gpu: &Gpu, size: Size, readbacks: usize) -> MemoryNeed {
    let target = args.target_or(size);
    let images = args.buffers as u64;
    let format = args.format;
    // A drawn target is 8-bit RGBA; a copy's has the frames' format.
    let target_format = if args.consume == ConsumeKind::Draw { Format::Rgba8 } else { format };
    let mut need = MemoryNeed::images(images, size, format) + MemoryNeed::images(1, target, target_format);
    if args.layout == Layout::Buffer {
        need = need + MemoryNeed::images(images, size, format); // the buffers' view images
    }
    if gpu.cuda.is_none() || args.producer == ProducerKind::Staging {
        need = need + MemoryNeed::buffers(images, size, format);
    }
    if args.dump_every > 0 {
        need = need + MemoryNeed::buffers(readbacks as u64, target, target_format);
    }
    need
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

/// Runs `--headless`: on one GPU, or with `--gpu all` on each; with
/// `--resume`, only the runs of frames `--out` lacks, one after another.
pub fn run(args: &Args) -> Result<Summary> {
    if let Some(p) = &args.json {
        outfile::check_output(p, None)?;
    }
    let caught = watch_signals()?;
    let instance = setup::vulkan_instance(args.validate, &[])?;
    // A killed run of these frames may have left temporary files: they go (other shards' stay).
    let removed = match args.dump_every > 0 {
        true => dumpdir::remove_leftovers(&args.out, args.frame_range())?,
        false => 0,
    };
    let mut summary = match args.resume {
        true => resume(args, &instance, &caught)?,
        false => run_parts(args, &instance, &caught)?,
    };
    summary.leftovers_removed = removed;
    Ok(summary)
}

/// The frames `args` names, on one GPU or (`--gpu all`) on each.
fn run_parts(args: &Args, instance: &Arc<Instance>, caught: &Arc<AtomicUsize>) -> Result<Summary> {
    if args.all_gpus() {
        return run_all(args, instance, caught);
    }
    let progress = progress_bar(args.frame_count());
    let run = Run { workers: png_workers(), progress: &progress, out_ready: false };
    run_on(args, instance, caught, run)
}

/// `--resume`: keeps the dumped frames `--out` holds and renders each run of
/// missing ones as a part of its own, in order; a signal stops the rest.
fn resume(args: &Args, instance: &Arc<Instance>, caught: &Arc<AtomicUsize>) -> Result<Summary> {
    let survey = dumpdir::survey(&args.out, args.frame_range(), args.dump_every, args.format)?;
    eprintln!(
        "vkcuda: resuming: {} dumped frames kept, {} frames to render in {} runs",
        survey.kept,
        survey.to_render(),
        survey.missing.len()
    );
    let started = std::time::Instant::now();
    let mut done = Vec::new();
    for part in &survey.missing {
        let mut sub = args.clone();
        sub.part = Some(*part);
        let summary = run_parts(&sub, instance, caught)?;
        let stop = summary.interrupted.is_some();
        done.push(summary);
        if stop {
            break;
        }
    }
    let mut all = match done.last() {
        Some(_) => sum_of(&done)?,
        None => nothing_to_render(args),
    };
    // The parts ran one after another: the rate is over all of them; every part's device
    // counted its validation messages on this one instance.
    all.fps = all.frames as f64 / started.elapsed().as_secs_f64().max(1e-9);
    all.validation = instance.validation().counts();
    all.kept = Some(survey.kept);
    Ok(all)
}

/// The summary of a resumed run that found every frame there.
fn nothing_to_render(args: &Args) -> Summary {
    Summary {
        frames: 0,
        fps: 0.0,
        size: args.size_or(Size { width: 1920, height: 1080 }),
        producer: "none",
        producer_median: None,
        vulkan_median: None,
        latency_median: None,
        producer_cpu: None,
        consumer_cpu: None,
        footprint: None,
        sink: SinkReport::default(),
        validation: ValidationCounts::default(),
        interrupted: None,
        device: String::new(),
        gpus: Vec::new(),
        leftovers_removed: 0,
        kept: None,
    }
}

/// What a headless run on one GPU is given besides its arguments.
struct Run<'a> {
    /// PNG writer threads.
    workers: usize,
    progress: &'a ProgressBar,
    /// `--out` was prepared already (`--gpu all`: once, for every GPU).
    out_ready: bool,
}

/// `--gpu all`: one interop per GPU (own device, CUDA context, threads and
/// PNG writers, the cores shared out), each on its own thread rendering an
/// equal, contiguous part of the frames, numbered in the whole run, into the
/// same `--out`; one summary, with a line per GPU.
fn run_all(args: &Args, instance: &Arc<Instance>, caught: &Arc<AtomicUsize>) -> Result<Summary> {
    let gpus = pairing::every_gpu(instance, args.producer)?;
    let (first, end) = args.frame_range();
    let n = gpus.len() as u64;
    let parts: Vec<(usize, (u64, u64))> = gpus
        .iter()
        .enumerate()
        .map(|(i, &g)| {
            (g, (first + (end - first) * i as u64 / n, first + (end - first) * (i as u64 + 1) / n))
        })
        .filter(|(_, (a, b))| b > a)
        .collect();
    if args.dump_every > 0 {
        prepare_out_dir(&args.out)?;
    }
    let bars = indicatif::MultiProgress::new();
    // The PNG pool is sized for all the GPUs: the spare cores shared out, up to 16 per GPU.
    let workers = (spare_cores() / parts.len()).clamp(1, MAX_PNG_WORKERS);
    let jobs: Vec<_> =
        parts.into_iter().map(|(gpu, (a, b))| (gpu, (a, b), bars.add(progress_bar(b - a)))).collect();
    let results = pairing::on_each(&jobs, |(gpu, part, progress)| {
        let mut sub = args.clone();
        (sub.gpu, sub.part, sub.json) = (Some(gpu.to_string()), Some(*part), None);
        run_on(&sub, instance, caught, Run { workers, progress, out_ready: true })
    });
    combine(jobs.into_iter().zip(results).map(|((gpu, part, _), r)| (gpu, part, r)).collect())
}

/// One summary of the GPUs' runs, with a line per GPU; the first GPU's
/// error, if one failed, after all of them ended.
fn combine(results: Vec<(usize, (u64, u64), Result<Summary>)>) -> Result<Summary> {
    let mut done = Vec::new();
    for (gpu, part, result) in results {
        done.push((gpu, part, result.with_context(|| format!("GPU {gpu}"))?));
    }
    let summaries: Vec<Summary> = done.iter().map(|(_, _, s)| s.clone()).collect();
    let mut all = sum_of(&summaries)?;
    for (gpu, (a, b), s) in &done {
        all.gpus.push(format!(
            "GPU {gpu}: frames {a}..{b}: {} frames, {:.1} fps, {} files, {}",
            s.frames, s.fps, s.sink.written, s.device
        ));
    }
    Ok(all)
}

/// Runs that ran at the same time on different GPUs as one: frames and
/// frame rates add up, medians are the runs' median, the PNG reports merge.
pub(crate) fn sum_of(runs: &[Summary]) -> Result<Summary> {
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

/// A headless run on the device `args` names.
fn run_on(args: &Args, instance: &Arc<Instance>, caught: &Arc<AtomicUsize>, run: Run<'_>) -> Result<Summary> {
    let gpu =
        setup::open_gpu(&args.spec(), instance.clone(), Queue { kind: args.queue_kind(), present: None })?;
    let device = gpu.device.clone();
    let size = args.size_or(Size { width: 1920, height: 1080 });
    // Bad input first, so nothing is written when it is refused.
    setup::check_size(&gpu, size, "--size")?;
    setup::check_size(&gpu, args.target_or(size), "--target-size")?;
    let dumping = args.dump_every > 0;
    let workers = run.workers;
    // One buffer per consumer frame slot (a peer pattern may keep up to 4 in flight).
    let slots = args.in_flight().max(peers::MAX_IN_FLIGHT);
    setup::check_memory(&gpu, memory_need(args, &gpu, size, slots + 2 * workers), &size_words(args, size))?;
    let created = if dumping && !run.out_ready { prepare_out_dir(&args.out)? } else { false };

    let scene = Scene { kind: args.scene, width: size.width, height: size.height, cost: args.cost };
    let director = Arc::new(Director::starting_at(scene, args.first_frame()));
    let target = args.target_or(size);
    let extent = ash::vk::Extent2D { width: target.width, height: target.height };
    let readback = match dumping {
        true => {
            let sink = PngSink::new(&args.out, workers, args.reference(), Inject(args.inject.clone()));
            let shot = Shot { extent, format: args.format, drawn: args.consume == ConsumeKind::Draw };
            let made = Readback::new(device.clone(), director.clone(), shot, slots, sink);
            Some(made.map_err(|e| setup::out_of_memory(e, &size_words(args, size)))?)
        }
        false => None,
    };
    let frame = setup::frame_desc(&args.spec(), size);
    let mut offscreen = Offscreen::new(
        device.clone(),
        (frame, extent),
        (args.consume, args.dump_every, args.consume_copies),
        readback,
    )?;
    eprintln!("vkcuda: {}; {}", device.info, gpu.why);

    let progress = run.progress;
    let span = Span::frames(args.frame_count());
    let result = run_session(&gpu, args, (&director, size), &mut offscreen, span, (caught, progress));
    progress.finish_and_clear();
    let sink = offscreen.finish();
    if created && sink.written == 0 && result.is_err() {
        let _ = std::fs::remove_dir(&args.out);
    }
    let (consumed, report, producer) = result?;
    if let Some(e) = &sink.error {
        anyhow::bail!("{}: {e}", vkcuda_run::encode::writer_name(args.format));
    }
    let validation = device.validation();
    let mut summary = summarize(consumed, report, sink, (producer, size), &validation, caught);
    summary.device = device.info.to_string();
    Ok(summary)
}

/// Whether `e` only says a wait gave up because the other side failed (the
/// other side's error is then the cause).
pub(crate) fn cancelled(e: &anyhow::Error) -> bool {
    e.chain().any(|c| matches!(c.downcast_ref::<vkcuda::Error>(), Some(vkcuda::Error::Cancelled { .. })))
}

/// What the wait that `e` ended was for.
fn awaited(e: &anyhow::Error) -> String {
    e.chain()
        .find_map(|c| match c.downcast_ref::<vkcuda::Error>() {
            Some(vkcuda::Error::Cancelled { what } | vkcuda::Error::TimedOut { what, .. }) => {
                Some(what.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| "a frame".into())
}

/// Whether `e` says a wait for the GPU or the producer timed out.
fn timed_out(e: &anyhow::Error) -> bool {
    e.chain().any(|c| matches!(c.downcast_ref::<vkcuda::Error>(), Some(vkcuda::Error::TimedOut { .. })))
}

/// Starts a session at `size`, consumes it into `offscreen` for `span`, and
/// stops it: what one headless run (or one bench repeat) measures.
pub(crate) fn run_session(
    gpu: &Gpu,
    args: &Args,
    (director, size): (&Arc<Director>, Size),
    offscreen: &mut Offscreen,
    span: Span,
    (caught, progress): (&Arc<AtomicUsize>, &ProgressBar),
) -> Result<(Consumed, Report, &'static str)> {
    if args.handover != Handover::Vkcuda {
        let spec = args.spec();
        return peers::run(
            gpu,
            &spec,
            args.timeline_base,
            (director, size),
            offscreen,
            (span, caught, progress),
        );
    }
    let mut session = Session::start(gpu, &args.spec(), director, size, args.timeline_base)?;
    if let Err(e) = offscreen.bind(session.interop.frames()) {
        let _ = session.stop(offscreen, false);
        return Err(e);
    }
    session.interrupt_with(caught.clone());
    let outcome = consume(&mut session, offscreen, span, caught, progress);
    let signal = caught.load(Ordering::Relaxed);
    let outcome = match outcome {
        // A wait a signal ended: the frame was stuck for STALL (a kernel that does not end?).
        Err(e) if signal != 0 && cancelled(&e) && !session.control.failed() => Err(anyhow!(
            "interrupted by signal {signal} after waiting over {STALL:?} for {} (a kernel that does not end?): \
             stopping without waiting for it",
            awaited(&e)
        )),
        other => other,
    };
    if let Err(e) = &outcome {
        if signal != 0 || timed_out(e) {
            // A frame that never came: the stop must not wait for it again.
            session.control.abandon();
        }
    }
    let producer = session.producer;
    let stopped = session.stop(offscreen, outcome.is_ok());
    match (outcome, stopped) {
        (Ok(mut consumed), Ok(stopped)) => {
            stopped.drained.into_iter().for_each(|c| consumed.completed.push(c.frame, c));
            consumed.total = stopped.consumed.max(consumed.frames);
            Ok((consumed, stopped.report, producer))
        }
        // The side that did not merely give up waiting for the other is the cause.
        (Err(consumer), Err(e)) if cancelled(&e) && !cancelled(&consumer) => Err(consumer),
        (Err(consumer), Err(e)) if cancelled(&consumer) => {
            Err(e.context(format!("the {producer} producer failed")))
        }
        (Err(consumer), Err(e)) => Err(e.context(format!("the {producer} producer failed ({consumer:#})"))),
        (Ok(_), Err(e)) => Err(e.context(format!("the {producer} producer failed"))),
        (Err(consumer), Ok(_)) => Err(consumer),
    }
}

/// Consumes frames until the count is reached, `span`'s steady time is up,
/// or a signal arrives (then the session's stop releases whatever the
/// producer made beyond).
pub(crate) fn consume(
    session: &mut Session,
    offscreen: &mut Offscreen,
    span: Span,
    caught: &AtomicUsize,
    progress: &ProgressBar,
) -> Result<Consumed> {
    let mut clock = SpanClock::new(span);
    let mut completed = Samples::default();
    let (mut footprint, mut half_way) = (None, None);
    while session.next < session.control.limit() && caught.load(Ordering::Relaxed) == 0 {
        let g = session.next;
        if g == session.control.limit() / 2 && clock.steady() {
            half_way = Some(footprint::now(session.cuda.as_ref()));
        }
        match clock.before(g) {
            None => break,
            Some(true) => {
                footprint = Some(footprint::now(session.cuda.as_ref()));
                session.control.set_steady_from(g);
            }
            Some(false) => {}
        }
        if let Some(c) = session.submit(offscreen, ExtraSync::default())? {
            completed.push(c.frame, c);
        }
        if session.next % 64 == 0 {
            progress.set_position(session.next);
        }
    }
    // The last frames count towards the time too: wait until they are consumed.
    session.drain(offscreen)?.into_iter().for_each(|c| completed.push(c.frame, c));
    let footprint =
        footprint.map(|start| [Some(start), half_way, Some(footprint::now(session.cuda.as_ref()))]);
    Ok(clock.finish(session.next, completed, footprint))
}

fn progress_bar(frames: u64) -> ProgressBar {
    let bar = ProgressBar::new(frames);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} frames {per_sec} eta {eta}") {
        bar.set_style(style);
    }
    bar
}

/// The run's summary as JSON (`--json`): what the printed summary says,
/// with every time in µs and the PNG writer's median per stage.
pub fn summary_json(args: &Args, s: &Summary) -> serde_json::Value {
    let us = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e6);
    let stages = s.sink.stages.medians();
    serde_json::json!({
        "frames": s.frames,
        "fps": s.fps,
        "gpus": s.gpus,
        "size": s.size.to_string(),
        "scene": args.scene.to_string(),
        "producer": s.producer,
        "handover": args.handover.name(),
        "sync": args.sync.to_string(),
        "buffers": args.buffers,
        "queue": args.queue_kind().to_string(),
        "median_us": {
            "render": us(s.producer_median),
            "vulkan": us(s.vulkan_median),
            "rendered_to_consumed": us(s.latency_median),
        },
        "cpu_us_per_frame": { "producer_thread": us(s.producer_cpu), "consumer_thread": us(s.consumer_cpu) },
        "png": {
            "written": s.sink.written,
            "verified": s.sink.verified,
            "mismatched": s.sink.mismatched,
            "workers": s.sink.workers,
            "readback_memory": s.sink.readback_memory,
            "readback_buffers": s.sink.readback_buffers,
            "median_us_per_frame": {
                "handoff": us(stages.handoff),
                "buffer_wait": us(stages.buffer_wait),
                "verify": us(stages.verify),
                "encode": us(stages.encode),
                "write": us(stages.write),
            },
        },
        "validation": { "errors": s.validation.errors, "warnings": s.validation.warnings },
        "interrupted_by_signal": s.interrupted,
        "resumed_frames_kept": s.kept,
        "leftovers_removed": s.leftovers_removed,
    })
}

pub(crate) fn summarize(
    c: Consumed,
    report: Report,
    sink: SinkReport,
    (producer, size): (&'static str, Size),
    validation: &ValidationCounts,
    caught: &AtomicUsize,
) -> Summary {
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
