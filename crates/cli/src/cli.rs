//! Command-line arguments and their validation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::builder::{EnumValueParser, PossibleValue, TypedValueParser};
use clap::{Parser, ValueEnum};

use crate::bench::report::{Load, Variant};
use crate::peers::Handover;
use vkcuda::sync::SyncScheme;
use vkcuda::types::{CudaSched, QueueKind};
use vkcuda::{Format, FrameDesc, Layout};
use vkcuda_run::base::kinds::{ConsumeKind, Latency, PresentMode, PresentPath, ProducerKind};
use vkcuda_run::base::size::Size;
use vkcuda_run::diagnostics::inject::{At, Inject};
use vkcuda_run::drive::child::parent::ChildCommand;
use vkcuda_run::drive::setup::{ConsumerSpec, CudaOptions, PlanSpec, ProducerSpec, RunSpec};
use vkcuda_run::drive::sink::Reference;
use vkcuda_run::frames::gpu::{DeviceChoice, Gpu};
use vkcuda_run::kernel::reload::KernelReload;
use vkcuda_run::kernel::user::{self as userkernel, KernelSpec};
use vkcuda_run::scene::director::Director;
use vkcuda_run::scene::{SceneKind, MAX_COST};
use vkcuda_run::UsageError;
use vkcuda_serve::Address;

/// The command-line values of a type from the core or the run layer: clap's
/// `ValueEnum` cannot be implemented here for another crate's enums, so it is
/// implemented for this wrapper, and [`core_values`] unwraps what clap parsed.
#[derive(Clone, Copy, Debug)]
pub struct Core<T>(T);

/// The value parser of a core or run-layer enum `T` (see [`Core`]).
fn core_values<T: Clone + Send + Sync + 'static>() -> impl TypedValueParser<Value = T>
where
    Core<T>: ValueEnum,
{
    EnumValueParser::<Core<T>>::new().map(|c| c.0)
}

/// `value_enum` for a type of the core or the run layer: implemented on [`Core`].
macro_rules! core_value_enum {
    ($ty:ident { $($variant:ident = $name:literal: $help:literal),+ $(,)? }) => {
        impl ValueEnum for Core<$ty> {
            fn value_variants<'a>() -> &'a [Self] {
                &[$(Core($ty::$variant)),+]
            }
            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(match self.0 {
                    $($ty::$variant => PossibleValue::new($name).help($help)),+
                })
            }
        }
    };
}

/// The first argument of the producer's child process: `vkcuda producer-child FD`
/// (started by a run, never by people).
pub const CHILD_COMMAND: &str = "producer-child";

/// Where the producer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProducerProcess {
    /// A child process with --kernel in the viewer and under --serve; else this process.
    Auto,
    /// A child process: the CUDA producers, and the CPU reference (--layout buffer frames).
    Child,
    /// This process.
    Same,
}

/// Gives a domain type its command-line values and their help (clap's
/// `ValueEnum`, written here so that clap stays in the CLI).
macro_rules! value_enum {
    ($ty:ident { $($variant:ident = $name:literal: $help:literal),+ $(,)? }) => {
        impl ValueEnum for $ty {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($ty::$variant),+]
            }
            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(match self {
                    $($ty::$variant => PossibleValue::new($name).help($help)),+
                })
            }
        }
    };
}

core_value_enum!(ProducerKind {
    Auto = "auto": "CUDA when a CUDA device matches the Vulkan device by UUID, else the CPU",
    Cuda = "cuda": "CUDA kernels write the shared images through surf2Dwrite",
    Cpu = "cpu": "CPU threads render the reference into staging buffers; Vulkan uploads them",
    Staging = "staging": "Baseline without sharing: CUDA renders into device memory, copies it to \
        pinned host memory; the host copies it into a staging buffer; Vulkan uploads it",
});

core_value_enum!(CudaSched {
    Auto = "auto": "The driver decides (spins while there are fewer busy threads than cores)",
    Spin = "spin": "Spin: lowest wake-up latency, one core busy",
    Yield = "yield": "Spin but yield the core",
    Blocking = "blocking": "Sleep on an OS primitive until the GPU is done",
});

core_value_enum!(SyncScheme {
    Split = "split": "One timeline per signaller: `rendered` (producer) and `released` (consumer)",
    Shared = "shared": "One timeline shared by both directions; serialises producer and consumer",
});

core_value_enum!(Format {
    Rgba8 = "rgba8": "R8G8B8A8_UNORM (CUDA writes uchar4)",
    Rgba8Srgb = "rgba8-srgb": "R8G8B8A8_SRGB: sRGB-encoded bytes (CUDA writes uchar4)",
    Bgra8 = "bgra8": "B8G8R8A8_UNORM (CUDA writes uchar4, blue first)",
    Rgba16f = "rgba16f": "R16G16B16A16_SFLOAT: half-float HDR (CUDA writes 4 halves); dumped as OpenEXR",
    Rgba32f = "rgba32f": "R32G32B32A32_SFLOAT (CUDA writes float4); dumped as OpenEXR",
    R32f = "r32f": "R32_SFLOAT, one channel (CUDA writes float); shown grey, dumped as OpenEXR",
});

