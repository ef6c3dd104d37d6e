//! NVIDIA Omniverse ovrtx's vulkan-interop example (examples/c/vulkan-interop,
//! src/main.cpp's main loop), on our images, kernels and consume step.
//!
//! One timeline that only CUDA signals; 2 images, one written by CUDA while
//! Vulkan reads the other. Each loop iteration, on one thread:
//! 1. wait for the fence of the one Vulkan frame in flight (write-after-read
//!    is guarded on the CPU);
//! 2. poll a CUDA event (`cuEventQuery`); once the frame is written, swap
//!    the read and write images and remember the timeline value it signals;
//! 3. if CUDA is idle, enqueue the next frame into the write image: kernel,
//!    event, signal `++counter`;
//! 4. Vulkan consumes the read image: waits the timeline at its value,
//!    queue-family transfer from and back to `EXTERNAL` around the use.
//!
//! While CUDA is busy, Vulkan consumes the same read image again (ovrtx
//! presents it again); only a frame's first consumption counts.

use anyhow::Result;
use cudarc::driver::sys;

use super::{Consumptions, Ran, Rig, Stop};
use vkcuda_run::frames::consumer::{Consume, Mark};

pub(super) fn run(rig: &mut Rig, consumer: &mut dyn Consume, stop: &mut Stop<'_>) -> Result<Ran> {
    let done = rig.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?;
    let mut counter = rig.shared.plan().initial_value();
    let (mut read, mut write) = (0usize, 1usize);
    // The frame CUDA is writing into `write`, and the (frame, timeline value) in `read`.
    let mut pending: Option<u64> = None;
    let mut shown: Option<(u64, u64)> = None;
    let (mut next, mut consumed) = (0u64, 0u64);
    let mut out = Consumptions::default();
    loop {
        // 1. The fence at the top of the loop.
        out.add(rig.frames.drain(consumer, &|| false)?);
        if stop.now(consumed) {
            break;
        }
        // 2. Non-blocking poll; swap once CUDA's frame is written.
        if let Some(f) = pending {
            if done.try_is_complete()? {
                shown = Some((f, counter));
                std::mem::swap(&mut read, &mut write);
                pending = None;
            }
        }
        // 3. At most one CUDA frame in flight.
        if pending.is_none() {
            rig.render(next, write)?;
            done.record(&rig.stream)?;
            counter += 1;
            rig.cuda.timeline(0).signal(&*rig.stream, counter)?;
            pending = Some(next);
            next += 1;
        }
        // 4. Vulkan reads the last completed image.
        if let Some((frame, value)) = shown {
            consumed = consumed.max(frame + 1);
            let wait = [rig.at(value)];
            rig.consume(consumer, frame, read, true, &wait, &[], Mark { semaphore: "frame", value })?;
        }
    }
    out.add(rig.frames.drain(consumer, &|| false)?);
    Ok(Ran { frames: consumed, completed: out.samples })
}
