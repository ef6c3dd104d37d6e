//! A device-local 2D image that only Vulkan uses: the headless copy target
//! of the array layout (the core's shared images are exportable and
//! hand-allocated; this one comes from gpu-allocator).

use std::sync::Arc;

use anyhow::{Context as _, Result};
use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;
use vkcuda::vk::device::Device;
use vkcuda::vk::memory::image_info;

/// A device-local, OPTIMAL-tiled 2D image and its allocation.
pub struct Image {
    device: Arc<Device>,
    /// The image.
    pub raw: vk::Image,
    allocation: Option<Allocation>,
}

impl Image {
    /// Creates an OPTIMAL-tiled image.
    pub fn new(
        device: Arc<Device>,
        name: &str,
        format: vk::Format,
        extent: vk::Extent2D,
        usage: vk::ImageUsageFlags,
    ) -> Result<Self> {
        let info = image_info(format, extent, usage);
        // SAFETY: valid create info; destroyed in Drop.
        let raw = unsafe { device.raw().create_image(&info, None) }
            .with_context(|| format!("vkCreateImage ({name})"))?;
        let mut this = Self { device, raw, allocation: None };
        // SAFETY: `raw` is live.
        let requirements = unsafe { this.device.raw().get_image_memory_requirements(raw) };
        let desc = AllocationCreateDesc {
            name,
            requirements,
            location: MemoryLocation::GpuOnly,
            linear: false,
            allocation_scheme: AllocationScheme::GpuAllocatorManaged,
        };
        let allocation = (this.device.allocator().allocate(&desc))
            .with_context(|| format!("allocating {} bytes for {name}", requirements.size))?;
        // SAFETY: the allocation is live; its memory stays while `allocation` does.
        let memory = unsafe { allocation.memory() };
        // SAFETY: the allocation fits the requirements and is bound once.
        unsafe { this.device.raw().bind_image_memory(raw, memory, allocation.offset()) }?;
        this.allocation = Some(allocation);
        Ok(this)
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        if let Some(a) = self.allocation.take() {
            self.device.allocator().free(a).ok();
        }
        // SAFETY: the GPU is done with the image (teardown waits first).
        unsafe { self.device.raw().destroy_image(self.raw, None) };
    }
}
