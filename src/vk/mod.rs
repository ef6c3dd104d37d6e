//! The Vulkan side: instance, device (picked by CUDA's UUID), the exportable
//! shared images and timeline semaphores, and the per-frame protocol.

pub mod device;
pub mod frame;
pub mod instance;
pub mod memory;
pub mod shared_image;
pub mod timeline;

use std::time::Duration;

/// The longest any CPU wait on the GPU may take before it becomes an error
/// that names what was awaited (a hung producer must never hang the app).
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The format of the shared images: what CUDA's `surf2Dwrite(uchar4)` writes.
pub const SHARED_FORMAT: ash::vk::Format = ash::vk::Format::R8G8B8A8_UNORM;
