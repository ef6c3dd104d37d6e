//! What `vkcuda bench` measured, as data: the variants, loads, one row per
//! variant × size × load, the whole report (its JSON), and the plain-text
//! table. The chart (`chart.rs`) and the runner both use it; neither
//! imports the other.

use std::fmt;

use serde::Serialize;

use crate::peers::handover::Handover;
use vkcuda::sync::SyncScheme;
use vkcuda::types::QueueKind;
use vkcuda::vk::instance::ValidationCounts;
use vkcuda::{Format, Layout};

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
    /// The interop (split, `buffers` images) consumed by the viewer's draw
    /// pass into a target of the same size (a compute shader).
    Draw {
        /// Shared images.
        buffers: u32,
    },
    /// A public hand-over pattern, reproduced on the same images, kernels and consume step.
    Peer(Handover),
}

impl Variant {
    /// Whether the variant needs a CUDA device.
    pub fn needs_cuda(self) -> bool {
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
            Variant::Draw { buffers } => format!(
                "interop, {buffers} shared images, consumed by the viewer's draw (a compute shader sampling into a same-size target)"
            ),
            Variant::Peer(Handover::CpuGated) => "NVIDIA ovrtx vulkan-interop: one timeline only CUDA signals; the CPU polls a CUDA event (cuEventQuery) before swapping 2 images; a fence keeps 1 Vulkan frame in flight".into(),
            Variant::Peer(Handover::HostWait) => "cuda-samples simpleVulkan: one timeline, even values for Vulkan, odd for CUDA; the CPU blocks in vkWaitSemaphores every frame; 1 image (the sample has no queue-family transfer; here it keeps ours)".into(),
            Variant::Peer(Handover::Binary) => "cuda-samples vulkanImageCUDA: two exported binary semaphores, 1 image; no queue-family ownership transfer, which the spec requires for memory CUDA writes".into(),
            Variant::Peer(Handover::Vkcuda) => Variant::Interop { sync: SyncScheme::Split, buffers: 2 }.describe(),
        }
    }

    /// Whether this is one of the public patterns vkcuda is compared with.
    pub fn is_peer(self) -> bool {
        matches!(self, Variant::Peer(h) if h != Handover::Vkcuda)
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "staging" => return Ok(Variant::Staging),
            "cpu" => return Ok(Variant::Cpu),
            "cpu-gated" => return Ok(Variant::Peer(Handover::CpuGated)),
            "host-wait" => return Ok(Variant::Peer(Handover::HostWait)),
            "binary" => return Ok(Variant::Peer(Handover::Binary)),
            _ => {}
        }
        let bad = || {
            format!(
                "unknown variant '{s}': use split-N, shared-N, draw-N (N in 1..=8), staging, cpu, \
                 or a peer pattern: cpu-gated, host-wait, binary"
            )
        };
        let (scheme, n) = s.split_once('-').ok_or_else(bad)?;
        let buffers = n.parse::<u32>().ok().filter(|n| (1..=8).contains(n)).ok_or_else(bad)?;
        match scheme {
            "split" => Ok(Variant::Interop { sync: SyncScheme::Split, buffers }),
            "shared" => Ok(Variant::Interop { sync: SyncScheme::Shared, buffers }),
            "draw" => Ok(Variant::Draw { buffers }),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variant::Interop { sync, buffers } => write!(f, "{sync}-{buffers}"),
            Variant::Staging => f.write_str("staging"),
            Variant::Cpu => f.write_str("cpu"),
            Variant::Draw { buffers } => write!(f, "draw-{buffers}"),
            Variant::Peer(h) => f.write_str(h.name()),
        }
    }
}

impl Serialize for Variant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How much work each frame's kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Load {
    /// The gradient: a few µs of CUDA work; what is left is the pattern's own cost.
    Cheap,
    /// Both sides busy: the consume step copies the frame until it takes about
    /// 0.5 ms, and julia's cost is calibrated so the kernel takes as long: what
    /// overlapping the two can buy.
    Balanced,
    /// The `--kernel` file in place of the gradient, one copy.
    Kernel,
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Load::Cheap => "cheap",
            Load::Balanced => "balanced",
            Load::Kernel => "kernel",
        })
    }
}

