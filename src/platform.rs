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
pub fn import_semaphore(loader: &SemaphoreExport, semaphore: vk::Semaphore, handle: Handle) -> Result<()> {
    let info = vk::ImportSemaphoreFdInfoKHR::default()
        .semaphore(semaphore)
        .handle_type(SEMAPHORE_HANDLE)
        .fd(handle.as_raw_fd());
    // SAFETY: `semaphore` is live and unused; `handle` is an exported semaphore descriptor.
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
