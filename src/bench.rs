//! `vkcuda bench`: the interop pattern against what people do instead, in
//! one process on one GPU. Every variant runs at every size and load,
//! `--repeats` times, each repeat a fresh session (new images, timelines,
//! producer thread) that warms up and then runs for `--seconds`; the table
//! reports the median over repeats of each measure.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::cli::{Args, ProducerKind, Size};
use crate::director::Director;
use crate::headless::{run_session, summarize, watch_signals, Span, Summary};
use crate::present::offscreen::Offscreen;
use crate::scene::{Scene, SceneKind};
use crate::setup::{self, Gpu};
use crate::sink::SinkReport;
use crate::stats::median_f64;
use crate::sync::SyncScheme;
use crate::vk::device::{Queue, QueueKind};
use crate::vk::instance::{Instance, ValidationCounts};
use crate::UsageError;

/// `vkcuda bench` options.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Variants, comma-separated: split-N and shared-N (interop with N shared
    /// images, 1..=8), staging (CUDA → host → Vulkan upload), cpu.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "split-1,split-2,split-3,split-6,shared-2,staging,cpu"
    )]
    pub variants: Vec<Variant>,
    /// Queue families the consumer runs on, comma-separated: compute (copies
    /// run on the SMs, time-sliced with CUDA), transfer (copy engines, beside
    /// CUDA's SMs), graphics.
    #[arg(long, value_delimiter = ',', default_value = "compute,transfer")]
    pub queues: Vec<QueueKind>,
    /// Image sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1280x720,1920x1080,3840x2160")]
    pub sizes: Vec<Size>,
    /// Loads, comma-separated: cheap (gradient, one copy), balanced (the consume
    /// step copies the frame until it takes ~0.5 ms, and julia's cost is set so
    /// the CUDA kernel takes as long).
    #[arg(long, value_delimiter = ',', default_value = "cheap,balanced")]
    pub loads: Vec<Load>,
    /// Repeats per variant (each a fresh session); the table shows medians.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeats: u32,
    /// Seconds each repeat runs after its warm-up.
    #[arg(long, default_value_t = 0.5, value_parser = seconds)]
    pub seconds: f64,
    /// Warm-up of each repeat, in seconds (and at least 5 frames).
    #[arg(long, default_value_t = 0.2, value_parser = seconds)]
    pub warmup: f64,
    /// Write every measurement as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw fps per variant as an SVG chart into this file (`.svg`).
    #[arg(long)]
    pub chart: Option<PathBuf>,
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds between 0 and 3600")),
    }
}

/// One way of getting CUDA's frames to Vulkan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The interop pattern: shared images, timelines, `buffers` images.
    Interop {
        /// One timeline per signaller, or one for both.
        sync: SyncScheme,
        /// Shared images.
        buffers: u32,
    },
    /// CUDA renders into device memory, copies to pinned host memory; the
    /// host copies into a staging buffer; Vulkan uploads it.
    Staging,
    /// The CPU renders into the staging buffer (for reference).
    Cpu,
}

impl Variant {
    fn needs_cuda(self) -> bool {
        self != Variant::Cpu
    }

    /// One sentence for the README and `--help`.
    pub fn describe(self) -> String {
        match self {
            Variant::Interop { sync: SyncScheme::Split, buffers: 1 } => {
                "interop, one shared image: CUDA and Vulkan take turns (no overlap)".into()
            }
            Variant::Interop { sync: SyncScheme::Split, buffers } => format!(
                "interop, {buffers} shared images, one timeline per signaller: CUDA renders one while Vulkan consumes another"
            ),
            Variant::Interop { sync: SyncScheme::Shared, buffers } => format!(
                "interop, {buffers} shared images, one timeline for both directions: values must rise in execution order, so the sides alternate"
            ),
            Variant::Staging => "baseline without sharing: CUDA renders to device memory, cuMemcpyDtoH to pinned host memory, memcpy into a Vulkan staging buffer, upload, consume".into(),
            Variant::Cpu => "CPU threads render into the staging buffer; Vulkan uploads and consumes (reference)".into(),
        }
    }

