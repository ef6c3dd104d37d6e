//! The application's kinds of run: who produces, how a headless run
//! consumes, which hand-over, how the viewer presents. The core knows none
//! of them; the CLI gives them their command-line names.

use std::fmt;

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

/// What the headless consumer does with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeKind {
    /// Copies the shared image into a target of the same size.
    Copy,
    /// Draws it with the viewer's draw pass, letterboxed into a target of any size.
    Draw,
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

/// When the viewer's producer starts a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Latency {
    /// Once the frame before is on screen: what a frame shows (a new kernel,
    /// the pointer) is as new as it can be; render and display take turns.
    Low,
    /// As soon as a shared image is free: render and display overlap.
    Throughput,
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
