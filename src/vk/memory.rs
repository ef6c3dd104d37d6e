//! Buffers that only Vulkan uses (served by gpu-allocator), the create info
//! of a 2D image, and the dedicated, exportable allocations of the shared frames.

use std::sync::Arc;

use crate::error::{Context as _, Error, Result};
use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use super::device::Device;

/// Allocates memory for a resource through gpu-allocator.
fn allocate(
    device: &Device,
    name: &str,
    requirements: vk::MemoryRequirements,
    location: MemoryLocation,
    linear: bool,
) -> Result<Allocation> {
    let desc = AllocationCreateDesc {
        name,
        requirements,
        location,
        linear,
        allocation_scheme: AllocationScheme::GpuAllocatorManaged,
    };
    device
        .allocator()
        .allocate(&desc)
        .with_context(|| format!("allocating {} bytes for {name}", requirements.size))
}

/// A dedicated allocation of one shared image or buffer, and its size in
/// bytes (what CUDA is told it imports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dedicated {
    /// The memory (its owner frees it).
    pub memory: vk::DeviceMemory,
    /// Its `allocationSize`.
    pub size: u64,
}

impl Dedicated {
    /// None yet: what an image or buffer holds until its memory is allocated.
    pub const NONE: Dedicated = Dedicated { memory: vk::DeviceMemory::null(), size: 0 };
}

/// Allocates dedicated device-local memory for the one image or buffer that
/// `dedicated` names, exportable as [`crate::platform::MEMORY_HANDLE`] when
/// `export` (CUDA imports it with `CUDA_EXTERNAL_MEMORY_DEDICATED`); the
/// caller binds it and frees it.
pub(crate) fn allocate_dedicated(
    device: &Device,
    req: vk::MemoryRequirements,
    mut dedicated: vk::MemoryDedicatedAllocateInfo<'_>,
    export: bool,
    what: &str,
) -> Result<Dedicated> {
    let type_index = device.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL)?;
    let mut export_info =
        vk::ExportMemoryAllocateInfo::default().handle_types(crate::platform::MEMORY_HANDLE);
    let mut alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(req.size)
        .memory_type_index(type_index)
        .push_next(&mut dedicated);
    if export {
        alloc = alloc.push_next(&mut export_info);
    }
    // SAFETY: valid allocate info chaining locals; the caller frees it.
    let memory = unsafe { device.raw().allocate_memory(&alloc, None) }
        .with_context(|| format!("vkAllocateMemory ({} bytes, {what})", req.size))?;
    Ok(Dedicated { memory, size: req.size })
}

/// A new handle to the `dedicated` memory that [`allocate_dedicated`] made
/// exportable (`exportable`), for CUDA to import
/// (see [`crate::platform`] for who owns it after the import); `what` names
/// it in the error.
pub(crate) fn export_dedicated(
    device: &Device,
    dedicated: Dedicated,
    exportable: bool,
    what: &str,
) -> Result<crate::platform::ExportedMemory> {
    match (device.memory_export(), exportable) {
        (Some(loader), true) => {
            let handle = crate::platform::export_memory(loader, dedicated.memory)?;
            Ok(crate::platform::ExportedMemory::new(handle, dedicated.size))
        }
        _ => Err(Error::unsupported(format!("this {what} was not allocated exportable"))),
    }
}

/// Create info for a 2D, single-level, OPTIMAL-tiled image starting in `UNDEFINED`.
pub fn image_info(
    format: vk::Format,
    extent: vk::Extent2D,
    usage: vk::ImageUsageFlags,
) -> vk::ImageCreateInfo<'static> {
    vk::ImageCreateInfo::default()
        .image_type(vk::ImageType::TYPE_2D)
        .format(format)
        .extent(vk::Extent3D { width: extent.width, height: extent.height, depth: 1 })
        .mip_levels(1)
        .array_layers(1)
        .samples(vk::SampleCountFlags::TYPE_1)
        .tiling(vk::ImageTiling::OPTIMAL)
        .usage(usage)
        .sharing_mode(vk::SharingMode::EXCLUSIVE)
        .initial_layout(vk::ImageLayout::UNDEFINED)
}

/// A buffer and its allocation (private: `Drop` frees them).
pub struct Buffer {
    device: Arc<Device>,
    raw: vk::Buffer,
    allocation: Option<Allocation>,
    size: u64,
}

