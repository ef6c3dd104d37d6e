//! cuda-samples vulkanImageCUDA (Samples/5_Domain_Specific/vulkanImageCUDA,
//! `drawFrame`, `submitVulkan`, `submitVulkanCuda`, `cudaUpdateVkImage`), on
//! our images, kernels and consume step, without its 10 ms sleep per frame.
//!
//! Two exported binary semaphores, "cudaDone" and "vkDone"; one image that
//! stays on the Vulkan queue (no queue-family ownership transfer: the spec
//! wants one for memory CUDA writes). Iteration `k`, on one thread:
//! 1. Vulkan waits "cudaDone" (not at `k = 0`), consumes frame `k − 1`,
//!    signals "vkDone"; up to 4 frames in flight (the sample's MAX_FRAMES fences);
//! 2. CUDA waits "vkDone", renders frame `k`, signals "cudaDone".

use anyhow::Result;
use ash::vk;

use super::{Consumptions, Ran, Rig, Stop};
use vkcuda_run::frames::consumer::{Consume, Mark};

pub(super) fn run(rig: &mut Rig, consumer: &mut dyn Consume, stop: &mut Stop<'_>) -> Result<Ran> {
    let info = |s: vk::Semaphore| {
        vk::SemaphoreSubmitInfo::default().semaphore(s).stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
    };
    let (cuda_done, vk_done) = (info(rig.binary[0].raw), info(rig.binary[1].raw));
    let mut out = Consumptions::default();
    let mut k = 0u64;
    loop {
        // The last frame's consumption signals nothing: no CUDA wait would consume it.
        let last = k > 0 && stop.now(k);
        let signal: &[vk::SemaphoreSubmitInfo<'_>] = if last { &[] } else { std::slice::from_ref(&vk_done) };
        match k {
            0 => rig.signal_only(&[], signal)?,
            _ => out.add(rig.consume(
                consumer,
                k - 1,
                0,
                false,
                &[cuda_done],
                signal,
                Mark { semaphore: "vkDone", value: 0 },
            )?),
        }
        if last {
            break;
        }
        rig.binary_cuda[1].wait(&*rig.stream, 0)?;
        rig.render(k, 0)?;
        rig.binary_cuda[0].signal(&*rig.stream, 0)?;
        k += 1;
    }
    out.add(rig.frames.drain(consumer, &|| false)?);
    Ok(Ran { frames: k, completed: out.samples })
}
