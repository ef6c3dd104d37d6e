//! cuda-samples simpleVulkan (Samples/5_Domain_Specific/simpleVulkan, its
//! `_VK_TIMELINE_SEMAPHORE` path: main.cpp `drawFrame`, VulkanBaseApp.cpp
//! `drawFrame`), on our images, kernels and consume step.
//!
//! One timeline for both directions: even values "ready for Vulkan", odd
//! values "Vulkan done"; one image. Iteration `k`, on one thread:
//! 1. the CPU blocks in `vkWaitSemaphores` until the timeline reaches `2k`;
//! 2. Vulkan waits `2k`, consumes frame `k − 1` (nothing at `k = 0`), signals `2k + 1`;
//! 3. CUDA waits `2k + 1`, renders frame `k`, signals `2k + 2`.
//!
//! The sample shares a vertex buffer and has no barriers; on an image we keep
//! vkcuda's queue-family transfer from and back to `EXTERNAL`.

use anyhow::Result;

use super::{Consumptions, Ran, Rig, Stop};
use vkcuda_run::frames::consumer::{Consume, Mark};

pub(super) fn run(rig: &mut Rig, consumer: &mut dyn Consume, stop: &mut Stop<'_>) -> Result<Ran> {
    let base = rig.shared.plan().initial_value();
    let mut out = Consumptions::default();
    let mut k = 0u64;
    loop {
        let even = base + 2 * k;
        // 1. The CPU waits for CUDA's frame k - 1.
        rig.shared.timelines()[0].wait(even, &|| false)?;
        out.add(rig.frames.drain(consumer, &|| false)?);
        // 2. Vulkan.
        let (wait, signal) = ([rig.at(even)], [rig.at(even + 1)]);
        match k {
            0 => rig.signal_only(&wait, &signal)?,
            _ => out.add(rig.consume(
                consumer,
                k - 1,
                0,
                true,
                &wait,
                &signal,
                Mark { semaphore: "frame", value: even + 1 },
            )?),
        }
        if stop.now(k) {
            break;
        }
        // 3. CUDA.
        rig.cuda.timeline(0).wait(&*rig.stream, even + 1)?;
        rig.render(k, 0)?;
        rig.cuda.timeline(0).signal(&*rig.stream, even + 2)?;
        k += 1;
    }
    out.add(rig.frames.drain(consumer, &|| false)?);
    Ok(Ran { frames: k, completed: out.samples })
}
