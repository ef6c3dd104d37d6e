//! Domain types, at the bottom of the house: what a run is made of (image
//! size, queue choice, producer, CUDA scheduling, present mode). No clap here:
//! the CLI (`app::cli`) gives them their command-line names and help.

use std::fmt;

/// An image size in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (w, h) =
            s.split_once(['x', 'X']).ok_or_else(|| format!("'{s}' is not WIDTHxHEIGHT (e.g. 1920x1080)"))?;
        let parse = |v: &str, what: &str| {
            v.trim().parse::<u32>().map_err(|_| format!("{what} '{v}' in '{s}' is not a whole number"))
        };
        let size = Size { width: parse(w, "width")?, height: parse(h, "height")? };
        if size.width == 0 || size.height == 0 {
            return Err(format!("size '{s}' has a zero side"));
        }
        Ok(size)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// Which queue family the consumer submits to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(rename_all = "lowercase"))]
pub enum QueueKind {
    /// Graphics and compute (what a presenter needs).
    Graphics,
    /// Compute, preferably a family without graphics.
    Compute,
    /// Transfer only (copy engines), if the device has such a family.
    Transfer,
}

impl fmt::Display for QueueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            QueueKind::Graphics => "graphics",
            QueueKind::Compute => "compute",
            QueueKind::Transfer => "transfer",
        })
    }
}

/// Who renders the frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProducerKind {
    /// CUDA when a CUDA device matches the Vulkan device by UUID, else the CPU.
    Auto,
    /// CUDA kernels write the shared images through `surf2Dwrite`.
    Cuda,
    /// CPU threads render the reference into staging buffers; Vulkan uploads them.
    Cpu,
    /// Baseline without sharing: CUDA renders into device memory and copies it
    /// through the host into a staging buffer that Vulkan uploads.
    Staging,
}

impl fmt::Display for ProducerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProducerKind::Auto => "auto",
            ProducerKind::Cuda => "cuda",
            ProducerKind::Cpu => "cpu",
            ProducerKind::Staging => "staging",
        })
    }
}

/// How a CUDA host thread waits for the GPU (the primary context's scheduling flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaSched {
    /// The driver decides (spins while there are fewer busy threads than cores).
    Auto,
    /// Spin: lowest wake-up latency, one core busy.
    Spin,
    /// Spin but yield the core.
    Yield,
    /// Sleep on an OS primitive until the GPU is done.
    Blocking,
}

/// What the headless consumer does with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeKind {
    /// Copies the shared image into a target of the same size.
    Copy,
    /// Draws it with the viewer's draw pass, letterboxed into a target of any size.
    Draw,
}

/// How CUDA hands frames to Vulkan: vkcuda's pattern, or one of the public
/// patterns integrators copy today (`vkcuda bench` puts them side by side;
/// each runs on the same images, kernels and consume step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Handover {
    /// vkcuda: one timeline per signaller, N images, the GPUs wait, the CPU never does.
    Vkcuda,
    /// NVIDIA Omniverse ovrtx's vulkan-interop example: one timeline only CUDA
    /// signals, the CPU polls a CUDA event before swapping 2 images, a fence
    /// keeps one Vulkan frame in flight.
    CpuGated,
    /// cuda-samples simpleVulkan: one timeline, even values for Vulkan, odd
    /// for CUDA; the CPU blocks in `vkWaitSemaphores` every frame; 1 image.
    HostWait,
    /// cuda-samples vulkanImageCUDA: two exported binary semaphores, 1 image,
    /// no queue-family ownership transfer.
    Binary,
}

impl Handover {
    /// The short name (CLI value, bench variant).
    pub fn name(self) -> &'static str {
        match self {
            Handover::Vkcuda => "vkcuda",
            Handover::CpuGated => "cpu-gated",
            Handover::HostWait => "host-wait",
            Handover::Binary => "binary",
        }
    }
}

/// How the viewer's frames reach its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresentPath {
    /// Vulkan if the device can present to the window, else the CPU.
    Auto,
    /// A Vulkan swapchain of the window's surface.
    Vulkan,
    /// Drawn on the GPU, read back, put in the window by the CPU (softbuffer).
    Cpu,
}

/// How a window presents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresentMode {
    /// Vsync; always supported.
    Fifo,
    /// Vsync without blocking: the newest frame replaces a queued one.
    Mailbox,
    /// No vsync; may tear.
    Immediate,
}

impl PresentMode {
    /// Vulkan's name for it.
    pub fn raw(self) -> ash::vk::PresentModeKHR {
        match self {
            PresentMode::Fifo => ash::vk::PresentModeKHR::FIFO,
            PresentMode::Mailbox => ash::vk::PresentModeKHR::MAILBOX,
            PresentMode::Immediate => ash::vk::PresentModeKHR::IMMEDIATE,
        }
    }
}