core_value_enum!(Layout {
    Array = "array": "A Vulkan image CUDA maps as an array: surface (and texture) objects",
    Buffer = "buffer": "A Vulkan buffer CUDA maps as linear memory: a pointer and a pitch \
        (what tensor libraries write); the draw pass reads it as a storage buffer",
});

core_value_enum!(QueueKind {
    Graphics = "graphics": "Graphics and compute (what a presenter needs)",
    Compute = "compute": "Compute, preferably a family without graphics",
    Transfer = "transfer": "Transfer only (copy engines), if the device has such a family (headless default)",
});

core_value_enum!(ConsumeKind {
    Copy = "copy": "Copy the shared image into a target of the same size (a transfer: any queue)",
    Draw = "draw": "Draw it as the viewer does, letterboxed into a --target-size target \
        (a compute shader): the viewer's GPU work, measured and verified without a window",
});

core_value_enum!(PresentPath {
    Auto = "auto": "Vulkan when the device can present to the window, else the CPU (said on stderr)",
    Vulkan = "vulkan": "A Vulkan swapchain of the window's surface",
    Cpu = "cpu": "Draw on the GPU, read back, and put the frame in the window from the CPU (softbuffer): \
        for displays the GPU cannot present to (Xvfb, VNC, X forwarding)",
});

core_value_enum!(Latency {
    Low = "low": "The producer starts a frame once the one before is on screen: a saved kernel or \
        the pointer shows within about two frames, at fewer frames per second",
    Throughput = "throughput": "The producer starts a frame as soon as a shared image is free: \
        render and display overlap (a change waits behind the frames already made)",
});

core_value_enum!(PresentMode {
    Fifo = "fifo": "Vsync; always supported",
    Mailbox = "mailbox": "Vsync without blocking: the newest frame replaces a queued one",
    Immediate = "immediate": "No vsync; may tear",
});

core_value_enum!(Handover {
    Vkcuda = "vkcuda": "vkcuda's pattern: one timeline per signaller, --buffers images, the GPUs wait",
    CpuGated = "cpu-gated": "NVIDIA ovrtx's vulkan-interop example: one timeline only CUDA signals, \
        the CPU polls a CUDA event before swapping 2 images, one Vulkan frame in flight",
    HostWait = "host-wait": "cuda-samples simpleVulkan: one timeline (even: Vulkan may read, odd: \
        CUDA may write), the CPU blocks in vkWaitSemaphores every frame, 1 image",
    Binary = "binary": "cuda-samples vulkanImageCUDA: two exported binary semaphores, 1 image, \
        no queue-family ownership transfer (the spec wants one)",
});

core_value_enum!(SceneKind {
    Gradient = "gradient": "Scrolling colour ramps and a checker: a few integer operations per pixel",
    Julia = "julia": "An animated Julia set in fixed point; `--cost` iterations per pixel, always",
});

value_enum!(Load {
    Cheap = "cheap": "The gradient: a few µs of CUDA work; what is left is the pattern's own cost",
    Balanced = "balanced": "Both sides busy: the consume step copies the frame until it takes about \
        0.5 ms, and julia's cost is calibrated so the kernel takes as long",
    Kernel = "kernel": "Your --kernel file in place of the gradient (one copy): your kernel's cost \
        through each interop variant; --kernel adds this load",
});

/// `--size`: a fixed size, or `window` (the shared images follow the window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeArg {
    /// Fixed WIDTHxHEIGHT.
    Fixed(Size),
    /// Follow the window's size (viewer only).
    Window,
}

impl std::str::FromStr for SizeArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "window" => Ok(SizeArg::Window),
            _ => s.parse().map(SizeArg::Fixed),
        }
    }
}

const KEYS: &str = "Viewer keys:
  Esc         quit (closing the window too)
  Space       pause / resume the animation
  S           save the current frame in --out (PNG; OpenEXR for float formats)
  Left/Right  previous / next scene
  + / -       double / halve the scene's cost
  E / D       brighter / darker: double / halve the exposure (float formats are clamped after it)
  V           cycle present modes (fifo, mailbox, immediate: those supported)
  R           compile the --kernel file again (it also reloads by itself when saved)
  F1          show / hide stats in the title (fps, CUDA ms, Vulkan ms, present mode, producer, sync)";

/// The frame count of a run that goes on until it is stopped (a window; a served run
/// without `--frames`).
pub const UNTIL_STOPPED: u64 = 1 << 60;

