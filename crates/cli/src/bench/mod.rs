//! `vkcuda bench`: the interop pattern against what people do instead, in
//! one process on one GPU. Every variant runs at every size and load,
//! `--repeats` times, each repeat a fresh session (new images, timelines,
//! producer thread) that warms up and then runs for `--seconds`; the table
//! reports the median over repeats of each measure.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;

pub mod chart;
pub mod report;

pub use report::{headline, table, utc_date, Load, Report, Row, Variant};

use crate::cli::{Args, BenchArgs};
use crate::peers::{self, RunPlan};
use crate::words::Flags;
use vkcuda::sync::SyncScheme;
use vkcuda::types::QueueKind;
use vkcuda::vk::device::Queue;
use vkcuda::vk::instance::Instance;
use vkcuda::{Format, Layout};
use vkcuda_run::base::kinds::{ConsumeKind, ProducerKind};
use vkcuda_run::base::size::Size;
use vkcuda_run::cuda::pairing;
use vkcuda_run::drive::measure::Span;
use vkcuda_run::drive::sink::SinkReport;
use vkcuda_run::drive::to_end::{sum_of, summarize, watch_signals, Monitor, Summary};
use vkcuda_run::error::usage::Field;
use vkcuda_run::frames::gpu::{self, DeviceChoice, Gpu};
use vkcuda_run::metrics::stats::median_f64;
use vkcuda_run::output::outfile::{check_output, write_atomically};
use vkcuda_run::present::offscreen::{Offscreen, OffscreenShape, OffscreenWork};
use vkcuda_run::scene::director::Director;
use vkcuda_run::scene::{Scene, SceneKind, MAX_COST};

/// Runs `vkcuda bench`.
pub fn run(args: &Args, bench: &BenchArgs) -> Result<Report> {
    for (path, ext) in [(&bench.json, None), (&bench.chart, Some("svg")), (&bench.markdown, None)] {
        if let Some(p) = path {
            check_output(p, ext)?;
        }
    }
    let caught = watch_signals()?;
    let instance = gpu::vulkan_instance(args.validate, &[])?;
    let mut rows = Vec::new();
    let mut about = None;
    let frames: Vec<(Format, Layout)> =
        bench.formats.iter().flat_map(|f| bench.layouts.iter().map(move |l| (*f, *l))).collect();
    let mut loads = bench.loads.clone();
    if args.kernel.is_some() && !loads.contains(&Load::Kernel) {
        loads.push(Load::Kernel);
    }
    let total = bench.queues.len() * bench.sizes.len() * loads.len() * bench.variants.len() * frames.len();
    for queue in &bench.queues {
        // One device per queue kind, one at a time, on the same GPU.
        let mut args = args.clone();
        args.queue = Some(*queue);
        let args = &args;
        let gpus = open_gpus(args, &instance, *queue)?;
        for gpu in &gpus {
            for size in &bench.sizes {
                gpu::check_size(gpu, *size, Field::Size)?;
            }
            eprintln!("vkcuda: {}, {queue:?} queue; {}", gpu.device.info(), gpu.why.worded(&Flags));
        }
        let gpu = &gpus[0];
        about.get_or_insert_with(|| device_words(&gpus));
        for size in &bench.sizes {
            for load in &loads {
                let balance = match load {
                    Load::Cheap | Load::Kernel => Balance { copies: 1, cost: 1 },
                    Load::Balanced => balance(gpu, args, *size, &caught)?,
                };
                for variant in &bench.variants {
                    for &(format, layout) in &frames {
                        let mut args = args.clone();
                        (args.format, args.layout) = (format, layout);
                        let case = Case { variant: *variant, size: *size, load: *load, balance };
                        let row = run_variant(&gpus, &args, bench, case, &caught)?;
                        if caught.load(Ordering::Relaxed) != 0 {
                            bail!(Interrupted(caught.load(Ordering::Relaxed) as i32));
                        }
                        eprintln!("[{}/{total}] {}", rows.len() + 1, progress_line(&row));
                        rows.push(row);
                    }
                }
            }
        }
    }
    let About { device, driver, cuda } = about.unwrap_or_default();
    let report = Report {
        device,
        driver,
        cuda,
        date: utc_date(std::time::SystemTime::now()),
        version: env!("CARGO_PKG_VERSION").into(),
        repeats: bench.repeats,
        seconds: bench.seconds,
        variants: bench.variants.iter().map(|v| (*v, v.describe())).collect(),
        rows,
        validation: args.validate.then(|| instance.validation().counts()),
    };
    write_outputs(bench, &report)?;
    Ok(report)
}

