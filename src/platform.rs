//! The one platform seam: how exported Vulkan memory and timeline semaphores
//! travel to CUDA. Everything else in vkcuda is platform-neutral.
//!
//! Linux (this file): POSIX file descriptors. Vulkan exports `OPAQUE_FD`
//! handles (`VK_KHR_external_memory_fd`, `VK_KHR_external_semaphore_fd`);
//! CUDA imports them as `CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD` and
//! `CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD`, and **owns the
//! descriptor once an import succeeds** (it must not be closed after; on a
//! failed import the [`Handle`] still closes it).
//!
//! A Windows port replaces this module, keeping its item names:
//! - [`MEMORY_HANDLE`] / [`SEMAPHORE_HANDLE`]: `OPAQUE_WIN32` (memory) and
//!   `OPAQUE_WIN32` (timeline semaphore);
//! - [`MEMORY_EXTENSION`] / [`SEMAPHORE_EXTENSION`]:
//!   `VK_KHR_external_memory_win32` / `VK_KHR_external_semaphore_win32`, and
//!   the loaders `ash::khr::external_memory_win32::Device` /
//!   `ash::khr::external_semaphore_win32::Device`;
//! - [`Handle`]: `std::os::windows::io::OwnedHandle`, exported with
//!   `vkGetMemoryWin32HandleKHR` / `vkGetSemaphoreWin32HandleKHR`;
//! - [`cuda_memory_desc`] / [`cuda_semaphore_desc`]:
//!   `CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32` and
//!   `CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32`, with
//!   `handle.win32.handle`;
//! - [`imported`]: CUDA does **not** take ownership of a Win32 handle: close
//!   it (drop the `OwnedHandle`) after a successful import too.
//!
//! (Also on Windows: `VkExportMemoryWin32HandleInfoKHR` may set security
//! attributes; the defaults suit a single process.)

#[cfg(not(unix))]
compile_error!(
    "vkcuda's platform seam exists for Unix file descriptors only: a Windows port implements \
     src/platform.rs for Win32 handles (see the module documentation)"
);

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use crate::error::{Context as _, Result};
use ash::vk;
use cudarc::driver::sys;

/// An exported handle, owned until CUDA imports it.
pub type Handle = OwnedFd;

/// An exported handle to one dedicated allocation, with the allocation's
/// size: what CUDA imports ([`crate::cuda::external::ExternalImage::import`],
/// [`crate::cuda::external::ExternalBuffer::import`]). CUDA must be told the
/// allocation's exact size (`vkGet*MemoryRequirements().size`, not the
/// frame's w·h·bytes: tiling pads), and nothing in a file descriptor says it,
/// so the two travel together: vkcuda's shared frames make them
/// ([`crate::vk::shared_image::SharedImage::export`]), and a handle of the
/// caller's own comes in through the `unsafe` [`ExportedMemory::from_raw`].
#[derive(Debug)]
pub struct ExportedMemory {
    handle: Handle,
    size: u64,
}

impl ExportedMemory {
    /// A handle vkcuda exported from its own dedicated allocation of `size` bytes.
    pub(crate) fn new(handle: Handle, size: u64) -> Self {
        Self { handle, size }
    }

    /// A handle the caller exported.
    ///
    /// # Safety
    /// - `handle` is an export, as [`MEMORY_HANDLE`], of one dedicated
    ///   allocation (`VkMemoryDedicatedAllocateInfo`: CUDA imports it with
    ///   `CUDA_EXTERNAL_MEMORY_DEDICATED`) of a device CUDA can see;
    /// - `size` is that allocation's `allocationSize`, which for a resource
    ///   allocated as the spec asks is `vkGet*MemoryRequirements().size`
    ///   (CUDA maps what it is told exists: a larger size lets a kernel write
    ///   past the allocation);
    /// - the image or buffer bound to it holds what the import is told: for
    ///   an image, the `FrameDesc`'s format and extent, OPTIMAL tiling, one
    ///   level and layer; for a buffer, packed rows from offset 0.
    pub unsafe fn from_raw(handle: Handle, size: u64) -> Self {
        Self { handle, size }
    }

    /// The allocation's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The handle, and the allocation's size (to hand both to another
    /// process, which turns them back into one with [`ExportedMemory::from_raw`]).
    pub fn into_parts(self) -> (Handle, u64) {
        (self.handle, self.size)
    }
}

/// How shared image memory is exported.
pub const MEMORY_HANDLE: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
/// How timeline semaphores are exported.
pub const SEMAPHORE_HANDLE: vk::ExternalSemaphoreHandleTypeFlags =
    vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD;