    fn apply(self, args: &mut Args) {
        match self {
            Variant::Interop { sync, buffers } => {
                args.sync = sync;
                args.buffers = buffers;
                args.producer = ProducerKind::Cuda;
            }
            Variant::Staging | Variant::Cpu => {
                // Host-signalled frames: two staging buffers, one timeline per signaller.
                args.sync = SyncScheme::Split;
                args.buffers = 2;
                args.producer =
                    if self == Variant::Staging { ProducerKind::Staging } else { ProducerKind::Cpu };
            }
        }
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "staging" => return Ok(Variant::Staging),
            "cpu" => return Ok(Variant::Cpu),
            _ => {}
        }
        let bad = || format!("unknown variant '{s}': use split-N, shared-N (N in 1..=8), staging or cpu");
        let (scheme, n) = s.split_once('-').ok_or_else(bad)?;
        let sync = match scheme {
            "split" => SyncScheme::Split,
            "shared" => SyncScheme::Shared,
            _ => return Err(bad()),
        };
        let buffers = n.parse::<u32>().ok().filter(|n| (1..=8).contains(n)).ok_or_else(bad)?;
        Ok(Variant::Interop { sync, buffers })
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variant::Interop { sync, buffers } => write!(f, "{sync}-{buffers}"),
            Variant::Staging => f.write_str("staging"),
            Variant::Cpu => f.write_str("cpu"),
        }
    }
}

impl Serialize for Variant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How much work each frame's kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Load {
    /// The gradient: a few µs of CUDA work; what is left is the pattern's own cost.
    Cheap,
    /// Both sides busy: the consume step copies the frame until it takes about
    /// 0.5 ms, and julia's cost is calibrated so the kernel takes as long: what
    /// overlapping the two can buy.
    Balanced,
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if *self == Load::Cheap { "cheap" } else { "balanced" })
    }
}

/// The medians of one variant at one size and load.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The variant.
    pub variant: Variant,
    /// The consumer's queue family kind.
    pub queue: QueueKind,
    /// Image size, WIDTHxHEIGHT.
    pub size: String,
    /// The load.
    pub load: Load,
    /// The scene that ran and its cost.
    pub scene: String,
    /// Julia iterations per pixel (balanced; 1 for the cheap load).
    pub cost: u32,
    /// Full-image copies in the consume step (balanced; 1 for the cheap load).
    pub copies: u32,
    /// Why it did not run, if it did not.
    pub skipped: Option<String>,
    /// Median frames per second over the repeats.
    pub fps: Option<f64>,
    /// 1e6 / fps.
    pub us_per_frame: Option<f64>,
    /// Median producer GPU time per frame, µs (CUDA events; CPU render time for `cpu`).
    pub render_us: Option<f64>,
    /// Median Vulkan GPU time per frame, µs (timestamp queries).
    pub vulkan_us: Option<f64>,
    /// Producer thread CPU time per frame, µs.
    pub producer_cpu_us: Option<f64>,
    /// Consumer thread CPU time per frame, µs.
    pub consumer_cpu_us: Option<f64>,
    /// Median time from "rendered" to "consumed", µs.
    pub latency_us: Option<f64>,
    /// Frames per second of each repeat.
    pub fps_repeats: Vec<f64>,
}

/// What a bench run writes as JSON.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The Vulkan device.
    pub device: String,
    /// Its driver.
    pub driver: String,
    /// CUDA version of the driver, if CUDA is there.
    pub cuda: Option<String>,
    /// UTC date of the run, YYYY-MM-DD.
    pub date: String,
    /// vkcuda's version.
    pub version: String,
    /// Repeats and seconds per repeat.
    pub repeats: u32,
    /// Seconds each repeat ran after warm-up.
    pub seconds: f64,
    /// One row per variant, size and load.
    pub rows: Vec<Row>,
    /// What the variants are, one sentence each.
    pub variants: Vec<(Variant, String)>,
    /// Validation messages, when `--validate` was on.
    pub validation: Option<ValidationCounts>,
}

