//! The images both APIs share ([`crate::Layout::Array`]): OPTIMAL-tiled, of
//! any [`Format`], in their own dedicated, exportable memory, allocated by
//! hand (gpu-allocator cannot export).
//!
//! Ownership rules:
//! - The image stays in `GENERAL` layout for its whole life, so CUDA (which
//!   knows no layouts) always finds it the way it expects.
//! - Between Vulkan uses it belongs to `VK_QUEUE_FAMILY_EXTERNAL`: every Vulkan
//!   use acquires it first and releases it after (see `frame.rs`).
//! - CUDA's import (`cuda::ExternalImage`) must be destroyed before this
//!   image: the producer thread, which owns the import, ends first.

use std::sync::Arc;

use crate::error::{Context as _, Result};
use ash::vk;

use super::device::Device;
use super::memory::{allocate_dedicated, export_dedicated, image_info, Dedicated};
use crate::error::Error;
use crate::format::{Format, FrameDesc, Layout};
use crate::platform::{self, ExportedMemory, MEMORY_HANDLE as HANDLE};

/// One shared image and its dedicated memory (ownership rules: see the module).
///
/// Its fields are private: `Drop` destroys the image and frees the memory,
/// and [`SharedImage::export`] hands CUDA the allocation's size, so none may
/// be changed from outside.
pub struct SharedImage {
    device: Arc<Device>,
    image: vk::Image,
    dedicated: Dedicated,
    extent: vk::Extent2D,
    format: Format,
    usage: vk::ImageUsageFlags,
    exportable: bool,
}

/// What every shared image must allow: copies both ways and sampling.
const REQUIRED: vk::ImageUsageFlags = vk::ImageUsageFlags::from_raw(
    vk::ImageUsageFlags::SAMPLED.as_raw()
        | vk::ImageUsageFlags::TRANSFER_SRC.as_raw()
        | vk::ImageUsageFlags::TRANSFER_DST.as_raw(),
);

/// The usage of shared images of `format` on `device`: sampled and copies both ways, plus
/// colour attachment and storage where the format's OPTIMAL tiling has them
/// (sRGB formats are rarely storage images), so an engine can render or
/// compute into them too. The export query is asked for exactly this usage.
pub fn image_usage(device: &Device, format: Format) -> vk::ImageUsageFlags {
    // SAFETY: plain query on the device's physical device.
    let props = unsafe {
        device.instance().get_physical_device_format_properties(device.info().physical, format.vk())
    };
    let features = props.optimal_tiling_features;
    let mut usage = REQUIRED;
    if features.contains(vk::FormatFeatureFlags::COLOR_ATTACHMENT) {
        usage |= vk::ImageUsageFlags::COLOR_ATTACHMENT;
    }
    if features.contains(vk::FormatFeatureFlags::STORAGE_IMAGE) {
        usage |= vk::ImageUsageFlags::STORAGE;
    }
    usage
}