/// vkcuda: CUDA renders into images that Vulkan presents, synchronised by timeline semaphores.
#[derive(Parser, Debug, Clone)]
#[command(version, about, long_about = None, after_help = KEYS, args_conflicts_with_subcommands = false)]
pub struct Args {
    /// `bench`: measure the interop against the staging baseline (see `vkcuda bench --help`).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Render offscreen, without a window, and dump frames as PNG.
    #[arg(long)]
    pub headless: bool,
    /// Headless: show the frames in a browser at this address: PORT (on
    /// 127.0.0.1; 0: any free port) or ADDR:PORT (any address but loopback
    /// needs the token the printed URL carries). The run goes on until
    /// stopped (Ctrl+C) unless --frames is given; frames are written only with --out.
    #[arg(long, value_name = "[ADDR:]PORT", requires = "headless")]
    pub serve: Option<Address>,
    /// Whether --out was given (a served run writes frames only then).
    #[arg(skip)]
    pub out_given: bool,
    /// Frames to render, then exit (default: 600 headless; until closed in a window or served).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub frames: Option<u64>,
    /// Headless: render only shard K of N (K from 0) of --frames: frames
    /// K*F/N up to (K+1)*F/N (rounded down), files named by their frame number
    /// in the whole run, so the shards' folders merge into the unsharded run's.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    /// Headless: render only the dumped frames of this run (or shard) that
    /// --out lacks, keeping those there: a preempted or killed run, run again.
    #[arg(long)]
    pub resume: bool,
    /// Set by `--gpu all` for each GPU's part of the run: the frames
    /// it renders (numbered in the whole run).
    #[arg(skip)]
    pub part: Option<std::ops::Range<u64>>,
    /// Size of the shared images, WIDTHxHEIGHT, or `window` to follow the window (viewer).
    #[arg(long, default_value = "1920x1080")]
    pub size: SizeArg,
    /// Number of shared images the producer and consumer rotate through.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub buffers: u32,
    /// Pixel format of the shared frames (float frames dump as OpenEXR).
    #[arg(long, value_parser = core_values::<Format>(), default_value_t = Format::Rgba8)]
    pub format: Format,
    /// How CUDA sees the shared frames: an array (surface), or linear memory (pointer and pitch).
    #[arg(long, value_parser = core_values::<Layout>(), default_value_t = Layout::Array)]
    pub layout: Layout,
    /// Synchronization scheme: one timeline per signaller, or one for both directions.
    #[arg(long, value_parser = core_values::<SyncScheme>(), default_value_t = SyncScheme::Split)]
    pub sync: SyncScheme,
    /// The scene to draw.
    #[arg(long, value_parser = core_values::<SceneKind>(), default_value_t = SceneKind::Gradient)]
    pub scene: SceneKind,
    /// Iterations per pixel of the tunable scene (julia).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_COST)))]
    pub cost: u32,
    /// Who renders the frames.
    #[arg(long, value_parser = core_values::<ProducerKind>(), default_value_t = ProducerKind::Auto)]
    pub producer: ProducerKind,
    /// Where the producer runs: `auto` is a child process with --kernel in
    /// the viewer and under --serve, so that a kernel that faults ends the
    /// child, not the session (docs/kernels.md).
    #[arg(long, value_enum, default_value_t = ProducerProcess::Auto)]
    pub producer_process: ProducerProcess,
    /// Your CUDA kernel file, run instead of --scene (CUDA producer): one
    /// `extern "C" __global__` entry taking a `vk_frame` (shaders/vkcuda.h).
    #[arg(long, value_name = "FILE.cu")]
    pub kernel: Option<PathBuf>,
    /// The kernel's entry point.
    #[arg(long, default_value = userkernel::DEFAULT_ENTRY, requires = "kernel")]
    pub entry: String,
    /// A value for the kernel's `params[i]`, in order (at most 8).
    #[arg(long = "param", value_name = "F", requires = "kernel", allow_negative_numbers = true)]
    pub params: Vec<f32>,
    /// Threads per block of the kernel's launch.
    #[arg(long, value_name = "WxH", default_value = "16x16", requires = "kernel")]
    pub block: Size,
    /// Compare every dumped frame with the file of the same name in DIR (an
    /// earlier dump: golden images); a difference fails the run (exit code 3).
    #[arg(long, value_name = "DIR")]
    pub compare_to: Option<PathBuf>,
    /// With --compare-to: the largest difference of a channel, in 8-bit levels, that still counts as equal.
    #[arg(long, default_value_t = 0, requires = "compare_to")]
    pub tolerance: u8,
    /// Vulkan device to use: its index or a prefix of its UUID (--list-gpus shows
    /// them), or `all` (--headless): one interop per GPU that has a CUDA twin
    /// (every device with --producer cpu), each rendering an equal, contiguous
    /// part of the frames. Default: the first Vulkan device that a CUDA device matches.
    #[arg(long)]
    pub gpu: Option<String>,
    /// Print the Vulkan devices and the CUDA devices, each in its own order
    /// with its twin in the other's (paired by UUID: CUDA's order follows
    /// CUDA_VISIBLE_DEVICES, Vulkan's does not), and exit.
    #[arg(long)]
    pub list_gpus: bool,
    /// Enable the Khronos validation layer with synchronization validation; any
    /// warning or error it reports fails the run (exit code 4).
    #[arg(long)]
    pub validate: bool,
    /// Compare every dumped frame with the CPU reference; a mismatch fails the run (exit code 3).
    #[arg(long)]
    pub verify: bool,
    /// Dump every K-th frame to PNG (0: none).
    #[arg(long, default_value_t = 1)]
    pub dump_every: u64,
    /// Folder for the PNG frames (created if missing).
    #[arg(long, default_value = "frames")]
    pub out: PathBuf,
    /// Where compiled PTX is cached. Default: $VKCUDA_CACHE_DIR, else
    /// $XDG_CACHE_HOME/vkcuda, else ~/.cache/vkcuda.
    #[arg(long)]
    pub ptx_cache: Option<PathBuf>,
    /// How CUDA hands frames to Vulkan (headless): vkcuda's pattern, or one of
    /// the public patterns `vkcuda bench` compares it with (each with its own
    /// image count; they need the CUDA producer).
    #[arg(long, value_parser = core_values::<Handover>(), default_value = "vkcuda")]
    pub handover: Handover,
    /// Write the run's summary (fps, timings, PNG writer stages) as JSON to this file (headless).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// What the headless consumer does with each frame.
    #[arg(long, value_parser = core_values::<ConsumeKind>(), default_value = "copy")]
    pub consume: ConsumeKind,
    /// `--consume draw`: the size of the target it draws into, WIDTHxHEIGHT (a
    /// window's size; default: --size).
    #[arg(long)]
    pub target_size: Option<Size>,
    /// How the viewer's frames reach the window.
    #[arg(long, value_parser = core_values::<PresentPath>(), default_value = "auto")]
    pub present: PresentPath,
    /// Present mode of the viewer (falls back to fifo if unsupported). Default:
    /// fifo; on Wayland mailbox, since there a fifo present waits for the
    /// compositor's frame callback, which never comes while the window is hidden.
    #[arg(long, value_parser = core_values::<PresentMode>())]
    pub present_mode: Option<PresentMode>,
    /// When the viewer's producer starts a frame. Default: low with --kernel
    /// (hot reload), else throughput.
    #[arg(long, value_parser = core_values::<Latency>())]
    pub latency: Option<Latency>,
    /// Open the viewer's window fullscreen (on its monitor, without borders).
    #[arg(long)]
    pub fullscreen: bool,
    /// Queue family the consumer submits to. Default: transfer headless (copy
    /// engines run beside CUDA's SMs: no GPU context switch per frame; see the
    /// README's bench results), graphics in a window.
    #[arg(long, value_parser = core_values::<QueueKind>())]
    pub queue: Option<QueueKind>,
    /// Consumer command buffers in flight (CPU frames ahead of the Vulkan GPU).
    /// Default: as many as shared images, at least 3 (fewer caps the pipeline's depth).
    #[arg(long, hide = true, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub frames_in_flight: Option<u32>,
    /// How the consume step copies the frame: this many full-image copies
    /// (bench's balanced load makes the Vulkan side heavier with it).
    #[arg(long, default_value_t = 1, hide = true, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub consume_copies: u32,
    /// How CUDA's host thread waits for the GPU (`cuDevicePrimaryCtxSetFlags`).
    #[arg(long, value_parser = core_values::<CudaSched>(), default_value_t = CudaSched::Auto, hide = true)]
    pub cuda_sched: CudaSched,
    /// Create the producer's CUDA stream with the device's highest priority.
    #[arg(long, hide = true)]
    pub high_priority_stream: bool,
    /// Hand-over experiment: each side first waits on the host (`vkWaitSemaphores`)
    /// until the value it would wait for on the GPU is reached, so no GPU
    /// queue or stream ever waits on a value that is not yet signalled.
    #[arg(long, hide = true)]
    pub host_waits: bool,
    /// Hand-over experiment: the CUDA producer leaves waiting for "released" to
    /// the GPU alone (the stream's wait), without its default host wait first;
    /// the driver then spins the producer thread inside the next CUDA call.
    #[arg(long, hide = true)]
    pub gpu_waits_only: bool,
    /// Test only: fail the run at a frame, FAULT@FRAME (repeatable): cuda-fault,
    /// producer-panic, consumer-error, png-write, mismatch, sigint, sigterm.
    #[arg(long, hide = true)]
    pub inject: Vec<At>,
    /// Test only: the value every timeline starts at (e.g. 9223372036854775000 to
    /// prove nothing assumes small values).
    #[arg(long, default_value_t = 0, hide = true)]
    pub timeline_base: u64,
}