/// Runs `vkcuda bench`.
pub fn run(args: &Args, bench: &BenchArgs) -> Result<Report> {
    for (path, ext) in [(&bench.json, None), (&bench.chart, Some("svg"))] {
        if let Some(p) = path {
            check_output(p, ext)?;
        }
    }
    let caught = watch_signals()?;
    let instance = Instance::new(args.validate, &[])?;
    let mut rows = Vec::new();
    let mut about = None;
    let total = bench.queues.len() * bench.sizes.len() * bench.loads.len() * bench.variants.len();
    for queue in &bench.queues {
        // One device per queue kind, one at a time, on the same GPU.
        let mut args = args.clone();
        args.queue = Some(*queue);
        let args = &args;
        let gpu = setup::open_gpu(args, instance.clone(), Queue { kind: *queue, present: None })?;
        for size in &bench.sizes {
            setup::check_size(&gpu, *size)?;
        }
        eprintln!("vkcuda: {}, {queue:?} queue; {}", gpu.device.info, gpu.why);
        about.get_or_insert_with(|| {
            (
                gpu.device.info.name.clone(),
                gpu.device.info.driver.trim().to_string(),
                gpu.cuda.as_ref().and_then(|_| crate::cuda::driver_version().ok()),
            )
        });
        for size in &bench.sizes {
            for load in &bench.loads {
                let balance = match load {
                    Load::Cheap => Balance { copies: 1, cost: 1 },
                    Load::Balanced => balance(&gpu, args, *size, &caught)?,
                };
                for variant in &bench.variants {
                    let row = run_variant(&gpu, args, bench, (*variant, *size, *load, balance), &caught)?;
                    if caught.load(Ordering::Relaxed) != 0 {
                        bail!(Interrupted(caught.load(Ordering::Relaxed) as i32));
                    }
                    eprintln!("[{}/{total}] {}", rows.len() + 1, progress_line(&row));
                    rows.push(row);
                }
            }
        }
    }
    let (device, driver, cuda) = about.unwrap_or_default();
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
    if let Some(p) = &bench.json {
        write_atomically(p, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    if let Some(p) = &bench.chart {
        write_atomically(p, crate::chart::svg(&report).as_bytes())?;
    }
    Ok(report)
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

/// Runs one variant `--repeats` times and takes the medians.
fn run_variant(
    gpu: &Gpu,
    args: &Args,
    bench: &BenchArgs,
    (variant, size, load, balance): (Variant, Size, Load, Balance),
    caught: &AtomicUsize,
) -> Result<Row> {
    let kind = if load == Load::Cheap { SceneKind::Gradient } else { SceneKind::Julia };
    let scene = Scene { kind, width: size.width, height: size.height, cost: balance.cost };
    let mut args = args.clone();
    args.consume_copies = balance.copies;
    let args = &args;
    let mut row = Row {
        variant,
        queue: args.queue_kind(),
        size: size.to_string(),
        load,
        scene: scene.kind.to_string(),
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
        fps_repeats: Vec::new(),
    };
    if variant.needs_cuda() && gpu.cuda.is_none() {
        row.skipped = Some("no CUDA device".into());
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
        runs.push(measure(gpu, args, variant, scene, span, caught)?);
    }
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
    Ok(row)
}

/// One repeat: a fresh session, warmed up, then run for the span.
fn measure(
    gpu: &Gpu,
    args: &Args,
    variant: Variant,
    scene: Scene,
    span: Span,
    caught: &AtomicUsize,
) -> Result<Summary> {
    let mut args = args.clone();
    variant.apply(&mut args);
    args.headless = true;
    args.dump_every = 0;
    args.verify = false;
    args.frames = Some(1 << 40); // the span's time ends the run
    args.scene = scene.kind;
    args.cost = scene.cost;
    let size = Size { width: scene.width, height: scene.height };
    let director = Arc::new(Director::new(scene));
    let extent = ash::vk::Extent2D { width: size.width, height: size.height };
    let mut offscreen = Offscreen::new(gpu.device.clone(), extent, (0, args.consume_copies), None)?;
    let hidden = ProgressBar::hidden();
    let (consumed, report, producer) =
        run_session(gpu, &args, (&director, size), &mut offscreen, span, (caught, &hidden))
            .with_context(|| format!("bench variant {variant} at {size}"))?;
    let validation = gpu.device.instance.validation().counts();
    Ok(summarize(consumed, report, SinkReport::default(), (producer, size), &validation, caught))
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
fn balance(gpu: &Gpu, args: &Args, size: Size, caught: &AtomicUsize) -> Result<Balance> {
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
    let cost = (f64::from(c1) + (vulkan - p1) / per_iteration).round().clamp(1.0, 100_000.0) as u32;
    eprintln!(
        "vkcuda: balanced load at {size}: one copy {copy:.1} µs × {copies} copies = {vulkan:.0} µs; \
         kernel {p1:.1} µs at cost {c1}, {p2:.1} µs at cost {c2} → cost {cost}"
    );
    Ok(Balance { copies, cost })
}

fn progress_line(row: &Row) -> String {
    match (&row.skipped, row.fps) {
        (Some(why), _) => format!("{} {} {} {}: skipped: {why}", row.queue, row.variant, row.size, row.load),
        (None, Some(fps)) => format!("{} {} {} {}: {fps:.0} fps", row.queue, row.variant, row.size, row.load),
        (None, None) => format!("{} {} {} {}: no frames", row.queue, row.variant, row.size, row.load),
    }
}

fn cell(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.decimals$}"))
}

/// The results as a plain-text table (stdout).
pub fn table(report: &Report) -> String {
    let mut out = format!(
        "{} ({}), CUDA {}, {}: median of {} repeats × {} s\n",
        report.device,
        report.driver,
        report.cuda.as_deref().unwrap_or("none"),
        report.date,
        report.repeats,
        report.seconds
    );
    out += &format!(
        "{:<9} {:<9} {:>9} {:<16} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        "queue",
        "variant",
        "size",
        "load",
        "fps",
        "µs/frame",
        "render µs",
        "vulkan µs",
        "prod CPU",
        "cons CPU",
        "latency"
    );
    for r in &report.rows {
        let load = match r.load {
            Load::Balanced => format!("bal({}it,{}cp)", r.cost, r.copies),
            Load::Cheap => "cheap".into(),
        };
        if let Some(why) = &r.skipped {
            out += &format!(
                "{:<9} {:<9} {:>9} {:<16} skipped: {why}\n",
                r.queue,
                r.variant.to_string(),
                r.size,
                load
            );
            continue;
        }
        out += &format!(
            "{:<9} {:<9} {:>9} {:<16} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            r.queue,
            r.variant.to_string(),
            r.size,
            load,
            cell(r.fps, 0),
            cell(r.us_per_frame, 1),
            cell(r.render_us, 1),
            cell(r.vulkan_us, 1),
            cell(r.producer_cpu_us, 1),
            cell(r.consumer_cpu_us, 1),
            cell(r.latency_us, 1),
        );
    }
    out
}

/// Refuses an output path that cannot be written, before anything runs.
fn check_output(path: &Path, ext: Option<&str>) -> Result<(), UsageError> {
    let bad = |why: String| UsageError(format!("{}: {why}", path.display()));
    if let Some(ext) = ext {
        if path.extension().and_then(|e| e.to_str()) != Some(ext) {
            return Err(bad(format!("the chart is written as SVG: name it *.{ext}")));
        }
    }
    if path.is_dir() {
        return Err(bad("is a folder".into()));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let probe = dir.join(format!(".vkcuda-probe-{}", std::process::id()));
    std::fs::write(&probe, b"probe").map_err(|e| bad(format!("cannot write into {}: {e}", dir.display())))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `bytes` to a temporary file beside `path`, then renames it: never a partial file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
        .with_context(|| format!("writing {}", path.display()))
}

/// The UTC date of `t` as YYYY-MM-DD (civil-from-days, H. Hinnant).
pub fn utc_date(t: std::time::SystemTime) -> String {
    let days = t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse_and_print() {
        for s in ["split-1", "split-3", "shared-2", "split-8", "staging", "cpu"] {
            assert_eq!(s.parse::<Variant>().unwrap().to_string(), s);
        }
        for bad in ["split", "split-0", "split-9", "shared-x", "both-2", ""] {
            assert!(bad.parse::<Variant>().is_err(), "{bad} accepted");
        }
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