/// The medians of one variant at one size and load.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The variant.
    pub variant: Variant,
    /// The consumer's queue family kind.
    pub queue: QueueKind,
    /// The shared frames' format.
    pub format: Format,
    /// The shared frames' layout.
    pub layout: Layout,
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
    /// The busiest thread's CPU time as a share of its wall time at this
    /// frame rate (1.0: one core always busy). The peer patterns drive both
    /// APIs from one thread: theirs is in `consumer_cpu_us`.
    pub busiest_thread_core: Option<f64>,
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
        "{:<9} {:<9} {:<17} {:>9} {:<16} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}\n",
        "queue",
        "variant",
        "frame",
        "size",
        "load",
        "fps",
        "µs/frame",
        "render µs",
        "vulkan µs",
        "prod CPU",
        "cons CPU",
        "latency",
        "core%"
    );
    for r in &report.rows {
        let load = match r.load {
            Load::Balanced => format!("bal({}it,{}cp)", r.cost, r.copies),
            Load::Cheap | Load::Kernel => r.load.to_string(),
        };
        let frame = format!("{}/{}", r.format, r.layout);
        if let Some(why) = &r.skipped {
            out += &format!(
                "{:<9} {:<9} {:<17} {:>9} {:<16} skipped: {why}\n",
                r.queue,
                r.variant.to_string(),
                frame,
                r.size,
                load
            );
            continue;
        }
        out += &format!(
            "{:<9} {:<9} {:<17} {:>9} {:<16} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}\n",
            r.queue,
            r.variant.to_string(),
            frame,
            r.size,
            load,
            cell(r.fps, 0),
            cell(r.us_per_frame, 1),
            cell(r.render_us, 1),
            cell(r.vulkan_us, 1),
            cell(r.producer_cpu_us, 1),
            cell(r.consumer_cpu_us, 1),
            cell(r.latency_us, 1),
            cell(r.busiest_thread_core.map(|c| c * 100.0), 0),
        );
    }
    out
}

/// vkcuda's default hand-over in the headline: `--sync split --buffers 2`.
pub const DEFAULT_VARIANT: Variant = Variant::Interop { sync: SyncScheme::Split, buffers: 2 };

/// The headline, as Markdown: per queue, size and load, vkcuda's default
/// ([`DEFAULT_VARIANT`]) beside each peer pattern and the staging path,
/// with fps, CPU time per frame (all threads) and the busiest thread's share
/// of a core, and each one's frame rate as a multiple of the best peer's.
pub fn headline(report: &Report) -> String {
    let mut out = String::from(
        "| queue | size | load | hand-over | fps | µs/frame | CPU µs/frame (all threads) | busiest thread, % of a core | × best peer |\n\
         |---|---|---|---|---:|---:|---:|---:|---:|\n",
    );
    // The peers' patterns run RGBA8 arrays: the headline compares those rows.
    let shown = |r: &Row| {
        let v = r.variant;
        (v == DEFAULT_VARIANT || v.is_peer() || v == Variant::Staging)
            && (r.format, r.layout) == (Format::Rgba8, Layout::Array)
    };
    let mut groups: Vec<(QueueKind, &str, Load)> = Vec::new();
    for r in report.rows.iter().filter(|r| shown(r)) {
        let key = (r.queue, r.size.as_str(), r.load);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    let order = |v: Variant| match v {
        v if v == DEFAULT_VARIANT => 0,
        Variant::Staging => 2,
        _ => 1,
    };
    for key in groups {
        let mut rows: Vec<&Row> =
            report.rows.iter().filter(|r| shown(r) && (r.queue, r.size.as_str(), r.load) == key).collect();
        rows.sort_by_key(|r| order(r.variant));
        let best_peer = rows
            .iter()
            .filter(|r| r.variant.is_peer())
            .filter_map(|r| r.fps)
            .fold(None, |m: Option<f64>, f| Some(m.map_or(f, |m| m.max(f))));
        for r in rows {
            let name = match r.variant {
                v if v == DEFAULT_VARIANT => format!("**vkcuda** ({v})"),
                v => v.to_string(),
            };
            let cpu = match (r.producer_cpu_us, r.consumer_cpu_us) {
                (None, None) => None,
                (p, c) => Some(p.unwrap_or(0.0) + c.unwrap_or(0.0)),
            };
            let ratio = match (r.fps, best_peer) {
                (Some(f), Some(b)) if b > 0.0 => format!("{:.2}×", f / b),
                _ => "–".into(),
            };
            let fps = r.skipped.as_ref().map_or_else(|| cell(r.fps, 0), |why| format!("skipped: {why}"));
            out += &format!(
                "| {} | {} | {} | {name} | {fps} | {} | {} | {} | {ratio} |\n",
                r.queue,
                r.size,
                r.load,
                cell(r.us_per_frame, 1),
                cell(cpu, 1),
                cell(r.busiest_thread_core.map(|c| c * 100.0), 0),
            );
        }
    }
    out
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