/// `--shard K/N`: part K (from 0) of N equal, contiguous parts of the frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which part.
    pub k: u64,
    /// Of how many.
    pub n: u64,
}

impl Shard {
    /// The first frame of this part of `frames`.
    pub fn first(&self, frames: u64) -> u64 {
        (u128::from(frames) * u128::from(self.k) / u128::from(self.n)) as u64
    }

    /// The first frame after this part.
    pub fn first_of_next(&self, frames: u64) -> u64 {
        Shard { k: self.k + 1, n: self.n }.first(frames)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("'{s}': K/N with 0 <= K < N (e.g. 0/4 for the first of 4 shards)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n): (u64, u64) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if n == 0 || k >= n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// Subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Command {
    /// Measure every variant (interop split/shared with 1-3 images, staging
    /// baseline, CPU) at several sizes and loads; print a table, and write JSON
    /// and an SVG chart. Options before `bench` (--gpu, --validate, --queue...)
    /// apply to every variant.
    Bench(BenchArgs),
    /// Compile a kernel file against the kernel contract (shaders/vkcuda.h)
    /// with NVRTC, no GPU needed: prints the errors as FILE:LINE and exits 2,
    /// or prints nothing and exits 0.
    CheckKernel(CheckKernelArgs),
    /// Check that a dump folder is whole (the last step of a farm job): every
    /// frame 0, K, 2K, … below --frames present once and decodable, all of one
    /// size, no temporary file a killed run left. Exits 0 only then; 3 if not.
    CheckDump(CheckDumpArgs),
    /// What this machine gives vkcuda (the Vulkan loader, the driver files
    /// and where the loader looks, each Vulkan device, CUDA and which Vulkan
    /// device each CUDA device pairs with, NVRTC, the validation layer, a
    /// display, a container's hints) and what works here. Exits 0 when CUDA
    /// renders headless frames, 1 when only the CPU producer does, 2 when no
    /// Vulkan device starts.
    Doctor,
}

/// `vkcuda check-dump`.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckDumpArgs {
    /// The dump folder (the union of every shard's files).
    pub dir: PathBuf,
    /// Frames of the whole run (all shards).
    #[arg(long)]
    pub frames: u64,
    /// The run's --dump-every.
    #[arg(long, default_value_t = 1)]
    pub dump_every: u64,
}

/// `vkcuda check-kernel`.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckKernelArgs {
    /// The kernel file.
    pub file: PathBuf,
    /// The entry point.
    #[arg(long, default_value = userkernel::DEFAULT_ENTRY)]
    pub entry: String,
    /// The architecture to compile for (virtual `compute_XY` needs no GPU; or `sm_XY`).
    #[arg(long, default_value = userkernel::DEFAULT_CHECK_ARCH)]
    pub arch: String,
}

