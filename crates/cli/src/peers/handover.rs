//! The hand-over a run uses: vkcuda's, or one of the peers' patterns
//! (their names, for the CLI's `--handover` and bench's variants).

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
