//! What examples/minimal.rs needs from your engine that has nothing to do
//! with vkcuda: a command pool, and per frame slot a command buffer and a fence.

use anyhow::{Context, Result};
use ash::vk;

/// A queue family of `physical` with compute (where the frames are consumed here).
pub fn compute_family(instance: &ash::Instance, physical: vk::PhysicalDevice) -> Result<u32> {
    // SAFETY: plain query on a live physical device.
    let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
    let family = families.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE));
    Ok(family.context("no compute queue family")? as u32)
}

/// Your command pool, and per image a command buffer and a fence.
pub struct Commands {
    pool: vk::CommandPool,
    cmds: Vec<vk::CommandBuffer>,
    /// Signalled when the slot's last submission is done.
    fences: Vec<vk::Fence>,
}

impl Commands {
    /// `slots` command buffers and fences on queue family `family`.
    pub fn new(raw: &ash::Device, family: u32, slots: usize) -> Result<Self> {
        let flags = vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER;
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(family).flags(flags);
        // SAFETY: valid create info; destroyed in `destroy`, after the queue is idle.
        let pool = unsafe { raw.create_command_pool(&pool_info, None) }?;
        let alloc =
            vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(slots as u32);
        // SAFETY: `pool` is live.
        let cmds = unsafe { raw.allocate_command_buffers(&alloc) }?;
        // SAFETY: default create infos; destroyed in `destroy`.
        let fences = (0..slots).map(|_| unsafe { raw.create_fence(&Default::default(), None) });
        Ok(Self { pool, cmds, fences: fences.collect::<Result<_, _>>()? })
    }

    /// Slot `slot`'s command buffer and fence.
    pub fn slot(&self, slot: usize) -> (vk::CommandBuffer, vk::Fence) {
        (self.cmds[slot], self.fences[slot])
    }

    /// Waits for slot `slot`'s last submission, and resets its fence.
    pub fn wait(&self, raw: &ash::Device, slot: usize) -> Result<()> {
        let fence = &self.fences[slot..=slot];
        // SAFETY: the fence was submitted with the slot's last frame.
        unsafe { raw.wait_for_fences(fence, true, 10_000_000_000) }?;
        // SAFETY: signalled, so no submission uses it.
        Ok(unsafe { raw.reset_fences(fence) }?)
    }

    /// Once the queue is idle: nothing uses the pool or fences any more.
    pub fn destroy(self, raw: &ash::Device) {
        for f in self.fences {
            // SAFETY: as above.
            unsafe { raw.destroy_fence(f, None) };
        }
        // SAFETY: as above; its command buffers go with it.
        unsafe { raw.destroy_command_pool(self.pool, None) };
    }
}