impl Args {
    /// Checks what clap's types cannot, before any device is touched.
    pub fn check(&self) -> Result<(), UsageError> {
        self.check_modes()?;
        self.check_handover()?;
        self.check_kernel()?;
        self.check_reference()?;
        self.check_run()
    }

    /// The viewer's options against the headless run's.
    fn check_modes(&self) -> Result<(), UsageError> {
        if self.headless && self.size == SizeArg::Window {
            return Err(UsageError::new(
                "--size window needs the viewer: drop --headless or give WIDTHxHEIGHT",
            ));
        }
        if !self.offscreen() && self.queue.is_some_and(|q| q != QueueKind::Graphics) {
            return Err(UsageError::new("the viewer presents from a graphics queue: drop --queue"));
        }
        if self.latency.is_some() && self.offscreen() {
            return Err(UsageError::new(
                "--latency paces the viewer's producer to its screen: drop it (or --headless)",
            ));
        }
        if self.consume == ConsumeKind::Draw && !self.offscreen() {
            return Err(UsageError::new("--consume draw is for --headless (the viewer always draws)"));
        }
        if self.target_size.is_some() && self.consume != ConsumeKind::Draw {
            return Err(UsageError::new("--target-size is the size --consume draw draws into"));
        }
        if self.consume == ConsumeKind::Draw && self.queue == Some(QueueKind::Transfer) {
            return Err(UsageError::new(
                "--consume draw draws with a compute shader: --queue compute or graphics",
            ));
        }
        if self.producer_process == ProducerProcess::Child {
            if self.producer == ProducerKind::Staging || self.handover != Handover::Vkcuda {
                return Err(UsageError::new(
                    "--producer-process child runs the CUDA producer or the CPU reference with vkcuda's \
                     hand-over: drop --producer staging or --handover",
                ));
            }
            if self.producer == ProducerKind::Cpu && self.layout != Layout::Buffer {
                return Err(UsageError::new(
                    "--producer cpu in a child process writes buffer frames: add --layout buffer",
                ));
            }
        }
        if self.serve.is_some() && self.queue == Some(QueueKind::Transfer) {
            return Err(UsageError::new(
                "--serve draws each frame for its browsers with a compute shader: --queue compute or graphics",
            ));
        }
        Ok(())
    }

    /// A peer's hand-over, and `--json`: headless only.
    fn check_handover(&self) -> Result<(), UsageError> {
        if self.handover != Handover::Vkcuda {
            if !self.headless {
                return Err(UsageError::new(format!(
                    "--handover {} is for --headless runs (and `vkcuda bench` variants)",
                    self.handover.name()
                )));
            }
            if self.format != Format::Rgba8 || self.layout != Layout::Array {
                return Err(UsageError::new(format!(
                    "--handover {} is a peer's pattern on its RGBA8 images: drop --format and --layout",
                    self.handover.name()
                )));
            }
            if !matches!(self.producer, ProducerKind::Auto | ProducerKind::Cuda) {
                return Err(UsageError::new(format!(
                    "--handover {} is a CUDA pattern: drop --producer",
                    self.handover.name()
                )));
            }
        }
        if self.json.is_some() && !self.headless {
            return Err(UsageError::new("--json writes a headless run's summary: add --headless"));
        }
        Ok(())
    }

    /// Your kernel's options.
    fn check_kernel(&self) -> Result<(), UsageError> {
        if self.kernel.is_some() {
            if self.verify {
                return Err(UsageError::new(
                    "--verify compares with the built-in scenes' CPU reference, which your kernel has not: \
                     compare with an earlier dump (--compare-to DIR)",
                ));
            }
            if self.params.len() > userkernel::PARAMS {
                return Err(UsageError::new(format!("--param: at most {} values", userkernel::PARAMS)));
            }
            if self.block.width * self.block.height > 1024 {
                return Err(UsageError::new(format!(
                    "--block {}: at most 1024 threads per block",
                    self.block
                )));
            }
            if self.handover != Handover::Vkcuda {
                return Err(UsageError::new("--kernel runs with vkcuda's hand-over: drop --handover"));
            }
            if !matches!(self.producer, ProducerKind::Auto | ProducerKind::Cuda) {
                return Err(UsageError::new("--kernel runs on the CUDA producer: drop --producer"));
            }
        }
        if let Some(Command::Bench(b)) = &self.command {
            if b.loads.contains(&Load::Kernel) && self.kernel.is_none() {
                return Err(UsageError::new("--loads kernel runs your kernel: add --kernel FILE"));
            }
        }
        Ok(())
    }