/// Whether `device` can make exportable shared images of `desc`'s format
/// and extent: the driver's answer to `vkGetPhysicalDeviceImageFormatProperties2`
/// with the export's handle type, and the format's sampling and copy features.
pub fn check_export(device: &Device, desc: &FrameDesc) -> Result<()> {
    let unsupported =
        |why: String| Error::FormatUnsupported { format: desc.format, layout: Layout::Array, context: why };
    if device.memory_export().is_none() {
        return Err(unsupported(format!(
            "the device was made without {}",
            platform::MEMORY_EXTENSION.to_string_lossy()
        )));
    }
    // SAFETY: plain query on the device's physical device.
    let features = unsafe {
        device.instance().get_physical_device_format_properties(device.info().physical, desc.format.vk())
    }
    .optimal_tiling_features;
    let needed = vk::FormatFeatureFlags::SAMPLED_IMAGE
        | vk::FormatFeatureFlags::TRANSFER_SRC
        | vk::FormatFeatureFlags::TRANSFER_DST;
    if !features.contains(needed) {
        return Err(unsupported(format!("{:?} OPTIMAL tiling has only {features:?}", desc.format.vk())));
    }
    let mut external = vk::PhysicalDeviceExternalImageFormatInfo::default().handle_type(HANDLE);
    let info = vk::PhysicalDeviceImageFormatInfo2::default()
        .format(desc.format.vk())
        .ty(vk::ImageType::TYPE_2D)
        .tiling(vk::ImageTiling::OPTIMAL)
        .usage(image_usage(device, desc.format))
        .push_next(&mut external);
    let mut external_props = vk::ExternalImageFormatProperties::default();
    let mut props = vk::ImageFormatProperties2::default().push_next(&mut external_props);
    // SAFETY: valid chained structs; plain query.
    let asked = unsafe {
        device.instance().get_physical_device_image_format_properties2(
            device.info().physical,
            &info,
            &mut props,
        )
    };
    let limits = props.image_format_properties.max_extent;
    let features = external_props.external_memory_properties.external_memory_features;
    match asked {
        Err(e) => {
            Err(unsupported(format!("vkGetPhysicalDeviceImageFormatProperties2 ({HANDLE:?} export): {e}")))
        }
        Ok(()) if !features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE) => Err(unsupported(
            format!("the driver says images of this format are not exportable ({features:?})"),
        )),
        Ok(()) if desc.extent.width > limits.width || desc.extent.height > limits.height => {
            Err(unsupported(format!(
                "{}x{} exceeds this format's limit of {}x{}",
                desc.extent.width, desc.extent.height, limits.width, limits.height
            )))
        }
        Ok(()) => Ok(()),
    }
}

impl SharedImage {
    /// Creates an image of `desc`'s format and extent and its dedicated memory, exportable when `export`.
    pub fn new(device: Arc<Device>, desc: &FrameDesc, export: bool) -> Result<Self> {
        let extent = desc.extent;
        let usage = image_usage(&device, desc.format);
        let mut external = vk::ExternalMemoryImageCreateInfo::default().handle_types(HANDLE);
        let mut info = image_info(desc.format.vk(), extent, usage);
        if export {
            info = info.push_next(&mut external);
        }
        // SAFETY: valid create info; destroyed in Drop (or below on failure).
        let image =
            unsafe { device.raw().create_image(&info, None) }.context("vkCreateImage (shared image)")?;
        let mut this = Self {
            device,
            image,
            dedicated: Dedicated::NONE,
            extent,
            format: desc.format,
            usage,
            exportable: export,
        };
        // SAFETY: `image` is live.
        let req = unsafe { this.device.raw().get_image_memory_requirements(image) };
        let dedicated = vk::MemoryDedicatedAllocateInfo::default().image(image);
        this.dedicated = allocate_dedicated(&this.device, req, dedicated, export, "shared image")?;
        // SAFETY: fresh memory of the required size and type, bound once at offset 0.
        unsafe { this.device.raw().bind_image_memory(image, this.dedicated.memory, 0) }
            .context("vkBindImageMemory")?;
        Ok(this)
    }

    /// The image (it stays this `SharedImage`'s: destroyed when it drops).
    pub fn image(&self) -> vk::Image {
        self.image
    }

    /// `vkGetImageMemoryRequirements().size`: what CUDA imports (more than
    /// width × height × bytes per pixel: tiling pads).
    pub fn allocation_size(&self) -> u64 {
        self.dedicated.size
    }

    /// Width and height.
    pub fn extent(&self) -> vk::Extent2D {
        self.extent
    }

    /// The pixel format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The usage it was created with (see [`image_usage`]).
    pub fn usage(&self) -> vk::ImageUsageFlags {
        self.usage
    }

    /// Whether the memory was allocated exportable.
    pub fn exportable(&self) -> bool {
        self.exportable
    }

    /// A new handle to the image's memory, with the allocation's size, for
    /// CUDA to import (see [`crate::platform`] for who owns it after the import).
    pub fn export(&self) -> Result<ExportedMemory> {
        export_dedicated(&self.device, self.dedicated, self.exportable, "shared image")
    }
}

impl Drop for SharedImage {
    fn drop(&mut self) {
        // The GPU is idle for this image (teardown waits first); both objects are ours.
        // SAFETY: as above; the image before its memory.
        unsafe { self.device.raw().destroy_image(self.image, None) };
        // SAFETY: as above; nothing is bound to the memory any more.
        unsafe { self.device.raw().free_memory(self.dedicated.memory, None) };
    }
}