/// The machine a report was measured on.
#[derive(Default)]
struct About {
    /// The device (`--gpu all`: how many GPUs).
    device: String,
    /// Its Vulkan driver.
    driver: String,
    /// The CUDA driver's version, with a CUDA device.
    cuda: Option<String>,
}

/// The device, driver and CUDA driver version a report names (`--gpu all`: how many GPUs).
fn device_words(gpus: &[Gpu]) -> About {
    let gpu = &gpus[0];
    let name = gpu.device.info().name.clone();
    About {
        device: if gpus.len() > 1 { format!("{} GPUs: {name}", gpus.len()) } else { name },
        driver: gpu.device.info().driver.trim().to_string(),
        cuda: gpu.cuda.as_ref().and_then(|_| vkcuda::cuda::driver_version().ok()),
    }
}

/// The JSON, the chart and the headline table, each where it was asked for.
fn write_outputs(bench: &BenchArgs, report: &Report) -> Result<()> {
    if let Some(p) = &bench.json {
        write_atomically(p, serde_json::to_string_pretty(report)?.as_bytes())?;
    }
    if let Some(p) = &bench.chart {
        write_atomically(p, chart::svg(report).as_bytes())?;
    }
    if let Some(p) = &bench.markdown {
        write_atomically(p, headline(report).as_bytes())?;
    }
    Ok(())
}

/// A bench stopped by SIGINT/SIGTERM: no output files are written.
#[derive(Debug)]
pub struct Interrupted(pub i32);

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "interrupted by signal {}: nothing written", self.0)
    }
}

impl std::error::Error for Interrupted {}

/// The bench's devices: the one `--gpu` names, or with `--gpu all` every GPU
/// with a CUDA twin (every device with `--producer cpu`).
fn open_gpus(args: &Args, instance: &Arc<Instance>, queue: QueueKind) -> Result<Vec<Gpu>> {
    let queue = || Queue { kind: queue, present: None };
    if !args.all_gpus() {
        return Ok(vec![gpu::open_gpu(&args.device_choice(), instance.clone(), queue())?]);
    }
    let mut gpus = Vec::new();
    for index in pairing::every_gpu(instance, args.producer)? {
        let choice = DeviceChoice { gpu: Some(index.to_string()), announce: false, ..args.device_choice() };
        gpus.push(gpu::open_gpu(&choice, instance.clone(), queue())?);
    }
    Ok(gpus)
}

/// One row of the bench: a variant at a size and load.
#[derive(Clone, Copy, Debug)]
struct Case {
    /// The hand-over pattern and its options.
    variant: Variant,
    /// The frames' size.
    size: Size,
    /// The work on either side.
    load: Load,
    /// What the balanced load takes at this size (copies and cost).
    balance: Balance,
}

/// Runs one `case` `--repeats` times and takes the medians; with several
/// GPUs, each repeat runs the variant on all of them at once.
fn run_variant(
    gpus: &[Gpu],
    args: &Args,
    bench: &BenchArgs,
    case: Case,
    caught: &Arc<AtomicUsize>,
) -> Result<Row> {
    let Case { variant, size, load, balance } = case;
    let gpu = &gpus[0];
    let kind = if load == Load::Balanced { SceneKind::Julia } else { SceneKind::Gradient };
    let scene = Scene { kind, width: size.width, height: size.height, cost: balance.cost };
    let mut args = args.clone();
    args.consume_copies = balance.copies;
    // Your kernel is the kernel load; every other load runs the built-in scene.
    if load != Load::Kernel {
        args.kernel = None;
    }
    let kernel = args.kernel.clone();
    let args = &args;
    let mut row = Row {
        variant,
        queue: args.queue_kind(),
        format: args.format,
        layout: args.layout,
        size: size.to_string(),
        load,
        scene: match &kernel {
            Some(file) => {
                file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into())
            }
            None => scene.kind.to_string(),
        },
        cost: balance.cost,
        copies: balance.copies,
        skipped: None,
        fps: None,
        us_per_frame: None,
        render_us: None,
        vulkan_us: None,
        producer_cpu_us: None,
        consumer_cpu_us: None,
        latency_us: None,
        busiest_thread_core: None,
        fps_repeats: Vec::new(),
    };
    if let Some(why) = skip_reason(variant, args, gpu, kernel.is_some()) {
        row.skipped = Some(why.into());
        return Ok(row);
    }
    let span = Span {
        warmup_frames: 5,
        warmup_time: Duration::from_secs_f64(bench.warmup),
        steady_time: Some(Duration::from_secs_f64(bench.seconds)),
    };
    let mut runs = Vec::new();
    for _ in 0..bench.repeats {
        if caught.load(Ordering::Relaxed) != 0 {
            break;
        }
        runs.push(measure_all(gpus, args, variant, scene, span, caught)?);
    }
    fill_medians(&mut row, &runs);
    Ok(row)
}

