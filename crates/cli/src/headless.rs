//! The headless run: the producer on its thread, the offscreen consumer on
//! this one, frames dumped to PNG, and a summary with measured timings.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::Args;
use crate::controls::RunControls;
use crate::peers::{self, RunPlan};
use crate::words::Flags;
use vkcuda::vk::device::Queue;
use vkcuda::vk::instance::{Instance, ValidationCounts};
use vkcuda::{Format, FrameDesc, Layout};
use vkcuda_run::base::kinds::{ConsumeKind, ProducerKind};
use vkcuda_run::base::size::Size;
use vkcuda_run::cuda::pairing;
use vkcuda_run::diagnostics::inject::Inject;
use vkcuda_run::diagnostics::xid;
use vkcuda_run::drive::child::{child_failure, Restart};
use vkcuda_run::drive::dumpdir;
use vkcuda_run::drive::measure::Span;
use vkcuda_run::drive::sink::{PngSink, SinkReport};
use vkcuda_run::drive::to_end::{
    png_workers, prepare_out_dir, spare_cores, sum_of, summarize, watch_signals, MadeBy, Measured, Monitor,
    Summary, ViewReport, MAX_PNG_WORKERS,
};
use vkcuda_run::error::failure::Remakes;
use vkcuda_run::error::usage::{Field, Message};
use vkcuda_run::for_people;
use vkcuda_run::frames::gpu::{self, Gpu, MemoryNeed};
use vkcuda_run::kernel::reload::KernelReload;
use vkcuda_run::output::outfile;
use vkcuda_run::present::offscreen::{Offscreen, OffscreenShape, OffscreenWork};
use vkcuda_run::present::readback::{Pixels, Readback, Shot};
use vkcuda_run::present::watch::Watch;
use vkcuda_run::scene::director::Director;
use vkcuda_run::scene::Scene;
use vkcuda_serve::{Bound, View};

