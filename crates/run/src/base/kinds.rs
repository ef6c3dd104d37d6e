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

/// What renders a run's frames: the producer that runs, as [`ProducerKind`]
/// chose it, or as a front end that feeds frames made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Renders {
    /// CUDA kernels write the shared images.
    Cuda,
    /// The CPU reference.
    Cpu,
    /// CUDA into device memory, copied through the host (the baseline).
    Staging,
    /// Frames the caller hands in, in host memory.
    Fed,
    /// Frames the caller hands in, in CUDA memory.
    FedFromCuda,
}

/// Where a producer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// On a thread of the run's process.
    InProcess,
    /// In a child process of its own (`--producer-process child`).
    Child,
}

/// The producer a run has: what renders, and where. Everything that asks
/// which producer runs (the session, its failure, the viewer, the summaries)
/// asks this, never its name; [`fmt::Display`] gives the name users see
/// ("cuda", "cpu-child", "fed-cuda").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProducerId {
    /// What renders.
    pub renders: Renders,
    /// Where.
    pub place: Place,
}

impl ProducerId {
    /// `renders` on a thread of the run's process.
    pub const fn in_process(renders: Renders) -> Self {
        Self { renders, place: Place::InProcess }
    }

    /// `renders` in a child process.
    pub const fn child(renders: Renders) -> Self {
        Self { renders, place: Place::Child }
    }

    /// Whether it runs in a child process (its failure ends only the session).
    pub fn in_child(self) -> bool {
        self.place == Place::Child
    }

    /// Whether this process may hold a CUDA context for it (its footprint
    /// counts one): every producer of this process but the CPU reference; a
    /// child's CUDA is the child's own.
    pub fn cuda_here(self) -> bool {
        self.place == Place::InProcess && self.renders != Renders::Cpu
    }
}

impl fmt::Display for ProducerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.renders {
            Renders::Cuda => "cuda",
            Renders::Cpu => "cpu",
            Renders::Staging => "staging",
            Renders::Fed => "fed",
            Renders::FedFromCuda => "fed-cuda",
        })?;
        match self.place {
            Place::InProcess => Ok(()),
            Place::Child => f.write_str("-child"),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_producer_is_named_as_users_read_it() {
        let names: Vec<String> = [
            ProducerId::in_process(Renders::Cuda),
            ProducerId::in_process(Renders::Cpu),
            ProducerId::in_process(Renders::Staging),
            ProducerId::in_process(Renders::Fed),
            ProducerId::in_process(Renders::FedFromCuda),
            ProducerId::child(Renders::Cuda),
            ProducerId::child(Renders::Cpu),
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(names, ["cuda", "cpu", "staging", "fed", "fed-cuda", "cuda-child", "cpu-child"]);
        assert!(ProducerId::in_process(Renders::Fed).cuda_here());
        assert!(!ProducerId::in_process(Renders::Cpu).cuda_here());
        assert!(!ProducerId::child(Renders::Cuda).cuda_here() && ProducerId::child(Renders::Cuda).in_child());
    }
}