    /// `--compare-to` and `--verify`: one reference, and a folder that is not the dump's.
    fn check_reference(&self) -> Result<(), UsageError> {
        if let Some(golden) = &self.compare_to {
            if !self.headless || self.dump_every == 0 {
                return Err(UsageError::new(
                    "--compare-to checks a headless run's dumped frames (--dump-every 1 or more)",
                ));
            }
            if self.verify {
                return Err(UsageError::new("--verify and --compare-to: choose one reference"));
            }
            let same = |a: &Path, b: &Path| {
                a == b || a.canonicalize().ok().is_some_and(|a| Some(a) == b.canonicalize().ok())
            };
            if same(golden, &self.out) {
                return Err(UsageError::new(
                    "--compare-to names the --out folder: the dump would overwrite its reference",
                ));
            }
            if !golden.is_dir() {
                return Err(UsageError::new(format!("--compare-to {}: no such folder", golden.display())));
            }
        }
        Ok(())
    }

    /// Which frames run where: GPUs, shards, resume, the timelines' range.
    fn check_run(&self) -> Result<(), UsageError> {
        let bench = matches!(self.command, Some(Command::Bench(_)));
        if self.all_gpus() && !(self.headless || bench) {
            return Err(UsageError::new(
                "--gpu all runs one interop per GPU in a --headless run or vkcuda bench (the viewer uses one GPU)"
            ));
        }
        if self.serve.is_some() && (self.all_gpus() || self.shard.is_some() || self.resume || bench) {
            return Err(UsageError::new(
                "--serve shows one run on one GPU (not with --gpu all, --shard, --resume or bench)",
            ));
        }
        if self.shard.is_some() && !self.headless {
            return Err(UsageError::new("--shard splits a --headless run's frames"));
        }
        if self.resume && !(self.headless && self.dump_every > 0) {
            return Err(UsageError::new(
                "--resume renders the frames --out lacks: it is for a --headless run that dumps (--dump-every 1 or more)"
            ));
        }
        if self.verify && self.dump_every == 0 {
            return Err(UsageError::new("--verify checks dumped frames: it needs --dump-every 1 or more"));
        }
        vkcuda::sync::FramePlan::new(
            self.sync,
            self.buffers as usize,
            self.timeline_base,
            self.frame_count(),
        )
        .map_err(|e| UsageError::new(e.to_string()))?;
        Ok(())
    }

    /// Frames to render: `--frames`, else 600 headless and (practically) unbounded in a window.
    pub fn frame_count(&self) -> u64 {
        let frames = self.frame_range();
        frames.end - frames.start
    }

    /// The frames this run renders, numbered in the whole run (`--shard`).
    pub fn frame_range(&self) -> std::ops::Range<u64> {
        if let Some(part) = &self.part {
            return part.clone();
        }
        let all = self.all_frames();
        match self.shard {
            Some(s) => s.first(all)..s.first_of_next(all),
            None => 0..all,
        }
    }

    /// `--gpu all`.
    pub fn all_gpus(&self) -> bool {
        self.gpu.as_deref().is_some_and(|g| g.eq_ignore_ascii_case("all"))
    }

    /// Frames of the whole run (all shards): `--frames`, else 600 headless and (practically) unbounded in a window.
    pub fn all_frames(&self) -> u64 {
        self.frames.unwrap_or(if self.headless && self.serve.is_none() { 600 } else { UNTIL_STOPPED })
    }

    /// The run's number of this run's first frame.
    pub fn first_frame(&self) -> u64 {
        self.frame_range().start
    }

    /// The fixed frame size, or the window's when `--size window`.
    pub fn size_or(&self, window: Size) -> Size {
        match self.size {
            SizeArg::Fixed(s) => s,
            SizeArg::Window => window,
        }
    }

    /// Consumer frames in flight: `--frames-in-flight`, else max(3, buffers).
    pub fn in_flight(&self) -> usize {
        self.frames_in_flight.unwrap_or(self.buffers.max(3)) as usize
    }

    /// Whether the viewer's producer is paced to the screen (`--latency`).
    pub fn paced(&self) -> bool {
        let low = self.latency.map_or(self.kernel.is_some(), |l| l == Latency::Low);
        low && !self.offscreen()
    }

    /// Whether no window is opened (`--headless` or `bench`).
    pub fn offscreen(&self) -> bool {
        self.headless || self.command.is_some()
    }

    /// The consumer's queue family.
    pub fn queue_kind(&self) -> QueueKind {
        // A window presents from a graphics queue; `--consume draw` and a served run's
        // watchers are drawn by a compute pass, which needs no graphics queue (and
        // still finishes where a CUDA fault stopped the GPU's graphics pipelines).
        let computing = self.consume == ConsumeKind::Draw || self.serve.is_some();
        let default = match (self.offscreen(), computing) {
            (false, _) => QueueKind::Graphics,
            (true, true) => QueueKind::Compute,
            (true, false) => QueueKind::Transfer,
        };
        self.queue.unwrap_or(default)
    }

