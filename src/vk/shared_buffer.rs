//! The buffers both APIs share ([`crate::Layout::Buffer`]): a frame's rows
//! packed in linear memory (row pitch = width × bytes per pixel), in their
//! own dedicated, exportable memory. CUDA maps it with
//! `cuExternalMemoryGetMappedBuffer` and writes it through a plain device
//! pointer; Vulkan copies it into an image, or reads it directly.
//!
//! Ownership rules, as for the shared images: between Vulkan uses the
//! buffer belongs to `VK_QUEUE_FAMILY_EXTERNAL` (every Vulkan use acquires
//! and releases it), and CUDA's import is destroyed before it.

use std::sync::Arc;

use ash::vk;

use super::device::Device;
use super::memory::{allocate_dedicated, export_dedicated, Dedicated};
use crate::error::{Context as _, Error, Result};
use crate::format::{FrameDesc, Layout};
use crate::platform::{self, ExportedMemory, MEMORY_HANDLE as HANDLE};

/// What every shared buffer allows: copies both ways, and reads and writes
/// from shaders (an engine may read it directly).
pub const BUFFER_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw()
        | vk::BufferUsageFlags::STORAGE_BUFFER.as_raw(),
);

/// One shared buffer and its dedicated memory.
///
/// Its fields are private, as [`crate::vk::shared_image::SharedImage`]'s.
pub struct SharedBuffer {
    device: Arc<Device>,
    buffer: vk::Buffer,
    dedicated: Dedicated,
    size: u64,
    desc: FrameDesc,
    exportable: bool,
}

/// Whether `device` can export buffers for `desc`: the driver's answer to
/// `vkGetPhysicalDeviceExternalBufferProperties`.
pub fn check_export(device: &Device, desc: &FrameDesc) -> Result<()> {
    let unsupported =
        |why: String| Error::FormatUnsupported { format: desc.format, layout: Layout::Buffer, context: why };
    if device.memory_export().is_none() {
        return Err(unsupported(format!(
            "the device was made without {}",
            platform::MEMORY_EXTENSION.to_string_lossy()
        )));
    }
    let info = vk::PhysicalDeviceExternalBufferInfo::default().usage(BUFFER_USAGE).handle_type(HANDLE);
    let mut props = vk::ExternalBufferProperties::default();
    // SAFETY: valid structs; plain query.
    unsafe {
        device.instance().get_physical_device_external_buffer_properties(
            device.info().physical,
            &info,
            &mut props,
        )
    };
    let features = props.external_memory_properties.external_memory_features;
    if !features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE) {
        return Err(unsupported(format!("the driver says such buffers are not exportable ({features:?})")));
    }
    Ok(())
}

impl SharedBuffer {
    /// Creates a buffer for one frame of `desc` and its dedicated memory, exportable when `export`.
    pub fn new(device: Arc<Device>, desc: &FrameDesc, export: bool) -> Result<Self> {
        let size = desc.bytes();
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
        let mut info = vk::BufferCreateInfo::default().size(size).usage(BUFFER_USAGE);
        if export {
            info = info.push_next(&mut external);
        }
        // SAFETY: valid create info; destroyed in Drop (or below on failure).
        let buffer =
            unsafe { device.raw().create_buffer(&info, None) }.context("vkCreateBuffer (shared buffer)")?;
        let mut this =
            Self { device, buffer, dedicated: Dedicated::NONE, size, desc: *desc, exportable: export };
        // SAFETY: `buffer` is live.
        let req = unsafe { this.device.raw().get_buffer_memory_requirements(buffer) };
        let dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        this.dedicated = allocate_dedicated(&this.device, req, dedicated, export, "shared buffer")?;
        // SAFETY: fresh memory of the required size and type, bound once at offset 0.
        unsafe { this.device.raw().bind_buffer_memory(buffer, this.dedicated.memory, 0) }
            .context("vkBindBufferMemory")?;
        Ok(this)
    }

    /// The buffer (it stays this `SharedBuffer`'s: destroyed when it drops).
    pub fn buffer(&self) -> vk::Buffer {
        self.buffer
    }

    /// `vkGetBufferMemoryRequirements().size`: what CUDA imports (at least [`SharedBuffer::size`]).
    pub fn allocation_size(&self) -> u64 {
        self.dedicated.size
    }

    /// The frame's bytes: row pitch × height.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The frame it holds.
    pub fn desc(&self) -> FrameDesc {
        self.desc
    }

    /// Whether the memory was allocated exportable.
    pub fn exportable(&self) -> bool {
        self.exportable
    }

    /// A new handle to the buffer's memory, with the allocation's size, for
    /// CUDA to import (see [`crate::platform`] for who owns it after the import).
    pub fn export(&self) -> Result<ExportedMemory> {
        export_dedicated(&self.device, self.dedicated, self.exportable, "shared buffer")
    }
}

impl Drop for SharedBuffer {
    fn drop(&mut self) {
        // The GPU is idle for this buffer (SharedFrames waits first); both objects are ours.
        // SAFETY: as above; the buffer before its memory.
        unsafe { self.device.raw().destroy_buffer(self.buffer, None) };
        if self.dedicated.memory != vk::DeviceMemory::null() {
            // SAFETY: as above; nothing is bound to the memory any more.
            unsafe { self.device.raw().free_memory(self.dedicated.memory, None) };
        }
    }
}