/// Why `variant` does not run in this configuration, if it does not.
fn skip_reason(variant: Variant, args: &Args, gpu: &Gpu, kernel: bool) -> Option<&'static str> {
    if variant.is_peer() && (args.format, args.layout) != (Format::Rgba8, Layout::Array) {
        return Some("the peers' patterns run RGBA8 arrays");
    }
    if variant.needs_cuda() && gpu.cuda.is_none() {
        return Some("no CUDA device");
    }
    if kernel && !matches!(variant, Variant::Interop { .. } | Variant::Draw { .. }) {
        return Some("your kernel runs on vkcuda's CUDA producer (split-N, shared-N, draw-N)");
    }
    if matches!(variant, Variant::Draw { .. }) && args.queue_kind() == QueueKind::Transfer {
        return Some("the draw is a compute shader: it needs a compute queue (--queues compute or graphics)");
    }
    None
}

/// A row's figures: the medians of its repeats.
fn fill_medians(row: &mut Row, runs: &[Summary]) {
    let med = |f: &dyn Fn(&Summary) -> Option<Duration>| {
        let v: Vec<f64> = runs.iter().filter_map(f).map(|d| d.as_secs_f64() * 1e6).collect();
        median_f64(&v)
    };
    row.fps_repeats = runs.iter().map(|s| s.fps).collect();
    row.fps = median_f64(&row.fps_repeats);
    row.us_per_frame = row.fps.map(|f| 1e6 / f);
    row.render_us = med(&|s| s.producer_median);
    row.vulkan_us = med(&|s| s.vulkan_median);
    row.producer_cpu_us = med(&|s| s.producer_cpu);
    row.consumer_cpu_us = med(&|s| s.consumer_cpu);
    row.latency_us = med(&|s| s.latency_median);
    let busiest = row.producer_cpu_us.unwrap_or(0.0).max(row.consumer_cpu_us.unwrap_or(0.0));
    row.busiest_thread_core = row.us_per_frame.filter(|_| busiest > 0.0).map(|us| busiest / us);
}

/// One repeat on every GPU at once (a thread each): their frame rates add up.
fn measure_all(
    gpus: &[Gpu],
    args: &Args,
    variant: Variant,
    scene: Scene,
    span: Span,
    caught: &Arc<AtomicUsize>,
) -> Result<Summary> {
    if let [gpu] = gpus {
        return measure(gpu, args, variant, scene, span, caught);
    }
    let runs = pairing::on_each(gpus, |gpu| measure(gpu, args, variant, scene, span, caught));
    sum_of(&runs.into_iter().collect::<Result<Vec<_>>>()?)
}