impl Buffer {
    /// The buffer (it stays this `Buffer`'s: destroyed when it drops).
    pub fn raw(&self) -> vk::Buffer {
        self.raw
    }

    /// Size in bytes, as asked for (the allocation may be larger).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Creates a buffer of `size` bytes in `location` (host-visible ones stay mapped).
    pub fn new(
        device: Arc<Device>,
        name: &str,
        size: u64,
        usage: vk::BufferUsageFlags,
        location: MemoryLocation,
    ) -> Result<Self> {
        let info = vk::BufferCreateInfo::default().size(size).usage(usage);
        // SAFETY: valid create info; destroyed in Drop.
        let raw = unsafe { device.raw().create_buffer(&info, None) }
            .with_context(|| format!("vkCreateBuffer ({name})"))?;
        let mut this = Self { device, raw, allocation: None, size };
        // SAFETY: `raw` is live.
        let requirements = unsafe { this.device.raw().get_buffer_memory_requirements(raw) };
        let allocation = allocate(&this.device, name, requirements, location, true)?;
        // SAFETY: the allocation is live; its memory stays while `allocation` does.
        let memory = unsafe { allocation.memory() };
        // SAFETY: the allocation fits the requirements and is bound once.
        unsafe { this.device.raw().bind_buffer_memory(raw, memory, allocation.offset()) }?;
        this.allocation = Some(allocation);
        Ok(this)
    }

    /// `count` buffers named "`name` 0", "`name` 1", … of `bytes` each (one
    /// frame's, [`crate::FrameDesc::bytes`]: the staging and readback rings).
    pub fn frames(
        device: &Arc<Device>,
        name: &str,
        count: usize,
        bytes: u64,
        usage: vk::BufferUsageFlags,
        location: MemoryLocation,
    ) -> Result<Vec<Self>> {
        (0..count)
            .map(|i| Self::new(device.clone(), &format!("{name} {i}"), bytes, usage, location))
            .collect()
    }

    /// The mapped bytes of a host-visible buffer: exactly the `size` bytes
    /// asked for. The allocation may be larger (NVIDIA rounds a 1×1 RGBA8
    /// readback up to 16 bytes; lavapipe gives exactly what was asked), so its
    /// length is never a frame's byte count.
    ///
    /// The caller makes sure the GPU does not write them meanwhile (the frame
    /// plan and the timelines say when).
    pub fn mapped(&self) -> Result<&[u8]> {
        let slice = self
            .allocation
            .as_ref()
            .and_then(|a| a.mapped_slice())
            .ok_or_else(|| Error::unsupported("buffer is not host-visible"))?;
        slice.get(..self.size as usize).ok_or_else(|| {
            Error::unsupported(format!(
                "mapped allocation of {} bytes is smaller than the buffer's {}",
                slice.len(),
                self.size
            ))
        })
    }

    /// The mapped bytes of a host-visible buffer, to write (as [`Buffer::mapped`]:
    /// exactly the `size` bytes asked for). The caller makes sure the GPU
    /// does not use them meanwhile.
    pub fn mapped_mut(&mut self) -> Result<&mut [u8]> {
        let size = self.size as usize;
        let slice = self
            .allocation
            .as_mut()
            .and_then(|a| a.mapped_slice_mut())
            .ok_or_else(|| Error::unsupported("buffer is not host-visible"))?;
        let len = slice.len();
        slice.get_mut(..size).ok_or_else(|| {
            Error::unsupported(format!(
                "mapped allocation of {len} bytes is smaller than the buffer's {size}"
            ))
        })
    }

    /// The memory's properties (e.g. whether host reads are cached).
    pub fn memory_properties(&self) -> vk::MemoryPropertyFlags {
        self.allocation.as_ref().map_or(vk::MemoryPropertyFlags::empty(), |a| a.memory_properties())
    }

    /// A raw pointer to the mapped bytes, for a producer thread to write through.
    pub fn mapped_ptr(&self) -> Result<*mut u8> {
        self.allocation
            .as_ref()
            .and_then(|a| a.mapped_ptr())
            .map(|p| p.as_ptr().cast())
            .ok_or_else(|| Error::unsupported("buffer is not host-visible"))
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(a) = self.allocation.take() {
            self.device.allocator().free(a).ok();
        }
        // SAFETY: the GPU is done with the buffer (teardown waits first).
        unsafe { self.device.raw().destroy_buffer(self.raw, None) };
    }
}