/// The device extension that exports memory.
pub const MEMORY_EXTENSION: &std::ffi::CStr = ash::khr::external_memory_fd::NAME;
/// The device extension that exports semaphores.
pub const SEMAPHORE_EXTENSION: &std::ffi::CStr = ash::khr::external_semaphore_fd::NAME;

/// The memory-export entry points.
pub type MemoryExport = ash::khr::external_memory_fd::Device;
/// The semaphore-export entry points.
pub type SemaphoreExport = ash::khr::external_semaphore_fd::Device;

/// Exports `memory` (allocated with [`MEMORY_HANDLE`] exportable) as a new handle.
pub fn export_memory(loader: &MemoryExport, memory: vk::DeviceMemory) -> Result<Handle> {
    let info = vk::MemoryGetFdInfoKHR::default().memory(memory).handle_type(MEMORY_HANDLE);
    // SAFETY: the memory was allocated exportable with this handle type.
    let fd = unsafe { loader.get_memory_fd(&info) }.context("vkGetMemoryFdKHR")?;
    // SAFETY: vkGetMemoryFdKHR returns a new descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Exports `semaphore` (created with [`SEMAPHORE_HANDLE`] exportable) as a new handle.
pub fn export_semaphore(loader: &SemaphoreExport, semaphore: vk::Semaphore) -> Result<Handle> {
    let info = vk::SemaphoreGetFdInfoKHR::default().semaphore(semaphore).handle_type(SEMAPHORE_HANDLE);
    // SAFETY: the semaphore was created exportable with this handle type.
    let fd = unsafe { loader.get_semaphore_fd(&info) }.context("vkGetSemaphoreFdKHR")?;
    // SAFETY: vkGetSemaphoreFdKHR returns a new descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Imports `handle` (from [`export_semaphore`]) into `semaphore`, a new
/// timeline semaphore, which then shares the exported one's payload. Vulkan
/// owns the descriptor once the import succeeds (Windows:
/// `vkImportSemaphoreWin32HandleKHR`, which does not take the handle).
///
/// # Safety
/// - `semaphore` is a live timeline semaphore of the device `loader` was
///   made for (VUID-VkImportSemaphoreFdInfoKHR-semaphore-parameter);
/// - no queue command that uses `semaphore` is still pending
///   (VUID-vkImportSemaphoreFdKHR-semaphore-01142); a semaphore made just
///   for the import has none;
/// - `handle` was exported from a timeline semaphore of a device with the
///   same `deviceUUID` and driver (VUID-VkImportSemaphoreFdInfoKHR-handleType-03263).
pub unsafe fn import_semaphore(
    loader: &SemaphoreExport,
    semaphore: vk::Semaphore,
    handle: Handle,
) -> Result<()> {
    let info = vk::ImportSemaphoreFdInfoKHR::default()
        .semaphore(semaphore)
        .handle_type(SEMAPHORE_HANDLE)
        .fd(handle.as_raw_fd());
    // SAFETY: the caller's promises above; `info` names a descriptor we own.
    unsafe { loader.import_semaphore_fd(&info) }.context("vkImportSemaphoreFdKHR")?;
    let _ = handle.into_raw_fd();
    Ok(())
}

/// CUDA's description of `size` bytes of dedicated image memory behind `handle`.
pub fn cuda_memory_desc(handle: &Handle, size: u64) -> sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
    sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
        type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
        handle: sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1 { fd: handle.as_raw_fd() },
        size,
        // The Vulkan memory is a dedicated allocation for one image.
        flags: sys::CUDA_EXTERNAL_MEMORY_DEDICATED,
        reserved: [0; 16],
    }
}

/// CUDA's description of the semaphore behind `handle`: a timeline, or (for
/// the binary-semaphore hand-over the bench compares with) a binary one,
/// `CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD` (Windows: `OPAQUE_WIN32`).
pub fn cuda_semaphore_desc(handle: &Handle, timeline: bool) -> sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
    use sys::CUexternalSemaphoreHandleType as T;
    sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
        type_: match timeline {
            true => T::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
            false => T::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD,
        },
        handle: sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st__bindgen_ty_1 { fd: handle.as_raw_fd() },
        flags: 0,
        reserved: [0; 16],
    }
}

/// After a successful import: CUDA owns a file descriptor, so forget it.
pub fn imported(handle: Handle) {
    let _ = handle.into_raw_fd();
}