/// One repeat: a fresh session, warmed up, then run for the span.
fn measure(
    gpu: &Gpu,
    args: &Args,
    variant: Variant,
    scene: Scene,
    span: Span,
    caught: &Arc<AtomicUsize>,
) -> Result<Summary> {
    let mut args = args.clone();
    apply(variant, &mut args);
    args.headless = true;
    args.dump_every = 0;
    args.verify = false;
    args.frames = Some(1 << 40); // the span's time ends the run
    args.scene = scene.kind;
    args.cost = scene.cost;
    let size = Size { width: scene.width, height: scene.height };
    let director = Arc::new(Director::new(scene));
    let extent = ash::vk::Extent2D { width: size.width, height: size.height };
    let work = OffscreenWork { kind: args.consume, dump_every: 0, copies: args.consume_copies };
    let frame = args.frame_desc(size);
    let mut offscreen = Offscreen::new(gpu.device.clone(), OffscreenShape { frame, extent }, work, None)?;
    let hidden = ProgressBar::hidden();
    let spec = args.spec(gpu, director.clone())?;
    let plan = RunPlan { spec: &spec, base: args.timeline_base, director: &director, desc: frame };
    let monitor = Monitor { span, caught, progress: &hidden };
    let measured = peers::run_handover(args.handover, gpu, plan, &mut offscreen, monitor)
        .with_context(|| format!("bench variant {variant} at {size}"))?;
    let validation = gpu.device.validation();
    Ok(summarize(measured, SinkReport::default(), size, &validation, caught))
}

/// How long each side of the balanced load works per frame.
pub const BALANCED_TARGET: Duration = Duration::from_micros(500);

/// The balanced load at one size: the consume step copies the frame
/// `copies` times, and julia runs `cost` iterations per pixel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Balance {
    /// Full-image copies of the consume step.
    pub copies: u32,
    /// Julia iterations per pixel.
    pub cost: u32,
}

/// Calibrates the balanced load: a cheap run measures one copy on the
/// Vulkan side, so `copies` brings the consume step near
/// [`BALANCED_TARGET`]; two julia runs give the kernel's time per iteration
/// (it is linear in the cost: every pixel runs exactly `cost` iterations),
/// so `cost` makes the kernel (or, without CUDA, the CPU render) take as long
/// as that consume step. Deep pipelining (3 images) keeps the two sides from
/// waiting for each other while they are measured.
fn balance(gpu: &Gpu, args: &Args, size: Size, caught: &Arc<AtomicUsize>) -> Result<Balance> {
    let variant = match gpu.cuda {
        Some(_) => Variant::Interop { sync: SyncScheme::Split, buffers: 3 },
        None => Variant::Cpu,
    };
    let span = Span {
        warmup_frames: 10,
        warmup_time: Duration::from_millis(50),
        steady_time: Some(Duration::from_millis(150)),
    };
    let at = |kind: SceneKind, cost: u32| -> Result<Summary> {
        let scene = Scene { kind, width: size.width, height: size.height, cost };
        let mut args = args.clone();
        args.consume_copies = 1;
        args.kernel = None;
        measure(gpu, &args, variant, scene, span, caught)
    };
    let us = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1e6);
    let copy = us(at(SceneKind::Gradient, 1)?.vulkan_median).max(0.1);
    let target = BALANCED_TARGET.as_secs_f64() * 1e6;
    let copies = (target / copy).round().clamp(1.0, 64.0) as u32;
    let vulkan = copy * f64::from(copies);
    let (c1, c2) = (16u32, 256u32);
    let (p1, p2) =
        (us(at(SceneKind::Julia, c1)?.producer_median), us(at(SceneKind::Julia, c2)?.producer_median));
    let per_iteration = ((p2 - p1) / f64::from(c2 - c1)).max(1e-3);
    let cost = (f64::from(c1) + (vulkan - p1) / per_iteration).round().clamp(1.0, f64::from(MAX_COST)) as u32;
    eprintln!(
        "vkcuda: balanced load at {size}: one copy {copy:.1} µs × {copies} copies = {vulkan:.0} µs; \
         kernel {p1:.1} µs at cost {c1}, {p2:.1} µs at cost {c2} → cost {cost}"
    );
    Ok(Balance { copies, cost })
}

/// Sets the run options that make `args` run `variant`.
fn apply(variant: Variant, args: &mut Args) {
    args.consume = ConsumeKind::Copy;
    match variant {
        Variant::Interop { sync, buffers } => {
            args.sync = sync;
            args.buffers = buffers;
            args.producer = ProducerKind::Cuda;
        }
        Variant::Draw { buffers } => {
            (args.sync, args.buffers) = (SyncScheme::Split, buffers);
            args.producer = ProducerKind::Cuda;
            args.consume = ConsumeKind::Draw;
        }
        Variant::Peer(h) => {
            args.handover = h;
            args.producer = ProducerKind::Cuda;
        }
        Variant::Staging | Variant::Cpu => {
            // Host-signalled frames: two staging buffers, one timeline per signaller.
            args.sync = SyncScheme::Split;
            args.buffers = 2;
            args.producer =
                if variant == Variant::Staging { ProducerKind::Staging } else { ProducerKind::Cpu };
        }
    }
}

