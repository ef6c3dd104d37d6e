//! The Vulkan side: instance, device (picked by CUDA's UUID, or the
//! integrator's, adopted), the exportable shared images and timeline
//! semaphores, and the barriers around every Vulkan use of them.

pub mod binary;
pub mod device;
pub mod frame;
pub mod instance;
pub mod memory;
pub mod shared_image;
pub mod timeline;

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

/// The longest any CPU wait on the GPU may take before it becomes an error
/// that names what was awaited (a hung producer must never hang the app).
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The format of the shared images: what CUDA's `surf2Dwrite(uchar4)` writes.
pub const SHARED_FORMAT: ash::vk::Format = ash::vk::Format::R8G8B8A8_UNORM;

/// Turns on the device features the interop needs: timeline semaphores and
/// synchronization2 (both core in Vulkan 1.3).
pub fn enable_required_features(
    v12: &mut ash::vk::PhysicalDeviceVulkan12Features<'_>,
    v13: &mut ash::vk::PhysicalDeviceVulkan13Features<'_>,
) {
    v12.timeline_semaphore = ash::vk::TRUE;
    v13.synchronization2 = ash::vk::TRUE;
}

/// A wait that gave up because the other side failed: the other side's
/// error is the cause, this is only its consequence.
#[derive(Debug)]
pub struct Cancelled(pub String);

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gave up waiting for {}: the other side failed", self.0)
    }
}

impl std::error::Error for Cancelled {}

/// Whether `e` only says a wait gave up because the other side failed.
pub fn cancelled(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Cancelled>())
}

/// How often a long wait checks whether it was cancelled.
const SLICE: Duration = Duration::from_millis(50);

/// Waits for `what` by calling `poll(slice)` (which blocks at most `slice`
/// and says whether the wait is over) until it is over, `cancelled()` says
/// the other side failed, or [`WAIT_TIMEOUT`] passes: a hung GPU becomes an
/// error that names what was awaited, never a hang.
pub fn bounded_wait(
    what: &dyn Fn() -> String,
    cancelled: &dyn Fn() -> bool,
    mut poll: impl FnMut(Duration) -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        if poll(SLICE)? {
            return Ok(());
        }
        if cancelled() {
            return Err(Cancelled(what()).into());
        }
        if Instant::now() >= deadline {
            bail!("timed out after {WAIT_TIMEOUT:?} waiting for {}", what());
        }
    }
}