/// The frame and target sizes as the user gave them, for messages.
fn size_words(args: &Args, size: Size) -> Message {
    let words = Message::new().field(Field::Size, size);
    match args.target_or(size) {
        t if t == size => words,
        t => words.text(" with ").field(Field::TargetSize, t),
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

/// Runs `--headless`: on one GPU, or with `--gpu all` on each; with
/// `--resume`, only the runs of frames `--out` lacks, one after another.
pub fn run(args: &Args) -> Result<Summary> {
    if let Some(p) = &args.json {
        outfile::check_output(p, None)?;
    }
    // The view's port first: one in use is the first error, before any GPU work.
    let view = args.serve.map(|a| a.bind().with_context(|| format!("--serve {}", a.0))).transpose()?;
    let caught = watch_signals()?;
    let instance = gpu::vulkan_instance(args.validate, &[])?;
    // A killed run of these frames may have left temporary files: they go (other shards' stay).
    let removed = match args.dump_every > 0 {
        true => dumpdir::remove_leftovers(&args.out, args.frame_range())?,
        false => 0,
    };
    let mut summary = match args.resume {
        true => resume(args, &instance, &caught)?,
        false => run_parts(args, &instance, &caught, view)?,
    };
    summary.leftovers_removed = removed;
    Ok(summary)
}

/// The frames `args` names, on one GPU or (`--gpu all`) on each; `view`: served there.
fn run_parts(
    args: &Args,
    instance: &Arc<Instance>,
    caught: &Arc<AtomicUsize>,
    view: Option<Bound>,
) -> Result<Summary> {
    if args.all_gpus() {
        return run_all(args, instance, caught);
    }
    let progress = progress_bar(args.frame_count());
    let run = Run { workers: png_workers(), progress: &progress, out_ready: false, view };
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
        sub.part = Some(part.clone());
        let summary = run_parts(&sub, instance, caught, None)?;
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
        producer: MadeBy::Nothing,
        view: None,
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
    /// `--serve`: the bound address.
    view: Option<Bound>,
}

/// `--gpu all`: one interop per GPU (own device, CUDA context, threads and
/// PNG writers, the cores shared out), each on its own thread rendering an
/// equal, contiguous part of the frames, numbered in the whole run, into the
/// same `--out`; one summary, with a line per GPU.
fn run_all(args: &Args, instance: &Arc<Instance>, caught: &Arc<AtomicUsize>) -> Result<Summary> {
    let gpus = pairing::every_gpu(instance, args.producer)?;
    let Range { start: first, end } = args.frame_range();
    let n = gpus.len() as u64;
    let parts: Vec<(usize, Range<u64>)> = gpus
        .iter()
        .enumerate()
        .map(|(i, &g)| (g, first + (end - first) * i as u64 / n..first + (end - first) * (i as u64 + 1) / n))
        .filter(|(_, frames)| !frames.is_empty())
        .collect();
    if args.dump_every > 0 {
        prepare_out_dir(&args.out)?;
    }
    let bars = indicatif::MultiProgress::new();
    // The PNG pool is sized for all the GPUs: the spare cores shared out, up to 16 per GPU.
    let workers = (spare_cores() / parts.len()).clamp(1, MAX_PNG_WORKERS);
    let jobs: Vec<GpuPart> = (parts.into_iter())
        .map(|(gpu, frames)| {
            let progress = bars.add(progress_bar(frames.end - frames.start));
            GpuPart { gpu, frames, progress }
        })
        .collect();
    let results = pairing::on_each(&jobs, |job| {
        let mut sub = args.clone();
        (sub.gpu, sub.part, sub.json) = (Some(job.gpu.to_string()), Some(job.frames.clone()), None);
        let run = Run { workers, progress: &job.progress, out_ready: true, view: None };
        run_on(&sub, instance, caught, run)
    });
    combine(
        jobs.into_iter()
            .zip(results)
            .map(|(part, result)| PartRun { gpu: part.gpu, frames: part.frames, result })
            .collect(),
    )
}

/// One GPU's part of a `--gpu all` run.
struct GpuPart {
    /// The CUDA ordinal of the GPU.
    gpu: usize,
    /// Its frames, numbered in the whole run.
    frames: Range<u64>,
    /// Its bar.
    progress: ProgressBar,
}

/// What one GPU's part of a `--gpu all` run did.
struct PartRun {
    /// The CUDA ordinal of the GPU.
    gpu: usize,
    /// Its frames, numbered in the whole run.
    frames: Range<u64>,
    /// Its summary, or why it failed.
    result: Result<Summary>,
}

/// One summary of the GPUs' runs, with a line per GPU; the first GPU's
/// error, if one failed, after all of them ended.
fn combine(results: Vec<PartRun>) -> Result<Summary> {
    let (mut summaries, mut lines) = (Vec::new(), Vec::new());
    for PartRun { gpu, frames, result } in results {
        let s = result.with_context(|| format!("GPU {gpu}"))?;
        lines.push(format!(
            "GPU {gpu}: frames {}..{}: {} frames, {:.1} fps, {} files, {}",
            frames.start, frames.end, s.frames, s.fps, s.sink.written, s.device
        ));
        summaries.push(s);
    }
    let mut all = sum_of(&summaries)?;
    all.gpus.extend(lines);
    Ok(all)
}

/// A headless run on the device `args` names.
fn run_on(args: &Args, instance: &Arc<Instance>, caught: &Arc<AtomicUsize>, run: Run<'_>) -> Result<Summary> {
    let mut gpu = open_gpu(args, instance)?;
    let device = gpu.device.clone();
    let size = args.size_or(Size { width: 1920, height: 1080 });
    // Bad input first, so nothing is written when it is refused.
    gpu::check_size(&gpu, size, Field::Size)?;
    gpu::check_size(&gpu, args.target_or(size), Field::TargetSize)?;
    let dumping = args.dump_every > 0;
    let workers = run.workers;
    // One buffer per consumer frame slot (a peer pattern may keep up to 4 in flight).
    let slots = args.in_flight().max(peers::MAX_IN_FLIGHT);
    gpu::check_memory(&gpu, memory_need(args, &gpu, size, slots + 2 * workers), &size_words(args, size))?;
    let created = if dumping && !run.out_ready { prepare_out_dir(&args.out)? } else { false };

    let scene = Scene { kind: args.scene, width: size.width, height: size.height, cost: args.cost };
    let director = Arc::new(Director::starting_at(scene, args.first_frame()));
    let target = args.target_or(size);
    let extent = ash::vk::Extent2D { width: target.width, height: target.height };
    let sink =
        dumping.then(|| PngSink::new(&args.out, workers, args.reference(), Inject(args.inject.clone())));
    let readback = match &sink {
        Some(sink) => {
            let pixels = if args.consume == ConsumeKind::Draw { Pixels::Rgba8 } else { Pixels::Rendered };
            let shot = Shot { extent, format: args.format, pixels, first: director.first() };
            let made = Readback::new(device.clone(), shot, slots, sink.recipient(Some(director.clone()))?);
            Some(made.map_err(|e| gpu::out_of_memory(e, &size_words(args, size)))?)
        }
        None => None,
    };
    let frame = args.frame_desc(size);
    let shape = OffscreenShape { frame, extent };
    let mut offscreen = Offscreen::new(device.clone(), shape, offscreen_work(args), readback)?;
    eprintln!("vkcuda: {}; {}", device.info(), gpu.why.worded(&Flags));
    let mut served = match run.view {
        Some(bound) => {
            let drawn = Drawn { instance, gpu: &gpu, slots, shape };
            Some(Served::start(args, bound, drawn, &director, &mut offscreen)?)
        }
        None => None,
    };
    // From here the run's device is `gpu`'s: a lost one made again is dropped
    // when replaced, not kept to the end by this handle.
    drop(device);
    let progress = run.progress;
    let span = Span::frames(args.frame_count());
    let monitor = Monitor { span, caught, progress };
    let result = run_until_done(args, &mut gpu, &director, frame, &mut offscreen, served.as_ref(), monitor);
    progress.finish_and_clear();
    let (view, read) = (served.as_ref().map(|s| s.report(&offscreen)), offscreen.finish());
    if let Some(served) = &mut served {
        served.stop();
    }
    let sink = sink.map(|s| s.finish().with_readback(read)).unwrap_or_default();
    if created && sink.written == 0 && result.is_err() {
        let _ = std::fs::remove_dir(&args.out);
    }
    let measured = result?;
    if let Some(e) = &sink.error {
        anyhow::bail!("{e}");
    }
    // The device the run ended on (made again if one was lost); its validation
    // messages are counted on the instance, with those of the one before.
    let validation = gpu.device.validation();
    let mut summary = summarize(measured, sink, size, &validation, caught);
    summary.device = gpu.device.info().to_string();
    summary.view = view;
    Ok(summary)
}

/// The device `args` names, with a queue for the headless run.
fn open_gpu(args: &Args, instance: &Arc<Instance>) -> Result<Gpu> {
    gpu::open_gpu(&args.device_choice(), instance.clone(), Queue { kind: args.queue_kind(), present: None })
}

/// Runs the session (`span` of it); served with `--kernel`, a kernel whose
/// fault ended its child ends that session only, and the run goes on with
/// the next save that compiles; served with its producer in a child, a
/// Vulkan device the driver lost is made again and the run goes on.
fn run_until_done(
    args: &Args,
    gpu: &mut Gpu,
    director: &Arc<Director>,
    frame: FrameDesc,
    offscreen: &mut Offscreen,
    served: Option<&Served>,
    monitor: Monitor<'_>,
) -> Result<Measured> {
    let reload = served.and_then(|s| s.reload.clone());
    let caught = monitor.caught;
    loop {
        let result = args.spec_reloading(gpu, director, reload.as_deref()).and_then(|spec| {
            let run = RunPlan { spec: &spec, base: args.timeline_base, director, desc: frame };
            peers::run_handover(args.handover, gpu, run, offscreen, monitor)
        });
        let (Some(served), Err(e)) = (served, &result) else { return result };
        if served.remakes(args, e) {
            eprintln!(
                "vkcuda: {}\nvkcuda: making the Vulkan device again; the run goes on",
                for_people(&format!("{e:#}"))
            );
            served.remake(args, gpu, offscreen)?;
            continue;
        }
        match child_failure(e) {
            Some(why) if served.recovered(&why, caught) => {}
            _ => return result,
        }
    }
}

/// `--serve`: the browser view of a run: its server, the hub its clients
/// wait in, and (with `--kernel`) the hot reload the page's R key triggers.
struct Served {
    view: View,
    reload: Option<Arc<KernelReload>>,
    controls: Arc<RunControls>,
    /// What making the Vulkan side again takes: the instance, the frame and
    /// target, the slots; and when it was made again last.
    instance: Arc<Instance>,
    shape: OffscreenShape,
    slots: usize,
    remakes: std::cell::Cell<Remakes>,
}

/// What the view's draws are made with, and made again with.
struct Drawn<'a> {
    /// The run's instance (a device made again is made on it).
    instance: &'a Arc<Instance>,
    /// The run's device.
    gpu: &'a Gpu,
    /// Frames in flight the draws keep buffers for.
    slots: usize,
    /// The frames and the offscreen target.
    shape: OffscreenShape,
}

/// What the offscreen consumer of `args`' headless run does with each frame.
fn offscreen_work(args: &Args) -> OffscreenWork {
    OffscreenWork { kind: args.consume, dump_every: args.dump_every, copies: args.consume_copies }
}

impl Served {
    /// Serves `director`'s run on `bound`: `offscreen` draws each frame for the clients too.
    fn start(
        args: &Args,
        bound: Bound,
        drawn: Drawn<'_>,
        director: &Arc<Director>,
        offscreen: &mut Offscreen,
    ) -> Result<Self> {
        let Drawn { instance, gpu, slots, shape } = drawn;
        let mut view = View::new(spare_cores().clamp(1, MAX_ENCODERS));
        offscreen.set_watch(Watch::new(gpu.device.clone(), args.format, slots, view.hub.clone())?);
        let reload = args.kernel_spec().map(|k| KernelReload::start(&k)).transpose()?.map(Arc::new);
        let what = args.kernel.as_ref().map(|k| k.display().to_string());
        let controls = Arc::new(RunControls::new(director.clone(), reload.clone(), what));
        view.serve(bound, controls.clone())?;
        eprintln!("vkcuda: watch it at {}", view.url().unwrap_or_default());
        let instance = instance.clone();
        Ok(Self { view, reload, controls, instance, shape, slots, remakes: Default::default() })
    }

    /// What the view took of the run's frames and what handing them over cost
    /// `offscreen`'s consumer: read before the view stops.
    fn report(&self, offscreen: &Offscreen) -> ViewReport {
        ViewReport { handoff: offscreen.handoff().unwrap_or_default(), sent: self.view.hub.sent() }
    }

    /// Whether the device `e` says was lost is made again ([`Remakes`]):
    /// also, nothing is written to files (their frames in flight are gone).
    fn remakes(&self, args: &Args, e: &anyhow::Error) -> bool {
        let child = matches!(args.child_command(), Ok(Some(_)));
        self.remakes.get().due(e, child && args.dump_every == 0)
    }

    /// Makes the Vulkan side of the run again (`gpu`, `offscreen` and the
    /// clients' draws), dropping the lost one's objects before its device.
    fn remake(&self, args: &Args, gpu: &mut Gpu, offscreen: &mut Offscreen) -> Result<()> {
        let made = open_gpu(args, &self.instance).context("making the Vulkan device again")?;
        let mut fresh = Offscreen::new(made.device.clone(), self.shape, offscreen_work(args), None)?;
        fresh.set_watch(Watch::new(made.device.clone(), args.format, self.slots, self.view.hub.clone())?);
        *offscreen = fresh;
        *gpu = made;
        let mut remakes = self.remakes.get();
        remakes.made();
        self.remakes.set(remakes);
        Ok(())
    }

    /// After the kernel's child failed (`why`): says so on every page, over
    /// the last frame, and waits for a save that compiles (`true`: run it)
    /// or a signal (`false`).
    fn recovered(&self, why: &str, caught: &AtomicUsize) -> bool {
        let Some(reload) = &self.reload else { return false };
        let restart = Restart::after_failure(reload.link());
        eprintln!(
            "vkcuda: {why}\nvkcuda: the page shows the last frame; save a fix and the run goes on with it"
        );
        xid::say_fault_hint_once();
        self.controls.set_fault(Some(why.to_string()));
        while caught.load(Ordering::Relaxed) == 0 {
            if restart.ready() {
                self.controls.set_fault(None);
                eprintln!("vkcuda: the fix runs");
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Closes the clients, frees the port, stops the encoders.
    fn stop(&mut self) {
        self.view.stop();
    }
}

/// Encoder threads of a served run, at most.
const MAX_ENCODERS: usize = 8;

fn progress_bar(frames: u64) -> ProgressBar {
    let bar = ProgressBar::new(frames);
    let template = match frames >= crate::cli::UNTIL_STOPPED {
        // A served run goes on until stopped: frames and rate, no end.
        true => "{pos} frames {per_sec}",
        false => "{bar:40} {pos}/{len} frames {per_sec} eta {eta}",
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
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
        "producer": s.producer.to_string(),
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
        "view": s.view.map(|v| serde_json::json!({
            "frames": v.handoff.frames,
            "sent": v.sent,
            "handoff_us": { "total": v.handoff.total.as_secs_f64() * 1e6, "longest": v.handoff.longest.as_secs_f64() * 1e6 },
        })),
        "interrupted_by_signal": s.interrupted,
        "resumed_frames_kept": s.kept,
        "leftovers_removed": s.leftovers_removed,
    })
}