fn progress_line(row: &Row) -> String {
    match (&row.skipped, row.fps) {
        (Some(why), _) => format!(
            "{} {} {}/{} {} {}: skipped: {why}",
            row.queue, row.variant, row.format, row.layout, row.size, row.load
        ),
        (None, Some(fps)) => format!(
            "{} {} {}/{} {} {}: {fps:.0} fps",
            row.queue, row.variant, row.format, row.layout, row.size, row.load
        ),
        (None, None) => format!("{} {} {} {}: no frames", row.queue, row.variant, row.size, row.load),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse_and_print() {
        for s in [
            "split-1",
            "split-3",
            "shared-2",
            "split-8",
            "staging",
            "cpu",
            "cpu-gated",
            "host-wait",
            "binary",
        ] {
            assert_eq!(s.parse::<Variant>().unwrap().to_string(), s);
        }
        for bad in ["split", "split-0", "split-9", "shared-x", "both-2", ""] {
            assert!(bad.parse::<Variant>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn headline_compares_with_the_best_peer() {
        let row = |variant: &str, fps: f64, cpu: (Option<f64>, f64)| Row {
            variant: variant.parse().unwrap(),
            queue: QueueKind::Transfer,
            format: vkcuda::Format::Rgba8,
            layout: vkcuda::Layout::Array,
            size: "1920x1080".into(),
            load: Load::Cheap,
            scene: "gradient".into(),
            cost: 1,
            copies: 1,
            skipped: None,
            fps: Some(fps),
            us_per_frame: Some(1e6 / fps),
            render_us: None,
            vulkan_us: None,
            producer_cpu_us: cpu.0,
            consumer_cpu_us: Some(cpu.1),
            latency_us: None,
            busiest_thread_core: Some(0.25),
            fps_repeats: vec![fps],
        };
        let rows = vec![
            row("binary", 2000.0, (None, 50.0)),
            row("split-2", 5000.0, (Some(30.0), 20.0)),
            row("split-3", 9000.0, (Some(30.0), 20.0)),
            row("cpu-gated", 1000.0, (None, 40.0)),
            row("staging", 500.0, (Some(900.0), 100.0)),
        ];
        let report = Report {
            device: "d".into(),
            driver: "v".into(),
            cuda: None,
            date: "2026-11-24".into(),
            version: "0".into(),
            repeats: 1,
            seconds: 1.0,
            rows,
            variants: Vec::new(),
            validation: None,
        };
        let md = headline(&report);
        let lines: Vec<&str> = md.lines().skip(2).collect();
        // vkcuda's default first, the peers, staging last; split-3 is not the default: left out.
        assert_eq!(lines.len(), 4, "{md}");
        assert!(lines[0].contains("**vkcuda** (split-2) | 5000 | 200.0 | 50.0 | 25 | 2.50×"), "{md}");
        assert!(lines[1].contains("binary | 2000 | 500.0 | 50.0 | 25 | 1.00×"), "{md}");
        assert!(lines[2].contains("cpu-gated | 1000 |") && lines[2].ends_with("0.50× |"), "{md}");
        assert!(lines[3].contains("staging | 500 |") && lines[3].contains("| 1000.0 |"), "{md}");
    }

    #[test]
    fn dates_and_medians() {
        let at = |s: u64| std::time::UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(utc_date(at(0)), "1970-01-01");
        assert_eq!(utc_date(at(951_782_400)), "2000-02-29");
        assert_eq!(utc_date(at(1_795_305_600)), "2026-11-22");
        assert_eq!(median_f64(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_f64(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median_f64(&[]), None);
    }

    #[test]
    fn balanced_help_states_the_target() {
        use clap::ValueEnum;
        let help = Load::Balanced.to_possible_value().and_then(|v| v.get_help().map(|h| h.to_string()));
        let help = help.unwrap_or_default();
        assert_eq!(BALANCED_TARGET, Duration::from_micros(500), "the help says 0.5 ms: {help}");
        assert!(help.contains("0.5 ms") && !help.contains('['), "help: {help}");
    }
}
