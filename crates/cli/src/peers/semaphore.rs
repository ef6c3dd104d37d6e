//! An exportable binary semaphore. vkcuda's own hand-over uses timelines
//! only (so the core has none); this exists for the `binary` pattern
//! `vkcuda bench` compares with (cuda-samples' vulkanImageCUDA).

use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use ash::vk;

use vkcuda::platform::{self, Handle, SEMAPHORE_HANDLE};
use vkcuda::vk::device::Device;

/// One binary semaphore, exportable to CUDA.
///
/// Ownership and ordering: each wait consumes one signal, and a wait must be
/// submitted after the signal it consumes. Destroy CUDA's import first, and
/// this only once no queue or stream uses it.
pub struct BinarySemaphore {
    device: Arc<Device>,
    /// The semaphore.
    pub raw: vk::Semaphore,
    /// Its name, for errors.
    pub name: &'static str,
}

impl BinarySemaphore {
    /// Creates an unsignalled binary semaphore, exportable to CUDA.
    pub fn new(device: Arc<Device>, name: &'static str) -> Result<Self> {
        let mut export = vk::ExportSemaphoreCreateInfo::default().handle_types(SEMAPHORE_HANDLE);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut export);
        // SAFETY: valid create info chaining a local; destroyed in Drop.
        let raw = unsafe { device.raw().create_semaphore(&info, None) }
            .with_context(|| format!("vkCreateSemaphore (binary '{name}')"))?;
        Ok(Self { device, raw, name })
    }

    /// A new handle to the semaphore, for CUDA to import.
    pub fn export(&self) -> Result<Handle> {
        let Some(loader) = &self.device.semaphore_export() else {
            bail!("the device was created without semaphore export ('{}')", self.name);
        };
        Ok(platform::export_semaphore(loader, self.raw)?)
    }
}

impl Drop for BinarySemaphore {
    fn drop(&mut self) {
        // SAFETY: teardown waited for the queue; CUDA's import was destroyed first.
        unsafe { self.device.raw().destroy_semaphore(self.raw, None) };
    }
}
