//! A child that lavapipe can run (CI): it imports the frames' memory into a
//! Vulkan device of its own, maps it, and writes the CPU reference there;
//! with no timeline handles, the session signals "rendered" for it once it
//! says a frame is written. Buffer frames only (an image's tiling is the
//! driver's), in host-visible memory (lavapipe's; not NVIDIA's device memory).

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use ash::vk;

use super::channel::{Channel, Received};
use super::offer::{Offered, PlannedFrames};
use super::wire::{FromChild, Produce, ToChild};
use super::Injected;
use crate::frames::gpu::vulkan_instance;
use crate::metrics::clock::now_ns;
use crate::scene::{render_cpu_as, FrameArgs};
use vkcuda::types::QueueKind;
use vkcuda::vk::device::{list_gpus, Device, Queue};
use vkcuda::vk::shared_buffer::BUFFER_USAGE;
use vkcuda::Layout;

/// Serves `offered`'s frames until the session says stop.
pub(super) fn serve(channel: &Channel, produce: &Produce, offered: Offered) -> Result<()> {
    let Offered { offer, memory, timelines } = offered;
    let PlannedFrames { plan, desc } = offer.frames.parts()?;
    ensure!(
        desc.layout == Layout::Buffer && timelines.is_empty(),
        "the reference child writes buffer frames whose timelines the session signals (it was offered {desc} \
         with {} timeline handles)",
        timelines.len()
    );
    let instance = vulkan_instance(produce.validate, &[])?;
    let gpu = list_gpus(&instance)?
        .into_iter()
        .find(|g| g.uuid == offer.uuid)
        .context("no Vulkan device here has the session's device UUID")?;
    let queue = Queue { kind: QueueKind::Compute, present: None };
    let device = Device::new(instance.clone(), gpu, false, queue, Default::default())?;
    let mut frames = Vec::new();
    for (fd, &size) in memory.into_iter().zip(&offer.memory) {
        frames.push(Mapped::import(&device, fd, size, desc.bytes())?);
    }
    channel.send(&FromChild::Ready { arch: None })?;
    let inject = Injected::from_env()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    loop {
        match channel.recv::<ToChild>()? {
            Received::Message(ToChild::Frame { g, spec }) => {
                inject.before(g);
                let started = Instant::now();
                let args = FrameArgs::new(&spec.scene, spec.tick);
                render_cpu_as(&spec.scene, &args, desc.format, frames[plan.image(g)].bytes()?, threads);
                let (render_ns, rendered_ns) = (started.elapsed().as_nanos() as u64, now_ns());
                channel.send(&FromChild::Timing { g, render_ns, rendered_ns })?;
                channel.send(&FromChild::Produced { g })?;
            }
            Received::Message(ToChild::Kernel { .. }) => bail!("the reference child runs no kernel"),
            Received::Message(ToChild::Stop) => break,
            Received::Quiet => {}
            Received::Closed => return Ok(()),
        }
    }
    drop(frames);
    drop(device);
    let counts = instance.validation().counts();
    ensure!(counts.clean(), "the reference child's validation layer reported {counts}");
    channel.send(&FromChild::Done)
}

/// One frame's memory, imported and mapped.
struct Mapped {
    device: Arc<Device>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    pointer: *mut u8,
    bytes: usize,
}

impl Mapped {
    /// Imports `fd`, an exported dedicated allocation of `size` bytes
    /// holding a buffer frame of `bytes` bytes, and maps it.
    fn import(device: &Arc<Device>, fd: OwnedFd, size: u64, bytes: u64) -> Result<Self> {
        let handle = vkcuda::platform::MEMORY_HANDLE;
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle);
        let info = vk::BufferCreateInfo::default().size(bytes).usage(BUFFER_USAGE).push_next(&mut external);
        // SAFETY: valid create info; destroyed in Drop (or below).
        let buffer = unsafe { device.raw().create_buffer(&info, None) }.context("vkCreateBuffer")?;
        let mut this = Self {
            device: device.clone(),
            buffer,
            memory: vk::DeviceMemory::null(),
            pointer: std::ptr::null_mut(),
            bytes: 0,
        };
        // SAFETY: a live buffer.
        let req = unsafe { device.raw().get_buffer_memory_requirements(buffer) };
        ensure!(
            req.size <= size,
            "a frame's allocation of {size} bytes, where the buffer needs {}",
            req.size
        );
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let kind =
            device.memory_type(req.memory_type_bits, host).context("the reference child maps the frames")?;
        let mut import = vk::ImportMemoryFdInfoKHR::default().handle_type(handle).fd(fd.as_raw_fd());
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(kind)
            .push_next(&mut import)
            .push_next(&mut dedicated);
        // SAFETY: valid allocate info naming a descriptor we own; freed in Drop.
        this.memory =
            unsafe { device.raw().allocate_memory(&alloc, None) }.context("importing a frame's memory")?;
        // Vulkan owns the descriptor once the import succeeded.
        let _ = fd.into_raw_fd();
        // SAFETY: fresh memory of the required size, bound once at offset 0.
        unsafe { device.raw().bind_buffer_memory(buffer, this.memory, 0) }.context("vkBindBufferMemory")?;
        // SAFETY: host-visible memory, mapped once, unmapped in Drop.
        let mapped =
            unsafe { device.raw().map_memory(this.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .context("vkMapMemory")?;
        (this.pointer, this.bytes) = (mapped.cast(), bytes as usize);
        Ok(this)
    }

    /// The frame's bytes.
    fn bytes(&mut self) -> Result<&mut [u8]> {
        ensure!(!self.pointer.is_null(), "a frame not mapped");
        // SAFETY: mapped, `bytes` long; the session sent this frame only once the consumer
        // released it, so nothing else reads or writes it until this child says it is produced.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.pointer, self.bytes) })
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // This child's own objects; its device ran no work on them.
        if !self.pointer.is_null() {
            // SAFETY: mapped once, in `import`.
            unsafe { self.device.raw().unmap_memory(self.memory) };
        }
        // SAFETY: as above; the buffer before its memory.
        unsafe { self.device.raw().destroy_buffer(self.buffer, None) };
        if self.memory != vk::DeviceMemory::null() {
            // SAFETY: as above; nothing is bound to it any more.
            unsafe { self.device.raw().free_memory(self.memory, None) };
        }
    }
}
