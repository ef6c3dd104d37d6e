//! The images both APIs share: OPTIMAL-tiled RGBA8, in their own dedicated,
//! exportable memory, allocated by hand (gpu-allocator cannot export).
//!
//! Ownership rules:
//! - The image stays in `GENERAL` layout for its whole life, so CUDA (which
//!   knows no layouts) always finds it the way it expects.
//! - Between Vulkan uses it belongs to `VK_QUEUE_FAMILY_EXTERNAL`: every Vulkan
//!   use acquires it first and releases it after (see `frame.rs`).
//! - CUDA's import (`cuda::ExternalImage`) must be destroyed before this
//!   image: the producer thread, which owns the import, ends first.

use std::sync::Arc;

use crate::error::{bail, Context as _, Result};
use ash::vk;

use super::device::Device;
use super::memory::image_info;
use super::SHARED_FORMAT;
use crate::platform::{self, Handle, MEMORY_HANDLE as HANDLE};

/// One shared image and its dedicated memory (ownership rules: see the module).
pub struct SharedImage {
    device: Arc<Device>,
    /// The image.
    pub image: vk::Image,
    memory: vk::DeviceMemory,
    /// `vkGetImageMemoryRequirements().size`: CUDA must import exactly this
    /// many bytes (more than width × height × 4: the tiled layout pads).
    pub allocation_size: u64,
    /// Width and height.
    pub extent: vk::Extent2D,
    /// Whether the memory was allocated exportable.
    pub exportable: bool,
}

const USAGE: vk::ImageUsageFlags = vk::ImageUsageFlags::from_raw(
    vk::ImageUsageFlags::STORAGE.as_raw()
        | vk::ImageUsageFlags::SAMPLED.as_raw()
        | vk::ImageUsageFlags::TRANSFER_SRC.as_raw()
        | vk::ImageUsageFlags::TRANSFER_DST.as_raw()
        | vk::ImageUsageFlags::COLOR_ATTACHMENT.as_raw(),
);

/// Whether the device can export images like ours (as [`crate::platform::MEMORY_HANDLE`]).
pub fn can_export(device: &Device) -> bool {
    if device.memory_export.is_none() {
        return false;
    }
    let mut external = vk::PhysicalDeviceExternalImageFormatInfo::default().handle_type(HANDLE);
    let info = vk::PhysicalDeviceImageFormatInfo2::default()
        .format(SHARED_FORMAT)
        .ty(vk::ImageType::TYPE_2D)
        .tiling(vk::ImageTiling::OPTIMAL)
        .usage(USAGE)
        .push_next(&mut external);
    let mut external_props = vk::ExternalImageFormatProperties::default();
    let mut props = vk::ImageFormatProperties2::default().push_next(&mut external_props);
    // SAFETY: valid chained structs; plain query.
    let ok = unsafe {
        device.instance.get_physical_device_image_format_properties2(device.info.physical, &info, &mut props)
    };
    ok.is_ok()
        && external_props
            .external_memory_properties
            .external_memory_features
            .contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE)
}

impl SharedImage {
    /// Creates the image and its dedicated memory, exportable when `export`.
    pub fn new(device: Arc<Device>, extent: vk::Extent2D, export: bool) -> Result<Self> {
        let mut external = vk::ExternalMemoryImageCreateInfo::default().handle_types(HANDLE);
        let mut info = image_info(SHARED_FORMAT, extent, USAGE);
        if export {
            info = info.push_next(&mut external);
        }
        // SAFETY: valid create info; destroyed in Drop (or below on failure).
        let image =
            unsafe { device.raw.create_image(&info, None) }.context("vkCreateImage (shared image)")?;
        let mut this = Self {
            device,
            image,
            memory: vk::DeviceMemory::null(),
            allocation_size: 0,
            extent,
            exportable: export,
        };
        // SAFETY: `image` is live.
        let req = unsafe { this.device.raw.get_image_memory_requirements(image) };
        let type_index =
            this.device.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL)?;
        // A dedicated allocation: CUDA imports it with CUDA_EXTERNAL_MEMORY_DEDICATED.
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().image(image);
        let mut export_info = vk::ExportMemoryAllocateInfo::default().handle_types(HANDLE);
        let mut alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(type_index)
            .push_next(&mut dedicated);
        if export {
            alloc = alloc.push_next(&mut export_info);
        }
        // SAFETY: valid allocate info chaining locals; freed in Drop.
        this.memory = unsafe { this.device.raw.allocate_memory(&alloc, None) }
            .with_context(|| format!("vkAllocateMemory ({} bytes, shared image)", req.size))?;
        this.allocation_size = req.size;
        // SAFETY: fresh memory of the required size and type, bound once at offset 0.
        unsafe { this.device.raw.bind_image_memory(image, this.memory, 0) }.context("vkBindImageMemory")?;
        Ok(this)
    }

    /// A new handle to the image's memory, for CUDA to import (see
    /// [`crate::platform`] for who owns it after the import).
    pub fn export(&self) -> Result<Handle> {
        let (Some(loader), true) = (&self.device.memory_export, self.exportable) else {
            bail!("this shared image was not allocated exportable");
        };
        platform::export_memory(loader, self.memory)
    }
}

impl Drop for SharedImage {
    fn drop(&mut self) {
        // SAFETY: the GPU is idle for this image (teardown waits first); both objects are ours.
        unsafe {
            self.device.raw.destroy_image(self.image, None);
            self.device.raw.free_memory(self.memory, None);
        }
    }
}