    /// The size of the headless consumer's target: `--target-size` when drawing, else the frame's.
    pub fn target_or(&self, size: Size) -> Size {
        self.target_size.filter(|_| self.consume == ConsumeKind::Draw).unwrap_or(size)
    }

    /// The run these arguments describe on the open device `gpu` (which
    /// decides what `--producer auto` is), rendering what `director` says.
    pub fn spec(&self, gpu: &Gpu, director: Arc<Director>) -> anyhow::Result<RunSpec> {
        let cuda = CudaOptions {
            ptx_cache: self.ptx_cache.clone(),
            sched: self.cuda_sched,
            high_priority_stream: self.high_priority_stream,
            host_waits: self.host_waits || !self.gpu_waits_only,
        };
        Ok(RunSpec {
            plan: PlanSpec { sync: self.sync, buffers: self.buffers as usize, frames: self.frame_count() },
            producer: ProducerSpec::rendered(self.producer, self.kernel_spec(), cuda, director, gpu)?,
            consumer: ConsumerSpec {
                in_flight: self.in_flight(),
                paced: self.paced(),
                host_waits: self.host_waits,
            },
            inject: Inject(self.inject.clone()),
            child: self.child_command()?,
        })
    }

    /// The producer's child process, when it runs in one (`--producer-process`).
    pub fn child_command(&self) -> anyhow::Result<Option<ChildCommand>> {
        let wanted = match self.producer_process {
            ProducerProcess::Child => true,
            ProducerProcess::Same => false,
            ProducerProcess::Auto => self.kernel.is_some() && (!self.headless || self.serve.is_some()),
        };
        if !wanted {
            return Ok(None);
        }
        let program = std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("finding this program to start the producer's process: {e}"))?;
        Ok(Some(ChildCommand { program, args: vec![CHILD_COMMAND.into()], validate: self.validate }))
    }

    /// The command line's arguments. A served run (`--serve`) writes frames
    /// only when `--out` or `--dump-every` is given.
    pub fn from_command_line() -> Result<Self, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let matches = Self::command().try_get_matches()?;
        let mut args = Self::from_arg_matches(&matches)?;
        let given = |id: &str| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        args.out_given = given("out") || given("dump_every");
        if args.serve.is_some() && !args.out_given {
            args.dump_every = 0;
        }
        Ok(args)
    }

    /// [`Args::spec`] with the hot reload's link when there is one (`--kernel`
    /// in the viewer, or served).
    pub fn spec_reloading(
        &self,
        gpu: &Gpu,
        director: &Arc<Director>,
        reload: Option<&KernelReload>,
    ) -> anyhow::Result<RunSpec> {
        let mut spec = self.spec(gpu, director.clone())?;
        if let ProducerSpec::Kernel { reload: link, .. } = &mut spec.producer {
            *link = reload.map(KernelReload::link);
        }
        Ok(spec)
    }

    /// The shared frames of a run at `size`: `--format`, `--layout`.
    pub fn frame_desc(&self, size: Size) -> FrameDesc {
        let extent = ash::vk::Extent2D { width: size.width, height: size.height };
        FrameDesc::new(extent).format(self.format).layout(self.layout)
    }

    /// The device to open: `--gpu`, for `--producer`.
    pub fn device_choice(&self) -> DeviceChoice {
        DeviceChoice { gpu: self.gpu.clone(), producer: self.producer, announce: self.part.is_none() }
    }

    /// What dumped frames are compared with: `--compare-to`, `--verify`, or nothing.
    pub fn reference(&self) -> Reference {
        match (&self.compare_to, self.verify) {
            (Some(dir), _) => Reference::Golden { dir: dir.clone(), tolerance: self.tolerance },
            (None, true) => Reference::Cpu,
            (None, false) => Reference::None,
        }
    }

    /// `--kernel` and its options.
    pub fn kernel_spec(&self) -> Option<KernelSpec> {
        let file = self.kernel.clone()?;
        let mut params = [0.0; userkernel::PARAMS];
        params.iter_mut().zip(&self.params).for_each(|(p, v)| *p = *v);
        Some(KernelSpec {
            file,
            entry: self.entry.clone(),
            params,
            block: (self.block.width, self.block.height),
            live: !self.headless,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        let mut v = vec!["vkcuda", "--headless"];
        v.extend_from_slice(args);
        let a = Args::try_parse_from(v).map_err(|e| e.to_string())?;
        a.check().map_err(|e| e.to_string())?;
        Ok(a)
    }

    #[test]
    fn defaults() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.size, SizeArg::Fixed(Size { width: 1920, height: 1080 }));
        assert_eq!(a.frame_count(), 600);
        assert_eq!((a.buffers, a.sync, a.dump_every), (2, SyncScheme::Split, 1));
        assert_eq!(a.queue_kind(), QueueKind::Transfer);
        assert_eq!(
            parse(&["--serve", "0"]).unwrap().queue_kind(),
            QueueKind::Compute,
            "a compute pass draws"
        );
        let draw = parse(&["--consume", "draw"]).unwrap();
        assert_eq!(draw.queue_kind(), QueueKind::Compute, "the draw is a compute pass");
        assert!(parse(&["--consume", "draw", "--queue", "graphics"]).is_ok());
    }

    #[test]
    fn bad_input_is_refused() {
        for bad in [
            &["--size", "0x10"][..],
            &["--size", "10"],
            &["--size", "axb"],
            &["--size", "-5x10"],
            &["--buffers", "0"],
            &["--buffers", "9"],
            &["--frames", "0"],
            &["--frames", "-3"],
            &["--scene", "teapot"],
            &["--serve", "0", "--queue", "transfer"],
            &["--consume", "draw", "--queue", "transfer"],
            &["--producer", "gpu"],
            &["--sync", "both"],
            &["--cost", "0"],
            &["--dump-every", "x"],
            &["--dump-every", "0", "--verify"],
            &["--frames", "10", "--sync", "shared", "--timeline-base", "18446744073709551610"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn window_size_is_for_the_viewer() {
        assert!(parse(&["--size", "window"]).is_err());
        let a = Args::try_parse_from(["vkcuda", "--size", "window"]).unwrap();
        assert!(a.check().is_ok());
        assert_eq!(a.size_or(Size { width: 3, height: 4 }), Size { width: 3, height: 4 });
        assert_eq!(a.queue_kind(), QueueKind::Graphics);
    }

    /// The `vkcuda ...` commands of a shell block's line: the line itself
    /// when it starts with `vkcuda`, and any double-quoted word that does
    /// (`sbatch --wrap "vkcuda check-dump ..."`); a `#` comment is not read.
    fn commands_of(line: &str) -> Vec<Vec<String>> {
        let mut words = Vec::new();
        let (mut word, mut quoted) = (String::new(), false);
        for c in line.chars() {
            match c {
                '"' => quoted = !quoted,
                '#' if !quoted && word.is_empty() => break,
                c if c.is_whitespace() && !quoted => words.push(std::mem::take(&mut word)),
                c => word.push(c),
            }
        }
        words.push(word);
        words.retain(|w| !w.is_empty());
        let mut commands: Vec<Vec<String>> = words
            .iter()
            .filter(|w| w.starts_with("vkcuda "))
            .map(|w| w.split_whitespace().map(String::from).collect())
            .collect();
        if words.first().is_some_and(|w| w == "vkcuda") {
            commands.insert(0, words);
        }
        commands
    }

    /// Every `vkcuda ...` command in the README's shell blocks parses as it
    /// is written, and passes the same checks a run makes before it starts.
    #[test]
    fn the_readmes_commands_parse() {
        let readme = include_str!("../../../README.md");
        let (mut fenced, mut shell, mut commands) = (false, false, Vec::new());
        for line in readme.lines() {
            if let Some(info) = line.strip_prefix("```") {
                (fenced, shell) = (!fenced, !fenced && matches!(info.trim(), "sh" | "bash" | "console"));
            } else if shell {
                commands.extend(commands_of(line.trim_end_matches('\\')));
            }
        }
        let refused: Vec<String> = commands
            .iter()
            .filter_map(|cmd| {
                let why = match Args::try_parse_from(cmd) {
                    Ok(a) => a.check().err()?.to_string(),
                    Err(e) => e.to_string(),
                };
                Some(format!("{}: {why}", cmd.join(" ")))
            })
            .collect();
        assert!(refused.is_empty(), "README commands refused:\n{}", refused.join("\n"));
        assert!(commands.len() >= 5, "only {} vkcuda commands found: {commands:?}", commands.len());
        assert_eq!(
            commands_of(r#"sbatch --wrap "vkcuda check-dump d --frames 9"  # vkcuda --no"#),
            [["vkcuda", "check-dump", "d", "--frames", "9"]]
        );
        assert!(commands_of("pip install vkcuda-0.1.0.whl   # the `vkcuda` command").is_empty());
    }
}

/// `vkcuda bench` options.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Variants, comma-separated: split-N and shared-N (interop with N shared
    /// images, 1..=8), draw-N, staging (CUDA → host → Vulkan upload), cpu,
    /// and the public patterns vkcuda is compared with: cpu-gated (NVIDIA
    /// ovrtx), host-wait (cuda-samples simpleVulkan), binary (cuda-samples
    /// vulkanImageCUDA).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "split-1,split-2,split-3,split-6,shared-2,staging,cpu"
    )]
    pub variants: Vec<Variant>,
    /// Queue families the consumer runs on, comma-separated: compute (copies
    /// run on the SMs, time-sliced with CUDA), transfer (copy engines, beside
    /// CUDA's SMs), graphics.
    #[arg(long, value_delimiter = ',', default_value = "compute,transfer", value_parser = core_values::<QueueKind>())]
    pub queues: Vec<QueueKind>,
    /// Image sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1280x720,1920x1080,3840x2160")]
    pub sizes: Vec<Size>,
    /// Formats of the shared frames, comma-separated (each variant runs each;
    /// the peers' patterns only RGBA8).
    #[arg(long, value_delimiter = ',', default_value = "rgba8", value_parser = core_values::<Format>())]
    pub formats: Vec<Format>,
    /// Layouts of the shared frames, comma-separated: array, buffer.
    #[arg(long, value_delimiter = ',', default_value = "array", value_parser = core_values::<Layout>())]
    pub layouts: Vec<Layout>,
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
    /// Write the headline table (vkcuda's default beside each peer pattern and
    /// the staging path, with the ratio to the best peer) as Markdown to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds between 0 and 3600")),
    }
}
